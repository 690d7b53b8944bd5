"""Serving one Fetch request: session context, partition reads with the byte budget, long poll.

The steps follow Kafka's KafkaApis.handleFetchRequest and ReplicaManager.fetchMessages
(kafka-behaviour.md 4):

1. ``FetchManager.new_context`` picks the context (sessionless, full, incremental, error). A rejected
   incremental request (70, 71, 106) is answered at once.
2. The context's partitions are read in its order (request order, or session order for the dirty
   partitions of an incremental fetch) with the KIP-74 budget: the response may hold
   ``min(max_bytes, fetch.max.bytes)`` bytes, each partition ``min(partition_max_bytes, what is
   left)``; until a partition has returned bytes, the first batch at the fetch offset comes whole
   even when it exceeds both limits. A partition left with nothing while records were readable is
   ``skipped_for_budget`` (it stays dirty in its session).
3. The request is answered at once when ``max_wait_ms <= 0``, when ``min(min_bytes, max_bytes)``
   bytes were read, when a read failed or found a diverging epoch, or when nothing is readable (a
   full fetch of unknown partitions only). Otherwise a :class:`~broker.fetch.delayed.DelayedFetch`
   is parked with try-complete-else-watch and the coroutine awaits it; appends wake it through
   :meth:`FetchService.on_partition_changed`. An incremental fetch parks on its session's waiter
   instead of partition keys, so kafka-python's idle fetch (no partitions listed) long-polls too.
4. After the wake-up (or ``max_wait_ms``) the context's partitions are read again and the response
   is built. The re-read happens in the awaiting coroutine, not in the wake-up callback, so that
   the file slices are encoded and written in the same event-loop tick as they were read.

Unknown partitions (topic, topic id, index not in the metadata) are *erroneous*: reported after
the readable ones and never a reason to answer early, as in Kafka. A partition in the metadata but
not led here gets the replica manager's error (NOT_LEADER_OR_FOLLOWER or KAFKA_STORAGE_ERROR), except
that a consumer fetch of v11+ (which carries client metadata: Kafka's ``fetchOnlyLeader`` is false)
of a partition this broker follows is read from the follower process's log up to its announced high
watermark (KIP-392, :mod:`broker.replication.followers.followed_replicas`); a fetch parked on such a
partition is woken by :meth:`FetchService.on_followed_replica_changed`.

Followers (replica id >= 0) read up to the log end offset, and must be in the partition's replica set
(NOT_LEADER_OR_FOLLOWER, or UNKNOWN_LEADER_EPOCH when the request carries a leader epoch, as Kafka's
followerReplicaOrThrow). Every partition a follower's *first* read returned without error and without a
diverging epoch then updates the follower's state in the partition
(:meth:`~broker.replication.partition.Partition.update_follower_fetch`, kafka-behaviour.md 6.1): fetch
offset = follower LEO, the request's LogStartOffset, the fetch manager's clock, the leader LEO read before
the read, and the request's ReplicaEpoch (the partition's eligibility check decides what an unknown or stale
one means for the ISR; the fetch itself is not refused for it). The update runs after the response of an
immediate answer is built (so that a high watermark it raises marks the partition dirty in a session created
by this very request) and before a long poll parks; the re-read after a long poll updates nothing, as in
Kafka. A moved high watermark reaches delayed produces, delayed fetches and sessions through the partition's
listeners.

Follower liveness of idle partitions: the partitions of an incremental follower fetch that are not
dirty are not read, hence not updated here. They count as fetched at each use of the session at
their cached offset; the session cache reports each idle stretch once, when it ends, and
:meth:`FetchService._credit_idle_follower` hands it to the partition (see
:mod:`broker.fetch_session.cache`). An incremental follower fetch therefore stays O(changed).

Preferred read replica (KIP-392): with ``replica.selector.class`` set, a consumer fetch (v11+) that
carries a rack gets, for each partition led here whose selector picks another replica
(:mod:`broker.fetch.replica_selector`), the partition's offsets and that replica's id instead of
records, and the request is answered at once. In an incremental session such a result is sticky (the
partition is in every response, as Kafka includes every partition with a preferred replica), and a
committed ISR change, which may change the selection of a partition not dirty otherwise, marks the
partition dirty like a high-watermark move.

Deliberate limits: no client quotas (throttle 0; replication quotas are applied, see
:class:`LeaderQuota`),
no transactions (the last stable offset is the high watermark, aborted transactions are always
empty). UNSUPPORTED_COMPRESSION_TYPE for fetch v<10 is detected from the attributes of the first
batch returned (one 2-byte pread), where Kafka looks at the topic's ``compression.type``: kipling
has no such topic config, and a zstd batch behind a non-zstd first batch is not detected.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

import structlog

from broker.fetch.delayed import (
    DelayedFetch,
    FetchablePartition,
    FetchParams,
    FetchPartitionStatus,
)
from broker.fetch.read_rules import visible_end_offset
from broker.fetch.replica_selector import ClientMetadata, ReplicaSelector, find_preferred_read_replica
from broker.fetch_session import (
    CachedPartition,
    FetchContext,
    FetchManager,
    FetchResponseParts,
    FetchSession,
    IncrementalFetchContext,
    PartitionFetchParams,
    PartitionFetchResult,
    TopicPartitionKey,
)
from broker.replication.followers.followed_replicas import FollowedReplica
from broker.replication.partition import Partition, PartitionRead
from metadata.topics import PartitionState, TopicLookup
from protocol.error_codes import ErrorCode
from protocol.messages.fetch import FETCH_NODE_ENDPOINTS_VERSION as NODE_ENDPOINTS_VERSION
from protocol.records.batch import ATTRIBUTES_OFFSET, COMPRESSION_MASK
from protocol.records.compression import CompressionType
from protocol.sentinels import NO_LEADER_EPOCH, UNDEFINED_EPOCH_OFFSET, ZERO_UUID, IsolationLevel
from server_common.purgatory import DelayedOperationPurgatory
from storage.slices import FileSlice

__all__ = [
    "FetchRequest",
    "FetchService",
    "PartitionPayload",
]

ZSTD_MIN_VERSION = 10
"""Fetch v10 is the first a client may read zstd batches with."""
CLIENT_METADATA_VERSION = 11
"""Fetch v11 added RackId and PreferredReadReplica (KIP-392)."""
STORAGE_ERROR_MIN_VERSION = 6
"""Fetch v6+ may see KAFKA_STORAGE_ERROR; older versions get NOT_LEADER_OR_FOLLOWER instead."""
NO_LEADER = (-1, -1)

_LEADER_HINT_ERRORS = frozenset((ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH))
_GONE: Hashable = object()
"""Watch key of a session partition the broker no longer hosts: no partition resolves it."""

_log = structlog.get_logger("kipling.fetch")


class FollowedSource(Protocol):
    """The partitions this broker follows, as consumers read them here (``FollowedReplicas``)."""

    def get(self, topic: str, index: int) -> FollowedReplica | None: ...

    def get_by_id(self, topic_id: uuid.UUID, index: int) -> FollowedReplica | None: ...

    def get_by_key(self, key: Hashable) -> FollowedReplica | None: ...


class PartitionSource(Protocol):
    """The partitions this broker leads and their metadata (the ReplicaManager)."""

    def get_partition(self, topic: str, index: int) -> Partition | None: ...

    def get_partition_by_id(self, topic_id: uuid.UUID, index: int) -> Partition | None: ...

    def get_partition_by_key(self, key: Hashable) -> Partition | None: ...

    def partition_state(self, topic: str, index: int) -> PartitionState | None: ...

    def partition_error(self, topic: str, index: int) -> ErrorCode: ...


@dataclass(frozen=True, slots=True)
class FetchRequest:
    """A Fetch request in domain terms, as the handler decoded it.

    ``fetch_data`` keys carry topic names for v12 and older and topic ids (names still unresolved)
    for v13+; ``replica_id`` is ReplicaState.ReplicaId for v15+.
    """

    version: int
    replica_id: int
    max_wait_ms: int
    min_bytes: int
    max_bytes: int
    isolation_level: IsolationLevel
    session_id: int
    session_epoch: int
    fetch_data: Sequence[tuple[TopicPartitionKey, PartitionFetchParams]]
    to_forget: Sequence[TopicPartitionKey]
    replica_epoch: int = -1
    """ReplicaState.ReplicaEpoch (v15+): the follower's broker epoch, -1 when absent."""
    topic_authorized: Callable[[str], bool] | None = None
    """Whether the requester may read a topic (by name); None when every topic may be read (no
    authorizer). A denied partition is erroneous with TOPIC_AUTHORIZATION_FAILED, whether its
    topic exists or not, and stays in its fetch session, answered so at each fetch (Kafka's
    handleFetchRequest)."""
    rack_id: str = ""
    """RackId (v11+): the consumer's ``client.rack``, empty when it sent none."""
    listener: str = ""
    """The listener the request came in on (where the preferred replica's endpoint must be)."""

    @property
    def is_from_follower(self) -> bool:
        return self.replica_id >= 0

    @property
    def client_metadata(self) -> ClientMetadata | None:
        """Kafka's ClientMetadata: present for every consumer fetch of v11+ (rack or not), which
        makes it a fetch any replica may serve (``FetchParams.fetchOnlyLeader`` is false)."""
        if self.version < CLIENT_METADATA_VERSION or self.is_from_follower:
            return None
        return ClientMetadata(self.rack_id, self.listener)


