"""What a read_committed consumer leaves out: the batches of aborted transactions.

A read_committed Fetch answer carries, per partition, the aborted transactions that overlap the
records returned: (producer id, first offset) pairs from the broker's transaction index. The
consumer walks the batches in offset order, as Kafka's ``CompletedFetch`` does:

* before looking at a batch with a producer id, every aborted transaction whose first offset is at
  or below the batch's last offset becomes active for its producer;
* a transactional batch of a producer with an active aborted transaction is skipped;
* that producer's ABORT marker (a control batch) ends it, so the producer's later transactions are
  read again.

Control batches themselves are never records for the application. :class:`AbortedTransactionFilter`
is that walk; kipling's consumer, its CLI and the Spark source all use it.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable

from protocol.errors import CorruptRecordError
from protocol.records.batch import RecordBatchHeader
from protocol.records.control import ControlRecordType, parse_control_record_key
from protocol.records.reader import iter_records

__all__ = ["AbortedTransactionFilter"]


class AbortedTransactionFilter:
    """Decides, batch by batch in offset order, which batches a read_committed reader skips."""

    def __init__(self, aborted: Iterable[tuple[int, int]]) -> None:
        """``aborted``: (producer id, first offset) of the response's aborted transactions."""
        self._pending = [(first_offset, producer_id) for producer_id, first_offset in aborted]
        heapq.heapify(self._pending)
        self._aborted_producers: set[int] = set()

    def skip(self, header: RecordBatchHeader, batch: bytes | bytearray | memoryview) -> bool:
        """True if the batch holds no record for the application: a control batch, or a batch of
        an aborted transaction. ``batch`` holds exactly this batch (an ABORT marker is read from it)."""
        if header.has_producer_id:
            self._activate_up_to(header.last_offset)
            producer_id = header.producer_id
            if header.is_control:
                if _is_abort_marker(header, batch):
                    self._aborted_producers.discard(producer_id)
            elif header.is_transactional and producer_id in self._aborted_producers:
                return True
        return header.is_control

    def _activate_up_to(self, offset: int) -> None:
        pending = self._pending
        while pending and pending[0][0] <= offset:
            _, producer_id = heapq.heappop(pending)
            self._aborted_producers.add(producer_id)


def _is_abort_marker(header: RecordBatchHeader, batch: bytes | bytearray | memoryview) -> bool:
    if header.records_count == 0:
        return False
    try:
        for record in iter_records(memoryview(batch)[: header.size], verify_crc=False):
            return parse_control_record_key(record.key).type == ControlRecordType.ABORT
    except CorruptRecordError:
        return False
    return False
