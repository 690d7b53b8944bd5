"""Errors in the fetcher: backoff, delayed partitions, fenced epochs, corrupt data, failed partitions.

Each test names the AbstractFetcherThreadTest case it mirrors (kafka-behaviour.md section 10).
"""

from __future__ import annotations

import asyncio

import pytest
from structlog.testing import capture_logs

from follower.fetch_state import MonotonicClock, ReplicaState
from follower.replica_log import ReplicaLog
from protocol.error_codes import ErrorCode
from storage.errors import KiplingStorageError, LogDirFullError
from tests.follower.fake_leader import FakeLeader
from tests.follower.helpers import BACKOFF_MS, Harness, assert_replica_matches

TP0 = ("topic", 0)
TP1 = ("topic", 1)
TP2 = ("topic", 2)


async def test_delay(tmp_path) -> None:
    """testDelay: when every partition errors, the next round waits for the backoff."""
    backoff_ms = 150
    h = Harness(tmp_path, clock=MonotonicClock(), backoff_ms=backoff_ms)
    for tp in (TP0, TP1):
        h.replica(tp)
        h.leader_log(tp, [(0, 1)])
        h.add(tp, leader_epoch=0)
        h.leader.fetch_errors[tp].append(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)

    await h.fetcher.do_work()
    assert all(h.fetcher.fetch_state(tp).is_delayed(h.clock.time_ms()) for tp in (TP0, TP1))
    loop = asyncio.get_running_loop()
    started = loop.time()
    await h.fetcher.do_work()
    assert loop.time() - started >= backoff_ms / 1000
    assert len(h.leader.requests) == 1

    await h.fetcher.do_work()  # the delay is over: fetched again
    assert len(h.leader.requests) == 2
    assert h.logs[TP0].log_end_offset == 1


@pytest.mark.parametrize(
    "error",
    [
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.KAFKA_STORAGE_ERROR,
        ErrorCode.UNKNOWN_LEADER_EPOCH,
        ErrorCode.CORRUPT_MESSAGE,
        ErrorCode.UNKNOWN_SERVER_ERROR,
    ],
)
async def test_partitions_in_error(tmp_path, error) -> None:
    """testPartitionsInError: only the partition that errored is delayed, the others fetch on."""
    h = Harness(tmp_path)
    for tp in (TP0, TP1, TP2):
        h.replica(tp)
        h.leader_log(tp, [(0, 2)])
        h.add(tp, leader_epoch=0)
    h.leader.fetch_errors[TP1].append(error)

    await h.fetcher.do_work()

    now = h.clock.time_ms()
    assert h.fetcher.fetch_state(TP1).is_delayed(now)
    assert h.fetcher.fetch_state(TP1).fetch_offset == 0
    assert not h.fetcher.failed_partitions
    for tp in (TP0, TP2):
        assert h.fetcher.fetch_state(tp).is_ready_for_fetch(now)
        assert h.logs[tp].log_end_offset == 2

    await h.fetcher.do_work()  # still delayed: not in the request
    assert TP1 not in h.leader.requests[-1].partitions
    h.advance_past_backoff()
    await h.fetcher.do_work()
    assert h.logs[TP1].log_end_offset == 2


