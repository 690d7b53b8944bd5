"""Moving with leadership of ``__consumer_offsets``: unload, load, and the log as the source of truth."""

from __future__ import annotations

from typing import Any

import pytest

from coordinator.group import GroupState, LoggedRecord, MemberIdentity, partition_for
from coordinator.group.group import GroupMetadata
from protocol import consumer_offsets as co
from protocol.error_codes import ErrorCode
from tests.coordinator.group.helpers import SESSION_MS, Harness, config

E = ErrorCode


def durable_view(groups: list[GroupMetadata]) -> dict[str, dict[str, Any]]:
    """What ``__consumer_offsets`` holds of settled (Stable or Empty) groups, as the live groups see it.

    Left out, because Kafka does not keep them either: groups with nothing written (generation 0,
    no offsets); when a Stable group entered Stable (the record has the time its generation began)
    and when an offsets-only group was created (loading sets it to the load time); where each
    offset's record sits (a batch's first offset live, the record's own offset on load).
    """
    view: dict[str, dict[str, Any]] = {}
    for group in groups:
        assert group.state in (GroupState.STABLE, GroupState.EMPTY), group
        if group.generation_id == 0 and not group.offsets.committed:
            continue
        protocol = group.protocol_name
        view[group.group_id] = {
            "state": group.state,
            "generation": group.generation_id,
            "protocol_type": group.protocol_type or None,
            "protocol": protocol,
            "leader": group.leader_id,
            "since": group.current_state_timestamp
            if group.is_in(GroupState.EMPTY) and group.generation_id
            else None,
            "members": [
                (
                    m.member_id,
                    m.group_instance_id,
                    m.client_id,
                    m.client_host,
                    m.rebalance_timeout_ms,
                    m.session_timeout_ms,
                    m.metadata(protocol) if protocol is not None else None,
                    m.assignment,
                )
                for m in group.members
            ],
            "offsets": group.offsets.all(),
        }
    return view


def reloaded(h: Harness, partitions: range | None = None) -> dict[str, dict[str, Any]]:
    """The groups a brand-new coordinator rebuilds from the log. It runs on its own timers (never
    advanced) and log, so its loaded members' sessions cannot fire into the live test."""
    fresh = Harness(h.config, load=False)
    for partition in partitions or range(h.config.offsets_topic_num_partitions):
        fresh.coordinator.load_partition(partition, h.log.records(partition))
    return durable_view(fresh.coordinator.groups())


def test_partition_for_matches_kafka() -> None:
    assert partition_for("hello", 50) == 99162322 % 50  # Java: "hello".hashCode() == 99162322
    assert partition_for("polygenelubricants", 50) == 0  # hashCode is Integer.MIN_VALUE
    assert partition_for("", 7) == 0
    with pytest.raises(ValueError):
        partition_for("g", 0)


def test_a_stable_group_and_its_offsets_survive_a_move() -> None:
    h = Harness()
    leader, follower = h.stable_group(2)
    h.commit(member_id=leader.member_id, generation=1, offsets={("t", 0): 5}, metadata="m")
    h.commit("manual", {("t", 1): 9})
    before = durable_view(h.coordinator.groups())
    h.coordinator.unload_partition(0)
    assert h.coordinator.groups() == [] and h.heartbeats.num_delayed == 0
    assert h.heartbeat("group", leader.member_id, 1) is E.NOT_COORDINATOR
    h.coordinator.load_partition(0, h.log.records(0))
    assert durable_view(h.coordinator.groups()) == before
    assert h.heartbeat("group", leader.member_id, 1) is E.NONE
    assert (
        h.sync("group", follower.member_id, 1).value.assignment == f"assignment-{follower.member_id}".encode()
    )


