"""NetworkLeaderEndpoint against a scripted in-process fake broker speaking the real codecs."""

from __future__ import annotations

import pathlib
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from client.connection import KafkaConnection
from client.errors import ConnectionClosedError
from follower.fetch_state import LeaderEpoch, Offset, TopicPartition
from follower.leader_endpoint import EpochEndOffset, FetchPartitionParams, OffsetAndEpoch
from follower.network_endpoint import NetworkLeaderEndpoint
from protocol.api import Request
from protocol.api_keys import ApiKey
from protocol.error_codes import ErrorCode, KafkaError
from tests.fake_broker import CLOSE, FakeBroker, Reply, Script
from tests.follower.fake_leader import make_batch
from tests.follower.helpers import Harness

# A handler answers a decoded request with a response body, or None to close the connection.
Handler = Callable[[Request], Awaitable[dict[str, Any] | None]]

REPLICA_ID = 7
BROKER_EPOCH = 33
SESSION_ID = 42
T0: TopicPartition = ("t", 0)
T1: TopicPartition = ("t", 1)
U0: TopicPartition = ("u", 0)
TOPIC_IDS = {"t": uuid.UUID(int=1), "u": uuid.UUID(int=2)}


def ranges(fetch_max: int = 12, *, offset_for_leader_epoch: bool = True) -> list[dict[str, int]]:
    out = [
        {"api_key": ApiKey.API_VERSIONS, "min_version": 0, "max_version": 3},
        {"api_key": ApiKey.FETCH, "min_version": 4, "max_version": fetch_max},
        {"api_key": ApiKey.LIST_OFFSETS, "min_version": 0, "max_version": 9},
    ]
    if offset_for_leader_epoch:
        out.append({"api_key": ApiKey.OFFSET_FOR_LEADER_EPOCH, "min_version": 0, "max_version": 4})
    return out


def endpoint_script(api_ranges: list[dict[str, int]], handler: Handler) -> Script:
    """ApiVersions answered with ``api_ranges``; everything else by ``handler`` (None closes)."""

    async def script(request: Request) -> Reply:
        if request.api_key == ApiKey.API_VERSIONS:
            return request.api_version, {"error_code": 0, "api_keys": api_ranges, "throttle_time_ms": 0}, None
        body = await handler(request)
        return CLOSE if body is None else (request.api_version, body, None)

    return script


Start = Callable[..., Awaitable[tuple[FakeBroker, NetworkLeaderEndpoint]]]


@pytest.fixture
async def start() -> AsyncIterator[Start]:
    brokers: list[FakeBroker] = []
    connections: list[KafkaConnection] = []

    async def start(
        handler: Handler, api_ranges: list[dict[str, int]] | None = None
    ) -> tuple[FakeBroker, NetworkLeaderEndpoint]:
        broker = await FakeBroker(endpoint_script(api_ranges or ranges(), handler)).start()
        brokers.append(broker)
        conn = await KafkaConnection.open("127.0.0.1", broker.port, request_timeout_s=5)
        connections.append(conn)
        endpoint = NetworkLeaderEndpoint(
            conn, replica_id=REPLICA_ID, broker_epoch=BROKER_EPOCH, max_wait_ms=100, min_bytes=1
        )
        return broker, endpoint

    yield start
    for conn in connections:
        conn.close()
    for broker in brokers:
        await broker.stop()


def p(tp: TopicPartition, offset: int, *, epoch: int = 5, ids: bool = False) -> FetchPartitionParams:
    return FetchPartitionParams(
        Offset(offset),
        Offset(0),
        LeaderEpoch(epoch),
        LeaderEpoch(4),
        TOPIC_IDS[tp[0]] if ids else None,
    )


def partition_response(request_partition: Any, **overrides: Any) -> dict[str, Any]:
    out = {
        "partition_index": request_partition.partition,
        "error_code": 0,
        "high_watermark": request_partition.fetch_offset,
        "last_stable_offset": request_partition.fetch_offset,
        "log_start_offset": 0,
        "aborted_transactions": [],
        "preferred_read_replica": -1,
        "records": None,
    }
    out.update(overrides)
    return out


