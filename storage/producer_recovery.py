"""Rebuilding a partition's idempotent-producer state from its snapshot and the log after it.

Kafka's ProducerStateManager recovery: load the newest snapshot at or below the log end offset,
then replay the headers of the batches written after it (producer id, epoch and sequences are all
in the 61-byte v2 header, so no record is decoded).
"""

from __future__ import annotations

from collections.abc import Iterator

import structlog

from protocol.records import ProtocolError
from protocol.records.batch import RecordBatchHeader
from storage.log import PartitionLog
from storage.producer_state import ProducerStateManager
from storage.segment import LogSegment, walk_headers

__all__ = ["iter_log_headers", "rebuild_producer_state"]

_REPLAY_CHUNK = 64 * 1024

_log = structlog.get_logger(__name__)


def rebuild_producer_state(log: PartitionLog, state: ProducerStateManager, now_ms: int) -> int:
    """Load the newest snapshot at or below the log end, replay the batch headers after it.

    Returns how many batches were replayed. After a clean shutdown the snapshot is at the log end
    and nothing is replayed; after a crash, at most the batches since the last segment roll. A
    damaged batch on the way raises CorruptLogError (see :func:`iter_log_headers`).
    """
    start = state.truncate_and_reload(log.log_start_offset, log.log_end_offset, now_ms=now_ms)
    replayed = 0
    for header in iter_log_headers(log, start):
        if header.last_offset < state.map_end_offset:
            continue
        state.update(header, header.base_offset, header.last_offset)
        replayed += 1
    state.update_map_end_offset(log.log_end_offset)
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
            position = 0
            if segment.base_offset < start_offset:
                first = segment.translate_offset(start_offset)
                if first is None:
                    continue
                position = first.position
            yield from _iter_segment_headers(segment, position)
        except ProtocolError as exc:
            raise log.mark_damaged(segment.base_offset, exc) from exc


def _iter_segment_headers(segment: LogSegment, position: int) -> Iterator[RecordBatchHeader]:
    """Full 61-byte headers (producer fields included), reading the .log in large chunks."""
    for _, header in walk_headers(segment.file.fileno(), position, segment.size, chunk_size=_REPLAY_CHUNK):
        yield header
