"""Produce and InitProducerId handlers, called with requests that went through the request codec at
the lowest and highest version each serves; every response must encode with its version's codec.
InitProducerId hands out ids from controller blocks (ControllerProducerIdManager, whose block
fetching is tested in test_producer_id_blocks.py)."""

from __future__ import annotations

import asyncio
import pathlib
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from broker.cluster.producer_id_blocks import ControllerProducerIdManager
from broker.handlers.base import NO_RESPONSE, Handler, RequestContext
from broker.handlers.init_producer_id import InitProducerIdHandler
from broker.handlers.produce import ProduceHandler
from broker.handlers.registry import HandlerRegistry
from broker.produce.service import ProduceService
from broker.replication.replica_manager import ReplicaManager
from broker.server.dispatcher import CloseConnection
from metadata.topics import PartitionState, TopicState
from protocol.data import MessageData
from protocol.error_codes import ErrorCode
from protocol.messages import REQUESTS, RESPONSES
from protocol.records import CompressionType, Record, build_batch
from server_common.config import load_config, to_log_config
from server_common.purgatory import DelayedOperationPurgatory, FakeScheduler
from storage.clock import FakeClock
from storage.log_manager import LogManager
from tests.broker.local_topics import Leader, LocalTopics
from tests.broker.txn_support import in_memory_transaction_coordinator

NODE = 1
NOW = 1_700_000_000_000
NONE = int(ErrorCode.NONE)


def batch(n: int = 1, **kwargs: Any) -> bytes:
    return build_batch([Record(value=b"v%d" % i, timestamp=NOW + i) for i in range(n)], **kwargs)


def context(handler: Handler, version: int, client_id: str | None = "test") -> RequestContext:
    return RequestContext(int(handler.api_key), version, 1, client_id, "peer", 1, 0)


def roundtrip_request(handler: Handler, version: int, body: dict[str, Any]) -> MessageData:
    codec = REQUESTS[int(handler.api_key)].codec(version)
    return codec.decode(codec.encode(body))


def encode_response(handler: Handler, version: int, body: Any) -> MessageData:
    codec = RESPONSES[int(handler.api_key)].codec(version)
    return codec.decode(codec.encode(body))


async def call(handler: Handler, version: int, body: dict[str, Any], client_id: str | None = "test") -> Any:
    request = roundtrip_request(handler, version, body)
    response = await handler.handle(context(handler, version, client_id), request)
    if response is NO_RESPONSE:
        return response
    return encode_response(handler, version, response)


# -- Produce -----------------------------------------------------------------------------------------


@dataclass
class StubTopics:
    """Fixed metadata, as a metadata image holds it, for partitions with other replicas (which
    :class:`LocalTopics`, a cluster of one broker, cannot place): ``subscribe`` leads the partitions
    led by ``NODE``, as the replica transitions would."""

    topics: dict[str, TopicState] = field(default_factory=dict)

    def get(self, name: str) -> TopicState | None:
        return self.topics.get(name)

    def all(self) -> list[TopicState]:
        return list(self.topics.values())

    def subscribe(self, leader: Leader) -> None:
        for topic in self.topics.values():
            for state in topic.sorted_partitions():
                if state.leader_id == NODE:
                    leader.lead(topic, state)


@dataclass
class ProduceEnv:
    handler: ProduceHandler
    replicas: ReplicaManager
    scheduler: FakeScheduler
    purgatory: DelayedOperationPurgatory
    logs: LogManager
    clock: FakeClock


def produce_env(tmp_path: pathlib.Path, topics: Any = None) -> ProduceEnv:
    config = load_config(None, [f"log.dirs={tmp_path / 'logs'}", f"node.id={NODE}"])[0]
    clock = FakeClock(NOW)
    logs = LogManager(config.log_dirs, to_log_config({}, config), clock)
    if topics is None:
        topics = LocalTopics(NODE)
        topics.create_topic("orders", 2, 1, {})
        topics.create_topic("zipped", 1, 1, {})
        topics.create_topic("__consumer_offsets", 1, 1, {})
    replicas = ReplicaManager(logs, topics, NODE, config, clock)
    topics.subscribe(replicas)
    scheduler = FakeScheduler()
    purgatory = DelayedOperationPurgatory("Produce", scheduler)
    service = ProduceService(replicas, purgatory, clock)
    replicas.add_partition_listener(service.on_partition_changed)
    return ProduceEnv(ProduceHandler(service), replicas, scheduler, purgatory, logs, clock)


