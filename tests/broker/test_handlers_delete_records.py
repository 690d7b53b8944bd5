"""DeleteRecords handler: per-partition errors, -1 as the high watermark, offsets above it, a log start
offset that never goes back, segments deleted below it, and the wait for the followers' log start
offsets (low watermark) or the timeout. Requests and responses go through the codecs (v0 and v2)."""

from __future__ import annotations

import asyncio
import dataclasses
import pathlib
import uuid
from typing import Any

import pytest

from broker.handlers.delete_records import DeleteRecordsHandler
from broker.replication.partition import Partition
from broker.replication.replica_manager import ReplicaManager
from metadata.topics import PartitionState, TopicState
from protocol.data import MessageData
from protocol.error_codes import ErrorCode, KafkaError
from protocol.records import Record, build_batch
from server_common.config import load_config, to_log_config
from server_common.purgatory import DelayedOperationPurgatory
from storage.clock import FakeClock
from storage.log_manager import LogManager
from tests.broker.test_handlers_offsets import call
from tests.broker.test_handlers_produce import StubTopics

NODE = 1
NOW = 1_700_000_000_000


@pytest.fixture
def replicas(tmp_path: pathlib.Path) -> ReplicaManager:
    """ "orders": partition 0 led here alone, partition 1 led here with follower 2 in the ISR,
    partition 2 led by node 2. Partitions 0 and 1 hold offsets 0-5 in three segments of two."""
    config = load_config(None, [f"log.dirs={tmp_path}", f"node.id={NODE}"])[0]
    clock = FakeClock(NOW)
    logs = LogManager(config.log_dirs, to_log_config({}, config), clock)
    states = {
        0: PartitionState(0, NODE, 3, 0, [NODE], [NODE]),
        1: PartitionState(1, NODE, 3, 0, [NODE, 2], [NODE, 2]),
        2: PartitionState(2, 2, 5, 0, [2, NODE], [2, NODE]),
    }
    stub = StubTopics({"orders": TopicState("orders", uuid.uuid4(), states)})
    manager = ReplicaManager(logs, stub, NODE, config, clock)
    stub.subscribe(manager)
    for index in (0, 1):
        partition = _partition(manager, index)
        for segment in range(3):
            if segment:
                partition.log.roll()
            records = [Record(value=b"v", timestamp=NOW + i) for i in range(2)]
            partition.append_records(build_batch(records), required_acks=1, now_ms=NOW)
    return manager


def _partition(manager: ReplicaManager, index: int) -> Partition:
    partition = manager.get_partition("orders", index)
    assert partition is not None
    return partition


@pytest.fixture
async def handler(replicas: ReplicaManager) -> DeleteRecordsHandler:
    purgatory = DelayedOperationPurgatory("DeleteRecords", asyncio.get_running_loop())

    def wake(partition: Partition) -> None:
        purgatory.check_and_complete(partition.key)

    replicas.add_partition_listener(wake)
    return DeleteRecordsHandler(replicas, purgatory)


def body(partitions: list[tuple[str, int, int]], timeout_ms: int = 5000) -> dict[str, Any]:
    topics: dict[str, list[dict[str, Any]]] = {}
    for name, index, offset in partitions:
        topics.setdefault(name, []).append({"partition_index": index, "offset": offset})
    return {"topics": [{"name": n, "partitions": p} for n, p in topics.items()], "timeout_ms": timeout_ms}


def answers(response: MessageData) -> dict[tuple[str, int], tuple[ErrorCode, int]]:
    return {
        (t.name, p.partition_index): (ErrorCode(p.error_code), p.low_watermark)
        for t in response.topics
        for p in t.partitions
    }


@pytest.mark.parametrize("version", [0, 2])
async def test_minus_one_deletes_up_to_the_high_watermark(
    handler: DeleteRecordsHandler, replicas: ReplicaManager, version: int
) -> None:
    partition = _partition(replicas, 0)
    assert partition.high_watermark == 6 and len(partition.log.segments()) == 3
    response = await call(handler, version, body([("orders", 0, -1)]))
    assert answers(response) == {("orders", 0): (ErrorCode.NONE, 6)}
    assert partition.log_start_offset == 6
    assert [s.base_offset for s in partition.log.segments()] == [4]  # wholly below the start: gone


