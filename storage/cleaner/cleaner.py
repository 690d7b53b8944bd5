"""One cleaning round of a compacted log (Kafka's ``Cleaner.doClean``), synchronous.

Rules (Kafka 4, ``core/src/main/scala/kafka/log/LogCleaner.scala`` and ``MemoryRecords.filterTo``):

- **Offset map** (``buildOffsetMap``): the records with a key in [first dirty, first uncleanable)
  outside aborted transactions, key -> latest offset. A full map stops the round at its latest
  offset; everything after it waits (``end_offset = map.latest_offset + 1``).
- **Which segments**: every segment below ``end_offset`` (the clean head too, so that old values and
  expired tombstones there go), grouped by ``segment.bytes`` and index size, a group never spanning
  more than 2^31 offsets (``groupSegmentsBySize``). Each group becomes one new segment at the
  group's base offset. Nothing at or above the first uncleanable offset (rounded down to a segment
  base) is read or written.
- **Records** (``shouldRetainRecord``): a record past the map's latest offset is kept; a record
  without a key is dropped (Kafka counts it as invalid); otherwise it is kept when its offset is
  >= the map's offset for its key and it has a value, or it is a tombstone whose batch has no
  delete horizon yet or whose horizon is still in the future.
- **Delete horizon (KIP-534)**: the first cleaning that keeps a tombstone, or a marker whose
  transaction has no data left, rewrites the batch with attribute bit 6 set and BaseTimestamp =
  ``now + delete.retention.ms``; a later cleaning at or after that time drops the tombstones, and
  the marker batch (``checkBatchRetention``). Record timestamps are re-based on the horizon.
- **Transactions** (``CleanedTransactionMetadata``): batches of aborted transactions (from the
  transaction indexes) lose all their records; an ABORT marker is kept while any batch of its
  transaction was seen in this round (and its entry goes to the new segment's transaction index),
  a COMMIT marker while any batch of its transaction was seen; once removable a marker gets its
  delete horizon, and goes when the horizon passed.
- **Batches**: offsets never change; a rewritten batch keeps its base offset, last offset delta,
  producer id/epoch, base sequence, partition leader epoch, timestamp type, transactional/control
  flags and codec (recompressed with it). A batch that keeps no record is dropped, except that an
  empty batch (header only) is kept for the last batch of each active producer (its last data
  offset, or its marker when the producer's last entry is a marker) and for the batch ending at the
  round's upper bound (``BatchRetention.RETAIN_EMPTY``). Kipling also keeps the last batch of a
  group empty when nothing after the group's last segment base would survive, so that crash
  recovery can tell which segments a swapped-in segment replaces (see :mod:`.recovery`).
- A batch whose records all stay and needs no horizon is copied byte for byte.

A round has two halves so that the expensive one can run in another process (the cleaner process,
``cleaner/``) while the log's owner keeps appending: :func:`write_cleaned_segments` reads only
inactive segments (immutable) through their files and writes fsynced ``.cleaned`` files described by
a :class:`CleanTask` (plain data the owner builds with :func:`plan_clean`); the owner then installs
each :class:`CleanedGroup` with :meth:`PartitionLog.replace_segments`, which refuses a group whose
segments changed meanwhile. :func:`clean_log` runs both halves in one process (tests, tools).
"""

from __future__ import annotations

import os
import pathlib
import struct
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

from crc32c import crc32c

from protocol.records.batch import (
    COMPRESSION_MASK,
    CURRENT_MAGIC,
    DELETE_HORIZON_MASK,
    LOG_OVERHEAD,
    RecordBatchHeader,
    read_header,
)
from protocol.records.builder import Record, encode_record
from protocol.records.compression import compress
from protocol.records.control import ControlRecordType, parse_control_record_key
from protocol.records.reader import DecodedRecord, iter_records
from protocol.sentinels import NO_TIMESTAMP
from storage.checkpoint import fsync_directory
from storage.cleaner.files import cleaned_file_name
from storage.cleaner.offset_map import OffsetMap
from storage.cleaner.throttler import Throttler
from storage.index import OffsetIndex, TimeIndex
from storage.producer_state import ProducerStateEntry
from storage.segment import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    MAX_RELATIVE_OFFSET,
    TIME_INDEX_SUFFIX,
    segment_file_name,
    walk_batches,
)
from storage.txn_index import TXN_INDEX_SUFFIX, AbortedTxn

