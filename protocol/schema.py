"""Messages declared once, as data; per-version ``construct`` codecs derived from them.

A declaration mirrors the shape of Apache Kafka's message specifications (field name, type,
the versions it exists in, nullable and tagged versions, tag, default), with kipling's own
snake_case names. :meth:`MessageSpec.codec` derives the struct for one version — which fields
exist, which are compact, nullable or tagged — and compiles it once, on first use.
"""

from __future__ import annotations

import re
import struct
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from io import BytesIO
from typing import Any

from construct import Construct, ConstructError

from protocol import types as t
from protocol.data import MessageData
from protocol.errors import DecodeError, EncodeError, UnknownFieldError, UnsupportedVersionError
from protocol.sentinels import ZERO_UUID
from protocol.wire import EncodedArray, SegmentedBytesIO

_RANGE = re.compile(r"^(\d+)(?:-(\d+)|(\+))?$")


@dataclass(frozen=True, slots=True)
class Versions:
    """A version range as Kafka writes it: "3", "0-7", "12+" or "none"."""

    low: int
    high: int | None  # None = open-ended

    @classmethod
    def parse(cls, text: str | None) -> Versions:
        if text is None or text == "none":
            return NO_VERSIONS
        m = _RANGE.match(text.strip())
        if not m:
            raise ValueError(f"bad version range {text!r}")
        low = int(m.group(1))
        if m.group(3):
            return cls(low, None)
        return cls(low, int(m.group(2)) if m.group(2) else low)

    def __contains__(self, version: int) -> bool:
        return self.low <= version and (self.high is None or version <= self.high)

    def __str__(self) -> str:
        if self.low > (self.high if self.high is not None else self.low):
            return "none"
        if self.high is None:
            return f"{self.low}+"
        return str(self.low) if self.low == self.high else f"{self.low}-{self.high}"


NO_VERSIONS = Versions(1, 0)

PRIMITIVES = frozenset(
    (
        "bool",
        "int8",
        "int16",
        "int32",
        "int64",
        "uint16",
        "uint32",
        "float64",
        "string",
        "bytes",
        "records",
        "uuid",
    )
)
_INT_TYPES = frozenset(("int8", "int16", "int32", "int64", "uint16", "uint32"))
_FIXED = {
    "bool": t.BOOL,
    "int8": t.INT8,
    "int16": t.INT16,
    "int32": t.INT32,
    "int64": t.INT64,
    "uint16": t.UINT16,
    "uint32": t.UINT32,
    "float64": t.FLOAT64,
    "uuid": t.UUID,
}
_MISSING: Any = object()


@dataclass(frozen=True)
class Field:
    """One field of a message or struct.

    ``type`` is a Kafka type name: a primitive ("int32", "string", "records", ...), "[]<primitive>",
    or a struct name ("FetchPartition" / "[]FetchPartition") whose members are ``fields``.
    """

    name: str
    type: str
    versions: str
    nullable_versions: str | None = None
    tagged_versions: str | None = None
    tag: int | None = None
    default: Any = _MISSING
    fields: tuple[Field, ...] = ()
    ignorable: bool = False
    flexible_versions: str | None = None
    """Overrides the message's flexible versions for this field's own encoding (only the
    request header's ClientId uses it: it stays a non-compact string in header v2)."""

    def __post_init__(self) -> None:
        if (self.tag is None) != (self.tagged_versions is None):
            raise ValueError(f"{self.name}: tag and tagged_versions go together")
        if self.is_struct and not self.fields:
            raise ValueError(f"{self.name}: struct type {self.type} needs fields")

    @property
    def is_array(self) -> bool:
        return self.type.startswith("[]")

    @property
    def element_type(self) -> str:
        return self.type[2:] if self.is_array else self.type

    @property
    def is_struct(self) -> bool:
        return self.element_type not in PRIMITIVES

    def exists_in(self, version: int) -> bool:
        return version in Versions.parse(self.versions)

    def nullable_in(self, version: int) -> bool:
        return version in Versions.parse(self.nullable_versions)

    def tagged_in(self, version: int) -> bool:
        return version in Versions.parse(self.tagged_versions)

    def default_value(self) -> Any:
        """The declared default, or Kafka's implicit one for the type."""
        if self.is_array:
            return None if self.default is None else []
        if self.is_struct:
            if self.default is None:  # a nullable struct whose default is null
                return None
            return {f.name: f.default_value() for f in self.fields}
        if self.default is not _MISSING:
            return _coerce_default(self.element_type, self.default)
        return _implicit_default(self.element_type)


