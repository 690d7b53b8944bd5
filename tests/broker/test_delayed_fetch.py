"""DelayedFetch: each lettered completion case, min_bytes, expiry, races, session wake-up, a real loop."""

from __future__ import annotations

import asyncio
import bisect
from collections.abc import Hashable, Sequence
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from broker.fetch.delayed import (
    CONSUMER_REPLICA_ID,
    DelayedFetch,
    FetchablePartition,
    FetchCompletion,
    FetchParams,
    FetchPartitionStatus,
)
from broker.fetch_session import FetchSession, PartitionFetchParams, SessionId, TopicPartitionKey
from broker.metrics.purgatory import FETCH_EXPIRES, DelayedFetchMetrics
from protocol.sentinels import NO_LEADER_EPOCH, UNDEFINED_EPOCH_OFFSET, ZERO_UUID, IsolationLevel
from server_common.purgatory import DelayedOperationPurgatory, FakeScheduler

RECORD_BYTES = 100


class FakePartition:
    """A leader's log reduced to what a DelayedFetch asks: offsets, segment bases, record sizes."""

    def __init__(self, leader_epoch: int = 5) -> None:
        self.leader_epoch = leader_epoch
        self.is_leader = True
        self.is_offline = False
        self.log_end_offset = 0
        self.high_watermark = 0
        self.last_stable_offset: int | None = None
        self.segment_bases = [0]
        self.sizes: list[int] = []
        self.epochs: list[tuple[int, int]] = [(leader_epoch, 0)]
        """(epoch, start offset), ascending."""

    def append(self, records: int = 1, size: int = RECORD_BYTES, commit: bool = True) -> None:
        self.sizes.extend([size] * records)
        self.log_end_offset += records
        if commit:
            self.high_watermark = self.log_end_offset

    def roll(self) -> None:
        self.segment_bases.append(self.log_end_offset)

    def truncate_to(self, offset: int) -> None:
        del self.sizes[offset:]
        self.log_end_offset = offset
        self.high_watermark = min(self.high_watermark, offset)

    # -- FetchablePartition --

    def end_offset_for(self, isolation_level: IsolationLevel, is_follower: bool) -> int:
        if is_follower:
            return self.log_end_offset
        if isolation_level == IsolationLevel.READ_COMMITTED and self.last_stable_offset is not None:
            return self.last_stable_offset
        return self.high_watermark

    def _segment(self, offset: int) -> int:
        return bisect.bisect_right(self.segment_bases, offset) - 1

    def on_older_segment(self, offset: int, end_offset: int) -> bool:
        return self._segment(offset) < self._segment(end_offset)

    def bytes_available(self, fetch_offset: int, end_offset: int, max_bytes: int) -> int:
        assert fetch_offset < end_offset and not self.on_older_segment(fetch_offset, end_offset)
        return sum(self.sizes[fetch_offset:end_offset])

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        candidates = [i for i, (e, _) in enumerate(self.epochs) if e <= epoch]
        if not candidates:
            return NO_LEADER_EPOCH, UNDEFINED_EPOCH_OFFSET
        i = candidates[-1]
        end = self.epochs[i + 1][1] if i + 1 < len(self.epochs) else self.log_end_offset
        return self.epochs[i][0], end


def as_protocol(partition: FakePartition) -> FetchablePartition:
    """Static check (for type checkers) that the fake satisfies the protocol."""
    return partition