class PartitionPayload(NamedTuple):
    """What the wire needs beyond ``PartitionFetchResult``: the records and two rare extras.

    ``records`` is a slice of a segment file (never copied until the connection writes it), plain
    bytes, or None for no records.
    """

    records: FileSlice | bytes | None
    diverging_end_offset: int = UNDEFINED_EPOCH_OFFSET
    current_leader: tuple[int, int] | None = None
    """(leader id, leader epoch) for NOT_LEADER_OR_FOLLOWER / FENCED_LEADER_EPOCH at v16+."""
    snapshot_id: tuple[int, int] | None = None
    """(end offset, epoch) of the snapshot to fetch instead (the metadata log, KIP-630)."""


_NO_RECORDS = PartitionPayload(None)


class _FollowerRead(NamedTuple):
    """A follower's successful read of one partition: what its fetch state update needs."""

    partition: Partition
    fetch_offset: int
    log_start_offset: int
    leader_end_offset: int


@dataclass(slots=True)
class _ReadPass:
    """One pass over the context's partitions: the results and what decides the long poll."""

    results: dict[TopicPartitionKey, PartitionFetchResult]
    bytes_read: int = 0
    readable: int = 0
    erroneous: int = 0
    must_answer: bool = False
    """A read failed or found a diverging epoch: Kafka answers at once."""
    follower_reads: list[_FollowerRead] | None = None
    """Collected on a follower's first read only: the fetch state updates to make."""