def _coerce_default(type_name: str, value: Any) -> Any:
    if value is None:
        return None
    if type_name in _INT_TYPES and isinstance(value, str):
        return int(value, 0)
    if type_name == "uuid" and isinstance(value, str):
        return uuid.UUID(value)
    return value


def _implicit_default(type_name: str) -> Any:
    if type_name in _INT_TYPES:
        return 0
    return {
        "bool": False,
        "float64": 0.0,
        "string": "",
        "bytes": b"",
        "records": None,
        "uuid": ZERO_UUID,
    }[type_name]


def _fresh_default(f: Field) -> Callable[[], Any]:
    """A factory for decoded objects: arrays and structs must not share one mutable default."""
    if f.is_array:
        if f.default is None:
            return lambda: None
        return list
    if f.is_struct:
        if f.default is None:  # a nullable struct, null by default
            return lambda: None
        if not any(m.is_struct or m.is_array for m in f.fields):
            template = f.default_value()  # flat: a C-level dict copy is a fresh default
            return lambda: MessageData(template)
        members = [(m.name, _fresh_default(m)) for m in f.fields]
        return lambda: MessageData((name, make()) for name, make in members)
    value = f.default_value()
    return lambda: value


def _primitive(type_name: str, *, flexible: bool, nullable: bool) -> Construct:
    if type_name in _FIXED:
        return _FIXED[type_name]
    if type_name == "string":
        if flexible:
            return t.COMPACT_NULLABLE_STRING if nullable else t.COMPACT_STRING
        return t.NULLABLE_STRING if nullable else t.STRING
    # bytes and records share a wire form; records stay opaque bytes
    if flexible:
        return t.COMPACT_NULLABLE_BYTES if nullable else t.COMPACT_BYTES
    return t.NULLABLE_BYTES if nullable else t.BYTES


def _field_construct(f: Field, version: int, flexible: bool, path: str = "") -> Construct:
    nullable = f.nullable_in(version)
    if f.flexible_versions is not None:
        flexible = version in Versions.parse(f.flexible_versions)
    if f.is_struct:
        here = f"{path}.{f.name}" if path else f.name
        element = build_struct(f.fields, version, flexible, f"{here}[]" if f.is_array else here)
    else:
        element = _primitive(f.element_type, flexible=flexible, nullable=nullable and not f.is_array)
    if f.is_array:
        return t.Array(element, compact=flexible, nullable=nullable)
    if f.is_struct and nullable:
        return t.NullableStruct(element)
    return element


def build_struct(fields: Sequence[Field], version: int, flexible: bool, path: str = "") -> t.Struct:
    """Derive the construct of a struct for one version of its message.

    ``path`` names the struct in the message (``"topics[].partitions[]"``; ``""`` for the message
    itself) for the errors of encoding a key that no version of the struct declares.
    """
    on_wire: list[t.FieldCodec] = []
    tagged: list[t.FieldCodec] = []
    absent: list[t.FieldCodec] = []
    for f in fields:
        if not f.exists_in(version):
            absent.append(t.FieldCodec(f.name, None, f.default_value(), _fresh_default(f)))
            continue
        codec = t.FieldCodec(
            f.name,
            _field_construct(f, version, flexible, path),
            f.default_value(),
            _fresh_default(f),
            f.tag if f.tagged_in(version) else None,
        )
        if codec.tag is not None and flexible:
            tagged.append(codec)
        else:
            on_wire.append(codec)
    return t.Struct(on_wire, tagged, absent, flexible=flexible, path=path)


_DECODE_FAILURES = (
    ConstructError,
    struct.error,
    ValueError,
    IndexError,
    KeyError,
    TypeError,
    OverflowError,
    RecursionError,
)