if TYPE_CHECKING:
    from storage.log import PartitionLog
    from storage.segment import LogSegment

DEFAULT_DELETE_RETENTION_MS = 86_400_000
_HEAD = struct.Struct(">qiib")
_AFTER_CRC = struct.Struct(">hiqqqhii")
_UINT32 = struct.Struct(">I")


class LastRecord(NamedTuple):
    """What the producer state knows of an active producer (Kafka's ``LastRecord``)."""

    last_data_offset: int | None
    producer_epoch: int


@dataclass(slots=True)
class CleanResult:
    """What one round did. ``end_offset`` is the new first dirty offset (the checkpoint's value)."""

    end_offset: int
    bytes_read: int = 0
    bytes_written: int = 0
    records_read: int = 0
    records_kept: int = 0
    records_removed: int = 0
    invalid_records: int = 0
    segments_replaced: list[list[int]] = field(default_factory=list)
    """Base offsets of each replaced group (the new segment takes the first one)."""
    groups: list[CleanedGroup] = field(default_factory=list)
    """The groups written as ``.cleaned`` files, for the owner to install, oldest first."""
    map_utilization: float = 0.0
    """How full the offset map got (Kafka's max-buffer-utilization-percent, as a fraction)."""
    token: str = ""
    """The task's token: the owner installs ``.cleaned`` files of that name."""

    def to_json(self) -> dict[str, Any]:
        return {
            "token": self.token,
            "end_offset": self.end_offset,
            "bytes_read": self.bytes_read,
            "bytes_written": self.bytes_written,
            "records_read": self.records_read,
            "records_kept": self.records_kept,
            "records_removed": self.records_removed,
            "invalid_records": self.invalid_records,
            "map_utilization": self.map_utilization,
            "groups": [group.to_json() for group in self.groups],
        }

    @classmethod
    def from_json(cls, body: Mapping[str, Any]) -> CleanResult:
        groups = [CleanedGroup.from_json(g) for g in body.get("groups", [])]
        return cls(
            end_offset=int(body["end_offset"]),
            bytes_read=int(body["bytes_read"]),
            bytes_written=int(body["bytes_written"]),
            records_read=int(body["records_read"]),
            records_kept=int(body["records_kept"]),
            records_removed=int(body["records_removed"]),
            invalid_records=int(body["invalid_records"]),
            segments_replaced=[[base for base, _ in g.replaced] for g in groups],
            groups=groups,
            map_utilization=float(body.get("map_utilization", 0.0)),
            token=str(body.get("token", "")),
        )


@dataclass(frozen=True, slots=True)
class SegmentInfo:
    """What the cleaner needs of one inactive segment, as its owner saw it."""

    base_offset: int
    size: int
    offset_index_bytes: int
    time_index_bytes: int

    @classmethod
    def of(cls, segment: LogSegment) -> SegmentInfo:
        return cls(
            segment.base_offset,
            segment.size,
            segment.offset_index.size_in_bytes,
            segment.time_index.size_in_bytes,
        )


@dataclass(frozen=True, slots=True)
class CleanedGroup:
    """One ``<base>.log.cleaned`` (and ``.txnindex.cleaned``) replacing ``replaced`` ((base, size) each)."""

    replaced: tuple[tuple[int, int], ...]

    @property
    def base_offset(self) -> int:
        return self.replaced[0][0]

    def to_json(self) -> list[list[int]]:
        return [list(entry) for entry in self.replaced]

    @classmethod
    def from_json(cls, body: Sequence[Sequence[int]]) -> CleanedGroup:
        return cls(tuple((int(base), int(size)) for base, size in body))


