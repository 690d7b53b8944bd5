"""A partition this broker leads: appends, reads and offset lookups, with Kafka's error codes.

The :class:`Partition` wraps the partition's :class:`~storage.log.PartitionLog` (which it does not
own: the LogManager opens, checkpoints and closes logs) and adds what the leader knows beyond the
bytes on disk: the leader epoch, the replicas and ISR with each follower's fetch state, the high
watermark, and the idempotent producers' state (:class:`~storage.producer_state.ProducerStateManager`).

Appends (Produce) follow Kafka's order of checks: leadership, ``min.insync.replicas`` for acks=-1,
then the batch (one whole v2 batch, consistent record count, size, no control batch from a client; a
transactional batch must belong to an ongoing transaction of its producer, or have been verified
with the transaction coordinator, KIP-890), then the records' timestamps against
``message.timestamp.before.max.ms`` and ``message.timestamp.after.max.ms`` (before the producer
state, as in Kafka, where ``LogValidator`` runs first), then the producer's sequence (a retried
batch is answered with its first offsets instead of being written twice), then the log append, which
verifies the CRC32C while it copies and stamps the batch. The CRC is therefore computed once per
batch, not once in validation and once in the log; the rare paths that answer without appending (a
duplicate, a sequence error) verify it themselves first, so a corrupt batch is always
CORRUPT_MESSAGE.

Replication, leader side (kafka-behaviour.md 6), is a
:class:`~broker.replication.replica_state.LeaderReplicaSet` driven from here:

- the high watermark is recomputed after a local append, after a follower fetch
  (:meth:`Partition.update_follower_fetch`) and when the ISR changes; it is the minimum LEO over the
  leader, the maximal ISR and caught-up followers about to join, frozen while the committed ISR is
  below ``min(min.insync.replicas, replication factor)``, and never below the current leader
  epoch's start offset (with only the leader in the ISR it is the LEO right after each append);
- ISR changes go to the controller as AlterPartition proposals through an
  :class:`AlterPartitionSender` (fire-and-forget): an expansion when a follower's fetch finds it
  caught up (6.3), a shrink when the periodic "isr-expiration" task finds a follower out of sync
  (:meth:`Partition.maybe_shrink_isr`, 6.4). The answer comes back through
  :meth:`Partition.on_alter_partition_result`. Without a sender the ISR is whatever the metadata says;
- new metadata comes through :meth:`Partition.make_leader` and :meth:`Partition.make_follower`.

Transactions: markers (:meth:`Partition.append_txn_marker`) end a producer's transaction; the
last stable offset is the first offset of the oldest transaction still open (or ended by a marker
the high watermark has not passed), else the high watermark; read_committed reads stop there and
get the aborted transactions of their range from the transaction index, never from the records.

Listeners (fetch sessions, delayed fetches, delayed produces) hear of every change of the log end
offset, high watermark, log start offset, leader epoch, leadership or committed ISR, after the
change. That is how
a follower fetch that moves the high watermark completes acks=-1 produces: never by polling.
"""

from __future__ import annotations

import uuid
from bisect import bisect_right
from collections.abc import Callable, Sequence
from typing import NamedTuple, Protocol

import structlog

from broker.fetch.read_rules import EpochLookup, diverging_epoch, visible_end_offset
from broker.produce.validation import check_records, conform_to_topic_codec, read_single_batch, verify_crc
from broker.replication.replica_state import (
    DEFAULT_REPLICA_LAG_TIME_MAX_MS,
    BrokerEligibility,
    IsrProposal,
    LeaderReplicaSet,
    ProposalOutcome,
)
from protocol.error_codes import ErrorCode, KafkaError
from protocol.errors import CorruptRecordError, ProtocolError, UnsupportedMagicError
from protocol.records.batch import RecordBatchHeader
from protocol.records.control import ControlRecordType, build_end_txn_marker_batch
from protocol.sentinels import (
    EARLIEST_LOCAL_TIMESTAMP,
    EARLIEST_TIMESTAMP,
    LATEST_TIERED_TIMESTAMP,
    LATEST_TIMESTAMP,
    NO_LEADER_EPOCH,
    NO_TIMESTAMP,
    UNDEFINED_EPOCH_OFFSET,
    UNKNOWN_OFFSET,
    IsolationLevel,
)
from storage.clock import Clock
from storage.errors import (
    LOW_SPACE_BYTES,
    CorruptLogError,
    InvalidRecordError,
    KiplingStorageError,
    LogDirFullError,
    OffsetOutOfRangeError,
    OutOfDescriptorsError,
    RecordBatchTooLargeError,
    RecordTooLargeError,
    free_bytes,
)
from storage.log import FileSlice, PartitionLog
from storage.producer_recovery import rebuild_producer_state
from storage.producer_state import (
    DEFAULT_PRODUCER_ID_EXPIRATION_MS,
    AppendOrigin,
    DuplicateBatch,
    InvalidProducerEpochError,
    InvalidTxnStateError,
    OutOfOrderSequenceError,
    ProducerStateManager,
    TransactionCoordinatorFencedError,
    TxnMarker,
)
from storage.segment import LogSegment
from storage.transactions import apply_batch
from storage.txn_index import AbortedTxn

__all__ = [
    "AlterPartitionSender",
    "AppendResult",
    "Partition",
    "PartitionRead",
    "TimestampAndOffset",
]

_POSITION_CACHE_LIMIT = 1024


DELETE_RECORDS_HIGH_WATERMARK = -1
"""DeleteRecords' offset that means "up to the high watermark"."""

_log = structlog.get_logger("kipling.partition")

PartitionListener = Callable[["Partition"], None]


class AlterPartitionSender(Protocol):
    """Carries ISR proposals to the controller (AlterPartition), fire-and-forget.

    ``submit`` must return at once; the sender later calls
    ``partition.on_alter_partition_result(proposal, error, leader_epoch, isr, partition_epoch)``
    with the controller's answer (or an error such as REQUEST_TIMED_OUT if it gave up), on the
    broker's event loop. Until then the partition proposes nothing else.
    """

    def submit(self, partition: Partition, proposal: IsrProposal) -> None: ...


class AppendResult(NamedTuple):
    """What a Produce answers for one partition (Kafka's LogAppendInfo, reduced)."""

    base_offset: int
    last_offset: int
    log_append_time_ms: int
    """The broker's time for LogAppendTime topics, -1 for CreateTime."""
    log_start_offset: int
    num_records: int
    duplicate: bool
    """True when the batch was a retry of one already in the log: nothing was written."""

    @property
    def required_offset(self) -> int:
        """The high watermark at which the batch is committed (acks=-1 waits for it)."""
        return self.last_offset + 1


