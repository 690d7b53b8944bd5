"""What one Fetch request does with sessions: pick a context, read through it, build the response.

``FetchManager.new_context`` follows Kafka's decision order (kafka-behaviour.md 3.1/3.2):

- epoch 0 or -1 (full): a non-zero session id is closed first, silently and whoever owns it; then
  epoch -1 gives a ``SessionlessFetchContext`` and epoch 0 a ``FullFetchContext``, which creates a
  session from the response if the cache has (or can make) room;
- any other epoch (incremental): unknown session → 70, wrong epoch → 71, topic-id mode switched →
  106 (``SessionErrorContext``, session untouched); otherwise the request's partitions are applied
  (adds before forgets); an emptied session is removed and the request served sessionless; else the
  session is touched, its epoch advanced, and an ``IncrementalFetchContext`` returned. An id outside
  every shard's range is an unknown session too (70), where Kafka fails with UNKNOWN_SERVER_ERROR
  (see ``broker.fetch_session.cache``).

The Fetch handler then reads ``partitions_to_read()`` in order, with the response byte budget, and
passes one ``PartitionFetchResult`` per partition to ``update_and_generate_response``. For an
incremental context that list holds only the dirty partitions (those the request sent, plus those
whose log or leadership changed, plus those that still have something to report), in session
order: O(changed), where Kafka reads every partition of the session. Every partition left out would
have been read by Kafka, found unchanged and dropped, so the response is the same.
"""

from __future__ import annotations

import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from broker.fetch_session.cache import FetchSessionCache
from broker.fetch_session.partition import (
    CachedPartition,
    PartitionFetchParams,
    PartitionFetchResult,
    TopicPartitionKey,
)
from broker.fetch_session.session import (
    FINAL_EPOCH,
    INVALID_SESSION_ID,
    Epoch,
    FetchSession,
    SessionId,
    is_full_request,
    next_epoch,
)
from protocol.error_codes import ErrorCode
from protocol.messages.fetch import FETCH_TOPIC_ID_VERSION as TOPIC_ID_VERSION

FetchData = list[tuple[TopicPartitionKey, PartitionFetchParams]]
ResponsePartitions = list[tuple[TopicPartitionKey, PartitionFetchResult]]
TopicNameResolver = Callable[[uuid.UUID], str | None]


@dataclass(frozen=True, slots=True)
class FetchResponseParts:
    """The session-dependent parts of a FetchResponse: top-level error, session id, partitions.

    ``partitions`` is in response order; the handler groups adjacent partitions of one topic into
    wire structs (the same topic may appear more than once).
    """

    error_code: int
    session_id: SessionId
    partitions: ResponsePartitions


class FetchContext(ABC):
    """How a Fetch request is served: which partitions to read and what the response holds."""

    error_code: int = ErrorCode.NONE

    @abstractmethod
    def partitions_to_read(self) -> FetchData:
        """The partitions to read, in the order the byte budget must be spent on them."""

    @abstractmethod
    def update_and_generate_response(
        self, results: Mapping[TopicPartitionKey, PartitionFetchResult]
    ) -> FetchResponseParts:
        """Build the response from one result per partition to read, updating the session."""

    @abstractmethod
    def preview_response(
        self, results: Mapping[TopicPartitionKey, PartitionFetchResult]
    ) -> FetchResponseParts:
        """The response ``update_and_generate_response`` would give, changing nothing (quota sizing)."""

    @abstractmethod
    def throttled_response(self) -> FetchResponseParts:
        """The empty response sent instead when a consumer is throttled (KAFKA-6946)."""


class SessionErrorContext(FetchContext):
    """A rejected incremental request: top-level 70, 71 or 106, session id 0, no partitions."""

    def __init__(self, error_code: int) -> None:
        self.error_code = error_code

    def partitions_to_read(self) -> FetchData:
        return []

    def update_and_generate_response(
        self, results: Mapping[TopicPartitionKey, PartitionFetchResult]
    ) -> FetchResponseParts:
        return self.throttled_response()

    def preview_response(
        self, results: Mapping[TopicPartitionKey, PartitionFetchResult]
    ) -> FetchResponseParts:
        return self.throttled_response()

    def throttled_response(self) -> FetchResponseParts:
        return FetchResponseParts(self.error_code, INVALID_SESSION_ID, [])


class SessionlessFetchContext(FetchContext):
    """A full fetch without a session (epoch -1, fetch v0-v6, or an emptied session)."""

    def __init__(self, fetch_data: Iterable[tuple[TopicPartitionKey, PartitionFetchParams]]) -> None:
        # Like Kafka's LinkedHashMap: a repeated partition keeps its first place and its last params.
        self.fetch_data: dict[TopicPartitionKey, PartitionFetchParams] = dict(fetch_data)

    def partitions_to_read(self) -> FetchData:
        return list(self.fetch_data.items())

    def update_and_generate_response(
        self, results: Mapping[TopicPartitionKey, PartitionFetchResult]
    ) -> FetchResponseParts:
        return self.preview_response(results)

    def preview_response(
        self, results: Mapping[TopicPartitionKey, PartitionFetchResult]
    ) -> FetchResponseParts:
        return FetchResponseParts(
            ErrorCode.NONE, INVALID_SESSION_ID, _readable_then_erroneous(self.fetch_data, results)
        )

    def throttled_response(self) -> FetchResponseParts:
        return FetchResponseParts(ErrorCode.NONE, INVALID_SESSION_ID, [])