class Harness:
    """A fetch purgatory on a fake scheduler, partitions by key, and the responses sent."""

    def __init__(self) -> None:
        self.scheduler = FakeScheduler()
        self.purgatory = DelayedOperationPurgatory("Fetch", self.scheduler)
        self.partitions: dict[Hashable, FakePartition] = {"p0": FakePartition(), "p1": FakePartition()}
        self.responses: list[Any] = []
        self.reads = 0
        self.expirations: list[bool] = []

    def read(self) -> dict[Hashable, int]:
        self.reads += 1
        return {key: p.log_end_offset for key, p in self.partitions.items()}

    def fetch(
        self,
        statuses: Sequence[FetchPartitionStatus],
        *,
        min_bytes: int = 1,
        max_bytes: int = 10_000_000,
        max_wait_ms: int = 500,
        replica_id: int = CONSUMER_REPLICA_ID,
        isolation_level: IsolationLevel = IsolationLevel.READ_UNCOMMITTED,
        fetch_only_from_leader: bool = True,
        **kwargs: Any,
    ) -> DelayedFetch[dict[Hashable, int]]:
        params = FetchParams(
            replica_id, max_wait_ms, min_bytes, max_bytes, isolation_level, fetch_only_from_leader
        )
        return DelayedFetch(
            params,
            max_wait_ms,
            statuses,
            self.read,
            self.responses.append,
            get_partition=self.partitions.get,
            **({"expiration_meter": self.expirations.append} | kwargs),
        )

    def park(self, statuses: Sequence[FetchPartitionStatus], **kwargs: Any) -> DelayedFetch[Any]:
        fetch = self.fetch(statuses, **kwargs)
        self.purgatory.try_complete_else_watch(fetch, fetch.watch_keys)
        return fetch

    def append(self, key: Hashable, records: int = 1, size: int = RECORD_BYTES, commit: bool = True) -> int:
        self.partitions[key].append(records, size, commit)
        return self.purgatory.check_and_complete(key)


def status(key: Hashable, offset: int, max_bytes: int = 1_000_000, **kwargs: int) -> FetchPartitionStatus:
    return FetchPartitionStatus(key, PartitionFetchParams(fetch_offset=offset, max_bytes=max_bytes, **kwargs))


@pytest.fixture
def h() -> Harness:
    return Harness()


def assert_answered_once(h: Harness, fetch: DelayedFetch[Any], reason: FetchCompletion) -> None:
    assert fetch.is_completed
    assert fetch.completion_reason is reason
    assert len(h.responses) == 1 and h.reads == 1
    assert h.purgatory.num_delayed == 0 and h.purgatory.watched == 0
    assert h.scheduler.pending == 0


# -- parking and min_bytes (D) ----------------------------------------------------------------------


def test_parks_when_nothing_is_available(h):
    fetch = h.park([status("p0", 0), status("p1", 0)])
    assert not fetch.is_completed
    assert h.purgatory.watchers_of("p0") == h.purgatory.watchers_of("p1") == 1
    assert h.responses == [] and h.reads == 0


def test_d_one_append_of_min_bytes_completes(h):
    fetch = h.park([status("p0", 0)], min_bytes=300)
    assert h.append("p0", records=3) == 1
    assert_answered_once(h, fetch, FetchCompletion.MIN_BYTES)
    assert h.responses == [{"p0": 3, "p1": 0}]  # the response is the re-read after the append


def test_d_several_small_appends_add_up(h):
    fetch = h.park([status("p0", 0)], min_bytes=300)
    assert h.append("p0") == 0
    assert h.append("p0") == 0
    assert not fetch.is_completed
    assert h.append("p0") == 1
    assert_answered_once(h, fetch, FetchCompletion.MIN_BYTES)


def test_d_bytes_add_up_across_partitions(h):
    fetch = h.park([status("p0", 0), status("p1", 0)], min_bytes=200)
    assert h.append("p0") == 0
    assert h.append("p1") == 1
    assert_answered_once(h, fetch, FetchCompletion.MIN_BYTES)


def test_d_a_partition_counts_at_most_its_max_bytes(h):
    fetch = h.park([status("p0", 0, max_bytes=150), status("p1", 0)], min_bytes=300)
    assert h.append("p0", records=5) == 0  # 500 bytes, but only 150 may be returned
    assert h.append("p1") == 0  # 250
    assert h.append("p1") == 1  # 350
    assert fetch.completion_reason is FetchCompletion.MIN_BYTES


def test_d_min_bytes_above_max_bytes_is_capped(h):
    fetch = h.park([status("p0", 0)], min_bytes=1_000_000, max_bytes=200)
    assert h.append("p0", records=2) == 1
    assert fetch.completion_reason is FetchCompletion.MIN_BYTES


def test_d_bytes_before_the_fetch_offset_do_not_count(h):
    h.partitions["p0"].append(records=10)
    fetch = h.park([status("p0", 10)], min_bytes=1)
    assert not fetch.is_completed
    assert h.append("p0") == 1


