"""ListOffsets and OffsetForLeaderEpoch handlers, called with requests that went through the request
codec at the lowest and highest version each serves; every response must encode with its codec."""

from __future__ import annotations

import pathlib
import uuid
from typing import Any

import pytest

from broker.handlers.base import Handler, RequestContext
from broker.handlers.list_offsets import ListOffsetsHandler
from broker.handlers.offset_for_leader_epoch import OffsetForLeaderEpochHandler
from broker.handlers.registry import HandlerRegistry
from broker.replication.replica_manager import ReplicaManager
from metadata.topics import PartitionState, TopicState
from protocol.data import MessageData
from protocol.error_codes import ErrorCode, KafkaError
from protocol.messages import REQUESTS, RESPONSES
from protocol.records import Record, build_batch
from server_common.config import load_config, to_log_config
from storage.clock import FakeClock
from storage.log_manager import LogManager
from tests.broker.test_handlers_produce import StubTopics

NODE = 1
NOW = 1_700_000_000_000
NONE = int(ErrorCode.NONE)


@pytest.fixture
def replicas(tmp_path: pathlib.Path) -> ReplicaManager:
    """ "orders": partition 0 led here alone at epoch 3, partition 1 led here with follower 2 in the
    ISR (its HW stays at 0), partition 2 led by node 2."""
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
        partition = manager.get_partition("orders", index)
        assert partition is not None
        for start in (0, 100):  # offsets 0-1 at NOW, NOW+1; offsets 2-3 at NOW+100, NOW+101
            records = [Record(value=b"v", timestamp=NOW + start + i) for i in range(2)]
            partition.append_records(build_batch(records), required_acks=1, now_ms=NOW)
    return manager


async def call(handler: Handler, version: int, body: dict[str, Any]) -> MessageData:
    codec = REQUESTS[int(handler.api_key)].codec(version)
    request = codec.decode(codec.encode(body))
    ctx = RequestContext(int(handler.api_key), version, 1, "test", "peer", 1, 0)
    response = await handler.handle(ctx, request)
    out = RESPONSES[int(handler.api_key)].codec(version)
    return out.decode(out.encode(response))


# -- ListOffsets -------------------------------------------------------------------------------------


def list_body(
    partitions: list[tuple[str, int, int]], replica_id: int = -1, isolation: int = 0, epoch: int = -1
) -> dict[str, Any]:
    topics: dict[str, list[dict[str, Any]]] = {}
    for name, index, timestamp in partitions:
        topics.setdefault(name, []).append(
            {"partition_index": index, "current_leader_epoch": epoch, "timestamp": timestamp}
        )
    return {
        "replica_id": replica_id,
        "isolation_level": isolation,
        "topics": [{"name": name, "partitions": parts} for name, parts in topics.items()],
    }


def answers(response: MessageData) -> list[tuple[int, int, int, int]]:
    """(error, timestamp, offset, leader epoch) of each partition, in response order."""
    return [
        (p.error_code, p.timestamp, p.offset, p.leader_epoch) for t in response.topics for p in t.partitions
    ]


def test_list_offsets_versions_match_the_codec(replicas: ReplicaManager) -> None:
    HandlerRegistry([ListOffsetsHandler(replicas), OffsetForLeaderEpochHandler(replicas)])


async def lookups(
    handler: ListOffsetsHandler, version: int, partition: int, stamps: list[int], **kwargs: int
) -> list[tuple[int, int, int, int]]:
    """One request per timestamp: a partition listed twice in a request is INVALID_REQUEST."""
    found = []
    for timestamp in stamps:
        found += answers(
            await call(handler, version, list_body([("orders", partition, timestamp)], **kwargs))
        )
    return found


async def test_list_offsets_v1_sentinels_and_timestamps(replicas: ReplicaManager) -> None:
    handler = ListOffsetsHandler(replicas)
    stamps = [-1, -2, NOW + 1, NOW + 50, NOW + 500]
    assert await lookups(handler, 1, 0, stamps) == [
        (NONE, -1, 4, -1),  # v1 has no leader epoch field
        (NONE, -1, 0, -1),
        (NONE, NOW + 1, 1, -1),
        (NONE, NOW + 100, 2, -1),
        (NONE, -1, -1, -1),
    ]


async def test_list_offsets_v9_sentinels(replicas: ReplicaManager) -> None:
    handler = ListOffsetsHandler(replicas)
    stamps = [-1, -2, -3, -4, -5, NOW + 101]
    assert await lookups(handler, 9, 0, stamps) == [
        (NONE, -1, 4, 3),
        (NONE, -1, 0, 3),
        (NONE, NOW + 101, 3, 3),
        (NONE, -1, 0, 3),
        (NONE, -1, -1, -1),
        (NONE, NOW + 101, 3, 3),
    ]


@pytest.mark.parametrize("version", [2, 9])
async def test_list_offsets_isolation_and_replica_ids(replicas: ReplicaManager, version: int) -> None:
    handler = ListOffsetsHandler(replicas)
    stamps = [-1, NOW]
    for isolation in (0, 1):  # HW and LSO are both 0 while the follower has not fetched
        consumer = await lookups(handler, version, 1, stamps, isolation=isolation)
        assert [a[:3] for a in consumer] == [(NONE, -1, 0), (NONE, -1, -1)]
    for replica_id in (-2, 2):  # the debug tool and a follower read up to the LEO
        other = await lookups(handler, version, 1, stamps, replica_id=replica_id)
        assert [a[:3] for a in other] == [(NONE, -1, 4), (NONE, NOW, 0)]