def echo_fetch(
    session_id: int = SESSION_ID, special: dict[TopicPartition, dict[str, Any]] | None = None
) -> Handler:
    """Answers a Fetch with every requested partition (HW = fetch offset, no records)."""

    async def handler(request: Request) -> dict[str, Any] | None:
        names = {v: k for k, v in TOPIC_IDS.items()}
        topics = []
        for topic in request.body.topics:
            name = topic.get("topic") or names[topic.topic_id]
            partitions = [
                partition_response(rp, **(special or {}).get((name, rp.partition), {}))
                for rp in topic.partitions
            ]
            topics.append({"topic": name, "topic_id": TOPIC_IDS[name], "partitions": partitions})
        return {"throttle_time_ms": 0, "error_code": 0, "session_id": session_id, "responses": topics}

    return handler


def sent(request: Request) -> dict[TopicPartition, int]:
    """The partitions a Fetch request carries, with their fetch offsets."""
    names = {v: k for k, v in TOPIC_IDS.items()}
    out = {}
    for topic in request.body.topics:
        name = names[topic.topic_id] if request.api_version >= 13 else topic.topic
        for rp in topic.partitions:
            out[(name, rp.partition)] = rp.fetch_offset
    return out


def forgotten(request: Request) -> set[TopicPartition]:
    return {(t.topic, part) for t in request.body.forgotten_topics_data for part in t.partitions}


def session_of(request: Request) -> tuple[int, int]:
    return request.body.session_id, request.body.session_epoch


# -- capabilities and request shapes ------------------------------------------------------------------


async def test_capabilities_follow_the_brokers_versions(start: Start) -> None:
    _, old = await start(echo_fetch(), ranges(11, offset_for_leader_epoch=False))
    assert not old.supports_truncation_on_fetch
    assert not old.supports_offset_for_leader_epoch
    _, new = await start(echo_fetch(), ranges(17))
    assert new.supports_truncation_on_fetch
    assert new.supports_offset_for_leader_epoch


async def test_fetch_below_v15_names_the_replica_in_replica_id(start: Start) -> None:
    broker, endpoint = await start(echo_fetch(), ranges(12))
    ready = {T0: p(T0, 10)}
    request = endpoint.build_fetch(ready, {T0})
    assert request is not None
    await endpoint.fetch(request)
    (fetch,) = broker.of(ApiKey.FETCH)
    assert fetch.api_version == 12
    assert fetch.body.replica_id == REPLICA_ID
    assert (fetch.body.max_wait_ms, fetch.body.min_bytes, fetch.body.max_bytes) == (100, 1, 10 * 1024 * 1024)
    (rp,) = fetch.body.topics[0].partitions
    assert (rp.fetch_offset, rp.current_leader_epoch, rp.last_fetched_epoch) == (10, 5, 4)
    assert (rp.log_start_offset, rp.partition_max_bytes) == (0, 1024 * 1024)


async def test_fetch_v15_plus_names_the_replica_in_replica_state(start: Start) -> None:
    broker, endpoint = await start(echo_fetch(), ranges(17))
    ready = {T0: p(T0, 10, ids=True)}
    request = endpoint.build_fetch(ready, {T0})
    assert request is not None
    result = await endpoint.fetch(request)
    (fetch,) = broker.of(ApiKey.FETCH)
    assert fetch.api_version == 17
    assert "replica_id" not in fetch.body or fetch.body.replica_id == -1
    assert fetch.body.replica_state.replica_id == REPLICA_ID
    assert fetch.body.replica_state.replica_epoch == BROKER_EPOCH
    assert fetch.body.topics[0].topic_id == TOPIC_IDS["t"]
    assert set(result) == {T0}


async def test_partitions_without_topic_ids_downgrade_to_v12(start: Start) -> None:
    broker, endpoint = await start(echo_fetch(), ranges(17))
    request = endpoint.build_fetch({T0: p(T0, 10)}, {T0})
    assert request is not None
    await endpoint.fetch(request)
    (fetch,) = broker.of(ApiKey.FETCH)
    assert fetch.api_version == 12
    assert fetch.body.replica_id == REPLICA_ID


# -- the fetch session ----------------------------------------------------------------------------------


