"""Record batch compression codecs, with the framings Kafka clients actually write.

A compressed v2 batch carries its record stream (everything after RecordsCount) as one opaque
compressed blob; the codec id sits in attribute bits 0-2. The broker never needs this module on
its hot paths: it is for building batches (clients, tools, tests) and for reading records.

Decompression is the one place where a few bytes from the network can turn into gigabytes, so
:func:`decompress` takes a hard ``max_size`` and every codec is driven incrementally: output is
never allowed to grow past ``max_size`` plus a small codec-dependent constant (under 1 MiB, plus a
zstd window capped by ``max_size``), and anything the codec library rejects surfaces as
:class:`~protocol.errors.CorruptRecordError`.

Framings, matching the Java client:

* gzip: RFC 1952 members (Java's ``GZIPOutputStream``); concatenated members are accepted.
* snappy: the xerial block framing (magic ``\\x82SNAPPY\\x00``, int32 version, int32 compat, then
  int32-length-prefixed raw snappy blocks of at most 32 KiB input each). Some producers send a
  bare raw snappy block instead, so decompression accepts both, as xerial's reader does.
* lz4: the LZ4 frame format with independent 64 KiB blocks and no content size, as Kafka's
  ``KafkaLZ4BlockOutputStream`` writes since 0.10.
* zstd: standard zstd frames; frames without a content size (streaming writers such as zstd-jni)
  are decoded incrementally, and concatenated frames are accepted.
"""

from __future__ import annotations

import enum
import gzip
import struct
import zlib
from collections.abc import Callable

import cramjam
import lz4.frame
import zstandard

from protocol.errors import CorruptRecordError, EncodeError

Buffer = bytes | bytearray | memoryview


class CompressionType(enum.IntEnum):
    """Codec ids of attribute bits 0-2, named as in Kafka's ``compression.type``."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4

    @classmethod
    def from_name(cls, name: str) -> CompressionType:
        """Parse a ``compression.type`` value such as ``"gzip"`` (``"uncompressed"`` means NONE).

        ``"producer"`` is a topic-level policy, not a codec, so it is rejected like any unknown name.
        Raises ``ValueError``, as configuration parsing expects.
        """
        normalized = name.strip().upper()
        if normalized == "UNCOMPRESSED":
            return cls.NONE
        try:
            return cls[normalized]
        except KeyError:
            known = ", ".join(member.name.lower() for member in cls)
            raise ValueError(f"unknown compression type {name!r}; expected one of {known}") from None


# ---------------------------------------------------------------------------------------------
# Errors from the codec libraries; anything in this family is reported as a corrupt batch.
_CODEC_ERRORS: tuple[type[BaseException], ...] = (
    zlib.error,
    zstandard.ZstdError,
    cramjam.DecompressionError,
    RuntimeError,  # lz4.frame reports malformed frames as RuntimeError
    ValueError,
    EOFError,
    OSError,
    OverflowError,
)

_GZIP_LEVEL = 6
"""Java's ``GZIPOutputStream`` default (``Deflater.DEFAULT_COMPRESSION``)."""
# Kafka's ``compression.<codec>.level`` keys: their defaults and ranges, declared once here (the
# broker's config definitions and the partition LogConfig take them from these).
GZIP_DEFAULT_LEVEL = -1
"""zlib's default level (``Deflater.DEFAULT_COMPRESSION``); otherwise 1 to :data:`GZIP_MAX_LEVEL`."""
GZIP_MIN_LEVEL, GZIP_MAX_LEVEL = 1, 9
LZ4_DEFAULT_LEVEL = 9
"""The one level Kafka compresses with lz4's fast mode; the others select LZ4 HC."""
LZ4_MIN_LEVEL, LZ4_MAX_LEVEL = 1, 17
ZSTD_DEFAULT_LEVEL = 3
"""Also the Java client's level when none is given."""
ZSTD_MIN_LEVEL, ZSTD_MAX_LEVEL = -131072, 22
_LZ4_FAST = 0
"""python-lz4 frame level for lz4's fast compressor (frame levels below ``COMPRESSIONLEVEL_MINHC``)."""
_LZ4_HC_MIN_LEVEL: int = lz4.frame.COMPRESSIONLEVEL_MINHC
"""python-lz4's lowest HC frame level (3): lower levels select the fast compressor."""
_LZ4_HC_MAX_LEVEL = 12
"""LZ4 HC's highest level; lz4 clamps higher ones (lz4-java's native HC compressor included)."""
_GZIP_WBITS = 16 + zlib.MAX_WBITS
"""zlib window bits that select the gzip wrapper."""

