"""Consumer rounds against a scripted broker: what each request carries, and recovery from session errors."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from client import ConnectionClosedError, Consumer, KafkaConnection, TopicPartition
from protocol.api import Request
from protocol.api_keys import ApiKey
from protocol.error_codes import ErrorCode
from protocol.records import Record, build_batch
from tests.client.test_connection_unit import api_versions_ok
from tests.fake_broker import FakeBroker, Reply, Script

A0 = TopicPartition("a", 0)
A1 = TopicPartition("a", 1)
SESSION = 4242


@pytest.fixture
async def fake() -> AsyncIterator[Callable[[Script], Awaitable[FakeBroker]]]:
    brokers: list[FakeBroker] = []

    async def start(script: Script) -> FakeBroker:
        brokers.append(await FakeBroker(script).start())
        return brokers[-1]

    yield start
    for broker in brokers:
        await broker.stop()


class ScriptedFetches:
    """Answers Fetch requests from a list of per-round callables; records the decoded requests."""

    def __init__(self, rounds: list[Callable[[Request], Reply]]) -> None:
        self.rounds = rounds
        self.fetches: list[Any] = []

    async def __call__(self, request: Request) -> Reply:
        if request.api_key == ApiKey.API_VERSIONS:
            return api_versions_ok(request)
        assert request.api_key == ApiKey.FETCH
        self.fetches.append(request.body)
        return self.rounds.pop(0)(request)


def answer(
    session_id: int, partitions: dict[TopicPartition, bytes | None], error: int = 0
) -> Callable[..., Reply]:
    def reply(request: Request) -> Reply:
        topics: list[dict[str, Any]] = []
        for tp, records in partitions.items():
            if not topics or topics[-1]["topic"] != tp.topic:
                topics.append({"topic": tp.topic, "partitions": []})
            topics[-1]["partitions"].append(
                {"partition_index": tp.partition, "high_watermark": 9, "records": records}
            )
        body = {"error_code": error, "session_id": session_id, "responses": topics}
        return request.api_version, body, None

    return reply


def sent(body: Any) -> dict[TopicPartition, int]:
    return {TopicPartition(t.topic, p.partition): p.fetch_offset for t in body.topics for p in t.partitions}


def forgotten(body: Any) -> list[TopicPartition]:
    return [TopicPartition(t.topic, p) for t in body.forgotten_topics_data for p in t.partitions]


async def test_rounds_send_only_moved_partitions_and_recover_from_a_lost_session(fake: Any) -> None:
    batch = build_batch([Record(b"x"), Record(b"y")], base_offset=5)
    script = ScriptedFetches(
        [
            answer(SESSION, {A0: None, A1: None}),  # full: session created
            answer(SESSION, {A1: batch}),  # incremental: records for a-1 at 5..6
            answer(0, {}, error=ErrorCode.FETCH_SESSION_ID_NOT_FOUND),  # evicted
            answer(SESSION + 1, {A1: None}),  # full again, without the unassigned a-0
        ]
    )
    broker = await fake(script)
    async with await KafkaConnection.open("127.0.0.1", broker.port) as conn:
        consumer = Consumer(conn, max_wait_ms=0)
        consumer.assign(A0, 0)
        consumer.assign(A1, 5)

        first = await consumer.fetch()
        assert first.metadata == (0, 0) and sent(script.fetches[0]) == {A0: 0, A1: 5}

        second = await consumer.fetch()
        assert second.metadata == (SESSION, 1)
        assert sent(script.fetches[1]) == {}  # nothing moved yet: an empty incremental request
        assert [(r.offset, r.value) for r in second.records()] == [(5, b"x"), (6, b"y")]
        assert consumer.position(A1) == 7

        consumer.unassign(A0)
        third = await consumer.fetch()
        assert third.metadata == (SESSION, 2)
        assert sent(script.fetches[2]) == {A1: 7} and forgotten(script.fetches[2]) == [A0]
        assert not third.valid and third.error is ErrorCode.FETCH_SESSION_ID_NOT_FOUND
        assert third.partitions == {}

        await consumer.fetch()
        assert (script.fetches[3].session_id, script.fetches[3].session_epoch) == (0, 0)
        assert sent(script.fetches[3]) == {A1: 7}
        assert consumer.session.next_metadata == (SESSION + 1, 1)


async def test_a_failed_round_makes_the_next_request_full(fake: Any) -> None:
    dropped = False

    async def script(request: Request) -> Reply:
        nonlocal dropped
        if request.api_key == ApiKey.API_VERSIONS:
            return api_versions_ok(request)
        if request.body.session_epoch == 1 and not dropped:
            dropped = True
            raise ConnectionResetError
        return answer(SESSION, {A0: None} if request.body.session_epoch == 0 else {})(request)

    broker = await fake(script)
    conn = await KafkaConnection.open("127.0.0.1", broker.port)
    consumer = Consumer(conn, max_wait_ms=0)
    consumer.assign(A0, 3)
    await consumer.fetch()
    with pytest.raises(ConnectionClosedError):
        await consumer.fetch()
    assert consumer.session.next_metadata == (SESSION, 0)
    async with await KafkaConnection.open("127.0.0.1", broker.port) as again:
        consumer = Consumer(again, session=consumer.session, max_wait_ms=0)
        consumer.assign(A0, 3)
        result = await consumer.fetch()
        assert result.metadata == (SESSION, 0) and result.partitions_sent == 1
        assert consumer.session.next_metadata == (SESSION, 1)
    await asyncio.sleep(0)


async def test_a_cancelled_round_makes_the_next_request_full(fake: Any) -> None:
    """The cancelled request took the marked changes into the session; only a full request resends them."""

    async def script(request: Request) -> Reply:
        if request.api_key == ApiKey.API_VERSIONS:
            return api_versions_ok(request)
        if request.body.session_epoch == 0:
            return answer(SESSION, {A0: None})(request)
        return None  # the incremental round never gets an answer

    broker = await fake(script)
    async with await KafkaConnection.open("127.0.0.1", broker.port) as conn:
        consumer = Consumer(conn, max_wait_ms=0)
        consumer.assign(A0, 3)
        await consumer.fetch()
        consumer.seek(A0, 10)
        pending = asyncio.create_task(consumer.fetch())
        await asyncio.sleep(0.05)
        pending.cancel()
        with pytest.raises(asyncio.CancelledError):
            await pending
        assert consumer.session.next_metadata == (SESSION, 0)
        assert consumer.session.build().to_send == {A0: consumer.session.session_partitions[A0]}
        assert consumer.session.session_partitions[A0].fetch_offset == 10