class FullFetchContext(SessionlessFetchContext):
    """A full fetch (epoch 0) that caches a new session holding every partition of its response."""

    def __init__(
        self,
        fetch_data: Iterable[tuple[TopicPartitionKey, PartitionFetchParams]],
        cache: FetchSessionCache,
        clock: Callable[[], int],
        *,
        privileged: bool,
        uses_topic_ids: bool,
        replica_id: int = -1,
    ) -> None:
        """``replica_id`` is the follower's broker id for a follower's (privileged) request."""
        super().__init__(fetch_data)
        self._cache = cache
        self._clock = clock
        self.privileged = privileged
        self.uses_topic_ids = uses_topic_ids
        self.replica_id = replica_id

    def update_and_generate_response(
        self, results: Mapping[TopicPartitionKey, PartitionFetchResult]
    ) -> FetchResponseParts:
        """The full response; the new session (if the cache accepts it) caches it in response order.

        Each cached partition gets the request's parameters and the response's high watermark and
        log start offset as its baseline. It starts dirty only if reading it again unchanged could
        report something (records, error, diverging epoch, preferred replica, budget skip).
        """
        partitions = _readable_then_erroneous(self.fetch_data, results)
        session = self._cache.maybe_create_session(
            self._clock(),
            self.privileged,
            self.uses_topic_ids,
            len(partitions),
            self._populate(partitions),
            self.replica_id,
        )
        session_id = session.id if session is not None else INVALID_SESSION_ID
        return FetchResponseParts(ErrorCode.NONE, session_id, partitions)

    def _populate(self, partitions: ResponsePartitions) -> Callable[[FetchSession], None]:
        def populate(session: FetchSession) -> None:
            for key, result in partitions:
                cached = session.append(
                    key, self.fetch_data[key], result.high_watermark, result.log_start_offset
                )
                if result.would_report_again():
                    session.mark_dirty(cached)

        return populate


class IncrementalFetchContext(FetchContext):
    """A request inside a session: reads the dirty partitions only and reports what changed.

    ``partitions_evaluated`` counts the partitions handed out for reading (over every call of
    ``partitions_to_read``), the measure of the O(changed) cost. ``session`` is exposed for the
    handler: its ``waiter`` (to park an idle fetch) and its ``last_used_ms`` (follower liveness of
    the partitions that were not read).
    """

    def __init__(self, session: FetchSession, resolve_topic_name: TopicNameResolver) -> None:
        self.session = session
        self.expected_epoch: Epoch = session.epoch
        self._resolve_topic_name = resolve_topic_name
        self._evaluated: list[tuple[CachedPartition, int]] | None = None
        self.partitions_evaluated = 0

    def partitions_to_read(self) -> FetchData:
        """The dirty partitions in session order, looked up afresh on every call.

        Call it again after a parked (long-poll) fetch wakes up: partitions that changed while it
        waited are then included. The results given to ``update_and_generate_response`` must
        answer the list returned by the latest call.
        """
        return [(cached.key, cached.params) for cached, _ in self._take_snapshot()]

    def update_and_generate_response(
        self, results: Mapping[TopicPartitionKey, PartitionFetchResult]
    ) -> FetchResponseParts:
        """Apply inclusion rules 1-6, refresh baselines, rotate, and settle the dirty set.

        A partition leaves the dirty set only if no rule fired, it returned no records, it was not
        skipped for the budget, and it has not changed since it was read. Partitions that returned
        records move to the tail of the session, in response order (KAFKA-12330).
        """
        race = self._race_response()
        if race is not None:
            return race
        included = self._filter(results, update=True)
        for cached, result in included:
            if result.records_size > 0:
                self.session.move_to_tail(cached)
        return self._response(included)

    def preview_response(
        self, results: Mapping[TopicPartitionKey, PartitionFetchResult]
    ) -> FetchResponseParts:
        race = self._race_response()
        return race if race is not None else self._response(self._filter(results, update=False))

    def throttled_response(self) -> FetchResponseParts:
        race = self._race_response()
        return race if race is not None else FetchResponseParts(ErrorCode.NONE, self.session.id, [])

    def _race_response(self) -> FetchResponseParts | None:
        """71 with the real session id when another request advanced the session meanwhile (3.5)."""
        if self.session.epoch != self.expected_epoch:
            return FetchResponseParts(ErrorCode.INVALID_FETCH_SESSION_EPOCH, self.session.id, [])
        return None

    def _snapshot(self) -> list[tuple[CachedPartition, int]]:
        return self._evaluated if self._evaluated is not None else self._take_snapshot()

    def _take_snapshot(self) -> list[tuple[CachedPartition, int]]:
        """The dirty partitions with their change counts, unknown topic names resolved on the way."""
        dirty = self.session.dirty_in_order()
        if self.session.uses_topic_ids:
            for cached in dirty:
                if cached.key.topic_name is None:
                    cached.maybe_resolve_name(self._resolve_topic_name)
        self._evaluated = [(cached, cached.change_count) for cached in dirty]
        self.partitions_evaluated += len(dirty)
        return self._evaluated

    def _filter(
        self, results: Mapping[TopicPartitionKey, PartitionFetchResult], *, update: bool
    ) -> list[tuple[CachedPartition, PartitionFetchResult]]:
        """The included partitions in response order: readable ones, then erroneous ones."""
        readable: list[tuple[CachedPartition, PartitionFetchResult]] = []
        erroneous: list[tuple[CachedPartition, PartitionFetchResult]] = []
        for cached, seen_change_count in self._snapshot():
            result = _result_for(results, cached.key)
            if cached.must_respond(result, update):
                (erroneous if result.erroneous else readable).append((cached, result))
            elif update and not result.skipped_for_budget:
                self.session.mark_clean(cached, seen_change_count)
        return readable + erroneous

    def _response(self, included: list[tuple[CachedPartition, PartitionFetchResult]]) -> FetchResponseParts:
        partitions = [(cached.key, result) for cached, result in included]
        return FetchResponseParts(ErrorCode.NONE, self.session.id, partitions)


