"""Truncation by the fetcher: OffsetForLeaderEpoch, the HW fallback, diverging epochs, out-of-range resets.

Each test names the AbstractFetcherThreadTest case it mirrors (kafka-behaviour.md section 10).
"""

from __future__ import annotations

import pytest

from follower.fetch_state import ReplicaState
from follower.fetcher import FetcherStateError
from follower.leader_endpoint import EpochEndOffset
from protocol.error_codes import ErrorCode
from tests.follower.fake_leader import FakeLeader
from tests.follower.helpers import Harness, assert_replica_matches, replica_epochs

TP = ("topic", 0)
TP1 = ("topic", 1)


@pytest.mark.parametrize("truncation_on_fetch", [False, True])
async def test_truncation(tmp_path, truncation_on_fetch) -> None:
    """testTruncation: a follower that diverged (epoch 3, never committed) ends up equal to the leader."""
    h = Harness(tmp_path, FakeLeader(supports_truncation_on_fetch=truncation_on_fetch))
    replica = h.replica(TP, [(1, 2), (3, 2)], high_watermark=2)
    leader = h.leader_log(TP, [(1, 2), (2, 3), (5, 1)], leader_epoch=5)
    h.add(TP, leader_epoch=5)

    await h.work_until_idle()

    assert_replica_matches(replica, leader)
    assert h.fetcher.fetch_state(TP).state is ReplicaState.FETCHING
    assert h.fetcher.fetch_state(TP).fetch_offset == leader.log_end_offset


async def test_truncation_takes_two_rounds_when_the_local_epoch_is_older(tmp_path) -> None:
    """5.4: the local epoch found for the leader's epoch differs → truncate there, ask again."""
    h = Harness(tmp_path, FakeLeader(supports_truncation_on_fetch=False))
    replica = h.replica(TP, [(1, 2), (3, 2)])
    h.leader_log(TP, [(1, 2), (2, 3)], leader_epoch=5)
    h.add(TP, leader_epoch=5, init_offset=0)

    await h.fetcher.maybe_truncate()
    # leader: epoch 3 → (2, 5); locally epoch 2 falls in epoch 1, which ends at 2: cut at 2, not done
    assert replica.log_end_offset == 2
    assert h.fetcher.fetch_state(TP).state is ReplicaState.TRUNCATING
    await h.fetcher.maybe_truncate()
    assert h.leader.epoch_requests[-1] == {TP: (5, 1)}
    assert h.fetcher.fetch_state(TP).state is ReplicaState.FETCHING
    assert replica.log_end_offset == 2


@pytest.mark.parametrize("epoch_request_supported", [False, True])
async def test_truncate_to_high_watermark_if_leader_epoch_info_missing(
    tmp_path, epoch_request_supported
) -> None:
    """testTruncateToHighWatermarkIfLeaderEpochRequestNotSupported / ...InfoNotAvailable."""
    leader = FakeLeader(
        supports_truncation_on_fetch=False, supports_offset_for_leader_epoch=epoch_request_supported
    )
    h = Harness(tmp_path, leader)
    # with the request supported, the local log has no epochs (batches written without one)
    epoch = -1 if epoch_request_supported else 0
    replica = h.replica(TP, [(epoch, 1), (epoch, 1), (epoch, 1)], high_watermark=1)
    h.leader_log(TP, [(0, 5)])
    h.add(TP, leader_epoch=0)
    assert h.fetcher.fetch_state(TP).fetch_offset == 1

    await h.fetcher.maybe_truncate()

    state = h.fetcher.fetch_state(TP)
    assert replica.log_end_offset == 1
    assert state.state is ReplicaState.FETCHING
    assert state.fetch_offset == 1
    assert state.is_ready_for_fetch(h.clock.time_ms())
    assert h.leader.epoch_requests == []