async def test_session_progression_sends_only_changed_and_lists_forgotten(start: Start) -> None:
    broker, endpoint = await start(echo_fetch(), ranges(12))
    ready = {T0: p(T0, 10), T1: p(T1, 20), U0: p(U0, 30)}

    first = endpoint.build_fetch(ready, set(ready))
    assert first is not None and set(first.to_send) == set(ready) and not first.forgotten
    assert set(await endpoint.fetch(first)) == set(ready)

    ready[T1] = p(T1, 25)
    second = endpoint.build_fetch(ready, {T1})
    assert second is not None
    assert dict(second.to_send) == {T1: ready[T1]}
    assert set(second.partitions) == set(ready)
    assert set(await endpoint.fetch(second)) == {T1}  # the echo answers what was sent

    del ready[U0]
    third = endpoint.build_fetch(ready, {U0})
    assert third is not None and not third.to_send and third.forgotten == {U0}
    await endpoint.fetch(third)

    fourth = endpoint.build_fetch(ready, set())  # nothing changed: an empty incremental poll
    assert fourth is not None and not fourth.to_send
    await endpoint.fetch(fourth)

    fetches = broker.of(ApiKey.FETCH)
    assert [session_of(r) for r in fetches] == [(0, 0), (SESSION_ID, 1), (SESSION_ID, 2), (SESSION_ID, 3)]
    assert [sent(r) for r in fetches] == [{T0: 10, T1: 20, U0: 30}, {T1: 25}, {}, {}]
    assert [forgotten(r) for r in fetches] == [set(), set(), {U0}, set()]


async def test_nothing_to_fetch_or_forget_builds_nothing(start: Start) -> None:
    broker, endpoint = await start(echo_fetch(), ranges(12))
    assert endpoint.build_fetch({}, set()) is None
    request = endpoint.build_fetch({T0: p(T0, 0)}, {T0})
    assert request is not None
    await endpoint.fetch(request)
    leaving = endpoint.build_fetch({}, {T0})  # the last partition leaves: it must be forgotten
    assert leaving is not None and leaving.forgotten == {T0}
    await endpoint.fetch(leaving)
    assert endpoint.build_fetch({}, set()) is None
    assert len(broker.of(ApiKey.FETCH)) == 2


async def test_session_not_found_returns_nothing_and_next_request_is_full(start: Start) -> None:
    evict = {"on": False}
    echo = echo_fetch()

    async def handler(request: Request) -> dict[str, Any] | None:
        if evict["on"]:
            evict["on"] = False
            return {"throttle_time_ms": 0, "error_code": 70, "session_id": 0, "responses": []}
        return await echo(request)

    broker, endpoint = await start(handler, ranges(12))
    ready = {T0: p(T0, 10), T1: p(T1, 20)}
    request = endpoint.build_fetch(ready, set(ready))
    assert request is not None
    await endpoint.fetch(request)

    evict["on"] = True
    ready[T0] = p(T0, 11)
    request = endpoint.build_fetch(ready, {T0})
    assert request is not None
    assert await endpoint.fetch(request) == {}

    request = endpoint.build_fetch(ready, set())
    assert request is not None and set(request.to_send) == {T0, T1}
    assert set(await endpoint.fetch(request)) == {T0, T1}
    fetches = broker.of(ApiKey.FETCH)
    assert [session_of(r) for r in fetches] == [(0, 0), (SESSION_ID, 1), (0, 0)]
    assert sent(fetches[2]) == {T0: 11, T1: 20}


async def test_session_topic_id_error_is_raised(start: Start) -> None:
    async def handler(request: Request) -> dict[str, Any] | None:
        return {"throttle_time_ms": 0, "error_code": 106, "session_id": 0, "responses": []}

    _, endpoint = await start(handler, ranges(12))
    request = endpoint.build_fetch({T0: p(T0, 0)}, {T0})
    assert request is not None
    with pytest.raises(KafkaError) as info:
        await endpoint.fetch(request)
    assert info.value.code is ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR


async def test_lost_connection_raises_and_next_request_recreates_the_session(start: Start) -> None:
    echo = echo_fetch()
    calls = {"n": 0}

    async def handler(request: Request) -> dict[str, Any] | None:
        calls["n"] += 1
        return None if calls["n"] == 2 else await echo(request)

    _, endpoint = await start(handler, ranges(12))
    ready = {T0: p(T0, 10)}
    request = endpoint.build_fetch(ready, set(ready))
    assert request is not None
    await endpoint.fetch(request)
    ready[T0] = p(T0, 12)
    request = endpoint.build_fetch(ready, {T0})
    assert request is not None
    with pytest.raises(ConnectionClosedError):
        await endpoint.fetch(request)
    assert tuple(endpoint.session.next_metadata) == (SESSION_ID, 0)
    request = endpoint.build_fetch(ready, set())
    assert request is not None and dict(request.to_send) == {T0: ready[T0]}