@dataclass(frozen=True, slots=True)
class CleanTask:
    """Everything a cleaning round needs, as plain data the owner of the log builds (:func:`plan_clean`).

    ``segments`` are the log's inactive segments below ``upper_bound`` (a segment base, at most the
    active segment's); ``aborted`` the aborted transactions overlapping them; ``active_producers``
    the producer state's last record per producer.
    """

    directory: str
    segments: tuple[SegmentInfo, ...]
    first_dirty_offset: int
    upper_bound: int
    now_ms: int
    delete_retention_ms: int
    max_segment_bytes: int
    max_index_size: int
    aborted: tuple[AbortedTxn, ...] = ()
    active_producers: Mapping[int, LastRecord] = field(default_factory=dict)
    token: str = ""
    """Names the round's ``.cleaned`` files (:func:`storage.cleaner.files.cleaned_file_name`)."""
    index_interval_bytes: int = 4096
    """The log's index.interval.bytes: the cleaner writes each cleaned segment's offset and time
    indexes, so that installing it costs its owner no scan of the segment (Kafka's cleaner builds
    them as it appends to the cleaned segment)."""

    def to_json(self) -> dict[str, Any]:
        return {
            "token": self.token,
            "index_interval_bytes": self.index_interval_bytes,
            "directory": self.directory,
            "segments": [
                [s.base_offset, s.size, s.offset_index_bytes, s.time_index_bytes] for s in self.segments
            ],
            "first_dirty_offset": self.first_dirty_offset,
            "upper_bound": self.upper_bound,
            "now_ms": self.now_ms,
            "delete_retention_ms": self.delete_retention_ms,
            "max_segment_bytes": self.max_segment_bytes,
            "max_index_size": self.max_index_size,
            "aborted": [list(txn) for txn in self.aborted],
            "active_producers": [
                [pid, last.last_data_offset, last.producer_epoch]
                for pid, last in self.active_producers.items()
            ],
        }

    @classmethod
    def from_json(cls, body: Mapping[str, Any]) -> CleanTask:
        return cls(
            token=str(body.get("token", "")),
            index_interval_bytes=int(body.get("index_interval_bytes", 4096)),
            directory=str(body["directory"]),
            segments=tuple(SegmentInfo(*(int(v) for v in entry)) for entry in body["segments"]),
            first_dirty_offset=int(body["first_dirty_offset"]),
            upper_bound=int(body["upper_bound"]),
            now_ms=int(body["now_ms"]),
            delete_retention_ms=int(body["delete_retention_ms"]),
            max_segment_bytes=int(body["max_segment_bytes"]),
            max_index_size=int(body["max_index_size"]),
            aborted=tuple(AbortedTxn(*(int(v) for v in entry)) for entry in body["aborted"]),
            active_producers={
                int(pid): LastRecord(None if last is None else int(last), int(epoch))
                for pid, last, epoch in body["active_producers"]
            },
        )


class CrashPoint(Exception):
    """Raised by a test's step hook to simulate a crash between two file operations."""


class CleaningAborted(Exception):
    """Raised by a round's ``check_done`` to stop it (Kafka's LogCleaningAbortedException): the
    round's ``.cleaned`` files are removed and nothing is installed."""


StepHook = Callable[[str], None]
CheckDone = Callable[[], None]


# -- transactions ----------------------------------------------------------------------------------


class _TxnMetadata:
    """Aborted transactions met while walking batches in offset order (CleanedTransactionMetadata)."""

    def __init__(self) -> None:
        self._pending: list[AbortedTxn] = []
        self._seen: set[AbortedTxn] = set()
        self._ongoing_aborted: dict[int, tuple[AbortedTxn, bool]] = {}
        self._ongoing_committed: set[int] = set()
        self.kept_aborted: list[AbortedTxn] = []

    def add_aborted(self, aborted: list[AbortedTxn]) -> None:
        fresh = [txn for txn in aborted if txn not in self._seen]
        self._seen.update(fresh)
        self._pending = sorted(self._pending + fresh, key=lambda txn: txn.first_offset)

    def _consume_up_to(self, offset: int) -> None:
        while self._pending and self._pending[0].first_offset <= offset:
            txn = self._pending.pop(0)
            self._ongoing_aborted.setdefault(txn.producer_id, (txn, False))

    def on_batch(self, header: RecordBatchHeader) -> bool:
        """True when the data batch belongs to an aborted transaction."""
        self._consume_up_to(header.last_offset)
        if not header.is_transactional:
            return False
        ongoing = self._ongoing_aborted.get(header.producer_id)
        if ongoing is not None:
            self._ongoing_aborted[header.producer_id] = (ongoing[0], True)
            return True
        self._ongoing_committed.add(header.producer_id)
        return False

    def on_control(self, header: RecordBatchHeader, records: list[DecodedRecord]) -> bool:
        """True when the marker may be discarded (its transaction has no data in this round)."""
        self._consume_up_to(header.last_offset)
        if not records:
            return True  # an empty control batch was cleaned before
        kind = parse_control_record_key(records[0].key).type
        if kind == ControlRecordType.ABORT:
            ongoing = self._ongoing_aborted.pop(header.producer_id, None)
            if ongoing is not None and ongoing[1]:
                self.kept_aborted.append(ongoing[0])
                return False
            return True
        if kind == ControlRecordType.COMMIT:
            if header.producer_id in self._ongoing_committed:
                self._ongoing_committed.discard(header.producer_id)
                return False
            return True
        return False