def shared_topics() -> StubTopics:
    """ "shared" has partition 0 led here with follower 2 in the ISR (its HW waits), partition 1 led
    by node 2 at epoch 7, and partition 2 led here with follower 2 out of the ISR and
    min.insync.replicas=2."""
    states = {
        0: PartitionState(0, NODE, 0, 0, [NODE, 2], [NODE, 2]),
        1: PartitionState(1, 2, 7, 0, [2, NODE], [2, NODE]),
        2: PartitionState(2, NODE, 0, 0, [NODE, 2], [NODE]),
    }
    topic = TopicState("shared", uuid.uuid4(), states, {"min.insync.replicas": "2"})
    return StubTopics({"shared": topic})


@pytest.fixture
def env(tmp_path: pathlib.Path) -> ProduceEnv:
    return produce_env(tmp_path)


def produce_body(
    partitions: list[tuple[str, int, bytes | None]], acks: int = 1, transactional_id: str | None = None
) -> dict[str, Any]:
    topics: dict[str, list[dict[str, Any]]] = {}
    for name, index, records in partitions:
        topics.setdefault(name, []).append({"index": index, "records": records})
    return {
        "transactional_id": transactional_id,
        "acks": acks,
        "timeout_ms": 30_000,
        "topic_data": [{"name": name, "partition_data": data} for name, data in topics.items()],
    }


def partition_results(response: MessageData) -> dict[tuple[str, int], MessageData]:
    return {(t.name, p.index): p for t in response.responses for p in t.partition_responses}


def test_produce_versions_match_the_codec(env: ProduceEnv) -> None:
    HandlerRegistry([env.handler])  # the declared range is one the codec knows


@pytest.mark.parametrize("version", [3, 11])
async def test_produce_appends_and_reports_offsets(env: ProduceEnv, version: int) -> None:
    body = produce_body([("orders", 0, batch(2)), ("orders", 1, batch(1))])
    first = partition_results(await call(env.handler, version, body))
    second = partition_results(await call(env.handler, version, body))
    assert first[("orders", 0)].error_code == NONE and first[("orders", 0)].base_offset == 0
    assert second[("orders", 0)].base_offset == 2 and second[("orders", 1)].base_offset == 1
    assert second[("orders", 0)].log_append_time_ms == -1
    if version >= 5:
        assert second[("orders", 0)].log_start_offset == 0