class LeaderQuota(Protocol):
    """The leader side of the replication quota (broker/replication/replication_quota.py)."""

    def is_throttled(self, topic: str, partition: int) -> bool: ...

    def should_throttle(self, topic: str, partition: int, replica_in_sync: bool) -> bool: ...

    def record(self, size: int) -> None: ...


class FetchService:
    """Answers Fetch requests for the partitions this broker leads (see the module docstring)."""

    def __init__(
        self,
        manager: FetchManager,
        replicas: PartitionSource,
        topics: TopicLookup,
        purgatory: DelayedOperationPurgatory,
        *,
        fetch_max_bytes: int,
        expiration_meter: Callable[[bool], None] | None = None,
        leader_quota: LeaderQuota | None = None,
        replica_selector: ReplicaSelector | None = None,
        replica_racks: Callable[[str], Mapping[int, str | None]] | None = None,
        followed: FollowedSource | None = None,
    ) -> None:
        """``purgatory`` is the Fetch purgatory (scheduled on the event loop); ``fetch_max_bytes``
        is the broker's ``fetch.max.bytes``; ``expiration_meter(is_follower)`` counts expiries;
        ``leader_quota`` throttles follower fetches of throttled partitions (KIP-73).

        ``replica_selector`` (``replica.selector.class``; None: the leader serves every consumer)
        picks a consumer's preferred read replica, placing replicas by ``replica_racks(listener)``:
        broker id -> rack of the registered, unfenced brokers with an endpoint on that listener.

        ``followed`` are the partitions this broker follows: a consumer fetch (v11+) of one is read
        from the follower process's log up to its high watermark (call
        :meth:`on_followed_replica_changed` when what it announced moves)."""
        self._leader_quota = leader_quota
        self._followed = followed
        self._replica_selector = replica_selector
        self._replica_racks = replica_racks
        self._manager = manager
        self._replicas = replicas
        self._topics = topics
        self._purgatory = purgatory
        self._fetch_max_bytes = fetch_max_bytes
        self._expiration_meter = expiration_meter
        manager.cache.follower_idle_listener = self._credit_idle_follower

    # -- the request -----------------------------------------------------------------------------

    async def fetch(self, request: FetchRequest) -> FetchResponseParts:
        """Serve ``request``: read, maybe wait for data, read again, build the response parts.

        No await follows the last read: the caller must encode (and the connection write) the
        response before yielding to the event loop, so the slices still hold what was read.
        """
        context = self._manager.new_context(
            version=request.version,
            session_id=request.session_id,
            session_epoch=request.session_epoch,
            fetch_data=request.fetch_data,
            to_forget=request.to_forget,
            is_follower=request.is_from_follower,
            resolve_topic_name=self._topic_name,
            replica_id=request.replica_id,
        )
        params = self._fetch_params(request)
        preference = self._preference(request)
        first = self._read_all(
            context.partitions_to_read(),
            request,
            params,
            preference,
            update_follower_state=request.is_from_follower,
        )
        if self._answer_now(request, params, context, first):
            response = context.update_and_generate_response(first.results)
            self._update_follower_states(request, first)
            self._record_leader_quota(request, first)
            return response
        self._update_follower_states(request, first)
        await self._wait(request, params, context, first)
        again = self._read_all(context.partitions_to_read(), request, params, preference)
        self._record_leader_quota(request, again)
        return context.update_and_generate_response(again.results)

    # -- replication quota -----------------------------------------------------------------------

    def _leader_throttled(self, partition: Partition, replica_id: int) -> bool:
        """Kafka's shouldLeaderThrottle for one partition of a follower's fetch."""
        quota = self._leader_quota
        return quota is not None and quota.should_throttle(
            partition.topic, partition.index, replica_id in partition.isr
        )

    def _record_leader_quota(self, request: FetchRequest, read: _ReadPass) -> None:
        """The bytes of throttled partitions sent to a follower count against the leader's rate."""
        quota = self._leader_quota
        if quota is None or not request.is_from_follower or read.bytes_read == 0:
            return
        size = 0
        for key, result in read.results.items():
            partition = self._lookup(key) if result.records_size > 0 else None
            if partition is not None and quota.is_throttled(partition.topic, partition.index):
                size += result.records_size
        quota.record(size)

    def on_partition_changed(self, partition: Partition) -> None:
        """A partition listener: its LEO, HW, log start offset, epoch or leadership changed.

        Marks it dirty in the sessions holding it, keyed by id (v13+) or by name (v12 and older),
        which also wakes parked incremental fetches; then re-checks the fetches parked on it.
        """
        key = TopicPartitionKey(partition.topic_id, partition.topic, partition.index)
        self._manager.cache.on_partition_changed(key)
        self._purgatory.check_and_complete(partition.key)

    def on_followed_replica_changed(self, replica: FollowedReplica) -> None:
        """A followed partition's high watermark, last stable offset or log start offset moved, or it
        stopped being followed here: as :meth:`on_partition_changed` (consumer sessions holding it
        become dirty, fetches parked on it re-check)."""
        key = TopicPartitionKey(replica.topic_id or ZERO_UUID, replica.topic, replica.index)
        self._manager.cache.on_partition_changed(key)
        self._purgatory.check_and_complete(replica.key)

    # -- follower fetch state --------------------------------------------------------------------

    def _update_follower_states(self, request: FetchRequest, read: _ReadPass) -> None:
        """6.1 for every partition the follower's first read returned (no error, no divergence)."""
        if not read.follower_reads:
            return
        now = self._manager.now_ms()
        for follower_read in read.follower_reads:
            follower_read.partition.update_follower_fetch(
                request.replica_id,
                follower_read.fetch_offset,
                follower_read.log_start_offset,
                now,
                follower_read.leader_end_offset,
                request.replica_epoch,
            )

    def _credit_idle_follower(self, session: FetchSession, cached: CachedPartition) -> None:
        """The session cache's report that a follower session held ``cached`` idle up to its last use.

        The partition records a fetch at ``session.last_used_ms`` at the cached offset (which was the
        leader's LEO all along); a partition no longer hosted here has nothing to record.
        """
        partition = self._lookup(cached.key)
        if partition is not None:
            partition.update_idle_follower_fetch(
                session.replica_id, session.last_used_ms, cached.params.fetch_offset
            )

    def _fetch_params(self, request: FetchRequest) -> FetchParams:
        return FetchParams(
            replica_id=request.replica_id,
            max_wait_ms=request.max_wait_ms,
            min_bytes=request.min_bytes,
            max_bytes=max(0, min(request.max_bytes, self._fetch_max_bytes)),
            isolation_level=request.isolation_level,
            fetch_only_from_leader=request.client_metadata is None,
        )

    def _preference(self, request: FetchRequest) -> _Preference | None:
        """The preferred-read-replica lookup of a consumer fetch that carries a rack, or None.

        Without a rack the rack-aware selector always answers the leader, so nothing is looked up.
        """
        client = request.client_metadata
        if self._replica_selector is None or client is None or not client.rack_id:
            return None
        return _Preference(self._replica_selector, client, self._replica_racks, self._manager.now_ms())

    def _topic_name(self, topic_id: uuid.UUID) -> str | None:
        topic = self._topics.get_by_id(topic_id)
        return None if topic is None else topic.name

    # -- reading ---------------------------------------------------------------------------------

    def _read_all(
        self,
        partitions: Sequence[tuple[TopicPartitionKey, PartitionFetchParams]],
        request: FetchRequest,
        params: FetchParams,
        preference: _Preference | None = None,
        *,
        update_follower_state: bool = False,
    ) -> _ReadPass:
        """Read every partition in order, spending the response budget (KIP-74).

        With ``update_follower_state`` the successful reads are listed for the follower's state update.
        A partition whose preferred read replica is another broker is not read (Kafka skips the
        read), and the request is answered at once, as Kafka's ``hasPreferredReadReplica``.
        """
        read = _ReadPass({}, follower_reads=[] if update_follower_state else None)
        budget = params.max_bytes
        min_one_batch = True
        for key, fetch in partitions:
            limit = max(0, min(fetch.max_bytes, budget))
            result = self._read_partition(
                key, fetch, request, limit, min_one_batch, read.follower_reads, preference
            )
            read.results[key] = result
            if result.erroneous:
                read.erroneous += 1
                continue
            read.readable += 1
            size = result.records_size
            if size > 0:
                read.bytes_read += size
                budget = max(0, budget - size)
                min_one_batch = False
            if (
                result.error_code != ErrorCode.NONE
                or result.diverging_epoch >= 0
                or result.preferred_read_replica >= 0
            ):
                read.must_answer = True
        return read

    def _read_partition(
        self,
        key: TopicPartitionKey,
        fetch: PartitionFetchParams,
        request: FetchRequest,
        limit: int,
        min_one_batch: bool,
        follower_reads: list[_FollowerRead] | None = None,
        preference: _Preference | None = None,
    ) -> PartitionFetchResult:
        if (
            request.topic_authorized is not None
            and key.topic_name is not None
            and not request.topic_authorized(key.topic_name)
        ):
            return PartitionFetchResult(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, erroneous=True)
        partition = self._lookup(key)
        if partition is None:
            replica = self._lookup_followed(key) if request.client_metadata is not None else None
            if replica is None:
                return self._missing_result(key, request.version)
            return self._read_followed(key, replica, fetch, request, limit, min_one_batch)
        if preference is not None and partition.is_leader:
            preferred = preference.find(partition, fetch.fetch_offset)
            if preferred is not None:
                return self._preferred_result(key, partition, fetch, preferred, request.version)
        if request.is_from_follower:
            error = _follower_error(partition, request.replica_id, fetch.current_leader_epoch)
            if error != ErrorCode.NONE:
                return self._error_result(key, error, request.version)
            if self._leader_throttled(partition, request.replica_id):
                limit, min_one_batch = 0, False  # the offsets and HW, no records (Kafka's empty read)
        try:
            read = partition.read(
                fetch.fetch_offset,
                limit,
                isolation_level=request.isolation_level,
                is_follower=request.is_from_follower,
                min_one_batch=min_one_batch,
                current_leader_epoch=fetch.current_leader_epoch,
                last_fetched_epoch=fetch.last_fetched_epoch,
            )
        except Exception:
            _log.exception("partition read failed", partition=str(key), fetch_offset=fetch.fetch_offset)
            return self._error_result(key, ErrorCode.UNKNOWN_SERVER_ERROR, request.version)
        if read.error_code != ErrorCode.NONE:
            return self._error_result(key, read.error_code, request.version)
        if request.version < ZSTD_MIN_VERSION and read.slice is not None and _starts_with_zstd(read.slice):
            return self._error_result(key, ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, request.version)
        if follower_reads is not None and read.diverging_epoch is None:
            follower_reads.append(
                _FollowerRead(partition, fetch.fetch_offset, fetch.log_start_offset, read.log_end_offset)
            )
        return _read_result(read, fetch.fetch_offset, request)

    def _preferred_result(
        self,
        key: TopicPartitionKey,
        partition: Partition,
        fetch: PartitionFetchParams,
        preferred: int,
        version: int,
    ) -> PartitionFetchResult:
        """Kafka's answer when another replica should serve: the offsets, no records, the replica.

        The request's leader epoch is checked first (``fetchOffsetSnapshot`` with
        ``fetchOnlyFromLeader = false``): a fenced or unknown epoch is the partition's error.
        """
        error = partition.check_leader_epoch(fetch.current_leader_epoch, require_leader=False)
        if error != ErrorCode.NONE:
            return self._error_result(key, error, version)
        return PartitionFetchResult(
            high_watermark=partition.high_watermark,
            last_stable_offset=partition.last_stable_offset,
            log_start_offset=partition.log_start_offset,
            preferred_read_replica=preferred,
            payload=_NO_RECORDS,
        )

    def _read_followed(
        self,
        key: TopicPartitionKey,
        replica: FollowedReplica,
        fetch: PartitionFetchParams,
        request: FetchRequest,
        limit: int,
        min_one_batch: bool,
    ) -> PartitionFetchResult:
        """A consumer's read of a partition this broker follows (KIP-392): the follower's log up to
        its high watermark (followed_replicas.py has the rules)."""
        read = replica.read(
            fetch.fetch_offset,
            limit,
            isolation_level=request.isolation_level,
            min_one_batch=min_one_batch,
            current_leader_epoch=fetch.current_leader_epoch,
            last_fetched_epoch=fetch.last_fetched_epoch,
        )
        if read.error_code != ErrorCode.NONE:
            return self._error_result(key, read.error_code, request.version)
        if request.version < ZSTD_MIN_VERSION and read.slice is not None and _starts_with_zstd(read.slice):
            return self._error_result(key, ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, request.version)
        return _read_result(read, fetch.fetch_offset, request)

    def _lookup_followed(self, key: TopicPartitionKey) -> FollowedReplica | None:
        """The followed partition a key names (by topic id for v13+ keys, by name otherwise)."""
        followed = self._followed
        if followed is None:
            return None
        if key.has_topic_id:
            return followed.get_by_id(key.topic_id, key.partition)
        if key.topic_name is None:
            return None
        return followed.get(key.topic_name, key.partition)

    def _lookup_readable(
        self, key: TopicPartitionKey, request: FetchRequest
    ) -> Partition | FollowedReplica | None:
        """What the request reads for ``key``: the led partition, else (a consumer fetch of v11+)
        the followed one."""
        partition = self._lookup(key)
        if partition is not None or request.client_metadata is None:
            return partition
        return self._lookup_followed(key)

    def _lookup(self, key: TopicPartitionKey) -> Partition | None:
        """The partition a key names: by topic id for v13+ keys, by name otherwise."""
        if key.has_topic_id:
            return self._replicas.get_partition_by_id(key.topic_id, key.partition)
        if key.topic_name is None:
            return None
        return self._replicas.get_partition(key.topic_name, key.partition)

    def _missing_result(self, key: TopicPartitionKey, version: int) -> PartitionFetchResult:
        """Why a key has no partition here; unknown ones are erroneous, the others read errors."""
        name = key.topic_name
        if name is None:
            return PartitionFetchResult(error_code=ErrorCode.UNKNOWN_TOPIC_ID, erroneous=True)
        if self._replicas.partition_state(name, key.partition) is None:
            return PartitionFetchResult(error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, erroneous=True)
        if key.has_topic_id:
            topic = self._topics.get(name)
            if topic is not None and topic.topic_id != key.topic_id:
                return self._error_result(key, ErrorCode.INCONSISTENT_TOPIC_ID, version)
        return self._error_result(key, self._replicas.partition_error(name, key.partition), version)

    def _error_result(self, key: TopicPartitionKey, error: ErrorCode, version: int) -> PartitionFetchResult:
        """A read error: every offset -1, no records, and the current leader where v16 wants it."""
        if error == ErrorCode.KAFKA_STORAGE_ERROR and version < STORAGE_ERROR_MIN_VERSION:
            error = ErrorCode.NOT_LEADER_OR_FOLLOWER
        payload = _NO_RECORDS
        if version >= NODE_ENDPOINTS_VERSION and error in _LEADER_HINT_ERRORS:
            payload = PartitionPayload(None, current_leader=self._current_leader(key))
        return PartitionFetchResult(error_code=error, payload=payload)

    def _current_leader(self, key: TopicPartitionKey) -> tuple[int, int]:
        if key.topic_name is None:
            return NO_LEADER
        state = self._replicas.partition_state(key.topic_name, key.partition)
        return NO_LEADER if state is None else (state.leader_id, state.leader_epoch)

    # -- long poll -------------------------------------------------------------------------------

    def _answer_now(
        self, request: FetchRequest, params: FetchParams, context: FetchContext, read: _ReadPass
    ) -> bool:
        """Kafka's immediate-response rules (kafka-behaviour.md 4.3), plus the idle session.

        A context with nothing readable answers at once, except an incremental one whose session
        still holds readable partitions that were not dirty: Kafka would have read (and waited on)
        them, so the fetch waits on the session instead.
        """
        if request.max_wait_ms <= 0 or read.must_answer or read.bytes_read >= params.effective_min_bytes:
            return True
        if read.readable > 0:
            return False
        if isinstance(context, IncrementalFetchContext):
            return context.session.size <= read.erroneous
        return True

    async def _wait(
        self, request: FetchRequest, params: FetchParams, context: FetchContext, first: _ReadPass
    ) -> None:
        """Park a DelayedFetch and wait until it completes or expires (never a sleep loop)."""
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def answer(_: None) -> None:
            if not done.done():
                done.set_result(None)

        delayed = self._delayed_fetch(request, params, context, first, answer)
        if self._purgatory.try_complete_else_watch(delayed, delayed.watch_keys):
            return
        try:
            await done
        finally:
            delayed.cancel()  # a no-op once completed; drops the watch if the request was cancelled

    def _delayed_fetch(
        self,
        request: FetchRequest,
        params: FetchParams,
        context: FetchContext,
        first: _ReadPass,
        answer: Callable[[None], None],
    ) -> DelayedFetch[None]:
        """Partition keys for a sessionless or full fetch; the session's waiter for an incremental one."""
        if isinstance(context, IncrementalFetchContext):
            skip = {key for key, result in first.results.items() if result.erroneous}
            return DelayedFetch(
                params,
                request.max_wait_ms,
                (),
                _no_read,
                answer,
                get_partition=self._fetchable,
                session=context.session,
                session_partitions=lambda: self._session_statuses(context, request, skip),
                expiration_meter=self._expiration_meter,
                throttled=self._throttled_for(request),
            )
        statuses = [
            FetchPartitionStatus(partition.key, fetch)
            for key, fetch in context.partitions_to_read()
            if first.results[key].error_code == ErrorCode.NONE
            and (partition := self._lookup_readable(key, request)) is not None
        ]
        return DelayedFetch(
            params,
            request.max_wait_ms,
            statuses,
            _no_read,
            answer,
            get_partition=self._fetchable,
            expiration_meter=self._expiration_meter,
            throttled=self._throttled_for(request),
        )

    def _throttled_for(self, request: FetchRequest) -> Callable[[Any], bool] | None:
        """For a parked follower fetch: whether a partition's bytes must not count towards min_bytes
        (Kafka's DelayedFetch leaves out throttled partitions while the quota is exceeded)."""
        if self._leader_quota is None or not request.is_from_follower:
            return None
        replica_id = request.replica_id
        return lambda partition: (
            isinstance(partition, Partition) and self._leader_throttled(partition, replica_id)
        )

    def _session_statuses(
        self, context: IncrementalFetchContext, request: FetchRequest, skip: set[TopicPartitionKey]
    ) -> list[FetchPartitionStatus]:
        """The session's dirty partitions as a parked fetch checks them, erroneous ones left out.

        A partition that disappeared since the first read keeps a key no partition resolves, so
        the check completes the fetch (case B) and the re-read reports it.
        """
        statuses = []
        for key, fetch in context.partitions_to_read():
            if key in skip:
                continue
            partition = self._lookup_readable(key, request)
            statuses.append(FetchPartitionStatus(_GONE if partition is None else partition.key, fetch))
        return statuses

    def _fetchable(self, key: Hashable) -> FetchablePartition | None:
        """The led partition a purgatory key names, else the followed one (a parked fetch that may not
        read a follower's log finds it is not the leader: case A of broker/fetch/delayed.py)."""
        partition = self._replicas.get_partition_by_key(key)
        if partition is not None or self._followed is None:
            return partition
        return self._followed.get_by_key(key)


