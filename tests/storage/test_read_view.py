"""LogReadView: reading a log another owner writes, only below a bound, through rolls, retention,
truncation, cleaning and stale indexes; compared with the owner's own reads. Records and their
aborted transactions always come from the same segment files, whatever the cleaner replaced."""

from __future__ import annotations

import os
import pathlib
from collections.abc import Callable, Iterator, Sequence

import pytest

from protocol.records import Record, build_batch, iter_batches
from protocol.records.control import build_end_txn_marker_batch
from protocol.records.reader import iter_records
from storage.cleaner import plan_clean, write_cleaned_segments
from storage.clock import FakeClock
from storage.config import LogConfig
from storage.errors import OffsetOutOfRangeError
from storage.file_pool import FilePool, PooledFile
from storage.log import PartitionLog
from storage.read_view import LogChangedError, LogReadView
from storage.segment import segment_file_name
from storage.txn_index import AbortedTxn
from tests.storage.cleaner.helpers import Writer
from tests.storage.cleaner.helpers import open_log as open_cleaner_log
from tests.storage.log_helpers import BASE_TIME, headers_of, make_batch

SMALL = LogConfig(segment_bytes=2000, index_interval_bytes=100, max_index_size=4096, file_delete_delay_ms=0)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(BASE_TIME)


@pytest.fixture
def log(tmp_path: pathlib.Path, clock: FakeClock) -> Iterator[PartitionLog]:
    opened = PartitionLog.open(tmp_path / "topic-0", SMALL, clock)
    yield opened
    if not opened.closed:
        opened.close()


def fill(log: PartitionLog, batches: int, records: int = 2, epoch: int = 0) -> None:
    for i in range(batches):
        log.append_as_leader(make_batch(records, 50, BASE_TIME + i), epoch)


def owner_read(log: PartitionLog, offset: int, max_bytes: int, bound: int) -> bytes:
    """What the owning log returns for the same read (one segment, like the view)."""
    result = log.read(offset, max_bytes, bound, True)
    return b"" if result.slice is None else result.slice.read_bytes()


def view_of(log: PartitionLog, pool: FilePool | None = None) -> LogReadView:
    view = LogReadView(log.directory, pool=pool)
    view.note_active_segment(log.active_segment.base_offset)
    return view


def test_reads_whole_batches_below_the_bound_as_the_owner_does(log: PartitionLog) -> None:
    fill(log, 40)  # 80 offsets over several segments
    assert len(log.segments()) > 2
    view = view_of(log)
    for bound in (1, 2, 3, 37, 80):
        for offset in range(0, bound):
            for max_bytes in (1, 150, 500, 1 << 20):
                got = view.read(offset, max_bytes, bound, min_one_batch=True)
                assert got.records == owner_read(log, offset, max_bytes, bound), (offset, max_bytes, bound)
                if got.records:
                    first = headers_of(got.records)[0]
                    assert (
                        first.base_offset <= offset <= first.last_offset
                        and got.first_offset == first.base_offset
                    )
                    assert headers_of(got.records)[-1].last_offset < bound
    assert view.read(80, 1 << 20, 80, min_one_batch=True).records == b""
    view.close()


def test_first_batch_over_the_limit_only_with_min_one_batch(log: PartitionLog) -> None:
    fill(log, 3)
    view = view_of(log)
    assert view.read(0, 10, 6, min_one_batch=False).records == b""
    whole = view.read(0, 10, 6, min_one_batch=True).records
    assert [h.base_offset for h in headers_of(whole)] == [0]


def test_reads_follow_appends_and_rolls_announced_later(log: PartitionLog) -> None:
    fill(log, 2)
    view = view_of(log)
    assert headers_of(view.read(0, 1 << 20, 4, min_one_batch=True).records)[-1].last_offset == 3
    fill(log, 60)  # rolls: the view has not been told yet, and finds the segments when it must
    offset = 4
    while offset < log.log_end_offset:
        data = view.read(offset, 1 << 20, log.log_end_offset, min_one_batch=True).records
        assert data == owner_read(log, offset, 1 << 20, log.log_end_offset)
        offset = headers_of(data)[-1].last_offset + 1
    assert offset == log.log_end_offset


def test_a_read_never_passes_the_bound_even_mid_segment(log: PartitionLog) -> None:
    fill(log, 3)  # offsets 0..5 in one segment
    view = view_of(log)
    data = view.read(0, 1 << 20, 4, min_one_batch=True).records
    assert [h.last_offset for h in headers_of(data)] == [1, 3]
    # bytes past the bound may be anything (a write in progress): the read never looks at them
    path = log.active_segment.log_path
    with open(path, "r+b") as f:
        f.seek(len(data))
        f.write(b"\xff" * 20)
    assert view.read(0, 1 << 20, 4, min_one_batch=True).records == data
    assert view.bytes_available(0, 4, 1 << 20) == len(data)


