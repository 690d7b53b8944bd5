"""Builders shared by the fetch-session tests: keys, params, results, a cache on a fresh registry."""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from prometheus_client import CollectorRegistry

from broker.fetch_session import (
    FetchContext,
    FetchManager,
    FetchResponseParts,
    FetchSessionCache,
    FetchSessionCacheMetrics,
    PartitionFetchParams,
    PartitionFetchResult,
    TopicPartitionKey,
)
from protocol.error_codes import ErrorCode
from protocol.sentinels import ZERO_UUID
from storage.clock import FakeClock

FOO_ID = uuid.UUID(int=0xF00)
BAR_ID = uuid.UUID(int=0xBA7)


def tp(topic: str, partition: int) -> TopicPartitionKey:
    """A key without topic id (fetch v12 and older)."""
    return TopicPartitionKey(ZERO_UUID, topic, partition)


def tid(topic_id: uuid.UUID, topic: str | None, partition: int) -> TopicPartitionKey:
    """A key with a topic id (fetch v13+); ``topic`` None when the broker cannot resolve it."""
    return TopicPartitionKey(topic_id, topic, partition)


def params(offset: int, max_bytes: int = 100, **kwargs: int) -> PartitionFetchParams:
    return PartitionFetchParams(fetch_offset=offset, max_bytes=max_bytes, **kwargs)


def result(hw: int = 10, log_start: int = 0, records: int = 0, **kwargs: object) -> PartitionFetchResult:
    return PartitionFetchResult(
        high_watermark=hw,
        last_stable_offset=hw,
        log_start_offset=log_start,
        records_size=records,
        **kwargs,  # type: ignore[arg-type]
    )


Reader = Callable[[TopicPartitionKey, PartitionFetchParams], PartitionFetchResult]


def quiet(_key: TopicPartitionKey, _params: PartitionFetchParams) -> PartitionFetchResult:
    """A partition with HW 10, log start 0 and nothing to return."""
    return result()


@dataclass
class Harness:
    """A FetchManager over a cache with a fake clock, seeded ids and its own metrics registry."""

    clock: FakeClock
    registry: CollectorRegistry
    cache: FetchSessionCache
    manager: FetchManager

    def metric(self, name: str) -> float:
        value = self.registry.get_sample_value(name)
        assert value is not None, name
        return value

    def context(
        self,
        session_id: int,
        epoch: int,
        data: Sequence[tuple[TopicPartitionKey, PartitionFetchParams]] = (),
        forget: Sequence[TopicPartitionKey] = (),
        *,
        version: int = 12,
        follower: bool = False,
        names: Mapping[uuid.UUID, str] | None = None,
    ) -> FetchContext:
        known = dict(names or {})
        return self.manager.new_context(
            version=version,
            session_id=session_id,
            session_epoch=epoch,
            fetch_data=list(data),
            to_forget=list(forget),
            is_follower=follower,
            resolve_topic_name=known.get,
        )

    def respond(self, context: FetchContext, reader: Reader | None = None) -> FetchResponseParts:
        """Read every partition the context lists with ``reader`` and build the response."""
        read = reader if reader is not None else quiet
        answers = {key: read(key, fetch) for key, fetch in context.partitions_to_read()}
        return context.update_and_generate_response(answers)


def make_harness(
    *,
    max_slots: int = 1000,
    eviction_ms: int = 120_000,
    num_shards: int = 8,
    seed: int = 1,
    start_ms: int = 0,
) -> Harness:
    clock = FakeClock(start_ms)
    registry = CollectorRegistry()
    cache = FetchSessionCache(
        FetchSessionCacheMetrics(registry),
        max_slots=max_slots,
        eviction_ms=eviction_ms,
        random_source=random.Random(seed),
        num_shards=num_shards,
    )
    return Harness(clock, registry, cache, FetchManager(cache, clock.time_ms))


def keys_of(response: FetchResponseParts) -> list[TopicPartitionKey]:
    return [key for key, _ in response.partitions]


@dataclass
class PartitionState:
    """What the fake broker knows about one partition (a consumer reads up to the high watermark)."""

    high_watermark: int = 10
    log_start_offset: int = 0
    error_code: int = ErrorCode.NONE
    leader_epoch: int = 0
    preferred_read_replica: int = -1


class World:
    """A fake broker: partition states, a reader with Kafka's byte budget, change notifications.

    Every change goes through :meth:`change`, which calls ``on_partition_changed`` on the caches
    watching it, as the real broker will on appends, HW/LSO/log start and leadership changes.
    """

    def __init__(self, *caches: FetchSessionCache) -> None:
        self.partitions: dict[TopicPartitionKey, PartitionState] = {}
        self.caches = list(caches)

    def add(self, key: TopicPartitionKey, **fields: int) -> None:
        self.partitions[key] = PartitionState(**fields)

    def change(self, key: TopicPartitionKey, **fields: int) -> None:
        state = self.partitions[key]
        for name, value in fields.items():
            setattr(state, name, value)
        stored = next(k for k in self.partitions if k == key)
        for cache in self.caches:
            cache.on_partition_changed(stored)

    def read(self, key: TopicPartitionKey, fetch: PartitionFetchParams) -> PartitionFetchResult:
        return self.read_all([(key, fetch)])[key]

    def read_all(
        self, to_read: Sequence[tuple[TopicPartitionKey, PartitionFetchParams]], budget: int = 1 << 30
    ) -> dict[TopicPartitionKey, PartitionFetchResult]:
        """One result per partition, spending ``budget`` bytes in order (one byte per offset)."""
        results: dict[TopicPartitionKey, PartitionFetchResult] = {}
        for key, fetch in to_read:
            state = self.partitions.get(key)
            if key.topic_name is None:
                results[key] = erroneous(ErrorCode.UNKNOWN_TOPIC_ID)
            elif state is None:
                results[key] = erroneous(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            else:
                results[key] = read_partition_state(state, fetch, budget)
                budget -= results[key].records_size
        return results

    def reader(self) -> Reader:
        return self.read


def erroneous(error: int) -> PartitionFetchResult:
    """A partition the handler could not read at all (unknown topic, id or partition)."""
    return PartitionFetchResult(error_code=error, erroneous=True)


def read_partition_state(
    state: PartitionState, fetch: PartitionFetchParams, budget: int
) -> PartitionFetchResult:
    """Kafka's read of one partition, in miniature: one byte per offset up to the high watermark."""
    base = {
        "high_watermark": state.high_watermark,
        "last_stable_offset": state.high_watermark,
        "log_start_offset": state.log_start_offset,
        "preferred_read_replica": state.preferred_read_replica,
    }
    if state.error_code != ErrorCode.NONE:
        return PartitionFetchResult(error_code=state.error_code)
    if fetch.last_fetched_epoch > state.leader_epoch:
        return PartitionFetchResult(diverging_epoch=state.leader_epoch, **base)  # type: ignore[arg-type]
    if not state.log_start_offset <= fetch.fetch_offset <= state.high_watermark:
        return PartitionFetchResult(error_code=ErrorCode.OFFSET_OUT_OF_RANGE, **base)  # type: ignore[arg-type]
    available = state.high_watermark - fetch.fetch_offset
    size = min(available, fetch.max_bytes, max(budget, 0))
    return PartitionFetchResult(
        records_size=size,
        skipped_for_budget=available > 0 and size == 0,
        **base,  # type: ignore[arg-type]
    )