class PartitionRead(NamedTuple):
    """One partition's share of a Fetch: offsets to report and the raw slice of whole batches."""

    error_code: ErrorCode
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    slice: FileSlice | bytes | None
    """A slice of the segment file; bytes when read from a log another process owns (a followed
    partition's, broker/replication/followers/followed_replicas.py)."""
    records_size: int
    diverging_epoch: tuple[int, int] | None
    """(epoch, end offset) when the follower's last fetched epoch diverges from this log."""
    log_end_offset: int = UNKNOWN_OFFSET
    """The leader's LEO when the read started (followers' ISR bookkeeping uses it)."""
    first_offset: int | None = None
    """Base offset of the first batch in ``slice`` (it may be below the fetch offset)."""
    aborted_transactions: tuple[AbortedTxn, ...] = ()
    """For a read_committed read: the aborted transactions overlapping the range read."""


class VerificationGuard:
    """What a transactional append must present: the verification it was admitted by (KIP-890)."""

    __slots__ = ("started_ms",)

    def __init__(self, started_ms: int) -> None:
        self.started_ms = started_ms


class TimestampAndOffset(NamedTuple):
    """A ListOffsets answer; (-1, -1, -1) means no offset qualifies."""

    timestamp: int
    offset: int
    leader_epoch: int


NOT_FOUND = TimestampAndOffset(NO_TIMESTAMP, UNKNOWN_OFFSET, NO_LEADER_EPOCH)


def error_read(code: ErrorCode) -> PartitionRead:
    """Kafka reports -1 for every offset of a partition whose read failed."""
    return PartitionRead(code, UNKNOWN_OFFSET, UNKNOWN_OFFSET, UNKNOWN_OFFSET, None, 0, None)


def position_answer(
    epochs: EpochLookup, empty: PartitionRead, last_fetched_epoch: int, fetch_offset: int
) -> PartitionRead | None:
    """Kafka's checks of a fetch position before any record is read, on a led log or a followed
    one: a diverging LastFetchedEpoch is answered with where the logs part (OFFSET_OUT_OF_RANGE when
    the epoch cannot be placed or the fetch is below the log start), then a position outside
    [log start, LEO] is OFFSET_OUT_OF_RANGE. None: read from ``fetch_offset``. ``empty`` is the
    read's offsets without records."""
    divergence = diverging_epoch(epochs, last_fetched_epoch, fetch_offset)
    if divergence is not None:
        if divergence.undefined or fetch_offset < empty.log_start_offset:
            return error_read(ErrorCode.OFFSET_OUT_OF_RANGE)
        return empty._replace(diverging_epoch=divergence)
    if not empty.log_start_offset <= fetch_offset <= empty.log_end_offset:
        return error_read(ErrorCode.OFFSET_OUT_OF_RANGE)
    return None


