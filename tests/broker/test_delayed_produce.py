"""DelayedProduce (acks=-1): commit by high watermark, timeouts, leadership loss, min ISR."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import pytest
from prometheus_client import CollectorRegistry

from broker.metrics.purgatory import PRODUCE_EXPIRES, DelayedProduceMetrics
from broker.produce.delayed import DelayedProduce, ProducePartitionStatus, ReplicatedPartition
from protocol.error_codes import ErrorCode
from server_common.purgatory import DelayedOperationPurgatory, FakeScheduler


@dataclass
class FakePartition:
    high_watermark: int = 0
    isr_size: int = 3
    """Size of the maximal ISR."""
    min_insync_replicas: int = 2
    is_leader: bool = True
    is_offline: bool = False

    def acks_all_completion_error(self) -> ErrorCode:
        if self.isr_size >= self.min_insync_replicas:
            return ErrorCode.NONE
        return ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND


def as_protocol(partition: FakePartition) -> ReplicatedPartition:
    """Static check (for type checkers) that the fake satisfies the protocol."""
    return partition


class Harness:
    def __init__(self) -> None:
        self.scheduler = FakeScheduler()
        self.purgatory = DelayedOperationPurgatory("Produce", self.scheduler)
        self.partitions: dict[Hashable, FakePartition] = {"p0": FakePartition(), "p1": FakePartition()}
        self.responses: list[list[tuple[Hashable, ErrorCode, object]]] = []
        self.expired_keys: list[Hashable] = []

    def respond(self, statuses: Sequence[ProducePartitionStatus]) -> None:
        self.responses.append([(s.key, s.error_code, s.payload) for s in statuses])

    def park(self, *statuses: ProducePartitionStatus, timeout_ms: int = 30_000) -> DelayedProduce:
        produce = DelayedProduce(
            timeout_ms,
            statuses,
            self.respond,
            get_partition=self.partitions.get,
            expiration_meter=self.expired_keys.append,
        )
        self.purgatory.try_complete_else_watch(produce, produce.watch_keys)
        return produce

    def move_hw(self, key: Hashable, high_watermark: int) -> int:
        self.partitions[key].high_watermark = high_watermark
        return self.purgatory.check_and_complete(key)


@pytest.fixture
def h() -> Harness:
    return Harness()


def test_completes_when_every_partition_is_committed(h):
    produce = h.park(
        ProducePartitionStatus("p0", 10, payload="base 0"), ProducePartitionStatus("p1", 5, payload="base 2")
    )
    assert not produce.is_completed
    assert h.move_hw("p0", 9) == 0
    assert h.move_hw("p0", 10) == 0  # p0 done, p1 still waits
    assert h.responses == []
    assert h.move_hw("p1", 7) == 1
    assert h.responses == [[("p0", ErrorCode.NONE, "base 0"), ("p1", ErrorCode.NONE, "base 2")]]
    assert h.purgatory.num_delayed == 0 and h.scheduler.pending == 0
    assert not produce.is_expired


def test_already_committed_completes_without_parking(h):
    h.partitions["p0"].high_watermark = 10
    produce = h.park(ProducePartitionStatus("p0", 10))
    assert produce.is_completed
    assert h.responses == [[("p0", ErrorCode.NONE, None)]]
    assert h.scheduler.pending == 0


def test_timeout_answers_request_timed_out_for_what_still_waits(h):
    produce = h.park(ProducePartitionStatus("p0", 10), ProducePartitionStatus("p1", 5), timeout_ms=1000)
    h.move_hw("p1", 5)
    h.scheduler.advance_ms(999)
    assert h.responses == []
    h.scheduler.advance_ms(1)
    assert produce.is_expired
    assert h.responses == [[("p0", ErrorCode.REQUEST_TIMED_OUT, None), ("p1", ErrorCode.NONE, None)]]
    assert h.expired_keys == ["p0"]  # only the partition that timed out
    assert h.move_hw("p0", 10) == 0 and len(h.responses) == 1


def test_not_leader_settles_the_partition(h):
    h.park(ProducePartitionStatus("p0", 10), ProducePartitionStatus("p1", 10))
    h.partitions["p0"].is_leader = False
    assert h.purgatory.check_and_complete("p0") == 0  # p1 still waits
    assert h.move_hw("p1", 10) == 1
    assert h.responses == [[("p0", ErrorCode.NOT_LEADER_OR_FOLLOWER, None), ("p1", ErrorCode.NONE, None)]]


def test_a_partition_gone_offline_settles_at_once_with_a_storage_error(h):
    """A leader whose log failed resigns; its parked produces must not wait for their deadline (a
    client that times a request out bumps its idempotent epoch, and resends what was written)."""
    h.park(ProducePartitionStatus("p0", 10))
    h.partitions["p0"].is_offline = True
    assert h.purgatory.check_and_complete("p0") == 1
    assert h.responses == [[("p0", ErrorCode.KAFKA_STORAGE_ERROR, None)]]


def test_unknown_partition_settles_the_partition(h):
    h.park(ProducePartitionStatus("p0", 10))
    del h.partitions["p0"]
    assert h.purgatory.check_and_complete("p0") == 1
    assert h.responses == [[("p0", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None)]]


def test_append_time_errors_are_final_and_not_watched(h):
    produce = h.park(
        ProducePartitionStatus("p0", 10), ProducePartitionStatus("p1", -1, ErrorCode.MESSAGE_TOO_LARGE)
    )
    assert produce.watch_keys == ("p0",)
    assert h.purgatory.watchers_of("p1") == 0
    h.partitions["p1"].is_leader = False
    assert h.purgatory.check_and_complete("p1") == 0
    assert h.move_hw("p0", 10) == 1
    assert h.responses == [[("p0", ErrorCode.NONE, None), ("p1", ErrorCode.MESSAGE_TOO_LARGE, None)]]


def test_only_append_errors_completes_at_once(h):
    produce = h.park(ProducePartitionStatus("p0", -1, ErrorCode.CORRUPT_MESSAGE))
    assert produce.is_completed and h.scheduler.pending == 0
    assert h.responses == [[("p0", ErrorCode.CORRUPT_MESSAGE, None)]]


def test_committed_with_isr_below_min_is_not_enough_replicas_after_append(h):
    h.partitions["p0"].isr_size = 1
    h.park(ProducePartitionStatus("p0", 10))
    assert h.move_hw("p0", 10) == 1
    assert h.responses == [[("p0", ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND, None)]]


def test_isr_collapse_freezes_the_high_watermark_so_the_produce_times_out(h):
    """Since 3.7 the HW stops while ISR < min ISR: the usual outcome is REQUEST_TIMED_OUT, not 20."""
    h.park(ProducePartitionStatus("p0", 10), timeout_ms=1000)
    h.partitions["p0"].isr_size = 1  # the partition keeps its HW where it is
    assert h.purgatory.check_and_complete("p0") == 0
    h.scheduler.advance_ms(1000)
    assert h.responses == [[("p0", ErrorCode.REQUEST_TIMED_OUT, None)]]


def test_completion_and_timeout_at_the_same_tick_answer_once(h):
    h.scheduler.call_later(1.0, lambda: h.move_hw("p0", 10))
    produce = h.park(ProducePartitionStatus("p0", 10), timeout_ms=1000)
    h.scheduler.advance_ms(1000)
    assert not produce.is_expired
    assert h.responses == [[("p0", ErrorCode.NONE, None)]]
    assert produce.force_complete() is False and len(h.responses) == 1


def test_shutdown_answers_pending_produces(h):
    h.park(ProducePartitionStatus("p0", 10))
    assert h.purgatory.shutdown() == 1
    assert h.responses == [[("p0", ErrorCode.REQUEST_TIMED_OUT, None)]]


def test_expiry_meter_counts_timed_out_partitions():
    registry = CollectorRegistry()
    metrics = DelayedProduceMetrics(registry)
    scheduler = FakeScheduler()
    purgatory = DelayedOperationPurgatory("Produce", scheduler)
    partitions = {"p0": FakePartition(), "p1": FakePartition()}
    produce = DelayedProduce(
        100,
        [ProducePartitionStatus("p0", 1), ProducePartitionStatus("p1", 1)],
        lambda statuses: None,
        get_partition=partitions.get,
        expiration_meter=metrics.record_expiration,
    )
    purgatory.try_complete_else_watch(produce, produce.watch_keys)
    scheduler.advance_ms(100)
    assert registry.get_sample_value(f"{PRODUCE_EXPIRES}_total") == 2
