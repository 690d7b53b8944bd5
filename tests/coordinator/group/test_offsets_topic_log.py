"""OffsetsTopicGroupLog: the coordinator's writes go through the broker's real produce path.

A batch must be in the local log of ``__consumer_offsets`` when ``append`` returns, as Kafka appends
on the request thread before the request that caused the write is answered; only the acks=-1 wait
(and the callback) come later. Otherwise an answer overtakes the write: a member's LeaveGroup was
answered before the group's Empty generation was appended, and a broker killed right after brought
the member back when it loaded the group.
"""

from __future__ import annotations

import asyncio
import pathlib
import uuid

from broker.group_runtime import OFFSETS_TOPIC, OffsetsTopicGroupLog, _read_offsets_partition
from broker.produce.service import ProduceService
from broker.replication.replica_manager import ReplicaManager
from coordinator.group import GroupState, MemberIdentity, OffsetsRecord
from coordinator.group.loader import rebuild_groups
from coordinator.group.log import TxnProducer
from metadata.topics import PartitionState, TopicState
from protocol.error_codes import ErrorCode
from server_common.config import load_config, to_log_config
from server_common.purgatory import DelayedOperationPurgatory, FakeScheduler
from storage.clock import FakeClock
from storage.log_manager import LogManager
from tests.broker.local_topics import LocalTopics
from tests.broker.test_handlers_produce import StubTopics
from tests.coordinator.group.consumer_helpers import Consumer, ConsumerHarness
from tests.coordinator.group.helpers import Harness

NODE = 1
NOW = 1_700_000_000_000
COMMIT_TIMEOUT_MS = 5000


def produce_path(
    tmp_path: pathlib.Path, topics: LocalTopics | StubTopics | None = None
) -> tuple[ProduceService, ReplicaManager, FakeScheduler]:
    """A ProduceService over a real ReplicaManager; by default ``__consumer_offsets`` has one
    partition with a single replica here."""
    config = load_config(None, [f"log.dirs={tmp_path / 'logs'}", f"node.id={NODE}"])[0]
    clock = FakeClock(NOW)
    logs = LogManager(config.log_dirs, to_log_config({}, config), clock)
    if topics is None:
        topics = LocalTopics(NODE)
        topics.create_topic(OFFSETS_TOPIC, 1, 1, {})
    replicas = ReplicaManager(logs, topics, NODE, config, clock)
    topics.subscribe(replicas)
    scheduler = FakeScheduler()
    service = ProduceService(replicas, DelayedOperationPurgatory("Produce", scheduler), clock)
    replicas.add_partition_listener(service.on_partition_changed)
    return service, replicas, scheduler


def log_end(replicas: ReplicaManager) -> int:
    partition = replicas.get_partition(OFFSETS_TOPIC, 0)
    assert partition is not None
    return partition.log.log_end_offset


async def test_the_batch_is_in_the_local_log_when_append_returns(tmp_path: pathlib.Path) -> None:
    service, replicas, _ = produce_path(tmp_path)
    log = OffsetsTopicGroupLog(service, COMMIT_TIMEOUT_MS)
    answers: list[tuple[ErrorCode, int]] = []
    log.append(0, [OffsetsRecord(b"k1", b"v1")], NOW, lambda *a: answers.append(a))
    log.append(
        0, [OffsetsRecord(b"k2", b"v2"), OffsetsRecord(b"k3", None)], NOW, lambda *a: answers.append(a)
    )
    assert log_end(replicas) == 3  # written during the calls, in call order
    assert answers == []  # answered later, from the event loop
    await asyncio.sleep(0)
    assert answers == [(ErrorCode.NONE, 0), (ErrorCode.NONE, 1)]


