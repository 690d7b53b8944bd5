"""Sans-IO framing of Kafka's size-prefixed frames.

On the wire every request and response is ``int32 size`` followed by ``size`` bytes. The decoder
turns a byte stream into frame bodies; the encoder side only needs the 4-byte prefix, so responses
can go out as ``[frame_header(n), *pieces]`` through ``writelines`` without being joined.

Copies are what cost CPU on this path (see DESIGN.md, "The network layer decides throughput"), so
:class:`FrameDecoder` is built around them:

* Zero-copy mode, for ``asyncio.BufferedProtocol``: :meth:`FrameDecoder.get_buffer` hands the event
  loop a region to ``recv_into`` and :meth:`FrameDecoder.buffer_updated` parses what arrived. Small
  frames land in a fixed staging buffer and are copied out once each. As soon as the size prefix of
  a frame that does not fit (or is at least 16 KiB) is known, the decoder allocates one buffer of
  exactly that size, moves the part already received into it, and from then on hands out the rest
  of that buffer, so the socket writes the remaining bytes straight into the frame's final home.
* :meth:`FrameDecoder.feed` for callers that already hold bytes (stream readers, tests): each frame
  body is copied out of the input exactly once. Only a partial header or a partial small frame at
  the end of a chunk is parked in the staging buffer until the next chunk completes it.

The staging buffer never changes size, because the event loop may still hold a view of it while
``buffer_updated`` runs and a ``bytearray`` with live views cannot be resized. It is compacted by
moving the (small) partial frame to its front instead.

Every frame is returned once, as a writable ``memoryview`` over a ``bytearray`` that the caller owns
exclusively: the broker stamps base offsets into produce batches in place, and nothing in the
decoder touches a frame after handing it out.

A size prefix that is negative or above ``max_frame_size`` (Kafka's ``socket.request.max.bytes``)
raises :class:`~protocol.errors.FrameTooLargeError` before anything is allocated for the frame; the
decoder stays failed afterwards (the connection is to be closed, as Kafka does), but frames that
were complete before the bad prefix can still be taken with :meth:`FrameDecoder.next_frame`.
"""

from __future__ import annotations

import struct
from collections import deque
from collections.abc import Iterator

from protocol.errors import EncodeError, FrameTooLargeError

SIZE_PREFIX_LENGTH = 4
"""Bytes of the int32 size prefix in front of every frame."""

DEFAULT_MAX_FRAME_SIZE = 104_857_600
"""Kafka's default ``socket.request.max.bytes`` (100 MiB)."""

MAX_FRAME_LENGTH = 2**31 - 1
"""The largest length an int32 prefix can express."""

DEFAULT_READ_BUFFER_SIZE = 65_536
"""Staging buffer per decoder: one socket read's worth of small frames."""

MIN_READ_BUFFER_SIZE = 16

GROWTH_START = 2 * 1024 * 1024
"""The first buffer of a large frame is this big (or the frame's size, if smaller) and doubles as
the frame's bytes arrive: memory follows what a peer sent, not what its size prefix claims
(20 connections that send only a 100 MiB prefix hold 40 MiB, not 2 GiB)."""

OWN_BUFFER_THRESHOLD = 16_384
"""An incomplete frame at least this large gets a buffer of its own instead of waiting in staging.

Below it, waiting in staging and copying out once is cheaper than an extra allocation; above it,
reading straight into the final buffer saves the copy-out and the compaction moves.
"""

_SIZE = struct.Struct(">i")
_pack_size = _SIZE.pack
_unpack_size_from = _SIZE.unpack_from


def frame_header(length: int) -> bytes:
    """The 4-byte big-endian size prefix for a frame body of ``length`` bytes."""
    if not 0 <= length <= MAX_FRAME_LENGTH:
        raise EncodeError(f"frame length {length} does not fit a non-negative int32")
    return _pack_size(length)


def encode_frame(payload: bytes | bytearray | memoryview) -> bytes:
    """``payload`` with its size prefix, as one ``bytes`` (one copy of the payload).

    For large payloads prefer sending ``frame_header(len)`` and the payload as separate buffers.
    """
    view = memoryview(payload)
    return b"".join((frame_header(view.nbytes), view))


