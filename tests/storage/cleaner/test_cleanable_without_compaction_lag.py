"""Choosing the filthiest log runs on the owner's event loop for every compacted log at every
pass; without a max.compaction.lag.ms (Kafka's default, Long.MAX_VALUE) it must not read each dirty
segment's first batch, whose timestamp cannot matter then."""

from __future__ import annotations

import pathlib

import pytest

from storage.cleaner import cleanable_range
from storage.cleaner.cleanable import DEFAULT_MAX_COMPACTION_LAG_MS
from storage.segment import LogSegment
from tests.storage.cleaner.helpers import BASE_TIME, Writer, open_log

pytestmark = pytest.mark.timeout(30)


def test_no_segment_is_read_without_a_max_compaction_lag(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = open_log(tmp_path)
    w = Writer(log)
    for _ in range(3):
        w.put([(b"k", b"v")])
        log.roll()
    log.update_high_watermark(log.log_end_offset)

    def no_read(self: LogSegment, *args: object) -> object:
        raise AssertionError(f"segment {self.base_offset} read to choose a log")

    monkeypatch.setattr(LogSegment, "iter_batches", no_read)
    found = cleanable_range(
        log,
        BASE_TIME + 1000,
        last_clean_offset=None,
        last_stable_offset=log.high_watermark,
        max_compaction_lag_ms=DEFAULT_MAX_COMPACTION_LAG_MS,
    )
    assert found.should_clean and found.max_compaction_delay_ms == 0
    monkeypatch.undo()
    due = cleanable_range(
        log,
        BASE_TIME + 1000,
        last_clean_offset=None,
        last_stable_offset=log.high_watermark,
        max_compaction_lag_ms=500,
    )
    assert due.max_compaction_delay_ms == 500  # first batch at BASE_TIME, clean until BASE_TIME + 500
    log.close()