async def test_the_callback_waits_for_the_commit_but_the_append_does_not(tmp_path: pathlib.Path) -> None:
    """A follower in the ISR holds the high watermark back: the records are in the leader's log at
    once, and the answer is the acks=-1 outcome (here the commit timeout)."""
    state = PartitionState(0, NODE, 0, 0, [NODE, 2], [NODE, 2])
    topics = StubTopics({OFFSETS_TOPIC: TopicState(OFFSETS_TOPIC, uuid.uuid4(), {0: state}, {})})
    service, replicas, scheduler = produce_path(tmp_path, topics)
    log = OffsetsTopicGroupLog(service, COMMIT_TIMEOUT_MS)
    answers: list[tuple[ErrorCode, int]] = []
    log.append(0, [OffsetsRecord(b"k", b"v")], NOW, lambda *a: answers.append(a))
    assert log_end(replicas) == 1
    await asyncio.sleep(0)
    assert answers == []
    scheduler.advance_ms(COMMIT_TIMEOUT_MS)
    await asyncio.sleep(0)
    assert answers == [(ErrorCode.REQUEST_TIMED_OUT, -1)]


async def test_a_transactional_offsets_batch_is_appended_without_a_transactional_id(
    tmp_path: pathlib.Path,
) -> None:
    """TxnOffsetCommit: the batch is the producer's transactional batch and the coordinator's write
    carries no transactional id, as in Kafka, where the group coordinator appends past KafkaApis'
    check. It was refused with TRANSACTIONAL_ID_AUTHORIZATION_FAILED, so every transactional
    consume-transform-produce client (quixstreams exactly-once) failed its first commit."""
    service, replicas, _ = produce_path(tmp_path)
    log = OffsetsTopicGroupLog(service, COMMIT_TIMEOUT_MS)
    partition = replicas.get_partition(OFFSETS_TOPIC, 0)
    assert partition is not None
    answers: list[tuple[ErrorCode, int]] = []
    unverified = TxnProducer(7, 3)
    log.append(0, [OffsetsRecord(b"k", b"v")], NOW, lambda *a: answers.append(a), unverified)
    await asyncio.sleep(0)
    assert answers == [(ErrorCode.INVALID_TXN_STATE, -1)]  # KIP-890: verified first, as Kafka
    verified = TxnProducer(7, 3, partition.start_txn_verification(7))
    log.append(0, [OffsetsRecord(b"k", b"v")], NOW, lambda *a: answers.append(a), verified)
    await asyncio.sleep(0)
    assert answers[1:] == [(ErrorCode.NONE, 0)]
    assert partition.last_stable_offset == 0  # the transaction is open until its marker


async def test_a_failed_append_is_answered_with_its_error(tmp_path: pathlib.Path) -> None:
    service, _, _ = produce_path(tmp_path)
    log = OffsetsTopicGroupLog(service, COMMIT_TIMEOUT_MS)
    answers: list[tuple[ErrorCode, int]] = []
    log.append(7, [OffsetsRecord(b"k", b"v")], NOW, lambda *a: answers.append(a))  # no partition 7
    await asyncio.sleep(0)
    assert answers == [(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1)]


async def test_a_group_emptied_by_leave_group_is_empty_in_the_log_when_leave_group_returns(
    tmp_path: pathlib.Path,
) -> None:
    service, replicas, _ = produce_path(tmp_path)
    harness = Harness()
    harness.log = OffsetsTopicGroupLog(service, COMMIT_TIMEOUT_MS)  # type: ignore[assignment]
    harness.coordinator = harness.new_coordinator()
    harness.coordinator.load_partition(0, [])
    join = harness.join_new("group")
    harness.settle()
    joined = join.value
    sync = harness.sync("group", joined.member_id, joined.generation_id, {joined.member_id: b"all"})
    await asyncio.sleep(0)
    assert sync.value.error is ErrorCode.NONE

    left = harness.coordinator.leave_group("group", [MemberIdentity(joined.member_id, None, None)])
    assert [m.error for m in left.members] == [ErrorCode.NONE]
    # what a broker that loaded the partition now (e.g. after a crash) would find
    partition = replicas.get_partition(OFFSETS_TOPIC, 0)
    assert partition is not None
    [group], _ = rebuild_groups(await _read_offsets_partition(partition), harness.clock)
    assert (group.state, group.size, group.generation_id) == (GroupState.EMPTY, 0, 2)