async def test_truncation_skipped_if_no_epoch_change(tmp_path) -> None:
    """testTruncationSkippedIfNoEpochChange: re-adding with the same leader epoch keeps the state."""
    h = Harness(tmp_path, FakeLeader(supports_truncation_on_fetch=False))
    replica = h.replica(TP, [(0, 3)])
    h.leader_log(TP, [(0, 3)], leader_epoch=1)
    h.add(TP, leader_epoch=1, init_offset=0)
    await h.fetcher.do_work()
    assert len(h.leader.epoch_requests) == 1
    state = h.fetcher.fetch_state(TP)
    assert state.state is ReplicaState.FETCHING

    h.add(TP, leader_epoch=1, init_offset=0)
    assert h.fetcher.fetch_state(TP) is state
    await h.fetcher.do_work()
    assert len(h.leader.epoch_requests) == 1
    assert replica.log_end_offset == 3

    h.add(TP, leader_epoch=2, init_offset=0)  # a new epoch does truncate again
    assert h.fetcher.fetch_state(TP).state is ReplicaState.TRUNCATING


@pytest.mark.parametrize("fenced", [False, True])
async def test_leader_epoch_change_during_fetch_epochs_from_leader(tmp_path, fenced) -> None:
    """testLeaderEpochChangeDuring{Fenced,Successful}FetchEpochsFromLeader: the stale result is ignored."""
    h = Harness(tmp_path, FakeLeader(supports_truncation_on_fetch=False))
    replica = h.replica(TP, [(0, 2), (1, 2)])
    leader = h.leader_log(TP, [(0, 2), (1, 2), (1, 1)], leader_epoch=2 if fenced else 1)

    def new_epoch_arrives() -> None:
        h.leader.on_fetch_epochs = None
        leader.become_leader(3)
        h.add(TP, leader_epoch=3, init_offset=0)

    h.add(TP, leader_epoch=1, init_offset=0)
    h.leader.on_fetch_epochs = new_epoch_arrives
    await h.fetcher.maybe_truncate()

    state = h.fetcher.fetch_state(TP)
    assert state.state is ReplicaState.TRUNCATING
    assert state.current_leader_epoch == 3
    assert TP not in h.fetcher.failed_partitions
    assert replica.log_end_offset == 4

    await h.work_until_idle()
    assert_replica_matches(replica, leader)


async def test_truncation_throws_if_leader_returns_partitions_not_requested(tmp_path) -> None:
    """testTruncationThrowsExceptionIfLeaderReturnsPartitionsNotRequestedInFetchEpochs."""
    h = Harness(tmp_path, FakeLeader(supports_truncation_on_fetch=False))
    h.replica(TP, [(0, 1)])
    h.leader_log(TP, [(0, 1)])
    h.add(TP, leader_epoch=0, init_offset=0)
    h.leader.extra_epoch_results[TP1] = EpochEndOffset(ErrorCode.NONE, 0, 1)

    with pytest.raises(FetcherStateError):
        await h.fetcher.maybe_truncate()


async def test_diverging_epochs(tmp_path) -> None:
    """testDivergingEpochs: a DivergingEpoch truncates only; the next fetch appends and moves the HW."""
    h = Harness(tmp_path, FakeLeader(records_with_divergence=True))
    replica = h.replica(TP, [(0, 3), (2, 2)], high_watermark=1)
    leader = h.leader_log(TP, [(0, 3), (1, 4)], leader_epoch=3)
    h.add(TP, leader_epoch=3)
    assert h.fetcher.fetch_state(TP).last_fetched_epoch == 2

    await h.fetcher.do_work()

    # leader: epoch 2 → (1, 7); locally epoch 1 falls in epoch 0 which ends at 3
    assert replica.log_end_offset == 3
    assert replica.high_watermark == 1, "no HW from a response with a diverging epoch"
    assert replica_epochs(replica) == [(0, 0)]
    state = h.fetcher.fetch_state(TP)
    assert (state.state, state.fetch_offset, state.last_fetched_epoch) == (ReplicaState.FETCHING, 3, 0)

    await h.fetcher.do_work()
    assert replica.log_end_offset == leader.log_end_offset
    assert replica.high_watermark == leader.high_watermark
    assert_replica_matches(replica, leader)