# -- reading ---------------------------------------------------------------------------------------


def _batches(
    directory: pathlib.Path,
    segment: SegmentInfo,
    throttler: Throttler | None = None,
    check_done: CheckDone | None = None,
) -> Iterator[tuple[RecordBatchHeader, bytes, bool]]:
    """(header, bytes, is the segment's last batch) of each batch, one batch in memory at a time.

    Reads the file by name up to the size the owner reported: an inactive segment never changes,
    so this is safe while the owner appends to its active segment. A segment removed meanwhile
    (retention, truncation) fails the round with FileNotFoundError; its owner discards the rest.
    """
    fd = os.open(directory / segment_file_name(segment.base_offset, LOG_SUFFIX), os.O_RDONLY)
    try:
        # headers one chunk at a time: a list of every batch's position was O(batches) of memory
        for batch in walk_batches(fd, 0, segment.size):
            data = os.pread(fd, batch.size, batch.position)
            if len(data) != batch.size:
                raise FileNotFoundError(f"segment {segment.base_offset} of {directory} shrank while cleaned")
            if throttler is not None:
                throttler.maybe_throttle(len(data))
            if check_done is not None:
                check_done()  # Kafka's checkDone, before each batch
            yield read_header(data), data, batch.position + batch.size >= segment.size
    finally:
        os.close(fd)


def _overlapping(aborted: Sequence[AbortedTxn], start: int, end: int) -> list[AbortedTxn]:
    return [txn for txn in aborted if txn.last_offset >= start and txn.first_offset < end]


def build_offset_map(
    task: CleanTask,
    end: int,
    offset_map: OffsetMap,
    throttler: Throttler | None = None,
    check_done: CheckDone | None = None,
) -> None:
    """Fill ``offset_map`` from the keyed, non-aborted records in [first dirty, end); stops when full."""
    start = task.first_dirty_offset
    directory = pathlib.Path(task.directory)
    offset_map.clear()
    segments = list(task.segments)
    dirty = [
        (s, segments[i + 1].base_offset if i + 1 < len(segments) else task.upper_bound)
        for i, s in enumerate(segments)
        if s.base_offset < end
    ]
    dirty = [(s, nxt) for s, nxt in dirty if nxt > start or s.base_offset >= start]
    txn = _TxnMetadata()
    txn.add_aborted(_overlapping(task.aborted, start, end))
    for i, (segment, _) in enumerate(dirty):
        next_start = dirty[i + 1][0].base_offset if i + 1 < len(dirty) else end
        for header, data, _last in _batches(directory, segment, throttler, check_done):
            if header.last_offset < start:
                continue
            if header.base_offset >= end:
                break
            if header.is_control:
                txn.on_control(header, list(iter_records(data, verify_crc=False)))
            elif not txn.on_batch(header):
                for record in iter_records(data, verify_crc=False):
                    if record.key is not None and record.offset >= start:
                        if offset_map.full:
                            return
                        offset_map.put(record.key, record.offset)
            offset_map.update_latest_offset(header.last_offset)
        offset_map.update_latest_offset(next_start - 1)


# -- grouping --------------------------------------------------------------------------------------


