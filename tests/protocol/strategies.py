"""Hypothesis strategies derived from kipling's own message declarations."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from protocol.schema import Field, MessageSpec

_INT_BOUNDS = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "uint16": (0, 2**16 - 1),
    "uint32": (0, 2**32 - 1),
}
_SMALL_TEXT = st.text(max_size=12)
_SMALL_BYTES = st.binary(max_size=24)


def _primitive(type_name: str) -> st.SearchStrategy[Any]:
    if type_name in _INT_BOUNDS:
        low, high = _INT_BOUNDS[type_name]
        return st.integers(low, high)
    return {
        "bool": st.booleans(),
        "float64": st.floats(allow_nan=False),
        "string": _SMALL_TEXT,
        "bytes": _SMALL_BYTES,
        "records": _SMALL_BYTES,
        "uuid": st.uuids(),
    }[type_name]


def _value(f: Field, version: int) -> st.SearchStrategy[Any]:
    if f.is_struct:
        element: st.SearchStrategy[Any] = struct_strategy(f.fields, version)
    else:
        element = _primitive(f.element_type)
        if f.nullable_in(version) and not f.is_array:
            element = st.none() | element
    if f.is_array:
        array = st.lists(element, max_size=3)
        return (st.none() | array) if f.nullable_in(version) else array
    return element


def struct_strategy(fields: tuple[Field, ...], version: int) -> st.SearchStrategy[dict[str, Any]]:
    present = {f.name: _value(f, version) for f in fields if f.exists_in(version)}
    return st.fixed_dictionaries(present)


def message_strategy(spec: MessageSpec, version: int) -> st.SearchStrategy[dict[str, Any]]:
    return struct_strategy(spec.fields, version)


def with_defaults(fields: tuple[Field, ...], version: int, obj: dict[str, Any]) -> dict[str, Any]:
    """What decoding ``obj``'s encoding must give: absent fields hold their defaults."""
    out: dict[str, Any] = {}
    for f in fields:
        if not f.exists_in(version):
            out[f.name] = f.default_value()
            continue
        value = obj[f.name]
        if f.is_struct and value is not None:
            if f.is_array:
                value = [with_defaults(f.fields, version, item) for item in value]
            else:
                value = with_defaults(f.fields, version, value)
        out[f.name] = value
    return out
