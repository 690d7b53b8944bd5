"""Rack-aware replica placement: Kafka's published examples and its guarantees, as properties."""

from __future__ import annotations

from collections import Counter

from hypothesis import given
from hypothesis import strategies as st

from metadata.controller import topic_rules
from metadata.controller.topic_rules import ClusterBrokers, TopicDefaults

KAFKA_RACKS = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}


def test_brokers_alternate_racks() -> None:
    assert topic_rules.rack_alternated(KAFKA_RACKS) == [0, 3, 1, 5, 4, 2]
    without_five = {b: r for b, r in KAFKA_RACKS.items() if b != 5}
    assert topic_rules.rack_alternated(without_five) == [0, 3, 1, 4, 2]


def test_assignment_matches_kafkas() -> None:
    """AdminUtils' example: 7 partitions, factor 3, start index 0."""
    assert topic_rules.place_rack_aware(7, 3, KAFKA_RACKS) == [
        [0, 3, 1],
        [3, 1, 5],
        [1, 5, 4],
        [5, 4, 2],
        [4, 2, 0],
        [2, 0, 3],
        [0, 4, 2],
    ]


def test_topic_creation_uses_racks_when_brokers_have_them() -> None:
    brokers = ClusterBrokers.of(range(6), range(6), KAFKA_RACKS)
    plan = topic_rules.placed_replicas(6, 3, brokers, TopicDefaults())
    for replicas in plan:
        assert len({KAFKA_RACKS[b] for b in replicas}) == 3
    assert Counter(replicas[0] for replicas in plan) == Counter(range(6))


def test_no_racks_keeps_the_rack_unaware_scheme() -> None:
    brokers = ClusterBrokers.of([1, 2, 3], [1, 2, 3], {1: None, 2: None, 3: None})
    assert topic_rules.placed_replicas(3, 2, brokers, TopicDefaults()) == [[1, 2], [2, 3], [3, 1]]


def test_one_host_of_several_processes_spreads_over_all_of_them() -> None:
    """A node of eight broker processes is one rack: replicas still go to distinct brokers, and the
    leaders of 16 partitions are two per process."""
    racks = dict.fromkeys(range(8), "host-a")
    plan = topic_rules.place_rack_aware(16, 3, racks)
    assert all(len(set(replicas)) == 3 for replicas in plan)
    assert Counter(replicas[0] for replicas in plan) == Counter({b: 2 for b in range(8)})


def test_brokers_without_a_rack_count_as_one_rack() -> None:
    racks = {1: "a", 2: "a", 3: None, 4: None}
    for replicas in topic_rules.place(8, 2, [1, 2, 3, 4], 0, {1: "a", 2: "a"}):
        assert {racks[b] for b in replicas} == {"a", None}


@given(
    rack_sizes=st.lists(st.integers(1, 4), min_size=1, max_size=5),
    partitions=st.integers(1, 40),
    factor_seed=st.integers(1, 10),
    start=st.integers(0, 20),
)
def test_placement_properties(rack_sizes: list[int], partitions: int, factor_seed: int, start: int) -> None:
    """Distinct brokers per partition; as many racks as the factor allows; leaders balanced."""
    racks = {}
    broker = 0
    for rack, size in enumerate(rack_sizes):
        for _ in range(size):
            racks[broker] = f"rack{rack}"
            broker += 1
    factor = 1 + factor_seed % len(racks)
    plan = topic_rules.place(partitions, factor, sorted(racks), start, racks)
    assert len(plan) == partitions
    for replicas in plan:
        assert len(set(replicas)) == factor
        assert len({racks[b] for b in replicas}) == min(factor, len(rack_sizes))
    leaders = Counter(replicas[0] for replicas in plan)
    assert max(leaders.values()) - min(leaders.get(b, 0) for b in racks) <= 1