def test_loaded_members_must_heartbeat_within_their_session() -> None:
    h = Harness()
    leader, follower = h.stable_group(2)
    h.coordinator.unload_partition(0)
    h.coordinator.load_partition(0, h.log.records(0))
    for _ in range(3):
        h.advance(SESSION_MS // 2)
        h.heartbeat("group", leader.member_id, 1)
    group = h.coordinator.group("group")
    assert not group.has(follower.member_id) and group.state is GroupState.PREPARING_REBALANCE


def test_unloading_answers_everyone_waiting_with_not_coordinator() -> None:
    h = Harness()
    leader, follower = h.stable_group(2)
    parked_join = h.join(member_id=leader.member_id)
    h.coordinator.unload_partition(0)
    assert parked_join.value.error is E.NOT_COORDINATOR
    assert h.rebalances.num_delayed == 0 and h.heartbeats.num_delayed == 0

    h.coordinator.load_partition(0, h.log.records(0))
    replies = [h.join(member_id=leader.member_id), h.join(member_id=follower.member_id)]
    results = [r.value for r in replies]
    parked_sync = h.sync("group", follower.member_id, 2)
    h.coordinator.unload_partition(0)
    assert parked_sync.value.error is E.NOT_COORDINATOR
    assert results[0].generation_id == 2


def test_a_group_that_was_deleted_stays_deleted() -> None:
    h = Harness()
    (member,) = h.stable_group(1)
    h.coordinator.leave_group("group", [MemberIdentity(member.member_id)])
    h.coordinator.delete_groups(["group"], lambda errors: None)
    assert reloaded(h) == {}


def test_loading_skips_unknown_keys_and_reads_old_value_versions() -> None:
    member = {
        "member_id": "m-1",
        "client_id": "c",
        "client_host": "/h",
        "session_timeout": 7000,
        "subscription": b"sub",
        "assignment": b"asg",
    }
    v0 = co.encode_group_metadata_value(
        {
            "protocol_type": "consumer",
            "generation": 4,
            "protocol": "range",
            "leader": "m-1",
            "members": [member],
        },
        version=0,
    )
    offset_v0 = co.encode_offset_commit_value(
        {"offset": 3, "metadata": "", "commit_timestamp": 11}, version=0
    )
    records = [
        LoggedRecord(0, b"\x00\x09whatever", b"ignored"),
        LoggedRecord(1, co.encode_group_metadata_key("old"), v0),
        LoggedRecord(2, co.encode_offset_commit_key("old", "t", 0), offset_v0),
    ]
    h = Harness(load=False)
    h.coordinator.load_partition(0, records)
    group = h.coordinator.group("old")
    assert group.state is GroupState.STABLE and group.generation_id == 4
    assert group.current_state_timestamp is None
    loaded = group.get("m-1")
    assert (loaded.rebalance_timeout_ms, loaded.session_timeout_ms) == (
        7000,
        7000,
    )  # v0: no rebalance timeout
    assert loaded.supported_protocols == (("range", b"sub"),) and loaded.assignment == b"asg"
    assert h.coordinator.fetch_offsets("old", [("t", 0)]).partitions[("t", 0)].offset == 3


def test_a_corrupt_partition_is_owned_but_empty() -> None:
    h = Harness(load=False)
    h.coordinator.load_partition(0, [LoggedRecord(0, co.encode_group_metadata_key("g"), b"\x00\x63garbage")])
    assert h.coordinator.owned_partitions == {0} and h.coordinator.groups() == []


def test_a_loaded_group_over_the_size_limit_rebalances() -> None:
    h = Harness()
    h.stable_group(3)
    smaller = Harness(config(group_max_size=2), load=False)
    smaller.coordinator.load_partition(0, h.log.records(0))
    assert smaller.coordinator.group("group").state is GroupState.PREPARING_REBALANCE


def test_only_the_groups_of_a_partition_move_with_it() -> None:
    h = Harness(config(offsets_topic_num_partitions=4))
    names = [f"group-{i}" for i in range(12)]
    for name in names:
        h.commit(name)
    target = h.coordinator.partition_for(names[0])
    h.coordinator.unload_partition(target)
    remaining = {g.group_id for g in h.coordinator.groups()}
    assert remaining == {n for n in names if h.coordinator.partition_for(n) != target}
    assert h.join(names[0]).value.error is E.NOT_COORDINATOR
    h.coordinator.load_partition(target, h.log.records(target))
    assert {g.group_id for g in h.coordinator.groups()} == set(names)


def test_loading_a_partition_twice_keeps_the_live_state() -> None:
    h = Harness()
    h.commit("manual", {("t", 0): 1})
    h.coordinator.load_partition(0, [])
    assert h.coordinator.fetch_offsets("manual", [("t", 0)]).partitions[("t", 0)].offset == 1


def test_groups_follow_the_partition_count_the_offsets_topic_has() -> None:
    """offsets.topic.num.partitions changed after __consumer_offsets was created: the coordinator
    adopts the topic's real count before loading, so each group is looked for where it was written."""
    h = Harness(config(offsets_topic_num_partitions=5))
    group = next(f"g{i}" for i in range(100) if partition_for(f"g{i}", 5) != partition_for(f"g{i}", 3))
    h.commit(group, {("t", 0): 7})
    written = partition_for(group, 5)

    restarted = Harness(config(offsets_topic_num_partitions=3), load=False)
    assert restarted.coordinator.num_partitions == 3
    assert restarted.coordinator.adopt_partition_count(5) is True
    assert restarted.coordinator.adopt_partition_count(5) is False
    assert restarted.coordinator.partition_for(group) == written
    restarted.coordinator.load_partition(written, h.log.records(written))
    assert restarted.coordinator.group(group) is not None
    assert restarted.coordinator.group(group).offsets.all() == h.coordinator.group(group).offsets.all()  # type: ignore[union-attr]

    with pytest.raises(ValueError, match="loaded already"):  # never under groups already read back
        restarted.coordinator.adopt_partition_count(3)
    with pytest.raises(ValueError, match="at least 1"):
        Harness(load=False).coordinator.adopt_partition_count(0)
