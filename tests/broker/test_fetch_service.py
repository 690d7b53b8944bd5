"""FetchService on real partitions in a temporary directory: the byte budget and the first-batch
rule, order, per-partition errors, followers, sessions, and the long poll on a real event loop."""

from __future__ import annotations

import asyncio
import pathlib
import random
import time
import uuid
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from broker.fetch.service import FetchRequest, FetchService, PartitionPayload
from broker.fetch_session import (
    FetchContext,
    FetchManager,
    FetchResponseParts,
    FetchSessionCache,
    FetchSessionCacheMetrics,
    IncrementalFetchContext,
    PartitionFetchParams,
    PartitionFetchResult,
    TopicPartitionKey,
)
from broker.replication.partition import Partition
from broker.replication.replica_manager import ReplicaManager
from metadata.topics import TopicState
from protocol.error_codes import ErrorCode
from protocol.records import CompressionType, Record, build_batch
from protocol.sentinels import ZERO_UUID, IsolationLevel
from server_common.config import load_config, to_log_config
from server_common.purgatory import DelayedOperationPurgatory
from storage.clock import FakeClock
from storage.log_manager import LogManager
from tests.broker.local_topics import LocalTopics

NODE = 1
NOW = 1_700_000_000_000
NONE = ErrorCode.NONE
BIG = 1 << 30


def batch(n: int = 1, size: int = 10, **kwargs: Any) -> bytes:
    """One batch of ``n`` records with ``size``-byte values."""
    return build_batch(
        [Record(value=bytes([65 + i % 26]) * size, timestamp=NOW + i) for i in range(n)], **kwargs
    )


@dataclass
class FetchEnv:
    service: FetchService
    replicas: ReplicaManager
    topics: LocalTopics
    purgatory: DelayedOperationPurgatory
    cache: FetchSessionCache
    manager: FetchManager
    logs: LogManager
    expirations: list[bool]

    def partition(self, topic: str, index: int = 0) -> Partition:
        partition = self.replicas.get_partition(topic, index)
        assert partition is not None
        return partition

    def append(self, topic: str, index: int = 0, records: bytes | None = None) -> None:
        self.partition(topic, index).append_records(records or batch(), required_acks=1, now_ms=NOW)

    def create_topic(
        self, name: str, partitions: int = 1, *, replicas: Sequence[int] = (NODE,)
    ) -> TopicState:
        """Through the controller, every partition on ``replicas`` (led by the first, all in the ISR)."""
        assignments = [(index, list(replicas)) for index in range(partitions)]
        return self.topics.create_topic(name, -1, -1, {}, assignments=assignments)

    def topic_id(self, topic: str) -> uuid.UUID:
        state = self.topics.get(topic)
        assert state is not None
        return state.topic_id


def fetch_env(tmp_path: pathlib.Path, *, fetch_max_bytes: int = 50 * 1024 * 1024) -> FetchEnv:
    """A broker's fetch path over real logs; the purgatory runs on the current event loop."""
    config = load_config(None, [f"log.dirs={tmp_path / 'logs'}", f"node.id={NODE}"])[0]
    clock = FakeClock(NOW)
    logs = LogManager(config.log_dirs, to_log_config({}, config), clock)
    topics = LocalTopics(NODE, brokers=[2])  # broker 2 for partitions with another replica
    replicas = ReplicaManager(logs, topics, NODE, config, clock)
    topics.subscribe(replicas)
    purgatory = DelayedOperationPurgatory("Fetch", asyncio.get_running_loop())
    cache = FetchSessionCache(FetchSessionCacheMetrics(CollectorRegistry()), random_source=random.Random(7))
    expirations: list[bool] = []
    manager = FetchManager(cache, clock.time_ms)
    service = FetchService(
        manager,
        replicas,
        topics,
        purgatory,
        fetch_max_bytes=fetch_max_bytes,
        expiration_meter=expirations.append,
    )
    replicas.add_partition_listener(service.on_partition_changed)
    env = FetchEnv(service, replicas, topics, purgatory, cache, manager, logs, expirations)
    env.create_topic("orders", 3)
    env.create_topic("other", 1)
    return env


def key(topic: str, index: int = 0) -> TopicPartitionKey:
    return TopicPartitionKey(ZERO_UUID, topic, index)