_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = struct.Struct(">8sii")
_XERIAL_VERSION = 1
_XERIAL_COMPAT = 1
_XERIAL_BLOCK_SIZE = 32 * 1024
"""xerial ``SnappyOutputStream``'s default block size, used by the Java client."""
_INT32 = struct.Struct(">i")

_ZSTD_MIN_WINDOW = 1 << 23
"""Smallest zstd window accepted whatever ``max_size`` is: real producers declare up to 8 MiB."""
_ZSTD_MAX_WINDOW = 1 << 31
_ZSTD_MAX_EXPANSION = 1 << 15
"""Worst-case zstd output per input byte (a 4-byte RLE block yields 128 KiB)."""
_ZSTD_MIN_CHUNK = 16


# ---------------------------------------------------------------------------------------------
# Compression


def compress(codec: CompressionType | int, data: Buffer, level: int | None = None) -> bytes:
    """Compress a record stream with ``codec`` in the framing the Java client writes.

    ``level`` is Kafka's ``compression.<codec>.level`` (gzip -1 or 1-9, lz4 1-17, zstd -131072 to
    22; snappy has none): ``None`` keeps this module's defaults, which match the Java client's.
    """
    try:
        codec = CompressionType(codec)
    except ValueError:
        raise EncodeError(f"unknown compression codec id {codec}") from None
    return _COMPRESSORS[codec](data, level)


def _compress_none(data: Buffer, level: int | None = None) -> bytes:
    return bytes(data)


def _compress_gzip(data: Buffer, level: int | None = None) -> bytes:
    # mtime=0 keeps the output a pure function of the input (reproducible batches and CRCs).
    compresslevel = _GZIP_LEVEL if level is None or level == GZIP_DEFAULT_LEVEL else level
    return gzip.compress(data, compresslevel=compresslevel, mtime=0)


def _compress_snappy(data: Buffer, level: int | None = None) -> bytes:
    view = memoryview(data)
    if not view:
        return b""  # xerial writes its header lazily, with the first block: nothing in, nothing out
    parts = [_XERIAL_HEADER.pack(_XERIAL_MAGIC, _XERIAL_VERSION, _XERIAL_COMPAT)]
    for start in range(0, len(view), _XERIAL_BLOCK_SIZE):
        block = bytes(cramjam.snappy.compress_raw(view[start : start + _XERIAL_BLOCK_SIZE]))
        parts.append(_INT32.pack(len(block)))
        parts.append(block)
    return b"".join(parts)


def _compress_lz4(data: Buffer, level: int | None = None) -> bytes:
    # Kafka's reader rejects dependent (linked) blocks; it writes 64 KiB blocks, no content size.
    frame: bytes = lz4.frame.compress(
        data,
        compression_level=_lz4_frame_level(level),
        block_size=lz4.frame.BLOCKSIZE_MAX64KB,
        block_linked=False,
        content_checksum=False,
        store_size=False,
    )
    return frame