def group_segments_by_size(
    segments: Sequence[SegmentInfo], max_size: int, max_index_size: int, first_uncleanable_offset: int
) -> list[list[SegmentInfo]]:
    """Consecutive segments whose sum of .log sizes and index sizes fit one segment, within 2^31 offsets."""
    groups: list[list[SegmentInfo]] = []
    rest = list(segments)
    while rest:
        group = [rest.pop(0)]
        size = group[0].size
        index = group[0].offset_index_bytes
        time_index = group[0].time_index_bytes
        while rest:
            nxt = rest[0]
            last_offset = rest[1].base_offset - 1 if len(rest) > 1 else first_uncleanable_offset - 1
            fits = (
                size + nxt.size <= max_size
                and index + nxt.offset_index_bytes <= max_index_size
                and time_index + nxt.time_index_bytes <= max_index_size
                and (nxt.size == 0 or last_offset - group[-1].base_offset <= MAX_RELATIVE_OFFSET)
            )
            if not fits:
                break
            group.append(rest.pop(0))
            size += nxt.size
            index += nxt.offset_index_bytes
            time_index += nxt.time_index_bytes
        groups.append(group)
    return groups


# -- rewriting batches -----------------------------------------------------------------------------


def _encode_batch(
    header: RecordBatchHeader, records: list[DecodedRecord], delete_horizon: int | None
) -> bytes:
    """A batch with ``header``'s identity (offsets, producer, flags, codec) holding ``records``."""
    attributes = header.attributes & ~DELETE_HORIZON_MASK
    if not records:
        attributes &= ~COMPRESSION_MASK  # as Kafka's writeEmptyHeader: no codec, no base timestamp
        base_ts, max_ts = NO_TIMESTAMP, header.max_timestamp
        payload = b""
    else:
        if delete_horizon is not None:
            attributes |= DELETE_HORIZON_MASK
            base_ts = delete_horizon
        else:
            base_ts = records[0].timestamp
        max_ts = header.max_timestamp if header.is_log_append_time else max(r.timestamp for r in records)
        raw = b"".join(
            encode_record(
                Record(r.value, r.key, r.headers, r.timestamp), r.offset - header.base_offset, base_ts
            )
            for r in records
        )
        codec = header.compression
        payload = compress(codec, raw) if codec else raw
    after_crc = (
        _AFTER_CRC.pack(
            attributes,
            header.last_offset_delta,
            base_ts,
            max_ts,
            header.producer_id,
            header.producer_epoch,
            header.base_sequence,
            len(records),
        )
        + payload
    )
    batch_length = len(after_crc) + 4 + 1 + 4  # PartitionLeaderEpoch, Magic, CRC
    head = _HEAD.pack(header.base_offset, batch_length, header.partition_leader_epoch, CURRENT_MAGIC)
    out = head + _UINT32.pack(crc32c(after_crc)) + after_crc
    assert len(out) == batch_length + LOG_OVERHEAD
    return out


@dataclass(slots=True)
class _Round:
    offset_map: OffsetMap
    now_ms: int
    delete_retention_ms: int
    upper_bound: int
    active_producers: Mapping[int, LastRecord]
    txn: _TxnMetadata
    result: CleanResult


def last_records_of_active_producers(producers: Mapping[int, ProducerStateEntry]) -> dict[int, LastRecord]:
    """``active_producers`` for :func:`clean_log` from a producer state (``ProducerStateManager.producers``):
    each producer's last data offset (None when it has no batch left) and epoch."""
    return {
        pid: LastRecord(entry.last_data_offset if entry.batch_metadata else None, entry.producer_epoch)
        for pid, entry in producers.items()
    }


def _is_last_of_producer(header: RecordBatchHeader, producers: Mapping[int, LastRecord]) -> bool:
    last = producers.get(header.producer_id)
    if last is None:
        return False
    if last.last_data_offset is not None:
        return header.last_offset == last.last_data_offset
    return header.is_control and header.producer_epoch == last.producer_epoch


def _horizon_passed(header: RecordBatchHeader, now_ms: int) -> bool:
    return header.has_delete_horizon and header.base_timestamp <= now_ms


def _keep_record(state: _Round, header: RecordBatchHeader, record: DecodedRecord) -> bool:
    if record.offset > state.offset_map.latest_offset:
        return True
    if record.key is None:
        state.result.invalid_records += 1
        return False
    if record.offset < state.offset_map.get(record.key):
        return False
    return record.value is not None or not _horizon_passed(header, state.now_ms)


