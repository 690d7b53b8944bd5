"""DescribeTransactions, ListTransactions and DescribeProducers handlers: Kafka's errors per
transactional id and per partition, and what they report, through the wire codec."""

from __future__ import annotations

import pathlib
import uuid
from typing import Any

import pytest

from broker.handlers.describe_producers import DescribeProducersHandler
from broker.handlers.describe_transactions import DescribeTransactionsHandler
from broker.handlers.list_transactions import ListTransactionsHandler
from broker.handlers.registry import HandlerRegistry
from broker.replication.partition import Partition
from metadata.topics import PartitionState, TopicState
from protocol.error_codes import ErrorCode
from protocol.records import Record, build_batch
from tests.broker.local_topics import LocalTopics
from tests.broker.test_handlers_produce import NODE, NOW, ProduceEnv, StubTopics, call, produce_env
from tests.coordinator.transaction.helpers import T0, TIMEOUT_MS, Harness

E = ErrorCode


# -- DescribeTransactions ----------------------------------------------------------------------------


async def test_describe_transactions_reports_each_id_with_its_own_error() -> None:
    h = Harness()
    pid, epoch = await h.begin("t", ("b", 1), ("a", 0), ("b", 0))
    await h.init("idle")
    handler = DescribeTransactionsHandler(h.coordinator)
    HandlerRegistry([handler])  # the declared range is one the codec knows
    response = await call(handler, 0, {"transactional_ids": ["t", "nope", "", "idle"]})
    t, nope, empty, idle = response.transaction_states
    assert (t.transactional_id, t.error_code, t.transaction_state) == ("t", E.NONE, "Ongoing")
    assert (t.producer_id, t.producer_epoch, t.transaction_timeout_ms) == (pid, epoch, TIMEOUT_MS)
    assert t.transaction_start_time_ms == T0
    assert [(topic.topic, list(topic.partitions)) for topic in t.topics] == [("a", [0]), ("b", [0, 1])]
    assert (nope.transactional_id, nope.error_code) == ("nope", E.TRANSACTIONAL_ID_NOT_FOUND)
    assert (nope.producer_id, nope.topics) == (-1, [])
    assert empty.error_code == E.INVALID_REQUEST
    assert (idle.error_code, idle.transaction_state, idle.transaction_start_time_ms) == (E.NONE, "Empty", -1)


async def test_describe_transactions_coordinator_errors() -> None:
    h = Harness()
    await h.begin("t")
    handler = DescribeTransactionsHandler(h.coordinator)
    partition = h.coordinator.partition_for("t")
    h.coordinator.begin_loading(partition, h.coordinator_epoch + 1)
    [loading] = (await call(handler, 0, {"transactional_ids": ["t"]})).transaction_states
    assert loading.error_code == E.COORDINATOR_LOAD_IN_PROGRESS
    h.coordinator.unload_partition(partition)
    [elsewhere] = (await call(handler, 0, {"transactional_ids": ["t"]})).transaction_states
    assert elsewhere.error_code == E.NOT_COORDINATOR
    h.coordinator.shutdown()
    [stopped] = (await call(handler, 0, {"transactional_ids": ["t"]})).transaction_states
    assert stopped.error_code == E.COORDINATOR_NOT_AVAILABLE


async def test_describe_transactions_error_response_names_every_id() -> None:
    handler = DescribeTransactionsHandler(Harness().coordinator)
    request = type("Request", (), {"transactional_ids": ["a", "b"]})()
    body = handler.error_response(None, request, E.UNKNOWN_SERVER_ERROR)  # type: ignore[arg-type]
    assert [(s["transactional_id"], s["error_code"]) for s in body["transaction_states"]] == [
        ("a", E.UNKNOWN_SERVER_ERROR),
        ("b", E.UNKNOWN_SERVER_ERROR),
    ]


# -- ListTransactions --------------------------------------------------------------------------------


def listed(response: Any) -> list[tuple[str, int, str]]:
    return sorted(
        (t.transactional_id, t.producer_id, t.transaction_state) for t in response.transaction_states
    )