async def test_a_refused_append_is_answered_before_append_returns(tmp_path: pathlib.Path) -> None:
    """Nothing was written, and the coordinator must take its records back before it applies the
    next operation's records on top of them (see the next test)."""
    topics = LocalTopics(NODE)
    topics.create_topic(OFFSETS_TOPIC, 1, 1, {"max.message.bytes": "100"})
    service, replicas, _ = produce_path(tmp_path, topics)
    log = OffsetsTopicGroupLog(service, COMMIT_TIMEOUT_MS)
    answers: list[tuple[ErrorCode, int]] = []
    log.append(0, [OffsetsRecord(b"k", b"v" * 200)], NOW, lambda *a: answers.append(a))
    assert answers == [(ErrorCode.MESSAGE_TOO_LARGE, -1)]
    log.append(7, [OffsetsRecord(b"k", b"v")], NOW, lambda *a: answers.append(a))  # no partition 7
    assert answers[1:] == [(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1)]
    assert log_end(replicas) == 0
    await asyncio.sleep(0)
    assert len(answers) == 2


async def test_a_consumer_group_write_the_log_refuses_takes_back_only_itself(tmp_path: pathlib.Path) -> None:
    """Review of KIP-848: heartbeat A's batch is refused (too large), heartbeat B is applied on top
    of A before A's answer came and B's small batch is written; A's rollback then also took B back.
    B's member was told it succeeded, the log held B without A, and memory matched neither. The
    refusal is now reported before ``append`` returns, so B is computed from the group without A."""
    topics = LocalTopics(NODE)
    topics.create_topic(OFFSETS_TOPIC, 1, 1, {"max.message.bytes": "2000"})
    service, replicas, _ = produce_path(tmp_path, topics)
    h = ConsumerHarness(load=False)
    h.log = OffsetsTopicGroupLog(service, COMMIT_TIMEOUT_MS)  # type: ignore[assignment]
    h.coordinator = h.new_coordinator()
    h.coordinator.load_partition(0, [])
    h.topics.create("t", 6)
    long_names = tuple(f"{i:02}-" + "x" * 200 for i in range(10))
    for name in long_names:
        h.topics.create(name, 1)

    a = Consumer(h, "a", ("t",))
    first = h.cg_heartbeat(a.request())
    await asyncio.sleep(0)
    assert (first.value.error, first.value.member_epoch) == (ErrorCode.NONE, 1)
    a.epoch, a.owned = 1, dict(first.value.assignment or {})

    refused = h.cg_heartbeat(Consumer(h, "big", ("t", *long_names)).request())  # A
    after = h.cg_heartbeat(a.request())  # B, before any callback of the event loop ran
    for _ in range(3):
        await asyncio.sleep(0)
    assert refused.value.error is ErrorCode.UNKNOWN_SERVER_ERROR
    assert after.value.error is ErrorCode.NONE
    assert after.value.member_epoch == 1 and after.value.assignment == a.owned  # nothing to revoke

    group = h.coordinator.consumer_group("group")
    assert group is not None and set(group.members) == {"a"}
    partition = replicas.get_partition(OFFSETS_TOPIC, 0)
    assert partition is not None
    loaded = h.new_coordinator()
    loaded.load_partition(0, await _read_offsets_partition(partition))
    from_log = loaded.consumer_group("group")
    assert from_log is not None
    assert dict(from_log.members) == dict(group.members)
    assert (from_log.group_epoch, from_log.assignment_epoch) == (group.group_epoch, group.assignment_epoch)
    assert dict(from_log.target_assignment) == dict(group.target_assignment)