class _Preference:
    """One consumer fetch's preferred-read-replica lookups (Kafka's ``findPreferredReadReplica``).

    The racks of the brokers are looked up once per request, on the first partition that needs them.
    """

    __slots__ = ("_client", "_now_ms", "_racks", "_racks_of", "_selector")

    def __init__(
        self,
        selector: ReplicaSelector,
        client: ClientMetadata,
        racks_of: Callable[[str], Mapping[int, str | None]] | None,
        now_ms: int,
    ) -> None:
        self._selector = selector
        self._client = client
        self._racks_of = racks_of
        self._racks: Mapping[int, str | None] | None = None
        self._now_ms = now_ms

    def find(self, partition: Partition, fetch_offset: int) -> int | None:
        """The broker the consumer should read ``partition`` from, or None for this leader."""
        if self._racks is None:
            self._racks = {} if self._racks_of is None else self._racks_of(self._client.listener)
        replica_set = partition.replica_set
        return find_preferred_read_replica(
            self._selector,
            self._client,
            leader_id=partition.node_id,
            leader_log_end_offset=partition.log_end_offset,
            followers=replica_set.followers,
            isr=replica_set.isr,
            racks=self._racks,
            fetch_offset=fetch_offset,
            now_ms=self._now_ms,
        )


def _no_read() -> None:
    """The DelayedFetch's read callback: the awaiting coroutine re-reads (see module docstring)."""
    return None