async def test_a_delayed_partition_keeps_its_deadline(tmp_path) -> None:
    """5.3: a partition that is already delayed is not delayed again (the timer is not extended)."""
    h = Harness(tmp_path)
    h.replica(TP0)
    h.leader_log(TP0, [(0, 1)])
    h.add(TP0, leader_epoch=0)
    h.leader.fetch_errors[TP0].append(ErrorCode.NOT_LEADER_OR_FOLLOWER)
    await h.fetcher.do_work()
    deadline = h.fetcher.fetch_state(TP0).delayed_until_ms

    h.clock.advance(BACKOFF_MS // 2)
    h.fetcher._delay([TP0])

    assert h.fetcher.fetch_state(TP0).delayed_until_ms == deadline


async def test_fenced_truncation(tmp_path) -> None:
    """testFencedTruncation: FENCED_LEADER_EPOCH in OffsetForLeaderEpoch → the partition fails."""
    h = Harness(tmp_path, FakeLeader(supports_truncation_on_fetch=False))
    replica = h.replica(TP0, [(0, 1), (0, 1)], high_watermark=1)
    h.replica(TP1, [(0, 1), (0, 1)])
    h.leader_log(TP0, [(0, 1), (0, 1), (0, 1)], leader_epoch=1)
    h.leader_log(TP1, [(0, 1), (0, 1), (0, 1)], leader_epoch=0)
    h.add(TP0, leader_epoch=0)
    h.add(TP1, leader_epoch=0)

    await h.fetcher.do_work()

    assert TP0 in h.fetcher.failed_partitions
    assert TP0 not in h.fetcher.partitions
    assert (replica.log_end_offset, replica.high_watermark) == (2, 1)
    assert h.logs[TP1].log_end_offset == 3
    assert h.sample("kafka_server_replicafetchermanager_failedpartitionscount", client_id=h.fetcher.name) == 1


async def test_fenced_fetch(tmp_path) -> None:
    """testFencedFetch: FENCED_LEADER_EPOCH in a fetch response with an unchanged epoch → failed."""
    h = Harness(tmp_path)
    replica = h.replica(TP0, [(0, 1)], high_watermark=1)
    h.leader_log(TP0, [(0, 1), (0, 2)], leader_epoch=1)
    h.add(TP0, leader_epoch=0)
    assert h.fetcher.fetch_state(TP0).state is ReplicaState.FETCHING

    await h.fetcher.do_work()

    assert h.fetcher.failed_partitions == {TP0}
    assert h.fetcher.fetch_state(TP0) is None
    assert (replica.log_end_offset, replica.high_watermark) == (1, 1)

    h.add(TP0, leader_epoch=1)  # new metadata: fetching again
    assert not h.fetcher.failed_partitions
    await h.work_until_idle()
    assert replica.log_end_offset == 3


async def test_fenced_fetch_after_the_epoch_moved_on_is_ignored(tmp_path) -> None:
    """A FENCED answer to a request made with an older epoch than the partition's present one."""
    h = Harness(tmp_path)
    h.replica(TP0, [(0, 1)])
    leader = h.leader_log(TP0, [(0, 1), (0, 2)], leader_epoch=1)
    h.add(TP0, leader_epoch=0)

    def new_epoch() -> None:
        h.leader.on_fetch = None
        h.add(TP0, leader_epoch=1)

    h.leader.on_fetch = new_epoch
    await h.fetcher.do_work()

    assert not h.fetcher.failed_partitions
    assert h.fetcher.fetch_state(TP0).current_leader_epoch == 1
    await h.work_until_idle()
    assert_replica_matches(h.logs[TP0], leader)


async def test_unknown_leader_epoch_in_truncation(tmp_path) -> None:
    """testUnknownLeaderEpochInTruncation: the follower's epoch is ahead of the leader's."""
    h = Harness(tmp_path, FakeLeader(supports_truncation_on_fetch=False))
    replica = h.replica(TP0, [(0, 1)])
    leader = h.leader_log(TP0, [(1, 1)], leader_epoch=4)
    h.add(TP0, leader_epoch=5, init_offset=0)

    await h.fetcher.do_work()
    state = h.fetcher.fetch_state(TP0)
    assert state.state is ReplicaState.TRUNCATING
    assert state.is_delayed(h.clock.time_ms())
    assert replica.log_end_offset == 1

    leader.become_leader(5)
    h.advance_past_backoff()
    await h.fetcher.do_work()
    assert h.fetcher.fetch_state(TP0).state is ReplicaState.FETCHING
    assert replica.log_end_offset == 1
    assert_replica_matches(replica, leader)


async def test_unknown_leader_epoch_while_fetching(tmp_path) -> None:
    """testUnknownLeaderEpochWhileFetching: stuck at the same offset until the epochs match."""
    h = Harness(tmp_path)
    replica = h.replica(TP0, [(0, 1)])
    leader = h.leader_log(TP0, [(0, 1), (0, 2)], leader_epoch=4)
    h.add(TP0, leader_epoch=5)

    for _ in range(3):
        await h.fetcher.do_work()
        h.advance_past_backoff()
        assert h.fetcher.fetch_state(TP0).fetch_offset == 1
        assert replica.log_end_offset == 1
    assert not h.fetcher.failed_partitions

    leader.become_leader(5)
    await h.work_until_idle()
    assert_replica_matches(replica, leader)


async def test_corrupt_message(tmp_path) -> None:
    """testCorruptMessage: a batch failing its CRC delays the partition; the next round succeeds."""
    h = Harness(tmp_path)
    replica = h.replica(TP0)
    leader = h.leader_log(TP0, [(0, 2), (0, 1)])
    h.add(TP0, leader_epoch=0)
    h.leader.corrupt_next.add(TP0)

    await h.fetcher.do_work()

    assert replica.log_end_offset == 0
    assert not h.fetcher.failed_partitions
    assert h.fetcher.fetch_state(TP0).is_delayed(h.clock.time_ms())
    h.advance_past_backoff()
    await h.fetcher.do_work()
    assert_replica_matches(replica, leader)


class _FailingLog(ReplicaLog):
    """A follower log whose disk fails on append or on truncation, or is full."""

    fail_append = False
    fail_truncate = False
    full = False

    def append_as_follower(self, records):
        if self.fail_append:
            raise KiplingStorageError("disk gone")
        if self.full:
            raise LogDirFullError(self.log.directory)
        return super().append_as_follower(records)

    def truncate_to(self, offset):
        if self.fail_truncate:
            raise KiplingStorageError("disk gone")
        return super().truncate_to(offset)


@pytest.mark.parametrize("during", ["appending", "truncation"])
async def test_fetcher_thread_handling_partition_failure(tmp_path, during) -> None:
    """testFetcherThreadHandlingPartitionFailureDuring{Appending,Truncation}.

    The failing partition is marked failed and the others keep going; re-adding it (leader change)
    clears the mark and restarts it at TRUNCATING.
    """
    h = Harness(tmp_path, FakeLeader(supports_truncation_on_fetch=False))
    failing = _FailingLog(h.replica(TP0, [(0, 1)]).log)
    h.logs[TP0] = failing
    failing.fail_append = during == "appending"
    failing.fail_truncate = during == "truncation"
    h.replica(TP1, [(0, 1)])
    for tp in (TP0, TP1):
        h.leader_log(tp, [(0, 1), (0, 2)], leader_epoch=0)
        h.add(tp, leader_epoch=0)

    await h.fetcher.do_work()

    assert h.fetcher.failed_partitions == {TP0}
    assert failing.log_end_offset == 1
    assert h.logs[TP1].log_end_offset == 3

    failing.fail_append = failing.fail_truncate = False
    h.leader.logs[TP0].become_leader(1)
    h.add(TP0, leader_epoch=1)
    assert not h.fetcher.failed_partitions
    assert h.fetcher.fetch_state(TP0).state is ReplicaState.TRUNCATING
    await h.work_until_idle()
    assert_replica_matches(failing, h.leader.logs[TP0])


async def test_unexpected_append_offset_fails_the_partition(tmp_path) -> None:
    """Batches that start below the log end offset (offsets must continue) → the partition fails."""
    h = Harness(tmp_path)
    h.replica(TP0, [(0, 1), (0, 1)])
    h.leader_log(TP0, [(0, 3)])  # one batch 0..2: the follower's 0 and 1 were different batches
    h.add(TP0, leader_epoch=0)

    await h.fetcher.do_work()

    assert h.fetcher.failed_partitions == {TP0}
    assert h.logs[TP0].log_end_offset == 2


async def test_fetch_failure_delays_every_requested_partition(tmp_path) -> None:
    """5.3: the whole request failed → every partition is delayed; then retried."""
    h = Harness(tmp_path)
    for tp in (TP0, TP1):
        h.replica(tp)
        h.leader_log(tp, [(0, 1)])
        h.add(tp, leader_epoch=0)
    h.leader.fetch_failures.append(ConnectionResetError("leader went away"))

    await h.fetcher.do_work()

    now = h.clock.time_ms()
    assert all(h.fetcher.fetch_state(tp).is_delayed(now) for tp in (TP0, TP1))
    assert h.sample("kafka_server_fetcherstats_requestfailures_total", client_id=h.fetcher.name) == 1
    h.advance_past_backoff()
    await h.fetcher.do_work()
    assert h.logs[TP0].log_end_offset == h.logs[TP1].log_end_offset == 1


async def test_offset_for_leader_epoch_failure_delays_the_truncating_partitions(tmp_path) -> None:
    h = Harness(tmp_path, FakeLeader(supports_truncation_on_fetch=False))
    h.replica(TP0, [(0, 1)])
    h.leader_log(TP0, [(0, 1), (0, 1)])
    h.add(TP0, leader_epoch=0)
    h.leader.epoch_errors[TP0].append(ErrorCode.NOT_LEADER_OR_FOLLOWER)

    await h.fetcher.maybe_truncate()

    state = h.fetcher.fetch_state(TP0)
    assert state.state is ReplicaState.TRUNCATING and state.is_delayed(h.clock.time_ms())
    h.advance_past_backoff()
    await h.work_until_idle()
    assert_replica_matches(h.logs[TP0], h.leader.logs[TP0])


async def test_a_response_for_an_older_fetch_offset_is_ignored(tmp_path) -> None:
    """5.3: a response partition is applied only if it answers the partition's present state."""
    h = Harness(tmp_path)
    replica = h.replica(TP0)
    leader = h.leader_log(TP0, [(0, 2)], leader_epoch=0)
    h.add(TP0, leader_epoch=0)
    await h.fetcher.do_work()
    assert replica.log_end_offset == 2

    def readded_at_another_offset() -> None:
        h.leader.on_fetch = None
        h.fetcher.remove_partitions([TP0])
        h.add(TP0, leader_epoch=0, init_offset=1)

    leader.append(1)
    h.leader.on_fetch = readded_at_another_offset
    await h.fetcher.do_work()

    assert replica.log_end_offset == 2
    assert h.fetcher.fetch_state(TP0).fetch_offset == 1


async def test_a_full_disk_delays_the_partition_and_is_logged_once_per_episode(tmp_path) -> None:
    """ENOSPC is not a failed disk: the partition backs off and retries (never marked failed), one
    warning when the disk fills and one line when space returns, not one per retry."""
    h = Harness(tmp_path)
    full = _FailingLog(h.replica(TP0).log)
    h.logs[TP0] = full
    full.full = True
    h.leader_log(TP0, [(0, 1), (0, 2)], leader_epoch=0)
    h.add(TP0, leader_epoch=0)

    with capture_logs() as logs:
        for _ in range(3):
            await h.fetcher.do_work()
            assert h.fetcher.fetch_state(TP0).is_delayed(h.clock.time_ms())
            h.advance_past_backoff()
        full.full = False
        await h.work_until_idle()

    assert not h.fetcher.failed_partitions
    assert_replica_matches(full, h.leader.logs[TP0])
    events = [entry["event"] for entry in logs if entry.get("partition") == 0]
    assert (
        events.count("no space left for the leader's batches; retrying after backoff until space returns")
        == 1
    )
    assert events.count("space returned: appending the leader's batches again") == 1