async def test_fetch_rejects_a_request_it_did_not_build(start: Start) -> None:
    _, endpoint = await start(echo_fetch(), ranges(12))
    request = endpoint.build_fetch({T0: p(T0, 0)}, {T0})
    assert request is not None
    await endpoint.fetch(request)
    with pytest.raises(ValueError):
        await endpoint.fetch(request)


async def test_a_built_request_that_was_never_sent_makes_the_next_one_full(start: Start) -> None:
    broker, endpoint = await start(echo_fetch(), ranges(12))
    ready = {T0: p(T0, 10), T1: p(T1, 20)}
    request = endpoint.build_fetch(ready, set(ready))
    assert request is not None
    await endpoint.fetch(request)
    ready[T0] = p(T0, 11)
    assert endpoint.build_fetch(ready, {T0}) is not None  # built, never sent
    request = endpoint.build_fetch(ready, set())
    assert request is not None
    await endpoint.fetch(request)
    fetches = broker.of(ApiKey.FETCH)
    assert [session_of(r) for r in fetches] == [(0, 0), (SESSION_ID, 0)]
    assert sent(fetches[1]) == {T0: 11, T1: 20}


# -- response mapping -----------------------------------------------------------------------------------


async def test_response_partitions_map_to_fetch_partition_data(start: Start) -> None:
    records = make_batch(10, 5, records=2)
    special = {
        T0: {"high_watermark": 15, "last_stable_offset": 14, "log_start_offset": 3, "records": records},
        T1: {"diverging_epoch": {"epoch": 3, "end_offset": 17}, "high_watermark": 40},
        U0: {"error_code": ErrorCode.NOT_LEADER_OR_FOLLOWER.value, "high_watermark": -1},
    }
    _, endpoint = await start(echo_fetch(special=special), ranges(17))
    ready = {T0: p(T0, 10, ids=True), T1: p(T1, 20, ids=True), U0: p(U0, 30, ids=True)}
    request = endpoint.build_fetch(ready, set(ready))
    assert request is not None
    result = await endpoint.fetch(request)

    t0 = result[T0]
    assert (t0.error, t0.high_watermark, t0.last_stable_offset, t0.log_start_offset) == (
        ErrorCode.NONE,
        15,
        14,
        3,
    )
    assert bytes(t0.records) == records
    assert t0.diverging_epoch is None
    t1 = result[T1]
    assert t1.diverging_epoch == EpochEndOffset(ErrorCode.NONE, LeaderEpoch(3), Offset(17))
    assert t1.high_watermark == 40 and bytes(t1.records) == b""
    assert result[U0].error is ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert result[U0].diverging_epoch is None


# -- OffsetForLeaderEpoch and ListOffsets ---------------------------------------------------------------


async def test_epoch_end_offsets(start: Start) -> None:
    async def handler(request: Request) -> dict[str, Any] | None:
        answers = {
            ("t", 0): {"error_code": 0, "leader_epoch": 4, "end_offset": 100},
            ("t", 1): {"error_code": ErrorCode.FENCED_LEADER_EPOCH.value},
            ("u", 0): {"error_code": 0, "leader_epoch": -1, "end_offset": -1},
        }
        topics = [
            {
                "topic": topic.topic,
                "partitions": [
                    {"partition": rp.partition, **answers[(topic.topic, rp.partition)]}
                    for rp in topic.partitions
                ],
            }
            for topic in request.body.topics
        ]
        return {"throttle_time_ms": 0, "topics": topics}

    broker, endpoint = await start(handler, ranges(12))
    asked = {T0: (LeaderEpoch(6), LeaderEpoch(4)), T1: (LeaderEpoch(6), LeaderEpoch(5)), U0: (6, 2)}
    result = await endpoint.fetch_epoch_end_offsets(asked)  # type: ignore[arg-type]
    assert result == {
        T0: EpochEndOffset(ErrorCode.NONE, LeaderEpoch(4), Offset(100)),
        T1: EpochEndOffset(ErrorCode.FENCED_LEADER_EPOCH, LeaderEpoch(-1), Offset(-1)),
        U0: EpochEndOffset(ErrorCode.NONE, LeaderEpoch(-1), Offset(-1)),
    }
    (request,) = broker.of(ApiKey.OFFSET_FOR_LEADER_EPOCH)
    assert request.api_version == 4
    assert request.body.replica_id == REPLICA_ID
    body = {
        (t.topic, rp.partition): (rp.current_leader_epoch, rp.leader_epoch)
        for t in request.body.topics
        for rp in t.partitions
    }
    assert body == {T0: (6, 4), T1: (6, 5), U0: (6, 2)}
    assert await endpoint.fetch_epoch_end_offsets({}) == {}