def fp(offset: int = 0, max_bytes: int = BIG, **kwargs: int) -> PartitionFetchParams:
    return PartitionFetchParams(fetch_offset=offset, max_bytes=max_bytes, **kwargs)


def request(
    data: Sequence[tuple[TopicPartitionKey, PartitionFetchParams]] = (),
    *,
    version: int = 12,
    replica_id: int = -1,
    max_wait_ms: int = 0,
    min_bytes: int = 1,
    max_bytes: int = BIG,
    isolation: IsolationLevel = IsolationLevel.READ_UNCOMMITTED,
    session: tuple[int, int] = (0, -1),
    forget: Sequence[TopicPartitionKey] = (),
) -> FetchRequest:
    return FetchRequest(
        version=version,
        replica_id=replica_id,
        max_wait_ms=max_wait_ms,
        min_bytes=min_bytes,
        max_bytes=max_bytes,
        isolation_level=isolation,
        session_id=session[0],
        session_epoch=session[1],
        fetch_data=list(data),
        to_forget=list(forget),
    )


def by_key(parts: FetchResponseParts) -> dict[TopicPartitionKey, PartitionFetchResult]:
    return dict(parts.partitions)


def records_of(result: PartitionFetchResult) -> bytes:
    payload = result.payload
    assert isinstance(payload, PartitionPayload)
    if payload.records is None:
        return b""
    if isinstance(payload.records, bytes):
        return payload.records
    return payload.records.read_bytes()


def log_bytes(env: FetchEnv, topic: str, index: int = 0) -> bytes:
    """Every batch of a one-segment log, as written."""
    segment = env.partition(topic, index).log.active_segment
    with open(segment.file.path, "rb") as f:
        return f.read()


@pytest.fixture
async def env(tmp_path: pathlib.Path) -> AsyncIterator[FetchEnv]:
    fetch = fetch_env(tmp_path)
    yield fetch
    fetch.purgatory.shutdown()
    fetch.replicas.shutdown()
    fetch.logs.shutdown()


# -- reads and the byte budget ---------------------------------------------------------------------


async def test_reads_whole_batches_from_the_fetch_offset_with_offsets(env: FetchEnv) -> None:
    for _ in range(3):
        env.append("orders", 0, batch(2))
    parts = await env.service.fetch(request([(key("orders"), fp(2))]))
    assert (parts.error_code, parts.session_id) == (NONE, 0)
    result = by_key(parts)[key("orders")]
    assert (result.error_code, result.high_watermark, result.last_stable_offset) == (NONE, 6, 6)
    assert result.log_start_offset == 0
    assert records_of(result) == log_bytes(env, "orders")[len(batch(2)) :]
    assert result.records_size == 2 * len(batch(2))


async def test_fetch_at_the_high_watermark_is_empty_without_error(env: FetchEnv) -> None:
    env.append("orders")
    result = by_key(await env.service.fetch(request([(key("orders"), fp(1))])))[key("orders")]
    assert (result.error_code, result.records_size, records_of(result)) == (NONE, 0, b"")
    assert not result.skipped_for_budget


async def test_first_batch_is_whole_even_above_both_limits(env: FetchEnv) -> None:
    big = batch(1, size=500)
    env.append("orders", 0, big)
    parts = await env.service.fetch(request([(key("orders"), fp(0, max_bytes=10))], max_bytes=20))
    assert records_of(by_key(parts)[key("orders")]) == log_bytes(env, "orders") and len(big) > 20


async def test_first_non_empty_partition_gets_the_whole_batch(env: FetchEnv) -> None:
    """The KIP-74 rule applies to the first partition that returns bytes, not the first listed."""
    big = batch(1, size=500)
    env.append("orders", 1, big)
    data = [(key("orders", 0), fp(0, max_bytes=10)), (key("orders", 1), fp(0, max_bytes=10))]
    results = by_key(await env.service.fetch(request(data, max_bytes=20)))
    assert records_of(results[key("orders", 0)]) == b""
    assert not results[key("orders", 0)].skipped_for_budget
    assert records_of(results[key("orders", 1)]) == log_bytes(env, "orders", 1)


