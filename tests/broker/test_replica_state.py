"""ReplicaState / LeaderReplicaSet: kafka-behaviour.md 6.1-6.5 and 9.7-9.8 on a fake integer clock."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from broker.replication.replica_state import (
    IsrProposal,
    LeaderReplicaSet,
    ProposalOutcome,
    ReplicaState,
    check_alter_partition,
)
from protocol.error_codes import ErrorCode
from protocol.sentinels import UNKNOWN_OFFSET

LAG = 30_000
T0 = 1_000_000
LEADER = 1


def make_set(
    *,
    replicas=(1, 2, 3),
    isr=(1, 2, 3),
    min_isr=1,
    leo=0,
    hw=0,
    epoch_start=0,
    now=T0,
    is_eligible=None,
) -> LeaderReplicaSet:
    kwargs = {} if is_eligible is None else {"is_eligible": is_eligible}
    rs = LeaderReplicaSet(
        leader_id=LEADER,
        replicas=replicas,
        isr=isr,
        leader_epoch=5,
        leader_epoch_start_offset=epoch_start,
        partition_epoch=10,
        min_insync_replicas=min_isr,
        high_watermark=hw,
        now_ms=now,
        replica_lag_time_max_ms=LAG,
        leader_log_end_offset=leo,
        **kwargs,
    )
    assert rs.leader_log_end_offset == leo
    return rs


# -- 6.1 follower state ----------------------------------------------------------------------------


def test_fetch_sets_leo_and_log_start():
    s = ReplicaState(2)
    s.update_fetch_state(7, 3, T0, 10, broker_epoch=42)
    assert (s.log_end_offset, s.log_start_offset, s.last_fetch_time_ms, s.broker_epoch) == (7, 3, T0, 42)
    assert s.last_fetch_leader_log_end_offset == 10


def test_caught_up_to_leader_leo_is_caught_up_now():
    s = ReplicaState(2)
    s.update_fetch_state(10, 0, T0, 10)
    assert s.last_caught_up_time_ms == T0


def test_caught_up_to_previous_fetch_leader_leo_uses_previous_fetch_time():
    s = ReplicaState(2)
    s.update_fetch_state(5, 0, T0, 10)  # behind: not caught up
    assert s.last_caught_up_time_ms == 0
    s.update_fetch_state(10, 0, T0 + 100, 12)  # reached the LEO of the previous fetch, not this one
    assert s.last_caught_up_time_ms == T0
    assert s.last_fetch_leader_log_end_offset == 12


def test_behind_previous_fetch_leader_leo_leaves_caught_up_time():
    s = ReplicaState(2)
    s.update_fetch_state(10, 0, T0, 10)
    s.update_fetch_state(10, 0, T0 + 100, 20)
    s.update_fetch_state(15, 0, T0 + 200, 30)  # < 20: neither rule applies
    assert s.last_caught_up_time_ms == T0 + 0  # the +100 fetch reached 10 == LEO at T0 → T0
    assert s.last_fetch_time_ms == T0 + 200


def test_last_fetch_leader_leo_never_decreases_and_caught_up_never_backwards():
    s = ReplicaState(2)
    s.update_fetch_state(10, 0, T0 + 500, 10)
    s.update_fetch_state(8, 0, T0 + 100, 8)  # a late report with an older time
    assert s.last_caught_up_time_ms == T0 + 500
    assert s.last_fetch_leader_log_end_offset == 10


def test_steady_trickle_follower_stays_in_sync():
    rs = make_set(isr=(1, 2))
    now = T0
    for leo in range(1, 201):  # an append, then a fetch at the LEO the previous fetch saw
        now += 1_000
        rs.update_leader_log_end_offset(leo, now)
        rs.update_follower_fetch(2, leo - 1, 0, now)
        assert rs.followers[2].log_end_offset < rs.leader_log_end_offset
    assert rs.followers[2].last_caught_up_time_ms == now - 1_000
    assert rs.shrink_candidates(now - 1_000 + LAG) == []  # lag max is inclusive
    assert rs.shrink_candidates(now - 1_000 + LAG + 1) == [2]


def test_fetch_from_outside_assignment_refused():
    rs = make_set()
    assert rs.follower_fetch_error(9, has_current_leader_epoch=True) == ErrorCode.UNKNOWN_LEADER_EPOCH
    assert rs.follower_fetch_error(9, has_current_leader_epoch=False) == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert rs.follower_fetch_error(2, has_current_leader_epoch=True) == ErrorCode.NONE
    stale = rs.follower_fetch_error(2, has_current_leader_epoch=True, replica_epoch=3, cached_broker_epoch=4)
    assert stale == ErrorCode.NOT_LEADER_OR_FOLLOWER
    ok = rs.follower_fetch_error(2, has_current_leader_epoch=True, replica_epoch=-1, cached_broker_epoch=4)
    assert ok == ErrorCode.NONE


# -- 6.2 high watermark ----------------------------------------------------------------------------


def test_hw_is_min_leo_over_isr_including_leader():
    rs = make_set(leo=100)
    rs.update_follower_fetch(2, 80, 0, T0)
    assert rs.high_watermark == 0  # follower 3 has not fetched in this epoch (LEO -1)
    rs.update_follower_fetch(3, 60, 0, T0)
    assert rs.high_watermark == 60
    rs.update_follower_fetch(3, 100, 0, T0 + 1)
    assert rs.high_watermark == 80
    rs.update_follower_fetch(2, 120, 0, T0 + 2)  # beyond the leader LEO: capped at the leader's
    assert rs.high_watermark == 100


def test_hw_never_moves_backwards():
    rs = make_set(isr=(1, 2), leo=50)
    rs.update_follower_fetch(2, 50, 0, T0)
    assert rs.high_watermark == 50
    rs.update_follower_fetch(2, 40, 0, T0 + 1)  # follower truncated
    assert rs.high_watermark == 50
    assert rs.maybe_increment_high_watermark(T0 + 2) is False


def test_hw_equals_leo_with_leader_only_isr():
    rs = make_set(isr=(1,), leo=0)
    rs.followers[2].last_caught_up_time_ms = 0
    rs.followers[3].last_caught_up_time_ms = 0
    now = T0 + 10 * LAG
    for leo in (3, 7, 12):
        assert rs.update_leader_log_end_offset(leo, now) is True
        assert rs.high_watermark == leo


def test_hw_waits_for_caught_up_follower_about_to_join():
    rs = make_set(isr=(1,), leo=10, hw=10)
    rs.update_follower_fetch(2, 10, 0, T0)  # caught up, not in ISR
    rs.update_leader_log_end_offset(20, T0 + 1)
    assert rs.high_watermark == 10  # waits: follower 2 is caught up and eligible
    # once it stops being caught up (lag max passes), the HW goes on without it
    assert rs.update_leader_log_end_offset(21, T0 + LAG + 1) is True
    assert rs.high_watermark == 21


def test_hw_does_not_wait_for_ineligible_follower():
    rs = make_set(isr=(1,), leo=10, hw=10, is_eligible=lambda rid, epoch: rid != 2)
    rs.update_follower_fetch(2, 10, 0, T0)
    rs.update_leader_log_end_offset(20, T0 + 1)
    assert rs.high_watermark == 20


def test_hw_frozen_below_effective_min_isr():
    rs = make_set(replicas=(1, 2, 3), isr=(1,), min_isr=2, leo=0, hw=0, now=0)
    assert rs.update_leader_log_end_offset(10, T0) is False
    assert rs.high_watermark == 0
    rs.on_isr_changed((1, 2), 11, T0)
    rs.update_follower_fetch(2, 10, 0, T0 + 1)
    assert rs.high_watermark == 10


def test_min_isr_clamped_to_replication_factor():
    rs = make_set(replicas=(1,), isr=(1,), min_isr=3, leo=0)
    assert rs.min_insync_replicas == 1
    assert rs.acks_all_allowed()
    assert rs.update_leader_log_end_offset(5, T0) is True


def test_hw_uses_maximal_isr_while_expansion_pending():
    rs = make_set(isr=(1, 2), replicas=(1, 2, 3), leo=10, hw=10)
    rs.update_follower_fetch(2, 10, 0, T0)
    rs.update_follower_fetch(3, 10, 0, T0)
    rs.propose_isr((1, 2, 3))
    assert rs.maximal_isr == (1, 2, 3) and rs.isr == (1, 2)
    rs.update_leader_log_end_offset(20, T0 + 10 * LAG)  # 3 no longer caught up, but it is in maximal ISR
    rs.update_follower_fetch(2, 20, 0, T0 + 10 * LAG)
    assert rs.high_watermark == 10


def test_new_leader_isr_followers_hold_hw_until_they_fetch_in_epoch():
    rs = make_set(isr=(1, 2), replicas=(1, 2), leo=30, hw=30)
    rs.update_follower_fetch(2, 30, 0, T0)
    rs.become_leader(
        leader_epoch=6,
        leader_epoch_start_offset=30,
        partition_epoch=11,
        replicas=(1, 2),
        isr=(1, 2),
        now_ms=T0 + 5,
        new_leader=True,
    )
    assert rs.followers[2].log_end_offset == UNKNOWN_OFFSET
    assert rs.update_leader_log_end_offset(40, T0 + 6) is False
    rs.update_follower_fetch(2, 40, 0, T0 + 7)
    assert rs.high_watermark == 40


# -- 6.3 expansion ---------------------------------------------------------------------------------


def test_expand_only_at_or_above_hw():
    rs = make_set(isr=(1,), replicas=(1, 2), leo=20, hw=20)
    rs.update_follower_fetch(2, 19, 0, T0)
    assert not rs.expansion_candidate(2)
    rs.update_follower_fetch(2, 20, 0, T0 + 1)
    assert rs.expansion_candidate(2)


def test_expand_requires_fetch_within_current_leader_epoch():
    # KAFKA-7128: LEO >= HW but below the epoch start offset → not eligible
    rs = make_set(isr=(1, 3), replicas=(1, 2, 3), leo=50, hw=10, epoch_start=50)
    rs.update_follower_fetch(3, 10, 0, T0)
    rs.update_follower_fetch(2, 30, 0, T0)
    assert rs.high_watermark == 10
    assert not rs.expansion_candidate(2)
    rs.update_follower_fetch(2, 50, 0, T0 + 1)
    assert rs.expansion_candidate(2)


def test_no_expansion_in_isr_pending_or_ineligible():
    rs = make_set(isr=(1, 2), replicas=(1, 2, 3), leo=5, hw=5)
    rs.update_follower_fetch(2, 5, 0, T0)
    assert not rs.expansion_candidate(2)  # already in ISR
    assert not rs.expansion_candidate(9)  # not a replica
    rs.update_follower_fetch(3, 5, 0, T0)
    assert rs.expansion_candidate(3)
    proposal = rs.propose_isr((1, 2))
    assert not rs.expansion_candidate(3)  # AlterPartition in flight
    rs.apply_proposal_result(proposal, ErrorCode.INVALID_UPDATE_VERSION)
    rs.is_eligible = lambda rid, epoch: False  # fenced / shutting down / stale broker epoch
    assert not rs.expansion_candidate(3)


def test_expansion_committed():
    rs = make_set(isr=(1,), replicas=(1, 2), leo=5, hw=5)
    rs.update_follower_fetch(2, 5, 0, T0)
    proposal = rs.propose_isr((1, 2))
    assert (
        check_alter_partition(proposal, leader_epoch=5, partition_epoch=10, replicas=(1, 2)) == ErrorCode.NONE
    )
    outcome = rs.apply_proposal_result(proposal, ErrorCode.NONE, isr=(1, 2), partition_epoch=11, now_ms=T0)
    assert outcome is ProposalOutcome.COMMITTED
    assert rs.isr == rs.maximal_isr == (1, 2) and rs.partition_epoch == 11 and rs.pending is None


# -- 6.4 shrink ------------------------------------------------------------------------------------


def test_shrink_after_lag_max_not_before():
    rs = make_set(isr=(1, 2, 3), leo=10, now=T0)
    rs.update_follower_fetch(2, 10, 0, T0)
    rs.update_follower_fetch(3, 10, 0, T0)
    rs.update_leader_log_end_offset(20, T0 + 1)
    assert rs.shrink_candidates(T0 + LAG) == []
    rs.update_follower_fetch(2, 20, 0, T0 + LAG)
    assert rs.shrink_candidates(T0 + LAG + 1) == [3]
    assert rs.shrink_candidates(T0 + LAG + 1, replica_lag_time_max_ms=2 * LAG) == []


def test_follower_at_leader_leo_never_shrunk_even_if_idle():
    rs = make_set(isr=(1, 2), replicas=(1, 2), leo=10, now=T0)
    rs.update_follower_fetch(2, 10, 0, T0)
    assert rs.shrink_candidates(T0 + 100 * LAG) == []


def test_leader_never_drops_itself():
    rs = make_set(isr=(1,), replicas=(1, 2), leo=10)
    assert rs.shrink_candidates(T0 + 100 * LAG) == []


def test_stuck_follower_dropped_up_to_one_and_a_half_lag_max():
    # 9.8: the check runs every lag/2, so removal happens somewhere in (lag, 1.5 lag]
    rs = make_set(isr=(1, 2), replicas=(1, 2), leo=10, now=T0)
    rs.update_follower_fetch(2, 10, 0, T0)
    rs.update_leader_log_end_offset(11, T0)
    checks = [T0 + k * LAG // 2 for k in range(1, 5)]
    removed_at = next(t for t in checks if rs.shrink_candidates(t))
    assert T0 + LAG < removed_at <= T0 + 3 * LAG // 2


def test_pending_shrink_keeps_larger_isr_and_no_new_candidates():
    rs = make_set(isr=(1, 2, 3), leo=10, now=T0)
    rs.update_leader_log_end_offset(11, T0)
    proposal = rs.propose_isr((1,))
    assert rs.isr == rs.maximal_isr == (1, 2, 3)
    assert rs.shrink_candidates(T0 + 2 * LAG) == []
    rs.apply_proposal_result(proposal, ErrorCode.NONE, isr=(1,), partition_epoch=11, now_ms=T0 + 2 * LAG)
    assert rs.isr == (1,)
    assert rs.high_watermark == 11  # the shrink unblocks the HW


def test_new_leader_resets_caught_up_times():
    rs = make_set(isr=(1, 2), replicas=(1, 2, 3), leo=10)
    rs.become_leader(
        leader_epoch=6,
        leader_epoch_start_offset=10,
        partition_epoch=11,
        replicas=(1, 2, 3),
        isr=(1, 2),
        now_ms=T0 + 7,
        new_leader=False,
    )
    f2, f3 = rs.followers[2], rs.followers[3]
    assert (f2.last_caught_up_time_ms, f2.last_fetch_time_ms, f2.last_fetch_leader_log_end_offset) == (
        T0 + 7,
        T0 + 7,
        10,
    )
    assert (f3.last_caught_up_time_ms, f3.last_fetch_time_ms) == (0, 0)


def test_stale_make_leader_ignored():
    rs = make_set()
    assert not rs.become_leader(
        leader_epoch=6,
        leader_epoch_start_offset=0,
        partition_epoch=9,
        replicas=(1, 2),
        isr=(1,),
        now_ms=T0,
        new_leader=True,
    )
    assert rs.leader_epoch == 5 and rs.isr == (1, 2, 3)


# -- AlterPartition proposals ----------------------------------------------------------------------


def test_stale_proposal_rejected_by_controller():
    rs = make_set(isr=(1, 2, 3))
    proposal = rs.propose_isr((1, 2))
    # meanwhile the controller moved the partition epoch (another ISR change landed)
    assert check_alter_partition(proposal, leader_epoch=5, partition_epoch=11, replicas=(1, 2, 3)) == (
        ErrorCode.INVALID_UPDATE_VERSION
    )
    assert check_alter_partition(proposal, leader_epoch=6, partition_epoch=10, replicas=(1, 2, 3)) == (
        ErrorCode.FENCED_LEADER_EPOCH
    )
    outcome = rs.apply_proposal_result(proposal, ErrorCode.INVALID_UPDATE_VERSION)
    assert outcome is ProposalOutcome.FAILED
    assert rs.pending is None and rs.isr == rs.maximal_isr == (1, 2, 3)


def test_answer_for_other_proposal_or_old_epoch_ignored():
    rs = make_set(isr=(1, 2, 3))
    proposal = rs.propose_isr((1, 2))
    other = IsrProposal((1,), 5, 10)
    assert (
        rs.apply_proposal_result(other, ErrorCode.NONE, isr=(1,), partition_epoch=11)
        is ProposalOutcome.IGNORED
    )
    assert rs.pending is proposal
    assert (
        rs.apply_proposal_result(proposal, ErrorCode.NONE, isr=(1, 2), partition_epoch=10)
        is ProposalOutcome.IGNORED
    )
    assert rs.isr == (1, 2, 3) and rs.pending is None


def test_metadata_isr_change_drops_pending_and_ignores_old_epoch():
    rs = make_set(isr=(1, 2, 3))
    proposal = rs.propose_isr((1, 2))
    assert rs.on_isr_changed((1, 3), 12)
    assert rs.pending is None and rs.isr == rs.maximal_isr == (1, 3)
    assert rs.apply_proposal_result(proposal, ErrorCode.NONE, isr=(1, 2), partition_epoch=13) is (
        ProposalOutcome.IGNORED
    )
    assert not rs.on_isr_changed((1,), 11)
    assert rs.isr == (1, 3) and rs.partition_epoch == 12


def test_second_proposal_while_pending_raises():
    rs = make_set()
    rs.propose_isr((1, 2))
    try:
        rs.propose_isr((1,))
    except RuntimeError:
        pass
    else:
        raise AssertionError("expected RuntimeError")


# -- 6.5 acks=-1 -----------------------------------------------------------------------------------


def test_acks_all_refused_below_min_isr():
    rs = make_set(replicas=(1, 2, 3), isr=(1,), min_isr=2)
    assert not rs.acks_all_allowed()
    rs.on_isr_changed((1, 2), 11)
    assert rs.acks_all_allowed()


def test_acks_all_uses_committed_isr_not_pending_expansion():
    rs = make_set(replicas=(1, 2, 3), isr=(1,), min_isr=2, leo=0)
    rs.update_follower_fetch(2, 0, 0, T0)
    rs.propose_isr((1, 2))
    assert not rs.acks_all_allowed()
    assert rs.acks_all_completion_error() == ErrorCode.NONE  # completion uses the maximal ISR


def test_acks_all_completion_error_below_min_isr():
    rs = make_set(replicas=(1, 2, 3), isr=(1,), min_isr=2)
    assert rs.acks_all_completion_error() == ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND


# -- DESIGN: idle partitions in a follower session -------------------------------------------------


def test_idle_partition_marked_fetched_at_session_time_stays_in_isr():
    rs = make_set(isr=(1, 2), replicas=(1, 2), leo=10, hw=10)
    rs.update_follower_fetch(2, 10, 4, T0)
    for k in range(1, 20):  # the follower fetches other partitions; this one is never dirty
        rs.mark_fetched_at_session_time(2, T0 + k * LAG // 2, 10)
    now = T0 + 19 * LAG // 2
    assert rs.followers[2].last_caught_up_time_ms == now
    assert rs.followers[2].log_start_offset == 4
    assert rs.shrink_candidates(now + 1) == []


def test_idle_mark_does_not_rewind_a_newer_fetch():
    rs = make_set(isr=(1, 2), replicas=(1, 2), leo=10, hw=10)
    rs.update_follower_fetch(2, 10, 0, T0 + 100)
    assert rs.mark_fetched_at_session_time(2, T0 + 50, 8) is False
    assert rs.followers[2].log_end_offset == 10
    assert rs.followers[2].last_fetch_time_ms == T0 + 100


def test_idle_mark_equivalent_to_real_fetch_in_large_session():
    real = make_set(replicas=(1, 2), isr=(1, 2), leo=10, hw=0)
    idle = make_set(replicas=(1, 2), isr=(1, 2), leo=10, hw=0)
    for rs in (real, idle):
        rs.update_follower_fetch(2, 10, 0, T0)
    for k in range(1, 50):
        t = T0 + k * 7_000
        real.update_follower_fetch(2, 10, 0, t)
        idle.mark_fetched_at_session_time(2, t, 10)
        assert real.followers[2] == idle.followers[2]
        assert real.high_watermark == idle.high_watermark == 10
        assert real.shrink_candidates(t + 1) == idle.shrink_candidates(t + 1) == []


# -- property --------------------------------------------------------------------------------------

_event = st.one_of(
    st.tuples(st.just("append"), st.integers(0, 5), st.integers(0, 20_000)),
    st.tuples(st.just("fetch"), st.sampled_from([2, 3, 4]), st.integers(0, 20_000), st.integers(-3, 6)),
    st.tuples(st.just("fetch"), st.sampled_from([2, 3, 4]), st.integers(0, 20_000), st.just(10**9)),
    st.tuples(st.just("shrink"), st.integers(0, 40_000)),
    st.tuples(st.just("expand"), st.sampled_from([2, 3, 4]), st.integers(0, 1)),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(_event, min_size=20, max_size=120), st.integers(1, 4))
def test_hw_never_exceeds_isr_leo_and_never_decreases(events, min_isr):
    rs = make_set(replicas=(1, 2, 3, 4), isr=(1, 2, 3, 4), min_isr=min_isr, leo=0, hw=0, now=0)
    now = 0
    pepoch = rs.partition_epoch
    for ev in events:
        prev_hw = rs.high_watermark
        if ev[0] == "append":
            now += ev[2]
            rs.update_leader_log_end_offset(rs.leader_log_end_offset + ev[1], now)
        elif ev[0] == "fetch":
            now += ev[2]
            # a follower fetches somewhere at or below the leader LEO (a truncation may move it back)
            offset = max(0, min(rs.leader_log_end_offset, rs.followers[ev[1]].log_end_offset + ev[3]))
            rs.update_follower_fetch(ev[1], offset, 0, now)
            if rs.expansion_candidate(ev[1]):
                p = rs.propose_isr((*rs.isr, ev[1]))
                pepoch += 1
                rs.apply_proposal_result(p, ErrorCode.NONE, isr=p.new_isr, partition_epoch=pepoch, now_ms=now)
        elif ev[0] == "shrink":
            now += ev[1]
            out = rs.shrink_candidates(now)
            if out:
                p = rs.propose_isr(tuple(r for r in rs.isr if r not in out))
                pepoch += 1
                rs.apply_proposal_result(p, ErrorCode.NONE, isr=p.new_isr, partition_epoch=pepoch, now_ms=now)
        else:
            rid = ev[1]
            if rs.expansion_candidate(rid):
                p = rs.propose_isr((*rs.isr, rid))
                if not ev[2]:  # else left pending: the HW must honour the maximal ISR
                    pepoch += 1
                    rs.apply_proposal_result(
                        p, ErrorCode.NONE, isr=p.new_isr, partition_epoch=pepoch, now_ms=now
                    )
            elif rs.pending is not None:
                rs.apply_proposal_result(rs.pending, ErrorCode.INVALID_UPDATE_VERSION)
        assert rs.high_watermark >= prev_hw
        assert rs.high_watermark <= rs.leader_log_end_offset
        if rs.high_watermark > prev_hw:
            for rid in rs.maximal_isr:
                if rid != LEADER:
                    assert rs.followers[rid].log_end_offset >= rs.high_watermark
            assert len(rs.isr) >= rs.min_insync_replicas


# -- wiring additions: epoch-start HW rule, reassignment, explicit leader LEO, idle credits ---------


def test_hw_never_commits_offsets_below_the_leader_epoch_start():
    rs = make_set(isr=(1, 2), replicas=(1, 2), leo=20, hw=5, epoch_start=20)
    rs.update_follower_fetch(2, 15, 0, T0)  # every ISR member has 15, but it is an older epoch's
    assert rs.high_watermark == 5
    rs.update_follower_fetch(2, 20, 0, T0 + 1)
    assert rs.high_watermark == 20


def test_reassignment_adds_fresh_followers_and_forgets_removed_ones():
    rs = make_set(isr=(1, 2, 3), replicas=(1, 2, 3), leo=10, hw=10)
    rs.update_follower_fetch(2, 10, 0, T0)
    assert rs.on_isr_changed((1, 2), 11, T0 + 5, replicas=(1, 2, 4))
    assert sorted(rs.followers) == [2, 4] and rs.replicas == (1, 2, 4)
    assert rs.followers[2].log_end_offset == 10
    assert (rs.followers[4].log_end_offset, rs.followers[4].last_caught_up_time_ms) == (UNKNOWN_OFFSET, 0)


def test_fetch_uses_the_leader_leo_read_before_the_read():
    rs = make_set(isr=(1, 2), replicas=(1, 2), leo=12, hw=0)
    rs.update_follower_fetch(2, 10, 0, T0, leader_end_offset=10)  # the LEO when its read began
    assert rs.followers[2].last_caught_up_time_ms == T0


def test_idle_credit_is_a_fetch_at_the_leader_leo_of_that_time():
    rs = make_set(isr=(1, 2), replicas=(1, 2), leo=10, hw=10)
    rs.update_follower_fetch(2, 10, 0, T0)
    rs.update_leader_log_end_offset(11, T0 + LAG)  # the idle stretch ends with an append...
    rs.mark_fetched_at_session_time(2, T0 + LAG - 10, 10)  # ...after a last fetch at offset 10 = LEO
    assert rs.followers[2].last_caught_up_time_ms == T0 + LAG - 10
    assert rs.shrink_candidates(T0 + 2 * LAG - 10) == []
    assert rs.shrink_candidates(T0 + 2 * LAG - 9) == [2]


def test_idle_credit_from_before_the_last_make_leader_is_dropped():
    rs = make_set(isr=(1, 2), replicas=(1, 2, 3), leo=10, hw=10)
    rs.become_leader(
        leader_epoch=6,
        leader_epoch_start_offset=10,
        partition_epoch=11,
        replicas=(1, 2, 3),
        isr=(1, 2),
        now_ms=T0 + 100,
        new_leader=True,
    )
    assert not rs.mark_fetched_at_session_time(3, T0 + 50, 10)
    assert rs.followers[3].log_end_offset == UNKNOWN_OFFSET


def test_expansion_candidates_are_caught_up_and_eligible():
    rs = make_set(isr=(1,), replicas=(1, 2, 3), leo=10, hw=10, is_eligible=lambda rid, epoch: rid != 3)
    rs.update_follower_fetch(2, 10, 0, T0)
    rs.update_follower_fetch(3, 10, 0, T0)
    assert rs.expansion_candidates(T0) == [2]
    rs.update_leader_log_end_offset(12, T0 + 1)
    assert rs.expansion_candidates(T0 + LAG + 1) == []  # no longer caught up: left to its next fetch


# -- a follower that lost committed records -------------------------------------------------------


def test_follower_back_below_hw_is_out_of_sync_at_once():
    rs = make_set(isr=(1, 2, 3), leo=10, hw=0, now=T0)
    rs.update_follower_fetch(2, 10, 0, T0)
    rs.update_follower_fetch(3, 10, 0, T0)
    assert rs.high_watermark == 10
    rs.update_follower_fetch(3, 4, 0, T0 + 1)  # replica 3 cut its damaged log at offset 4
    assert rs.followers[3].lost_committed
    assert rs.shrink_candidates(T0 + 2) == [3]  # well within the lag max
    assert rs.high_watermark == 10  # the HW never goes back
    rs.update_leader_log_end_offset(14, T0 + 3)
    rs.update_follower_fetch(3, 10, 0, T0 + 3)  # back at the HW, behind the leader's LEO
    assert not rs.followers[3].lost_committed
    assert rs.expansion_candidate(3) is False  # still in the ISR: nothing to expand
    assert rs.shrink_candidates(T0 + 4) == []  # and not shrunk again: no flapping


def test_a_shrunk_follower_that_lost_committed_records_rejoins_at_the_hw_without_flapping():
    rs = make_set(isr=(1, 2, 3), leo=10, hw=0, now=T0)
    for follower in (2, 3):
        rs.update_follower_fetch(follower, 10, 0, T0)
    rs.update_follower_fetch(3, 4, 0, T0 + 1)
    rs.isr = rs.maximal_isr = (1, 2)  # the shrink committed
    rs.update_leader_log_end_offset(20, T0 + 2)
    rs.update_follower_fetch(2, 20, 0, T0 + 2)
    assert rs.high_watermark == 20
    rs.update_follower_fetch(3, 12, 0, T0 + 3)  # still below the HW: still lacking committed records
    assert rs.followers[3].lost_committed and not rs.expansion_candidate(3)
    rs.update_leader_log_end_offset(24, T0 + 4)
    rs.update_follower_fetch(3, 20, 0, T0 + 4)  # at the HW, behind the LEO (24)
    assert not rs.followers[3].lost_committed and rs.expansion_candidate(3)
    rs.isr = rs.maximal_isr = (1, 2, 3)  # re-admitted
    rs.update_follower_fetch(3, 22, 0, T0 + 5)
    assert rs.shrink_candidates(T0 + 6) == []  # not shrunk again on its next fetch


def test_follower_truncating_above_hw_stays_in_sync():
    rs = make_set(isr=(1, 2, 3), leo=10, hw=0, now=T0)
    rs.update_follower_fetch(2, 6, 0, T0)
    rs.update_follower_fetch(3, 8, 0, T0)
    assert rs.high_watermark == 6
    rs.update_follower_fetch(3, 7, 0, T0 + 1)  # back, but still holding every committed record
    assert not rs.followers[3].lost_committed
    assert rs.shrink_candidates(T0 + 2) == []


def test_a_new_leader_forgets_lost_committed():
    rs = make_set(isr=(1, 2, 3), leo=10, hw=0, now=T0)
    rs.update_follower_fetch(2, 10, 0, T0)
    rs.update_follower_fetch(3, 10, 0, T0)
    rs.update_follower_fetch(3, 4, 0, T0 + 1)
    rs.become_leader(
        leader_epoch=6,
        leader_epoch_start_offset=10,
        partition_epoch=11,
        replicas=(1, 2, 3),
        isr=(1, 2),
        now_ms=T0 + 2,
        new_leader=True,
    )
    assert not rs.followers[3].lost_committed and rs.followers[3].log_end_offset == UNKNOWN_OFFSET
