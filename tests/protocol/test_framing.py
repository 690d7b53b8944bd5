"""FrameDecoder in both modes, the size-prefix checks, and the no-extra-copy guarantees."""

from __future__ import annotations

import struct
import tracemalloc
from array import array
from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.errors import EncodeError, FrameTooLargeError
from protocol.framing import (
    DEFAULT_MAX_FRAME_SIZE,
    DEFAULT_READ_BUFFER_SIZE,
    GROWTH_START,
    FrameDecoder,
    encode_frame,
    frame_header,
)

_PATTERN = bytes(range(256)) * 600


def payload(size: int, seed: int = 0) -> bytes:
    """Deterministic, non-uniform bytes (so misplaced slices show up)."""
    if size + seed <= len(_PATTERN):
        return _PATTERN[seed : seed + size]
    return (_PATTERN * (size // len(_PATTERN) + 2))[seed : seed + size]


def stream_of(payloads: Sequence[bytes]) -> bytes:
    return b"".join(encode_frame(p) for p in payloads)


def decode_by_feed(decoder: FrameDecoder, stream: bytes, chunk_sizes: Sequence[int]) -> list[bytes]:
    """Feed ``stream`` in chunks of the given sizes (cycled), draining after every chunk."""
    out: list[bytes] = []
    pos = 0
    i = 0
    while pos < len(stream):
        size = chunk_sizes[i % len(chunk_sizes)] if chunk_sizes else len(stream)
        i += 1
        decoder.feed(stream[pos : pos + size])
        pos += size
        out.extend(bytes(frame) for frame in decoder.frames())
    return out


def decode_by_buffer(decoder: FrameDecoder, stream: bytes, read_sizes: Sequence[int]) -> list[bytes]:
    """Simulate BufferedProtocol: recv_into(get_buffer()) returns at most the next read size."""
    out: list[bytes] = []
    pos = 0
    i = 0
    while pos < len(stream):
        buffer = decoder.get_buffer(-1)
        assert len(buffer) > 0
        limit = read_sizes[i % len(read_sizes)] if read_sizes else len(stream)
        i += 1
        n = min(len(buffer), limit, len(stream) - pos)
        buffer[:n] = stream[pos : pos + n]
        pos += n
        decoder.buffer_updated(n)
        while (frame := decoder.next_frame()) is not None:
            out.append(bytes(frame))
    return out


payloads_strategy = st.lists(
    st.one_of(
        st.binary(max_size=40),
        st.builds(payload, st.integers(0, 70_000), st.integers(0, 255)),
    ),
    max_size=12,
)
read_buffer_sizes = st.sampled_from([16, 17, 100, 4096, DEFAULT_READ_BUFFER_SIZE])


# ----------------------------------------------------------------------------- encoding


def test_frame_header_is_a_big_endian_int32() -> None:
    assert frame_header(0) == b"\x00\x00\x00\x00"
    assert frame_header(258) == b"\x00\x00\x01\x02"
    assert frame_header(2**31 - 1) == b"\x7f\xff\xff\xff"


@pytest.mark.parametrize("length", [-1, 2**31])
def test_frame_header_rejects_lengths_outside_int32(length: int) -> None:
    with pytest.raises(EncodeError):
        frame_header(length)


def test_encode_frame_accepts_any_bytes_like() -> None:
    for body in (b"abc", bytearray(b"abc"), memoryview(b"xabcx")[1:4]):
        assert encode_frame(body) == b"\x00\x00\x00\x03abc"
    assert encode_frame(b"") == b"\x00\x00\x00\x00"


# ----------------------------------------------------------------------------- feed mode


def test_feeding_byte_by_byte() -> None:
    payloads = [b"", b"a", payload(300), b"", payload(20_000, 7), b"tail"]
    decoder = FrameDecoder(read_buffer_size=64)
    assert decode_by_feed(decoder, stream_of(payloads), [1]) == payloads
    assert decoder.buffered == 0


@settings(max_examples=150, deadline=None)
@given(payloads=payloads_strategy, chunks=st.lists(st.integers(1, 9000), max_size=8), cap=read_buffer_sizes)
def test_feed_in_random_chunks(payloads: list[bytes], chunks: list[int], cap: int) -> None:
    decoder = FrameDecoder(read_buffer_size=cap)
    assert decode_by_feed(decoder, stream_of(payloads), chunks) == payloads
    assert decoder.buffered == 0
    assert decoder.next_frame() is None


@settings(max_examples=50, deadline=None)
@given(payloads=payloads_strategy, chunks=st.lists(st.integers(1, 9000), min_size=1, max_size=8))
def test_feed_accepts_bytearray_and_memoryview(payloads: list[bytes], chunks: list[int]) -> None:
    stream = stream_of(payloads)
    decoder = FrameDecoder(read_buffer_size=32)
    out: list[bytes] = []
    pos = 0
    i = 0
    while pos < len(stream):
        size = chunks[i % len(chunks)]
        chunk = bytearray(stream[pos : pos + size])
        decoder.feed(chunk if i % 2 else memoryview(chunk))
        chunk[:] = b"\xff" * len(chunk)  # the caller reuses its buffer: frames must not alias it
        pos += size
        i += 1
        out.extend(bytes(frame) for frame in decoder.frames())
    assert out == payloads


def test_many_frames_in_one_chunk() -> None:
    payloads = [payload(i % 97, i % 13) for i in range(10_000)]
    decoder = FrameDecoder()
    decoder.feed(stream_of(payloads))
    assert decoder.buffered == sum(4 + len(p) for p in payloads)
    assert [bytes(f) for f in decoder.frames()] == payloads
    assert decoder.buffered == 0


def test_empty_frames() -> None:
    decoder = FrameDecoder()
    decoder.feed(b"")
    assert decoder.next_frame() is None
    decoder.feed(b"\x00\x00\x00\x00" * 5 + b"\x00\x00")
    frames = list(decoder.frames())
    assert [len(f) for f in frames] == [0] * 5
    assert decoder.buffered == 2
    decoder.feed(b"\x00\x00")
    assert decoder.next_frame() == b""
    assert decoder.next_frame() is None


def test_feed_accepts_non_byte_memoryviews() -> None:
    words = array("H", [0, 4, 0x0102, 0x0304])  # native-endian; compare against its raw bytes
    decoder = FrameDecoder()
    raw = words.tobytes()
    decoder.feed(struct.pack(">i", 8))
    decoder.feed(memoryview(words))
    assert decoder.next_frame() == raw


def test_buffered_counts_prefixes_and_partial_frames() -> None:
    decoder = FrameDecoder(read_buffer_size=64)
    decoder.feed(b"\x00\x00")
    assert decoder.buffered == 2
    decoder.feed(b"\x00\x05ab")
    assert decoder.buffered == 6
    decoder.feed(b"cde")
    assert decoder.buffered == 9
    assert decoder.next_frame() == b"abcde"
    assert decoder.buffered == 0
    decoder.feed(frame_header(1000) + payload(10))  # large: gets its own buffer
    assert decoder.buffered == 14
    assert decoder.allocated == 64 + 1000


def test_frames_are_writable_and_independent() -> None:
    decoder = FrameDecoder(read_buffer_size=16)
    decoder.feed(stream_of([b"one", b"two", payload(100)]))
    first, second, third = decoder.frames()
    first[0] = ord("O")
    decoder.feed(stream_of([b"xyz"]))  # staging is reused; earlier frames must not change
    assert bytes(first) == b"One"
    assert bytes(second) == b"two"
    assert bytes(third) == payload(100)
    assert decoder.next_frame() == b"xyz"
    assert not first.readonly and not third.readonly


# ----------------------------------------------------------------------------- zero-copy mode


@settings(max_examples=150, deadline=None)
@given(payloads=payloads_strategy, reads=st.lists(st.integers(1, 9000), max_size=8), cap=read_buffer_sizes)
def test_get_buffer_path_with_split_reads(payloads: list[bytes], reads: list[int], cap: int) -> None:
    decoder = FrameDecoder(read_buffer_size=cap)
    assert decode_by_buffer(decoder, stream_of(payloads), reads) == payloads
    assert decoder.buffered == 0


def test_large_frame_is_read_straight_into_its_own_buffer() -> None:
    body = payload(200_000, 3)
    stream = encode_frame(b"small") + encode_frame(body) + encode_frame(b"after")
    decoder = FrameDecoder(read_buffer_size=1024)

    first = decoder.get_buffer(-1)
    assert len(first) == 1024
    first[:1024] = stream[:1024]  # small frame, the big frame's prefix and the start of its body
    decoder.buffer_updated(1024)
    assert decoder.next_frame() == b"small"

    already = 1024 - (4 + 5) - 4
    target = decoder.get_buffer(-1)
    assert len(target) == len(body) - already  # exactly the rest of the frame, nothing more
    owner = target.obj
    pos = 1024
    big_end = 4 + 5 + 4 + len(body)
    while pos < big_end:
        target = decoder.get_buffer(-1)
        assert target.obj is owner
        n = min(len(target), 65_536)
        target[:n] = stream[pos : pos + n]
        pos += n
        decoder.buffer_updated(n)
    frame = decoder.next_frame()
    assert frame is not None
    assert frame.obj is owner  # the socket wrote into the buffer the caller now holds: no copy-out
    assert frame == body

    tail = decoder.get_buffer(-1)
    tail[: len(stream) - pos] = stream[pos:]
    decoder.buffer_updated(len(stream) - pos)
    assert decoder.next_frame() == b"after"
    assert decoder.allocated == 1024


def test_feed_copies_a_large_frame_once_into_its_own_buffer() -> None:
    body = payload(100_000)
    decoder = FrameDecoder(read_buffer_size=64)
    decoder.feed(frame_header(len(body)) + body[:10])
    assert decoder.allocated == len(body)  # allocated once the prefix was known; no staging needed
    target = decoder.get_buffer(-1)
    decoder.feed(body[10:])
    frame = decoder.next_frame()
    assert frame == body and frame is not None
    assert frame.obj is target.obj


def test_buffer_updated_rejects_more_than_was_handed_out() -> None:
    decoder = FrameDecoder(read_buffer_size=16)
    buffer = decoder.get_buffer(-1)
    with pytest.raises(ValueError):
        decoder.buffer_updated(len(buffer) + 1)
    decoder.buffer_updated(0)
    decoder.feed(frame_header(100))
    with pytest.raises(ValueError):
        decoder.buffer_updated(101)


# ----------------------------------------------------------------------------- size limits


def test_exact_max_size_is_accepted_and_one_more_is_rejected() -> None:
    decoder = FrameDecoder(max_frame_size=1000)
    decoder.feed(encode_frame(payload(1000)))
    assert decoder.next_frame() == payload(1000)
    with pytest.raises(FrameTooLargeError):
        decoder.feed(frame_header(1001))


def test_default_max_size_frame_is_accepted() -> None:
    decoder = FrameDecoder()
    assert decoder.max_frame_size == DEFAULT_MAX_FRAME_SIZE == 104_857_600
    buffer = decoder.get_buffer(-1)
    buffer[:4] = frame_header(DEFAULT_MAX_FRAME_SIZE)
    decoder.buffer_updated(4)
    received = 0
    while received < DEFAULT_MAX_FRAME_SIZE:
        target = decoder.get_buffer(-1)  # grows as the frame's bytes arrive
        n = len(target)
        if received + n == DEFAULT_MAX_FRAME_SIZE:
            target[-3:] = b"end"
        del target
        decoder.buffer_updated(n)
        received += n
    frame = decoder.next_frame()
    assert frame is not None
    assert len(frame) == DEFAULT_MAX_FRAME_SIZE and frame[-3:] == b"end"


def test_a_size_prefix_alone_pins_no_more_than_the_first_growth_step() -> None:
    """A peer that sends only a 100 MiB size prefix (or trickles its body) holds memory in
    proportion to what it sent, not to what it claims: the frame's buffer starts at
    GROWTH_START and doubles as bytes arrive."""
    decoder = FrameDecoder()
    decoder.feed(frame_header(DEFAULT_MAX_FRAME_SIZE))
    assert decoder.allocated <= DEFAULT_READ_BUFFER_SIZE + GROWTH_START
    decoder.feed(bytes(3 * GROWTH_START))
    assert decoder.allocated <= DEFAULT_READ_BUFFER_SIZE + 4 * GROWTH_START
    decoder.feed(bytes(DEFAULT_MAX_FRAME_SIZE - 3 * GROWTH_START))
    frame = decoder.next_frame()
    assert frame is not None and len(frame) == DEFAULT_MAX_FRAME_SIZE


@pytest.mark.parametrize("claimed", [DEFAULT_MAX_FRAME_SIZE + 1, 2**31 - 1, -1, -(2**31)])
def test_bad_size_is_rejected_before_allocating(claimed: int) -> None:
    body = bytes(1 << 20)  # a sender that follows its bogus prefix with real data
    chunk = struct.pack(">i", claimed) + body
    decoder = FrameDecoder()
    tracemalloc.start()
    try:
        with pytest.raises(FrameTooLargeError):
            decoder.feed(chunk)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 256 * 1024
    assert decoder.allocated <= DEFAULT_READ_BUFFER_SIZE
    assert decoder.buffered == 0


@pytest.mark.parametrize("claimed", [DEFAULT_MAX_FRAME_SIZE + 1, -1])
def test_bad_size_via_get_buffer_does_not_grow_anything(claimed: int) -> None:
    decoder = FrameDecoder(read_buffer_size=4096)
    buffer = decoder.get_buffer(-1)
    buffer[:4] = struct.pack(">i", claimed)
    with pytest.raises(FrameTooLargeError):
        decoder.buffer_updated(4)
    assert decoder.allocated == 4096


def test_decoder_stays_failed_but_keeps_frames_before_the_bad_prefix() -> None:
    decoder = FrameDecoder(max_frame_size=10)
    with pytest.raises(FrameTooLargeError):
        decoder.feed(encode_frame(b"ok") + encode_frame(b"too long body"))
    assert decoder.next_frame() == b"ok"
    assert decoder.next_frame() is None
    with pytest.raises(FrameTooLargeError):
        decoder.feed(encode_frame(b"x"))
    with pytest.raises(FrameTooLargeError):
        decoder.get_buffer(-1)
    with pytest.raises(FrameTooLargeError):
        decoder.buffer_updated(1)


def test_split_bad_prefix_is_rejected_when_complete() -> None:
    decoder = FrameDecoder(max_frame_size=10)
    decoder.feed(b"\x00\x00")
    decoder.feed(b"\x00")
    with pytest.raises(FrameTooLargeError):
        decoder.feed(b"\x0b")


@pytest.mark.parametrize(
    ("kwargs"),
    [{"max_frame_size": -1}, {"max_frame_size": 2**31}, {"read_buffer_size": 15}],
)
def test_constructor_validates_limits(kwargs: dict[str, int]) -> None:
    with pytest.raises(ValueError):
        FrameDecoder(**kwargs)
