"""The two halves of a round: a task as plain data (what the cleaner process gets), ``.cleaned`` files
written from it while the owner appends, the owner's ``replace_segments`` refusing a group whose
segments changed meanwhile, the throttler, and the log loader finishing an interrupted swap."""

from __future__ import annotations

import json
import os
import pathlib

import pytest

from storage.cleaner import (
    CleanResult,
    CleanTask,
    CrashPoint,
    LastRecord,
    Throttler,
    plan_clean,
    write_cleaned_segments,
)
from storage.segment import segment_file_name
from tests.storage.cleaner.helpers import BASE_TIME, Writer, open_log, read_records


def build(path: pathlib.Path) -> tuple[Writer, int]:
    log = open_log(path)
    w = Writer(log)
    for i in range(3):
        w.put([(b"a", b"%d" % i), (b"b", b"%d" % i)])
        w.put([(b"b", None)], producer_id=7)
        w.end_txn(7, commit=False)
        log.roll()
    w.put([(b"c", b"1")])
    return w, log.log_end_offset


def test_task_and_result_travel_as_json_and_install_after_appends(tmp_path: pathlib.Path) -> None:
    w, end = build(tmp_path)
    log = w.log
    task = plan_clean(
        log,
        first_dirty_offset=0,
        first_uncleanable_offset=end,
        now_ms=BASE_TIME,
        active_producers={7: LastRecord(None, 0)},
    )
    assert task.upper_bound == log.active_segment.base_offset and len(task.segments) == 3
    assert task.aborted  # the aborted transactions travel with the task
    task = CleanTask.from_json(json.loads(json.dumps(task.to_json())))
    result = write_cleaned_segments(task)
    result = CleanResult.from_json(json.loads(json.dumps(result.to_json())))
    w.put([(b"a", b"late")])  # the owner keeps appending meanwhile
    before_active = log.active_segment
    assert [log.replace_segments(g.replaced, token=result.token) is not None for g in result.groups] == [True]
    assert log.active_segment is before_active
    live = [(k, v) for _, k, v, _control in read_records(log) if not _control]
    assert live == [(b"a", b"2"), (b"b", b"2"), (b"c", b"1"), (b"a", b"late")]
    assert result.end_offset == task.upper_bound and 0 < result.map_utilization < 1
    log.close()


def test_a_group_whose_segments_changed_is_discarded(tmp_path: pathlib.Path) -> None:
    w, end = build(tmp_path)
    log = w.log
    task = plan_clean(log, first_dirty_offset=0, first_uncleanable_offset=end, now_ms=BASE_TIME)
    result = write_cleaned_segments(task, offset_map=None)
    before = read_records(log)
    log.truncate_to(2)  # a follower's truncation inside the first segment
    assert log.replace_segments(result.groups[0].replaced, token=result.token) is None
    assert read_records(log) == [r for r in before if r[0] < 2]
    assert [p.name for p in log.directory.iterdir() if p.suffix == ".cleaned"] == []
    log.close()


def test_a_failed_write_leaves_no_cleaned_files(tmp_path: pathlib.Path) -> None:
    w, end = build(tmp_path)
    log = w.log
    task = plan_clean(log, first_dirty_offset=0, first_uncleanable_offset=end, now_ms=BASE_TIME)
    os.unlink(log.directory / segment_file_name(task.segments[1].base_offset, ".log"))
    with pytest.raises(FileNotFoundError):
        write_cleaned_segments(task, step_hook=None)
    assert [p.name for p in log.directory.iterdir() if p.suffix == ".cleaned"] == []


def test_throttler_sleeps_to_the_desired_rate() -> None:
    now = [0.0]
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds

    throttler = Throttler(1000.0, check_interval_s=0.1, clock=lambda: now[0], sleep=sleep)
    throttler.maybe_throttle(500)  # no time passed: too early to check
    now[0] += 0.1
    throttler.maybe_throttle(500)  # 1000 bytes in 0.1 s: sleep 0.9 s
    assert slept == [pytest.approx(0.9)]
    now[0] += 1.0
    throttler.maybe_throttle(10)  # well below the rate
    assert len(slept) == 1


def test_the_loader_finishes_a_swap_interrupted_after_the_old_segments_went(tmp_path: pathlib.Path) -> None:
    w, end = build(tmp_path)
    log = w.log
    directory = log.directory

    task = plan_clean(log, first_dirty_offset=0, first_uncleanable_offset=end, now_ms=BASE_TIME)
    result = write_cleaned_segments(task)
    last_old = result.groups[0].replaced[-1][0]

    def crash(name: str) -> None:
        if name == f"segment {last_old} -> deleted":  # every old segment renamed to .deleted
            raise CrashPoint(name)

    with pytest.raises(CrashPoint):
        log.replace_segments(result.groups[0].replaced, token=result.token, step_hook=crash)
    assert list(directory.glob("*.swap"))
    reopened = open_log(tmp_path)  # the loader runs recover_cleaner_files first
    expected = [(k, v) for _, k, v, c in read_records(reopened) if not c]
    assert expected == [(b"a", b"2"), (b"b", b"2"), (b"c", b"1")]
    assert not list(directory.glob("*.swap")) and not list(directory.glob("*.deleted"))
    assert reopened.collect_aborted_transactions(0, reopened.log_end_offset)  # its .txnindex survived
    reopened.close()


def test_two_rounds_over_one_log_never_share_a_file(tmp_path: pathlib.Path) -> None:
    """A log that changes owner mid-round: the old owner's cleaner may still write while the new
    owner's runs; each round's files carry its token, and only one round's group gets installed."""
    w, end = build(tmp_path)
    log = w.log
    old, new = (
        plan_clean(log, first_dirty_offset=0, first_uncleanable_offset=end, now_ms=BASE_TIME, token=t)
        for t in ("0ld0wner", "n3w0wner")
    )
    old_result, new_result = write_cleaned_segments(old), write_cleaned_segments(new)
    names = sorted(p.name for p in log.directory.glob("*.cleaned"))
    assert names == [
        "00000000000000000000.index.0ld0wner.cleaned",
        "00000000000000000000.index.n3w0wner.cleaned",
        "00000000000000000000.log.0ld0wner.cleaned",
        "00000000000000000000.log.n3w0wner.cleaned",
        "00000000000000000000.timeindex.0ld0wner.cleaned",
        "00000000000000000000.timeindex.n3w0wner.cleaned",
        "00000000000000000000.txnindex.0ld0wner.cleaned",
        "00000000000000000000.txnindex.n3w0wner.cleaned",
    ]
    assert log.replace_segments(new_result.groups[0].replaced, token=new_result.token) is not None
    assert log.replace_segments(old_result.groups[0].replaced, token=old_result.token) is None
    assert not list(log.directory.glob("*.cleaned"))
    assert [(k, v) for _, k, v, c in read_records(log) if not c] == [(b"a", b"2"), (b"b", b"2"), (b"c", b"1")]
    log.close()