class FrameDecoder:
    """Splits a byte stream into Kafka frame bodies (without their size prefix).

    Use either :meth:`feed` or the :meth:`get_buffer` / :meth:`buffer_updated` pair on one decoder,
    then drain complete frames with :meth:`next_frame` or :meth:`frames`.
    """

    __slots__ = (
        "_capacity",
        "_error",
        "_filled",
        "_first_buffer",
        "_frame",
        "_frame_size",
        "_max_frame_size",
        "_own_buffer_at",
        "_ready",
        "_ready_bytes",
        "_staged",
        "_staging",
    )

    def __init__(
        self,
        max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
        read_buffer_size: int = DEFAULT_READ_BUFFER_SIZE,
        *,
        grow: bool = True,
    ) -> None:
        """``grow`` False allocates a large frame's whole buffer at its prefix (no copies as it
        grows): for a trusted peer's responses only, never for what a server reads from clients."""
        if not 0 <= max_frame_size <= MAX_FRAME_LENGTH:
            raise ValueError(f"max_frame_size must be within [0, {MAX_FRAME_LENGTH}], got {max_frame_size}")
        if read_buffer_size < MIN_READ_BUFFER_SIZE:
            raise ValueError(
                f"read_buffer_size must be at least {MIN_READ_BUFFER_SIZE}, got {read_buffer_size}"
            )
        self._max_frame_size = max_frame_size
        self._capacity = read_buffer_size
        self._first_buffer = GROWTH_START if grow else MAX_FRAME_LENGTH
        # Only an incomplete frame smaller than this waits in staging; with its prefix it is at
        # most capacity - 1 bytes, so get_buffer() never has to return an empty region.
        self._own_buffer_at = min(OWN_BUFFER_THRESHOLD, read_buffer_size - SIZE_PREFIX_LENGTH)
        # Fixed-size staging area, allocated on first use; holds at most one partial header or
        # partial small frame, always at its start, between calls.
        self._staging: memoryview | None = None
        self._staged = 0
        # Body of the large frame being received (grown as its bytes arrive), its declared size,
        # and how much of it has arrived.
        self._frame: memoryview | None = None
        self._frame_size = 0
        self._filled = 0
        self._ready: deque[memoryview] = deque()
        self._ready_bytes = 0
        self._error: FrameTooLargeError | None = None

    # ----------------------------------------------------------------------------- properties

    @property
    def max_frame_size(self) -> int:
        """The largest frame body accepted (``socket.request.max.bytes``)."""
        return self._max_frame_size

    @max_frame_size.setter
    def max_frame_size(self, value: int) -> None:
        """Change the bound for frames not yet started (a SASL connection's bound rises once it
        has authenticated)."""
        if not 0 <= value <= MAX_FRAME_LENGTH:
            raise ValueError(f"max_frame_size must be within [0, {MAX_FRAME_LENGTH}], got {value}")
        self._max_frame_size = value

    @property
    def buffered(self) -> int:
        """Bytes received (prefixes included) that have not been returned as frames yet."""
        in_progress = SIZE_PREFIX_LENGTH + self._filled if self._frame is not None else 0
        return self._ready_bytes + self._staged + in_progress

    @property
    def in_progress(self) -> int:
        """Bytes held for the frame being received, 0 at a frame boundary.

        While a large frame arrives this is its own buffer's length (what the decoder pins for it,
        however little has arrived yet), else the partial header or small frame waiting in staging.
        The broker's request memory pool (``queued.max.request.bytes``) accounts a partial frame by
        this, and its receive timeout runs while it is not 0.
        """
        return len(self._frame) if self._frame is not None else self._staged

    @property
    def allocated(self) -> int:
        """Bytes of buffers the decoder itself holds: staging plus a large frame in progress.

        Completed frames waiting in the queue are not counted; they belong to the caller.
        """
        staging = self._capacity if self._staging is not None else 0
        return staging + (len(self._frame) if self._frame is not None else 0)

    # ----------------------------------------------------------------------------- draining

    def next_frame(self) -> memoryview | None:
        """The next complete frame body, or None until more bytes arrive."""
        ready = self._ready
        if not ready:
            return None
        frame = ready.popleft()
        self._ready_bytes -= SIZE_PREFIX_LENGTH + len(frame)
        return frame

    def frames(self) -> Iterator[memoryview]:
        """Every complete frame body, in order, each handed out once."""
        ready = self._ready
        while ready:
            frame = ready.popleft()
            self._ready_bytes -= SIZE_PREFIX_LENGTH + len(frame)
            yield frame

    # ----------------------------------------------------------------------------- feed mode

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        """Take bytes from the stream; complete frames become available to :meth:`next_frame`.

        Raises FrameTooLargeError on an invalid size prefix (frames before it stay available).
        """
        if self._error is not None:
            raise self._error
        view = memoryview(data)
        if view.format != "B" or view.ndim != 1:
            view = view.cast("B")
        while view:
            if self._frame is not None:
                filled = self._filled
                n = min(self._frame_size - filled, len(view))
                frame = self._room_for(filled + n)
                frame[filled : filled + n] = view[:n]
                view = view[n:]
                filled += n
                self._filled = filled
                if filled == self._frame_size:
                    self._finish_frame(frame)
                continue
            staged = self._staged
            if staged == 0:
                consumed = self._parse(view, 0, len(view))
                view = view[consumed:]
                if view and self._frame is None:
                    self._stage(view)
                    return
                continue
            n = min(self._staging_wants(), len(view))
            staging = self._staging
            assert staging is not None
            staging[staged : staged + n] = view[:n]
            view = view[n:]
            self._staging_updated(staged + n)

    # ----------------------------------------------------------------------------- zero-copy mode

    def get_buffer(self, sizehint: int = -1) -> memoryview:
        """A writable region for the next socket read, as ``BufferedProtocol.get_buffer``.

        While a large frame is arriving this is the unfilled rest of that frame's own buffer;
        otherwise the free part of the staging buffer. ``sizehint`` is ignored: the region is sized
        by what the stream needs next, never by the hint.
        """
        if self._error is not None:
            raise self._error
        if self._frame is not None:
            filled = self._filled
            return self._room_for(filled + 1)[filled:]
        staging = self._staging
        if staging is None:
            staging = self._staging = memoryview(bytearray(self._capacity))
        return staging[self._staged :]

    def buffer_updated(self, nbytes: int) -> None:
        """Account for ``nbytes`` written into the region from the last :meth:`get_buffer`.

        Raises FrameTooLargeError on an invalid size prefix (frames before it stay available).
        """
        if self._error is not None:
            raise self._error
        frame = self._frame
        if frame is not None:
            filled = self._filled + nbytes
            if nbytes < 0 or filled > len(frame):
                raise ValueError(f"buffer_updated({nbytes}) exceeds the buffer handed out")
            self._filled = filled
            if filled == self._frame_size:
                self._finish_frame(frame)
            return
        end = self._staged + nbytes
        if nbytes < 0 or self._staging is None or end > self._capacity:
            raise ValueError(f"buffer_updated({nbytes}) exceeds the buffer handed out")
        self._staging_updated(end)

    # ----------------------------------------------------------------------------- internals

    def _parse(self, view: memoryview, pos: int, end: int) -> int:
        """Queue the complete frames in ``view[pos:end]``; return where parsing stopped.

        An incomplete frame at the end that deserves its own buffer is moved into one (and counts
        as consumed); a partial header or partial small frame is left for the caller to stage.
        """
        ready = self._ready
        max_size = self._max_frame_size
        while end - pos >= SIZE_PREFIX_LENGTH:
            size = _unpack_size_from(view, pos)[0]
            if size < 0 or size > max_size:
                self._fail(size)
            start = pos + SIZE_PREFIX_LENGTH
            stop = start + size
            if stop <= end:
                ready.append(memoryview(bytearray(view[start:stop])))
                self._ready_bytes += SIZE_PREFIX_LENGTH + size
                pos = stop
                continue
            if size >= self._own_buffer_at:
                # Only now, with the size checked, is memory committed for the frame, and only as
                # much as has arrived (at least GROWTH_START): a size prefix alone pins no memory.
                have = end - start
                frame = memoryview(bytearray(min(size, max(have, self._first_buffer))))
                frame[:have] = view[start:end]
                self._frame = frame
                self._frame_size = size
                self._filled = have
                return end
            break
        return pos

    def _room_for(self, needed: int) -> memoryview:
        """The frame's buffer, doubled (never past the frame's size) until ``needed`` bytes fit;
        a new buffer each time, so a view the event loop still holds of the old one is harmless."""
        frame = self._frame
        assert frame is not None
        if needed <= len(frame):
            return frame
        capacity = len(frame)
        while capacity < needed:
            capacity *= 2
        grown = memoryview(bytearray(min(capacity, self._frame_size)))
        grown[: self._filled] = frame[: self._filled]
        self._frame = grown
        return grown

    def _staging_updated(self, end: int) -> None:
        """Parse staging's first ``end`` bytes, then move what is left to its front."""
        staging = self._staging
        assert staging is not None
        pos = self._parse(staging, 0, end)
        remaining = end - pos
        if remaining and pos:
            staging[:remaining] = staging[pos:end]
        self._staged = remaining

    def _stage(self, rest: memoryview) -> None:
        """Park a partial header or partial small frame (shorter than staging) until more arrives."""
        staging = self._staging
        if staging is None:
            staging = self._staging = memoryview(bytearray(self._capacity))
        n = len(rest)
        staging[:n] = rest
        self._staged = n

    def _staging_wants(self) -> int:
        """How many more bytes staging needs to parse its partial header or complete its frame."""
        staged = self._staged
        if staged < SIZE_PREFIX_LENGTH:
            return SIZE_PREFIX_LENGTH - staged
        staging = self._staging
        assert staging is not None
        size: int = _unpack_size_from(staging, 0)[0]
        return SIZE_PREFIX_LENGTH + size - staged

    def _finish_frame(self, frame: memoryview) -> None:
        self._ready.append(frame)
        self._ready_bytes += SIZE_PREFIX_LENGTH + len(frame)
        self._frame = None
        self._frame_size = 0
        self._filled = 0

    def _fail(self, size: int) -> None:
        if size < 0:
            reason = f"invalid frame size {size} (negative)"
        else:
            reason = f"frame size {size} is larger than the maximum {self._max_frame_size}"
        self._error = FrameTooLargeError(reason)
        raise self._error