def test_d_enough_at_park_time_completes_at_once(h):
    h.partitions["p0"].append(records=2)
    fetch = h.park([status("p0", 0)], min_bytes=200)
    assert_answered_once(h, fetch, FetchCompletion.MIN_BYTES)


# -- the other lettered cases ------------------------------------------------------------------------


def test_a_not_leader_anymore_completes_a_leader_only_fetch(h):
    fetch = h.park([status("p0", 0)])
    h.partitions["p0"].is_leader = False
    assert h.purgatory.check_and_complete("p0") == 1
    assert_answered_once(h, fetch, FetchCompletion.NOT_LEADER)


def test_a_does_not_apply_to_a_fetch_allowed_from_followers(h):
    """KIP-392: a consumer with a rack may read from a follower; losing leadership is no reason to answer."""
    fetch = h.park([status("p0", 0)], fetch_only_from_leader=False)
    h.partitions["p0"].is_leader = False
    assert h.purgatory.check_and_complete("p0") == 0
    assert not fetch.is_completed


def test_b_unknown_partition_completes(h):
    fetch = h.park([status("p0", 0), status("p1", 0)])
    del h.partitions["p1"]
    assert h.purgatory.check_and_complete("p1") == 1
    assert_answered_once(h, fetch, FetchCompletion.UNKNOWN_PARTITION)


def test_c_truncated_below_the_fetch_offset_completes(h):
    h.partitions["p0"].append(records=10)
    fetch = h.park([status("p0", 10)], replica_id=2)
    h.partitions["p0"].truncate_to(5)  # e.g. a new leader with a shorter log
    assert h.purgatory.check_and_complete("p0") == 1
    assert_answered_once(h, fetch, FetchCompletion.TRUNCATED_OR_OLDER_SEGMENT)


def test_c_fetch_offset_on_an_older_segment_completes_whatever_min_bytes(h):
    p0 = h.partitions["p0"]
    p0.append(records=8)
    p0.append(records=2, commit=False)  # HW 8, LEO 10
    fetch = h.park([status("p0", 8)], min_bytes=1_000_000)
    p0.roll()  # new segment at 10
    p0.append(records=1)  # HW 11, on the new segment: what is left of the old one is final
    assert h.purgatory.check_and_complete("p0") == 1
    assert_answered_once(h, fetch, FetchCompletion.TRUNCATED_OR_OLDER_SEGMENT)


def test_c_same_segment_keeps_counting_bytes(h):
    p0 = h.partitions["p0"]
    p0.append(records=8)
    fetch = h.park([status("p0", 8)], min_bytes=1_000_000)
    p0.roll()  # the fetch offset itself starts the new segment
    assert h.append("p0") == 0
    assert not fetch.is_completed


def test_e_offline_log_dir_completes(h):
    fetch = h.park([status("p0", 0)])
    h.partitions["p0"].is_offline = True
    assert h.purgatory.check_and_complete("p0") == 1
    assert_answered_once(h, fetch, FetchCompletion.OFFLINE_LOG_DIR)


def test_f_diverging_epoch_at_park_time_completes_right_away(h):
    """DelayedFetchTest.testDivergingEpoch: epoch 9 ends at 499 < fetch offset 500."""
    p0 = h.partitions["p0"]
    p0.leader_epoch = 10
    p0.epochs = [(9, 0), (10, 499)]
    p0.append(records=500)
    fetch = h.park([status("p0", 500, current_leader_epoch=10, last_fetched_epoch=9)], replica_id=1)
    assert_answered_once(h, fetch, FetchCompletion.DIVERGING_EPOCH)


def test_f_divergence_while_parked_completes(h):
    p0 = h.partitions["p0"]
    p0.epochs = [(5, 0)]
    p0.append(records=10)
    fetch = h.park([status("p0", 10, last_fetched_epoch=5)], replica_id=1)
    assert not fetch.is_completed
    p0.epochs = [(3, 0)]  # the epoch cache no longer has 5: an older epoch answers
    assert h.purgatory.check_and_complete("p0") == 1
    assert fetch.completion_reason is FetchCompletion.DIVERGING_EPOCH