async def test_later_partitions_that_do_not_fit_are_skipped_for_the_budget(env: FetchEnv) -> None:
    one = batch(1, size=100)
    for index in range(3):
        env.append("orders", index, one)
        env.append("orders", index, one)
    data = [(key("orders", i), fp(0)) for i in range(3)]
    results = by_key(await env.service.fetch(request(data, max_bytes=3 * len(one))))
    assert records_of(results[key("orders", 0)]) == log_bytes(env, "orders", 0)
    # what is left of the budget, whole batches only
    assert records_of(results[key("orders", 1)]) == log_bytes(env, "orders", 1)[: len(one)]
    skipped = results[key("orders", 2)]
    assert (skipped.records_size, skipped.skipped_for_budget, skipped.error_code) == (0, True, NONE)
    assert skipped.high_watermark == 2  # offsets are still reported


async def test_partition_limit_smaller_than_the_first_batch_after_data_was_returned(env: FetchEnv) -> None:
    env.append("orders", 0, batch(1, size=50))
    env.append("orders", 1, batch(1, size=500))
    data = [(key("orders", 0), fp(0)), (key("orders", 1), fp(0, max_bytes=100))]
    results = by_key(await env.service.fetch(request(data)))
    assert results[key("orders", 0)].records_size > 0
    assert (results[key("orders", 1)].records_size, results[key("orders", 1)].skipped_for_budget) == (0, True)


async def test_fetch_max_bytes_caps_the_request(tmp_path: pathlib.Path) -> None:
    env = fetch_env(tmp_path, fetch_max_bytes=150)
    one = batch(1, size=100)
    env.append("orders", 0, one)
    env.append("orders", 1, one)
    data = [(key("orders", 0), fp(0)), (key("orders", 1), fp(0))]
    results = by_key(await env.service.fetch(request(data, max_bytes=BIG)))
    assert records_of(results[key("orders", 0)]) == log_bytes(env, "orders", 0)
    assert results[key("orders", 1)].skipped_for_budget
    env.logs.shutdown()


async def test_partitions_keep_the_request_order_and_unknown_ones_come_last(env: FetchEnv) -> None:
    data = [
        (key("nope"), fp()),
        (key("orders", 2), fp()),
        (key("orders", 9), fp()),
        (key("other"), fp()),
        (key("orders", 0), fp()),
    ]
    parts = await env.service.fetch(request(data))
    assert [k for k, _ in parts.partitions] == [
        key("orders", 2),
        key("other"),
        key("orders", 0),
        key("nope"),
        key("orders", 9),
    ]
    errors = {k: r.error_code for k, r in parts.partitions}
    assert errors[key("nope")] == errors[key("orders", 9)] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert all(r.erroneous for k, r in parts.partitions if k in (key("nope"), key("orders", 9)))


# -- per-partition errors --------------------------------------------------------------------------


async def test_offset_out_of_range(env: FetchEnv) -> None:
    env.append("orders")
    result = by_key(await env.service.fetch(request([(key("orders"), fp(5))])))[key("orders")]
    assert (result.error_code, result.high_watermark, result.log_start_offset) == (
        ErrorCode.OFFSET_OUT_OF_RANGE,
        -1,
        -1,
    )
    assert not result.erroneous


@pytest.mark.parametrize(
    ("epoch", "error"),
    [(-1, NONE), (0, NONE), (1, ErrorCode.UNKNOWN_LEADER_EPOCH)],
)
async def test_current_leader_epoch(env: FetchEnv, epoch: int, error: ErrorCode) -> None:
    result = by_key(await env.service.fetch(request([(key("orders"), fp(0, current_leader_epoch=epoch))])))
    assert result[key("orders")].error_code == error


async def test_fenced_leader_epoch(env: FetchEnv) -> None:
    env.partition("orders").leader_epoch = 3
    data = [(key("orders"), fp(0, current_leader_epoch=2))]
    result = by_key(await env.service.fetch(request(data, version=16)))[key("orders")]
    assert result.error_code == ErrorCode.FENCED_LEADER_EPOCH
    assert isinstance(result.payload, PartitionPayload)
    assert result.payload.current_leader == (NODE, 0)  # the metadata's leader and epoch


