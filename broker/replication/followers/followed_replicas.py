"""The partitions this broker follows, as its fetch path serves consumers from them (KIP-392).

Kafka's follower serves a consumer fetch (v11+, which carries client metadata) from its own log, up to
its own high watermark. Here a followed partition's files belong to a follower process
(DESIGN.md section 1), so the broker keeps, per followed partition, a :class:`FollowedReplica`:
the offsets the follower process last announced (``read_offsets`` events, sent after each of its
fetch rounds: follower/read_offsets.py) and a read-only view of the files
(:class:`~storage.read_view.LogReadView`), which it reads only below the announced high watermark
(last stable offset for read_committed). Why that is safe while another process writes the files is
in the docstrings of those two modules; in short: bytes below an announced high watermark never
change in place, the follower asks (``fence_reads``) and waits before it truncates below one, and
whole files that move are detected by the view.

Life of one: created when the follower supervisor hands the partition to a process (readable once
the process announces its offsets, which it does before answering), updated by every announcement
(one with a new segment generation, after the follower's retention, cleaner or a truncation changed
its segment files, makes the view drop the files it holds), lowered by a fence, dropped before the
partition is taken back (the broker leads it, or it is no longer a replica here, or its topic is
deleted), so no read runs on files another owner is about to open. A follower process that dies
leaves its files as they were: reads go on from the view until the restarted process announces
again (its logs count segment generations afresh, from values no earlier opening used).

A :class:`FollowedReplica` reads with Kafka's rules for a consumer on a follower
(``Partition.fetchRecords`` with ``fetchOnlyFromLeader = false``, ``UnifiedLog.read``):

- the request's CurrentLeaderEpoch against the partition's leader epoch in the metadata: smaller is
  FENCED_LEADER_EPOCH, larger UNKNOWN_LEADER_EPOCH;
- a LastFetchedEpoch that diverges from the follower's epoch cache: a DivergingEpoch (as on a leader);
- an offset below the log start offset or above the log end offset: OFFSET_OUT_OF_RANGE; from the
  high watermark (LSO for read_committed) up to the log end offset: no records and no error (Kafka's
  ``LocalLog.read`` answers an empty read there; OFFSET_NOT_AVAILABLE is a ListOffsets error only);
- otherwise whole batches below the high watermark (LSO), never past it, with the aborted
  transactions of the range for read_committed.

The fetch service calls :meth:`FollowedReplicas.add_listener`'s listeners when a replica's high
watermark, last stable offset, log start offset or readability changes, which marks it dirty in
fetch sessions and re-checks the fetches parked on it: a consumer parked on a follower is woken by
the follower's progress, never by polling. Log end offset moves alone wake nobody (a consumer does
not read past the high watermark).
"""

from __future__ import annotations

import pathlib
import uuid
from collections.abc import Callable, Hashable, Iterable

import structlog

from broker.fetch.read_rules import visible_end_offset
from broker.replication.partition import PartitionRead, error_read, position_answer
from client.replica_messages import ReadOffsets
from metadata.topics import PartitionState
from protocol.error_codes import ErrorCode
from protocol.sentinels import NO_LEADER_EPOCH, UNDEFINED_EPOCH_OFFSET, UNKNOWN_OFFSET, IsolationLevel
from storage.errors import OffsetOutOfRangeError, StorageError
from storage.file_pool import FilePool
from storage.read_view import LogChangedError, LogReadView

__all__ = ["FollowedReplica", "FollowedReplicas"]

_log = structlog.get_logger("kipling.followed_replicas")

TopicPartition = tuple[str, int]
PartitionStateLookup = Callable[[str, int], PartitionState | None]
ReplicaListener = Callable[["FollowedReplica"], None]


