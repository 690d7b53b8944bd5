"""The Fetch handler end to end: requests encoded and decoded by the codec at the versions clients
send (v4, v7, v11, v12, v13, v16, v17), responses assembled around file slices and decoded back."""

from __future__ import annotations

import asyncio
import copy
import pathlib
import time
import uuid
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from broker.fetch.response import response_body
from broker.fetch_session import FetchResponseParts, PartitionFetchResult, TopicPartitionKey
from broker.handlers.base import EncodedResponse, RequestContext
from broker.handlers.fetch import FetchHandler
from broker.handlers.metadata import BrokerEndpoint
from broker.handlers.registry import HandlerRegistry
from broker.metrics.requests import RequestMetrics
from broker.server.dispatcher import RequestDispatcher
from protocol.api import decode_response, encode_request
from protocol.data import MessageData
from protocol.error_codes import ErrorCode, KafkaError
from protocol.messages import REQUESTS, RESPONSES
from protocol.sentinels import IsolationLevel
from protocol.wire import ExternalBytes
from storage.slices import FileSlice
from tests.broker.test_fetch_service import NODE, FetchEnv, batch, fetch_env, log_bytes

FETCH = 1
VERSIONS = [4, 7, 11, 12, 13, 16, 17]
NONE = int(ErrorCode.NONE)


@dataclass(frozen=True)
class P:
    """One partition of a request body."""

    topic: str
    index: int = 0
    offset: int = 0
    max_bytes: int = 1 << 20
    current_leader_epoch: int = -1
    last_fetched_epoch: int = -1


@pytest.fixture
async def env(tmp_path: pathlib.Path) -> AsyncIterator[FetchEnv]:
    fetch = fetch_env(tmp_path)
    yield fetch
    fetch.purgatory.shutdown()
    fetch.replicas.shutdown()
    fetch.logs.shutdown()


def handler_for(env: FetchEnv, brokers: Sequence[BrokerEndpoint] = ()) -> FetchHandler:
    return FetchHandler(env.service, brokers=lambda: list(brokers))


def topic_ref(env: FetchEnv, version: int, name: str) -> dict[str, Any]:
    if version >= 13:
        topic = env.topics.get(name)
        return {"topic_id": topic.topic_id if topic is not None else uuid.UUID(int=99)}
    return {"topic": name}


def body(
    env: FetchEnv,
    version: int,
    partitions: Sequence[P],
    *,
    session: tuple[int, int] = (0, -1),
    forgotten: Sequence[P] = (),
    replica_id: int = -1,
    max_wait_ms: int = 0,
    min_bytes: int = 1,
    max_bytes: int = 50 << 20,
    isolation: int = 0,
) -> dict[str, Any]:
    topics: list[dict[str, Any]] = []
    names: list[str] = []  # the topic of each entry (v13+ entries carry only its id)
    for p in partitions:
        if not names or names[-1] != p.topic:
            names.append(p.topic)
            topics.append({**topic_ref(env, version, p.topic), "partitions": []})
        topics[-1]["partitions"].append(
            {
                "partition": p.index,
                "current_leader_epoch": p.current_leader_epoch,
                "fetch_offset": p.offset,
                "last_fetched_epoch": p.last_fetched_epoch,
                "partition_max_bytes": p.max_bytes,
            }
        )
    forgotten_topics: list[dict[str, Any]] = []
    for p in forgotten:
        forgotten_topics.append({**topic_ref(env, version, p.topic), "partitions": [p.index]})
    message: dict[str, Any] = {
        "replica_id": replica_id,
        "max_wait_ms": max_wait_ms,
        "min_bytes": min_bytes,
        "max_bytes": max_bytes,
        "isolation_level": isolation,
        "session_id": session[0],
        "session_epoch": session[1],
        "topics": topics,
        "forgotten_topics_data": forgotten_topics,
        "rack_id": "",
    }
    if version >= 15 and replica_id >= 0:
        message["replica_state"] = {"replica_id": replica_id, "replica_epoch": -1}
    return message


def context(version: int) -> RequestContext:
    return RequestContext(FETCH, version, 7, "test", "peer", 1, 0)


def join(response: EncodedResponse) -> bytes:
    """What the connection writes: bytes as they are, file slices read at write time."""
    joined = b"".join(part if isinstance(part, bytes) else part.read_bytes() for part in response.parts)
    assert len(joined) == response.size
    return joined


async def call(handler: FetchHandler, version: int, message: dict[str, Any]) -> MessageData:
    codec = REQUESTS[FETCH].codec(version)
    request = codec.decode(codec.encode(message))
    response = await handler.handle(context(version), request)
    assert isinstance(response, EncodedResponse)
    return RESPONSES[FETCH].codec(version).decode(join(response))


