"""Building compacted logs for the cleaner tests and reading them back record by record."""

from __future__ import annotations

import pathlib
from dataclasses import dataclass, field

from protocol.records import Record, build_batch
from protocol.records.batch import RecordBatchHeader, iter_batches, read_header
from protocol.records.compression import CompressionType
from protocol.records.control import build_end_txn_marker_batch
from protocol.records.reader import DecodedRecord, iter_records
from storage.clock import FakeClock
from storage.config import LogConfig
from storage.log import PartitionLog
from storage.txn_index import AbortedTxn

BASE_TIME = 1_700_000_000_000


def open_log(path: pathlib.Path, **config: int) -> PartitionLog:
    settings: dict[str, int] = {"segment_bytes": 10_000_000, "file_delete_delay_ms": 0}
    settings.update(config)
    return PartitionLog.open(path / "t-0", LogConfig(**settings), FakeClock(BASE_TIME))  # type: ignore[arg-type]


@dataclass(frozen=True)
class Entry:
    """One record as written (or a marker), in the model of the log."""

    offset: int
    key: bytes | None
    value: bytes | None
    producer_id: int = -1
    control: bool = False
    aborted: bool = False


@dataclass
class Writer:
    """Appends to a log and keeps the model of what was written."""

    log: PartitionLog
    entries: list[Entry] = field(default_factory=list)
    open_txns: dict[int, int] = field(default_factory=dict)
    """producer id -> first offset of its open transaction."""
    txn_records: dict[int, list[int]] = field(default_factory=dict)
    last_data_offset: dict[int, int] = field(default_factory=dict)

    def put(
        self,
        records: list[tuple[bytes | None, bytes | None]],
        *,
        producer_id: int = -1,
        codec: CompressionType = CompressionType.NONE,
        timestamp: int = BASE_TIME,
    ) -> int:
        transactional = producer_id >= 0
        batch = build_batch(
            [Record(value=v, key=k, timestamp=timestamp + i) for i, (k, v) in enumerate(records)],
            producer_id=producer_id,
            producer_epoch=0 if transactional else -1,
            base_sequence=0 if transactional else -1,
            is_transactional=transactional,
            compression=codec,
        )
        info = self.log.append_as_leader(batch, 0)
        for i, (k, v) in enumerate(records):
            self.entries.append(Entry(info.first_offset + i, k, v, producer_id))
        if transactional:
            self.open_txns.setdefault(producer_id, info.first_offset)
            self.txn_records.setdefault(producer_id, []).extend(
                range(info.first_offset, info.last_offset + 1)
            )
            self.last_data_offset[producer_id] = info.last_offset
        return info.first_offset

    def end_txn(self, producer_id: int, *, commit: bool) -> int:
        marker = build_end_txn_marker_batch(
            commit=commit, producer_id=producer_id, producer_epoch=0, coordinator_epoch=0, timestamp=BASE_TIME
        )
        info = self.log.append_as_leader(marker, 0)
        first = self.open_txns.pop(producer_id, None)
        offsets = set(self.txn_records.pop(producer_id, []))
        self.entries.append(Entry(info.first_offset, None, None, producer_id, control=True))
        if not commit:
            self.entries = [
                Entry(e.offset, e.key, e.value, e.producer_id, e.control, True) if e.offset in offsets else e
                for e in self.entries
            ]
            if first is not None:
                lso = min([*self.open_txns.values(), info.first_offset + 1])
                self.log.append_aborted_txn(AbortedTxn(producer_id, first, info.first_offset, lso))
        return info.first_offset

    @property
    def last_stable_offset(self) -> int:
        return min([*self.open_txns.values(), self.log.log_end_offset])


def read_batches(log: PartitionLog) -> list[tuple[RecordBatchHeader, list[DecodedRecord]]]:
    """Every batch of every segment with its records, straight from the files."""
    out = []
    for segment in log.segments():
        data = segment.file.pread(segment.size, 0)
        for pos, header in iter_batches(data):
            chunk = data[pos : pos + header.size]
            out.append((read_header(chunk), list(iter_records(chunk))))
    return out


def read_records(log: PartitionLog) -> list[tuple[int, bytes | None, bytes | None, bool]]:
    """(offset, key, value, is control) of every record in the log, in order."""
    return [
        (r.offset, r.key, r.value, header.is_control)
        for header, records in read_batches(log)
        for r in records
    ]
