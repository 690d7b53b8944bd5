"""The consumer embedded protocol: every version round-trips, newer versions are read as Kafka reads them,
bad bytes raise ConsumerProtocolError, and the bytes are kafka-python's (an independent encoder)."""

from __future__ import annotations

import contextlib
import json
import struct
from dataclasses import replace
from importlib import resources
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from protocol import consumer_protocol as cp
from protocol.errors import DecodeError, EncodeError
from protocol.schema import MessageSpec
from tests.protocol.test_schema_oracle import _compare as compare_fields

VERSIONS = list(range(cp.HIGHEST_SUBSCRIPTION_VERSION + 1))

topics = st.text(max_size=12)
partition_ids = st.integers(-(2**31), 2**31 - 1)
user_data = st.none() | st.binary(max_size=20)
topic_partitions = st.builds(cp.TopicPartitions, topics, st.lists(partition_ids, max_size=5).map(tuple))
partition_lists = st.lists(topic_partitions, max_size=4).map(tuple)
subscriptions = st.builds(
    cp.Subscription,
    topics=st.lists(topics, max_size=5).map(tuple),
    user_data=user_data,
    owned_partitions=partition_lists,
    generation_id=partition_ids,
    rack_id=st.none() | st.text(max_size=8),
)
assignments = st.builds(cp.Assignment, partitions=partition_lists, user_data=user_data)


def kafka_string(text: str) -> bytes:
    data = text.encode()
    return struct.pack(">h", len(data)) + data


def as_of_version(sub: cp.Subscription, version: int) -> cp.Subscription:
    """What survives encoding at ``version``: the fields it lacks come back at their defaults."""
    if version < 3:
        sub = replace(sub, rack_id=None)
    if version < 2:
        sub = replace(sub, generation_id=cp.NO_GENERATION)
    if version < 1:
        sub = replace(sub, owned_partitions=())
    return sub


# -- Kafka's bytes -----------------------------------------------------------------------------------


def test_subscription_v0_bytes() -> None:
    data = cp.encode_subscription(cp.Subscription(("orders", "payments")), version=0)
    assert data == (
        b"\x00\x00" + struct.pack(">i", 2) + kafka_string("orders") + kafka_string("payments") + b"\xff" * 4
    )


def test_subscription_v3_bytes() -> None:
    sub = cp.Subscription(("t",), b"ud", (cp.TopicPartitions("t", (0, 2)),), 7, "rack-a")
    data = cp.encode_subscription(sub)
    assert data == (
        b"\x00\x03"
        + struct.pack(">i", 1)
        + kafka_string("t")
        + struct.pack(">i", 2)
        + b"ud"
        + struct.pack(">i", 1)
        + kafka_string("t")
        + struct.pack(">iii", 2, 0, 2)
        + struct.pack(">i", 7)
        + kafka_string("rack-a")
    )
    assert cp.decode_subscription(data) == sub


def test_assignment_bytes_are_the_same_in_every_version() -> None:
    assignment = cp.Assignment.from_mapping({"a": [0, 2], "b": [1]})
    body = (
        struct.pack(">i", 2)
        + kafka_string("a")
        + struct.pack(">iii", 2, 0, 2)
        + kafka_string("b")
        + struct.pack(">ii", 1, 1)
        + b"\xff" * 4
    )
    for version in VERSIONS:
        assert cp.encode_assignment(assignment, version) == struct.pack(">h", version) + body
    assert cp.decode_assignment(b"\x00\x00" + body).as_dict() == {"a": [0, 2], "b": [1]}