async def test_a_middle_offset_keeps_the_segment_holding_it(
    handler: DeleteRecordsHandler, replicas: ReplicaManager
) -> None:
    partition = _partition(replicas, 0)
    response = await call(handler, 2, body([("orders", 0, 3)]))
    assert answers(response) == {("orders", 0): (ErrorCode.NONE, 3)}
    assert partition.log_start_offset == 3
    assert [s.base_offset for s in partition.log.segments()] == [2, 4]


async def test_the_log_start_offset_never_goes_back(
    handler: DeleteRecordsHandler, replicas: ReplicaManager
) -> None:
    await call(handler, 2, body([("orders", 0, 4)]))
    response = await call(handler, 2, body([("orders", 0, 1)]))
    assert answers(response) == {("orders", 0): (ErrorCode.NONE, 4)}
    assert _partition(replicas, 0).log_start_offset == 4


async def test_errors(handler: DeleteRecordsHandler, replicas: ReplicaManager) -> None:
    response = await call(
        handler,
        2,
        body(
            [
                ("orders", 0, 7),  # above the high watermark (6)
                ("orders", 2, 1),  # led by node 2
                ("orders", 9, 1),  # no such partition
                ("missing", 0, 1),
                ("__consumer_offsets", 0, 1),
            ]
        ),
    )
    assert answers(response) == {
        ("orders", 0): (ErrorCode.OFFSET_OUT_OF_RANGE, -1),
        ("orders", 2): (ErrorCode.NOT_LEADER_OR_FOLLOWER, -1),
        ("orders", 9): (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1),
        ("missing", 0): (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1),
        ("__consumer_offsets", 0): (ErrorCode.INVALID_TOPIC_EXCEPTION, -1),
    }
    assert _partition(replicas, 0).log_start_offset == 0
    response = await call(handler, 0, body([("orders", 0, -2)]))
    assert answers(response) == {("orders", 0): (ErrorCode.OFFSET_OUT_OF_RANGE, -1)}


def _follower_fetch(partition: Partition, log_start_offset: int) -> None:
    partition.update_follower_fetch(
        2, partition.log_end_offset, log_start_offset, NOW, partition.log_end_offset
    )


async def test_the_answer_waits_for_the_followers_log_start_offset(
    handler: DeleteRecordsHandler, replicas: ReplicaManager
) -> None:
    partition = _partition(replicas, 1)
    _follower_fetch(partition, 0)
    assert partition.high_watermark == 6
    task = asyncio.create_task(
        call(handler, 2, body([("orders", 1, 5), ("orders", 0, 2)], timeout_ms=30_000))
    )
    await asyncio.sleep(0.05)
    assert not task.done()  # the follower still starts at 0
    assert partition.log_start_offset == 5 and partition.low_watermark == 0
    _follower_fetch(partition, 5)  # it learned the new start from a fetch response
    response = await asyncio.wait_for(task, 5)
    assert answers(response) == {("orders", 1): (ErrorCode.NONE, 5), ("orders", 0): (ErrorCode.NONE, 2)}


async def test_the_wait_ends_at_the_timeout(handler: DeleteRecordsHandler, replicas: ReplicaManager) -> None:
    partition = _partition(replicas, 1)
    _follower_fetch(partition, 0)
    response = await asyncio.wait_for(call(handler, 2, body([("orders", 1, 4)], timeout_ms=50)), 5)
    assert answers(response) == {("orders", 1): (ErrorCode.REQUEST_TIMED_OUT, 0)}
    assert partition.log_start_offset == 4


async def test_a_compact_only_topic_refuses_with_policy_violation(
    handler: DeleteRecordsHandler, replicas: ReplicaManager
) -> None:
    """Kafka's Partition.deleteRecordsOnLeader: only a cleanup.policy with delete lets records go."""
    partition = _partition(replicas, 0)
    partition.log.config = dataclasses.replace(partition.log.config, cleanup_policy=("compact",))
    response = await call(handler, 2, body([("orders", 0, 3)]))
    assert answers(response) == {("orders", 0): (ErrorCode.POLICY_VIOLATION, -1)}
    assert partition.log_start_offset == 0 and len(partition.log.segments()) == 3
    with pytest.raises(KafkaError, match="Records of partition orders-0 can not be deleted due to the"):
        partition.delete_records(3)
    partition.log.config = dataclasses.replace(partition.log.config, cleanup_policy=("compact", "delete"))
    response = await call(handler, 2, body([("orders", 0, 3)]))
    assert answers(response) == {("orders", 0): (ErrorCode.NONE, 3)}