async def test_unknown_topic_id_and_inconsistent_topic_id(env: FetchEnv) -> None:
    known = TopicPartitionKey(env.topic_id("orders"), None, 0)
    unknown = TopicPartitionKey(uuid.uuid4(), None, 0)
    stale = TopicPartitionKey(uuid.uuid4(), "orders", 1)  # a name resolved earlier, the topic since recreated
    parts = await env.service.fetch(request([(unknown, fp()), (stale, fp()), (known, fp())], version=13))
    results = by_key(parts)
    assert results[known].error_code == NONE
    assert (results[unknown].error_code, results[unknown].erroneous) == (ErrorCode.UNKNOWN_TOPIC_ID, True)
    assert (results[stale].error_code, results[stale].erroneous) == (ErrorCode.INCONSISTENT_TOPIC_ID, False)
    assert [k for k, _ in parts.partitions][-1] == unknown


async def test_partition_led_elsewhere(env: FetchEnv) -> None:
    env.create_topic("remote", 1, replicas=(2, NODE))
    result = by_key(await env.service.fetch(request([(key("remote"), fp())], version=16)))[key("remote")]
    assert (result.error_code, result.erroneous) == (ErrorCode.NOT_LEADER_OR_FOLLOWER, False)
    assert isinstance(result.payload, PartitionPayload) and result.payload.current_leader == (2, 0)
    older = by_key(await env.service.fetch(request([(key("remote"), fp())], version=15)))[key("remote")]
    assert older.payload is None or older.payload.current_leader is None  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("version", "error"), [(5, ErrorCode.NOT_LEADER_OR_FOLLOWER), (6, ErrorCode.KAFKA_STORAGE_ERROR)]
)
async def test_storage_error_is_not_leader_before_v6(env: FetchEnv, version: int, error: ErrorCode) -> None:
    env.partition("orders").is_offline = True
    result = by_key(await env.service.fetch(request([(key("orders"), fp())], version=version)))
    assert result[key("orders")].error_code == error


@pytest.mark.parametrize(("version", "error"), [(9, ErrorCode.UNSUPPORTED_COMPRESSION_TYPE), (10, NONE)])
async def test_zstd_needs_fetch_v10(env: FetchEnv, version: int, error: ErrorCode) -> None:
    env.append("orders", 0, batch(3, compression=CompressionType.ZSTD))
    result = by_key(await env.service.fetch(request([(key("orders"), fp())], version=version)))[key("orders")]
    assert result.error_code == error
    assert (result.records_size > 0) == (error == NONE)


async def test_a_read_error_answers_a_long_poll_at_once(env: FetchEnv) -> None:
    data = [(key("orders", 0), fp(0)), (key("orders", 1), fp(7))]
    started = time.monotonic()
    parts = await env.service.fetch(request(data, max_wait_ms=5000, min_bytes=1))
    assert time.monotonic() - started < 1
    assert by_key(parts)[key("orders", 1)].error_code == ErrorCode.OFFSET_OUT_OF_RANGE


# -- isolation, followers, diverging epochs ---------------------------------------------------------


async def test_consumers_read_to_the_high_watermark_followers_to_the_log_end(env: FetchEnv) -> None:
    env.create_topic("shared", 1, replicas=(NODE, 2))  # follower 2 in the ISR: the HW waits for it
    env.append("shared", 0, batch(2))
    for isolation in IsolationLevel:
        consumer = by_key(await env.service.fetch(request([(key("shared"), fp())], isolation=isolation)))
        result = consumer[key("shared")]
        assert (result.error_code, result.high_watermark, result.records_size) == (NONE, 0, 0)
        assert not result.skipped_for_budget
    follower = by_key(await env.service.fetch(request([(key("shared"), fp())], replica_id=2)))[key("shared")]
    assert (follower.error_code, follower.high_watermark) == (NONE, 0)
    assert records_of(follower) == log_bytes(env, "shared")


@pytest.mark.parametrize(
    ("replica_id", "epoch", "error"),
    [
        (2, -1, NONE),
        (3, -1, ErrorCode.NOT_LEADER_OR_FOLLOWER),
        (3, 0, ErrorCode.UNKNOWN_LEADER_EPOCH),
        (NODE, -1, ErrorCode.NOT_LEADER_OR_FOLLOWER),
        (2, 5, ErrorCode.UNKNOWN_LEADER_EPOCH),
    ],
)
async def test_follower_must_be_in_the_replica_set(
    env: FetchEnv, replica_id: int, epoch: int, error: ErrorCode
) -> None:
    env.create_topic("shared", 1, replicas=(NODE, 2))
    data = [(key("shared"), fp(0, current_leader_epoch=epoch))]
    result = by_key(await env.service.fetch(request(data, replica_id=replica_id)))[key("shared")]
    assert result.error_code == error


