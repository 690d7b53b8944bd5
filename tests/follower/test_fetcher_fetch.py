"""Fetching: append, HW and log start from the leader, fetch order, the changed set, metrics, the loop."""

from __future__ import annotations

import asyncio

import pytest

from follower.fetch_state import InitialFetchState, ReplicaState
from follower.leader_endpoint import EpochEndOffset
from protocol.error_codes import ErrorCode
from tests.follower.fake_leader import FakeLeader
from tests.follower.helpers import CLIENT_ID, Harness, assert_replica_matches

TP0 = ("topic", 0)
TP1 = ("topic", 1)
TP2 = ("topic", 2)


async def test_fetch_appends_and_follows_the_leaders_high_watermark_and_log_start(tmp_path) -> None:
    h = Harness(tmp_path, FakeLeader(max_batches=1))
    replica = h.replica(TP0)
    leader = h.leader_log(TP0, [(0, 2), (0, 3), (1, 1)], leader_epoch=1)
    leader.fixed_high_watermark = 5
    h.add(TP0, leader_epoch=1)

    await h.fetcher.do_work()

    state = h.fetcher.fetch_state(TP0)
    assert (replica.log_end_offset, replica.high_watermark) == (2, 2), "the HW is clamped to the LEO"
    assert (state.fetch_offset, state.lag, state.last_fetched_epoch) == (2, 3, 0)
    await h.fetcher.do_work()
    await h.fetcher.do_work()
    assert (replica.log_end_offset, replica.high_watermark) == (6, 5)
    assert h.fetcher.fetch_state(TP0).lag == 0
    assert h.fetcher.fetch_state(TP0).last_fetched_epoch == 1
    assert h.fetcher.fetch_state(TP0).is_in_sync

    leader.increment_log_start_offset(2)
    await h.fetcher.do_work()
    assert replica.log_start_offset == 2
    assert_replica_matches(replica, leader)


async def test_lag_is_updated_when_no_records(tmp_path) -> None:
    """ReplicaFetcherThreadTest testLagIsUpdatedWhenNoRecords."""
    h = Harness(tmp_path)
    h.replica(TP0, [(0, 2)])
    h.leader_log(TP0, [(0, 2)])
    h.add(TP0, leader_epoch=0)
    assert h.fetcher.fetch_state(TP0).lag is None

    await h.fetcher.do_work()

    assert h.fetcher.fetch_state(TP0).lag == 0
    assert (
        h.sample(
            "kafka_server_fetcherlagmetrics_consumerlag", client_id=CLIENT_ID, topic="topic", partition="0"
        )
        == 0
    )


async def test_partitions_that_received_data_move_to_the_end(tmp_path) -> None:
    """Fairness: a partition that got records goes behind the others in the next request."""
    h = Harness(tmp_path)
    for tp in (TP0, TP1, TP2):
        h.replica(tp)
        h.leader_log(tp)
        h.add(tp, leader_epoch=0)
    h.leader.logs[TP0].append(1)

    await h.fetcher.do_work()
    await h.fetcher.do_work()

    assert list(h.leader.requests[0].partitions) == [TP0, TP1, TP2]
    assert list(h.leader.requests[1].partitions) == [TP1, TP2, TP0]


async def test_only_changed_partitions_are_offered_as_changed(tmp_path) -> None:
    """DESIGN "The follower side too" (ReplicaFetcherThreadTest testBuildFetch): O(changed) requests."""
    h = Harness(tmp_path)
    for tp in (TP0, TP1, TP2):
        h.replica(tp)
        h.leader_log(tp)
        h.add(tp, leader_epoch=0)

    await h.fetcher.do_work()
    assert h.leader.changed_sets[-1] == {TP0, TP1, TP2}, "all new"
    await h.fetcher.do_work()
    assert h.leader.changed_sets[-1] == set(), "nothing moved"

    h.leader.logs[TP1].append(2)
    await h.fetcher.do_work()
    assert h.leader.changed_sets[-1] == set(), "the data arrives in this response"
    await h.fetcher.do_work()
    assert h.leader.changed_sets[-1] == {TP1}, "its fetch offset moved"

    h.fetcher.remove_partitions([TP2])
    h.leader.fetch_errors[TP0].append(ErrorCode.NOT_LEADER_OR_FOLLOWER)
    await h.fetcher.do_work()
    assert h.leader.changed_sets[-1] == {TP2}, "removed"
    await h.fetcher.do_work()
    assert h.leader.changed_sets[-1] == {TP0}, "delayed, so left out"
    h.advance_past_backoff()
    await h.fetcher.do_work()
    assert h.leader.changed_sets[-1] == {TP0}, "back after the delay"
    assert set(h.leader.requests[-1].partitions) == {TP0, TP1}


async def test_a_truncating_partition_is_left_out_of_the_fetch(tmp_path) -> None:
    h = Harness(tmp_path, FakeLeader(supports_truncation_on_fetch=False))
    h.replica(TP0, [(0, 1)])
    h.replica(TP1, [(0, 1)])
    for tp in (TP0, TP1):
        h.leader_log(tp, [(0, 1)])
    h.add(TP0, leader_epoch=0)
    h.add(TP1, leader_epoch=0)
    h.leader.epoch_errors[TP1].append(ErrorCode.NOT_LEADER_OR_FOLLOWER)

    await h.fetcher.do_work()

    assert h.fetcher.fetch_state(TP1).state is ReplicaState.TRUNCATING
    assert set(h.leader.requests[-1].partitions) == {TP0}


