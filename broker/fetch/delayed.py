"""DelayedFetch: a Fetch request parked until it has something worth answering, or ``max_wait_ms``.

The Fetch handler reads every partition once. If the answer is not ready (fewer than ``min_bytes``
readable, no error, no diverging epoch), it parks a :class:`DelayedFetch` in the fetch purgatory,
keyed by the request's partitions, with a deadline of ``max_wait_ms``. Each append or high-watermark
move calls ``check_and_complete(partition key)``, which runs :meth:`DelayedFetch.try_complete`. The
check is cheap: per partition a few attribute reads and a byte count from segment positions; it
never reads records.

Completion rules (each is a :class:`FetchCompletion` member, checked per partition in this order;
the first partition that meets A-C or E-G completes the fetch at once):

- (B) the broker no longer knows the partition (``get_partition`` returns None): the re-read
  reports UNKNOWN_TOPIC_OR_PARTITION.
- (E) the partition's log directory went offline: KAFKA_STORAGE_ERROR.
- (G) the request's CurrentLeaderEpoch differs from the partition's leader epoch (smaller:
  FENCED_LEADER_EPOCH; larger: UNKNOWN_LEADER_EPOCH). A request without an epoch (-1) is not
  checked. Kafka's DelayedFetch catches only the fenced case; an unknown epoch fails the re-read
  too, so answering at once is the useful choice.
- (A) the fetch may only be served by the leader (followers, and consumers of fetch v10 and older,
  which carry no KIP-392 client metadata) and this broker is no longer the leader:
  NOT_LEADER_OR_FOLLOWER. A consumer fetch of v11+ may go on waiting on a follower.
- (C) the fetch offset is past the end offset (the log was truncated below it, e.g. a new leader
  with a shorter log), or lies on an older segment than the end offset (the partition rolled, or
  the reader fell behind the active segment): what remains of the fetch offset's segment is final,
  so waiting for more bytes there is pointless.
- (F) the request carries a LastFetchedEpoch and the log now diverges from it: the epoch's end
  offset is undefined, belongs to an older epoch, or is below the fetch offset. The re-read
  returns a DivergingEpoch so that the follower truncates.
- (H) which end offset bytes are counted up to: the log end offset for a follower fetch (it must
  replicate what is not committed yet, so a leader append completes it without waiting for the
  high watermark), the high watermark for a READ_UNCOMMITTED consumer and the last stable offset for
  READ_COMMITTED (so an append completes a consumer fetch only once the high watermark covers it).
  A high-watermark move alone never completes a follower fetch: the follower learns the new high
  watermark from its next fetch, as in Kafka.
- (D) otherwise each partition with fetch offset < end offset on the same segment contributes
  ``min(bytes between them, partition max bytes)``; the fetch completes once the sum over all
  partitions reaches ``min(min_bytes, max_bytes)``. One append of ``min_bytes`` completes it; so do
  several smaller appends, on one partition or several.
- (I) an incremental fetch session that parks with no partitions (kafka-python's idle poll) is woken
  by its session's ``waiter``, which the session cache calls when any session partition changes.
  With ``session_partitions`` the woken fetch re-checks the session's changed partitions with the
  rules above; without it any change completes the fetch.

Otherwise the deadline answers with what there is. Completion, forced completion and expiry all
call ``read_callback()`` (the handler re-reads the log, with the same byte budget rules, without
updating follower fetch state) and then ``response_callback(result)``, exactly once.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any, Generic, Protocol, TypeVar

from broker.fetch.read_rules import diverging_epoch
from broker.fetch_session.partition import PartitionFetchParams
from protocol.sentinels import NO_LEADER_EPOCH, IsolationLevel
from server_common.purgatory import DelayedOperation

R = TypeVar("R")

CONSUMER_REPLICA_ID = -1
"""ReplicaId of a consumer's Fetch; followers send their broker id (>= 0)."""


@dataclass(frozen=True, slots=True)
class FetchParams:
    """Request-level Fetch parameters, after the handler applied the broker's limits.

    ``max_bytes`` is already capped by ``fetch.max.bytes``. ``fetch_only_from_leader`` is true for
    follower fetches and for consumer fetches older than v11 (no KIP-392 client metadata); only
    those are refused by a follower.
    """

    replica_id: int
    max_wait_ms: int
    min_bytes: int
    max_bytes: int
    isolation_level: IsolationLevel = IsolationLevel.READ_UNCOMMITTED
    fetch_only_from_leader: bool = True

    @property
    def is_from_follower(self) -> bool:
        return self.replica_id >= 0

    @property
    def effective_min_bytes(self) -> int:
        """Kafka answers once min(MinBytes, MaxBytes) are available: a larger minimum could never be met."""
        return min(self.min_bytes, self.max_bytes)