def test_bytes_available_counts_up_to_the_bound(log: PartitionLog) -> None:
    fill(log, 5)
    view = view_of(log)
    one = len(make_batch(2, 50))
    assert view.bytes_available(0, 10, 1 << 20) == 5 * one
    assert view.bytes_available(2, 6, 1 << 20) == 2 * one
    assert view.bytes_available(2, 6, 10) == 10
    assert view.bytes_available(6, 6, 1 << 20) == 0


def test_retention_moves_the_start_and_open_descriptors_keep_their_bytes(
    log: PartitionLog, tmp_path: pathlib.Path
) -> None:
    fill(log, 40)
    log.update_high_watermark(log.log_end_offset)
    view = view_of(log)
    before = view.read(0, 1 << 20, 80, min_one_batch=True).records
    assert before
    first_segment = log.segments()[1].base_offset
    log.maybe_increment_log_start_offset(first_segment)
    assert log.delete_old_segments() >= 1
    # an open descriptor still reads the file it opened: the same, valid, batches
    assert view.read(0, 1 << 20, 80, min_one_batch=True).records == before
    fresh = view_of(log)
    with pytest.raises(OffsetOutOfRangeError):
        fresh.read(0, 1 << 20, 80, min_one_batch=True)
    data = fresh.read(first_segment, 1 << 20, 80, min_one_batch=True).records
    assert data == owner_read(log, first_segment, 1 << 20, 80)


def test_a_reopened_descriptor_that_finds_the_file_gone_lists_the_files_again(log: PartitionLog) -> None:
    fill(log, 40)
    log.update_high_watermark(log.log_end_offset)
    pool = FilePool(capacity=1)  # every other file's use closes the descriptor: reopens by name
    view = view_of(log, pool)
    second = log.segments()[1].base_offset
    view.read(0, 1 << 20, 80, min_one_batch=True)
    view.read(second, 1 << 20, 80, min_one_batch=True)  # closes segment 0's descriptor
    log.maybe_increment_log_start_offset(second)
    log.delete_old_segments()
    with pytest.raises(OffsetOutOfRangeError):
        view.read(0, 1 << 20, 80, min_one_batch=True)
    assert view.read(second, 1 << 20, 80, min_one_batch=True).records == owner_read(log, second, 1 << 20, 80)


def test_truncation_below_the_bound_after_the_bound_was_lowered(log: PartitionLog) -> None:
    """The follower lowers the bound (fence) first; reads below the new bound stay exact."""
    fill(log, 10)
    view = view_of(log)
    assert view.read(0, 1 << 20, 20, min_one_batch=True).records
    log.truncate_to(8)  # the fence said 8 first
    for offset in range(8):
        assert view.read(offset, 1 << 20, 8, min_one_batch=True).records == owner_read(
            log, offset, 1 << 20, 8
        )
    fill(log, 3, epoch=1)  # the new leader's batches at the same positions
    assert view.read(8, 1 << 20, 14, min_one_batch=True).records == owner_read(log, 8, 1 << 20, 14)


def test_a_file_that_shrank_gives_nothing_past_its_end(log: PartitionLog) -> None:
    fill(log, 4)
    view = view_of(log)
    one = len(make_batch(2, 50))
    view.read(0, 1 << 20, 8, min_one_batch=True)
    os.truncate(log.active_segment.log_path, one + 10)  # what a truncation without a fence would do
    assert headers_of(view.read(0, 1 << 20, 8, min_one_batch=True).records)[-1].last_offset == 1
    assert view.read(2, 1 << 20, 8, min_one_batch=True).records == b""