async def test_diverging_epoch_answers_at_once_without_records(env: FetchEnv) -> None:
    """Epoch 0 holds offsets 0-2 and epoch 2 starts at 3: a follower that fetched up to offset 5 in
    epoch 1 diverged at 3, where its epoch 1 (known here as 0) ended (kafka-behaviour.md 6.6)."""
    env.create_topic("shared", 1, replicas=(NODE, 2))
    env.append("shared", 0, batch(3))
    env.partition("shared").leader_epoch = 2
    env.append("shared", 0, batch(3))
    data = [(key("shared"), fp(5, last_fetched_epoch=1))]
    started = time.monotonic()
    parts = await env.service.fetch(request(data, replica_id=2, max_wait_ms=5000, min_bytes=BIG))
    assert time.monotonic() - started < 1
    result = by_key(parts)[key("shared")]
    assert (result.error_code, result.diverging_epoch, result.records_size) == (NONE, 0, 0)
    assert isinstance(result.payload, PartitionPayload) and result.payload.diverging_end_offset == 3
    unknown = [(key("shared"), fp(5, last_fetched_epoch=4))]  # above every known epoch: undefined
    result = by_key(await env.service.fetch(request(unknown, replica_id=2)))[key("shared")]
    assert result.error_code == ErrorCode.OFFSET_OUT_OF_RANGE


# -- long poll -------------------------------------------------------------------------------------


async def test_max_wait_zero_answers_at_once(env: FetchEnv) -> None:
    parts = await env.service.fetch(request([(key("orders"), fp())], max_wait_ms=0, min_bytes=1))
    assert by_key(parts)[key("orders")].records_size == 0
    assert env.purgatory.num_delayed == 0


async def test_enough_bytes_answer_at_once(env: FetchEnv) -> None:
    env.append("orders")
    started = time.monotonic()
    parts = await env.service.fetch(request([(key("orders"), fp())], max_wait_ms=5000, min_bytes=1))
    assert time.monotonic() - started < 1
    assert by_key(parts)[key("orders")].records_size > 0


async def test_long_poll_is_woken_by_an_append(env: FetchEnv) -> None:
    task = asyncio.create_task(
        env.service.fetch(request([(key("orders", 1), fp()), (key("orders", 2), fp())], max_wait_ms=5000))
    )
    await asyncio.sleep(0.02)
    assert not task.done() and env.purgatory.num_delayed == 1
    started = time.monotonic()
    env.append("orders", 2, batch(2))
    async with asyncio.timeout(30):
        parts = await task
    assert time.monotonic() - started < 0.5
    results = by_key(parts)
    assert results[key("orders", 2)].records_size == len(batch(2))
    assert records_of(results[key("orders", 2)]) == log_bytes(env, "orders", 2)
    assert env.purgatory.num_delayed == 0 and env.expirations == []


async def test_long_poll_waits_for_min_bytes(env: FetchEnv) -> None:
    one = batch(1)
    task = asyncio.create_task(
        env.service.fetch(request([(key("orders"), fp())], max_wait_ms=5000, min_bytes=2 * len(one)))
    )
    await asyncio.sleep(0.01)
    env.append("orders", 0, one)
    await asyncio.sleep(0.01)
    assert not task.done()
    env.append("orders", 0, one)
    async with asyncio.timeout(30):
        parts = await task
    assert by_key(parts)[key("orders")].records_size == 2 * len(one)


async def test_long_poll_expires_with_an_empty_answer(env: FetchEnv) -> None:
    started = time.monotonic()
    parts = await env.service.fetch(request([(key("orders"), fp())], max_wait_ms=80, min_bytes=1))
    elapsed = time.monotonic() - started
    assert 0.07 <= elapsed < 1
    result = by_key(parts)[key("orders")]
    assert (result.error_code, result.records_size, result.high_watermark) == (NONE, 0, 0)
    assert env.expirations == [False] and env.purgatory.num_delayed == 0


async def test_a_full_fetch_of_unknown_partitions_only_answers_at_once(env: FetchEnv) -> None:
    started = time.monotonic()
    parts = await env.service.fetch(request([(key("nope"), fp())], max_wait_ms=5000))
    assert time.monotonic() - started < 1
    assert by_key(parts)[key("nope")].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


