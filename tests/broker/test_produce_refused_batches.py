"""A batch refused without an append (the leader not ready, the ISR short) leaves a gap in its
producer's sequences: the producer's next batch, already in flight, is answered the same retriable
error instead of OUT_OF_ORDER_SEQUENCE_NUMBER, on which librdkafka bumps its epoch and renumbers (and
so duplicates) batches other partitions had written. A real sequence error stays one.

A real single-replica Partition behind a stand-in replica manager that can pretend it does not lead.
"""

from __future__ import annotations

import asyncio
import pathlib
import uuid
from dataclasses import dataclass

import pytest

from broker.produce.refused_batches import REFUSAL_TTL_MS, RefusedBatches
from broker.produce.service import ProducePartitionData, ProduceRequest, ProduceService
from broker.replication.partition import Partition
from protocol.error_codes import ErrorCode
from protocol.records import Record, build_batch
from protocol.records.batch import RecordBatchHeader, read_header
from server_common.purgatory import DelayedOperationPurgatory
from storage.clock import FakeClock
from storage.config import LogConfig
from storage.log import PartitionLog

pytestmark = pytest.mark.timeout(30)

NOW = 1_700_000_000_000
PID = 7


@dataclass
class Replicas:
    partition: Partition
    leading: bool = True

    def taking_lead(self, topic: str, index: int) -> bool:
        return False

    def get_partition(self, topic: str, index: int) -> Partition | None:
        return self.partition if self.leading else None

    def get_partition_by_key(self, key: object) -> Partition | None:
        return self.get_partition("t", 0)

    def partition_error(self, topic: str, index: int) -> ErrorCode:
        return ErrorCode.NOT_LEADER_OR_FOLLOWER


def batch(sequence: int, epoch: int = 0, n: int = 1) -> bytes:
    records = [Record(value=b"s%d" % (sequence + i), timestamp=NOW) for i in range(n)]
    return build_batch(records, producer_id=PID, producer_epoch=epoch, base_sequence=sequence)


def request(records: bytes) -> ProduceRequest:
    return ProduceRequest(
        version=9,
        client_id="t",
        acks=1,
        timeout_ms=1000,
        transactional_id=None,
        partitions=[ProducePartitionData("t", 0, records)],
    )


@pytest.fixture
def replicas(tmp_path: pathlib.Path) -> Replicas:
    clock = FakeClock(NOW)
    log = PartitionLog.open(tmp_path / "t-0", LogConfig(), clock, topic_id=uuid.UUID(int=1))
    partition = Partition.open(
        log,
        node_id=1,
        topic_id=uuid.UUID(int=1),
        leader_epoch=0,
        partition_epoch=0,
        replicas=[1],
        isr=[1],
        min_insync_replicas=1,
        clock=clock,
    )
    return Replicas(partition)


async def produce(service: ProduceService, records: bytes) -> tuple[ErrorCode, str | None]:
    [outcome] = await service.produce(request(records))
    return outcome.error_code, outcome.message


def make_service(replicas: Replicas, clock: FakeClock | None = None) -> ProduceService:
    purgatory = DelayedOperationPurgatory("Produce", asyncio.get_running_loop())
    return ProduceService(replicas, purgatory, clock or FakeClock(NOW))  # type: ignore[arg-type]


async def test_the_batch_after_a_refused_one_gets_its_error_and_both_retries_land_in_order(
    replicas: Replicas,
) -> None:
    service = make_service(replicas)
    assert (await produce(service, batch(0)))[0] is ErrorCode.NONE
    replicas.leading = False
    assert (await produce(service, batch(1)))[0] is ErrorCode.NOT_LEADER_OR_FOLLOWER
    replicas.leading = True
    code, message = await produce(service, batch(2, n=3))
    assert code is ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert message is not None and "sequence 1 of producer 7 was refused here" in message
    assert (await produce(service, batch(5)))[0] is ErrorCode.NOT_LEADER_OR_FOLLOWER
    for sequence, n in ((1, 1), (2, 3), (5, 1)):  # the producer's retries, in order
        assert (await produce(service, batch(sequence, n=n)))[0] is ErrorCode.NONE
    assert replicas.partition.log_end_offset == 6


async def test_a_gap_no_refusal_explains_is_out_of_order(replicas: Replicas) -> None:
    service = make_service(replicas)
    assert (await produce(service, batch(0)))[0] is ErrorCode.NONE
    assert (await produce(service, batch(2)))[0] is ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    replicas.leading = False
    assert (await produce(service, batch(3)))[0] is ErrorCode.NOT_LEADER_OR_FOLLOWER
    replicas.leading = True
    # refused 3 is not where the gap starts (1): still a sequence error
    assert (await produce(service, batch(4)))[0] is ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


async def test_an_append_forgets_the_refusal(replicas: Replicas) -> None:
    service = make_service(replicas)
    assert (await produce(service, batch(0)))[0] is ErrorCode.NONE
    replicas.leading = False
    assert (await produce(service, batch(1)))[0] is ErrorCode.NOT_LEADER_OR_FOLLOWER
    replicas.leading = True
    assert (await produce(service, batch(1)))[0] is ErrorCode.NONE
    assert (await produce(service, batch(3)))[0] is ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


def header(sequence: int, epoch: int = 0) -> RecordBatchHeader:
    return read_header(batch(sequence, epoch), 0)


async def test_a_refusal_older_than_the_message_timeout_explains_nothing(replicas: Replicas) -> None:
    clock = FakeClock(NOW)
    service = make_service(replicas, clock)
    assert (await produce(service, batch(0)))[0] is ErrorCode.NONE
    replicas.leading = False
    assert (await produce(service, batch(1)))[0] is ErrorCode.NOT_LEADER_OR_FOLLOWER
    replicas.leading = True
    clock.advance(REFUSAL_TTL_MS + 1)
    assert (await produce(service, batch(2)))[0] is ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_refusals_stay_bounded(replicas: Replicas) -> None:
    state = replicas.partition.producer_state
    refused = RefusedBatches(capacity=2, ttl_ms=1000)
    refused.refused("t", 0, header(0), ErrorCode.NOT_ENOUGH_REPLICAS, NOW)
    entry = state.last_entry(PID)
    assert entry is None  # an unknown producer has no sequence to break
    assert refused.explain_gap("t", 0, header(1), entry, NOW) is None
    refused.refused("t", 1, header(0), ErrorCode.NOT_ENOUGH_REPLICAS, NOW)
    refused.refused("t", 2, header(0), ErrorCode.NOT_ENOUGH_REPLICAS, NOW)
    assert len(refused) == 2
    refused.refused("t", 3, header(0), ErrorCode.INVALID_RECORD, NOW)
    assert len(refused) == 2  # not a refusal every client retries


async def test_a_new_epoch_whose_first_batch_was_refused(replicas: Replicas) -> None:
    service = make_service(replicas)
    assert (await produce(service, batch(0)))[0] is ErrorCode.NONE
    replicas.leading = False
    assert (await produce(service, batch(0, epoch=1)))[0] is ErrorCode.NOT_LEADER_OR_FOLLOWER
    replicas.leading = True
    assert (await produce(service, batch(1, epoch=1)))[0] is ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert (await produce(service, batch(0, epoch=1)))[0] is ErrorCode.NONE
    assert (await produce(service, batch(1, epoch=1)))[0] is ErrorCode.NONE