@pytest.mark.parametrize("version", [2, 9])
async def test_list_offsets_unknown_isolation_level_is_an_invalid_request(
    replicas: ReplicaManager, version: int
) -> None:
    """A consumer's unknown isolation level fails the request (the dispatcher answers every partition
    with the error); a follower's or the debug tool's isolation level is ignored."""
    handler = ListOffsetsHandler(replicas)
    with pytest.raises(KafkaError) as raised:
        await lookups(handler, version, 1, [-1], isolation=2)
    assert raised.value.code == ErrorCode.INVALID_REQUEST
    for replica_id in (-2, 2):
        other = await lookups(handler, version, 1, [-1], replica_id=replica_id, isolation=2)
        assert [a[:3] for a in other] == [(NONE, -1, 4)]


@pytest.mark.parametrize("version", [1, 9])
async def test_list_offsets_errors(replicas: ReplicaManager, version: int) -> None:
    handler = ListOffsetsHandler(replicas)
    body = list_body(
        [("orders", 0, -1), ("orders", 0, -2), ("orders", 2, -1), ("orders", 7, -1), ("nope", 0, -1)]
    )
    codes = [a[0] for a in answers(await call(handler, version, body))]
    assert codes == [
        ErrorCode.INVALID_REQUEST,
        ErrorCode.INVALID_REQUEST,
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    ]


@pytest.mark.parametrize(
    ("epoch", "code"),
    [(2, ErrorCode.FENCED_LEADER_EPOCH), (4, ErrorCode.UNKNOWN_LEADER_EPOCH), (3, ErrorCode.NONE)],
)
async def test_list_offsets_current_leader_epoch(
    replicas: ReplicaManager, epoch: int, code: ErrorCode
) -> None:
    response = await call(ListOffsetsHandler(replicas), 9, list_body([("orders", 0, -1)], epoch=epoch))
    assert answers(response)[0][0] == code


async def test_list_offsets_error_response(replicas: ReplicaManager) -> None:
    handler = ListOffsetsHandler(replicas)
    codec = REQUESTS[int(handler.api_key)].codec(9)
    request = codec.decode(codec.encode(list_body([("orders", 0, -1), ("x", 1, -2)])))
    ctx = RequestContext(2, 9, 1, None, "peer", 1, 0)
    body = handler.error_response(ctx, request, ErrorCode.UNKNOWN_SERVER_ERROR)
    out = RESPONSES[2].codec(9)
    assert [a[0] for a in answers(out.decode(out.encode(body)))] == [ErrorCode.UNKNOWN_SERVER_ERROR] * 2
    assert handler.error_response(ctx, None, ErrorCode.INVALID_REQUEST) is None


# -- OffsetForLeaderEpoch ----------------------------------------------------------------------------


def epoch_body(partitions: list[tuple[str, int, int, int]], replica_id: int = 2) -> dict[str, Any]:
    topics: dict[str, list[dict[str, Any]]] = {}
    for name, index, current, epoch in partitions:
        topics.setdefault(name, []).append(
            {"partition": index, "current_leader_epoch": current, "leader_epoch": epoch}
        )
    return {"replica_id": replica_id, "topics": [{"topic": n, "partitions": p} for n, p in topics.items()]}


def epoch_answers(response: MessageData) -> list[tuple[int, int, int, int]]:
    return [
        (p.partition, p.error_code, p.leader_epoch, p.end_offset)
        for t in response.topics
        for p in t.partitions
    ]


@pytest.mark.parametrize("version", [2, 4])
async def test_offset_for_leader_epoch(replicas: ReplicaManager, version: int) -> None:
    handler = OffsetForLeaderEpochHandler(replicas)
    body = epoch_body(
        [
            ("orders", 0, -1, 3),  # the latest epoch ends at the LEO
            ("orders", 0, 3, 1),  # older than every known epoch: its own number, the first start
            ("orders", 0, -1, 9),  # newer than every known epoch: unknown
            ("orders", 0, 2, 3),
            ("orders", 0, 4, 3),
            ("orders", 2, -1, 5),
            ("orders", 8, -1, 0),
            ("nope", 0, -1, 0),
        ]
    )  # OffsetForLeaderEpoch has no duplicate rule: Kafka answers each entry
    assert epoch_answers(await call(handler, version, body)) == [
        (0, NONE, 3, 4),
        (0, NONE, 1, 0),
        (0, NONE, -1, -1),
        (0, ErrorCode.FENCED_LEADER_EPOCH, -1, -1),
        (0, ErrorCode.UNKNOWN_LEADER_EPOCH, -1, -1),
        (2, ErrorCode.NOT_LEADER_OR_FOLLOWER, -1, -1),
        (8, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1, -1),
        (0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1, -1),
    ]


async def test_offset_for_leader_epoch_consumer_replica_id_gets_the_same_answer(
    replicas: ReplicaManager,
) -> None:
    handler = OffsetForLeaderEpochHandler(replicas)
    body = epoch_body([("orders", 0, 3, 3)], replica_id=-1)
    assert epoch_answers(await call(handler, 4, body)) == [(0, NONE, 3, 4)]


async def test_offset_for_leader_epoch_error_response(replicas: ReplicaManager) -> None:
    handler = OffsetForLeaderEpochHandler(replicas)
    codec = REQUESTS[23].codec(4)
    request = codec.decode(codec.encode(epoch_body([("orders", 0, -1, 3)])))
    ctx = RequestContext(23, 4, 1, None, "peer", 1, 0)
    body = handler.error_response(ctx, request, ErrorCode.UNKNOWN_SERVER_ERROR)
    out = RESPONSES[23].codec(4)
    assert epoch_answers(out.decode(out.encode(body))) == [(0, ErrorCode.UNKNOWN_SERVER_ERROR, -1, -1)]
    assert handler.error_response(ctx, None, ErrorCode.INVALID_REQUEST) is None