@pytest.mark.parametrize("answer", [(NO_LEADER_EPOCH, 7), (5, UNDEFINED_EPOCH_OFFSET), (5, 9)])
def test_f_undefined_or_short_epoch_end_is_divergence(h, answer):
    p0 = h.partitions["p0"]
    p0.append(records=10)
    fetch = h.park([status("p0", 10, last_fetched_epoch=5)], replica_id=1)
    p0.end_offset_for_epoch = lambda epoch: answer  # type: ignore[method-assign]
    assert h.purgatory.check_and_complete("p0") == 1
    assert fetch.completion_reason is FetchCompletion.DIVERGING_EPOCH


def test_g_fenced_leader_epoch_completes(h):
    """DelayedFetchTest.testFetchWithFencedEpoch: the partition moved to a newer epoch."""
    fetch = h.park([status("p0", 0, current_leader_epoch=5)])
    h.partitions["p0"].leader_epoch = 6
    assert h.purgatory.check_and_complete("p0") == 1
    assert_answered_once(h, fetch, FetchCompletion.LEADER_EPOCH_MISMATCH)


def test_g_unknown_leader_epoch_completes(h):
    fetch = h.park([status("p0", 0, current_leader_epoch=7)])  # ahead of the broker's 5
    assert_answered_once(h, fetch, FetchCompletion.LEADER_EPOCH_MISMATCH)


def test_g_no_epoch_in_the_request_is_not_checked(h):
    fetch = h.park([status("p0", 0)])
    h.partitions["p0"].leader_epoch = 6
    assert h.purgatory.check_and_complete("p0") == 0
    assert not fetch.is_completed


def test_h_a_follower_counts_up_to_the_log_end_offset(h):
    follower = h.park([status("p0", 0)], replica_id=1)
    consumer = h.park([status("p0", 0)])
    assert h.append("p0", commit=False) == 1  # LEO moved, HW did not
    assert follower.completion_reason is FetchCompletion.MIN_BYTES
    assert not consumer.is_completed
    h.partitions["p0"].high_watermark = 1
    assert h.purgatory.check_and_complete("p0") == 1
    assert consumer.completion_reason is FetchCompletion.MIN_BYTES


def test_h_a_high_watermark_move_alone_does_not_complete_a_follower_fetch(h):
    p0 = h.partitions["p0"]
    p0.append(records=3, commit=False)
    fetch = h.park([status("p0", 3)], replica_id=1)  # caught up with the LEO
    p0.high_watermark = 3
    assert h.purgatory.check_and_complete("p0") == 0
    assert not fetch.is_completed


def test_h_read_committed_waits_for_the_last_stable_offset(h):
    p0 = h.partitions["p0"]
    p0.last_stable_offset = 0
    fetch = h.park([status("p0", 0)], isolation_level=IsolationLevel.READ_COMMITTED)
    assert h.append("p0") == 0  # HW 1, LSO still 0 (open transaction)
    p0.last_stable_offset = 1
    assert h.purgatory.check_and_complete("p0") == 1
    assert fetch.completion_reason is FetchCompletion.MIN_BYTES


# -- expiry, exactly once, races -----------------------------------------------------------------------


def test_expiry_answers_with_what_there_is(h):
    fetch = h.park([status("p0", 0)], min_bytes=1000, max_wait_ms=500)
    assert h.append("p0") == 0
    h.scheduler.advance_ms(499)
    assert h.responses == []
    h.scheduler.advance_ms(1)
    assert_answered_once(h, fetch, FetchCompletion.EXPIRED)
    assert fetch.is_expired
    assert h.responses == [{"p0": 1, "p1": 0}]
    assert h.expirations == [False]  # consumer fetcher type
    assert h.purgatory.expirations == 1


def test_expiry_of_a_follower_fetch_marks_the_follower_meter(h):
    registry = CollectorRegistry()
    metrics = DelayedFetchMetrics(registry)
    fetch = h.fetch([status("p0", 0)], replica_id=1, expiration_meter=metrics.record_expiration)
    h.purgatory.try_complete_else_watch(fetch, fetch.watch_keys)
    h.scheduler.advance_ms(500)
    assert registry.get_sample_value(f"{FETCH_EXPIRES}_total", {"fetcherType": "follower"}) == 1
    assert registry.get_sample_value(f"{FETCH_EXPIRES}_total", {"fetcherType": "consumer"}) == 0