async def test_truncate_on_fetch_does_not_process_partition_data(tmp_path) -> None:
    """testTruncateOnFetchDoesNotProcessPartitionData: records sent with a DivergingEpoch are not appended."""
    h = Harness(tmp_path, FakeLeader(records_with_divergence=True))
    replica = h.replica(TP, [(0, 2), (1, 2)])
    leader = h.leader_log(TP, [(0, 2), (2, 3)], leader_epoch=2)
    leader.log_start_offset = 0
    h.add(TP, leader_epoch=2)

    await h.fetcher.do_work()

    assert replica.log_end_offset == 2
    assert replica.high_watermark == 0
    await h.work_until_idle()
    assert_replica_matches(replica, leader)


async def test_truncation_on_fetch_skipped_if_partition_removed_during_fetch(tmp_path) -> None:
    """testTruncationOnFetchSkippedIfPartitionRemoved: a removed partition is not truncated."""
    h = Harness(tmp_path)
    replica = h.replica(TP, [(0, 2), (1, 2)])
    h.leader_log(TP, [(0, 2), (2, 3)], leader_epoch=2)
    h.add(TP, leader_epoch=2)
    h.leader.on_fetch = lambda: h.fetcher.remove_partitions([TP])

    await h.fetcher.do_work()

    assert replica.log_end_offset == 4
    assert TP not in h.fetcher.partitions


async def test_truncation_on_fetch_skipped_if_partition_removed_while_handling_the_response(tmp_path) -> None:
    """The same, removed while another partition of the response awaits the leader (OOR reset)."""
    h = Harness(tmp_path)
    h.replica(TP, [(0, 3)])
    oor = h.leader_log(TP, [(0, 3)], leader_epoch=0)
    oor.truncate_to(0)  # empties the leader's epoch cache too: the follower's epoch is unknown → OOR
    replica1 = h.replica(TP1, [(0, 2), (1, 2)])
    h.leader_log(TP1, [(0, 2), (2, 3)], leader_epoch=2)
    h.add(TP, leader_epoch=0)
    h.add(TP1, leader_epoch=2)
    h.leader.on_list_offsets = lambda: h.fetcher.remove_partitions([TP1])

    await h.fetcher.do_work()

    assert replica1.log_end_offset == 4
    assert TP1 not in h.fetcher.partitions
    assert h.logs[TP].log_end_offset == 0


@pytest.mark.parametrize("truncation_on_fetch", [False, True])
async def test_follower_fetch_out_of_range_high(tmp_path, truncation_on_fetch) -> None:
    """testFollowerFetchOutOfRangeHigh: the leader's log ends below ours → truncate to its end."""
    h = Harness(tmp_path, FakeLeader(supports_truncation_on_fetch=truncation_on_fetch))
    replica = h.replica(TP, [(0, 1), (0, 1), (0, 1)])
    leader = h.leader_log(TP, [(0, 1), (0, 1), (0, 1)])
    h.add(TP, leader_epoch=0)
    await h.work_until_idle()
    assert replica.log_end_offset == 3
    assert h.fetcher.fetch_state(TP).state is ReplicaState.FETCHING

    # change the leader's log without an epoch change, so only the offset range check can see it
    leader.truncate_to(0)
    await h.fetcher.do_work()

    assert replica.log_end_offset == 0
    state = h.fetcher.fetch_state(TP)
    assert (state.state, state.fetch_offset, state.lag) == (ReplicaState.FETCHING, 0, 0)
    leader.append(2)
    await h.work_until_idle()
    assert_replica_matches(replica, leader)