class FollowedReplica:
    """One followed partition as consumers read it here (see the module docstring)."""

    def __init__(
        self,
        topic: str,
        index: int,
        topic_id: uuid.UUID | None,
        view: LogReadView,
        *,
        node_id: int,
        partition_state: PartitionStateLookup,
    ) -> None:
        self.topic = topic
        self.index = index
        self.key: tuple[str, int] = (topic, index)
        """The purgatory key: the same as the led partition's, so a parked fetch survives a move."""
        self.topic_id = topic_id
        self.node_id = node_id
        self.view = view
        self._partition_state = partition_state
        self.offsets: ReadOffsets | None = None
        """What the follower process last announced (None: nothing yet, nothing readable)."""
        self.is_leader = False
        self._logger = _log.bind(topic=topic, partition=index)

    # -- what the follower process says ------------------------------------------------------------

    def announce(self, offsets: ReadOffsets) -> bool:
        """The follower process's latest offsets; True when what a consumer sees changed.

        A new segment generation (the follower removed, replaced or cut segment files: retention,
        the cleaner, a truncation) makes the view drop every descriptor and index it holds before
        any read under these offsets: held files of deleted segments would stay allocated, and the
        next read should see the files these offsets describe."""
        before = self.offsets
        self.offsets = offsets
        if before is not None and before.segment_generation != offsets.segment_generation:
            self.view.forget()
        self.view.note_active_segment(offsets.active_segment_base)
        return before is None or (
            before.high_watermark,
            before.last_stable_offset,
            before.log_start_offset,
        ) != (offsets.high_watermark, offsets.last_stable_offset, offsets.log_start_offset)

    def fence(self, offset: int) -> bool:
        """The follower is about to cut its log at ``offset``: read nothing at or above it from now
        on; True when what a consumer sees changed."""
        if self.offsets is None:
            return False
        fenced = self.offsets.fenced(offset)
        changed = fenced != self.offsets
        self.offsets = fenced
        if changed:  # positions and files known above the cut will not hold after it
            self.view.forget()
        return changed

    # -- state a read and a parked fetch look at ------------------------------------------------------

    @property
    def readable(self) -> bool:
        return self.offsets is not None and not self.view.closed

    @property
    def leader_epoch(self) -> int:
        state = self._partition_state(self.topic, self.index)
        return NO_LEADER_EPOCH if state is None else state.leader_epoch

    @property
    def is_offline(self) -> bool:
        return False

    @property
    def high_watermark(self) -> int:
        return UNKNOWN_OFFSET if self.offsets is None else self.offsets.high_watermark

    @property
    def last_stable_offset(self) -> int:
        return UNKNOWN_OFFSET if self.offsets is None else self.offsets.last_stable_offset

    @property
    def log_start_offset(self) -> int:
        return UNKNOWN_OFFSET if self.offsets is None else self.offsets.log_start_offset

    @property
    def log_end_offset(self) -> int:
        return UNKNOWN_OFFSET if self.offsets is None else self.offsets.log_end_offset

    def check_leader_epoch(self, current_leader_epoch: int) -> ErrorCode:
        """Kafka's ``localLogWithEpochOrThrow(epoch, fetchOnlyFromLeader = false)`` on a follower:
        the request's epoch against the metadata's, then whether this broker still replicates it."""
        state = self._partition_state(self.topic, self.index)
        if state is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        if current_leader_epoch != NO_LEADER_EPOCH:
            if current_leader_epoch < state.leader_epoch:
                return ErrorCode.FENCED_LEADER_EPOCH
            if current_leader_epoch > state.leader_epoch:
                return ErrorCode.UNKNOWN_LEADER_EPOCH
        if self.node_id not in state.replicas or not self.readable:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        return ErrorCode.NONE

    def end_offset_for(self, isolation_level: IsolationLevel, is_follower: bool) -> int:
        return visible_end_offset(self, isolation_level, is_follower)

    def on_older_segment(self, offset: int, end_offset: int) -> bool:
        return self.view.on_older_segment(offset, end_offset)

    def bytes_available(self, fetch_offset: int, end_offset: int, max_bytes: int = 2**31 - 1) -> int:
        if not self.readable or end_offset > self.high_watermark:
            return 0
        try:
            return self.view.bytes_available(fetch_offset, end_offset, max_bytes)
        except (OSError, StorageError) as exc:
            self._logger.warning("followed log not readable", error=repr(exc))
            return 0

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        if not self.readable:
            return NO_LEADER_EPOCH, UNDEFINED_EPOCH_OFFSET
        try:
            found, end_offset = self.view.end_offset_for_epoch(epoch, self.log_end_offset)
        except (OSError, StorageError) as exc:
            self._logger.warning("followed log's epochs not readable", error=repr(exc))
            return NO_LEADER_EPOCH, UNDEFINED_EPOCH_OFFSET
        if end_offset == UNDEFINED_EPOCH_OFFSET:
            return NO_LEADER_EPOCH, UNDEFINED_EPOCH_OFFSET
        return found, end_offset

    # -- the read -------------------------------------------------------------------------------------

    def read(
        self,
        fetch_offset: int,
        max_bytes: int,
        *,
        isolation_level: IsolationLevel,
        min_one_batch: bool,
        current_leader_epoch: int,
        last_fetched_epoch: int,
    ) -> PartitionRead:
        """A consumer's read of this follower's log (the rules of the module docstring)."""
        error = self.check_leader_epoch(current_leader_epoch)
        if error != ErrorCode.NONE:
            return error_read(error)
        offsets = self.offsets
        assert offsets is not None  # readable
        empty = PartitionRead(
            ErrorCode.NONE,
            offsets.high_watermark,
            offsets.last_stable_offset,
            offsets.log_start_offset,
            None,
            0,
            None,
            offsets.log_end_offset,
        )
        answer = position_answer(self, empty, last_fetched_epoch, fetch_offset)
        if answer is not None:
            return answer
        bound = visible_end_offset(empty, isolation_level, False)
        if fetch_offset >= bound:
            return empty
        try:
            found = self.view.read(
                fetch_offset,
                max_bytes,
                bound,
                min_one_batch=min_one_batch,
                with_aborted=isolation_level == IsolationLevel.READ_COMMITTED,
            )
        except OffsetOutOfRangeError:
            return error_read(ErrorCode.OFFSET_OUT_OF_RANGE)  # retention moved the start meanwhile
        except LogChangedError as exc:
            self._logger.info("followed log changed under a read; answering without records", error=str(exc))
            return empty
        except (OSError, StorageError) as exc:
            self._logger.warning("followed log not readable", error=repr(exc))
            return error_read(ErrorCode.KAFKA_STORAGE_ERROR)
        if not found.records:
            return empty
        return empty._replace(
            slice=found.records,
            records_size=len(found.records),
            first_offset=found.first_offset,
            aborted_transactions=found.aborted,  # read with the records, from the same files
        )

    def close(self) -> None:
        self.view.close()

    def __repr__(self) -> str:
        return f"FollowedReplica({self.topic}-{self.index}, offsets={self.offsets})"