class FetchManager:
    """Turns a Fetch request's session fields into a ``FetchContext`` (Kafka's FetchManager)."""

    def __init__(self, cache: FetchSessionCache, clock: Callable[[], int]) -> None:
        self.cache = cache
        self._clock = clock

    def now_ms(self) -> int:
        """The time sessions are created and touched at (the fetch path's clock)."""
        return self._clock()

    def new_context(
        self,
        *,
        version: int,
        session_id: int,
        session_epoch: int,
        fetch_data: Sequence[tuple[TopicPartitionKey, PartitionFetchParams]],
        to_forget: Sequence[TopicPartitionKey],
        is_follower: bool,
        resolve_topic_name: TopicNameResolver,
        replica_id: int = -1,
    ) -> FetchContext:
        """The context for one request; ``fetch_data`` in request order, ``is_follower`` = replica id >= 0.

        Topic ids without a name are looked up with ``resolve_topic_name``; those still unknown stay
        in the request (and session) with a ``None`` name, and the handler answers them with
        UNKNOWN_TOPIC_ID as erroneous partitions. ``replica_id`` (the follower's broker id) is kept
        by a follower session it creates, for the follower liveness of idle partitions.
        """
        resolved = [(key.resolved(resolve_topic_name), params) for key, params in fetch_data]
        if is_full_request(session_epoch):
            follower_id = replica_id if is_follower else -1
            return self._full_context(version, session_id, session_epoch, resolved, is_follower, follower_id)
        return self._incremental_context(
            version, session_id, session_epoch, resolved, to_forget, resolve_topic_name
        )

    def _full_context(
        self,
        version: int,
        session_id: int,
        session_epoch: int,
        fetch_data: FetchData,
        is_follower: bool,
        replica_id: int,
    ) -> FetchContext:
        if session_id != INVALID_SESSION_ID:
            self.cache.remove(session_id)
        if session_epoch == FINAL_EPOCH:
            return SessionlessFetchContext(fetch_data)
        return FullFetchContext(
            fetch_data,
            self.cache,
            self._clock,
            privileged=is_follower,
            uses_topic_ids=version >= TOPIC_ID_VERSION,
            replica_id=replica_id,
        )

    def _incremental_context(
        self,
        version: int,
        session_id: int,
        session_epoch: int,
        fetch_data: FetchData,
        to_forget: Sequence[TopicPartitionKey],
        resolve_topic_name: TopicNameResolver,
    ) -> FetchContext:
        session = self.cache.get(session_id)
        if session is None:
            return SessionErrorContext(ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
        if session.epoch != session_epoch:
            return SessionErrorContext(ErrorCode.INVALID_FETCH_SESSION_EPOCH)
        if session.uses_topic_ids != (version >= TOPIC_ID_VERSION):
            return SessionErrorContext(ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR)
        self.cache.update_session(session, fetch_data, to_forget)
        if session.size == 0:
            self.cache.remove(session.id)
            return SessionlessFetchContext(fetch_data)
        self.cache.touch(session, self._clock())
        session.epoch = next_epoch(session.epoch)
        return IncrementalFetchContext(session, resolve_topic_name)


def _result_for(
    results: Mapping[TopicPartitionKey, PartitionFetchResult], key: TopicPartitionKey
) -> PartitionFetchResult:
    try:
        return results[key]
    except KeyError:
        raise KeyError(f"no fetch result for {key}: partitions_to_read() needs one result each") from None


def _readable_then_erroneous(
    keys: Iterable[TopicPartitionKey], results: Mapping[TopicPartitionKey, PartitionFetchResult]
) -> ResponsePartitions:
    """Every partition, readable ones first, erroneous ones after (both in request order), as Kafka."""
    readable: ResponsePartitions = []
    erroneous: ResponsePartitions = []
    for key in keys:
        result = _result_for(results, key)
        (erroneous if result.erroneous else readable).append((key, result))
    return readable + erroneous