def list_offsets_handler(
    answers: dict[int, dict[str, Any]], *, omit: bool = False
) -> Callable[[Request], Awaitable[dict[str, Any] | None]]:
    """Answers ListOffsets by the asked timestamp (-2 earliest, -1 latest)."""

    async def handler(request: Request) -> dict[str, Any] | None:
        topics = []
        if not omit:
            for topic in request.body.topics:
                partitions = [
                    {"partition_index": rp.partition_index, "timestamp": -1, **answers[rp.timestamp]}
                    for rp in topic.partitions
                ]
                topics.append({"name": topic.name, "partitions": partitions})
        return {"throttle_time_ms": 0, "topics": topics}

    return handler


async def test_list_offsets_earliest_and_latest(start: Start) -> None:
    answers = {
        -2: {"error_code": 0, "offset": 7, "leader_epoch": 2},
        -1: {"error_code": 0, "offset": 50, "leader_epoch": 5},
    }
    broker, endpoint = await start(list_offsets_handler(answers), ranges(12))
    assert await endpoint.fetch_earliest_offset(T1, LeaderEpoch(5)) == OffsetAndEpoch(
        Offset(7), LeaderEpoch(2)
    )
    assert await endpoint.fetch_latest_offset(T1, LeaderEpoch(5)) == OffsetAndEpoch(
        Offset(50), LeaderEpoch(5)
    )
    earliest, latest = broker.of(ApiKey.LIST_OFFSETS)
    for request, timestamp in ((earliest, -2), (latest, -1)):
        assert request.api_version == 9
        assert request.body.replica_id == REPLICA_ID
        (topic,) = request.body.topics
        (rp,) = topic.partitions
        assert (topic.name, rp.partition_index, rp.current_leader_epoch, rp.timestamp) == (
            "t",
            1,
            5,
            timestamp,
        )


async def test_list_offsets_errors_raise_kafka_error(start: Start) -> None:
    fenced = {-1: {"error_code": ErrorCode.FENCED_LEADER_EPOCH.value}}
    _, endpoint = await start(list_offsets_handler(fenced), ranges(12))
    with pytest.raises(KafkaError) as info:
        await endpoint.fetch_latest_offset(T0, LeaderEpoch(5))
    assert info.value.code is ErrorCode.FENCED_LEADER_EPOCH

    _, endpoint = await start(list_offsets_handler({}, omit=True), ranges(12))
    with pytest.raises(KafkaError) as info:
        await endpoint.fetch_earliest_offset(T0, LeaderEpoch(5))
    assert info.value.code is ErrorCode.UNKNOWN_SERVER_ERROR


# -- with the real fetcher ------------------------------------------------------------------------------


async def test_a_replica_fetcher_replicates_over_it(start: Start, tmp_path: pathlib.Path) -> None:
    batch = make_batch(0, 1, records=3)

    async def handler(request: Request) -> dict[str, Any] | None:
        special = {}
        for topic in request.body.topics:
            for rp in topic.partitions:
                tp = (topic.topic, rp.partition)
                at_start = rp.fetch_offset == 0
                special[tp] = {"high_watermark": 3, "records": batch if at_start else None}
        return await echo_fetch(special=special)(request)

    broker, endpoint = await start(handler, ranges(12))
    harness = Harness(tmp_path, endpoint)  # type: ignore[arg-type]
    replica = harness.replica(T0)
    harness.add(T0, 1)
    await harness.work_until_idle()
    assert (replica.log_end_offset, replica.high_watermark) == (3, 3)
    assert harness.fetcher.fetch_state(T0).fetch_offset == 3  # type: ignore[union-attr]
    fetches = broker.of(ApiKey.FETCH)
    assert [session_of(r) for r in fetches[:2]] == [(0, 0), (SESSION_ID, 1)]
    assert sent(fetches[1]) == {T0: 3}