def _filter_batch(
    state: _Round, header: RecordBatchHeader, data: bytes, force_keep_empty: bool
) -> tuple[bytes | None, int]:
    """The batch to write for one source batch (None: drop it) and how many records it keeps."""
    records = list(iter_records(data, verify_crc=False))
    state.result.records_read += len(records)
    if header.is_control:
        can_discard = state.txn.on_control(header, records)
        discard_records = can_discard and _horizon_passed(header, state.now_ms)
    else:
        can_discard = discard_records = state.txn.on_batch(header)
    marker_of_empty_txn = can_discard and header.is_control
    retain_empty = (
        (header.has_producer_id and _is_last_of_producer(header, state.active_producers))
        or header.next_offset == state.upper_bound
        or force_keep_empty
    )
    if discard_records:
        kept: list[DecodedRecord] = []
    elif header.is_control:
        kept = records
    else:
        kept = [r for r in records if _keep_record(state, header, r)]
    state.result.records_kept += len(kept)
    state.result.records_removed += len(records) - len(kept)
    if kept:
        tombstones = any(r.value is None for r in kept) and not header.is_control
        needs_horizon = (tombstones or marker_of_empty_txn) and not header.has_delete_horizon
        if len(kept) == len(records) and not needs_horizon:
            return data, len(kept)
        if needs_horizon:
            horizon: int | None = state.now_ms + state.delete_retention_ms
        else:
            horizon = header.base_timestamp if header.has_delete_horizon else None
        return _encode_batch(header, kept, horizon), len(kept)
    if retain_empty:
        return _encode_batch(header, [], None), 0
    return None, 0


# -- one group -------------------------------------------------------------------------------------


def _step(hook: StepHook | None, name: str) -> None:
    if hook is not None:
        hook(name)


