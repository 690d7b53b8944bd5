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
"""

from __future__ import annotations

import os
import pathlib
import struct
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple

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
from storage.cleaner.offset_map import OffsetMap
from storage.producer_state import ProducerStateEntry
from storage.segment import (
    CLEANED_SUFFIX,
    LOG_SUFFIX,
    MAX_RELATIVE_OFFSET,
    SWAP_SUFFIX,
    LogSegment,
    segment_file_name,
)
from storage.txn_index import TXN_INDEX_SUFFIX, AbortedTxn

if TYPE_CHECKING:
    from storage.log import PartitionLog

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


class CrashPoint(Exception):
    """Raised by a test's step hook to simulate a crash between two file operations."""


StepHook = Callable[[str], None]


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


def _batches(segment: LogSegment) -> Iterator[tuple[RecordBatchHeader, bytes, bool]]:
    """(header, bytes, is the segment's last batch) of each batch, one batch in memory at a time."""
    fd = segment.file.fileno()
    positions = list(segment.iter_batches(0))  # headers only
    for i, batch in enumerate(positions):
        data = os.pread(fd, batch.size, batch.position)
        yield read_header(data), data, i == len(positions) - 1


def build_offset_map(log: PartitionLog, start: int, end: int, offset_map: OffsetMap) -> None:
    """Fill ``offset_map`` from the keyed, non-aborted records in [start, end); stops when full."""
    offset_map.clear()
    dirty = [
        s for s in log.segments() if s.base_offset < end and (s.next_offset > start or s.base_offset >= start)
    ]
    txn = _TxnMetadata()
    txn.add_aborted(log.collect_aborted_transactions(start, end))
    for i, segment in enumerate(dirty):
        next_start = dirty[i + 1].base_offset if i + 1 < len(dirty) else end
        for header, data, _last in _batches(segment):
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
    segments: list[LogSegment], max_size: int, max_index_size: int, first_uncleanable_offset: int
) -> list[list[LogSegment]]:
    """Consecutive segments whose sum of .log sizes and index sizes fit one segment, within 2^31 offsets."""
    groups: list[list[LogSegment]] = []
    rest = list(segments)
    while rest:
        group = [rest.pop(0)]
        size = group[0].size
        index = group[0].offset_index.size_in_bytes
        time_index = group[0].time_index.size_in_bytes
        while rest:
            nxt = rest[0]
            last_offset = rest[1].base_offset - 1 if len(rest) > 1 else first_uncleanable_offset - 1
            fits = (
                size + nxt.size <= max_size
                and index + nxt.offset_index.size_in_bytes <= max_index_size
                and time_index + nxt.time_index.size_in_bytes <= max_index_size
                and (nxt.size == 0 or last_offset - group[-1].base_offset <= MAX_RELATIVE_OFFSET)
            )
            if not fits:
                break
            group.append(rest.pop(0))
            size += nxt.size
            index += nxt.offset_index.size_in_bytes
            time_index += nxt.time_index.size_in_bytes
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


def _clean_group(
    log: PartitionLog, group: list[LogSegment], state: _Round, hook: StepHook | None
) -> LogSegment:
    """Write the group's cleaned segment, swap it in for the group (see :mod:`.recovery`), return it."""
    directory = log.directory
    base = group[0].base_offset
    cleaned_log = directory / segment_file_name(base, LOG_SUFFIX + CLEANED_SUFFIX)
    cleaned_txn = directory / segment_file_name(base, TXN_INDEX_SUFFIX + CLEANED_SUFFIX)
    try:
        _write_cleaned(log, group, state, cleaned_log, cleaned_txn)
    except CrashPoint:
        raise
    except BaseException:
        cleaned_log.unlink(missing_ok=True)  # Kafka deletes the .cleaned segment of an aborted round
        cleaned_txn.unlink(missing_ok=True)
        raise
    mtime = group[-1].log_path.stat().st_mtime_ns
    os.utime(cleaned_log, ns=(mtime, mtime))
    fsync_directory(directory)
    _step(hook, "cleaned written")
    swap_log = directory / segment_file_name(base, LOG_SUFFIX + SWAP_SUFFIX)
    swap_txn = directory / segment_file_name(base, TXN_INDEX_SUFFIX + SWAP_SUFFIX)
    os.replace(cleaned_txn, swap_txn)
    _step(hook, "txnindex cleaned -> swap")
    os.replace(cleaned_log, swap_log)
    fsync_directory(directory)
    _step(hook, "log cleaned -> swap")
    now = log.clock.time_ms()
    for segment in group:
        # renamed to .deleted now, removed after file.delete.delay.ms (readers may hold slices)
        log._remove_segments([segment], now)
        _step(hook, f"segment {segment.base_offset} -> deleted")
    fsync_directory(directory)
    final_txn = directory / segment_file_name(base, TXN_INDEX_SUFFIX)
    os.replace(swap_txn, final_txn)
    _step(hook, "txnindex swap -> final")
    os.replace(swap_log, directory / segment_file_name(base, LOG_SUFFIX))
    fsync_directory(directory)
    _step(hook, "log swap -> final")
    if final_txn.stat().st_size == 0:
        final_txn.unlink()
    new = LogSegment(directory, base, log.config, created_ms=group[0].created_ms)
    new.recover()  # builds the offset and time indexes
    new.needs_recovery = False
    new.on_becoming_inactive()
    new.flush()
    os.utime(new.log_path, ns=(mtime, mtime))
    _install(log, group, new)
    return new