async def test_list_transactions_filters() -> None:
    h = Harness()
    pid_a, _ = await h.begin("a")
    h.clock.advance(100)
    pid_b, _ = await h.init("b")
    handler = ListTransactionsHandler(h.coordinator)
    HandlerRegistry([handler])
    everything = await call(
        handler, 1, {"state_filters": [], "producer_id_filters": [], "duration_filter": -1}
    )
    assert everything.error_code == E.NONE
    assert listed(everything) == [("a", pid_a, "Ongoing"), ("b", pid_b, "Empty")]
    by_state = await call(
        handler,
        1,
        {"state_filters": ["Ongoing", "Bogus", "Bogus"], "producer_id_filters": [], "duration_filter": -1},
    )
    assert listed(by_state) == [("a", pid_a, "Ongoing")]
    assert by_state.unknown_state_filters == ["Bogus"]
    by_producer = await call(handler, 0, {"state_filters": [], "producer_id_filters": [pid_b]})
    assert listed(by_producer) == [("b", pid_b, "Empty")]
    # v1: running longer than 100 ms: "a" started 100 ms ago, "b" never started (-1: always long).
    longer = await call(handler, 1, {"state_filters": [], "producer_id_filters": [], "duration_filter": 100})
    assert listed(longer) == [("b", pid_b, "Empty")]


async def test_list_transactions_v0_has_no_duration_filter() -> None:
    h = Harness()
    await h.begin("a")
    handler = ListTransactionsHandler(h.coordinator)
    response = await call(handler, 0, {"state_filters": ["Ongoing"], "producer_id_filters": []})
    assert [t.transactional_id for t in response.transaction_states] == ["a"]


async def test_list_transactions_while_loading_and_stopped() -> None:
    h = Harness()
    await h.begin("a")
    handler = ListTransactionsHandler(h.coordinator)
    h.coordinator.begin_loading(0, h.coordinator_epoch + 1)
    loading = await call(handler, 1, {"state_filters": [], "producer_id_filters": [], "duration_filter": -1})
    assert (loading.error_code, loading.transaction_states) == (E.COORDINATOR_LOAD_IN_PROGRESS, [])
    h.coordinator.shutdown()
    stopped = await call(handler, 1, {"state_filters": [], "producer_id_filters": [], "duration_filter": -1})
    assert stopped.error_code == E.COORDINATOR_NOT_AVAILABLE
    body = handler.error_response(None, None, E.UNKNOWN_SERVER_ERROR)  # type: ignore[arg-type]
    assert body["error_code"] == E.UNKNOWN_SERVER_ERROR


# -- DescribeProducers -------------------------------------------------------------------------------


def mixed_topics() -> StubTopics:
    """ "mixed": partition 0 led here, partition 1 led by node 2."""
    states = {
        0: PartitionState(0, NODE, 0, 0, [NODE], [NODE]),
        1: PartitionState(1, 2, 3, 0, [2, NODE], [2, NODE]),
    }
    return StubTopics({"mixed": TopicState("mixed", uuid.uuid4(), states, {})})


@pytest.fixture
def local() -> LocalTopics:
    topics = LocalTopics(NODE)
    topics.create_topic("orders", 2, 1, {})
    return topics


@pytest.fixture
def env(tmp_path: pathlib.Path, local: LocalTopics) -> ProduceEnv:
    return produce_env(tmp_path, local)


def producers_handler(env: ProduceEnv, topics: Any) -> DescribeProducersHandler:
    handler = DescribeProducersHandler(env.replicas, topics)
    HandlerRegistry([handler])
    return handler


def by_partition(response: Any) -> dict[tuple[str, int], Any]:
    return {(t.name, p.partition_index): p for t in response.topics for p in t.partitions}


def append(
    partition: Partition, producer_id: int, *, first_seq: int, n: int, txn: bool, ts: int = NOW
) -> None:
    batch = build_batch(
        [Record(value=b"v%d" % i, timestamp=ts + i) for i in range(n)],
        producer_id=producer_id,
        producer_epoch=3,
        base_sequence=first_seq,
        is_transactional=txn,
    )
    guard = partition.start_txn_verification(producer_id) if txn else None
    partition.append_records(memoryview(batch), required_acks=1, now_ms=NOW, verification=guard)


