"""A crash after every file operation of a swap: recovery gives the old or the new segments, never a mix."""

from __future__ import annotations

import pathlib

import pytest

from storage.cleaner import CrashPoint, clean_log, recover_cleaner_files
from storage.log import PartitionLog
from storage.segment import segment_file_name
from storage.txn_index import AbortedTxn
from tests.storage.cleaner.helpers import BASE_TIME, Writer, open_log, read_records

Records = list[tuple[int, bytes | None, bytes | None, bool]]


def build(path: pathlib.Path) -> tuple[PartitionLog, int]:
    """Segments [0: a, b(txn 7)] [2: a, abort 7] [4: null key] [5: c, a], active [7]; bytes of [0, 2, 4]."""
    log = open_log(path)
    w = Writer(log)
    w.put([(b"a", b"1")])
    w.put([(b"b", b"1")], producer_id=7)
    log.roll()
    w.put([(b"a", b"2")])
    w.end_txn(7, commit=False)
    log.roll()
    w.put([(None, b"x")])
    log.roll()
    group_bytes = sum(s.size for s in log.segments()[:3])
    w.put([(b"c", b"1"), (b"a", b"3")])
    log.roll()
    w.put([(b"z", b"1")])
    return log, group_bytes


def run_clean(log: PartitionLog, group_bytes: int, crash_at: int | None) -> list[str]:
    steps: list[str] = []

    def hook(name: str) -> None:
        steps.append(name)
        if crash_at is not None and len(steps) == crash_at:
            raise CrashPoint(name)

    clean_log(
        log,
        first_dirty_offset=0,
        first_uncleanable_offset=log.log_end_offset,
        now_ms=BASE_TIME,
        max_segment_bytes=group_bytes,
        step_hook=hook,
    )
    return steps


def state(log: PartitionLog) -> tuple[Records, list[AbortedTxn]]:
    return read_records(log), log.collect_aborted_transactions(0, log.log_end_offset)


def reference(
    tmp_path: pathlib.Path,
) -> tuple[list[str], tuple[Records, list[AbortedTxn]], tuple[Records, list[AbortedTxn]]]:
    log, group_bytes = build(tmp_path / "reference")
    old = state(log)
    steps = run_clean(log, group_bytes, None)
    new = state(log)
    log.close()
    return steps, old, new


def test_every_step_recovers_to_old_or_new(tmp_path: pathlib.Path) -> None:
    steps, old, new = reference(tmp_path)
    assert old != new and len(steps) == 2 * 5 + 3 + 1  # per group: 5 swap steps + one per segment
    first_group_done = steps.index("log swap -> final") + 1
    split = 5  # groups are [0, 2, 4] and [5]

    def mixed(
        first: tuple[Records, list[AbortedTxn]], second: tuple[Records, list[AbortedTxn]]
    ) -> tuple[Records, list[AbortedTxn]]:
        records = [r for r in first[0] if r[0] < split] + [r for r in second[0] if r[0] >= split]
        return records, first[1] if first[1] == second[1] else [*first[1], *second[1]]

    for crash_at in range(1, len(steps) + 1):
        where = tmp_path / f"crash{crash_at}"
        log, group_bytes = build(where)
        with pytest.raises(CrashPoint):
            run_clean(log, group_bytes, crash_at)
        recover_cleaner_files(where / "t-0")
        recover_cleaner_files(where / "t-0")  # idempotent
        reopened = open_log(where)
        got = state(reopened)
        if crash_at < first_group_done:
            allowed = [old, mixed(new, old)]
        else:
            allowed = [mixed(new, old), new]
        assert got in allowed, f"crash after step {crash_at} ({steps[crash_at - 1]})"
        assert reopened.log_end_offset == 8
        leftovers = [
            p.name for p in (where / "t-0").iterdir() if p.suffix in (".cleaned", ".swap", ".deleted")
        ]
        assert leftovers == []
        reopened.close()


def test_recovery_rules_on_built_directories(tmp_path: pathlib.Path) -> None:
    log, _ = build(tmp_path)
    log.close()
    directory = tmp_path / "t-0"
    # a stray .cleaned and an index .swap without a .log.swap are removed
    (directory / segment_file_name(0, ".log.cleaned")).write_bytes(b"junk")
    (directory / segment_file_name(0, ".index.swap")).write_bytes(b"")
    (directory / segment_file_name(2, ".txnindex.swap")).write_bytes(b"")
    (directory / segment_file_name(9, ".log.deleted")).write_bytes(b"")
    before = sorted(p.name for p in directory.iterdir())
    assert recover_cleaner_files(directory) == []
    after = sorted(p.name for p in directory.iterdir())
    assert [n for n in before if n not in after] == sorted(
        [
            segment_file_name(0, ".index.swap"),
            segment_file_name(0, ".log.cleaned"),
            segment_file_name(9, ".log.deleted"),
            segment_file_name(2, ".txnindex.swap"),
        ]
    )
    # a .log.swap replaces every segment whose base lies in [its base, its next offset)
    swap_source = directory / segment_file_name(2, ".log")
    (directory / segment_file_name(0, ".log.swap")).write_bytes(
        (directory / segment_file_name(0, ".log")).read_bytes() + swap_source.read_bytes()
    )
    assert recover_cleaner_files(directory) == [0]
    bases = sorted(p.name for p in directory.iterdir() if p.suffix == ".log")
    assert bases == [segment_file_name(b, ".log") for b in (0, 4, 5, 7)]
    assert not (directory / segment_file_name(2, ".txnindex")).exists()