def _lz4_frame_level(level: int | None) -> int:
    """The python-lz4 frame level for Kafka's ``compression.lz4.level``.

    Kafka's ``Lz4BlockOutputStream`` keeps lz4-java's fast compressor for the default level, 9 (for
    backward compatibility, since KIP-390), and uses LZ4 HC at the given level for every other one,
    1 to 17 (lz4 stops at 12). The lz4 frame API gives fast mode below ``COMPRESSIONLEVEL_MINHC``
    (3), so HC levels 1 and 2 become HC 3, the nearest it offers. ``None`` (no level asked for, as
    the Java producer by default) is fast mode too.
    """
    if level is None or level == LZ4_DEFAULT_LEVEL:
        return _LZ4_FAST
    return min(max(level, _LZ4_HC_MIN_LEVEL), _LZ4_HC_MAX_LEVEL)


def _compress_zstd(data: Buffer, level: int | None = None) -> bytes:
    return zstandard.ZstdCompressor(level=ZSTD_DEFAULT_LEVEL if level is None else level).compress(data)


# ---------------------------------------------------------------------------------------------
# Decompression


def decompress(codec: CompressionType | int, data: Buffer, max_size: int) -> bytes:
    """Decompress a record stream, refusing to produce more than ``max_size`` bytes.

    Raises :class:`CorruptRecordError` for an unknown codec, malformed or truncated compressed
    data, trailing garbage, or output that would exceed ``max_size`` (a decompression bomb).
    """
    if max_size < 0:
        raise ValueError(f"max_size must be >= 0, not {max_size}")
    try:
        codec = CompressionType(codec)
    except ValueError:
        raise CorruptRecordError(f"unknown compression codec id {codec}") from None
    decoder = _DECOMPRESSORS[codec]
    try:
        out = decoder(memoryview(data), max_size)
    except _BudgetExceededError:
        raise _too_large(max_size) from None
    except CorruptRecordError:
        raise
    except _CODEC_ERRORS as exc:
        raise CorruptRecordError(f"{codec.name.lower()} data is corrupt: {exc}") from exc
    if len(out) > max_size:
        raise _too_large(max_size)
    return out


class _BudgetExceededError(Exception):
    """Raised inside a codec driver; :func:`decompress` turns it into a message naming the limit."""


def _too_large(max_size: int) -> CorruptRecordError:
    return CorruptRecordError(f"decompressed record stream exceeds the limit of {max_size} bytes")


def _decompress_none(data: memoryview, max_size: int) -> bytes:
    if len(data) > max_size:
        raise _BudgetExceededError
    return bytes(data)


def _decompress_gzip(data: memoryview, max_size: int) -> bytes:
    """Decode one or more gzip members; each ``decompress`` call is capped by the remaining budget."""
    out = bytearray()
    remaining = data
    while True:
        decoder = zlib.decompressobj(_GZIP_WBITS)
        out += decoder.decompress(remaining, max_size - len(out) + 1)
        if len(out) > max_size:
            raise _BudgetExceededError
        if not decoder.eof:
            raise CorruptRecordError("gzip data is truncated")
        remaining = memoryview(decoder.unused_data)
        if not remaining:
            return bytes(out)


def _decompress_snappy(data: memoryview, max_size: int) -> bytes:
    if not data:
        return b""  # as xerial's reader: an empty stream is empty, not a bad raw block
    if len(data) >= _XERIAL_HEADER.size and data[: len(_XERIAL_MAGIC)] == _XERIAL_MAGIC:
        return _decompress_xerial(data, max_size)
    return _decompress_snappy_block(data, max_size)