class Partition:
    """A partition led by this broker. Single-threaded: driven from the broker's event loop."""

    def __init__(
        self,
        log: PartitionLog,
        *,
        node_id: int,
        topic_id: uuid.UUID,
        leader_epoch: int,
        partition_epoch: int,
        replicas: list[int],
        isr: list[int],
        min_insync_replicas: int,
        producer_state: ProducerStateManager,
        clock: Clock,
        replica_lag_time_max_ms: int = DEFAULT_REPLICA_LAG_TIME_MAX_MS,
        alter_partition: AlterPartitionSender | None = None,
        broker_eligibility: BrokerEligibility | None = None,
        verify_transactions: bool = True,
    ) -> None:
        """Wire already loaded state; use :meth:`open`, which also rebuilds the producer state.

        ``alter_partition`` carries ISR proposals to the controller (None: the ISR changes only
        through :meth:`make_leader`); ``broker_eligibility(replica id, fetch broker epoch)`` says
        whether a follower may join the ISR (not fenced, not shutting down, current broker epoch;
        None: always).
        """
        self.log = log
        self.topic = log.topic
        self.index = log.partition
        self.key: tuple[str, int] = (log.topic, log.partition)
        """The purgatory key of this partition (the delayed produce watches it)."""
        self.topic_id = topic_id
        self.node_id = node_id
        self.leader_epoch = leader_epoch
        self.producer_state = producer_state
        self.is_leader = True
        self.is_offline = False
        self._log_dir_full = False
        self._verification_guards: dict[int, VerificationGuard] = {}
        self._verify_transactions = verify_transactions
        self._clock = clock
        self._alter_partition = alter_partition
        self._listeners: list[PartitionListener] = []
        self._positions: dict[int, int] = {}
        self._positions_segment: LogSegment | None = None
        self._known_log_start_offset = log.log_start_offset
        self._logger = _log.bind(topic=self.topic, partition=self.index)
        self._assign_leader_epoch()
        self._replica_set = LeaderReplicaSet(
            leader_id=node_id,
            replicas=replicas,
            isr=isr,
            leader_epoch=leader_epoch,
            leader_epoch_start_offset=self._leader_epoch_start_offset(),
            partition_epoch=partition_epoch,
            min_insync_replicas=min_insync_replicas,
            high_watermark=log.high_watermark,
            now_ms=clock.time_ms(),
            replica_lag_time_max_ms=replica_lag_time_max_ms,
            is_eligible=broker_eligibility,
            leader_log_end_offset=log.log_end_offset,
        )
        self._replica_set.maybe_increment_high_watermark(clock.time_ms())
        self._sync_high_watermark()

    @classmethod
    def open(
        cls,
        log: PartitionLog,
        *,
        node_id: int,
        topic_id: uuid.UUID,
        leader_epoch: int,
        partition_epoch: int,
        replicas: list[int],
        isr: list[int],
        min_insync_replicas: int,
        clock: Clock,
        producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
        replica_lag_time_max_ms: int = DEFAULT_REPLICA_LAG_TIME_MAX_MS,
        alter_partition: AlterPartitionSender | None = None,
        broker_eligibility: BrokerEligibility | None = None,
        verify_transactions: bool = True,
    ) -> Partition:
        """Take the lead of ``log``: rebuild the producer state, record the epoch, set the HW.

        A damaged batch met while replaying the producer state (the log was damaged while closed)
        takes the partition offline at once, as one met while serving would: it resigns, and its log
        goes to a follower process to be repaired (:meth:`_go_offline`).
        """
        producer_state = ProducerStateManager(log.directory, producer_id_expiration_ms)
        damage: CorruptLogError | None = None
        try:
            rebuild_producer_state(log, producer_state, clock.time_ms())
        except CorruptLogError as exc:
            damage = exc
        partition = cls(
            log,
            node_id=node_id,
            topic_id=topic_id,
            leader_epoch=leader_epoch,
            partition_epoch=partition_epoch,
            replicas=replicas,
            isr=isr,
            min_insync_replicas=min_insync_replicas,
            producer_state=producer_state,
            clock=clock,
            replica_lag_time_max_ms=replica_lag_time_max_ms,
            alter_partition=alter_partition,
            broker_eligibility=broker_eligibility,
            verify_transactions=verify_transactions,
        )
        if damage is not None:
            partition._go_offline(damage)
        return partition

    def _assign_leader_epoch(self) -> None:
        """Kafka's makeLeader: the epoch cache gets (epoch, LEO) before any data of the epoch.

        An epoch lower than the cache's latest is stale metadata: assigning it would cut the cache.
        On a full disk the entry waits: the first append of the epoch assigns it (before its data),
        so leading, and serving reads, does not depend on space for a checkpoint.
        """
        cache = self.log.leader_epoch_cache
        latest = cache.latest_epoch
        if latest is None or self.leader_epoch > latest:
            try:
                cache.assign(self.leader_epoch, self.log.log_end_offset)
            except LogDirFullError as exc:
                self._on_log_dir_full(exc)

    def _leader_epoch_start_offset(self) -> int:
        """Where the current leader epoch starts in the log (the LEO if the cache does not know it)."""
        entry = self.log.leader_epoch_cache.latest_entry
        if entry is not None and entry.epoch == self.leader_epoch:
            return entry.start_offset
        return self.log.log_end_offset

    # -- state -------------------------------------------------------------------------------------

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark

    @property
    def last_stable_offset(self) -> int:
        """The first offset of the oldest unstable transaction, else the high watermark (never
        above it, never below the log start offset)."""
        high_watermark = self.log.high_watermark
        first_unstable = self.producer_state.first_unstable_offset()
        if first_unstable is None or first_unstable >= high_watermark:
            return high_watermark
        return max(first_unstable, self.log.log_start_offset)

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    @property
    def replica_set(self) -> LeaderReplicaSet:
        """The followers' fetch state, ISR and HW rule (read it; change it through this class)."""
        return self._replica_set

    @property
    def partition_epoch(self) -> int:
        """The epoch of the committed replicas/ISR (bumped by every AlterPartition the controller takes)."""
        return self._replica_set.partition_epoch

    @property
    def replicas(self) -> list[int]:
        return list(self._replica_set.replicas)

    @property
    def isr(self) -> list[int]:
        """The committed ISR: what acks=-1 admission checks."""
        return list(self._replica_set.isr)

    @property
    def maximal_isr(self) -> list[int]:
        """The committed ISR plus members of an expansion in flight: what the HW waits for."""
        return list(self._replica_set.maximal_isr)

    @property
    def isr_size(self) -> int:
        return len(self._replica_set.isr)

    @property
    def configured_min_insync_replicas(self) -> int:
        return self._replica_set.configured_min_insync_replicas

    @configured_min_insync_replicas.setter
    def configured_min_insync_replicas(self, value: int) -> None:
        """A topic config change; it takes effect at the next HW computation (append, fetch, ISR change)."""
        self._replica_set.configured_min_insync_replicas = value

    @property
    def min_insync_replicas(self) -> int:
        """min(min.insync.replicas, replication factor): Kafka clamps a minimum no ISR could reach."""
        return self._replica_set.min_insync_replicas

    def acks_all_completion_error(self) -> ErrorCode:
        """What an acks=-1 produce whose offset the HW reached answers (6.5): NONE, or
        NOT_ENOUGH_REPLICAS_AFTER_APPEND when the maximal ISR is below the effective min ISR."""
        return self._replica_set.acks_all_completion_error()

    def add_listener(self, fn: PartitionListener) -> None:
        """``fn(partition)`` runs after every change of LEO, HW, log start offset, epoch, leadership
        or committed ISR."""
        self._listeners.append(fn)

    def _notify(self) -> None:
        for listener in list(self._listeners):
            try:
                listener(self)
            except Exception:
                self._logger.exception("partition listener failed")

    def _sync_high_watermark(self) -> bool:
        """Carry the replica set's HW to the log (what reads, checkpoints and retention see).

        True if it moved. The log clamps it to its LEO; it never goes backwards here.
        """
        high_watermark = self._replica_set.high_watermark
        if high_watermark <= self.log.high_watermark:
            return False
        self.log.update_high_watermark(high_watermark)
        self.producer_state.on_high_watermark_updated(self.log.high_watermark)
        return True

    # -- appends -----------------------------------------------------------------------------------

    def append_records(
        self,
        records: bytes | bytearray | memoryview | None,
        *,
        required_acks: int,
        now_ms: int,
        origin: AppendOrigin = "leader",
        verification: object | None = None,
    ) -> AppendResult:
        """Append one produced batch as leader; raises KafkaError with the partition's error code.

        Nothing is written when an error is raised. A retried batch of an idempotent producer is
        answered from the producer state with the offsets it got the first time. ``origin`` is
        "coordinator" for the group coordinator's own writes (no sequence numbers to check).
        ``verification`` is the guard :meth:`start_txn_verification` returned before the
        transaction coordinator confirmed that the batch's transaction includes this partition.
        """
        self._check_writable()
        if required_acks == -1 and not self._replica_set.acks_all_allowed():
            raise KafkaError(
                ErrorCode.NOT_ENOUGH_REPLICAS,
                f"The size of the current ISR {self.isr} is insufficient to satisfy the min.isr "
                f"requirement of {self.min_insync_replicas} for partition {self.topic}-{self.index}",
            )
        data = records if records is not None else b""
        header = self._validate_batch(data)
        if header.is_transactional and origin != "replication":
            self._check_txn_verified(header, verification)
        check_records(data, header, self.log.config, now_ms, topic=self.topic, partition=self.index)
        duplicate = self._check_producer_state(data, header, now_ms, origin)
        if duplicate is not None:
            return self._duplicate_result(duplicate)
        data, header = conform_to_topic_codec(data, header, self.log.config)
        return self._append(data, header)

    def _check_writable(self) -> None:
        if self.is_offline:
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"the log of {self.topic}-{self.index} failed")
        if not self.is_leader:
            raise KafkaError(
                ErrorCode.NOT_LEADER_OR_FOLLOWER, f"this broker no longer leads {self.topic}-{self.index}"
            )

    def _validate_batch(self, data: bytes | bytearray | memoryview) -> RecordBatchHeader:
        """Header-only checks (the CRC is the log's): exactly one whole v2 batch a client may write."""
        header = read_single_batch(data)
        if header.is_control:
            raise KafkaError(ErrorCode.INVALID_RECORD, "Clients are not allowed to write control records")
        if header.records_count <= 0 or header.records_count != header.last_offset_delta + 1:
            raise KafkaError(
                ErrorCode.INVALID_RECORD,
                f"Inconsistent batch: {header.records_count} records for a last offset delta of "
                f"{header.last_offset_delta}",
            )
        max_bytes = self.log.config.max_message_bytes
        if header.size > max_bytes:
            raise KafkaError(
                ErrorCode.MESSAGE_TOO_LARGE,
                f"The record batch of {header.size} bytes is larger than max.message.bytes={max_bytes}",
            )
        return header

    # -- transactions ------------------------------------------------------------------------------

    def has_ongoing_transaction(self, producer_id: int, producer_epoch: int) -> bool:
        """The producer's transaction already wrote here in this epoch: no verification needed."""
        entry = self.producer_state.last_entry(producer_id)
        return (
            entry is not None
            and entry.current_txn_first_offset is not None
            and entry.producer_epoch == producer_epoch
        )

    def start_txn_verification(self, producer_id: int) -> object:
        """A guard for a verification about to be asked of the transaction coordinator (KIP-890).

        A marker for the producer written meanwhile ends that transaction and drops the guard, so a
        batch verified against the ended transaction is refused rather than opening a new one that
        no coordinator knows of (a hanging transaction).
        """
        guard = self._verification_guards.get(producer_id)
        if guard is None:
            guard = self._verification_guards[producer_id] = VerificationGuard(self._clock.time_ms())
        return guard

    def _check_txn_verified(self, header: RecordBatchHeader, verification: object | None) -> None:
        producer_id = header.producer_id
        if self.has_ongoing_transaction(producer_id, header.producer_epoch):
            return
        if not self._verify_transactions:
            return
        guard = self._verification_guards.get(producer_id)
        if verification is None or guard is not verification:
            raise KafkaError(
                ErrorCode.INVALID_TXN_STATE,
                f"producer {producer_id} epoch {header.producer_epoch} has no ongoing transaction "
                f"including {self.topic}-{self.index} (it was not added to the transaction, or the "
                "transaction ended)",
            )
        del self._verification_guards[producer_id]

    def append_txn_marker(
        self, *, producer_id: int, producer_epoch: int, coordinator_epoch: int, commit: bool, now_ms: int
    ) -> AppendResult:
        """WriteTxnMarkers: end the producer's transaction here with a COMMIT or ABORT marker.

        A marker of an older producer epoch is INVALID_PRODUCER_EPOCH, one of an older coordinator
        epoch than the producer's last marker TRANSACTION_COORDINATOR_FENCED (a zombie
        coordinator). A marker with no transaction open is still written, as Kafka does (it is
        harmless, and a retried marker after a lost answer must succeed).
        """
        self._check_writable()
        if not self._replica_set.acks_all_allowed():  # markers are written with acks=-1
            raise KafkaError(
                ErrorCode.NOT_ENOUGH_REPLICAS,
                f"The size of the current ISR {self.isr} is insufficient to satisfy the min.isr "
                f"requirement of {self.min_insync_replicas} for partition {self.topic}-{self.index}",
            )
        batch = build_end_txn_marker_batch(
            commit=commit,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            coordinator_epoch=coordinator_epoch,
            timestamp=now_ms,
        )
        header = read_single_batch(batch)
        marker = TxnMarker(ControlRecordType.COMMIT if commit else ControlRecordType.ABORT, coordinator_epoch)
        try:
            self.producer_state.check_and_prepare(header, origin="coordinator", now_ms=now_ms, marker=marker)
        except InvalidProducerEpochError as exc:
            raise KafkaError(ErrorCode.INVALID_PRODUCER_EPOCH, str(exc)) from None
        except TransactionCoordinatorFencedError as exc:
            raise KafkaError(ErrorCode.TRANSACTION_COORDINATOR_FENCED, str(exc)) from None
        self._verification_guards.pop(producer_id, None)  # a fenced zombie's marker voids nothing
        return self._append(batch, header, marker)

    def _check_producer_state(
        self,
        data: bytes | bytearray | memoryview,
        header: RecordBatchHeader,
        now_ms: int,
        origin: AppendOrigin,
    ) -> DuplicateBatch | None:
        """Duplicate or sequence errors, answered only for a batch whose CRC holds."""
        if not header.has_producer_id:
            return None
        try:
            duplicate = self.producer_state.check_and_prepare(header, origin=origin, now_ms=now_ms)
        except OutOfOrderSequenceError as exc:
            verify_crc(data)
            if self._log_dir_full and not self._has_space_for(len(data)):
                # The gap is the batch this full disk refused a moment ago, and this one would be
                # refused too. Saying so keeps the producer retrying in order; OUT_OF_ORDER_SEQUENCE
                # makes librdkafka bump its epoch and renumber whatever it has in flight on every
                # partition, duplicating batches other leaders had written but not yet answered.
                raise KafkaError(
                    ErrorCode.KAFKA_STORAGE_ERROR,
                    f"no space left in the log dir of {self.topic}-{self.index} ({exc})",
                ) from None
            raise KafkaError(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, str(exc)) from None
        except InvalidProducerEpochError as exc:
            verify_crc(data)
            raise KafkaError(ErrorCode.INVALID_PRODUCER_EPOCH, str(exc)) from None
        except InvalidTxnStateError as exc:
            verify_crc(data)
            raise KafkaError(ErrorCode.INVALID_TXN_STATE, str(exc)) from None
        if duplicate is not None:
            verify_crc(data)
            self._logger.debug(
                "duplicate batch answered from producer state",
                producer_id=header.producer_id,
                base_sequence=header.base_sequence,
                first_offset=duplicate.first_offset,
            )
        return duplicate

    def _has_space_for(self, size: int) -> bool:
        """Whether the log dir has room for ``size`` bytes again (a full disk's gap is then a real gap)."""
        try:
            return free_bytes(self.log.directory) > size + LOW_SPACE_BYTES
        except OSError:
            return False

    def _duplicate_result(self, duplicate: DuplicateBatch) -> AppendResult:
        log_append_time = duplicate.timestamp if self.log.config.log_append_time else NO_TIMESTAMP
        return AppendResult(
            duplicate.first_offset,
            duplicate.last_offset,
            log_append_time,
            self.log.log_start_offset,
            duplicate.last_offset - duplicate.first_offset + 1,
            True,
        )

    def _append(
        self, data: bytes | bytearray | memoryview, header: RecordBatchHeader, marker: TxnMarker | None = None
    ) -> AppendResult:
        active_before = self.log.active_segment
        snapshot_at = self.log.log_end_offset
        try:
            info = self.log.append_as_leader(data, self.leader_epoch)
        except (CorruptRecordError, UnsupportedMagicError) as exc:
            raise KafkaError(ErrorCode.CORRUPT_MESSAGE, str(exc)) from None
        except RecordTooLargeError as exc:
            raise KafkaError(ErrorCode.MESSAGE_TOO_LARGE, str(exc)) from None
        except RecordBatchTooLargeError as exc:
            raise KafkaError(ErrorCode.RECORD_LIST_TOO_LARGE, str(exc)) from None
        except InvalidRecordError as exc:
            raise KafkaError(ErrorCode.INVALID_RECORD, str(exc)) from None
        except LogDirFullError as exc:
            self._on_log_dir_full(exc)
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, str(exc)) from None
        except (OSError, KiplingStorageError) as exc:
            self._go_offline(exc)
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, str(exc)) from None
        if self._log_dir_full:
            self._log_dir_full = False
            self._logger.info(
                "log dir has space again: appends accepted", log_dir=str(self.log.directory.parent)
            )
        if self.log.active_segment is not active_before:
            self._on_roll(snapshot_at)
        written = header._replace(base_offset=info.first_offset, max_timestamp=info.max_timestamp)
        try:
            apply_batch(self.log, self.producer_state, written, info.first_offset, info.last_offset, marker)
        except (OSError, KiplingStorageError) as exc:  # the transaction index could not be written
            self._go_offline(exc)
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, str(exc)) from None
        self._replica_set.update_leader_log_end_offset(self.log.log_end_offset, self._clock.time_ms())
        self._sync_high_watermark()
        self._notify()
        return AppendResult(
            info.first_offset,
            info.last_offset,
            info.log_append_time,
            self.log.log_start_offset,
            info.num_records,
            False,
        )

    def _on_roll(self, new_base_offset: int) -> None:
        """Kafka snapshots the producer state at each new segment's base offset, before its first batch."""
        self._positions.clear()
        self._positions_segment = None
        try:
            self.producer_state.take_snapshot(new_base_offset)
        except OSError as exc:  # the data is in the log; a missing snapshot only lengthens recovery
            self._logger.warning("producer snapshot failed", offset=new_base_offset, error=str(exc))

    def _on_log_dir_full(self, exc: LogDirFullError) -> None:
        """The disk is full, not failed: the log is as before the append, so stay online for reads.

        Produce answers KAFKA_STORAGE_ERROR until space returns (a topic deleted, retention, an
        operator freeing space); the next append then simply succeeds. Logged once per episode.
        """
        if not self._log_dir_full:
            self._log_dir_full = True
            self._logger.error(
                "no space left in log dir: appends refused until space returns",
                log_dir=str(self.log.directory.parent),
                error=str(exc),
            )

    def storage_failed(self, exc: OSError) -> None:
        """An I/O error on this replica's log outside a request (the log cleaner installing a
        cleaned segment): the same offline path as a failed append (:meth:`_go_offline`)."""
        self._go_offline(exc)

    def _go_offline(self, exc: BaseException) -> None:
        """The replica's log failed (a failed write, an I/O error or a corrupt batch met while
        serving): refuse every later read and append with KAFKA_STORAGE_ERROR and hand the
        leadership to a healthy in-sync replica (:meth:`_resign`).

        Kafka takes the whole log directory offline and reports it in the broker heartbeat; kipling
        acts per replica, so the other partitions of the directory keep being served. One error
        line per partition, not one per request: once offline no request reaches the log again.
        """
        if self.is_offline:
            return
        if isinstance(exc, OutOfDescriptorsError):  # a shortage that passes: the log is intact
            self._logger.warning(
                "no file descriptor free: request refused, partition stays online", error=str(exc)
            )
            return
        self.is_offline = True
        self._logger.error("log failed, partition offline", error=str(exc), error_type=type(exc).__name__)
        self._resign()
        self._notify()

    def _resign(self) -> bool:
        """Propose an ISR without this broker: the controller elects another ISR member and bumps the
        leader epoch; True if proposed.

        A Kafka controller refuses an AlterPartition whose ISR leaves the leader out (INVALID_REQUEST);
        kipling's reads it as the leader giving the partition up
        (:meth:`metadata.controller.replication_control.ReplicationControl.alter_partition`). A
        proposal in flight is dropped: its answer is ignored, the resignation replaces it. With no
        other ISR member nobody else holds every committed record and leadership cannot move
        (unclean election stays off): the partition stays offline here, clients keep retrying. The
        periodic ISR check retries a refused or undelivered resignation. The repair comes with the
        metadata that makes this broker a follower: its damaged log is handed over for recovery
        (:func:`storage.handover.close_for_handover`).
        """
        replica_set = self._replica_set
        if not self.is_leader or self._alter_partition is None:
            return False
        others = tuple(replica for replica in replica_set.isr if replica != self.node_id)
        if not others:
            self._logger.warning(
                "no other in-sync replica: leadership cannot move", isr=list(replica_set.isr)
            )
            return False
        pending = replica_set.pending
        if pending is not None:
            if pending.new_isr == others:
                return False
            replica_set.clear_pending()
        self._logger.info("resigning leadership", isr=list(replica_set.isr), proposed_isr=list(others))
        self._propose(others)
        return True

    # -- reads -------------------------------------------------------------------------------------

    def check_leader_epoch(self, current_leader_epoch: int, *, require_leader: bool = True) -> ErrorCode:
        """Kafka's order: an offline log, then the request's CurrentLeaderEpoch, then leadership."""
        if self.is_offline:
            return ErrorCode.KAFKA_STORAGE_ERROR
        if current_leader_epoch != NO_LEADER_EPOCH:
            if current_leader_epoch < self.leader_epoch:
                return ErrorCode.FENCED_LEADER_EPOCH
            if current_leader_epoch > self.leader_epoch:
                return ErrorCode.UNKNOWN_LEADER_EPOCH
        if require_leader and not self.is_leader:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        return ErrorCode.NONE

    def end_offset_for(self, isolation_level: IsolationLevel, is_follower: bool) -> int:
        """What a reader may read up to (:func:`~broker.fetch.read_rules.visible_end_offset`)."""
        return visible_end_offset(self, isolation_level, is_follower)

    def read(
        self,
        fetch_offset: int,
        max_bytes: int,
        *,
        isolation_level: IsolationLevel,
        is_follower: bool,
        min_one_batch: bool,
        current_leader_epoch: int,
        last_fetched_epoch: int,
    ) -> PartitionRead:
        """Whole batches from the one holding ``fetch_offset``, bounded by what the reader may see.

        Never decodes records: the slice points into the segment file. A follower whose last
        fetched epoch diverges from this log gets a DivergingEpoch and no records (kafka-behaviour 6.6).
        """
        error = self.check_leader_epoch(current_leader_epoch)
        if error is not ErrorCode.NONE:
            return error_read(error)
        log = self.log
        empty = PartitionRead(
            ErrorCode.NONE,
            log.high_watermark,
            self.last_stable_offset,
            log.log_start_offset,
            None,
            0,
            None,
            log.log_end_offset,
        )
        answer = position_answer(self, empty, last_fetched_epoch, fetch_offset)
        if answer is not None:
            return answer
        max_offset = visible_end_offset(empty, isolation_level, is_follower)
        if fetch_offset >= max_offset:
            return empty
        bound = None if max_offset >= empty.log_end_offset else max_offset
        try:
            result = log.read(fetch_offset, max_bytes, bound, min_one_batch)
        except OffsetOutOfRangeError:
            return error_read(ErrorCode.OFFSET_OUT_OF_RANGE)
        except (OSError, KiplingStorageError) as exc:
            self._go_offline(exc)
            return error_read(ErrorCode.KAFKA_STORAGE_ERROR)
        if result.slice is None:
            return empty
        aborted: tuple[AbortedTxn, ...] = ()
        if isolation_level == IsolationLevel.READ_COMMITTED and not is_follower:
            aborted = tuple(log.collect_aborted_transactions(fetch_offset, max_offset))
        return empty._replace(
            slice=result.slice,
            records_size=result.slice.length,
            first_offset=result.first_offset,
            aborted_transactions=aborted,
        )

    # -- what a parked fetch checks ----------------------------------------------------------------

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """(largest epoch <= ``epoch``, its end offset) from the leader epoch cache; (-1, -1) if unknown."""
        found_epoch, end_offset = self.log.leader_epoch_cache.end_offset_for(epoch, self.log.log_end_offset)
        if end_offset == UNDEFINED_EPOCH_OFFSET:
            return NO_LEADER_EPOCH, UNDEFINED_EPOCH_OFFSET
        return found_epoch, end_offset

    def on_older_segment(self, offset: int, end_offset: int) -> bool:
        """True if ``offset`` lies on an older segment than ``end_offset``.

        O(1) when ``offset`` is on the active segment (the common case of a caught-up reader),
        otherwise O(segments) for the list of base offsets.
        """
        if offset >= self.log.active_segment.base_offset:
            return False
        bases = [segment.base_offset for segment in self.log.segments()]
        return bisect_right(bases, offset) < bisect_right(bases, end_offset)

    def bytes_available(self, fetch_offset: int, end_offset: int, max_bytes: int = 2**31 - 1) -> int:
        """Bytes of whole batches from the one holding ``fetch_offset`` up to ``end_offset``.

        Both offsets must lie on one segment. Cost: O(1) when the end is the segment's end (a
        single replica's HW is its LEO) and the fetch offset's position is cached (parked readers
        of a partition mostly wait at the same offset); otherwise an offset index binary search,
        O(log entries), plus a scan of at most ``index.interval.bytes`` of batch headers (one or two
        preads). No record is read.
        """
        if fetch_offset >= end_offset or self.is_offline:
            return 0
        segment = self._segment_for(fetch_offset)
        try:
            start = self._batch_position(segment, fetch_offset)
            if start is None:
                return 0
            end = (
                segment.size
                if end_offset >= segment.next_offset
                else self._batch_position(segment, end_offset)
            )
        except ProtocolError as exc:  # the parked fetch completes: the partition is offline now
            self._go_offline(self.log.mark_damaged(fetch_offset, exc))
            return 0
        except OSError as exc:
            self._go_offline(exc)
            return 0
        if end is None:
            end = segment.size
        return max(0, min(end - start, max_bytes))

    def _segment_for(self, offset: int) -> LogSegment:
        return self.log.segment_for(offset)

    def _batch_position(self, segment: LogSegment, offset: int) -> int | None:
        """Position of the batch holding ``offset``; cached for the active segment (positions never move)."""
        if segment is not self.log.active_segment:
            batch = segment.translate_offset(offset)
            return None if batch is None else batch.position
        if self._positions_segment is not segment or len(self._positions) >= _POSITION_CACHE_LIMIT:
            self._positions = {}
            self._positions_segment = segment
        position = self._positions.get(offset)
        if position is None:
            batch = segment.translate_offset(offset)
            if batch is None:
                return None
            position = self._positions[offset] = batch.position
        return position

    # -- offsets by time and by epoch --------------------------------------------------------------

    def offset_for_timestamp(
        self,
        timestamp: int,
        *,
        isolation_level: IsolationLevel | None,
        current_leader_epoch: int,
        require_leader: bool = True,
    ) -> TimestampAndOffset:
        """ListOffsets for one partition; raises KafkaError for the partition's error.

        ``isolation_level`` None (followers, the debug replica id) reads up to the LEO. "Latest"
        answers the last fetchable offset with this leader's epoch; earliest (local) answers the log
        start offset; anything else must be below the last fetchable offset, else "not found".
        """
        error = self.check_leader_epoch(current_leader_epoch, require_leader=require_leader)
        if error is not ErrorCode.NONE:
            raise KafkaError(error)
        last_fetchable = self.end_offset_for(
            IsolationLevel.READ_UNCOMMITTED if isolation_level is None else isolation_level,
            is_follower=isolation_level is None,  # followers and the debug replica id: up to the LEO
        )
        if timestamp == LATEST_TIMESTAMP:
            return TimestampAndOffset(NO_TIMESTAMP, last_fetchable, self.leader_epoch)
        if timestamp == LATEST_TIERED_TIMESTAMP:
            return NOT_FOUND  # no tiered storage: Kafka answers -1 with epoch -1
        try:
            found = self.log.offset_for_timestamp(timestamp)
        except (OSError, KiplingStorageError) as exc:
            self._go_offline(exc)
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, str(exc)) from None
        if found is None:
            return NOT_FOUND
        offset, found_timestamp, epoch = found
        if timestamp not in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP) and offset >= last_fetchable:
            return NOT_FOUND
        return TimestampAndOffset(found_timestamp, offset, epoch)

    def last_offset_for_leader_epoch(self, current_leader_epoch: int, leader_epoch: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch: (epoch, end offset), (-1, -1) when unknown; raises KafkaError."""
        error = self.check_leader_epoch(current_leader_epoch)
        if error is not ErrorCode.NONE:
            raise KafkaError(error)
        return self.end_offset_for_epoch(leader_epoch)

    # -- replication, leader side ----------------------------------------------------------------

    def update_follower_fetch(
        self,
        replica_id: int,
        fetch_offset: int,
        follower_log_start_offset: int,
        fetch_time_ms: int,
        leader_end_offset: int,
        broker_epoch: int = -1,
    ) -> bool:
        """A follower's fetch read this partition without error or diverging epoch (6.1).

        ``fetch_offset`` is the follower's LEO, ``leader_end_offset`` the leader's LEO read before
        the read, ``broker_epoch`` the request's ReplicaEpoch (-1 before fetch v15). Records the
        fetch, proposes the follower for the ISR if it caught up within this epoch (6.3), or out of
        it at once if it went back below the HW (it lost committed records), raises the HW if it
        can; True (and the listeners are told) if the HW moved. A fetch from a replica outside the
        assignment, or while not leader, changes nothing.
        """
        replica_set = self._replica_set
        if not self.is_leader or replica_id not in replica_set.followers:
            return False
        moved_start = replica_set.followers[replica_id].log_start_offset != follower_log_start_offset
        low_before = self.low_watermark if moved_start else None
        replica_set.update_follower_fetch(
            replica_id,
            fetch_offset,
            follower_log_start_offset,
            fetch_time_ms,
            broker_epoch,
            leader_end_offset=leader_end_offset,
        )
        if replica_set.followers[replica_id].lost_committed and replica_id in replica_set.isr:
            self.maybe_shrink_isr(fetch_time_ms)
        self._maybe_expand_isr(replica_id)
        if self._high_watermark_changed():
            return True
        if low_before is not None and self.low_watermark > low_before:
            self._notify()  # the low watermark rose: parked DeleteRecords re-check
        return False

    def update_idle_follower_fetch(self, replica_id: int, last_used_ms: int, cached_offset: int) -> bool:
        """A follower session held this partition idle (not dirty) up to its last use at ``last_used_ms``.

        The fetch session cache calls it once per idle stretch, when the stretch ends, so that the
        follower's last fetch and last caught-up times are what Kafka's per-fetch bookkeeping would
        have left (see :meth:`LeaderReplicaSet.mark_fetched_at_session_time`). True if the HW moved.
        """
        if not self.is_leader:
            return False
        self._replica_set.mark_fetched_at_session_time(replica_id, last_used_ms, cached_offset)
        return self._high_watermark_changed()

    def maybe_shrink_isr(self, now_ms: int | None = None) -> bool:
        """The "isr-expiration" check (6.4): propose removing followers that are out of sync.

        Out of sync: in the ISR, not at the leader's LEO, and not caught up within
        ``replica.lag.time.max.ms``. Nothing while a proposal is in flight, when not leader, or
        without an AlterPartition sender. True if a shrink was proposed. An offline partition
        proposes its resignation again instead (the last one was refused or not delivered).
        """
        if not self.is_leader or self._alter_partition is None:
            return False
        if self.is_offline:
            return self._replica_set.pending is None and self._resign()
        now = self._clock.time_ms() if now_ms is None else now_ms
        replica_set = self._replica_set
        out_of_sync = replica_set.shrink_candidates(now)
        if not out_of_sync:
            return False
        self._logger.info(
            "shrinking ISR",
            isr=list(replica_set.isr),
            out_of_sync=[self._follower_summary(rid) for rid in out_of_sync],
            high_watermark=replica_set.high_watermark,
            log_end_offset=replica_set.leader_log_end_offset,
        )
        self._propose(tuple(rid for rid in replica_set.isr if rid not in out_of_sync))
        return True

    def on_alter_partition_result(
        self,
        proposal: IsrProposal,
        error: ErrorCode,
        leader_epoch: int,
        isr: Sequence[int],
        partition_epoch: int,
    ) -> bool:
        """The controller's answer to ``proposal``; True if it was committed.

        A committed ISR replaces the old one (the HW may then move: a shrink unblocks it, an
        expansion may lift the min-ISR freeze), and a follower that caught up meanwhile is proposed
        next: on an idle partition no fetch would re-check it. A refusal, an answer for another
        leader epoch or one no newer than the ISR we hold clears the proposal and keeps the committed
        ISR; the follower's next fetch, or the periodic check, proposes again (never at once, which
        would loop at the controller's pace). An answer to anything but the proposal in flight
        (stale, or leadership lost meanwhile) is ignored.
        """
        replica_set = self._replica_set
        if not self.is_leader or replica_set.pending is not proposal:
            self._logger.debug("ignoring AlterPartition answer", proposal=proposal, error=error)
            return False
        now = self._clock.time_ms()
        if error == ErrorCode.NONE and leader_epoch != self.leader_epoch:
            replica_set.clear_pending()
            outcome = ProposalOutcome.IGNORED
        else:
            outcome = replica_set.apply_proposal_result(
                proposal, error, isr=isr, partition_epoch=partition_epoch, now_ms=now
            )
        self._logger.info(
            "AlterPartition answered",
            outcome=outcome.value,
            error=error.name,
            isr=list(replica_set.isr),
            partition_epoch=replica_set.partition_epoch,
        )
        committed = outcome is ProposalOutcome.COMMITTED
        if committed:
            self.maybe_expand_isr(now)
        if not self._high_watermark_changed() and committed:
            self._notify()  # a new ISR may change a consumer's preferred read replica (KIP-392)
        return committed

    def make_leader(
        self, leader_epoch: int, partition_epoch: int, replicas: Sequence[int], isr: Sequence[int]
    ) -> bool:
        """New metadata for this partition with this broker as its leader; True if anything changed.

        - an older partition (or leader) epoch is stale: ignored;
        - a new leader epoch, or leading again after following, is Kafka's makeLeader: the epoch
          cache gets (epoch, LEO), the HW then counts only offsets from there, and the followers'
          states are reset (6.4);
        - the same leader epoch with a newer partition epoch is an ISR or replica-set update
          (any proposal in flight is void: it was based on the old partition epoch).
        """
        replica_set = self._replica_set
        if partition_epoch < replica_set.partition_epoch or leader_epoch < self.leader_epoch:
            self._logger.debug(
                "ignoring stale leader metadata", leader_epoch=leader_epoch, partition_epoch=partition_epoch
            )
            return False
        now = self._clock.time_ms()
        if leader_epoch > self.leader_epoch or not self.is_leader:
            self._start_leader_epoch(leader_epoch, partition_epoch, replicas, isr, now)
        elif partition_epoch > replica_set.partition_epoch:
            replica_set.on_isr_changed(isr, partition_epoch, now, replicas=replicas)
            self.maybe_expand_isr(now)
        else:
            return False
        self._sync_high_watermark()
        self._notify()
        return True

    def make_follower(self, leader_epoch: int | None = None, partition_epoch: int | None = None) -> bool:
        """This broker no longer leads the partition; True if it did.

        Parked fetches and produces are told (they answer NOT_LEADER_OR_FOLLOWER, or a fenced epoch),
        later appends and leader reads are refused, and an AlterPartition answer still in flight is
        ignored. The newer epochs, if given, are recorded so that requests are fenced against them.
        """
        if leader_epoch is not None and leader_epoch > self.leader_epoch:
            self.leader_epoch = leader_epoch
        replica_set = self._replica_set
        if partition_epoch is not None and partition_epoch > replica_set.partition_epoch:
            replica_set.partition_epoch = partition_epoch
        if not self.is_leader:
            return False
        self.is_leader = False
        replica_set.clear_pending()
        self._logger.info("no longer leader", leader_epoch=self.leader_epoch)
        self._notify()
        return True

    def _start_leader_epoch(
        self, leader_epoch: int, partition_epoch: int, replicas: Sequence[int], isr: Sequence[int], now: int
    ) -> None:
        new_leader = not self.is_leader
        self.leader_epoch = leader_epoch
        self.is_leader = True
        self._assign_leader_epoch()
        self._replica_set.become_leader(
            leader_epoch=leader_epoch,
            leader_epoch_start_offset=self._leader_epoch_start_offset(),
            partition_epoch=partition_epoch,
            replicas=replicas,
            isr=isr,
            now_ms=now,
            new_leader=new_leader,
            leader_log_end_offset=self.log.log_end_offset,
            high_watermark=self.log.high_watermark,
        )
        self._replica_set.maybe_increment_high_watermark(now)
        self._logger.info(
            "leader epoch started",
            leader_epoch=leader_epoch,
            partition_epoch=partition_epoch,
            start_offset=self._replica_set.leader_epoch_start_offset,
            isr=list(isr),
            new_leader=new_leader,
        )

    def _maybe_expand_isr(self, replica_id: int) -> None:
        """6.3: propose ``replica_id`` for the ISR if it caught up within this epoch and may join."""
        if (
            self.is_offline
            or self._alter_partition is None
            or not self._replica_set.expansion_candidate(replica_id)
        ):
            return
        self._logger.info(
            "expanding ISR", isr=list(self._replica_set.isr), joining=self._follower_summary(replica_id)
        )
        self._propose((*self._replica_set.isr, replica_id))

    def maybe_expand_isr(self, now_ms: int | None = None) -> bool:
        """Propose a caught-up, eligible follower that is not in the ISR; True if one was proposed.

        Kafka re-checks expansion on every follower fetch. Here the partitions a follower session
        holds idle are not re-read, so this runs when an expansion is committed, when the ISR changes
        by metadata, and from the periodic ISR check (which retries refused proposals); call it too
        when a broker becomes eligible again (unfenced). One proposal at a time.
        """
        replica_set = self._replica_set
        if (
            not self.is_leader
            or self.is_offline
            or self._alter_partition is None
            or replica_set.pending is not None
        ):
            return False
        now = self._clock.time_ms() if now_ms is None else now_ms
        candidates = replica_set.expansion_candidates(now)
        if not candidates:
            return False
        self._maybe_expand_isr(candidates[0])
        return True

    def _propose(self, new_isr: tuple[int, ...]) -> None:
        """Put the proposal in flight, then hand it to the sender (which may answer at once).

        A sender that fails to take it must not leave it in flight forever (no ISR change could
        follow): it is dropped, and the next fetch or periodic check proposes again.
        """
        sender = self._alter_partition
        if sender is None:
            return
        proposal = self._replica_set.propose_isr(new_isr)
        try:
            sender.submit(self, proposal)
        except Exception:
            self._logger.exception("AlterPartition submit failed", new_isr=list(new_isr))
            if self._replica_set.pending is proposal:
                self._replica_set.clear_pending()

    def _high_watermark_changed(self) -> bool:
        """Carry a moved HW to the log and tell the listeners (delayed produces, fetches, sessions)."""
        if not self._sync_high_watermark():
            return False
        self._notify()
        return True

    def _follower_summary(self, replica_id: int) -> dict[str, int]:
        state = self._replica_set.followers[replica_id]
        return {
            "broker_id": replica_id,
            "log_end_offset": state.log_end_offset,
            "last_caught_up_time_ms": state.last_caught_up_time_ms,
        }

    # -- maintenance -------------------------------------------------------------------------------

    def after_retention(self) -> None:
        """Retention may have moved the log start offset: drop old snapshots, tell the listeners."""
        start = self.log.log_start_offset
        if start == self._known_log_start_offset:
            return
        self._known_log_start_offset = start
        self._positions.clear()
        self._positions_segment = None
        self.producer_state.delete_snapshots_before(start)
        self.producer_state.on_log_start_offset_incremented(start)
        self._notify()

    def delete_records(self, offset: int) -> tuple[int, int]:
        """DeleteRecords on the leader: raise the log start offset to ``offset`` (-1: the high
        watermark) and delete the segments wholly below it; returns (the offset asked for, the low
        watermark). Never backwards: an offset at or below the log start changes nothing. Raises
        KafkaError: KAFKA_STORAGE_ERROR, NOT_LEADER_OR_FOLLOWER, POLICY_VIOLATION (the topic's
        cleanup.policy lacks delete, as Kafka's ``Partition.deleteRecordsOnLeader``),
        OFFSET_OUT_OF_RANGE (negative or above the high watermark).
        """
        self._check_writable()
        if not self.log.config.delete:
            raise KafkaError(
                ErrorCode.POLICY_VIOLATION,
                f"Records of partition {self.topic}-{self.index} can not be deleted due to the "
                "configured policy",
            )
        requested = self.log.high_watermark if offset == DELETE_RECORDS_HIGH_WATERMARK else offset
        if requested < 0 or requested > self.log.high_watermark:
            raise KafkaError(
                ErrorCode.OFFSET_OUT_OF_RANGE,
                f"offset {requested} of {self.topic}-{self.index} is not in [0, {self.log.high_watermark}]",
            )
        try:
            self.log.maybe_increment_log_start_offset(requested)
            self.log.delete_segments_below_log_start()
        except (OSError, KiplingStorageError) as exc:
            self._go_offline(exc)
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, str(exc)) from None
        self.after_retention()
        return requested, self.low_watermark

    @property
    def low_watermark(self) -> int:
        """The lowest log start offset among this leader and its followers on live (eligible) brokers;
        a follower that has not fetched since this leadership began counts as -1 (as Kafka)."""
        low = self.log.log_start_offset
        replica_set = self._replica_set
        for state in replica_set.followers.values():
            if state.log_start_offset < low and replica_set.is_eligible(state.replica_id, state.broker_epoch):
                low = state.log_start_offset
        return low

    def remove_expired_producers(self, now_ms: int) -> list[int]:
        """Forget producers idle for producer.id.expiration.ms (Kafka checks every 10 minutes), and
        verifications started as long ago that never led to an append (Kafka expires them too)."""
        horizon = now_ms - self.producer_state.max_producer_id_expiration_ms
        for producer_id, guard in list(self._verification_guards.items()):
            if guard.started_ms <= horizon:
                del self._verification_guards[producer_id]
        return self.producer_state.remove_expired_producers(now_ms)

    def close(self) -> None:
        """Stop leading; a producer snapshot at the LEO spares the next start any replay."""
        self.is_leader = False
        self._replica_set.clear_pending()
        if not self.is_offline and self.producer_state.map_end_offset == self.log.log_end_offset:
            try:
                self.producer_state.take_snapshot()
            except OSError as exc:
                self._logger.warning("producer snapshot at close failed", error=str(exc))
        self._notify()

    def mark_removed(self) -> None:
        """The partition is going away (topic deleted): waiters re-check and find it gone."""
        self.is_leader = False
        self._replica_set.clear_pending()
        self._notify()

    def __repr__(self) -> str:
        return (
            f"Partition({self.topic}-{self.index}, epoch={self.leader_epoch}, hw={self.high_watermark}, "
            f"leo={self.log_end_offset}, start={self.log_start_offset})"
        )