def test_read_happens_before_the_response(h):
    order: list[str] = []
    fetch = DelayedFetch(
        FetchParams(CONSUMER_REPLICA_ID, 500, 1, 1000),
        500,
        [status("p0", 0)],
        lambda: order.append("read") or "result",
        lambda result: order.append(f"respond {result}"),
        get_partition=h.partitions.get,
    )
    h.purgatory.try_complete_else_watch(fetch, fetch.watch_keys)
    h.append("p0")
    assert order == ["read", "respond result"]


def test_completion_and_expiry_at_the_same_tick_answer_once(h):
    h.scheduler.call_later(0.5, lambda: h.append("p0"))  # lands at the deadline, before the timer
    first = h.park([status("p0", 0)])
    h.scheduler.advance_ms(500)
    assert first.completion_reason is FetchCompletion.MIN_BYTES and not first.is_expired
    second = h.park([status("p0", 1)])
    h.scheduler.call_later(0.5, lambda: h.append("p0"))  # same deadline, after the timer
    h.scheduler.advance_ms(500)
    assert second.completion_reason is FetchCompletion.EXPIRED
    assert len(h.responses) == 2 and h.reads == 2
    assert first.force_complete() is False and second.force_complete() is False
    assert len(h.responses) == 2


def test_append_between_first_check_and_watch_is_not_missed(h):
    """The bug another broker had: the append lands after the first read, before the watch."""
    p0 = h.partitions["p0"]
    checks = {"n": 0}
    real_end_offset_for = p0.end_offset_for

    def end_offset_for(isolation_level: IsolationLevel, is_follower: bool) -> int:
        checks["n"] += 1
        end = real_end_offset_for(isolation_level, is_follower)
        if checks["n"] == 1:  # the first check has its end offset; now the append lands
            assert h.append("p0") == 0  # nobody watches p0 yet
        return end

    p0.end_offset_for = end_offset_for  # type: ignore[method-assign]
    fetch = h.park([status("p0", 0)])
    assert checks["n"] == 2
    assert_answered_once(h, fetch, FetchCompletion.MIN_BYTES)
    assert h.scheduler.time() == 0  # answered without waiting for the deadline


def test_forced_completion_answers(h):
    fetch = h.park([status("p0", 0)])
    assert fetch.force_complete() is True
    assert_answered_once(h, fetch, FetchCompletion.FORCED)


def test_shutdown_answers_parked_fetches(h):
    fetches = [h.park([status("p0", 0)]), h.park([status("p1", 0)])]
    assert h.purgatory.shutdown() == 2
    assert all(f.completion_reason is FetchCompletion.EXPIRED for f in fetches)
    assert len(h.responses) == 2


# -- session waiter (I) -------------------------------------------------------------------------------


def session_with(*keys: TopicPartitionKey) -> tuple[FetchSession, list[Any]]:
    session = FetchSession(SessionId(7), privileged=False, uses_topic_ids=False, now_ms=0)
    cached = [session.append(key, PartitionFetchParams(fetch_offset=0, max_bytes=1000)) for key in keys]
    return session, cached


def tpk(partition: int) -> TopicPartitionKey:
    return TopicPartitionKey(ZERO_UUID, "t", partition)


def test_i_idle_session_fetch_wakes_through_the_session_waiter(h):
    session, cached = session_with(tpk(0), tpk(1))
    fetch = h.park([], session=session)
    assert not fetch.is_completed
    assert session.waiter == fetch.wake
    assert h.purgatory.num_delayed == 1 and h.purgatory.watched == 0
    session.partition_changed(cached[1])
    assert_answered_once(h, fetch, FetchCompletion.SESSION_WAKE)
    assert session.waiter is None
    session.partition_changed(cached[0])  # no waiter left: nothing happens
    assert len(h.responses) == 1


