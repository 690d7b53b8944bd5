"""A round reads each segment one batch at a time. It listed every batch's position of a
segment first, memory proportional to its batch count (a 1 GB segment of 100-byte batches: ten
million entries) on top of the offset map's log.cleaner.dedupe.buffer.size."""

from __future__ import annotations

import pathlib
import tracemalloc

import pytest

from storage.cleaner.cleaner import SegmentInfo, _batches
from tests.storage.cleaner.helpers import Writer, open_log

pytestmark = pytest.mark.timeout(60)


def test_reading_a_segment_holds_one_batch_at_a_time(tmp_path: pathlib.Path) -> None:
    log = open_log(tmp_path)
    w = Writer(log)
    for i in range(20_000):
        w.put([(b"k%d" % (i % 10), b"v")])
    segment = log.active_segment
    log.roll()
    info = SegmentInfo.of(segment)
    tracemalloc.start()
    try:
        count = 0
        lasts: list[int] = []  # indexes of the batches said to be the segment's last
        for _header, _data, last in _batches(log.directory, info):
            if last:
                lasts.append(count)
            count += 1
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert count == 20_000 and lasts == [19_999]
    assert peak < 500_000, f"{peak} bytes to read a segment of {count} batches"
    log.close()