def test_null_fields() -> None:
    sub = cp.Subscription((), user_data=None, rack_id=None)
    data = cp.encode_subscription(sub, version=3)
    assert data == b"\x00\x03" + b"\x00" * 4 + b"\xff" * 4 + b"\x00" * 4 + b"\xff\xff\xff\xff" + b"\xff\xff"
    assert cp.decode_subscription(data) == sub
    empty = cp.encode_subscription(cp.Subscription((), user_data=b"", rack_id=""), version=3)
    assert cp.decode_subscription(empty).user_data == b"" and cp.decode_subscription(empty).rack_id == ""
    null_topics = b"\x00\x00" + b"\xff" * 4 + b"\xff" * 4
    with pytest.raises(cp.ConsumerProtocolError):
        cp.decode_subscription(null_topics)


def test_fields_a_version_lacks_are_dropped_on_encode() -> None:
    sub = cp.Subscription(("t",), None, (cp.TopicPartitions("t", (1,)),), 4, "r")
    assert cp.encode_subscription(sub, version=0) == cp.encode_subscription(cp.Subscription(("t",)), 0)
    assert cp.decode_subscription(cp.encode_subscription(sub, version=1)).generation_id == cp.NO_GENERATION


def test_as_dict_joins_a_topic_listed_twice() -> None:
    assignment = cp.Assignment((cp.TopicPartitions("t", (0,)), cp.TopicPartitions("t", (3,))))
    assert assignment.as_dict() == {"t": [0, 3]}


# -- round trips -------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", VERSIONS)
@given(sub=subscriptions)
def test_subscription_round_trip(version: int, sub: cp.Subscription) -> None:
    data = cp.encode_subscription(sub, version)
    assert data[:2] == struct.pack(">h", version)
    assert cp.decode_subscription(data) == as_of_version(sub, version)


@pytest.mark.parametrize("version", VERSIONS)
@given(assignment=assignments)
def test_assignment_round_trip(version: int, assignment: cp.Assignment) -> None:
    assert cp.decode_assignment(cp.encode_assignment(assignment, version)) == assignment


# -- forward compatibility ---------------------------------------------------------------------------


@given(sub=subscriptions, version=st.integers(4, 2**15 - 1), trailing=st.binary(max_size=16))
def test_newer_subscription_is_read_as_the_highest_known(
    sub: cp.Subscription, version: int, trailing: bytes
) -> None:
    newest = cp.encode_subscription(sub, cp.HIGHEST_SUBSCRIPTION_VERSION)
    assert cp.decode_subscription(struct.pack(">h", version) + newest[2:] + trailing) == sub


@given(assignment=assignments, version=st.integers(4, 2**15 - 1), trailing=st.binary(max_size=16))
def test_newer_assignment_is_read_as_the_highest_known(
    assignment: cp.Assignment, version: int, trailing: bytes
) -> None:
    newest = cp.encode_assignment(assignment, cp.HIGHEST_ASSIGNMENT_VERSION)
    assert cp.decode_assignment(struct.pack(">h", version) + newest[2:] + trailing) == assignment


# -- bad input ---------------------------------------------------------------------------------------


@given(sub=subscriptions, data=st.data())
def test_truncated_subscription_raises(sub: cp.Subscription, data: st.DataObject) -> None:
    encoded = cp.encode_subscription(sub, data.draw(st.sampled_from(VERSIONS)))
    cut = data.draw(st.integers(0, len(encoded) - 1))
    with pytest.raises(cp.ConsumerProtocolError):
        cp.decode_subscription(encoded[:cut])


@given(assignment=assignments, data=st.data())
def test_truncated_assignment_raises(assignment: cp.Assignment, data: st.DataObject) -> None:
    encoded = cp.encode_assignment(assignment, data.draw(st.sampled_from(VERSIONS)))
    cut = data.draw(st.integers(0, len(encoded) - 1))
    with pytest.raises(cp.ConsumerProtocolError):
        cp.decode_assignment(encoded[:cut])


@given(garbage=st.binary(max_size=64))
def test_arbitrary_bytes_decode_or_raise_consumer_protocol_error(garbage: bytes) -> None:
    for decode in (cp.decode_subscription, cp.decode_assignment):
        with contextlib.suppress(cp.ConsumerProtocolError):
            decode(garbage)