async def test_acks_all_with_a_single_replica_completes_at_once(
    env: ProduceEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    parked: list[object] = []
    real = env.purgatory.try_complete_else_watch
    monkeypatch.setattr(
        env.purgatory, "try_complete_else_watch", lambda op, keys: (parked.append(op), real(op, keys))[1]
    )
    results = partition_results(await call(env.handler, 9, produce_body([("orders", 0, batch(3))], acks=-1)))
    assert (results[("orders", 0)].error_code, results[("orders", 0)].base_offset) == (NONE, 0)
    assert parked == []  # the HW already covered the batch: no delayed produce was built


async def test_acks_zero_sends_nothing_and_closes_on_error(env: ProduceEnv) -> None:
    assert await call(env.handler, 7, produce_body([("orders", 0, batch())], acks=0)) is NO_RESPONSE
    assert env.replicas.get_partition("orders", 0).log_end_offset == 1  # type: ignore[union-attr]
    with pytest.raises(CloseConnection):
        await call(env.handler, 7, produce_body([("nope", 0, batch())], acks=0))
    request = roundtrip_request(env.handler, 7, produce_body([("orders", 0, batch())], acks=0))
    assert env.handler.error_response(context(env.handler, 7), request, ErrorCode.INVALID_REQUEST) is None


@pytest.mark.parametrize("version", [3, 11])
async def test_invalid_acks(env: ProduceEnv, version: int) -> None:
    results = partition_results(
        await call(env.handler, version, produce_body([("orders", 0, batch())], acks=2))
    )
    assert results[("orders", 0)].error_code == ErrorCode.INVALID_REQUIRED_ACKS
    assert results[("orders", 0)].base_offset == -1
    assert env.replicas.get_partition("orders", 0).log_end_offset == 0  # type: ignore[union-attr]


@pytest.mark.parametrize("version", [3, 11])
async def test_per_partition_errors(env: ProduceEnv, version: int) -> None:
    corrupt = bytearray(batch())
    corrupt[-1] ^= 0xFF
    legacy = bytearray(batch())
    legacy[16] = 1
    body = produce_body(
        [
            ("orders", 0, batch()),
            ("orders", 1, bytes(corrupt)),
            ("orders", 9, batch()),
            ("nope", 0, batch()),
            ("zipped", 0, bytes(legacy)),
            ("__consumer_offsets", 0, batch()),
        ]
    )
    results = partition_results(await call(env.handler, version, body))
    assert results[("orders", 0)].error_code == NONE
    assert results[("orders", 1)].error_code == ErrorCode.CORRUPT_MESSAGE
    assert results[("orders", 9)].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert results[("nope", 0)].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert results[("zipped", 0)].error_code == ErrorCode.UNSUPPORTED_VERSION
    assert results[("__consumer_offsets", 0)].error_code == ErrorCode.INVALID_TOPIC_EXCEPTION
    if version >= 8:
        assert "CRC" in results[("orders", 1)].error_message
        assert results[("orders", 0)].error_message is None


async def test_admin_client_may_write_internal_topics(env: ProduceEnv) -> None:
    body = produce_body([("__consumer_offsets", 0, batch())])
    results = partition_results(await call(env.handler, 9, body, client_id="__admin_client"))
    assert results[("__consumer_offsets", 0)].error_code == NONE


async def test_two_batches_are_invalid_record_with_a_message(env: ProduceEnv) -> None:
    results = partition_results(await call(env.handler, 8, produce_body([("orders", 0, batch() + batch())])))
    result = results[("orders", 0)]
    assert result.error_code == ErrorCode.INVALID_RECORD
    assert "exactly one record batch" in result.error_message
    assert result.record_errors == []


async def test_zstd_needs_version_7(env: ProduceEnv) -> None:
    zstd = batch(2, compression=CompressionType.ZSTD)
    old = partition_results(await call(env.handler, 6, produce_body([("zipped", 0, zstd)])))
    assert old[("zipped", 0)].error_code == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
    new = partition_results(await call(env.handler, 7, produce_body([("zipped", 0, zstd)])))
    assert new[("zipped", 0)].error_code == NONE


async def test_transactional_batches(env: ProduceEnv) -> None:
    txn = batch(1, producer_id=5, producer_epoch=0, base_sequence=0, is_transactional=True)
    without_id = produce_body([("orders", 0, txn), ("orders", 1, batch())])
    results = partition_results(await call(env.handler, 9, without_id))
    assert {r.error_code for r in results.values()} == {ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED}
    with_id = produce_body([("orders", 0, txn)], transactional_id="tx-1")
    results = partition_results(await call(env.handler, 9, with_id))
    assert results[("orders", 0)].error_code == ErrorCode.INVALID_TXN_STATE
    assert env.replicas.get_partition("orders", 1).log_end_offset == 0  # type: ignore[union-attr]


@pytest.mark.parametrize("version", [3, 11])
async def test_idempotent_retries(env: ProduceEnv, version: int) -> None:
    first = batch(2, producer_id=9, producer_epoch=0, base_sequence=0)
    await call(env.handler, version, produce_body([("orders", 0, batch())]))
    original = partition_results(
        await call(env.handler, version, produce_body([("orders", 0, first)], acks=-1))
    )
    retry = partition_results(await call(env.handler, version, produce_body([("orders", 0, first)], acks=-1)))
    assert original[("orders", 0)].base_offset == retry[("orders", 0)].base_offset == 1
    assert retry[("orders", 0)].error_code == NONE  # DUPLICATE_SEQUENCE_NUMBER is answered as success
    gap = batch(1, producer_id=9, producer_epoch=0, base_sequence=7)
    results = partition_results(await call(env.handler, version, produce_body([("orders", 0, gap)])))
    assert results[("orders", 0)].error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    bumped = batch(1, producer_id=9, producer_epoch=1, base_sequence=0)
    await call(env.handler, version, produce_body([("orders", 0, bumped)]))
    stale = batch(1, producer_id=9, producer_epoch=0, base_sequence=2)
    results = partition_results(await call(env.handler, version, produce_body([("orders", 0, stale)])))
    assert results[("orders", 0)].error_code == ErrorCode.INVALID_PRODUCER_EPOCH


@pytest.mark.parametrize("version", [3, 8, 11])
async def test_a_record_too_far_ahead_is_invalid_timestamp(env: ProduceEnv, version: int) -> None:
    """message.timestamp.after.max.ms (one hour by default) against the produce path's clock."""
    hour = 3_600_000
    ahead = build_batch([Record(b"now", timestamp=NOW), Record(b"later", timestamp=NOW + 2 * hour)])
    body = produce_body([("orders", 0, ahead), ("orders", 1, batch())])
    results = partition_results(await call(env.handler, version, body))
    refused = results[("orders", 0)]
    assert (refused.error_code, refused.base_offset) == (ErrorCode.INVALID_TIMESTAMP, -1)
    assert results[("orders", 1)].error_code == NONE  # the other partition of the request is appended
    assert env.replicas.get_partition("orders", 0).log_end_offset == 0  # type: ignore[union-attr]
    if version >= 8:
        assert refused.error_message == "One or more records have been rejected due to invalid timestamp"
        assert [(e.batch_index, e.batch_index_error_message) for e in refused.record_errors] == [
            (
                1,
                f"Timestamp {NOW + 2 * hour} of message with offset 1 is out of range. The timestamp "
                f"should be within [{NOW - 9223372036854775807}, {NOW + hour}]",
            )
        ]
    env.clock.advance(hour)  # the service reads its injected clock for each request
    results = partition_results(await call(env.handler, version, produce_body([("orders", 0, ahead)])))
    assert results[("orders", 0)].error_code == NONE


async def test_not_leader_reports_the_current_leader(tmp_path: pathlib.Path) -> None:
    env = produce_env(tmp_path, shared_topics())
    for version, expected in ((9, (-1, -1)), (10, (2, 7))):
        results = partition_results(await call(env.handler, version, produce_body([("shared", 1, batch())])))
        result = results[("shared", 1)]
        assert result.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert (result.current_leader.leader_id, result.current_leader.leader_epoch) == expected


async def test_acks_all_below_min_isr(tmp_path: pathlib.Path) -> None:
    env = produce_env(tmp_path, shared_topics())
    results = partition_results(await call(env.handler, 9, produce_body([("shared", 2, batch())], acks=-1)))
    assert results[("shared", 2)].error_code == ErrorCode.NOT_ENOUGH_REPLICAS
    results = partition_results(await call(env.handler, 9, produce_body([("shared", 2, batch())], acks=1)))
    assert results[("shared", 2)].error_code == NONE


async def test_acks_all_times_out_while_the_hw_waits(tmp_path: pathlib.Path) -> None:
    env = produce_env(tmp_path, shared_topics())
    body = produce_body([("shared", 0, batch(2)), ("shared", 1, batch())], acks=-1)
    task = asyncio.create_task(call(env.handler, 11, body))
    await asyncio.sleep(0)
    assert not task.done() and env.purgatory.num_delayed == 1
    env.scheduler.advance_ms(30_000)
    async with asyncio.timeout(5):
        results = partition_results(await task)
    assert results[("shared", 0)].error_code == ErrorCode.REQUEST_TIMED_OUT
    assert results[("shared", 0)].base_offset == 0  # the records stay in the log
    assert results[("shared", 1)].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER


async def test_acks_all_completes_when_the_hw_moves(tmp_path: pathlib.Path) -> None:
    env = produce_env(tmp_path, shared_topics())
    task = asyncio.create_task(call(env.handler, 9, produce_body([("shared", 0, batch(2))], acks=-1)))
    await asyncio.sleep(0)
    partition = env.replicas.get_partition("shared", 0)
    assert partition is not None and not task.done()
    partition.append_records(batch(), required_acks=1, now_ms=NOW)
    await asyncio.sleep(0)
    assert not task.done()  # ISR {1, 2}: the HW waits for the follower
    # the follower left the ISR: the ISR is now the partition's (set by the metadata or by an
    # AlterPartition answer), no longer an attribute a test may overwrite
    assert partition.make_leader(0, 1, [NODE, 2], [NODE])
    partition.append_records(batch(), required_acks=1, now_ms=NOW)
    await asyncio.sleep(0)
    assert not task.done()  # ...but min.insync.replicas=2 freezes the HW (Kafka 3.7+)
    partition.configured_min_insync_replicas = 1
    # follower 2 left the ISR while still "caught up" (it was in the ISR within replica.lag.time.max.ms):
    # the HW keeps waiting for such a follower, about to rejoin (6.2), until the lag max has passed
    env.clock.advance(30_001)
    partition.append_records(batch(), required_acks=1, now_ms=NOW)  # the listener re-checks the purgatory
    async with asyncio.timeout(5):
        results = partition_results(await task)
    assert results[("shared", 0)].error_code == NONE


async def test_error_response_fills_every_partition(env: ProduceEnv) -> None:
    request = roundtrip_request(
        env.handler, 11, produce_body([("orders", 0, batch()), ("orders", 1, batch())])
    )
    body = env.handler.error_response(context(env.handler, 11), request, ErrorCode.UNKNOWN_SERVER_ERROR)
    results = partition_results(encode_response(env.handler, 11, body))
    assert {r.error_code for r in results.values()} == {ErrorCode.UNKNOWN_SERVER_ERROR}
    assert env.handler.error_response(context(env.handler, 11), None, ErrorCode.INVALID_REQUEST) is None


# -- InitProducerId ----------------------------------------------------------------------------------


def init_body(transactional_id: str | None = None, producer_id: int = -1, epoch: int = -1) -> dict[str, Any]:
    return {
        "transactional_id": transactional_id,
        "transaction_timeout_ms": 60_000,
        "producer_id": producer_id,
        "producer_epoch": epoch,
    }


async def allocate_block() -> tuple[ErrorCode, int, int]:
    """The controller's AllocateProducerIds answer: the first block, ids 0-999."""
    return ErrorCode.NONE, 0, 1000


@pytest.fixture
async def init_handler() -> AsyncIterator[InitProducerIdHandler]:
    """A handler whose manager already holds its first block (before it, see
    test_producer_id_blocks.py: COORDINATOR_LOAD_IN_PROGRESS)."""
    manager = ControllerProducerIdManager(allocate_block)
    manager.prefetch()
    for _ in range(5):  # the fake controller answers at once: its block arrives within a few steps
        await asyncio.sleep(0)
    yield InitProducerIdHandler(manager, in_memory_transaction_coordinator())
    await manager.close()


@pytest.mark.parametrize("version", [0, 5])
async def test_init_producer_id_hands_out_fresh_ids(
    init_handler: InitProducerIdHandler, version: int
) -> None:
    HandlerRegistry([init_handler])
    first = await call(init_handler, version, init_body())
    second = await call(init_handler, version, init_body())
    assert (first.error_code, first.producer_id, first.producer_epoch) == (NONE, 0, 0)
    assert (second.producer_id, second.producer_epoch) == (1, 0)


async def test_init_producer_id_ignores_a_known_id_without_transactional_id(
    init_handler: InitProducerIdHandler,
) -> None:
    platformatic = await call(init_handler, 5, init_body(producer_id=0, epoch=0))
    assert (platformatic.error_code, platformatic.producer_id, platformatic.producer_epoch) == (NONE, 0, 0)
    bump = await call(init_handler, 4, init_body(producer_id=0, epoch=3))
    assert (bump.error_code, bump.producer_id, bump.producer_epoch) == (NONE, 1, 0)


@pytest.mark.parametrize(
    ("body", "version", "code"),
    [
        (init_body(producer_id=5, epoch=-1), 3, ErrorCode.INVALID_REQUEST),
        (init_body(producer_id=-1, epoch=2), 5, ErrorCode.INVALID_REQUEST),
        (init_body(transactional_id=""), 0, ErrorCode.INVALID_REQUEST),
        # a transactional id this broker does not coordinate
        (init_body(transactional_id="tx-1"), 0, ErrorCode.NOT_COORDINATOR),
        (init_body(transactional_id="tx-1", producer_id=3, epoch=1), 5, ErrorCode.NOT_COORDINATOR),
    ],
)
async def test_init_producer_id_errors(
    init_handler: InitProducerIdHandler, body: dict[str, Any], version: int, code: ErrorCode
) -> None:
    response = await call(init_handler, version, body)
    assert (response.error_code, response.producer_id, response.producer_epoch) == (code, -1, -1)


async def test_init_producer_id_unexpected_failure_is_unknown_server_error() -> None:
    class Failing:
        def generate_producer_id(self) -> int:
            raise OSError(28, "No space left on device")

    handler = InitProducerIdHandler(Failing(), in_memory_transaction_coordinator())
    response = await call(handler, 4, init_body())
    assert (response.error_code, response.producer_id) == (ErrorCode.UNKNOWN_SERVER_ERROR, -1)
    body = handler.error_response(context(handler, 4), None, ErrorCode.INVALID_REQUEST)
    assert encode_response(handler, 4, body).error_code == ErrorCode.INVALID_REQUEST