class MessageCodec:
    """Encoder/decoder of one message in one version (compiled construct by default)."""

    def __init__(self, spec: MessageSpec, version: int, *, compiled: bool = True):
        self.spec = spec
        self.version = version
        self.flexible = version in Versions.parse(spec.flexible_versions)
        self.struct = build_struct(spec.fields, version, self.flexible)
        self.construct: Construct = self.struct.compile() if compiled else self.struct
        self._parse = getattr(self.construct, "parsefunc", None)
        self._build = getattr(self.construct, "buildfunc", None)

    def read(self, io: BytesIO) -> MessageData:
        """Decode from a stream positioned at the body; leaves it after the last field."""
        try:
            if self._parse is not None:
                return self._parse(io, None)  # type: ignore[no-any-return]
            return self.construct.parse_stream(io)  # type: ignore[no-any-return]
        except DecodeError:
            raise
        except _DECODE_FAILURES as exc:
            raise DecodeError(f"{self.spec.name} v{self.version}: {exc}") from None

    def decode(self, data: bytes | bytearray | memoryview) -> MessageData:
        """Decode a whole body; trailing bytes are ignored, as Kafka brokers do."""
        return self.read(BytesIO(data))

    def write(self, obj: Any, io: BytesIO) -> None:
        try:
            if self._build is not None:
                self._build(obj, io, None)
            else:
                self.construct.build_stream(obj, io)
        except UnknownFieldError as exc:
            raise UnknownFieldError(
                f"{self.spec.name} v{self.version}: {exc}", exc.keys, exc.struct
            ) from None
        except EncodeError:
            raise
        except (*_DECODE_FAILURES, AttributeError) as exc:
            raise EncodeError(f"{self.spec.name} v{self.version}: {exc}") from None

    def encode(self, obj: Any) -> bytes:
        io = BytesIO()
        self.write(obj, io)
        return io.getvalue()

    def array_encoder(self, *path: str) -> Callable[[Sequence[Any]], EncodedArray]:
        """An encoder of the array field at ``path`` (``"topics", "partitions"``) in this version,
        whose result this codec writes as is: see :class:`~protocol.wire.EncodedArray`."""
        construct: Any = self.struct
        for name in path:
            if isinstance(construct, t.Array):
                construct = construct.element
            fields = {f.name: f for f in (*construct.fields, *construct.tagged)}
            if name not in fields:
                raise KeyError(f"{self.spec.name} v{self.version} has no field {'.'.join(path)}")
            construct = fields[name].construct
        if not isinstance(construct, t.Array):
            raise TypeError(f"{self.spec.name} v{self.version}: {'.'.join(path)} is not an array")
        array = construct

        def encode(items: Sequence[Any]) -> EncodedArray:
            io = BytesIO()
            try:
                array.build_stream(items, io)
            except (*_DECODE_FAILURES, AttributeError) as exc:
                raise EncodeError(f"{self.spec.name} v{self.version} {'.'.join(path)}: {exc}") from None
            return EncodedArray(io.getvalue())

        return encode

    def encode_parts(self, obj: Any) -> tuple[list[object], int]:
        """Encode a message whose bytes fields may hold :class:`~protocol.wire.ExternalBytes`:
        returns the pieces in wire order (bytes and the external values' sources) and the size."""
        io = SegmentedBytesIO()
        self.write(obj, io)
        return io.parts(), io.size


@dataclass(frozen=True)
class MessageSpec:
    """One message (a request or a response of one API), all its versions."""

    api_key: int
    name: str
    type: str  # "request" | "response" | "header" | "data" | "metadata"
    valid_versions: str
    flexible_versions: str
    fields: tuple[Field, ...]
    _codecs: dict[tuple[int, bool], MessageCodec] = field(default_factory=dict, compare=False, repr=False)

    @property
    def versions(self) -> Versions:
        return Versions.parse(self.valid_versions)

    def version_list(self) -> list[int]:
        v = self.versions
        return list(range(v.low, (v.high if v.high is not None else v.low) + 1))

    def is_flexible(self, version: int) -> bool:
        return version in Versions.parse(self.flexible_versions)

    def codec(self, version: int, *, compiled: bool = True) -> MessageCodec:
        """The codec of ``version``, derived and compiled once."""
        key = (version, compiled)
        codec = self._codecs.get(key)
        if codec is None:
            if version not in self.versions:
                raise UnsupportedVersionError(
                    f"{self.name} has no version {version} (valid {self.valid_versions})"
                )
            codec = self._codecs[key] = MessageCodec(self, version, compiled=compiled)
        return codec


def request(api_key: int, name: str, valid: str, flexible: str, *fields: Field) -> MessageSpec:
    return MessageSpec(api_key, f"{name}Request", "request", valid, flexible, tuple(fields))


def response(api_key: int, name: str, valid: str, flexible: str, *fields: Field) -> MessageSpec:
    return MessageSpec(api_key, f"{name}Response", "response", valid, flexible, tuple(fields))


def metadata_record(type_id: int, name: str, valid: str, flexible: str, *fields: Field) -> MessageSpec:
    """A cluster-metadata record, KRaft style: its type id plays the role of an API key.

    Its codecs derive exactly as a message's do; the type "metadata" keeps it out of the
    request/response registry of :mod:`protocol.messages`.
    """
    return MessageSpec(type_id, name, "metadata", valid, flexible, tuple(fields))