def test_a_file_that_shrank_between_walk_and_read_is_reported(
    log: PartitionLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    fill(log, 4)
    view = view_of(log)
    real = PooledFile.pread
    monkeypatch.setattr(PooledFile, "pread", lambda self, n, at: real(self, n, at)[: n - 1])
    with pytest.raises(LogChangedError):
        view.read(0, 1 << 20, 8, min_one_batch=True)


def test_an_index_of_another_file_is_not_trusted(log: PartitionLog, tmp_path: pathlib.Path) -> None:
    """A cleaned segment installed under the same name: an index entry that does not match the
    descriptor held is ignored and the segment walked from its start."""
    fill(log, 10)  # one segment, several index entries (interval 100 bytes)
    view = view_of(log)
    assert log.active_segment.offset_index.entries > 1
    index = log.directory / segment_file_name(0, ".index")
    with open(index, "r+b") as f:  # every entry now points 3 bytes off
        entries = f.read()
        f.seek(0)
        for n in range(len(entries) // 8):
            relative = int.from_bytes(entries[n * 8 : n * 8 + 4], "big")
            position = int.from_bytes(entries[n * 8 + 4 : n * 8 + 8], "big")
            f.write(relative.to_bytes(4, "big") + (position + 3).to_bytes(4, "big"))
    for offset in range(20):
        assert view.read(offset, 300, 20, min_one_batch=True).records == owner_read(log, offset, 300, 20)


def test_aborted_transactions_and_epochs_come_from_the_owner_files(log: PartitionLog) -> None:
    batch = build_batch(
        [Record(value=b"v", timestamp=BASE_TIME)],
        producer_id=7,
        producer_epoch=0,
        base_sequence=0,
        is_transactional=True,
    )
    log.append_as_leader(batch, 3)
    marker = build_end_txn_marker_batch(
        commit=False, producer_id=7, producer_epoch=0, coordinator_epoch=0, timestamp=BASE_TIME
    )
    log.append_as_leader(marker, 3)
    log.append_aborted_txn(AbortedTxn(7, 0, 1, 2))
    fill(log, 1, epoch=5)
    view = view_of(log)
    assert view.collect_aborted_transactions(0, 4) == [AbortedTxn(7, 0, 1, 2)]
    assert view.collect_aborted_transactions(2, 4) == []
    assert view.end_offset_for_epoch(3, log.log_end_offset) == (3, 2)
    assert view.end_offset_for_epoch(5, log.log_end_offset) == (5, 4)
    assert view.end_offset_for_epoch(9, log.log_end_offset) == (-1, -1)


def test_closed_view_refuses_reads(log: PartitionLog) -> None:
    fill(log, 1)
    view = view_of(log)
    view.close()
    with pytest.raises(Exception, match="closed"):
        view.read(0, 100, 2, min_one_batch=True)


def _compacted_log_in_segments(tmp_path: pathlib.Path) -> PartitionLog:
    """Segments at 0, 3, 6, 9 (keys a and b rewritten in each) and an active one at 12: the
    cleaner groups them in pairs, each pair merged into its first segment's name."""
    compacted = open_cleaner_log(tmp_path, segment_bytes=300)
    writer = Writer(compacted)
    for i in range(4):
        writer.put([(b"a", b"%d" % i), (b"b", b"%d" % i)])
        writer.put([(b"a", b"x%d" % i)])
        compacted.roll()
    writer.put([(b"c", b"1")])
    compacted.update_high_watermark(compacted.log_end_offset)
    return compacted


def _clean(compacted: PartitionLog, step_hook: Callable[[str], None] | None = None) -> list[int]:
    end = compacted.log_end_offset
    task = plan_clean(compacted, first_dirty_offset=0, first_uncleanable_offset=end, now_ms=BASE_TIME)
    result = write_cleaned_segments(task)
    assert [len(g.replaced) for g in result.groups] == [2, 2]  # merges: 3 into 0, 9 into 6
    for group in result.groups:
        assert compacted.replace_segments(group.replaced, token=result.token, step_hook=step_hook)
    return [group.replaced[0][0] for group in result.groups]


def test_a_cleaned_segment_that_merged_the_next_ones_is_read_from_its_new_file(
    tmp_path: pathlib.Path,
) -> None:
    """The view held the old files of 0 and 6; the cleaner merged 3 into 0 and 9 into 6. Once the
    files are listed again (a roll), offsets 3.. and 9.. come from the new files, never skipped."""
    compacted = _compacted_log_in_segments(tmp_path)
    end = compacted.log_end_offset
    view = view_of(compacted)
    for offset in (0, 3, 6, 9):
        assert view.read(offset, 1 << 20, end, min_one_batch=True).records
    _clean(compacted)
    compacted.roll()
    view.note_active_segment(compacted.active_segment.base_offset)
    for offset in range(end):
        got = view.read(offset, 1 << 20, end, min_one_batch=True)
        assert got.records == owner_read(compacted, offset, 1 << 20, end), offset
    compacted.close()


def test_a_listing_during_a_segment_swap_does_not_skip_its_range(tmp_path: pathlib.Path) -> None:
    """Listed between the old segments' removal and the new one's final rename, the segment at 6
    is a ``.log.swap``: a read there answers nothing for now, never the segment after it."""
    compacted = _compacted_log_in_segments(tmp_path)
    end = compacted.log_end_offset
    view = view_of(compacted)
    assert view.read(0, 1 << 20, end, min_one_batch=True).records
    in_window: list[bytes] = []

    def listing_in_the_window(step: str) -> None:
        if step == "segment 9 -> deleted":
            view.refresh()
            try:
                in_window.append(view.read(6, 1 << 20, end, min_one_batch=True).records)
            except LogChangedError:
                in_window.append(b"")

    _clean(compacted, listing_in_the_window)
    assert in_window == [b""]
    for offset in range(3, end):
        got = view.read(offset, 1 << 20, end, min_one_batch=True)
        assert got.records == owner_read(compacted, offset, 1 << 20, end), offset
    compacted.close()


# -- aborted transactions: from the files the records come from --------------------------------------


def committed_values(records: bytes, aborted: Sequence[AbortedTxn]) -> list[bytes | None]:
    """The values a read_committed consumer keeps of ``records`` given ``aborted`` (Kafka's
    consumer: a producer's transactional batches are skipped from the first offset of one of its
    aborted transactions until its marker)."""
    pending = sorted(aborted, key=lambda txn: txn.first_offset)
    aborting: set[int] = set()
    values: list[bytes | None] = []
    for position, header in iter_batches(records):
        while pending and pending[0].first_offset <= header.last_offset:
            aborting.add(pending.pop(0).producer_id)
        if header.is_control:
            aborting.discard(header.producer_id)
        elif not (header.is_transactional and header.producer_id in aborting):
            values += [r.value for r in iter_records(records[position : position + header.size])]
    return values


def log_with_an_aborted_transaction(tmp_path: pathlib.Path) -> PartitionLog:
    """Segment 0: producer 7's transactional record ``aborted``, a plain record ``1``, and the ABORT
    marker (offsets 0..2, indexed in segment 0's .txnindex); segment 3: ``1``; active segment 4."""
    compacted = open_cleaner_log(tmp_path, segment_bytes=300)
    writer = Writer(compacted)
    writer.put([(b"k", b"aborted")], producer_id=7)
    writer.put([(b"x", b"1")])
    writer.end_txn(7, commit=False)
    compacted.roll()
    writer.put([(b"y", b"1")])
    compacted.roll()
    writer.put([(b"z", b"1")])
    compacted.update_high_watermark(compacted.log_end_offset)
    assert compacted.collect_aborted_transactions(0, 5) == [AbortedTxn(7, 0, 2, 3)]
    return compacted


def clean_once(compacted: PartitionLog, step_hook: Callable[[str], None] | None = None, **plan: int) -> None:
    """A cleaning round of every inactive segment with delete.retention.ms 0, as the owner runs it:
    the first drops the aborted records (their marker and index entry stay), the second the index
    entry (no record of the transaction is left; the marker gets its delete horizon)."""
    task = plan_clean(
        compacted,
        first_dirty_offset=0,
        first_uncleanable_offset=compacted.log_end_offset,
        now_ms=BASE_TIME,
        delete_retention_ms=0,
        **plan,  # type: ignore[arg-type]
    )
    result = write_cleaned_segments(task)
    for group in result.groups:
        assert compacted.replace_segments(group.replaced, token=result.token, step_hook=step_hook)


@pytest.mark.parametrize("index_read_first", [True, False], ids=["committed-first", "uncommitted-first"])
def test_records_and_aborted_transactions_come_from_the_same_files_across_two_cleanings(
    tmp_path: pathlib.Path, index_read_first: bool
) -> None:
    """The view holds segment 0's file, with the aborted record. Two cleanings replace it (the second
    drops the transaction's index entry) and nothing lists the files again meanwhile: a
    read_committed read answers the held file with its own index, or the new file with its own,
    never the held file's aborted record with the new index, which no longer lists it."""
    compacted = log_with_an_aborted_transaction(tmp_path)
    end = compacted.log_end_offset
    view = view_of(compacted)
    before = view.read(0, 1 << 20, end, min_one_batch=True, with_aborted=index_read_first)
    assert b"aborted" in committed_values(before.records, ())
    if index_read_first:
        assert before.aborted == (AbortedTxn(7, 0, 2, 3),)
        assert committed_values(before.records, before.aborted) == [b"1"]
    clean_once(compacted)
    clean_once(compacted)
    assert compacted.collect_aborted_transactions(0, end) == []
    got = view.read(0, 1 << 20, end, min_one_batch=True, with_aborted=True)
    now = owner_read(compacted, 0, 1 << 20, end)
    assert (got.records, got.aborted) in [(before.records, (AbortedTxn(7, 0, 2, 3),)), (now, ())]
    assert b"aborted" not in committed_values(got.records, got.aborted)
    compacted.close()


@pytest.mark.parametrize(
    ("step", "expected"),
    [
        ("txnindex cleaned -> swap", [b"1"]),  # the old files, both still named
        ("log cleaned -> swap", [b"1"]),
        ("segment 0 -> deleted", None),  # the old index is gone, the new one not named yet
        ("segment 3 -> deleted", None),
        ("txnindex swap -> final", None),  # the new index is named, its .log not yet
        ("log swap -> final", [b"1", b"1"]),  # the new file (3 merged into it) and its index
    ],
)
def test_a_read_during_a_segment_replacement_never_goes_without_its_index(
    tmp_path: pathlib.Path, step: str, expected: list[bytes] | None
) -> None:
    """While the cleaner installs the cleaned segment 0 (merging 3 into it), segment 0's .txnindex
    is missing from the old segment's removal until the new index's rename. A read_committed read
    of the held old file (its index not read before) at any step answers records with their own
    aborted transactions, or nothing for now (LogChangedError)."""
    compacted = log_with_an_aborted_transaction(tmp_path)
    end = compacted.log_end_offset
    view = view_of(compacted)
    assert view.read(0, 1 << 20, end, min_one_batch=True).records  # held; its index not read yet
    answers: list[list[bytes | None] | None] = []

    def read_at(current: str) -> None:
        if current != step:
            return
        try:
            got = view.read(0, 1 << 20, end, min_one_batch=True, with_aborted=True)
        except LogChangedError:
            answers.append(None)
        else:
            answers.append(committed_values(got.records, got.aborted))

    clean_once(compacted, read_at)
    assert answers == [expected]
    compacted.close()


def test_a_segment_opened_after_the_listing_must_be_the_file_listed(tmp_path: pathlib.Path) -> None:
    """Producer 7's aborted record is in segment 0, its marker (and index entry) in segment 4. The
    view holds segment 0 and its index (read under a bound its entries completed), not segment 4.
    After two cleanings (segments kept apart) segment 4 is another file, whose index lacks the
    entry: opened now for a read of the held segment 0, it makes the view list again, and the read
    answers the new files instead of the old aborted record without its entry."""
    compacted = open_cleaner_log(tmp_path, file_delete_delay_ms=60_000)  # removed files stay a while
    writer = Writer(compacted)
    writer.put([(b"q", b"aborted too")], producer_id=8)  # 0
    writer.put([(b"k", b"aborted")], producer_id=7)  # 1
    writer.put([(b"x", b"1")])  # 2
    writer.end_txn(8, commit=False)  # 3: entry (8, 0, 3, LSO 1) in segment 0
    compacted.roll()
    writer.end_txn(7, commit=False)  # 4: entry (7, 1, 4, LSO 5) in segment 4
    writer.put([(b"y", b"1")])  # 5
    compacted.roll()
    writer.put([(b"z", b"1")])  # 6
    compacted.update_high_watermark(compacted.log_end_offset)
    end = compacted.log_end_offset
    view = view_of(compacted)
    # while producer 7 was open, the last stable offset was 1: segment 0's entry ends the search
    first = view.read(0, 1 << 20, 1, min_one_batch=True, with_aborted=True)
    assert first.aborted == (AbortedTxn(8, 0, 3, 1),) and committed_values(first.records, first.aborted) == []
    clean_once(compacted, max_segment_bytes=1)  # one segment per group: 4 stays apart from 0
    clean_once(compacted, max_segment_bytes=1)
    assert [s.base_offset for s in compacted.segments()] == [0, 4, 6]
    assert compacted.collect_aborted_transactions(0, end) == []
    got = view.read(0, 1 << 20, end, min_one_batch=True, with_aborted=True)
    assert b"aborted" not in committed_values(got.records, got.aborted)
    assert (got.records, got.aborted) == (owner_read(compacted, 0, 1 << 20, end), ())
    compacted.close()


def test_forget_drops_every_file_held(log: PartitionLog) -> None:
    """What the caller does on a new segment generation: nothing held afterwards, reads go on."""
    fill(log, 40)
    log.update_high_watermark(log.log_end_offset)
    pool = FilePool(capacity=64)
    view = view_of(log, pool)
    view.read(0, 1 << 20, 80, min_one_batch=True, with_aborted=True)
    assert pool.open_count > 0
    view.forget()
    assert pool.open_count == 0
    assert view.read(0, 1 << 20, 80, min_one_batch=True).records == owner_read(log, 0, 1 << 20, 80)