async def test_a_cancelled_fetch_leaves_the_purgatory(env: FetchEnv) -> None:
    task = asyncio.create_task(env.service.fetch(request([(key("orders"), fp())], max_wait_ms=5000)))
    await asyncio.sleep(0.01)
    assert env.purgatory.num_delayed == 1
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert env.purgatory.num_delayed == 0 and env.purgatory.num_watched_keys == 0


async def test_deleting_a_watched_topic_answers_the_long_poll(env: FetchEnv) -> None:
    task = asyncio.create_task(env.service.fetch(request([(key("other"), fp())], max_wait_ms=5000)))
    await asyncio.sleep(0.01)
    env.topics.delete_topic("other")
    async with asyncio.timeout(30):
        parts = await task
    assert by_key(parts)[key("other")].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


# -- sessions --------------------------------------------------------------------------------------


async def open_session(
    env: FetchEnv, data: Sequence[tuple[TopicPartitionKey, PartitionFetchParams]], **kw: Any
):
    parts = await env.service.fetch(request(data, session=(0, 0), **kw))
    assert parts.session_id != 0
    return parts


async def test_incremental_fetch_reads_only_changed_partitions(env: FetchEnv) -> None:
    data = [(key("orders", i), fp()) for i in range(3)] + [(key("other"), fp())]
    session_id = (await open_session(env, data)).session_id
    env.append("orders", 1)
    parts = await env.service.fetch(request(session=(session_id, 1)))
    assert [k for k, _ in parts.partitions] == [key("orders", 1)]
    session = env.cache.get(session_id)
    assert session is not None
    # records returned: the partition rotates to the end of the session order
    assert [c.key for c in session.partitions_in_order()][-1] == key("orders", 1)
    # the client moves on: a new fetch offset alone is not reported, and nothing changed since
    parts = await env.service.fetch(request([(key("orders", 1), fp(1))], session=(session_id, 2)))
    assert (parts.error_code, parts.session_id, parts.partitions) == (NONE, session_id, [])
    parts = await env.service.fetch(request(session=(session_id, 3)))
    assert (parts.error_code, parts.session_id, parts.partitions) == (NONE, session_id, [])
    assert session.dirty == set()


async def test_on_partition_changed_marks_sessions_keyed_by_name_and_by_id(env: FetchEnv) -> None:
    by_name = (await open_session(env, [(key("orders"), fp())])).session_id
    by_id_key = TopicPartitionKey(env.topic_id("orders"), None, 0)
    by_id = (await open_session(env, [(by_id_key, fp())], version=13)).session_id
    env.append("orders")
    named = await env.service.fetch(request(session=(by_name, 1)))
    ided = await env.service.fetch(request(session=(by_id, 1), version=13))
    assert [k.partition for k, _ in named.partitions] == [0]
    assert [(k.topic_id, k.topic_name) for k, _ in ided.partitions] == [(env.topic_id("orders"), "orders")]


async def test_idle_incremental_fetch_long_polls_and_wakes_on_an_append(env: FetchEnv) -> None:
    """kafka-python's idle fetch lists no partitions; it must wait, not answer at once."""
    session_id = (await open_session(env, [(key("orders", 0), fp()), (key("orders", 1), fp())])).session_id
    task = asyncio.create_task(env.service.fetch(request(session=(session_id, 1), max_wait_ms=5000)))
    await asyncio.sleep(0.05)
    assert not task.done()
    env.append("orders", 1, batch(2))
    async with asyncio.timeout(30):
        parts = await task
    assert [k for k, _ in parts.partitions] == [key("orders", 1)]
    assert by_key(parts)[key("orders", 1)].records_size == len(batch(2))
    assert env.cache.get(session_id).waiter is None  # type: ignore[union-attr]


async def test_idle_incremental_fetch_expires_empty(env: FetchEnv) -> None:
    session_id = (await open_session(env, [(key("orders"), fp())])).session_id
    started = time.monotonic()
    parts = await env.service.fetch(request(session=(session_id, 1), max_wait_ms=60))
    assert 0.05 <= time.monotonic() - started < 1
    assert (parts.session_id, parts.partitions) == (session_id, [])