def _decompress_xerial(data: memoryview, max_size: int) -> bytes:
    """Walk the length-prefixed blocks after the 16-byte header.

    Version and compat are ignored: some producers write them little-endian, and only one version
    of the framing exists. A repeated header (concatenated streams) is skipped, as xerial does.
    """
    out = bytearray()
    pos = _XERIAL_HEADER.size
    end = len(data)
    while pos < end:
        if end - pos >= _XERIAL_HEADER.size and data[pos : pos + len(_XERIAL_MAGIC)] == _XERIAL_MAGIC:
            pos += _XERIAL_HEADER.size  # concatenated xerial streams (the magic is a negative length)
            continue
        if end - pos < _INT32.size:
            raise CorruptRecordError("xerial snappy block length is truncated")
        (length,) = _INT32.unpack_from(data, pos)
        pos += _INT32.size
        if length < 0 or length > end - pos:
            raise CorruptRecordError(f"xerial snappy block length {length} is out of range")
        out += _decompress_snappy_block(data[pos : pos + length], max_size - len(out))
        pos += length
    return bytes(out)


def _decompress_snappy_block(block: memoryview, max_size: int) -> bytes:
    """A raw snappy block starts with its uncompressed length: check it before allocating."""
    if cramjam.snappy.decompress_raw_len(block) > max_size:
        raise _BudgetExceededError
    return bytes(cramjam.snappy.decompress_raw(block))


def _decompress_lz4(data: memoryview, max_size: int) -> bytes:
    out = bytearray()
    remaining: Buffer = data
    while True:
        decoder = lz4.frame.LZ4FrameDecompressor()
        out += decoder.decompress(remaining, max_length=max_size - len(out) + 1)
        if len(out) > max_size:
            raise _BudgetExceededError
        if not decoder.eof:
            raise CorruptRecordError("lz4 frame is truncated")
        remaining = decoder.unused_data or b""
        if not remaining:
            return bytes(out)


def _decompress_zstd(data: memoryview, max_size: int) -> bytes:
    """Feed zstd frames a slice at a time, sized so one slice cannot overshoot the budget by much.

    python-zstandard's one-shot API needs a content size and its stream reader hides truncation,
    so the decompression object is driven by hand; each slice of ``n`` input bytes yields at most
    about ``n * 32 KiB`` plus one pending 128 KiB block.
    """
    if not data:
        raise CorruptRecordError("zstd data is empty")
    window = min(max(_ZSTD_MIN_WINDOW, _next_power_of_two(max_size)), _ZSTD_MAX_WINDOW)
    decompressor = zstandard.ZstdDecompressor(max_window_size=window)
    out = bytearray()
    pos = 0
    while pos < len(data):
        pos = _decompress_zstd_frame(decompressor, data, pos, out, max_size)
    return bytes(out)


def _decompress_zstd_frame(
    decompressor: zstandard.ZstdDecompressor, data: memoryview, pos: int, out: bytearray, max_size: int
) -> int:
    """Decode the frame starting at ``pos`` into ``out``; return the position after it."""
    frame = decompressor.decompressobj()
    while pos < len(data):
        chunk = max(_ZSTD_MIN_CHUNK, (max_size - len(out)) // _ZSTD_MAX_EXPANSION)
        piece = data[pos : pos + chunk]
        out += frame.decompress(piece)
        if len(out) > max_size:
            raise _BudgetExceededError
        if frame.eof:
            return pos + len(piece) - len(frame.unused_data)
        pos += len(piece)
    raise CorruptRecordError("zstd frame is truncated")


def _next_power_of_two(value: int) -> int:
    return 1 << max(value - 1, 1).bit_length()


_COMPRESSORS: dict[CompressionType, Callable[[Buffer, int | None], bytes]] = {
    CompressionType.NONE: _compress_none,
    CompressionType.GZIP: _compress_gzip,
    CompressionType.SNAPPY: _compress_snappy,
    CompressionType.LZ4: _compress_lz4,
    CompressionType.ZSTD: _compress_zstd,
}

_DECOMPRESSORS: dict[CompressionType, Callable[[memoryview, int], bytes]] = {
    CompressionType.NONE: _decompress_none,
    CompressionType.GZIP: _decompress_gzip,
    CompressionType.SNAPPY: _decompress_snappy,
    CompressionType.LZ4: _decompress_lz4,
    CompressionType.ZSTD: _decompress_zstd,
}