def test_i_session_partitions_are_checked_with_the_usual_rules(h):
    session, cached = session_with(tpk(0))
    h.partitions[tpk(0)] = FakePartition()
    dirty: list[FetchPartitionStatus] = []
    fetch = h.park([], session=session, session_partitions=lambda: list(dirty), min_bytes=200)
    dirty.append(status(tpk(0), 0))
    h.partitions[tpk(0)].append()
    session.partition_changed(cached[0])
    assert not fetch.is_completed  # 100 bytes < 200
    h.partitions[tpk(0)].append()
    session.partition_changed(cached[0])
    assert_answered_once(h, fetch, FetchCompletion.MIN_BYTES)
    assert session.waiter is None


def test_i_wake_between_first_check_and_watch_is_not_missed(h):
    """The waiter is installed before the second check, so a change in between is seen."""
    session, cached = session_with(tpk(0))
    h.partitions[tpk(0)] = FakePartition()
    dirty: list[FetchPartitionStatus] = []

    def session_partitions() -> list[FetchPartitionStatus]:
        if not dirty:  # first check: the partition changes right after we looked
            dirty.append(status(tpk(0), 0))
            h.partitions[tpk(0)].append()
            session.partition_changed(cached[0])  # no waiter yet
            return []
        return list(dirty)

    fetch = h.park([], session=session, session_partitions=session_partitions)
    assert_answered_once(h, fetch, FetchCompletion.MIN_BYTES)


def test_i_expiry_removes_the_waiter(h):
    session, _ = session_with(tpk(0))
    fetch = h.park([], session=session)
    h.scheduler.advance_ms(500)
    assert fetch.completion_reason is FetchCompletion.EXPIRED
    assert session.waiter is None


def test_i_a_newer_waiter_is_left_alone(h):
    session, _ = session_with(tpk(0))
    fetch = h.park([], session=session)

    def newer() -> None:
        return None

    session.waiter = newer
    fetch.force_complete()
    assert session.waiter is newer


def test_i_keys_and_session_together(h):
    session, cached = session_with(tpk(0))
    fetch = h.park([status("p0", 0)], session=session, min_bytes=1)
    assert h.purgatory.watchers_of("p0") == 1
    assert h.append("p0") == 1
    assert fetch.completion_reason is FetchCompletion.MIN_BYTES
    assert session.waiter is None
    session.partition_changed(cached[0])
    assert len(h.responses) == 1


# -- on a real event loop -------------------------------------------------------------------------------


async def test_real_loop_completes_early_on_an_event_and_expires_at_the_deadline():
    loop = asyncio.get_running_loop()
    purgatory = DelayedOperationPurgatory("Fetch", loop)
    partitions = {"early": FakePartition(), "late": FakePartition()}
    answered: dict[str, asyncio.Future[float]] = {"early": loop.create_future(), "late": loop.create_future()}

    def park(name: str, offset: int) -> DelayedFetch[float]:
        fetch = DelayedFetch(
            FetchParams(CONSUMER_REPLICA_ID, 50, 1, 1000),
            50,
            [status(name, offset)],
            loop.time,
            answered[name].set_result,
            get_partition=partitions.get,
        )
        purgatory.try_complete_else_watch(fetch, fetch.watch_keys)
        return fetch

    start = loop.time()
    early = park("early", 0)
    late = park("late", 0)

    def append() -> None:
        partitions["early"].append()
        purgatory.check_and_complete("early")
        purgatory.check_and_complete("late")  # nothing there: keeps waiting

    loop.call_later(0.01, append)
    early_at = await asyncio.wait_for(answered["early"], 1)
    assert early.completion_reason is FetchCompletion.MIN_BYTES and not early.is_expired
    assert not answered["late"].done()
    late_at = await asyncio.wait_for(answered["late"], 1)
    assert late.completion_reason is FetchCompletion.EXPIRED
    assert start < early_at < late_at
    assert late_at - start >= 0.04  # answered at (about) the deadline, not before
    assert purgatory.num_delayed == 0 and purgatory.expirations == 1


def test_c_a_consumer_ahead_of_a_lagging_high_watermark_keeps_waiting(h):
    """HW 3, LEO 5, fetch offset 4: nothing was truncated, so the fetch waits (Kafka's rule)."""
    p0 = h.partitions["p0"]
    p0.append(records=3)
    p0.high_watermark = 3
    p0.log_end_offset = 5
    fetch = h.park([status("p0", 4)])
    assert h.purgatory.check_and_complete("p0") == 0
    assert not fetch.is_completed