def _fsync_file(path: pathlib.Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_group(
    task: CleanTask,
    group: list[SegmentInfo],
    upper: int,
    state: _Round,
    throttler: Throttler | None,
    hook: StepHook | None,
    check_done: CheckDone | None = None,
) -> CleanedGroup:
    """Write the group's cleaned segment as ``.cleaned`` files (fsynced, with the group's last mtime)."""
    directory = pathlib.Path(task.directory)
    base = group[0].base_offset
    cleaned_log = directory / cleaned_file_name(base, LOG_SUFFIX, task.token)
    cleaned_txn = directory / cleaned_file_name(base, TXN_INDEX_SUFFIX, task.token)
    try:
        _write_cleaned(task, group, upper, state, cleaned_log, cleaned_txn, throttler, check_done)
        _write_cleaned_indexes(task, base, cleaned_log)
        mtime = (directory / segment_file_name(group[-1].base_offset, LOG_SUFFIX)).stat().st_mtime_ns
    except CrashPoint:
        raise
    except BaseException:
        # Kafka deletes the .cleaned segment of an aborted round
        remove_cleaned_files(directory, CleanedGroup(((base, 0),)), task.token)
        raise
    os.utime(cleaned_log, ns=(mtime, mtime))
    fsync_directory(directory)
    _step(hook, "cleaned written")
    return CleanedGroup(tuple((s.base_offset, s.size) for s in group))


def _write_cleaned(
    task: CleanTask,
    group: list[SegmentInfo],
    upper: int,
    state: _Round,
    cleaned_log: pathlib.Path,
    cleaned_txn: pathlib.Path,
    throttler: Throttler | None,
    check_done: CheckDone | None = None,
) -> None:
    """The retained batches of ``group`` into ``cleaned_log``, its aborted transactions into
    ``cleaned_txn`` (always written, empty when there are none); both fsynced. ``upper`` is the
    base offset of the segment after the group (or the round's upper bound)."""
    directory = pathlib.Path(task.directory)
    state.txn.kept_aborted = []
    written_next = group[0].base_offset
    with open(cleaned_log, "wb") as out:
        for i, segment in enumerate(group):
            segment_upper = group[i + 1].base_offset if i + 1 < len(group) else upper
            state.txn.add_aborted(_overlapping(task.aborted, segment.base_offset, segment_upper))
            for header, data, last_of_segment in _batches(directory, segment, throttler, check_done):
                state.result.bytes_read += len(data)
                last_of_group = i == len(group) - 1 and last_of_segment
                force = last_of_group and len(group) > 1 and written_next <= group[-1].base_offset
                output, _kept = _filter_batch(state, header, data, force)
                if output is not None:
                    out.write(output)
                    state.result.bytes_written += len(output)
                    if throttler is not None:
                        throttler.maybe_throttle(len(output))
                    written_next = header.next_offset
        out.flush()
        os.fsync(out.fileno())
    cleaned_txn.write_bytes(b"".join(txn.pack() for txn in state.txn.kept_aborted))
    _fsync_file(cleaned_txn)


def _write_cleaned_indexes(task: CleanTask, base: int, cleaned_log: pathlib.Path) -> None:
    """``<base>.index`` and ``<base>.timeindex`` of the cleaned segment as ``.cleaned`` files, fsynced.

    The entries a :class:`~storage.segment.LogSegment` appending these batches would have made
    (an entry past index.interval.bytes, the final time entry, trimmed), so the owner opens the
    installed segment with them instead of re-reading and re-validating the whole file on its loop.
    """
    directory = pathlib.Path(task.directory)
    offset_index = OffsetIndex(
        directory / cleaned_file_name(base, INDEX_SUFFIX, task.token), base, task.max_index_size
    )
    try:
        time_index = TimeIndex(
            directory / cleaned_file_name(base, TIME_INDEX_SUFFIX, task.token), base, task.max_index_size
        )
    except BaseException:
        offset_index.close()
        raise
    try:
        max_timestamp, offset_of_max = NO_TIMESTAMP, base
        since_last_entry = 0
        fd = os.open(cleaned_log, os.O_RDONLY)
        try:
            for batch in walk_batches(fd, 0, os.fstat(fd).st_size):
                if batch.max_timestamp > max_timestamp:
                    max_timestamp, offset_of_max = batch.max_timestamp, batch.last_offset
                full = offset_index.is_full or time_index.is_full
                if since_last_entry > task.index_interval_bytes and not full:
                    offset_index.append(batch.last_offset, batch.position)
                    time_index.maybe_append(max_timestamp, offset_of_max)
                    since_last_entry = 0
                since_last_entry += batch.size
        finally:
            os.close(fd)
        if max_timestamp >= 0:
            time_index.maybe_append(max_timestamp, offset_of_max, skip_full_check=True)
        offset_index.trim_to_valid_size()
        time_index.trim_to_valid_size()
        offset_index.flush()
        time_index.flush()
    finally:
        offset_index.close()
        time_index.close()


_CLEANED_SUFFIXES = (LOG_SUFFIX, TXN_INDEX_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX)


def remove_cleaned_files(directory: pathlib.Path, group: CleanedGroup, token: str = "") -> None:
    """Drop a group's ``.cleaned`` files (its install was refused, or the round failed)."""
    for suffix in _CLEANED_SUFFIXES:
        (directory / cleaned_file_name(group.base_offset, suffix, token)).unlink(missing_ok=True)


# -- a round ---------------------------------------------------------------------------------------


def plan_clean(
    log: PartitionLog,
    *,
    first_dirty_offset: int,
    first_uncleanable_offset: int,
    now_ms: int,
    delete_retention_ms: int = DEFAULT_DELETE_RETENTION_MS,
    active_producers: Mapping[int, LastRecord] | None = None,
    max_segment_bytes: int | None = None,
    max_index_size: int | None = None,
    token: str | None = None,
) -> CleanTask:
    """The owner's half before a round: the task for ``log`` as it is now.

    ``first_uncleanable_offset`` is rounded down to the base of the segment holding it (and never
    passes the active segment), so only inactive, immutable segments are in the task.
    """
    segments = log.segments()
    upper = min(first_uncleanable_offset, segments[-1].base_offset)
    upper = (
        max(s.base_offset for s in segments if s.base_offset <= upper)
        if upper >= segments[0].base_offset
        else 0
    )
    inactive = [s for s in segments if s.base_offset < upper]
    start = inactive[0].base_offset if inactive else upper
    return CleanTask(
        directory=str(log.directory),
        segments=tuple(SegmentInfo.of(s) for s in inactive),
        first_dirty_offset=first_dirty_offset,
        upper_bound=upper,
        now_ms=now_ms,
        delete_retention_ms=delete_retention_ms,
        max_segment_bytes=max_segment_bytes if max_segment_bytes is not None else log.config.segment_bytes,
        max_index_size=max_index_size if max_index_size is not None else log.config.max_index_size,
        index_interval_bytes=log.config.index_interval_bytes,
        aborted=tuple(log.collect_aborted_transactions(start, upper)) if inactive else (),
        active_producers=dict(active_producers or {}),
        token=uuid.uuid4().hex[:8] if token is None else token,
    )


def write_cleaned_segments(
    task: CleanTask,
    *,
    offset_map: OffsetMap | None = None,
    throttler: Throttler | None = None,
    step_hook: StepHook | None = None,
    on_group: Callable[[CleanedGroup], None] | None = None,
    check_done: CheckDone | None = None,
) -> CleanResult:
    """The cleaner's half: build the offset map and write every group's ``.cleaned`` files.

    Reads only ``task``'s segments (inactive: immutable while the owner appends). ``on_group`` is
    called after each group is written (the in-process :func:`clean_log` installs it there). A
    failure removes the ``.cleaned`` files of the groups written so far and raises.
    """
    offset_map = offset_map if offset_map is not None else OffsetMap()
    result = CleanResult(end_offset=task.first_dirty_offset, token=task.token)
    if task.first_dirty_offset >= task.upper_bound or not task.segments:
        return result
    build_offset_map(task, task.upper_bound, offset_map, throttler, check_done)
    result.map_utilization = offset_map.utilization
    end = offset_map.latest_offset + 1
    result.end_offset = max(end, task.first_dirty_offset)
    state = _Round(
        offset_map,
        task.now_ms,
        task.delete_retention_ms,
        task.upper_bound,
        task.active_producers,
        _TxnMetadata(),
        result,
    )
    to_clean = [s for s in task.segments if s.base_offset < end]
    groups = group_segments_by_size(to_clean, task.max_segment_bytes, task.max_index_size, task.upper_bound)
    directory = pathlib.Path(task.directory)
    bases = [s.base_offset for s in task.segments]
    try:
        for group in groups:
            after = bases.index(group[-1].base_offset) + 1
            upper = bases[after] if after < len(bases) else task.upper_bound
            cleaned = _write_group(task, group, upper, state, throttler, step_hook, check_done)
            result.groups.append(cleaned)
            result.segments_replaced.append([s.base_offset for s in group])
            if on_group is not None:
                on_group(cleaned)
    except CrashPoint:
        raise
    except BaseException:
        if on_group is None:
            for cleaned in result.groups:
                remove_cleaned_files(directory, cleaned, task.token)
        raise
    return result


def clean_log(
    log: PartitionLog,
    *,
    first_dirty_offset: int,
    first_uncleanable_offset: int,
    now_ms: int,
    delete_retention_ms: int = DEFAULT_DELETE_RETENTION_MS,
    offset_map: OffsetMap | None = None,
    active_producers: Mapping[int, LastRecord] | None = None,
    max_segment_bytes: int | None = None,
    max_index_size: int | None = None,
    step_hook: StepHook | None = None,
) -> CleanResult:
    """Clean ``log`` in this process: plan, write and install each group as soon as it is written.

    ``first_uncleanable_offset`` is rounded down to the base of the segment holding it (and never
    passes the active segment). ``active_producers`` is the producer state's last record per
    producer id (``UnifiedLog.lastRecordsOfActiveProducers``). ``step_hook`` is called after each
    file operation of a swap (tests raise :class:`CrashPoint` there).
    """
    task = plan_clean(
        log,
        first_dirty_offset=first_dirty_offset,
        first_uncleanable_offset=first_uncleanable_offset,
        now_ms=now_ms,
        delete_retention_ms=delete_retention_ms,
        active_producers=active_producers,
        max_segment_bytes=max_segment_bytes,
        max_index_size=max_index_size,
    )

    def install(group: CleanedGroup) -> None:
        if log.replace_segments(group.replaced, token=task.token, step_hook=step_hook) is None:
            raise RuntimeError(f"segments {group.replaced} of {log.directory} changed during cleaning")

    return write_cleaned_segments(task, offset_map=offset_map, step_hook=step_hook, on_group=install)
