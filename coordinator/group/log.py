"""The coordinator's only way to ``__consumer_offsets``: append records, hear when they are durable.

:class:`GroupLog` is what the coordinator needs from the offsets topic. The broker's implementation
appends the records as one batch (CREATE_TIME ``timestamp_ms``, no producer id) to partition
``partition`` of ``__consumer_offsets`` through its replica manager with acks=-1 and a timeout of
``offsets.commit.timeout.ms`` (5000), as Kafka's ``GroupMetadataManager.appendForGroup`` does, and
calls ``callback`` once with the append's error (NONE when the batch is committed) and the offset of
the batch's first record. The callback may run before ``append`` returns (a log that completes at
once) or later on the event loop; but a batch the log refuses (too large, not the leader: nothing
was written) is answered before ``append`` returns. The coordinator applies a write's records before
they are durable and takes them back if the write fails; only a refusal answered at once is taken
back before the next operation is computed from those records. A failure answered later concerns a
batch that is in the log (waiting for the replicas failed, the leader moved).

Log errors are not what clients get: :func:`group_write_error` and :func:`offset_commit_error` map
them as Kafka's ``storeGroup`` and ``maybeConvertOffsetCommitError`` do.

:class:`InMemoryGroupLog` is the reference behaviour, used by tests: appends complete at once, or
wait until the test completes them (``defer``), and can be made to fail.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from protocol.error_codes import ErrorCode
from protocol.sentinels import UNKNOWN_OFFSET

AppendCallback = Callable[[ErrorCode, int], None]
"""Called once per append: (error, offset of the batch's first record; UNKNOWN_OFFSET on error)."""


@dataclass(frozen=True, slots=True)
class OffsetsRecord:
    """One record to append: key and value bytes (None: a tombstone)."""

    key: bytes
    value: bytes | None


@dataclass(frozen=True, slots=True)
class TxnProducer:
    """The transactional producer a batch of offsets is written for (TxnOffsetCommit): the batch
    is transactional, with this producer id and epoch, and stays pending until its marker."""

    producer_id: int
    producer_epoch: int
    verification: object | None = field(default=None, compare=False)
    """The partition leader's guard from verifying, with the transaction coordinator, that this
    partition of ``__consumer_offsets`` is in the producer's transaction (KIP-890); opaque here."""


@dataclass(frozen=True, slots=True)
class LoggedRecord:
    """One record read back from a partition of ``__consumer_offsets`` (for loading).

    ``producer_id`` is set for records of a transactional batch: they count only once a COMMIT
    marker of that producer follows (:class:`LoggedTxnMarker`), and never after an ABORT.
    """

    offset: int
    key: bytes
    value: bytes | None
    producer_id: int | None = None


@dataclass(frozen=True, slots=True)
class LoggedTxnMarker:
    """A transaction marker read back from ``__consumer_offsets``: it ends ``producer_id``'s
    transaction there, committing or aborting the offsets the producer wrote in it."""

    offset: int
    producer_id: int
    commit: bool


LoggedEntry = LoggedRecord | LoggedTxnMarker


class GroupLog(Protocol):
    def append(
        self,
        partition: int,
        records: Sequence[OffsetsRecord],
        timestamp_ms: int,
        callback: AppendCallback,
        producer: TxnProducer | None = None,
    ) -> None:
        """Append ``records`` as one batch to ``__consumer_offsets-<partition>``; call ``callback``
        once when the batch is committed or the append failed, before returning if the batch was
        refused. With ``producer`` the batch is transactional, written for that producer id and
        epoch."""
        ...


_COORDINATOR_NOT_AVAILABLE = frozenset(
    {
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.NOT_ENOUGH_REPLICAS,
        ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    }
)
_NOT_COORDINATOR = frozenset({ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.KAFKA_STORAGE_ERROR})
_TOO_LARGE = frozenset(
    {ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE, ErrorCode.INVALID_FETCH_SIZE}
)


def group_write_error(error: ErrorCode) -> ErrorCode:
    """What a JoinGroup/SyncGroup answers when the group's metadata could not be written
    (``storeGroup``): a timeout asks the members to rejoin, oversize is a server error."""
    if error in _COORDINATOR_NOT_AVAILABLE:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if error in _NOT_COORDINATOR:
        return ErrorCode.NOT_COORDINATOR
    if error is ErrorCode.REQUEST_TIMED_OUT:
        return ErrorCode.REBALANCE_IN_PROGRESS
    if error in _TOO_LARGE:
        return ErrorCode.UNKNOWN_SERVER_ERROR
    return error


def offset_commit_error(error: ErrorCode) -> ErrorCode:
    """What an OffsetCommit answers when its records could not be written
    (``maybeConvertOffsetCommitError``); anything else, a timeout included, passes through."""
    if error is ErrorCode.NETWORK_EXCEPTION:
        return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    if error in _COORDINATOR_NOT_AVAILABLE:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if error in _NOT_COORDINATOR:
        return ErrorCode.NOT_COORDINATOR
    if error in _TOO_LARGE:
        return ErrorCode.INVALID_COMMIT_OFFSET_SIZE
    return error


@dataclass(slots=True)
class _DeferredAppend:
    partition: int
    records: tuple[OffsetsRecord, ...]
    callback: AppendCallback
    producer: TxnProducer | None = None


class InMemoryGroupLog:
    """A GroupLog over in-memory lists, one per partition, with one offset sequence per partition.

    ``fail_with`` makes every append fail with that error before ``append`` returns (nothing is
    written), deferred or not: a log refuses a batch at once (too large, not the leader), as
    :class:`GroupLog` requires. With ``defer`` the other appends wait in :attr:`deferred` until
    :meth:`complete_next` or :meth:`complete_all` resolves them, so tests can interleave requests
    with writes in flight, and fail one after it was appended.
    """

    def __init__(self, *, defer: bool = False) -> None:
        self.partitions: dict[int, list[LoggedEntry]] = {}
        self.timestamps: list[int] = []
        self.fail_with: ErrorCode | None = None
        self.defer = defer
        self.deferred: list[_DeferredAppend] = []

    def append(
        self,
        partition: int,
        records: Sequence[OffsetsRecord],
        timestamp_ms: int,
        callback: AppendCallback,
        producer: TxnProducer | None = None,
    ) -> None:
        if not records:
            raise ValueError("an append to __consumer_offsets holds at least one record")
        self.timestamps.append(timestamp_ms)
        pending = _DeferredAppend(partition, tuple(records), callback, producer)
        if self.defer and self.fail_with is None:
            self.deferred.append(pending)
        else:
            self._resolve(pending, self.fail_with)

    def complete_next(self, error: ErrorCode | None = None, *, index: int = 0) -> None:
        """Resolve the oldest deferred append (or the one at ``index``, to answer them out of
        order): written (``error`` None or NONE) or failed."""
        self._resolve(self.deferred.pop(index), error)

    def complete_all(self, error: ErrorCode | None = None) -> None:
        while self.deferred:
            self.complete_next(error)

    def records(self, partition: int) -> list[LoggedEntry]:
        return list(self.partitions.get(partition, ()))

    def append_marker(self, partition: int, producer_id: int, commit: bool) -> None:
        """What WriteTxnMarkers leaves in the partition: the end of ``producer_id``'s transaction."""
        log = self.partitions.setdefault(partition, [])
        log.append(LoggedTxnMarker(len(log), producer_id, commit))

    def _resolve(self, pending: _DeferredAppend, error: ErrorCode | None) -> None:
        if error is not None and error is not ErrorCode.NONE:
            pending.callback(error, UNKNOWN_OFFSET)
            return
        log = self.partitions.setdefault(pending.partition, [])
        base = len(log)
        producer_id = None if pending.producer is None else pending.producer.producer_id
        log.extend(LoggedRecord(base + i, r.key, r.value, producer_id) for i, r in enumerate(pending.records))
        pending.callback(ErrorCode.NONE, base)
