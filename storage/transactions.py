"""Applying appended batches to a partition's transaction state: the one place that does it.

Every path that puts batches into a log (the leader's produce and WriteTxnMarkers appends, a
follower's appends, the replay that rebuilds the producer state) hands each batch, in log order, to
:func:`apply_batch`. It updates the producer state and, when a marker ends a transaction, records
an aborted one in the transaction index of the segment holding the marker, with the last stable
offset right after it, before counting the transaction as complete (Kafka's UnifiedLog.append:
``updateTxnIndex`` then ``completeTxn``).

The marker's type (ABORT or COMMIT) is in the control record's key, not in the batch header, so a
control batch must be read (:func:`read_end_txn_marker`; it holds one tiny record). Data batches
are applied from their headers alone.
"""

from __future__ import annotations

from protocol.records import RecordBatchHeader, iter_records, read_header
from protocol.records.control import ControlRecordType, parse_control_record_key, parse_end_txn_marker
from storage.log import PartitionLog
from storage.producer_state import CompletedTxn, ProducerStateManager, TxnMarker
from storage.txn_index import AbortedTxn

__all__ = ["TxnMarker", "apply_batch", "complete_transaction", "marker_of", "read_end_txn_marker"]

_MARKER_TYPES = (ControlRecordType.ABORT, ControlRecordType.COMMIT)


def read_end_txn_marker(
    batch: bytes | bytearray | memoryview, *, verify_crc: bool = True
) -> TxnMarker | None:
    """The transaction marker in ``batch`` (exactly one v2 batch), or None.

    None when the batch is not a control batch, holds no record (the cleaner emptied it), or its
    record is another control type. Raises a protocol error (CorruptRecordError) when the batch
    or its control record cannot be decoded.
    """
    header = read_header(batch)
    if not header.is_control or header.records_count == 0:
        return None
    for record in iter_records(memoryview(batch)[: header.size], verify_crc=verify_crc):
        key = parse_control_record_key(record.key)
        if key.type not in _MARKER_TYPES:
            return None
        value = parse_end_txn_marker(record.value)
        return TxnMarker(ControlRecordType(key.type), value.coordinator_epoch)
    return None


def apply_batch(
    log: PartitionLog,
    state: ProducerStateManager,
    header: RecordBatchHeader,
    first_offset: int,
    last_offset: int,
    marker: TxnMarker | None = None,
) -> CompletedTxn | None:
    """Apply one batch just written to ``log`` at [``first_offset``, ``last_offset``].

    ``marker`` is the control batch's marker (:func:`read_end_txn_marker`), None for data batches.
    Returns the transaction the marker ended, if any. A failed transaction index write raises
    KiplingStorageError (the partition must go offline) and leaves the transaction open, so that
    the last stable offset never passes aborted records missing from the index.
    """
    completed = state.update(header, first_offset, last_offset, marker=marker)
    if completed is not None:
        complete_transaction(log, state, completed)
    return completed


def complete_transaction(
    log: PartitionLog, state: ProducerStateManager, completed: CompletedTxn, *, skip_indexed: bool = False
) -> AbortedTxn | None:
    """Index ``completed`` if aborted, then mark it complete in ``state``; returns the entry.

    With ``skip_indexed`` (a replay over entries it could not drop first) an entry is not written
    when the marker's segment already indexes a marker at or after it.
    """
    aborted = None
    if completed.is_aborted:
        aborted = AbortedTxn(
            completed.producer_id,
            completed.first_offset,
            completed.last_offset,
            state.last_stable_offset_of(completed),
        )
        indexed = log.segment_for(completed.last_offset).txn_index.last_offset
        if not (skip_indexed and indexed is not None and indexed >= completed.last_offset):
            log.append_aborted_txn(aborted)
    state.complete_txn(completed)
    return aborted


def marker_of(batch: bytes | bytearray | memoryview, header: RecordBatchHeader) -> TxnMarker | None:
    """The marker of a control batch with a producer id (None otherwise), for appliers that hold
    the batch's bytes; ``batch`` starts with the batch (it may hold more after it)."""
    if not header.is_control or header.producer_id < 0 or header.records_count == 0:
        return None
    return read_end_txn_marker(memoryview(batch)[: header.size])
