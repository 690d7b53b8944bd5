"""``construct`` types for Kafka's wire format, each interpretable and compilable.

Every class here implements both construct paths: ``_parse``/``_build`` (interpreted) and
``_emitparse``/``_emitbuild`` (the source that ``Construct.compile()`` turns into one Python
function per struct). Both paths call the same primitive readers in :mod:`protocol.wire`, so a
length rule lives in one place. Kafka schemas never refer to sibling fields, so the generated
code ignores construct's context (``this``) entirely: no per-struct context objects, which is
what makes a compiled 10,000-partition Fetch cheap.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from io import BytesIO
from typing import Any, NoReturn

from construct import (
    Construct,
    Float64b,
    FormatField,
    Int8sb,
    Int16sb,
    Int16ub,
    Int32sb,
    Int32ub,
    Int64sb,
)

from protocol import wire
from protocol.data import MessageData
from protocol.errors import DecodeError, EncodeError, UnknownFieldError

_WIRE_IMPORT = (
    "from protocol.wire import *\n"
    "from protocol.data import MessageData\n"
    "from protocol.errors import DecodeError, EncodeError"
)


class WireType(Construct):  # type: ignore[misc]  # construct has no type hints: Construct is Any
    """A primitive whose reader and writer are functions of :mod:`protocol.wire`."""

    def __init__(
        self, reader: Callable[[BytesIO], Any], writer: Callable[[BytesIO, Any], None], min_size: int
    ):
        super().__init__()
        self.reader = reader
        self.writer = writer
        self.min_size = min_size

    def _parse(self, stream: BytesIO, context: Any, path: str) -> Any:
        return self.reader(stream)

    def _build(self, obj: Any, stream: BytesIO, context: Any, path: str) -> Any:
        self.writer(stream, obj)
        return obj

    def _emitparse(self, code: Any) -> str:
        code.append(_WIRE_IMPORT)
        return f"{self.reader.__name__}(io)"

    def _emitbuild(self, code: Any) -> str:
        code.append(_WIRE_IMPORT)
        return f"({self.writer.__name__}(io, obj), obj)[1]"


def _fixed(con: Construct, size: int) -> Construct:
    con.min_size = size
    return con


INT8 = _fixed(Int8sb, 1)
INT16 = _fixed(Int16sb, 2)
INT32 = _fixed(Int32sb, 4)
INT64 = _fixed(Int64sb, 8)
UINT16 = _fixed(Int16ub, 2)
UINT32 = _fixed(Int32ub, 4)
FLOAT64 = _fixed(Float64b, 8)
# Not construct's Flag: its compiled parser reads ``io.read(1) != b"\x00"``, so a body cut just
# before a bool decoded as True. A struct "?" field checks its length on both paths, reads any
# non-zero byte as True (as Kafka does) and joins the neighbouring fixed-size fields in one unpack.
BOOL = _fixed(FormatField(">", "?"), 1)
UUID = WireType(wire.read_uuid, wire.write_uuid, 16)
UVARINT = WireType(wire.read_uvarint, wire.write_uvarint, 1)
VARINT = WireType(wire.read_varint, wire.write_varint, 1)
VARLONG = WireType(wire.read_varlong, wire.write_varlong, 1)
STRING = WireType(wire.read_string, wire.write_string, 2)
NULLABLE_STRING = WireType(wire.read_nullable_string, wire.write_nullable_string, 2)
COMPACT_STRING = WireType(wire.read_compact_string, wire.write_compact_string, 1)
COMPACT_NULLABLE_STRING = WireType(wire.read_compact_nullable_string, wire.write_compact_nullable_string, 1)
BYTES = WireType(wire.read_bytes, wire.write_bytes, 4)
NULLABLE_BYTES = WireType(wire.read_nullable_bytes, wire.write_nullable_bytes, 4)
COMPACT_BYTES = WireType(wire.read_compact_bytes, wire.write_compact_bytes, 1)
COMPACT_NULLABLE_BYTES = WireType(wire.read_compact_nullable_bytes, wire.write_compact_nullable_bytes, 1)


def min_size(con: Construct) -> int:
    """Fewest bytes one value of ``con`` can occupy: the bound used to check array counts."""
    return getattr(con, "min_size", 1)


class Array(Construct):  # type: ignore[misc]  # construct has no type hints: Construct is Any
    """Kafka ARRAY (int32 count) or COMPACT_ARRAY (uvarint count + 1), optionally nullable."""

    def __init__(self, element: Construct, *, compact: bool, nullable: bool):
        super().__init__()
        self.element = element
        self.compact = compact
        self.nullable = nullable
        self.min_size = 1 if compact else 4

    def _read_count(self, stream: BytesIO) -> int:
        if self.compact:
            return wire.read_compact_array_count(stream, min_size(self.element))
        return wire.read_array_count(stream, min_size(self.element))

    def _parse(self, stream: BytesIO, context: Any, path: str) -> list[Any] | None:
        n = self._read_count(stream)
        if n < 0:
            if not self.nullable:
                raise DecodeError("null array in a non-nullable field")
            return None
        return [self.element._parsereport(stream, context, path) for _ in range(n)]

    def _build(
        self, obj: Sequence[Any] | wire.EncodedArray | None, stream: BytesIO, context: Any, path: str
    ) -> Any:
        if obj is None:
            if not self.nullable:
                raise EncodeError("null array in a non-nullable field")
            stream.write(b"\x00" if self.compact else b"\xff\xff\xff\xff")
            return obj
        if isinstance(obj, wire.EncodedArray):
            stream.write(obj.data)
            return obj
        if self.compact:
            wire.write_compact_array_count(stream, len(obj))
        else:
            wire.write_array_count(stream, len(obj))
        for item in obj:
            self.element._build(item, stream, context, path)
        return obj

    def _emitparse(self, code: Any) -> str:
        code.append(_WIRE_IMPORT)
        fname = f"parse_array_{code.allocateId()}"
        reader = "read_compact_array_count" if self.compact else "read_array_count"
        null = "return None" if self.nullable else "raise DecodeError('null array in a non-nullable field')"
        element = self.element._compileparse(code)
        code.append(f"""
            def {fname}(io, this):
                n = {reader}(io, {min_size(self.element)})
                if n < 0:
                    {null}
                return [{element} for _ in range(n)]
        """)
        return f"{fname}(io, this)"

    def _emitbuild(self, code: Any) -> str:
        code.append(_WIRE_IMPORT)
        fname = f"build_array_{code.allocateId()}"
        writer = "write_compact_array_count" if self.compact else "write_array_count"
        null_bytes = b"\x00" if self.compact else b"\xff\xff\xff\xff"
        null = (
            f"io.write({null_bytes!r})"
            if self.nullable
            else "raise EncodeError('null array in a non-nullable field')"
        )
        element = self.element._compilebuild(code)
        code.append(f"""
            def {fname}(obj, io, this):
                if obj is None:
                    {null}
                    return obj
                if type(obj) is EncodedArray:
                    io.write(obj.data)
                    return obj
                items = obj
                {writer}(io, len(items))
                for obj in items:
                    {element}
                return items
        """)
        return f"{fname}(obj, io, this)"


class NullableStruct(Construct):  # type: ignore[misc]  # construct has no type hints: Construct is Any
    """A struct field that may be null: an int8 marker before it, -1 for null and 1 for a present
    struct, as Kafka writes a nullable struct (DescribeTopicPartitions' ``cursor``)."""

    def __init__(self, struct: Construct):
        super().__init__()
        self.struct = struct
        self.min_size = 1

    def _parse(self, stream: BytesIO, context: Any, path: str) -> MessageData | None:
        marker = stream.read(1)
        if not marker:
            raise DecodeError("truncated input: missing the null marker of a struct")
        if marker[0] >= 0x80:
            return None
        return self.struct._parsereport(stream, context, path)  # type: ignore[no-any-return]

    def _build(self, obj: Any, stream: BytesIO, context: Any, path: str) -> Any:
        if obj is None:
            stream.write(b"\xff")
            return obj
        stream.write(b"\x01")
        self.struct._build(obj, stream, context, path)
        return obj

    def _emitparse(self, code: Any) -> str:
        code.append(_WIRE_IMPORT)
        fname = f"parse_nullable_struct_{code.allocateId()}"
        inner = self.struct._compileparse(code)
        code.append(f"""
            def {fname}(io, this):
                marker = io.read(1)
                if not marker:
                    raise DecodeError('truncated input: missing the null marker of a struct')
                if marker[0] >= 0x80:
                    return None
                return {inner}
        """)
        return f"{fname}(io, this)"

    def _emitbuild(self, code: Any) -> str:
        code.append(_WIRE_IMPORT)
        fname = f"build_nullable_struct_{code.allocateId()}"
        inner = self.struct._compilebuild(code)
        code.append(f"""
            def {fname}(obj, io, this):
                if obj is None:
                    io.write(b'\\xff')
                    return obj
                io.write(b'\\x01')
                {inner}
                return obj
        """)
        return f"{fname}(obj, io, this)"


@dataclass(frozen=True, slots=True)
class FieldCodec:
    """One field of a struct in one version: where it goes and what it holds when absent."""

    name: str
    construct: Construct
    default: Any
    """The value written when a caller leaves the field out, and compared to decide whether a
    tagged field needs writing."""
    make_default: Callable[[], Any]
    """Produces a fresh default for decoded objects (lists and structs are mutable)."""
    tag: int | None = None


_LITERAL_TYPES = (int, str, bool, float, type(None))


def _default_expr(field: FieldCodec, index_expr: str) -> str:
    if isinstance(field.default, _LITERAL_TYPES):
        return repr(field.default)
    return f"{index_expr}.make_default()"


def _build_default_expr(field: FieldCodec, index_expr: str) -> str:
    if isinstance(field.default, _LITERAL_TYPES):
        return repr(field.default)
    return f"{index_expr}.default"


def _fixed_runs(fields: Sequence[FieldCodec]) -> list[list[FieldCodec]]:
    """Group consecutive fixed-size numeric fields, so compiled code reads each group with one
    ``struct`` call (a Fetch partition's six numbers become one unpack of 32 bytes)."""
    runs: list[list[FieldCodec]] = []
    for field in fields:
        fixed = isinstance(field.construct, FormatField)
        if fixed and runs and isinstance(runs[-1][-1].construct, FormatField):
            runs[-1].append(field)
        else:
            runs.append([field])
    return runs


def _run_packer(code: Any, run: Sequence[FieldCodec]) -> tuple[str, int]:
    fmt = ">" + "".join(f.construct.fmtstr.lstrip("<>=!@") for f in run)
    name = "packer_" + fmt[1:].replace("?", "_")  # "?" (bool) is no identifier; "_" is no format code
    code.append(f"{name} = struct.Struct({fmt!r})")
    return name, struct.calcsize(fmt)


class Struct(Construct):  # type: ignore[misc]  # construct has no type hints: Construct is Any
    """A Kafka struct in one version: its fields in wire order, then (flexible versions) tags.

    Decoding yields a :class:`MessageData` holding every field the schema declares: the ones on
    the wire, tagged ones (decoded, or defaulted when absent) and the ones this version lacks
    (defaulted). Encoding takes any mapping and defaults what it leaves out; a key that is the
    name of no field of this struct in any version raises :class:`UnknownFieldError` (a key of a
    field only other versions have is ignored). Tagged fields are written when they differ from
    their default or were present when the object was decoded; unknown tags read from the wire are
    written back unchanged.

    ``path`` names the struct in its message for error messages (``""`` for the message itself).
    """

    def __init__(
        self,
        fields: Sequence[FieldCodec],
        tagged: Sequence[FieldCodec],
        absent: Sequence[FieldCodec],
        *,
        flexible: bool,
        path: str = "",
    ):
        super().__init__()
        self.path = path
        self.fields = tuple(fields)
        self.tagged = tuple(sorted(tagged, key=lambda f: f.tag or 0))
        self.tag_map = {f.tag: f for f in self.tagged}
        self.absent = tuple(absent)
        self.flexible = flexible
        self.min_size = sum(min_size(f.construct) for f in self.fields) + (1 if flexible else 0)
        self.known_keys = frozenset(f.name for f in (*self.fields, *self.tagged, *self.absent))
        """Every field name of this struct in any version: the keys encoding accepts (computed once)."""

    def reject_unknown_keys(self, obj: Any) -> NoReturn:
        """Raise :class:`UnknownFieldError` for the keys of ``obj`` that are not in :attr:`known_keys`."""
        unknown = tuple(sorted(str(key) for key in obj if key not in self.known_keys))
        where = f" in {self.path}" if self.path else ""
        names = ", ".join(repr(key) for key in unknown)
        raise UnknownFieldError(
            f"unknown key{'s' if len(unknown) > 1 else ''} {names}{where}: no version declares it "
            f"(known: {', '.join(sorted(self.known_keys))})",
            unknown,
            self.path,
        )

    # -- tagged section ------------------------------------------------------------------------

    def parse_tagged_section(self, stream: BytesIO, result: MessageData) -> None:
        count = wire.read_uvarint(stream)
        present: set[int] = set()
        last_tag = -1
        for _ in range(count):
            tag = wire.read_uvarint(stream)
            size = wire.read_uvarint(stream)
            if tag <= last_tag:
                raise DecodeError(f"tagged fields out of order: tag {tag} after {last_tag}")
            last_tag = tag
            if size > wire.remaining(stream):
                raise DecodeError(
                    f"tagged field {tag} claims {size} bytes, only {wire.remaining(stream)} left"
                )
            data = stream.read(size)
            field = self.tag_map.get(tag)
            if field is None:
                if result.unknown_tags is None:
                    result.unknown_tags = {}
                result.unknown_tags[tag] = data
                continue
            present.add(tag)
            result[field.name] = field.construct._parsereport(BytesIO(data), None, "(tagged)")
        for field in self.tagged:
            if field.tag not in present:
                result[field.name] = field.make_default()
        if present:
            result.present_tags = frozenset(present)

    def build_tagged_section(self, obj: Any, stream: BytesIO) -> None:
        present: frozenset[int] = getattr(obj, "present_tags", frozenset())
        entries: list[tuple[int, bytes]] = []
        for field in self.tagged:
            tag = field.tag
            assert tag is not None  # self.tagged holds the tagged fields only
            value = obj.get(field.name, field.default)
            if tag in present or value != field.default:
                body = BytesIO()
                field.construct._build(value, body, None, "(tagged)")
                entries.append((tag, body.getvalue()))
        unknown = getattr(obj, "unknown_tags", None)
        if unknown:
            entries.extend(unknown.items())
            entries.sort(key=lambda e: e[0])
        wire.write_uvarint(stream, len(entries))
        for tag, data in entries:
            wire.write_uvarint(stream, tag)
            wire.write_uvarint(stream, len(data))
            stream.write(data)

    # -- interpreted -----------------------------------------------------------------------------

    def _parse(self, stream: BytesIO, context: Any, path: str) -> MessageData:
        result = MessageData()
        for field in self.fields:
            result[field.name] = field.construct._parsereport(stream, context, path)
        if self.flexible:
            self.parse_tagged_section(stream, result)
        for field in self.absent:
            result[field.name] = field.make_default()
        return result

    def _build(self, obj: Any, stream: BytesIO, context: Any, path: str) -> Any:
        if not self.known_keys.issuperset(obj):
            self.reject_unknown_keys(obj)
        for field in self.fields:
            field.construct._build(obj.get(field.name, field.default), stream, context, path)
        if self.flexible:
            self.build_tagged_section(obj, stream)
        return obj

    # -- compiled --------------------------------------------------------------------------------

    def _link(self, code: Any) -> str:
        code.linkedinstances[id(self)] = self
        return f"linkedinstances[{id(self)}]"

    def _emitparse(self, code: Any) -> str:
        code.append(_WIRE_IMPORT)
        me = self._link(code)
        fname = f"parse_struct_{code.allocateId()}"
        lines = [f"def {fname}(io, this):", "    result = MessageData()"]
        for run in _fixed_runs(self.fields):
            if len(run) == 1:
                field = run[0]
                lines.append(f"    result[{field.name!r}] = {field.construct._compileparse(code)}")
                continue
            packer, size = _run_packer(code, run)
            targets = ", ".join(f"result[{f.name!r}]" for f in run)
            lines.append(f"    {targets} = {packer}.unpack(io.read({size}))")
        if self.flexible:
            lines.append("    tag_count = io.read(1)")
            lines.append("    if tag_count == b'\\x00':")
            for i, field in enumerate(self.tagged):
                lines.append(f"        result[{field.name!r}] = {_default_expr(field, f'{me}.tagged[{i}]')}")
            lines.append("        pass")
            # At the end of the input there is nothing to step back over: seeking back would
            # re-read the previous field's last byte as the tag count.
            lines.append("    elif not tag_count:")
            lines.append("        raise DecodeError('truncated input: missing tagged fields')")
            lines.append("    else:")
            lines.append("        io.seek(-1, 1)")
            lines.append(f"        {me}.parse_tagged_section(io, result)")
        for i, field in enumerate(self.absent):
            lines.append(f"    result[{field.name!r}] = {_default_expr(field, f'{me}.absent[{i}]')}")
        lines.append("    return result")
        code.append("\n".join(lines))
        return f"{fname}(io, this)"

    def _emitbuild(self, code: Any) -> str:
        code.append(_WIRE_IMPORT)
        me = self._link(code)
        fname = f"build_struct_{code.allocateId()}"
        known = f"known_keys_{code.allocateId()}"
        code.append(f"{known} = frozenset({sorted(self.known_keys)!r}).issuperset")
        lines = [
            f"def {fname}(obj, io, this):",
            "    objdict = obj",
            f"    if not {known}(obj):",
            f"        {me}.reject_unknown_keys(obj)",
            "    get = obj.get",
        ]
        index = {id(f): i for i, f in enumerate(self.fields)}
        for run in _fixed_runs(self.fields):
            defaults = [_build_default_expr(f, f"{me}.fields[{index[id(f)]}]") for f in run]
            if len(run) == 1:
                lines.append(f"    obj = get({run[0].name!r}, {defaults[0]})")
                lines.append(f"    {run[0].construct._compilebuild(code)}")
                continue
            packer, _ = _run_packer(code, run)
            values = ", ".join(f"get({f.name!r}, {d})" for f, d in zip(run, defaults))
            lines.append(f"    io.write({packer}.pack({values}))")
        if self.flexible:
            if self.tagged:
                # Fast path: nothing to tag (every tagged field at its default, none seen on
                # the wire) is one byte, without a call into the generic section writer.
                checks = ["getattr(objdict, 'present_tags', None)", "getattr(objdict, 'unknown_tags', None)"]
                for i, field in enumerate(self.tagged):
                    default = _build_default_expr(field, f"{me}.tagged[{i}]")
                    checks.append(f"get({field.name!r}, {default}) != {default}")
                lines.append(f"    if {' or '.join(checks)}:")
                lines.append(f"        {me}.build_tagged_section(objdict, io)")
                lines.append("    else:")
                lines.append("        io.write(b'\\x00')")
            else:
                lines.append("    if getattr(objdict, 'unknown_tags', None):")
                lines.append(f"        {me}.build_tagged_section(objdict, io)")
                lines.append("    else:")
                lines.append("        io.write(b'\\x00')")
        lines.append("    return objdict")
        code.append("\n".join(lines))
        return f"{fname}(obj, io, this)"
