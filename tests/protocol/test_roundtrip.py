"""Every version of every declared message survives encode → decode, compiled and interpreted."""

from __future__ import annotations

import contextlib
import tracemalloc

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from protocol.data import to_plain
from protocol.errors import DecodeError
from protocol.messages import REQUESTS, RESPONSES
from protocol.schema import MessageSpec
from tests.protocol.strategies import message_strategy, with_defaults

CASES = [(spec, v) for spec in [*REQUESTS.values(), *RESPONSES.values()] for v in spec.version_list()]
IDS = [f"{spec.name}-v{v}" for spec, v in CASES]


@pytest.mark.parametrize(("spec", "version"), CASES, ids=IDS)
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_roundtrip(spec: MessageSpec, version: int, data: st.DataObject) -> None:
    obj = data.draw(message_strategy(spec, version))
    compiled = spec.codec(version)
    interpreted = spec.codec(version, compiled=False)
    encoded = compiled.encode(obj)
    assert interpreted.encode(obj) == encoded
    decoded = compiled.decode(encoded)
    assert to_plain(decoded) == to_plain(with_defaults(spec.fields, version, obj))
    assert to_plain(interpreted.decode(encoded)) == to_plain(decoded)
    assert compiled.encode(decoded) == encoded


@pytest.mark.parametrize(("spec", "version"), CASES, ids=IDS)
@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_truncated_input_raises_decode_error(spec: MessageSpec, version: int, data: st.DataObject) -> None:
    """Every proper prefix of a body is incomplete, so both codecs must refuse it (the compiled
    one once accepted a flexible body cut just before its last tag buffer)."""
    encoded = spec.codec(version).encode(data.draw(message_strategy(spec, version)))
    for compiled in (True, False):
        codec = spec.codec(version, compiled=compiled)
        for cut in range(len(encoded)):
            with pytest.raises(DecodeError):
                codec.decode(encoded[:cut])


@pytest.mark.parametrize(("spec", "version"), CASES[::7], ids=IDS[::7])
@settings(max_examples=30, deadline=None)
@given(garbage=st.binary(max_size=64))
def test_random_bytes_only_raise_decode_error(spec: MessageSpec, version: int, garbage: bytes) -> None:
    with contextlib.suppress(DecodeError):
        spec.codec(version).decode(garbage)


@pytest.mark.parametrize("compact", [False, True])
def test_huge_array_count_is_refused_before_allocating(compact: bool) -> None:
    """A 2-billion element count in a tiny frame fails fast without building elements."""
    spec = RESPONSES[18]
    version = 3 if compact else 0
    count = b"\x7f\xff\xff\xff" if not compact else b"\xff\xff\xff\xff\x07"
    frame = b"\x00\x00" + count + b"\x00" * 16
    codec = spec.codec(version)  # compiled (and cached) first: only the decode is measured
    tracemalloc.start()
    with pytest.raises(DecodeError, match="array count"):
        codec.decode(frame)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 64 * 1024


def test_huge_string_length_is_refused() -> None:
    spec = REQUESTS[18]
    with pytest.raises(DecodeError):
        spec.codec(3).decode(b"\xff\xff\xff\xff\x0f" + b"x" * 8)


def test_overlong_varint_is_refused() -> None:
    spec = REQUESTS[18]
    with pytest.raises(DecodeError, match="varint"):
        spec.codec(3).decode(b"\xff" * 12)
