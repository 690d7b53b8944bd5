"""Encoding refuses a key that no version of its struct declares, and ignores other versions' keys.

A misspelt key used to encode the field's default silently. Now it raises
:class:`~protocol.errors.UnknownFieldError` naming the key, the message, its version and where the
struct sits in the message; a key of a field that exists only in other versions of the message is
still accepted (handlers build one dict for every version) and changes nothing on the wire.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from protocol.consumer_offsets import OFFSET_COMMIT_VALUE_SPEC
from protocol.errors import EncodeError, UnknownFieldError
from protocol.messages import REQUESTS, RESPONSES
from protocol.messages.fetch import FETCH_REQUEST, FETCH_RESPONSE
from protocol.schema import Field, MessageSpec
from protocol.versioned import encode_versioned
from tests.protocol.strategies import message_strategy

CASES = [(spec, v) for spec in [*REQUESTS.values(), *RESPONSES.values()] for v in spec.version_list()]
IDS = [f"{spec.name}-v{v}" for spec, v in CASES]

_ANY_VALUE = st.one_of(st.integers(), st.text(max_size=5), st.none(), st.lists(st.integers(), max_size=2))


def _with_other_versions(
    fields: tuple[Field, ...], version: int, obj: dict[str, Any], data: st.DataObject
) -> dict[str, Any]:
    """``obj`` plus a key (with any value) for every field this version lacks, at every depth."""
    out = dict(obj)
    for f in fields:
        if not f.exists_in(version):
            out[f.name] = data.draw(_ANY_VALUE)
        elif f.is_struct and obj[f.name] is not None:
            value = obj[f.name]
            if f.is_array:
                out[f.name] = [_with_other_versions(f.fields, version, item, data) for item in value]
            else:
                out[f.name] = _with_other_versions(f.fields, version, value, data)
    return out


def _structs(
    fields: tuple[Field, ...], version: int, obj: dict[str, Any], path: str = ""
) -> list[tuple[dict[str, Any], tuple[Field, ...], str]]:
    """Every struct value inside ``obj`` (itself included): (the dict, its fields, its path)."""
    found = [(obj, fields, path)]
    for f in fields:
        if f.is_struct and f.exists_in(version) and obj[f.name] is not None:
            here = f"{path}.{f.name}" if path else f.name
            if f.is_array:
                for item in obj[f.name]:
                    found += _structs(f.fields, version, item, f"{here}[]")
            else:
                found += _structs(f.fields, version, obj[f.name], here)
    return found


@pytest.mark.parametrize(("spec", "version"), CASES, ids=IDS)
@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_keys_of_other_versions_are_ignored(spec: MessageSpec, version: int, data: st.DataObject) -> None:
    obj = data.draw(message_strategy(spec, version))
    wider = _with_other_versions(spec.fields, version, obj, data)
    for compiled in (True, False):
        codec = spec.codec(version, compiled=compiled)
        assert codec.encode(wider) == codec.encode(obj)


@pytest.mark.parametrize(("spec", "version"), CASES, ids=IDS)
@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_a_key_no_version_declares_is_refused(spec: MessageSpec, version: int, data: st.DataObject) -> None:
    obj = data.draw(message_strategy(spec, version))
    target, fields, path = data.draw(st.sampled_from(_structs(spec.fields, version, obj)))
    known = {f.name for f in fields}
    key = data.draw(st.text(min_size=1, max_size=12).filter(lambda k: k not in known))
    target[key] = data.draw(_ANY_VALUE)
    for compiled in (True, False):
        with pytest.raises(UnknownFieldError) as caught:
            spec.codec(version, compiled=compiled).encode(obj)
        assert caught.value.keys == (key,)
        assert caught.value.struct == path
        assert str(caught.value).startswith(f"{spec.name} v{version}: unknown key {key!r}")


def test_the_error_names_the_key_the_message_the_version_and_the_struct() -> None:
    body = {"topics": [{"topic": "t", "partitions": [{"partition": 0, "fetch_ofset": 7}]}]}
    with pytest.raises(
        UnknownFieldError, match=r"^FetchRequest v12: unknown key 'fetch_ofset' in topics\[\]\.partitions\[\]"
    ):
        FETCH_REQUEST.codec(12).encode(body)


def test_several_unknown_keys_are_all_named() -> None:
    with pytest.raises(UnknownFieldError) as caught:
        FETCH_RESPONSE.codec(16).encode({"throttle_time": 0, "errorcode": 0, "responses": []})
    assert caught.value.keys == ("errorcode", "throttle_time")
    assert "FetchResponse v16: unknown keys 'errorcode', 'throttle_time':" in str(caught.value)


def test_it_is_an_encode_error() -> None:
    """Callers that catch the codec's EncodeError keep working."""
    assert issubclass(UnknownFieldError, EncodeError)


def test_a_field_of_later_versions_only_is_accepted_and_not_written() -> None:
    """replica_directory_id exists from Fetch v17 only (a handler may set it for every version)."""
    partition: dict[str, Any] = {"partition": 0, "fetch_offset": 5}
    body = {"topics": [{"topic": "t", "partitions": [partition]}]}
    codec = FETCH_REQUEST.codec(12)
    plain = codec.encode(body)
    partition["replica_directory_id"] = "anything: never written"
    assert codec.encode(body) == plain


def test_versioned_structs_check_keys_against_every_version() -> None:
    """__consumer_offsets values: expire_timestamp exists in v1 only, leader_epoch from v3."""
    value = {"offset": 1, "metadata": "", "commit_timestamp": 2, "expire_timestamp": 3, "leader_epoch": 4}
    without_v1 = {k: v for k, v in value.items() if k != "expire_timestamp"}
    assert encode_versioned(OFFSET_COMMIT_VALUE_SPEC, 3, value) == encode_versioned(
        OFFSET_COMMIT_VALUE_SPEC, 3, without_v1
    )
    with pytest.raises(UnknownFieldError, match=r"^OffsetCommitValue v3: unknown key 'comit_timestamp'"):
        encode_versioned(OFFSET_COMMIT_VALUE_SPEC, 3, {"offset": 1, "comit_timestamp": 2})
