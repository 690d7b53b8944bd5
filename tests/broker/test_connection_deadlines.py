"""A connection's deadlines on a fake clock: connections.max.idle.ms and
kipling.request.receive.timeout.ms (a request too long in arriving: slowloris)."""

from __future__ import annotations

import pytest

from broker.server.deadlines import IDLE, RECEIVE_TIMEOUT, Deadlines

pytestmark = pytest.mark.timeout(10)


def test_a_frame_trickling_in_is_closed_at_the_receive_timeout_though_never_idle() -> None:
    deadlines = Deadlines(idle_timeout_ms=10_000, receive_timeout_ms=2_000, now=0.0)
    deadlines.received(0.0, in_progress=True, completed=False)
    for second in range(1, 3):  # one byte a second
        assert deadlines.expired(float(second) - 0.001) is None
        deadlines.received(float(second), in_progress=True, completed=False)
    assert deadlines.expired(2.0) == RECEIVE_TIMEOUT
    assert deadlines.next_check(1.5) == pytest.approx(0.5)


def test_each_frame_has_its_own_clock() -> None:
    deadlines = Deadlines(idle_timeout_ms=0, receive_timeout_ms=2_000, now=0.0)
    deadlines.received(0.0, in_progress=True, completed=False)
    deadlines.received(1.5, in_progress=True, completed=True)  # one done, the next begun
    assert deadlines.expired(3.0) is None
    assert deadlines.expired(3.5) == RECEIVE_TIMEOUT


def test_no_deadline_between_frames_when_idle_is_disabled() -> None:
    deadlines = Deadlines(idle_timeout_ms=0, receive_timeout_ms=2_000, now=0.0)
    deadlines.received(0.0, in_progress=True, completed=False)
    deadlines.received(1.0, in_progress=False, completed=True)
    assert deadlines.expired(100.0) is None
    assert deadlines.next_check(100.0) is None


def test_disabled_receive_timeout_leaves_only_idle() -> None:
    deadlines = Deadlines(idle_timeout_ms=5_000, receive_timeout_ms=0, now=0.0)
    deadlines.received(1.0, in_progress=True, completed=False)
    assert deadlines.expired(5.9) is None
    assert deadlines.expired(6.0) == IDLE


def test_idle_after_the_last_answer_but_not_while_answering() -> None:
    deadlines = Deadlines(idle_timeout_ms=1_000, receive_timeout_ms=30_000, now=0.0)
    deadlines.received(0.0, in_progress=False, completed=True)
    deadlines.busy = True
    assert deadlines.expired(5.0) is None
    assert deadlines.next_check(5.0) == pytest.approx(0.05)  # looked at again soon
    deadlines.busy = False
    deadlines.answered(5.0)
    assert deadlines.expired(5.5) is None
    assert deadlines.expired(6.0) == IDLE


def test_time_waiting_for_its_own_requests_to_be_answered_does_not_count() -> None:
    deadlines = Deadlines(idle_timeout_ms=3_000, receive_timeout_ms=2_000, now=0.0)
    deadlines.received(0.0, in_progress=True, completed=False)
    deadlines.backlog_started(1.0)
    assert deadlines.expired(50.0) is None
    assert deadlines.next_check(50.0) is None
    deadlines.backlog_cleared(51.0)
    assert deadlines.expired(51.9) is None  # 1 s before the pause + 0.9 s after it
    assert deadlines.expired(52.0) == RECEIVE_TIMEOUT


def test_clearing_a_backlog_that_never_started_changes_nothing() -> None:
    deadlines = Deadlines(idle_timeout_ms=1_000, receive_timeout_ms=0, now=0.0)
    deadlines.backlog_cleared(0.5)
    assert deadlines.expired(1.0) == IDLE


def test_a_byte_read_while_paused_starts_no_clock_until_reading_resumes() -> None:
    deadlines = Deadlines(idle_timeout_ms=0, receive_timeout_ms=2_000, now=0.0)
    deadlines.received(0.0, in_progress=True, completed=False, paused=True)
    assert deadlines.expired(100.0) is None
    deadlines.reading_resumed(100.0, in_progress=True)
    assert deadlines.expired(101.9) is None
    assert deadlines.expired(102.0) == RECEIVE_TIMEOUT


def test_a_clock_already_running_keeps_running_through_a_memory_wait() -> None:
    deadlines = Deadlines(idle_timeout_ms=0, receive_timeout_ms=2_000, now=0.0)
    deadlines.received(0.0, in_progress=True, completed=False)
    deadlines.reading_resumed(1.5, in_progress=True)  # waited for the pool from 0.5 to 1.5
    assert deadlines.expired(2.0) == RECEIVE_TIMEOUT
