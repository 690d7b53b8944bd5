"""The range and roundrobin assignors: Kafka's documented examples, the properties that make them
assignors, and the same answer as kafka-python's on random groups."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from client.assignors import (
    ASSIGNORS,
    GroupAssignment,
    MemberSubscription,
    PartitionAssignor,
    RangeAssignor,
    RoundRobinAssignor,
    UnknownAssignorError,
    assignor_for,
    java_string_key,
    leader_assignments,
    sorted_members,
)
from protocol.consumer_protocol import Subscription, decode_assignment, encode_subscription

RANGE = RangeAssignor()
ROUND_ROBIN = RoundRobinAssignor()
BOTH = [RANGE, ROUND_ROBIN]


def group(*members: tuple[str, set[str]] | tuple[str, set[str], str]) -> dict[str, MemberSubscription]:
    """Members as (member id, topics) or (member id, topics, group instance id)."""
    out = {}
    for member_id, topics, *instance in members:
        out[member_id] = MemberSubscription(member_id, frozenset(topics), instance[0] if instance else None)
    return out


# -- Kafka's documented examples ---------------------------------------------------------------------


def test_range_example_from_kafkas_javadoc() -> None:
    members = group(("C0", {"t0", "t1"}), ("C1", {"t0", "t1"}))
    assert RANGE.assign(members, {"t0": 3, "t1": 3}) == {
        "C0": {"t0": [0, 1], "t1": [0, 1]},
        "C1": {"t0": [2], "t1": [2]},
    }


def test_roundrobin_example_from_kafkas_javadoc() -> None:
    members = group(("C0", {"t0", "t1"}), ("C1", {"t0", "t1"}))
    assert ROUND_ROBIN.assign(members, {"t0": 3, "t1": 3}) == {
        "C0": {"t0": [0, 2], "t1": [1]},
        "C1": {"t0": [1], "t1": [0, 2]},
    }


def test_roundrobin_skips_members_not_subscribed_as_in_kafkas_javadoc() -> None:
    members = group(("C0", {"t0"}), ("C1", {"t0", "t1"}), ("C2", {"t0", "t1", "t2"}))
    assert ROUND_ROBIN.assign(members, {"t0": 1, "t1": 2, "t2": 3}) == {
        "C0": {"t0": [0]},
        "C1": {"t1": [0]},
        "C2": {"t1": [1], "t2": [0, 1, 2]},
    }


def test_roundrobin_static_members_keep_their_partitions_across_new_member_ids() -> None:
    """Kafka's javadoc: after a rolling bounce C0..C2 become C5, C3, C4; instance ids I0..I2 persist."""
    before = group(("C0", {"t0", "t1"}, "I0"), ("C1", {"t0", "t1"}, "I1"), ("C2", {"t0", "t1"}, "I2"))
    after = group(("C5", {"t0", "t1"}, "I0"), ("C3", {"t0", "t1"}, "I1"), ("C4", {"t0", "t1"}, "I2"))
    counts = {"t0": 3, "t1": 3}
    first, second = ROUND_ROBIN.assign(before, counts), ROUND_ROBIN.assign(after, counts)
    assert first == {"C0": {"t0": [0], "t1": [0]}, "C1": {"t0": [1], "t1": [1]}, "C2": {"t0": [2], "t1": [2]}}
    renamed = {"C0": "C5", "C1": "C3", "C2": "C4"}
    assert second == {renamed[m]: topics for m, topics in first.items()}


def test_range_mixed_subscriptions_as_in_kafkas_tests() -> None:
    members = group(("consumer1", {"topic1"}), ("consumer2", {"topic1", "topic2"}), ("consumer3", {"topic1"}))
    assert RANGE.assign(members, {"topic1": 3, "topic2": 2}) == {
        "consumer1": {"topic1": [0]},
        "consumer2": {"topic1": [1], "topic2": [0, 1]},
        "consumer3": {"topic1": [2]},
    }