async def test_describe_producers_lists_the_active_producers(env: ProduceEnv, local: LocalTopics) -> None:
    handler = producers_handler(env, local)
    partition = env.replicas.get_partition("orders", 0)
    assert partition is not None
    append(partition, 7, first_seq=0, n=2, txn=False)
    append(partition, 9, first_seq=0, n=3, txn=True, ts=NOW + 100)
    append(partition, 9, first_seq=3, n=1, txn=True, ts=NOW + 200)
    response = await call(handler, 0, {"topics": [{"name": "orders", "partition_indexes": [0, 1]}]})
    results = by_partition(response)
    zero, one = results[("orders", 0)], results[("orders", 1)]
    assert (zero.error_code, zero.error_message, one.error_code, one.active_producers) == (
        E.NONE,
        None,
        E.NONE,
        [],
    )
    states = {s.producer_id: s for s in zero.active_producers}
    assert set(states) == {7, 9}
    idempotent, txn = states[7], states[9]
    assert (idempotent.producer_epoch, idempotent.last_sequence, idempotent.last_timestamp) == (3, 1, NOW + 1)
    assert (idempotent.coordinator_epoch, idempotent.current_txn_start_offset) == (-1, -1)
    assert (txn.producer_epoch, txn.last_sequence, txn.last_timestamp) == (3, 3, NOW + 200)
    assert (txn.coordinator_epoch, txn.current_txn_start_offset) == (-1, 2)

    partition.append_txn_marker(
        producer_id=9, producer_epoch=3, coordinator_epoch=5, commit=False, now_ms=NOW
    )
    response = await call(handler, 0, {"topics": [{"name": "orders", "partition_indexes": [0]}]})
    after = {s.producer_id: s for s in by_partition(response)[("orders", 0)].active_producers}[9]
    assert (after.coordinator_epoch, after.current_txn_start_offset) == (5, -1)


async def test_describe_producers_partition_errors(tmp_path: pathlib.Path) -> None:
    topics = mixed_topics()
    env = produce_env(tmp_path, topics)
    handler = producers_handler(env, topics)
    request = {
        "topics": [
            {"name": "mixed", "partition_indexes": [0, 1, 7]},
            {"name": "missing", "partition_indexes": [0, 1]},
            {"name": "bad/name", "partition_indexes": [0]},
        ]
    }
    results = by_partition(await call(handler, 0, request))
    assert results[("mixed", 0)].error_code == E.NONE
    assert results[("mixed", 1)].error_code == E.NOT_LEADER_OR_FOLLOWER
    assert results[("mixed", 7)].error_code == E.UNKNOWN_TOPIC_OR_PARTITION
    assert (
        results[("missing", 0)].error_code
        == results[("missing", 1)].error_code
        == E.UNKNOWN_TOPIC_OR_PARTITION
    )
    invalid = results[("bad/name", 0)]
    assert invalid.error_code == E.INVALID_TOPIC_EXCEPTION
    assert invalid.error_message and "bad/name" in invalid.error_message


async def test_describe_producers_failed_and_resigned_partitions(tmp_path: pathlib.Path) -> None:
    topics = mixed_topics()
    env = produce_env(tmp_path, topics)
    handler = producers_handler(env, topics)
    partition = env.replicas.get_partition("mixed", 0)
    assert partition is not None
    partition.is_leader = False  # resigned, not yet dropped by the replica transitions
    [result] = (
        (await call(handler, 0, {"topics": [{"name": "mixed", "partition_indexes": [0]}]}))
        .topics[0]
        .partitions
    )
    assert result.error_code == E.NOT_LEADER_OR_FOLLOWER
    partition.is_offline = True
    [result] = (
        (await call(handler, 0, {"topics": [{"name": "mixed", "partition_indexes": [0]}]}))
        .topics[0]
        .partitions
    )
    assert result.error_code == E.KAFKA_STORAGE_ERROR


async def test_describe_producers_error_response(env: ProduceEnv, local: LocalTopics) -> None:
    handler = producers_handler(env, local)
    request = type(
        "Request", (), {"topics": [type("T", (), {"name": "orders", "partition_indexes": [0, 1]})()]}
    )()
    body = handler.error_response(None, request, E.UNKNOWN_SERVER_ERROR)  # type: ignore[arg-type]
    assert [(p["partition_index"], p["error_code"]) for p in body["topics"][0]["partitions"]] == [
        (0, E.UNKNOWN_SERVER_ERROR),
        (1, E.UNKNOWN_SERVER_ERROR),
    ]
