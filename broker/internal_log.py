"""Reading back a partition of an internal topic (``__consumer_offsets``, ``__transaction_state``).

A coordinator that takes the lead of one of its partitions rebuilds its state from the partition's
records, up to the log end. :func:`read_partition` reads them a chunk at a time and yields to the
event loop between chunks, so a large partition does not stall the broker. Records without a key
are skipped (no coordinator writes them). Control batches come back as :class:`TxnMarkerEntry`
(``__consumer_offsets`` holds the markers of transactional offset commits); records of a
transactional batch carry its producer id.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from broker.replication.partition import Partition
from protocol.errors import CorruptRecordError
from protocol.records import iter_batches
from protocol.records.control import ControlRecordType, parse_control_record_key
from protocol.records.reader import iter_records

LOAD_CHUNK_BYTES = 1 << 20


@dataclass(frozen=True, slots=True)
class RecordEntry:
    offset: int
    key: bytes
    value: bytes | None
    producer_id: int | None
    """The producer of a transactional batch; None outside transactions."""


@dataclass(frozen=True, slots=True)
class TxnMarkerEntry:
    offset: int
    producer_id: int
    commit: bool


LogEntry = RecordEntry | TxnMarkerEntry


async def read_partition(partition: Partition) -> list[LogEntry]:
    """Every keyed record and transaction marker of the partition's log up to its end, in log order."""
    log = partition.log
    offset, end = log.log_start_offset, log.log_end_offset
    entries: list[LogEntry] = []
    while offset < end:
        result = log.read(offset, LOAD_CHUNK_BYTES)
        if result.slice is None:
            break
        data = memoryview(result.slice.read_bytes())
        advanced = False
        for position, header in iter_batches(data):
            if header.last_offset < offset:
                continue
            advanced = True
            offset = header.last_offset + 1
            batch = data[position : position + header.size]
            producer_id = header.producer_id if header.is_transactional else None
            for record in iter_records(batch):
                if record.offset >= end:
                    break
                if header.is_control:
                    marker = _marker(record.key, header.producer_id, record.offset)
                    if marker is not None:
                        entries.append(marker)
                elif record.key is not None:
                    entries.append(
                        RecordEntry(record.offset, bytes(record.key), _bytes(record.value), producer_id)
                    )
        if not advanced:
            break
        await asyncio.sleep(0)
    return entries


def _marker(key: bytes | memoryview | None, producer_id: int, offset: int) -> TxnMarkerEntry | None:
    try:
        control = parse_control_record_key(key)
    except CorruptRecordError:
        return None
    if control.type not in (ControlRecordType.COMMIT, ControlRecordType.ABORT):
        return None
    return TxnMarkerEntry(offset, producer_id, control.type == ControlRecordType.COMMIT)


def _bytes(value: bytes | memoryview | None) -> bytes | None:
    return None if value is None else bytes(value)