def partitions_of(response: MessageData, version: int) -> list[tuple[Any, MessageData]]:
    return [(t.topic_id if version >= 13 else t.topic, p) for t in response.responses for p in t.partitions]


def test_versions_match_the_codec(tmp_path: pathlib.Path) -> None:
    assert FetchHandler.min_version == 4 and FetchHandler.max_version == 17
    HandlerRegistry([FetchHandler(None)])  # type: ignore[arg-type]


@pytest.mark.parametrize("version", VERSIONS)
async def test_full_fetch_at_every_client_version(env: FetchEnv, version: int) -> None:
    env.append("orders", 0, batch(3))
    env.append("orders", 0, batch(2))
    handler = handler_for(env)
    message = body(env, version, [P("nope"), P("orders", 0, offset=3), P("orders", 1), P("other")])
    response = await call(handler, version, message)
    assert response.throttle_time_ms == 0
    if version >= 7:
        assert (response.error_code, response.session_id) == (NONE, 0)
    rows = partitions_of(response, version)
    orders = env.topic_id("orders") if version >= 13 else "orders"
    other = env.topic_id("other") if version >= 13 else "other"
    assert [(topic, p.partition_index) for topic, p in rows[:3]] == [(orders, 0), (orders, 1), (other, 0)]
    assert [len(t.partitions) for t in response.responses][:2] == [2, 1]  # adjacent partitions grouped
    data = rows[0][1]
    assert data.error_code == NONE and data.high_watermark == 5 and data.last_stable_offset == 5
    assert data.records == log_bytes(env, "orders")[len(batch(3)) :]
    assert data.log_start_offset == (0 if version >= 5 else -1)
    assert data.aborted_transactions is None
    assert data.preferred_read_replica == -1
    empty = rows[1][1]
    assert empty.records == b"" and empty.high_watermark == 0  # empty, not null
    unknown = rows[3][1]
    expected = ErrorCode.UNKNOWN_TOPIC_ID if version >= 13 else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert (unknown.error_code, unknown.high_watermark, unknown.records) == (expected, -1, b"")
    if version >= 12:
        assert data.diverging_epoch.epoch == -1 and data.current_leader.leader_id == -1


@pytest.mark.parametrize("version", VERSIONS)
async def test_read_committed_sends_an_empty_aborted_transactions_list(env: FetchEnv, version: int) -> None:
    env.append("orders")
    response = await call(handler_for(env), version, body(env, version, [P("orders")], isolation=1))
    data = partitions_of(response, version)[0][1]
    assert data.aborted_transactions == [] and data.records == log_bytes(env, "orders")


@pytest.mark.parametrize("version", [7, 12, 13, 17])
async def test_full_then_incremental_session(env: FetchEnv, version: int) -> None:
    handler = handler_for(env)
    env.append("orders", 0)
    first = await call(handler, version, body(env, version, [P("orders", 0), P("orders", 1)], session=(0, 0)))
    session_id = first.session_id
    assert session_id != 0 and len(partitions_of(first, version)) == 2
    env.append("orders", 1, batch(2))
    # the client sends its new offset for orders-0 and lists nothing else
    second = await call(
        handler, version, body(env, version, [P("orders", 0, offset=1)], session=(session_id, 1))
    )
    assert second.session_id == session_id
    rows = partitions_of(second, version)
    assert [p.partition_index for _, p in rows] == [1]
    assert rows[0][1].records == log_bytes(env, "orders", 1)
    # forget orders-1: the session keeps orders-0, which has nothing new
    third = await call(
        handler, version, body(env, version, [], session=(session_id, 2), forgotten=[P("orders", 1)])
    )
    assert (third.error_code, third.session_id, third.responses) == (NONE, session_id, [])
    stale = await call(handler, version, body(env, version, [], session=(session_id, 2)))
    assert (stale.error_code, stale.session_id) == (ErrorCode.INVALID_FETCH_SESSION_EPOCH, 0)


async def test_topic_id_mode_switch_inside_a_session(env: FetchEnv) -> None:
    handler = handler_for(env)
    session_id = (await call(handler, 12, body(env, 12, [P("orders")], session=(0, 0)))).session_id
    switched = await call(handler, 13, body(env, 13, [], session=(session_id, 1)))
    assert (switched.error_code, switched.session_id) == (ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR, 0)