@pytest.mark.parametrize("truncation_on_fetch", [False, True])
async def test_follower_fetch_out_of_range_low(tmp_path, truncation_on_fetch) -> None:
    """testFollowerFetchOutOfRangeLow: behind the leader's log start → delete all, restart at it."""
    h = Harness(tmp_path, FakeLeader(supports_truncation_on_fetch=truncation_on_fetch))
    replica = h.replica(TP, [(0, 1), (0, 1), (0, 1)], high_watermark=3)
    leader = h.leader_log(TP, [(0, 1)] * 10)
    leader.increment_log_start_offset(6)
    h.add(TP, leader_epoch=0)
    if not truncation_on_fetch:
        await h.fetcher.maybe_truncate()

    await h.fetcher.maybe_fetch()

    assert (replica.log_start_offset, replica.log_end_offset) == (6, 6)
    assert replica_epochs(replica) == []
    state = h.fetcher.fetch_state(TP)
    assert (state.state, state.fetch_offset, state.lag) == (ReplicaState.FETCHING, 6, 4)
    await h.work_until_idle()
    assert_replica_matches(replica, leader)


async def test_fenced_offset_reset_after_out_of_range(tmp_path) -> None:
    """testFencedOffsetResetAfterOutOfRange: fenced while asking for the leader's offsets → failed."""
    h = Harness(tmp_path, FakeLeader(supports_truncation_on_fetch=False))
    replica = h.replica(TP, [(0, 3)])
    leader = h.leader_log(TP, [(0, 1)] * 10)
    leader.increment_log_start_offset(6)
    h.add(TP, leader_epoch=0, init_offset=3)
    h.fetcher.fetch_state(TP)
    await h.fetcher.maybe_truncate()
    h.leader.list_offsets_errors[TP].append(ErrorCode.FENCED_LEADER_EPOCH)

    await h.fetcher.maybe_fetch()

    assert TP in h.fetcher.failed_partitions
    assert TP not in h.fetcher.partitions
    assert replica.log_end_offset == 3


async def test_retry_after_unknown_leader_epoch_in_latest_offset_fetch(tmp_path) -> None:
    """testRetryAfterUnknownLeaderEpochInLatestOffsetFetch: retried after the backoff."""
    h = Harness(tmp_path)
    replica = h.replica(TP, [(0, 3)])
    leader = h.leader_log(TP, [(0, 1)] * 10)
    leader.increment_log_start_offset(6)
    h.add(TP, leader_epoch=0)
    h.leader.list_offsets_errors[TP].append(ErrorCode.UNKNOWN_LEADER_EPOCH)

    await h.fetcher.do_work()
    state = h.fetcher.fetch_state(TP)
    assert state.is_delayed(h.clock.time_ms())
    assert replica.log_end_offset == 3

    h.advance_past_backoff()
    await h.work_until_idle()
    assert_replica_matches(replica, leader)


@pytest.mark.parametrize("truncation_on_fetch", [False, True])
async def test_truncation_where_the_local_epoch_ends_before_the_leaders(
    tmp_path, truncation_on_fetch
) -> None:
    """Three replicas: both logs hold epoch 0, ours ends it first and has an epoch 1 the leader lacks.

    A (epoch 0) writes 0..4; we copy 0..2; C, which had only 0..2, leads epoch 1 and writes 3; we
    copy it; A returns as leader of epoch 2. The leader's epoch 0 ends at 5, ours at 3: cut at 3.
    """
    h = Harness(tmp_path, FakeLeader(supports_truncation_on_fetch=truncation_on_fetch))
    replica = h.replica(TP, [(0, 1)] * 3 + [(1, 1)])
    leader = h.leader_log(TP, [(0, 1)] * 5, leader_epoch=2)
    leader.append(1)
    h.add(TP, leader_epoch=2)

    await h.work_until_idle()

    assert_replica_matches(replica, leader)
    assert replica_epochs(replica) == [(0, 0), (2, 5)]