async def test_idle_incremental_fetch_ignores_appends_on_other_partitions(env: FetchEnv) -> None:
    session_id = (await open_session(env, [(key("orders"), fp())])).session_id
    task = asyncio.create_task(env.service.fetch(request(session=(session_id, 1), max_wait_ms=5000)))
    await asyncio.sleep(0.01)
    env.append("other")
    await asyncio.sleep(0.02)
    assert not task.done()
    env.append("orders")
    async with asyncio.timeout(30):
        assert by_key(await task)[key("orders")].records_size > 0


async def test_incremental_session_of_unknown_partitions_only_answers_at_once(env: FetchEnv) -> None:
    session_id = (await open_session(env, [(key("nope"), fp())])).session_id
    started = time.monotonic()
    parts = await env.service.fetch(request(session=(session_id, 1), max_wait_ms=5000))
    assert time.monotonic() - started < 1
    assert by_key(parts)[key("nope")].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


async def test_session_errors_are_top_level(env: FetchEnv) -> None:
    parts = await env.service.fetch(request(session=(12345, 1), max_wait_ms=5000))
    assert (parts.error_code, parts.session_id, parts.partitions) == (
        ErrorCode.FETCH_SESSION_ID_NOT_FOUND,
        0,
        [],
    )


async def test_incremental_fetch_costs_the_changed_partitions_and_keeps_session_order(
    env: FetchEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    env.create_topic("wide", 50)
    contexts: list[FetchContext] = []
    new_context = env.manager.new_context

    def recording(**kwargs: Any) -> FetchContext:
        contexts.append(new_context(**kwargs))
        return contexts[-1]

    monkeypatch.setattr(env.manager, "new_context", recording)
    session_id = (await open_session(env, [(key("wide", i), fp()) for i in range(50)])).session_id
    env.append("wide", 30)
    env.append("wide", 7)
    parts = await env.service.fetch(request(session=(session_id, 1)))
    assert [k.partition for k, _ in parts.partitions] == [7, 30]  # session order, not change order
    assert isinstance(contexts[-1], IncrementalFetchContext) and contexts[-1].partitions_evaluated == 2
    # both returned records and moved to the tail, 7 then 30; now 30 is read at its HW (included
    # for the HW change only, so it keeps its place) while 7 returns a record and moves behind it
    env.append("wide", 30)
    env.append("wide", 7)
    data = [(key("wide", 30), fp(2)), (key("wide", 7), fp(1))]
    parts = await env.service.fetch(request(data, session=(session_id, 2)))
    assert [(k.partition, r.records_size > 0) for k, r in parts.partitions] == [(7, True), (30, False)]
    env.append("wide", 7)
    env.append("wide", 30)
    parts = await env.service.fetch(request(session=(session_id, 3)))
    assert [k.partition for k, _ in parts.partitions] == [30, 7]
    assert contexts[-1].partitions_evaluated == 2  # type: ignore[attr-defined]


async def test_a_read_committed_session_is_woken_when_a_commit_moves_the_lso(env: FetchEnv) -> None:
    """The LSO moves with markers and HW moves, both partition changes: a read_committed session's
    parked fetch wakes on the commit and gets the records it can now read (O(changed) kept)."""
    committed = IsolationLevel.READ_COMMITTED
    session_id = (await open_session(env, [(key("orders"), fp())], isolation=committed)).session_id
    partition = env.partition("orders")
    guard = partition.start_txn_verification(9)
    txn = batch(2, producer_id=9, producer_epoch=0, base_sequence=0, is_transactional=True)
    partition.append_records(txn, required_acks=1, now_ms=NOW, verification=guard)
    parts = await env.service.fetch(request(session=(session_id, 1), isolation=committed))
    [(_, held)] = parts.partitions  # the HW moved: reported, nothing readable yet
    assert (held.high_watermark, held.last_stable_offset, held.records_size) == (2, 0, 0)
    task = asyncio.create_task(
        env.service.fetch(request(session=(session_id, 2), isolation=committed, max_wait_ms=5000))
    )
    await asyncio.sleep(0.05)
    assert not task.done()
    partition.append_txn_marker(producer_id=9, producer_epoch=0, coordinator_epoch=0, commit=True, now_ms=NOW)
    async with asyncio.timeout(30):
        parts = await task
    [(_, stable)] = parts.partitions
    assert (stable.last_stable_offset, stable.aborted_transactions) == (3, ())
    assert stable.records_size > 0