def _write_cleaned(
    log: PartitionLog,
    group: list[LogSegment],
    state: _Round,
    cleaned_log: pathlib.Path,
    cleaned_txn: pathlib.Path,
) -> None:
    """The retained batches of ``group`` into ``cleaned_log``, its aborted transactions into
    ``cleaned_txn`` (always written, empty when there are none); both fsynced."""
    state.txn.kept_aborted = []
    written_next = group[0].base_offset
    with open(cleaned_log, "wb") as out:
        for i, segment in enumerate(group):
            upper = group[i + 1].base_offset if i + 1 < len(group) else segment.next_offset
            state.txn.add_aborted(log.collect_aborted_transactions(segment.base_offset, upper))
            for header, data, last_of_segment in _batches(segment):
                state.result.bytes_read += len(data)
                last_of_group = i == len(group) - 1 and last_of_segment
                force = last_of_group and len(group) > 1 and written_next <= group[-1].base_offset
                output, _kept = _filter_batch(state, header, data, force)
                if output is not None:
                    out.write(output)
                    state.result.bytes_written += len(output)
                    written_next = header.next_offset
        out.flush()
        os.fsync(out.fileno())
    cleaned_txn.write_bytes(b"".join(txn.pack() for txn in state.txn.kept_aborted))
    _fsync_file(cleaned_txn)


def _install(log: PartitionLog, old: list[LogSegment], new: LogSegment) -> None:
    """Put ``new`` in place of ``old`` in the log's segment list.

    Kipling's PartitionLog has no replaceSegments yet; until it does, this and the call of its
    ``_remove_segments`` above are the places that reach into it (the handover makes the cleaner
    the log's only user meanwhile).
    """
    segments = log._segments
    bases = log._bases
    first = segments.index(old[0])
    segments[first : first + len(old)] = [new]
    bases[first : first + len(old)] = [new.base_offset]


# -- a round ---------------------------------------------------------------------------------------


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
    """Clean ``log`` from its start up to where the offset map reaches in [first dirty, first uncleanable).

    ``first_uncleanable_offset`` is rounded down to the base of the segment holding it (and never
    passes the active segment). ``active_producers`` is the producer state's last record per
    producer id (``UnifiedLog.lastRecordsOfActiveProducers``). ``step_hook`` is called after each
    file operation of a swap (tests raise :class:`CrashPoint` there).
    """
    segments = log.segments()
    upper = min(first_uncleanable_offset, segments[-1].base_offset)
    upper = (
        max(s.base_offset for s in segments if s.base_offset <= upper)
        if upper >= segments[0].base_offset
        else 0
    )
    offset_map = offset_map if offset_map is not None else OffsetMap()
    result = CleanResult(end_offset=first_dirty_offset)
    if first_dirty_offset >= upper:
        return result
    build_offset_map(log, first_dirty_offset, upper, offset_map)
    end = offset_map.latest_offset + 1
    result.end_offset = max(end, first_dirty_offset)
    state = _Round(
        offset_map, now_ms, delete_retention_ms, upper, active_producers or {}, _TxnMetadata(), result
    )
    to_clean = [s for s in log.segments() if s.base_offset < end]
    groups = group_segments_by_size(
        to_clean,
        max_segment_bytes if max_segment_bytes is not None else log.config.segment_bytes,
        max_index_size if max_index_size is not None else log.config.max_index_size,
        upper,
    )
    for group in groups:
        _clean_group(log, group, state, step_hook)
        result.segments_replaced.append([s.base_offset for s in group])
    return result
