"""Rebuilding a partition's producer and transaction state from its snapshot and the log after it.

Kafka's ProducerStateManager recovery: load the newest snapshot at or below the log end offset,
then replay the batches written after it through :func:`storage.transactions.apply_batch`. Data
batches are replayed from their headers (producer id, epoch and sequences are all in the 61-byte v2
header); a control batch is read whole (one tiny record) for its marker's type.

The replay also rebuilds the transaction indexes. When it starts from a snapshot at S (or from
offset 0), the state knows every transaction open at S, so the entries whose markers are at or
after S are dropped first and written again by the replay: a crash between a marker and its entry,
or a damaged index, neither loses nor duplicates one. Without a snapshot, from a log start above 0,
transactions that began before the log start are unknown: the entries are kept (only those past
the log end go) and the replay writes only the ones the indexes lack.
"""

from __future__ import annotations

from collections.abc import Iterator

import structlog

from protocol.records import ProtocolError
from protocol.records.batch import RecordBatchHeader
from storage.log import PartitionLog
from storage.producer_state import ProducerStateManager, TxnMarker
from storage.segment import LogSegment, walk_headers
from storage.transactions import complete_transaction, read_end_txn_marker

__all__ = ["iter_log_batches", "iter_log_headers", "rebuild_producer_state"]

_REPLAY_CHUNK = 64 * 1024

_log = structlog.get_logger(__name__)


def rebuild_producer_state(log: PartitionLog, state: ProducerStateManager, now_ms: int) -> int:
    """Load the newest snapshot at or below the log end, replay the batches after it.

    Returns how many batches were replayed. After a clean shutdown the snapshot is at the log end
    and nothing is replayed; after a crash, at most the batches since the last segment roll. A
    damaged batch on the way raises CorruptLogError (see :func:`iter_log_headers`). The
    transaction indexes are brought in line with the replay (see the module docstring).
    """
    start = state.truncate_and_reload(log.log_start_offset, log.log_end_offset, now_ms=now_ms)
    exact = start == 0 or start in state.snapshot_offsets()
    log.drop_aborted_txns_from(start if exact else log.log_end_offset)
    replayed = 0
    for header, marker in iter_log_batches(log, start):
        if header.last_offset < state.map_end_offset:
            continue
        completed = state.update(header, header.base_offset, header.last_offset, marker=marker)
        if completed is not None:
            complete_transaction(log, state, completed, skip_indexed=not exact)
        replayed += 1
    state.update_map_end_offset(log.log_end_offset)
    state.on_high_watermark_updated(log.high_watermark)
    if replayed:
        _log.info(
            "producer state rebuilt",
            topic=log.topic,
            partition=log.partition,
            from_offset=start,
            batches=replayed,
            producers=len(state.producers),
        )
    return replayed


def iter_log_batches(
    log: PartitionLog, start_offset: int
) -> Iterator[tuple[RecordBatchHeader, TxnMarker | None]]:
    """(header, marker) of every batch holding an offset >= ``start_offset``, in log order.

    The marker is read for control batches with a producer id (their one record: a pread of the
    batch), None for every other batch. Damage raises CorruptLogError as in
    :func:`iter_log_headers`.
    """
    for segment in log.segments():
        if segment.next_offset <= start_offset:
            continue
        try:
            for position, header in _segment_headers_from(segment, start_offset):
                marker = None
                if header.is_control and header.producer_id >= 0 and header.records_count > 0:
                    data = segment.file.pread(header.size, position)
                    marker = read_end_txn_marker(data)
                yield header, marker
        except ProtocolError as exc:
            raise log.mark_damaged(segment.base_offset, exc) from exc


def _segment_headers_from(segment: LogSegment, start_offset: int) -> Iterator[tuple[int, RecordBatchHeader]]:
    """(position, full 61-byte header) from the batch holding ``start_offset``, reading the .log in
    large chunks."""
    position = 0
    if segment.base_offset < start_offset:
        first = segment.translate_offset(start_offset)
        if first is None:
            return
        position = first.position
    yield from walk_headers(segment.file, position, segment.size, chunk_size=_REPLAY_CHUNK)


def iter_log_headers(log: PartitionLog, start_offset: int) -> Iterator[RecordBatchHeader]:
    """Headers of every batch holding an offset >= ``start_offset``, in log order.

    An impossible header (the log was damaged while closed: a clean load does not re-validate)
    raises CorruptLogError with the damaged segment recorded on the log
    (:meth:`PartitionLog.mark_damaged`), so whoever reopens it next recovers from there.
    """
    for segment in log.segments():
        if segment.next_offset <= start_offset:
            continue
        try:
            for _, header in _segment_headers_from(segment, start_offset):
                yield header
        except ProtocolError as exc:
            raise log.mark_damaged(segment.base_offset, exc) from exc
