"""KIP-848's conversions between classic and consumer groups are each one write (Kafka 4.0's
``convertToConsumerGroup`` / ``convertToClassicGroup``): the old group's tombstones and the new
group's records (with the triggering request's own) go into the log as one batch, so the log holds
the group as one kind or the other; a batch that fails puts the previous group back.

Simulated time and the in-memory log, recorded batch by batch; ``fail_with`` refuses an append,
``defer`` holds it until the test answers it.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import pytest

from coordinator.group.log import AppendCallback, OffsetsRecord, TxnProducer
from coordinator.group.requests import MemberIdentity
from protocol.consumer_protocol import decode_assignment
from protocol.error_codes import ErrorCode
from tests.coordinator.group.consumer_helpers import Consumer, ConsumerHarness
from tests.coordinator.group.helpers import config
from tests.coordinator.group.test_classic_members_of_consumer_groups import (
    REBALANCE_MS,
    SESSION_MS,
    ClassicConsumer,
    _classic_group,
    _mixed_group,
    settle,
)

pytestmark = pytest.mark.timeout(30)

CLASSIC_KEY_VERSION = 2
CONSUMER_KEY_VERSIONS = range(3, 9)
"""ConsumerGroupMetadataKey (3) ... ConsumerGroupCurrentMemberAssignmentKey (8)."""


@pytest.fixture
def h() -> ConsumerHarness:
    harness = ConsumerHarness(config())
    harness.topics.create("t", 4)
    return harness


@contextmanager
def recorded(h: ConsumerHarness) -> Iterator[list[list[OffsetsRecord]]]:
    """The batches appended to the log meanwhile (refused ones included)."""
    batches: list[list[OffsetsRecord]] = []
    append = h.log.append

    def recording(
        partition: int,
        records: Sequence[OffsetsRecord],
        timestamp_ms: int,
        callback: AppendCallback,
        producer: TxnProducer | None = None,
    ) -> None:
        batches.append(list(records))
        append(partition, records, timestamp_ms, callback, producer)

    h.log.append = recording  # type: ignore[method-assign]
    try:
        yield batches
    finally:
        h.log.append = append  # type: ignore[method-assign]


def kind(record: OffsetsRecord) -> tuple[str, bool]:
    """("classic" or "consumer", whether it is a tombstone)."""
    version = int.from_bytes(record.key[:2], "big")
    if version == CLASSIC_KEY_VERSION:
        return "classic", record.value is None
    assert version in CONSUMER_KEY_VERSIONS, version
    return "consumer", record.value is None


def log_records(h: ConsumerHarness) -> int:
    return sum(len(h.log.records(p)) for p in range(h.config.offsets_topic_num_partitions))


# -- the online upgrade -------------------------------------------------------------------------------


def test_an_upgrade_is_one_batch_of_the_classic_tombstone_and_the_consumer_group(h: ConsumerHarness) -> None:
    c1, c2 = _classic_group(h)
    with recorded(h) as batches:
        assert Consumer(h, "a", ("t",)).heartbeat().error is ErrorCode.NONE
    assert len(batches) == 1
    batch = batches[0]
    assert kind(batch[0]) == ("classic", True)
    assert all(kind(r)[0] == "consumer" for r in batch[1:])
    assert not any(kind(r)[1] for r in batch[1:])
    # The log holds a consumer group only, with the classic members and the new one.
    h.reload()
    assert h.coordinator.group("group") is None
    group = h.coordinator.consumer_group("group")
    assert group is not None and set(group.members) == {c1.member_id, c2.member_id, "a"}


def test_a_refused_upgrade_leaves_the_classic_group_as_it_was(h: ConsumerHarness) -> None:
    c1, c2 = _classic_group(h)
    before = h.coordinator.group("group")
    assert before is not None
    generation, records = before.generation_id, log_records(h)
    h.log.fail_with = ErrorCode.NOT_LEADER_OR_FOLLOWER
    refused = Consumer(h, "a", ("t",)).heartbeat()
    assert refused.error is ErrorCode.NOT_COORDINATOR
    assert h.coordinator.consumer_group("group") is None
    classic = h.coordinator.group("group")
    assert classic is before and classic.state.value == "Stable"
    assert classic.generation_id == generation
    assert set(classic.member_ids) == {c1.member_id, c2.member_id}
    assert log_records(h) == records
    # The classic members go on as if nothing happened, sessions and all.
    h.advance(SESSION_MS // 2)
    assert c1.heartbeat() is ErrorCode.NONE and c2.heartbeat() is ErrorCode.NONE
    h.advance(SESSION_MS // 2)
    assert c1.heartbeat() is ErrorCode.NONE and c2.heartbeat() is ErrorCode.NONE
    assert c1.partitions == {0, 1} and c2.partitions == {2, 3}
    # Once the log takes writes again, the upgrade goes through.
    h.log.fail_with = None
    assert Consumer(h, "a", ("t",)).heartbeat().error is ErrorCode.NONE
    assert h.coordinator.group("group") is None and h.coordinator.consumer_group("group") is not None


def test_an_upgrade_failing_after_the_append_brings_the_classic_group_back(h: ConsumerHarness) -> None:
    c1, c2 = _classic_group(h)
    h.log.defer = True
    reply = h.cg_heartbeat(Consumer(h, "a", ("t",)).request())
    assert not reply.done and h.coordinator.group("group") is None
    h.log.complete_next(ErrorCode.KAFKA_STORAGE_ERROR)
    assert reply.value.error is ErrorCode.NOT_COORDINATOR
    assert h.coordinator.consumer_group("group") is None
    classic = h.coordinator.group("group")
    assert classic is not None and set(classic.member_ids) == {c1.member_id, c2.member_id}
    h.log.defer = False
    assert c1.heartbeat() is ErrorCode.NONE


def test_an_upgrade_whose_heartbeat_fails_writes_nothing_and_keeps_the_classic_group() -> None:
    """The classic group fits group.consumer.max.size, but not with the member that heartbeats."""
    h = ConsumerHarness(config(group_consumer_max_size=2))
    h.topics.create("t", 4)
    c1, c2 = _classic_group(h)
    records = log_records(h)
    assert Consumer(h, "a", ("t",)).heartbeat().error is ErrorCode.GROUP_MAX_SIZE_REACHED
    assert log_records(h) == records
    assert h.coordinator.consumer_group("group") is None
    classic = h.coordinator.group("group")
    assert classic is not None and set(classic.member_ids) == {c1.member_id, c2.member_id}
    assert c1.heartbeat() is ErrorCode.NONE


def test_an_empty_classic_group_becomes_a_consumer_group_in_the_heartbeat_s_batch(h: ConsumerHarness) -> None:
    first = h.join("group", "", protocols=ClassicConsumer(h)._protocols())
    member_id = first.value.member_id
    joined = h.join("group", member_id, protocols=ClassicConsumer(h)._protocols())
    h.settle()
    assert joined.value.error is ErrorCode.NONE
    h.coordinator.leave_group("group", [MemberIdentity(member_id, None)])
    empty = h.coordinator.group("group")
    assert empty is not None and empty.state.value == "Empty"
    assert h.commit(offsets={("t", 0): 7}).value == {("t", 0): ErrorCode.NONE}
    # Refused: the empty classic group stays, offsets and all.
    h.log.fail_with = ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert Consumer(h, "a", ("t",)).heartbeat().error is ErrorCode.NOT_COORDINATOR
    assert h.coordinator.group("group") is empty and h.coordinator.consumer_group("group") is None
    assert h.coordinator.fetch_offsets("group", [("t", 0)]).partitions[("t", 0)].offset == 7
    # Written: one batch with the classic tombstone first.
    h.log.fail_with = None
    with recorded(h) as batches:
        assert Consumer(h, "a", ("t",)).heartbeat().error is ErrorCode.NONE
    assert len(batches) == 1 and kind(batches[0][0]) == ("classic", True)
    assert all(kind(r) == ("consumer", False) for r in batches[0][1:])
    h.reload()
    assert h.coordinator.group("group") is None
    assert h.coordinator.consumer_group("group") is not None
    assert h.coordinator.fetch_offsets("group", [("t", 0)]).partitions[("t", 0)].offset == 7


# -- the online downgrade -----------------------------------------------------------------------------


def test_a_downgrade_is_one_batch_of_consumer_tombstones_and_the_classic_group(h: ConsumerHarness) -> None:
    a, c = _mixed_group(h)
    with recorded(h) as batches:
        assert a.leave().error is ErrorCode.NONE
    assert len(batches) == 1
    kinds = [kind(r) for r in batches[0]]
    assert kinds[-1] == ("classic", False)
    assert kinds[:-1] and all(k == ("consumer", True) for k in kinds[:-1])
    h.reload()
    assert h.coordinator.consumer_group("group") is None
    classic = h.coordinator.group("group")
    assert classic is not None and classic.member_ids == [c.member_id]


def test_a_refused_downgrade_leaves_the_consumer_group_as_it_was(h: ConsumerHarness) -> None:
    a, c = _mixed_group(h)
    group = h.coordinator.consumer_group("group")
    assert group is not None
    epoch, members, records = group.group_epoch, dict(group.members), log_records(h)
    h.log.fail_with = ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert a.leave().error is ErrorCode.NOT_COORDINATOR
    assert h.coordinator.group("group") is None
    assert h.coordinator.consumer_group("group") is group and not group.dead
    assert group.group_epoch == epoch and dict(group.members) == members
    assert log_records(h) == records
    h.log.fail_with = None
    # Both members are still served: the classic one through the classic APIs, sessions restarted.
    assert c.heartbeat() is ErrorCode.NONE
    a.epoch = members["a"].member_epoch
    a.owned = dict(members["a"].assigned_partitions)
    assert a.heartbeat().error is ErrorCode.NONE
    # Then the leave goes through.
    assert a.leave().error is ErrorCode.NONE
    assert h.coordinator.consumer_group("group") is None and h.coordinator.group("group") is not None


def test_a_downgrade_failing_after_the_append_brings_the_consumer_group_back(h: ConsumerHarness) -> None:
    a, c = _mixed_group(h)
    group = h.coordinator.consumer_group("group")
    assert group is not None
    members = dict(group.members)
    h.log.defer = True
    reply = h.cg_heartbeat(a.request(-1, full=False))
    # Until the batch is written, the classic group is Stable: its members are not told to rejoin.
    classic = h.coordinator.group("group")
    assert not reply.done and classic is not None and classic.state.value == "Stable"
    assert h.heartbeat("group", c.member_id, c.generation) is ErrorCode.NONE
    h.log.complete_next(ErrorCode.NOT_LEADER_OR_FOLLOWER)
    assert reply.value.error is ErrorCode.NOT_COORDINATOR
    assert h.coordinator.group("group") is None and classic.state.value == "Dead"
    assert h.coordinator.consumer_group("group") is group and dict(group.members) == members
    h.log.defer = False
    assert c.heartbeat() is ErrorCode.NONE


def test_a_written_downgrade_starts_the_classic_rebalance_only_then(h: ConsumerHarness) -> None:
    a, c = _mixed_group(h)
    h.log.defer = True
    reply = h.cg_heartbeat(a.request(-1, full=False))
    classic = h.coordinator.group("group")
    assert classic is not None and classic.state.value == "Stable"
    h.log.complete_next()
    assert reply.value.error is ErrorCode.NONE
    assert classic.state.value == "PreparingRebalance"
    assert h.heartbeat("group", c.member_id, c.generation) is ErrorCode.REBALANCE_IN_PROGRESS


def test_a_fenced_member_s_refused_downgrade_keeps_the_consumer_group(h: ConsumerHarness) -> None:
    _a, c = _mixed_group(h)
    h.log.fail_with = ErrorCode.NOT_LEADER_OR_FOLLOWER
    with recorded(h) as batches:
        for _ in range(12):  # "a" sends nothing: its session (45 s) expires, it is fenced
            h.advance(SESSION_MS // 2)
            assert h.heartbeat("group", c.member_id, c.generation) in (
                ErrorCode.NONE,
                ErrorCode.REBALANCE_IN_PROGRESS,
            )
    # Its fencing downgraded the group in one batch, which the log refused.
    assert any(kind(batch[-1]) == ("classic", False) for batch in batches)
    assert h.coordinator.group("group") is None
    group = h.coordinator.consumer_group("group")
    assert group is not None and "a" in group.members and not group.dead
    h.log.fail_with = None
    for _ in range(12):
        h.advance(SESSION_MS // 2)
        h.heartbeat("group", c.member_id, c.generation)
        if h.coordinator.group("group") is not None:
            break
    assert h.coordinator.consumer_group("group") is None and h.coordinator.group("group") is not None


def test_an_empty_consumer_group_refused_to_a_classic_join_stays(h: ConsumerHarness) -> None:
    a = Consumer(h, "a", ("t",))
    assert a.heartbeat().error is ErrorCode.NONE
    assert a.leave().error is ErrorCode.NONE
    group = h.coordinator.consumer_group("group")
    assert group is not None and group.is_empty
    h.log.fail_with = ErrorCode.NOT_LEADER_OR_FOLLOWER
    refused = h.join("group", "", protocols=ClassicConsumer(h)._protocols())
    assert refused.value.error is ErrorCode.NOT_COORDINATOR
    assert h.coordinator.group("group") is None and h.coordinator.consumer_group("group") is group
    h.log.fail_with = None
    with recorded(h) as batches:
        first = h.join("group", "", protocols=ClassicConsumer(h)._protocols())
    assert first.value.error is ErrorCode.MEMBER_ID_REQUIRED
    assert len(batches) == 1 and all(kind(r) == ("consumer", True) for r in batches[0])
    assert h.coordinator.consumer_group("group") is None and h.coordinator.group("group") is not None


def test_after_a_refused_conversion_the_log_loads_the_group_as_it_was(h: ConsumerHarness) -> None:
    c1, c2 = _classic_group(h)
    h.log.fail_with = ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert Consumer(h, "a", ("t",)).heartbeat().error is ErrorCode.NOT_COORDINATOR
    h.log.fail_with = None
    h.reload()
    assert h.coordinator.consumer_group("group") is None
    classic = h.coordinator.group("group")
    assert classic is not None and set(classic.member_ids) == {c1.member_id, c2.member_id}


# -- a classic static member replacing the last consumer-protocol member ------------------------------


def _static_mixed_group(h: ConsumerHarness) -> tuple[Consumer, ClassicConsumer]:
    """A static consumer-protocol member "a" (instance "i-a") and a classic member, settled; then
    "a" leaves for a while (epoch -2), keeping its instance id and partitions."""
    a = Consumer(h, "a", ("t",), instance_id="i-a")
    assert a.heartbeat().error is ErrorCode.NONE
    c = ClassicConsumer(h)
    assert c.join() is ErrorCode.NONE
    settle([a], [c])
    assert a.leave(-2).error is ErrorCode.NONE
    return a, c


def _static_classic_join(h: ConsumerHarness, instance_id: str) -> ClassicConsumer:
    """A classic consumer with ``instance_id`` joins (two steps); returns it once joined."""
    replacement = ClassicConsumer(h)
    protocols = replacement._protocols()
    first = h.join(
        "group",
        "",
        protocols=protocols,
        instance_id=instance_id,
        session_ms=SESSION_MS,
        rebalance_ms=REBALANCE_MS,
    ).value
    assert first.error is ErrorCode.MEMBER_ID_REQUIRED
    replacement.member_id = first.member_id
    return replacement


def _rejoin(h: ConsumerHarness, replacement: ClassicConsumer, instance_id: str) -> Any:
    """The second step of :func:`_static_classic_join`: the JoinGroup with the member id given."""
    return h.join(
        "group",
        replacement.member_id,
        protocols=replacement._protocols(),
        instance_id=instance_id,
        session_ms=SESSION_MS,
        rebalance_ms=REBALANCE_MS,
    ).value


def test_a_classic_static_member_replacing_the_last_kip848_member_downgrades(h: ConsumerHarness) -> None:
    _a, c = _static_mixed_group(h)
    group = h.coordinator.consumer_group("group")
    assert group is not None
    epoch = group.group_epoch
    a_partitions = group.member("a").assigned_partitions  # type: ignore[union-attr]
    replacement = _static_classic_join(h, "i-a")
    with recorded(h) as batches:
        joined = _rejoin(h, replacement, "i-a")
    assert joined.error is ErrorCode.NONE and joined.generation_id == epoch
    # One batch: the replacement's records, the consumer group's tombstones, the classic group.
    assert len(batches) == 1
    kinds = [kind(r) for r in batches[0]]
    assert kinds[-1] == ("classic", False)
    assert all(k[0] == "consumer" for k in kinds[:-1])
    assert ("consumer", False) in kinds and ("consumer", True) in kinds
    assert h.coordinator.consumer_group("group") is None
    classic = h.coordinator.group("group")
    assert classic is not None and classic.state.value == "Stable" and classic.generation_id == epoch
    assert set(classic.member_ids) == {replacement.member_id, c.member_id}
    assert classic.static_members == {"i-a": replacement.member_id}
    # The replacement takes over the partitions of the member it replaced; the other goes on.
    synced = h.sync(
        "group", replacement.member_id, joined.generation_id, instance_id="i-a", protocol_type="consumer"
    ).value
    assert synced.error is ErrorCode.NONE
    got = {p for tp in decode_assignment(synced.assignment).partitions for p in tp.partitions}
    assert got == {p for parts in a_partitions.values() for p in parts}
    assert h.heartbeat("group", c.member_id, c.generation) is ErrorCode.NONE
    # The log holds the classic group only.
    h.reload()
    assert h.coordinator.consumer_group("group") is None
    reloaded = h.coordinator.group("group")
    assert reloaded is not None and set(reloaded.member_ids) == {replacement.member_id, c.member_id}


def test_a_classic_static_join_replaces_an_active_kip848_static_member(h: ConsumerHarness) -> None:
    """Classic static membership replaces the instance's member whatever its state (Kafka's
    getOrMaybeSubscribeStaticConsumerGroupMember checks epoch -2 only for ConsumerGroupHeartbeat):
    here the replaced member never left, the group downgrades, and the old member is fenced."""
    a = Consumer(h, "a", ("t",), instance_id="i-a")
    assert a.heartbeat().error is ErrorCode.NONE
    c = ClassicConsumer(h)
    assert c.join() is ErrorCode.NONE
    settle([a], [c])
    replacement = _static_classic_join(h, "i-a")
    joined = _rejoin(h, replacement, "i-a")
    assert joined.error is ErrorCode.NONE
    assert h.coordinator.consumer_group("group") is None
    classic = h.coordinator.group("group")
    assert classic is not None and classic.static_members == {"i-a": replacement.member_id}
    assert a.heartbeat().error is not ErrorCode.NONE  # the replaced member is out


def test_a_refused_replacement_downgrade_leaves_the_consumer_group_as_it_was(h: ConsumerHarness) -> None:
    _a, c = _static_mixed_group(h)
    group = h.coordinator.consumer_group("group")
    assert group is not None
    members = dict(group.members)
    replacement = _static_classic_join(h, "i-a")
    h.log.fail_with = ErrorCode.NOT_LEADER_OR_FOLLOWER
    refused = _rejoin(h, replacement, "i-a")
    assert refused.error is ErrorCode.NOT_COORDINATOR
    assert h.coordinator.group("group") is None
    assert h.coordinator.consumer_group("group") is group and dict(group.members) == members
    assert group.static_member("i-a").member_id == "a"  # type: ignore[union-attr]
    h.log.fail_with = None
    assert c.heartbeat() is ErrorCode.NONE
    # "a"'s session runs again: when it expires, fencing the last consumer-protocol member
    # downgrades the group.
    for _ in range(12):
        h.advance(SESSION_MS // 2)
        h.heartbeat("group", c.member_id, c.generation)
        if h.coordinator.group("group") is not None:
            break
    classic = h.coordinator.group("group")
    assert classic is not None and classic.member_ids == [c.member_id]


def test_no_replacement_downgrade_under_the_upgrade_policy(h: ConsumerHarness) -> None:
    h = ConsumerHarness(config(group_consumer_migration_policy="upgrade"))
    h.topics.create("t", 4)
    _static_mixed_group(h)
    replacement = _static_classic_join(h, "i-a")
    joined = _rejoin(h, replacement, "i-a")
    assert joined.error is ErrorCode.NONE
    group = h.coordinator.consumer_group("group")
    assert group is not None and h.coordinator.group("group") is None
    assert group.static_member("i-a").member_id == replacement.member_id  # type: ignore[union-attr]


def test_a_replacement_with_another_subscription_downgrades_into_a_rebalance(h: ConsumerHarness) -> None:
    h.topics.create("u", 2)
    _a, c = _static_mixed_group(h)
    replacement = _static_classic_join(h, "i-a")
    replacement.topics = ("t", "u")
    joined = _rejoin(h, replacement, "i-a")
    assert joined.error is ErrorCode.NONE
    classic = h.coordinator.group("group")
    assert classic is not None and h.coordinator.consumer_group("group") is None
    assert classic.state.value == "PreparingRebalance"
    assert h.heartbeat("group", c.member_id, c.generation) is ErrorCode.REBALANCE_IN_PROGRESS
