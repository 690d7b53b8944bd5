"""Primitive readers and writers of Kafka's wire types, on a binary stream.

These small functions are shared by the interpreted and the compiled ``construct`` codecs
(:mod:`protocol.types`): the compiled code calls them by name, so both paths have one
implementation of every length rule. Every read checks the bytes it got, and every length is
checked against what the stream still holds before anything is allocated, so a hostile length
prefix costs nothing. Errors are :class:`protocol.errors.DecodeError`.
"""

from __future__ import annotations

import struct
import uuid
from io import BytesIO

from protocol.errors import DecodeError, EncodeError

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")


def remaining(io: BytesIO) -> int:
    """Bytes left to read; BytesIO keeps its size, so this is cheap."""
    return io.getbuffer().nbytes - io.tell()


def read_exact(io: BytesIO, n: int) -> bytes:
    data = io.read(n)
    if len(data) != n:
        raise DecodeError(f"truncated input: needed {n} bytes, {len(data)} left")
    return data


def read_uvarint(io: BytesIO) -> int:
    """Unsigned LEB128 varint of at most 5 bytes (an unsigned int32)."""
    result = 0
    for shift in (0, 7, 14, 21, 28):
        b = io.read(1)
        if not b:
            raise DecodeError("truncated varint")
        byte = b[0]
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result
    raise DecodeError("varint longer than 5 bytes")


def read_uvarlong(io: BytesIO) -> int:
    result = 0
    for shift in range(0, 70, 7):
        b = io.read(1)
        if not b:
            raise DecodeError("truncated varlong")
        byte = b[0]
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result
    raise DecodeError("varlong longer than 10 bytes")


def encode_uvarint(value: int) -> bytes:
    if value < 0:
        raise EncodeError(f"unsigned varint cannot hold {value}")
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def write_uvarint(io: BytesIO, value: int) -> None:
    if 0 <= value < 0x80:
        io.write(bytes((value,)))
    else:
        io.write(encode_uvarint(value))


def read_varint(io: BytesIO) -> int:
    """Zigzag-encoded signed int32."""
    raw = read_uvarint(io)
    return (raw >> 1) ^ -(raw & 1)


def read_varlong(io: BytesIO) -> int:
    raw = read_uvarlong(io)
    return (raw >> 1) ^ -(raw & 1)


def write_varint(io: BytesIO, value: int) -> None:
    if not -(1 << 31) <= value < (1 << 31):
        raise EncodeError(f"varint out of range: {value}")
    write_uvarint(io, ((value << 1) ^ (value >> 31)) & 0xFFFFFFFF)