def test_error_class_is_a_decode_error() -> None:
    assert issubclass(cp.ConsumerProtocolError, DecodeError)
    with pytest.raises(cp.ConsumerProtocolError, match="version"):
        cp.decode_assignment(b"\xff\xff" + b"\x00" * 8)
    with pytest.raises(cp.ConsumerProtocolError):
        cp.decode_subscription(b"\x00\x00\x00\x00\x00\x01\x00\x02\xc3\x28" + b"\xff" * 4)  # bad UTF-8


def test_unknown_version_or_bad_value_is_refused_on_encode() -> None:
    with pytest.raises(EncodeError):
        cp.encode_subscription(cp.Subscription(("t",)), version=4)
    with pytest.raises(EncodeError):
        cp.encode_assignment(cp.Assignment(), version=-1)
    with pytest.raises(EncodeError):
        cp.encode_assignment(cp.Assignment.from_mapping({"t": [2**31]}))


# -- Kafka's declarations and kafka-python's bytes ------------------------------------------------------


def kafka_json(name: str) -> dict[str, Any]:
    """Kafka's own spec of ``name``, from kafka-python's package data (comment lines dropped)."""
    pytest.importorskip("kafka.protocol.schemas")
    text = (resources.files("kafka.protocol.schemas") / "resources" / f"{name}.json").read_text()
    return json.loads("\n".join(line for line in text.splitlines() if not line.lstrip().startswith("//")))


@pytest.mark.parametrize("spec", [cp.SUBSCRIPTION_SPEC, cp.ASSIGNMENT_SPEC], ids=lambda s: s.name)
def test_declaration_matches_kafkas_json(spec: MessageSpec) -> None:
    theirs = kafka_json(spec.name)
    assert (theirs["validVersions"], theirs["flexibleVersions"]) == (spec.valid_versions, "none")
    problems = [
        problem
        for version in spec.version_list()
        for problem in compare_fields(spec.fields, theirs["fields"], theirs, version, spec.name)
    ]
    assert not problems, "\n".join(problems)


# -- kafka-python, byte for byte -----------------------------------------------------------------------


def kafka_python_metadata() -> Any:
    return pytest.importorskip("kafka.protocol.consumer.metadata")


@pytest.mark.parametrize("version", VERSIONS)
@given(sub=subscriptions)
def test_subscription_bytes_match_kafka_python(version: int, sub: cp.Subscription) -> None:
    theirs = kafka_python_metadata().ConsumerProtocolSubscription
    fields: dict[str, Any] = {"topics": list(sub.topics), "user_data": sub.user_data}
    if version >= 1:
        fields["owned_partitions"] = [
            theirs.TopicPartition(topic=t, partitions=list(p)) for t, p in sub.owned_partitions
        ]
    if version >= 2:
        fields["generation_id"] = sub.generation_id
    if version >= 3:
        fields["rack_id"] = sub.rack_id
    expected = theirs(version=version, **fields).encode()
    assert cp.encode_subscription(sub, version) == expected
    assert cp.decode_subscription(expected) == as_of_version(sub, version)


@pytest.mark.parametrize("version", VERSIONS)
@given(assignment=assignments)
def test_assignment_bytes_match_kafka_python(version: int, assignment: cp.Assignment) -> None:
    theirs = kafka_python_metadata().ConsumerProtocolAssignment
    expected = theirs(
        version=version,
        assigned_partitions=[
            theirs.TopicPartition(topic=t, partitions=list(p)) for t, p in assignment.partitions
        ],
        user_data=assignment.user_data,
    ).encode()
    assert cp.encode_assignment(assignment, version) == expected
    decoded = theirs.decode(expected)
    assert [(tp.topic, tuple(tp.partitions)) for tp in decoded.assigned_partitions] == list(
        assignment.partitions
    )