@pytest.mark.parametrize("version", [4, 12, 16])
async def test_parts_join_to_what_the_plain_encoder_gives(env: FetchEnv, version: int) -> None:
    env.append("orders", 0, batch(2))
    env.append("orders", 2, batch(1))
    parts = await env.service.fetch(
        _domain_request(version, [("orders", 0), ("orders", 1), ("orders", 2)], env)
    )
    body_with_slices = response_body(version, parts, read_committed=False)
    codec = RESPONSES[FETCH].codec(version)
    pieces, size = codec.encode_parts(body_with_slices)
    assert any(isinstance(piece, FileSlice) for piece in pieces)
    joined = join(EncodedResponse(pieces, size))
    assert joined == codec.encode(_with_plain_records(body_with_slices))
    decoded = codec.decode(joined)
    records = [p.records for t in decoded.responses for p in t.partitions]
    assert records == [log_bytes(env, "orders", 0), b"", log_bytes(env, "orders", 2)]


def _domain_request(version: int, partitions: list[tuple[str, int]], env: FetchEnv) -> Any:
    from broker.handlers.fetch import fetch_request

    codec = REQUESTS[FETCH].codec(version)
    message = body(env, version, [P(topic, index) for topic, index in partitions])
    return fetch_request(version, codec.decode(codec.encode(message)))