def _read_result(read: PartitionRead, fetch_offset: int, request: FetchRequest) -> PartitionFetchResult:
    """A successful read; ``skipped_for_budget`` when records were readable but none came back."""
    diverging = read.diverging_epoch
    if diverging is not None:
        return PartitionFetchResult(
            high_watermark=read.high_watermark,
            last_stable_offset=read.last_stable_offset,
            log_start_offset=read.log_start_offset,
            diverging_epoch=diverging[0],
            payload=PartitionPayload(None, diverging_end_offset=diverging[1]),
        )
    size = read.records_size
    end_offset = visible_end_offset(read, request.isolation_level, request.is_from_follower)
    return PartitionFetchResult(
        high_watermark=read.high_watermark,
        last_stable_offset=read.last_stable_offset,
        log_start_offset=read.log_start_offset,
        records_size=size,
        skipped_for_budget=size == 0 and fetch_offset < end_offset,
        payload=_NO_RECORDS if read.slice is None else PartitionPayload(read.slice),
        aborted_transactions=read.aborted_transactions,
    )


def _follower_error(partition: Partition, replica_id: int, current_leader_epoch: int) -> ErrorCode:
    """Kafka's order for a follower: leader epoch and leadership first, then replica membership."""
    error = partition.check_leader_epoch(current_leader_epoch)
    if error != ErrorCode.NONE:
        return error
    if replica_id in partition.replica_set.followers:  # the replica set, this leader excluded
        return ErrorCode.NONE
    _log.debug(
        "fetch from a replica outside the replica set",
        topic=partition.topic,
        partition=partition.index,
        replica_id=replica_id,
    )
    if current_leader_epoch != NO_LEADER_EPOCH:
        return ErrorCode.UNKNOWN_LEADER_EPOCH
    return ErrorCode.NOT_LEADER_OR_FOLLOWER


def _starts_with_zstd(records: FileSlice | bytes) -> bool:
    """True if the first batch of the slice is zstd-compressed (reads its attributes, 2 bytes)."""
    if isinstance(records, bytes):
        attributes = records[ATTRIBUTES_OFFSET : ATTRIBUTES_OFFSET + 2]
        return len(attributes) == 2 and (attributes[1] & COMPRESSION_MASK) == CompressionType.ZSTD
    if records.length <= ATTRIBUTES_OFFSET + 1:
        return False
    attributes = records.file.pread(2, records.position + ATTRIBUTES_OFFSET)
    return len(attributes) == 2 and (attributes[1] & COMPRESSION_MASK) == CompressionType.ZSTD
