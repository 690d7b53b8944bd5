"""Installing a cleaned segment must not scan it on the owner's event loop.

Kafka's cleaner appends to the cleaned segment (its offset and time indexes built as it goes) in
the cleaner thread; ``replaceSegments`` only renames. Kipling's install re-read and re-validated
the whole cleaned segment (``LogSegment.recover``: every batch's CRC, O(segment.bytes)) on the
broker's or follower's loop. The cleaner process now writes the indexes with the ``.cleaned`` log,
and the install opens the segment with them; they hold what a rebuild would.
"""

from __future__ import annotations

import pathlib

import pytest

from storage.cleaner import plan_clean, write_cleaned_segments
from storage.log import PartitionLog
from storage.segment import LogSegment
from tests.storage.cleaner.helpers import BASE_TIME, Writer, open_log, read_records

pytestmark = pytest.mark.timeout(60)


def build(path: pathlib.Path) -> tuple[PartitionLog, int]:
    log = open_log(path, index_interval_bytes=200)
    w = Writer(log)
    for segment in range(4):
        for i in range(120):
            w.put(
                [(b"k%d" % (i % 40), b"v%d-%d" % (segment, i) * 3)], timestamp=BASE_TIME + 1000 * segment + i
            )
        log.roll()
    w.put([(b"tail", b"x")])
    log.update_high_watermark(log.log_end_offset)
    return log, log.log_end_offset


def index_entries(segment: LogSegment) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    return (
        [segment.offset_index.entry(n) for n in range(segment.offset_index.entries)],
        [segment.time_index.entry(n) for n in range(segment.time_index.entries)],
    )


def test_install_opens_the_cleaned_segment_with_the_cleaners_indexes(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log, end = build(tmp_path)
    task = plan_clean(log, first_dirty_offset=0, first_uncleanable_offset=end, now_ms=BASE_TIME + 10_000)
    result = write_cleaned_segments(task)
    assert result.groups
    before = read_records(log)
    real_recover = LogSegment.recover

    def no_scan(self: LogSegment, *args: object, **kwargs: object) -> int:
        raise AssertionError(f"the install scanned segment {self.base_offset} on the owner's loop")

    monkeypatch.setattr(LogSegment, "recover", no_scan)
    installed = [log.replace_segments(g.replaced, token=result.token) for g in result.groups]
    monkeypatch.setattr(LogSegment, "recover", real_recover)
    assert all(segment is not None for segment in installed)
    assert not list(log.directory.glob("*.cleaned"))

    latest = {k: (o, v) for o, k, v, _ in before}
    assert {k: (o, v) for o, k, v, _ in read_records(log)} == latest
    for segment in installed:
        assert segment is not None and not segment.needs_recovery
        entries = index_entries(segment)
        assert entries[0], "an index with no entries: lookups scan the whole segment"
        largest = segment.largest_timestamp
        real_recover(segment)  # what the owner used to rebuild
        assert index_entries(segment) == entries and segment.largest_timestamp == largest
    # lookups through the new indexes: record o was written at BASE_TIME + 1000 * (o // 120) + o % 120
    retained = [o for o, _k, _v, _c in read_records(log)]
    for offset in retained:
        found = log.read(offset, 1)
        assert found.first_offset is not None and found.first_offset <= offset
    hit = log.offset_for_timestamp(BASE_TIME + 3000)
    assert hit is not None and hit[0] == min(o for o in retained if o >= 360)
    after = read_records(log)
    log.close()
    reopened = PartitionLog.open(log.directory, log.config, log.clock)
    assert read_records(reopened) == after
    reopened.close()
