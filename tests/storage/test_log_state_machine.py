"""A PartitionLog driven by random interleavings of its operations, checked against a tiny model.

The model is the list of batches the log should hold (their offsets and exact bytes, stamped by the
model itself), plus the log start offset, log end offset and high watermark. After every step the
files on disk are compared with it, and every offset index is compared with a linear walk of its
.log. Crashes are simulated by copying the directory while the log is open (indexes untrimmed,
nothing fsynced), cutting the active .log at a random byte and reopening without the clean flag.
"""

from __future__ import annotations

import bisect
import pathlib
import shutil
import tempfile
from typing import NamedTuple

import pytest
from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from protocol.records import read_header, stamp_base_offset, stamp_partition_leader_epoch
from storage.clock import FakeClock
from storage.config import LogConfig
from storage.errors import OffsetOutOfRangeError, RecordBatchTooLargeError
from storage.log import PartitionLog
from tests.storage.log_helpers import (
    BASE_TIME,
    expected_index_entries,
    index_entries,
    make_batch,
    scan_file,
)

CONFIG = LogConfig(
    segment_bytes=2048,
    index_interval_bytes=150,
    max_index_size=4096,
    retention_ms=20_000,
    retention_bytes=5000,
    file_delete_delay_ms=5000,
)


class ModelBatch(NamedTuple):
    base: int
    last: int
    epoch: int
    data: bytes


batch_specs = st.lists(st.tuples(st.integers(1, 4), st.integers(0, 150)), min_size=1, max_size=3)


class PartitionLogMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.root = pathlib.Path(tempfile.mkdtemp(prefix="kipling-log-sm-"))
        self.generation = 0
        self.clock = FakeClock(BASE_TIME)
        self.log = PartitionLog.open(self._directory(), CONFIG, self.clock)
        self.batches: list[ModelBatch] = []
        self.log_start = self.log_end = self.high_watermark = 0
        self.epoch = 0

    def _directory(self) -> pathlib.Path:
        return self.root / f"gen{self.generation}" / "sm-topic-3"

    def teardown(self) -> None:
        self.log.close()
        shutil.rmtree(self.root, ignore_errors=True)

    # -- rules -------------------------------------------------------------------------------------

    @rule(specs=batch_specs, bump_epoch=st.booleans())
    def append(self, specs: list[tuple[int, int]], bump_epoch: bool) -> None:
        if bump_epoch:
            self.epoch += 1
        now = self.clock.time_ms()
        raw = [make_batch(n, size, now - 50 + i) for i, (n, size) in enumerate(specs)]
        payload = b"".join(raw)
        if len(payload) > CONFIG.segment_bytes:
            with pytest.raises(RecordBatchTooLargeError):
                self.log.append_as_leader(payload, self.epoch)
            return
        info = self.log.append_as_leader(payload, self.epoch)
        assert info.first_offset == self.log_end
        for batch in raw:
            stamped = bytearray(batch)
            stamp_base_offset(stamped, 0, self.log_end)
            stamp_partition_leader_epoch(stamped, 0, self.epoch)
            last = read_header(stamped).last_offset
            self.batches.append(ModelBatch(self.log_end, last, self.epoch, bytes(stamped)))
            self.log_end = last + 1
        assert info.last_offset == self.log_end - 1

    @rule(sizes=st.lists(st.integers(0, 200), min_size=3, max_size=12))
    def append_many(self, sizes: list[int]) -> None:
        """Grow the log quickly (one batch per call), so retention and multi-segment reads get work."""
        for size in sizes:
            self.append([(1 + size % 4, size)], bump_epoch=False)

    @rule()
    def commit_everything(self) -> None:
        """The replicas caught up: the high watermark reaches the log end offset."""
        self.high_watermark = self.log_end
        assert self.log.update_high_watermark(self.log_end) == self.log_end

    @rule()
    def roll(self) -> None:
        self.log.roll()

    @rule(ms=st.integers(0, 15_000))
    def advance_clock(self, ms: int) -> None:
        self.clock.advance(ms)

    @rule(delta=st.integers(-3, 40))
    def update_high_watermark(self, delta: int) -> None:
        target = self.high_watermark + delta
        self.high_watermark = min(max(target, self.log_start), self.log_end)
        assert self.log.update_high_watermark(target) == self.high_watermark

    @rule(data=st.data(), max_bytes=st.integers(0, 3000), bounded=st.booleans(), min_one=st.booleans())
    def read(self, data: st.DataObject, max_bytes: int, bounded: bool, min_one: bool) -> None:
        start = data.draw(st.integers(self.log_start - 2, self.log_end + 2), label="start")
        max_offset = self.high_watermark if bounded else None
        if start < self.log_start or start > self.log_end:
            with pytest.raises(OffsetOutOfRangeError):
                self.log.read(start, max_bytes, max_offset, min_one)
            return
        result = self.log.read(start, max_bytes, max_offset, min_one)
        expected = self._expected_read(start, max_bytes, max_offset, min_one)
        event(f"read returned {min(len(expected), 3)}+ batches")
        assert (result.log_start_offset, result.log_end_offset) == (self.log_start, self.log_end)
        if not expected:
            assert result.slice is None and result.first_offset is None
            return
        assert result.slice is not None
        assert result.first_offset == expected[0].base
        assert result.slice.read_bytes() == b"".join(batch.data for batch in expected)
        assert all(batch.last < max_offset for batch in expected if max_offset is not None)

    def _expected_read(
        self, start: int, max_bytes: int, max_offset: int | None, min_one: bool
    ) -> list[ModelBatch]:
        """Whole batches from the one holding ``start``, within one segment, below the bound."""
        following = [batch for batch in self.batches if batch.last >= start]
        if not following:
            return []
        bases = [segment.base_offset for segment in self.log.segments()]
        home = bisect.bisect_right(bases, following[0].base)
        same_segment = [b for b in following if bisect.bisect_right(bases, b.base) == home]
        taken: list[ModelBatch] = []
        total = 0
        for batch in same_segment:
            if (max_offset is not None and batch.last >= max_offset) or total + len(batch.data) > max_bytes:
                break
            taken.append(batch)
            total += len(batch.data)
        first = same_segment[0]
        if not taken and min_one and (max_offset is None or first.last < max_offset):
            taken = [first]
        return taken

    @rule(data=st.data())
    def truncate_to(self, data: st.DataObject) -> None:
        target = data.draw(st.integers(max(0, self.log_start - 3), self.log_end + 2), label="target")
        first_base = self.log.segments()[0].base_offset
        changed = self.log.truncate_to(target)
        event(f"truncate_to changed={changed} below_first={target < first_base}")
        assert changed == (target < self.log_end)
        if not changed:
            return
        if target < first_base:
            self.batches = []
            self.log_start = self.log_end = self.high_watermark = target
            return
        self.batches = [batch for batch in self.batches if batch.last < target]
        self.log_end = self.batches[-1].last + 1 if self.batches else first_base
        self.log_start = min(self.log_start, self.log_end)
        self.high_watermark = min(self.high_watermark, self.log_end)

    @precondition(lambda self: self.log_end < 10_000)
    @rule(jump=st.integers(0, 50))
    def truncate_fully_and_start_at(self, jump: int) -> None:
        offset = self.log_end + jump
        self.log.truncate_fully_and_start_at(offset)
        self.batches = []
        self.log_start = self.log_end = self.high_watermark = offset

    @rule(ms=st.integers(0, 25_000), commit_first=st.booleans())
    def retention(self, ms: int, commit_first: bool) -> None:
        if commit_first:
            self.commit_everything()
        self.clock.advance(ms)
        before = [(s.base_offset, s.next_offset) for s in self.log.segments()]
        deleted = self.log.delete_old_segments()
        event(f"retention deleted {min(deleted, 3)}+ segments")
        after = [s.base_offset for s in self.log.segments()]
        # only a prefix goes (a new empty segment may have been rolled at the end first)
        survivors = [base for base, _ in before[deleted:]]
        assert after[: len(survivors)] == survivors
        assert after[len(survivors) :] in ([], [self.log_end])
        for _, upper in before[:deleted]:
            assert upper <= self.high_watermark
        self.log_start = after[0]
        assert self.log.log_start_offset == self.log_start <= self.high_watermark
        self.batches = [batch for batch in self.batches if batch.base >= self.log_start]

    @rule()
    def clean_reopen(self) -> None:
        recovery_point, log_start = self.log.recovery_point, self.log.log_start_offset
        self.log.close()
        self.log = PartitionLog.open(
            self._directory(),
            CONFIG,
            self.clock,
            recovery_point=recovery_point,
            log_start_offset=log_start,
            clean_shutdown=True,
        )
        self.log.update_high_watermark(self.high_watermark)

    @rule(data=st.data())
    def crash(self, data: st.DataObject) -> None:
        recovery_point, log_start = self.log.recovery_point, self.log.log_start_offset
        active = self.log.segments()[-1]
        cut = data.draw(st.integers(0, active.size), label="cut")
        self.generation += 1
        shutil.copytree(self.log.directory, self._directory())
        self.log.close()
        (self._directory() / active.log_path.name).write_bytes(active.log_path.read_bytes()[:cut])
        shutil.rmtree(self.log.directory)
        self.log = PartitionLog.open(
            self._directory(), CONFIG, self.clock, recovery_point=recovery_point, log_start_offset=log_start
        )
        kept, position = [], 0
        for batch in self.batches:
            if batch.base >= active.base_offset:
                position += len(batch.data)
                if position > cut:
                    break
            kept.append(batch)
        event(f"crash lost {min(len(self.batches) - len(kept), 2)}+ batches")
        self.batches = kept
        self.log_end = (
            kept[-1].last + 1 if kept and kept[-1].base >= active.base_offset else active.base_offset
        )
        self.high_watermark = min(self.high_watermark, self.log_end)
        assert self.log.update_high_watermark(self.high_watermark) == self.high_watermark
        assert self.log.recovery_point == self.log_end

    # -- invariants --------------------------------------------------------------------------------

    @invariant()
    def offsets_match_the_model(self) -> None:
        log = self.log
        assert (log.log_start_offset, log.log_end_offset, log.high_watermark) == (
            self.log_start,
            self.log_end,
            self.high_watermark,
        )
        segments = log.segments()
        assert segments[0].base_offset == self.log_start
        assert segments[-1].next_offset == self.log_end
        bases = [segment.base_offset for segment in segments]
        assert bases == sorted(set(bases))
        assert all(segment.size <= CONFIG.segment_bytes for segment in segments)
        assert log.recovery_point <= self.log_end

    @invariant()
    def files_hold_exactly_the_model_batches(self) -> None:
        on_disk = b"".join(segment.log_path.read_bytes() for segment in self.log.segments())
        assert on_disk == b"".join(batch.data for batch in self.batches)

    @invariant()
    def indexes_agree_with_a_linear_scan(self) -> None:
        for segment in self.log.segments():
            scanned = scan_file(segment.log_path)
            assert index_entries(segment) == expected_index_entries(scanned, CONFIG.index_interval_bytes)
            for position, header in scanned:
                found = segment.translate_offset(header.last_offset)
                assert found is not None and found.position == position

    @invariant()
    def epoch_cache_covers_every_batch(self) -> None:
        cache = self.log.leader_epoch_cache
        starts = [entry.start_offset for entry in cache.entries()]
        assert starts == sorted(set(starts))
        assert all(self.log_start <= start <= self.log_end for start in starts)
        for batch in self.batches:
            assert cache.epoch_for_offset(batch.base) == batch.epoch


TestPartitionLogMachine = PartitionLogMachine.TestCase
TestPartitionLogMachine.settings = settings(
    max_examples=150,
    stateful_step_count=50,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