async def test_last_fetched_epoch_is_sent_only_with_truncation_on_fetch(tmp_path) -> None:
    for on_fetch in (True, False):
        h = Harness(tmp_path / str(on_fetch), FakeLeader(supports_truncation_on_fetch=on_fetch))
        h.replica(TP0, [(3, 1)])
        h.leader_log(TP0, [(3, 1)], leader_epoch=3)
        h.add(TP0, leader_epoch=3)
        await h.work_until_idle()
        params = h.leader.requests[-1].partitions[TP0]
        assert params.last_fetched_epoch == (3 if on_fetch else None)
        assert (params.fetch_offset, params.log_start_offset, params.current_leader_epoch) == (1, 0, 3)


async def test_add_partitions_initial_state(tmp_path) -> None:
    """5.2: FETCHING with the local latest epoch if the log has epochs, else TRUNCATING."""
    h = Harness(tmp_path)
    h.replica(TP0, [(2, 1)])
    h.replica(TP1)
    h.add(TP0, leader_epoch=3)
    h.add(TP1, leader_epoch=3)

    assert h.fetcher.fetch_state(TP0).state is ReplicaState.FETCHING
    assert h.fetcher.fetch_state(TP0).last_fetched_epoch == 2
    assert h.fetcher.fetch_state(TP1).state is ReplicaState.TRUNCATING
    with pytest.raises(ValueError, match="negative"):
        h.fetcher.add_partitions({TP1: InitialFetchState(-1, 3)})
    with pytest.raises(KeyError, match="no local log"):
        h.fetcher.add_partitions({TP2: InitialFetchState(0, 3)})


async def test_remove_partitions_returns_their_states(tmp_path) -> None:
    h = Harness(tmp_path)
    h.replica(TP0, [(0, 1)])
    h.leader_log(TP0, [(0, 1), (0, 1)])
    h.add(TP0, leader_epoch=0)
    await h.fetcher.do_work()

    removed = h.fetcher.remove_partitions([TP0, TP1])

    assert list(removed) == [TP0]
    assert removed[TP0].fetch_offset == 2
    assert h.fetcher.partition_count == 0
    assert (
        h.sample(
            "kafka_server_fetcherlagmetrics_consumerlag", client_id=CLIENT_ID, topic="topic", partition="0"
        )
        is None
    )


async def test_metrics(tmp_path) -> None:
    h = Harness(tmp_path)
    h.replica(TP0)
    leader = h.leader_log(TP0, [(0, 3)])
    h.add(TP0, leader_epoch=0)

    await h.fetcher.do_work()

    assert h.sample("kafka_server_fetcherstats_requestspersec_total", client_id=CLIENT_ID) == 1
    assert h.sample("kafka_server_fetcherstats_bytespersec_total", client_id=CLIENT_ID) == len(
        leader.bytes_from(0)
    )
    assert h.sample("kafka_server_fetcherstats_requestlatency_seconds_count", client_id=CLIENT_ID) == 1
    assert h.sample("kafka_server_replicafetchermanager_failedpartitionscount", client_id=CLIENT_ID) == 0


async def test_run_fetches_until_stopped_and_wakes_when_partitions_are_added(tmp_path) -> None:
    """The loop waits on partition changes, not a sleep: an added partition wakes it before the backoff."""
    h = Harness(tmp_path, FakeLeader(long_poll_s=0.01), backoff_ms=60_000)
    replica = h.replica(TP0)
    leader = h.leader_log(TP0, [(0, 2)])
    stop = asyncio.Event()
    task = asyncio.create_task(h.fetcher.run(stop))
    await asyncio.sleep(0.05)  # idle: no partitions, waiting for changes
    assert h.leader.requests == []

    h.add(TP0, leader_epoch=0)
    await _until(lambda: replica.log_end_offset == 2)
    leader.append(3)
    await _until(lambda: replica.log_end_offset == 5)

    h.fetcher.remove_partitions([TP0])
    await asyncio.sleep(0.05)  # idle again, inside a 60 s backoff
    stop.set()
    await asyncio.wait_for(task, 1)
    assert_replica_matches(replica, leader)


async def test_run_survives_an_unexpected_error(tmp_path) -> None:
    h = Harness(tmp_path, FakeLeader(long_poll_s=0.01, supports_truncation_on_fetch=False), backoff_ms=20)
    replica = h.replica(TP0, [(0, 1)])
    h.leader_log(TP0, [(0, 1), (0, 1)])
    h.leader.extra_epoch_results[TP1] = EpochEndOffset()  # makes every truncation round raise
    h.add(TP0, leader_epoch=0)
    stop = asyncio.Event()
    task = asyncio.create_task(h.fetcher.run(stop))
    await asyncio.sleep(0.05)
    assert not task.done()
    assert 1 <= len(h.leader.epoch_requests) <= 4, "backs off between failing rounds"

    h.leader.extra_epoch_results.clear()
    h.clock.advance(1000)
    await _until(lambda: replica.log_end_offset == 2)
    stop.set()
    await asyncio.wait_for(task, 1)


async def _until(condition, timeout: float = 2.0) -> None:
    async with asyncio.timeout(timeout):
        while not condition():
            await asyncio.sleep(0.005)