class FollowedReplicas:
    """The :class:`FollowedReplica` of every partition a follower process of this broker owns."""

    def __init__(
        self,
        node_id: int,
        partition_state: PartitionStateLookup,
        topic_id_of: Callable[[str], uuid.UUID | None],
        *,
        pool: FilePool | None = None,
    ) -> None:
        """``partition_state`` and ``topic_id_of`` read the broker's metadata image."""
        self._node_id = node_id
        self._partition_state = partition_state
        self._topic_id_of = topic_id_of
        self._pool = pool
        self._replicas: dict[TopicPartition, FollowedReplica] = {}
        self._by_id: dict[tuple[uuid.UUID, int], FollowedReplica] = {}
        self._listeners: list[ReplicaListener] = []

    def add_listener(self, fn: ReplicaListener) -> None:
        """``fn(replica)`` after a change of what consumers of a followed partition may read."""
        self._listeners.append(fn)

    def _notify(self, replica: FollowedReplica) -> None:
        for listener in list(self._listeners):
            try:
                listener(replica)
            except Exception:
                _log.exception(
                    "followed replica listener failed", topic=replica.topic, partition=replica.index
                )

    # -- lookups ------------------------------------------------------------------------------------

    def get(self, topic: str, index: int) -> FollowedReplica | None:
        return self._replicas.get((topic, index))

    def get_by_id(self, topic_id: uuid.UUID, index: int) -> FollowedReplica | None:
        return self._by_id.get((topic_id, index))

    def get_by_key(self, key: Hashable) -> FollowedReplica | None:
        if not isinstance(key, tuple):
            return None
        return self._replicas.get(key)

    def __len__(self) -> int:
        return len(self._replicas)

    # -- the supervisor's calls ------------------------------------------------------------------------

    def follow(self, topic: str, index: int, topic_id: uuid.UUID | None, directory: str) -> None:
        """A follower process is given the partition's log in ``directory``: readable once it says."""
        tp = (topic, index)
        current = self._replicas.get(tp)
        if current is not None and current.view.directory == pathlib.Path(directory):
            return
        if current is not None:
            self.unfollow([tp])
        try:
            view = LogReadView(pathlib.Path(directory), pool=self._pool)
        except OSError as exc:
            _log.warning("cannot read a followed log", topic=topic, partition=index, error=repr(exc))
            return
        resolved = topic_id if topic_id is not None else self._topic_id_of(topic)
        replica = FollowedReplica(
            topic, index, resolved, view, node_id=self._node_id, partition_state=self._partition_state
        )
        self._replicas[tp] = replica
        if resolved is not None:
            self._by_id[(resolved, index)] = replica

    def unfollow(self, tps: Iterable[TopicPartition]) -> None:
        """The partitions are being taken back from their follower process: stop reading them now."""
        for tp in tps:
            replica = self._replicas.pop(tp, None)
            if replica is None:
                continue
            if replica.topic_id is not None:
                self._by_id.pop((replica.topic_id, tp[1]), None)
            replica.close()
            self._notify(replica)  # parked fetches re-check: the partition is gone from here

    def unfollow_all(self) -> None:
        self.unfollow(list(self._replicas))

    def on_read_offsets(self, rows: Iterable[object]) -> None:
        """A ``read_offsets`` event: update each replica and tell the listeners of visible changes."""
        for row in rows:
            offsets = ReadOffsets.from_row(row)
            replica = self._replicas.get((offsets.topic, offsets.partition))
            if replica is not None and replica.announce(offsets):
                self._notify(replica)

    def fence(self, topic: str, index: int, offset: int) -> None:
        """A ``fence_reads`` request: no read of the partition reaches ``offset`` once this returns."""
        replica = self._replicas.get((topic, index))
        if replica is not None and replica.fence(offset):
            _log.info(
                "reads of a followed partition fenced for a truncation",
                topic=topic,
                partition=index,
                offset=offset,
            )
            self._notify(replica)