def write_varlong(io: BytesIO, value: int) -> None:
    if not -(1 << 63) <= value < (1 << 63):
        raise EncodeError(f"varlong out of range: {value}")
    write_uvarint(io, ((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF)


def _read_sized(io: BytesIO, n: int) -> bytes:
    if n > remaining(io):
        raise DecodeError(f"length {n} exceeds the {remaining(io)} bytes left")
    return io.read(n)


class FrameReader(BytesIO):
    """A BytesIO over a received frame that also keeps a view of the frame itself.

    Bytes and records fields read through it are slices of the frame rather than copies: a
    produce request's record batches reach the log as a view of the buffer the socket wrote
    into (writable when the frame is), which the log stamps in place and writes out.
    """

    def __init__(self, frame: bytes | bytearray | memoryview) -> None:
        super().__init__(frame)
        self.view = memoryview(frame)


def _read_bytes_field(io: BytesIO, n: int) -> bytes | memoryview:
    """A bytes/records value: a view of the frame when reading one (no copy), else bytes."""
    if not isinstance(io, FrameReader):
        return _read_sized(io, n)
    if n > remaining(io):
        raise DecodeError(f"length {n} exceeds the {remaining(io)} bytes left")
    start = io.tell()
    io.seek(start + n)
    return io.view[start : start + n]


def _decode_utf8(data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DecodeError(f"invalid UTF-8 in string: {exc}") from None


def _null_length(n: int, nullable: bool, what: str) -> None:
    if n != -1 or not nullable:
        raise DecodeError(f"invalid {what} length {n}")


# -- strings -------------------------------------------------------------------------------------


def read_string(io: BytesIO) -> str:
    n = _INT16.unpack(read_exact(io, 2))[0]
    if n < 0:
        _null_length(n, False, "string")
    return _decode_utf8(_read_sized(io, n))


def read_nullable_string(io: BytesIO) -> str | None:
    n = _INT16.unpack(read_exact(io, 2))[0]
    if n < 0:
        _null_length(n, True, "string")
        return None
    return _decode_utf8(_read_sized(io, n))


def read_compact_string(io: BytesIO) -> str:
    n = read_uvarint(io) - 1
    if n < 0:
        _null_length(n, False, "compact string")
    return _decode_utf8(_read_sized(io, n))


def read_compact_nullable_string(io: BytesIO) -> str | None:
    n = read_uvarint(io) - 1
    if n < 0:
        return None
    return _decode_utf8(_read_sized(io, n))


def _encode_utf8(value: str | None, what: str) -> bytes:
    if value is None:
        raise EncodeError(f"{what} is not nullable in this version")
    if not isinstance(value, str):
        raise EncodeError(f"{what} expects str, got {type(value).__name__}")
    return value.encode("utf-8")


def write_string(io: BytesIO, value: str) -> None:
    data = _encode_utf8(value, "string")
    if len(data) > 0x7FFF:
        raise EncodeError("string longer than 32767 bytes")
    io.write(_INT16.pack(len(data)))
    io.write(data)


def write_nullable_string(io: BytesIO, value: str | None) -> None:
    if value is None:
        io.write(b"\xff\xff")
    else:
        write_string(io, value)


def write_compact_string(io: BytesIO, value: str) -> None:
    data = _encode_utf8(value, "compact string")
    write_uvarint(io, len(data) + 1)
    io.write(data)


def write_compact_nullable_string(io: BytesIO, value: str | None) -> None:
    if value is None:
        io.write(b"\x00")
    else:
        write_compact_string(io, value)


# -- bytes ---------------------------------------------------------------------------------------


def read_bytes(io: BytesIO) -> bytes | memoryview:
    n = _INT32.unpack(read_exact(io, 4))[0]
    if n < 0:
        _null_length(n, False, "bytes")
    return _read_bytes_field(io, n)


def read_nullable_bytes(io: BytesIO) -> bytes | memoryview | None:
    n = _INT32.unpack(read_exact(io, 4))[0]
    if n < 0:
        _null_length(n, True, "bytes")
        return None
    return _read_bytes_field(io, n)


def read_compact_bytes(io: BytesIO) -> bytes | memoryview:
    n = read_uvarint(io) - 1
    if n < 0:
        _null_length(n, False, "compact bytes")
    return _read_bytes_field(io, n)


def read_compact_nullable_bytes(io: BytesIO) -> bytes | memoryview | None:
    n = read_uvarint(io) - 1
    if n < 0:
        return None
    return _read_bytes_field(io, n)


class ExternalBytes:
    """A bytes value the encoder must not copy: only its length goes into the encoded message.

    The broker answers a fetch with records that stay in segment files; it encodes the
    response around them with :class:`SegmentedBytesIO`, which remembers where each external
    value belongs, and the connection sends the pieces as a list of buffers. ``source`` is
    whatever the sender knows how to write (a file slice); the codec never looks at it.
    """

    __slots__ = ("length", "source")

    def __init__(self, length: int, source: object) -> None:
        self.length = length
        self.source = source


class EncodedArray:
    """An array field's value already in wire form for one message version, its count included: the
    encoder writes the bytes as they are.

    For response parts that change far less often than they are sent: a topic's partitions in
    Metadata are encoded once per change of the topic, not once per request (100,000 partitions
    are 100,000 structs to build for every full Metadata request otherwise).
    """

    __slots__ = ("data",)

    def __init__(self, data: bytes) -> None:
        self.data = data


class SegmentedBytesIO(BytesIO):
    """A BytesIO that accepts :class:`ExternalBytes` and yields the message as pieces."""

    def __init__(self) -> None:
        super().__init__()
        self._external: list[tuple[int, ExternalBytes]] = []

    def add_external(self, value: ExternalBytes) -> None:
        self._external.append((self.tell(), value))

    @property
    def size(self) -> int:
        return self.getbuffer().nbytes + sum(e.length for _, e in self._external)

    def parts(self) -> list[object]:
        """Encoded bytes interleaved with the external values' sources, in wire order."""
        data = self.getvalue()
        pieces: list[object] = []
        start = 0
        for position, external in self._external:
            if position > start:
                pieces.append(data[start:position])
            pieces.append(external.source)
            start = position
        if start < len(data):
            pieces.append(data[start:])
        return pieces


def _check_bytes(value: object, what: str) -> bytes | bytearray | memoryview:
    if value is None:
        raise EncodeError(f"{what} is not nullable in this version")
    if not isinstance(value, bytes | bytearray | memoryview):
        raise EncodeError(f"{what} expects bytes, got {type(value).__name__}")
    return value


def _nbytes(value: bytes | bytearray | memoryview) -> int:
    return value.nbytes if isinstance(value, memoryview) else len(value)


def _write_external(io: BytesIO, value: ExternalBytes) -> None:
    if not isinstance(io, SegmentedBytesIO):
        raise EncodeError("external bytes need a SegmentedBytesIO to encode into")
    io.add_external(value)


def write_bytes(io: BytesIO, value: bytes) -> None:
    if isinstance(value, ExternalBytes):
        io.write(_INT32.pack(value.length))
        _write_external(io, value)
        return
    data = _check_bytes(value, "bytes")
    io.write(_INT32.pack(_nbytes(data)))
    io.write(data)


def write_nullable_bytes(io: BytesIO, value: bytes | None) -> None:
    if value is None:
        io.write(b"\xff\xff\xff\xff")
    else:
        write_bytes(io, value)


def write_compact_bytes(io: BytesIO, value: bytes) -> None:
    if isinstance(value, ExternalBytes):
        write_uvarint(io, value.length + 1)
        _write_external(io, value)
        return
    data = _check_bytes(value, "compact bytes")
    write_uvarint(io, _nbytes(data) + 1)
    io.write(data)


def write_compact_nullable_bytes(io: BytesIO, value: bytes | None) -> None:
    if value is None:
        io.write(b"\x00")
    else:
        write_compact_bytes(io, value)


# -- uuid, arrays ------------------------------------------------------------------------------------


def read_uuid(io: BytesIO) -> uuid.UUID:
    return uuid.UUID(bytes=read_exact(io, 16))


def write_uuid(io: BytesIO, value: uuid.UUID) -> None:
    if not isinstance(value, uuid.UUID):
        raise EncodeError(f"uuid expects uuid.UUID, got {type(value).__name__}")
    io.write(value.bytes)


def read_array_count(io: BytesIO, min_element_size: int) -> int:
    """int32 count (-1 = null), checked against the bytes left before any element is built."""
    n: int = _INT32.unpack(read_exact(io, 4))[0]
    if n > 0:
        _check_count(io, n, min_element_size)
    return n


def read_compact_array_count(io: BytesIO, min_element_size: int) -> int:
    """uvarint count + 1 (0 = null), checked against the bytes left."""
    n = read_uvarint(io) - 1
    if n > 0:
        _check_count(io, n, min_element_size)
    return n


def _check_count(io: BytesIO, n: int, min_element_size: int) -> None:
    if n * min_element_size > remaining(io):
        raise DecodeError(
            f"array count {n} needs at least {n * min_element_size} bytes, only {remaining(io)} left"
        )


def write_array_count(io: BytesIO, n: int) -> None:
    io.write(_INT32.pack(n))


def write_compact_array_count(io: BytesIO, n: int) -> None:
    write_uvarint(io, n + 1)