@pytest.mark.parametrize("assignor", BOTH, ids=lambda a: a.name)
def test_every_member_appears_and_unknown_topics_are_skipped(assignor: PartitionAssignor) -> None:
    members = group(("a", set()), ("b", {"missing"}), ("c", {"t"}), ("d", {"t"}))
    assert assignor.assign(members, {"t": 1, "unsubscribed": 4}) == {
        "a": {},
        "b": {},
        "c": {"t": [0]},
        "d": {},
    }
    assert assignor.assign({}, {"t": 3}) == {}


@pytest.mark.parametrize("assignor", BOTH, ids=lambda a: a.name)
def test_static_members_come_first_by_instance_id_then_dynamic_by_member_id(
    assignor: PartitionAssignor,
) -> None:
    # Given in an order that interleaves static and dynamic members (kafka-python drops one here).
    members = group(("m1", {"t"}, "s2"), ("m0", {"t"}), ("m3", {"t"}, "s1"), ("a", {"t"}))
    assert sorted_members(members) == ["m3", "m1", "a", "m0"]
    result = assignor.assign(members, {"t": 4})
    assert [result[m]["t"] for m in ("m3", "m1", "a", "m0")] == [[0], [1], [2], [3]]


def test_strings_compare_as_java_does() -> None:
    """U+1F600 is a surrogate pair in UTF-16 (0xD83D...), so Java puts it before U+FF21."""
    assert "\U0001f600" > "\uff21"  # Python: by code point
    assert java_string_key("\U0001f600") < java_string_key("\uff21")
    members = group(("\uff21", {"t"}), ("\U0001f600", {"t"}))
    assert RANGE.assign(members, {"t": 1}) == {"\U0001f600": {"t": [0]}, "\uff21": {}}


def test_a_topic_listed_twice_counts_once() -> None:
    members = {"a": MemberSubscription("a", ["t", "t"]), "b": MemberSubscription("b", ["t"])}  # type: ignore[arg-type]
    assert RANGE.assign(members, {"t": 2}) == {"a": {"t": [0]}, "b": {"t": [1]}}


# -- registry and the leader's job -------------------------------------------------------------------


def test_registry_and_protocol_choice() -> None:
    assert set(ASSIGNORS) == {"range", "roundrobin"}
    assert isinstance(assignor_for("range"), RangeAssignor)
    assert isinstance(assignor_for("roundrobin"), RoundRobinAssignor)
    with pytest.raises(UnknownAssignorError, match="sticky"):
        assignor_for("sticky")


def test_leader_assignments_decode_subscriptions_and_encode_assignments() -> None:
    members = [
        ("c1", None, encode_subscription(Subscription(("t0", "t1")))),
        ("c0", None, encode_subscription(Subscription(("t0",)), version=0)),
    ]
    out = leader_assignments("range", members, {"t0": 3, "t1": 2})
    assert {m: decode_assignment(data).as_dict() for m, data in out.items()} == {
        "c0": {"t0": [0, 1]},
        "c1": {"t0": [2], "t1": [0, 1]},
    }


# -- properties ----------------------------------------------------------------------------------------

TOPICS = ["a", "b", "c", "d", "e"]
member_ids = st.text(alphabet="mnop012", min_size=1, max_size=4)
instance_ids = st.none() | st.text(alphabet="xyz", min_size=1, max_size=3)


Group = tuple[dict[str, MemberSubscription], dict[str, int]]
"""Members by id, and partition counts by topic."""


@st.composite
def groups(draw: st.DrawFn, same_topics: bool = False) -> Group:
    ids = draw(st.lists(member_ids, min_size=1, max_size=6, unique=True))
    instances = draw(st.lists(instance_ids, min_size=len(ids), max_size=len(ids)))
    shared = draw(st.frozensets(st.sampled_from(TOPICS)))
    members = {}
    for member_id, instance in zip(ids, instances):
        topics = shared if same_topics else draw(st.frozensets(st.sampled_from(TOPICS)))
        members[member_id] = MemberSubscription(member_id, topics, instance)
    counts = draw(st.dictionaries(st.sampled_from(TOPICS), st.integers(0, 12)))
    return members, counts