@dataclass(frozen=True, slots=True)
class FetchPartitionStatus:
    """One partition of a parked fetch: its purgatory key and what the request asked of it.

    ``key`` is the key appenders pass to ``check_and_complete`` and the one ``get_partition``
    resolves. List only partitions whose first read succeeded: any error answers at once anyway.
    """

    key: Hashable
    params: PartitionFetchParams


class FetchCompletion(Enum):
    """Why a DelayedFetch completed: the lettered cases of the module docstring, plus the others."""

    NOT_LEADER = "A"
    UNKNOWN_PARTITION = "B"
    TRUNCATED_OR_OLDER_SEGMENT = "C"
    MIN_BYTES = "D"
    OFFLINE_LOG_DIR = "E"
    DIVERGING_EPOCH = "F"
    LEADER_EPOCH_MISMATCH = "G"
    SESSION_WAKE = "I"
    EXPIRED = "expired"
    FORCED = "forced"


class FetchablePartition(Protocol):
    """What a DelayedFetch needs to know about a partition; the broker's partition implements it.

    Every member must be cheap (no record reads): it runs on every check of every parked fetch.
    """

    @property
    def leader_epoch(self) -> int: ...

    @property
    def is_leader(self) -> bool: ...

    @property
    def is_offline(self) -> bool:
        """True when the partition's log directory failed (KAFKA_STORAGE_ERROR)."""
        ...

    def end_offset_for(self, isolation_level: IsolationLevel, is_follower: bool) -> int:
        """What the reader may read up to (:func:`~broker.fetch.read_rules.visible_end_offset`)."""
        ...

    @property
    def log_end_offset(self) -> int: ...

    def on_older_segment(self, offset: int, end_offset: int) -> bool:
        """True if ``offset`` lies on an older segment than ``end_offset`` (both <= log end offset)."""
        ...

    def bytes_available(self, fetch_offset: int, end_offset: int, max_bytes: int) -> int:
        """Bytes from ``fetch_offset`` to ``end_offset`` on one segment, from segment positions.

        Called only with ``fetch_offset < end_offset`` on the same segment. May stop counting at
        ``max_bytes``. Batch granularity is fine (the read starts at the batch holding the offset).
        """
        ...

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch on the local epoch cache: (largest epoch <= ``epoch``, its end offset).

        (NO_LEADER_EPOCH, UNDEFINED_EPOCH_OFFSET) when the cache cannot answer.
        """
        ...


class SessionWaiterHolder(Protocol):
    """A fetch session, as far as a parked fetch is concerned: the slot for its wake-up callback."""

    waiter: Callable[[], None] | None


PartitionLookup = Callable[[Hashable], FetchablePartition | None]
"""Resolves a status key to the partition this broker hosts now, or None if it hosts none."""


class DelayedFetch(DelayedOperation, Generic[R]):
    """A parked Fetch; see the module docstring for when it completes.

    Park it with ``purgatory.try_complete_else_watch(fetch, fetch.watch_keys)``. ``delay_ms`` is
    normally ``params.max_wait_ms`` (less the time already spent on the first read, if the handler
    wants the deadline to count from the request's arrival). ``completion_reason`` tells, once
    completed, which rule fired.
    """

    __slots__ = (
        "_expiration_meter",
        "_get_partition",
        "_read_callback",
        "_response_callback",
        "_session",
        "_session_partitions",
        "_throttled",
        "_woken",
        "completion_reason",
        "fetch_partition_status",
        "params",
    )

    def __init__(
        self,
        params: FetchParams,
        delay_ms: int,
        fetch_partition_status: Sequence[FetchPartitionStatus],
        read_callback: Callable[[], R],
        response_callback: Callable[[R], None],
        *,
        get_partition: PartitionLookup,
        session: SessionWaiterHolder | None = None,
        session_partitions: Callable[[], Iterable[FetchPartitionStatus]] | None = None,
        expiration_meter: Callable[[bool], None] | None = None,
        throttled: Callable[[Any], bool] | None = None,
    ) -> None:
        """Build a parked fetch.

        ``throttled(partition)`` True: the partition's bytes do not count towards min_bytes (a
        follower's replication-throttled partition while the leader's quota is exceeded).

        ``session`` makes the fetch wake up through ``session.waiter`` (installed when the purgatory
        watches it, removed when it completes). ``session_partitions`` returns, on each check, the
        session partitions that changed (the incremental context's dirty partitions), checked with
        the same rules; do not list a partition both there and in ``fetch_partition_status``.
        ``expiration_meter(is_follower)`` marks Kafka's DelayedFetchMetrics ExpiresPerSec.
        """
        super().__init__(delay_ms)
        self.params = params
        self.fetch_partition_status = tuple(fetch_partition_status)
        self._read_callback = read_callback
        self._response_callback = response_callback
        self._get_partition = get_partition
        self._session = session
        self._session_partitions = session_partitions
        self._expiration_meter = expiration_meter
        self._throttled = throttled
        self._woken = False
        self.completion_reason: FetchCompletion | None = None

    @property
    def watch_keys(self) -> tuple[Hashable, ...]:
        """The purgatory keys: one per partition of the request."""
        return tuple(status.key for status in self.fetch_partition_status)

    def wake(self) -> None:
        """The session waiter: a partition of the session changed (case I)."""
        if self.is_completed:
            return
        self._woken = True
        self.try_complete()

    def try_complete(self) -> bool:
        if self.is_completed:
            return False
        reason = self._check()
        if reason is None:
            return False
        self.completion_reason = reason
        return self.force_complete()

    def _check(self) -> FetchCompletion | None:
        if self._woken and self._session_partitions is None:
            return FetchCompletion.SESSION_WAKE
        accumulated = 0
        for status in self._statuses():
            outcome = self._check_partition(status)
            if isinstance(outcome, FetchCompletion):
                return outcome
            accumulated += outcome
        if accumulated >= self.params.effective_min_bytes:
            return FetchCompletion.MIN_BYTES
        return None

    def _statuses(self) -> Iterable[FetchPartitionStatus]:
        yield from self.fetch_partition_status
        if self._session_partitions is not None:
            yield from self._session_partitions()

    def _check_partition(self, status: FetchPartitionStatus) -> FetchCompletion | int:
        """A completion reason for this partition, or the bytes it contributes towards min_bytes."""
        partition = self._get_partition(status.key)
        if partition is None:
            return FetchCompletion.UNKNOWN_PARTITION  # B
        if partition.is_offline:
            return FetchCompletion.OFFLINE_LOG_DIR  # E
        request = status.params
        if (
            request.current_leader_epoch != NO_LEADER_EPOCH
            and request.current_leader_epoch != partition.leader_epoch
        ):
            return FetchCompletion.LEADER_EPOCH_MISMATCH  # G
        params = self.params
        if params.fetch_only_from_leader and not partition.is_leader:
            return FetchCompletion.NOT_LEADER  # A
        end_offset = partition.end_offset_for(params.isolation_level, params.is_from_follower)  # H
        fetch_offset = request.fetch_offset
        if fetch_offset > end_offset and (
            fetch_offset > partition.log_end_offset or partition.on_older_segment(end_offset, fetch_offset)
        ):
            # C: the log was truncated below the fetch offset. A consumer fetch that is merely
            # ahead of a lagging high watermark (but within the log) waits, as in Kafka.
            return FetchCompletion.TRUNCATED_OR_OLDER_SEGMENT
        available = 0
        if fetch_offset < end_offset:
            if partition.on_older_segment(fetch_offset, end_offset):
                return FetchCompletion.TRUNCATED_OR_OLDER_SEGMENT  # C: rolled past the fetch offset
            available = min(
                partition.bytes_available(fetch_offset, end_offset, request.max_bytes), request.max_bytes
            )
        if diverging_epoch(partition, request.last_fetched_epoch, fetch_offset) is not None:
            return FetchCompletion.DIVERGING_EPOCH  # F
        if available > 0 and self._throttled is not None and self._throttled(partition):
            return 0
        return max(available, 0)  # D

    def on_watch(self) -> None:
        if self._session is not None:
            self._session.waiter = self.wake

    def on_release(self) -> None:
        session = self._session
        if session is not None and session.waiter == self.wake:
            session.waiter = None

    def on_complete(self) -> None:
        if self.completion_reason is None:
            self.completion_reason = FetchCompletion.EXPIRED if self.is_expired else FetchCompletion.FORCED
        self._response_callback(self._read_callback())

    def on_expiration(self) -> None:
        if self._expiration_meter is not None:
            self._expiration_meter(self.params.is_from_follower)

    def __repr__(self) -> str:
        return (
            f"DelayedFetch(replica_id={self.params.replica_id}, "
            f"partitions={len(self.fetch_partition_status)}, "
            f"min_bytes={self.params.min_bytes}, delay_ms={self.delay_ms}, completed={self.is_completed})"
        )