def _with_plain_records(value: Any) -> Any:
    """A deep copy with every external record value read into bytes."""
    if isinstance(value, ExternalBytes):
        return value.source.read_bytes()  # type: ignore[attr-defined]
    if isinstance(value, dict):
        return {k: _with_plain_records(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_with_plain_records(v) for v in value]
    return copy.copy(value)


async def test_through_the_dispatcher_the_reply_carries_the_file_slices(env: FetchEnv) -> None:
    env.append("orders", 0, batch(4))
    dispatcher = RequestDispatcher(HandlerRegistry([handler_for(env)]), RequestMetrics(CollectorRegistry()))
    frame = encode_request(FETCH, 12, 42, "client", body(env, 12, [P("orders")]))
    reply = await dispatcher.dispatch(memoryview(frame), "peer", 1)
    assert reply is not None and any(isinstance(part, FileSlice) for part in reply.parts)
    wire = b"".join(part if isinstance(part, bytes) else part.read_bytes() for part in reply.parts)
    assert len(wire) == reply.size and int.from_bytes(wire[:4], "big") == reply.size - 4
    response = decode_response(wire[4:], FETCH, 12)
    assert response.header["correlation_id"] == 42
    assert response.body.responses[0].partitions[0].records == log_bytes(env, "orders")


@pytest.mark.parametrize("version", [12, 16])
async def test_node_endpoints_for_not_leader_partitions(env: FetchEnv, version: int) -> None:
    env.create_topic("remote", 1, replicas=(2, NODE))
    brokers = [BrokerEndpoint(NODE, "here", 9092), BrokerEndpoint(2, "there", 9093, "r2")]
    response = await call(handler_for(env, brokers), version, body(env, version, [P("remote"), P("orders")]))
    rows = partitions_of(response, version)
    assert rows[0][1].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    if version >= 16:
        assert (rows[0][1].current_leader.leader_id, rows[0][1].current_leader.leader_epoch) == (2, 0)
        assert [(n.node_id, n.host, n.port, n.rack) for n in response.node_endpoints] == [
            (2, "there", 9093, "r2")
        ]
        assert rows[1][1].current_leader.leader_id == -1
    else:
        assert rows[0][1].current_leader.leader_id == -1


@pytest.mark.parametrize("version", [13, 17])
async def test_follower_fetch_reads_to_the_log_end(env: FetchEnv, version: int) -> None:
    env.create_topic("shared", 1, replicas=(NODE, 2))
    env.append("shared", 0, batch(2))
    consumer = await call(handler_for(env), version, body(env, version, [P("shared")]))
    follower = await call(handler_for(env), version, body(env, version, [P("shared")], replica_id=2))
    assert partitions_of(consumer, version)[0][1].records == b""
    row = partitions_of(follower, version)[0][1]
    assert (row.error_code, row.high_watermark, row.records) == (NONE, 0, log_bytes(env, "shared"))
    stranger = await call(handler_for(env), version, body(env, version, [P("shared")], replica_id=3))
    assert partitions_of(stranger, version)[0][1].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER


@pytest.mark.parametrize(("version", "broker_epoch"), [(14, -1), (15, 42)])
async def test_follower_fetch_records_the_follower_state_with_its_broker_epoch(
    env: FetchEnv, version: int, broker_epoch: int
) -> None:
    """v15+ carries the follower's broker epoch in ReplicaState; the partition keeps it for the ISR
    eligibility check. Before v15 there is none (-1)."""
    env.create_topic("shared", 1, replicas=(NODE, 2))
    env.append("shared", 0, batch(2))
    message = body(env, version, [P("shared", 0, offset=2)], replica_id=2)
    if version >= 15:
        message["replica_state"]["replica_epoch"] = broker_epoch
    await call(handler_for(env), version, message)
    state = env.partition("shared").replica_set.followers[2]
    assert (state.log_end_offset, state.broker_epoch) == (2, broker_epoch)
    assert env.partition("shared").high_watermark == 2  # the follower has both records: committed


async def test_diverging_epoch_on_the_wire(env: FetchEnv) -> None:
    env.create_topic("shared", 1, replicas=(NODE, 2))
    env.append("shared", 0, batch(3))
    env.partition("shared").leader_epoch = 2
    env.append("shared", 0, batch(1))
    message = body(env, 12, [P("shared", offset=4, last_fetched_epoch=1)], replica_id=2, max_wait_ms=5000)
    row = partitions_of(await call(handler_for(env), 12, message), 12)[0][1]
    assert (row.diverging_epoch.epoch, row.diverging_epoch.end_offset, row.records) == (0, 3, b"")


async def test_idle_incremental_fetch_through_the_handler_long_polls(env: FetchEnv) -> None:
    """kafka-python 3 (Fetch v12): an incremental fetch listing no partitions must wait."""
    handler = handler_for(env)
    session_id = (await call(handler, 12, body(env, 12, [P("orders")], session=(0, 0)))).session_id
    task = asyncio.create_task(
        call(handler, 12, body(env, 12, [], session=(session_id, 1), max_wait_ms=5000))
    )
    await asyncio.sleep(0.05)
    assert not task.done()
    started = time.monotonic()
    env.append("orders", 0, batch(2))
    response = await asyncio.wait_for(task, 1)
    assert time.monotonic() - started < 0.5
    assert partitions_of(response, 12)[0][1].records == log_bytes(env, "orders")


async def test_long_poll_expiry_through_the_handler(env: FetchEnv) -> None:
    started = time.monotonic()
    response = await call(handler_for(env), 11, body(env, 11, [P("orders")], max_wait_ms=60))
    assert 0.05 <= time.monotonic() - started < 1
    assert partitions_of(response, 11)[0][1].records == b""


async def test_unknown_isolation_level_is_an_invalid_request(env: FetchEnv) -> None:
    codec = REQUESTS[FETCH].codec(12)
    request = codec.decode(codec.encode(body(env, 12, [P("orders")], isolation=3)))
    with pytest.raises(KafkaError) as raised:
        await handler_for(env).handle(context(12), request)
    assert raised.value.code == ErrorCode.INVALID_REQUEST


@pytest.mark.parametrize("version", VERSIONS)
async def test_error_response(env: FetchEnv, version: int) -> None:
    handler = handler_for(env)
    codec = REQUESTS[FETCH].codec(version)
    request = codec.decode(codec.encode(body(env, version, [P("orders", 0), P("orders", 1)])))
    without_request = handler.error_response(context(version), None, ErrorCode.UNKNOWN_SERVER_ERROR)
    with_request = handler.error_response(context(version), request, ErrorCode.UNKNOWN_SERVER_ERROR)
    response_codec = RESPONSES[FETCH].codec(version)
    if version < 7:
        assert without_request is None
    else:
        decoded = response_codec.decode(response_codec.encode(without_request))
        assert (decoded.error_code, decoded.session_id, decoded.responses) == (
            ErrorCode.UNKNOWN_SERVER_ERROR,
            0,
            [],
        )
    decoded = response_codec.decode(response_codec.encode(with_request))
    codes = [p.error_code for t in decoded.responses for p in t.partitions]
    assert codes == ([] if version >= 13 else [ErrorCode.UNKNOWN_SERVER_ERROR] * 2)


def test_response_body_groups_only_adjacent_partitions() -> None:
    a0, b0, a1 = (TopicPartitionKey(uuid.UUID(int=0), t, i) for t, i in (("a", 0), ("b", 0), ("a", 1)))
    result = PartitionFetchResult(high_watermark=1, last_stable_offset=1, log_start_offset=0)
    parts = FetchResponseParts(NONE, 0, [(a0, result), (b0, result), (a1, result)])
    built = response_body(12, parts, read_committed=bool(IsolationLevel.READ_UNCOMMITTED))
    assert [(t["topic"], len(t["partitions"])) for t in built["responses"]] == [("a", 1), ("b", 1), ("a", 1)]
    assert all(p["records"] == b"" for t in built["responses"] for p in t["partitions"])