def owners(result: GroupAssignment) -> Counter[tuple[str, int]]:
    return Counter((t, p) for topics in result.values() for t, ps in topics.items() for p in ps)


def check_complete(
    members: Mapping[str, MemberSubscription], counts: Mapping[str, int], result: GroupAssignment
) -> None:
    assert set(result) == set(members)
    subscribed = set().union(*(m.topics for m in members.values()))
    expected = {(t, p) for t in subscribed for p in range(counts.get(t, 0))}
    assert owners(result) == Counter(expected)  # each partition exactly once
    for member, topics in result.items():
        assert set(topics) <= members[member].topics
        assert all(partitions for partitions in topics.values())


@pytest.mark.parametrize("assignor", BOTH, ids=lambda a: a.name)
@given(case=groups())
def test_every_partition_goes_to_exactly_one_subscriber(assignor: PartitionAssignor, case: Group) -> None:
    members, counts = case
    check_complete(members, counts, assignor.assign(members, counts))


@given(case=groups())
def test_range_gives_contiguous_balanced_ranges_in_member_order(case: Group) -> None:
    members, counts = case
    result = RANGE.assign(members, counts)
    order = sorted_members(members)
    for topic, count in counts.items():
        subscribers = [m for m in order if topic in members[m].topics]
        if not subscribers:
            continue
        ranges = [result[m].get(topic, []) for m in subscribers]
        assert [p for r in ranges for p in r] == list(range(count))  # contiguous, in member order
        assert max(map(len, ranges)) - min(map(len, ranges)) <= 1
        assert [len(r) for r in ranges] == sorted((len(r) for r in ranges), reverse=True)


@given(case=groups(same_topics=True))
def test_roundrobin_balances_totals_when_subscriptions_are_equal(case: Group) -> None:
    members, counts = case
    totals = [sum(map(len, topics.values())) for topics in ROUND_ROBIN.assign(members, counts).values()]
    assert max(totals) - min(totals) <= 1


# -- kafka-python, an independent implementation ---------------------------------------------------


class FakeCluster:
    """What kafka-python's assignors read of ClusterMetadata: the partition ids of a topic."""

    def __init__(self, counts: Mapping[str, int]) -> None:
        self.counts = counts

    def partitions_for_topic(self, topic: str) -> set[int] | None:
        count = self.counts.get(topic)
        return None if count is None else set(range(count))


def kafka_python_assign(
    assignor: Any, members: Mapping[str, MemberSubscription], counts: Mapping[str, int]
) -> GroupAssignment:
    """kafka-python's answer, as a GroupAssignment. It sorts static and dynamic members with a
    ``groupby`` that only works when the static ones come first, so they are handed over that way."""
    listed = sorted(members.values(), key=lambda m: m.group_instance_id is None)
    joined = [
        SimpleNamespace(
            member_id=m.member_id,
            group_instance_id=m.group_instance_id,
            metadata=SimpleNamespace(topics=sorted(m.topics)),
        )
        for m in listed
    ]
    result = assignor.assign(FakeCluster(counts), joined)
    return {
        member: {topic: list(ps) for topic, ps in a.assigned_partitions if ps} for member, a in result.items()
    }


def kafka_python_assignor(module: str, name: str) -> Any:
    return getattr(pytest.importorskip(f"kafka.coordinator.assignors.{module}"), name)


@given(case=groups())
def test_range_matches_kafka_python(case: Group) -> None:
    members, counts = case
    theirs = kafka_python_assignor("range", "RangePartitionAssignor")
    assert RANGE.assign(members, counts) == kafka_python_assign(theirs, members, counts)


@given(case=groups(same_topics=True))
def test_roundrobin_matches_kafka_python(case: Group) -> None:
    """Equal subscriptions only: kafka-python's round robin raises KeyError when it must skip a member
    (it rebinds ``member_id`` to the (instance id, member id) pair); Kafka's javadoc example covers that."""
    members, counts = case
    theirs = kafka_python_assignor("roundrobin", "RoundRobinPartitionAssignor")
    assert ROUND_ROBIN.assign(members, counts) == kafka_python_assign(theirs, members, counts)
