"""The leader side of a reassignment's completion: the AlterPartition that brings the last
target replica into the ISR completes the reassignment, and when it removes the proposing leader the
controller answers NEW_LEADER_ELECTED (the change *was* committed; a target replica now leads).

Kafka's Partition.handleAlterPartitionError keeps the proposal pending for that error ("It should
remain in the current pending state until the metadata overrides it"): its maximal ISR holds the
replica just added, which may be the new leader, so the old leader's HW (and its acks=all answers)
still wait for it. Dropping the proposal let the old leader, until its metadata caught up, commit and
acknowledge records the new leader does not have once that replica stopped counting as caught up."""

from __future__ import annotations

from broker.replication.replica_state import LeaderReplicaSet, ProposalOutcome
from protocol.error_codes import ErrorCode

LAG = 30_000
T0 = 1_000_000
LEADER = 1
NEW_LEADER = 3


def leader_being_removed() -> LeaderReplicaSet:
    """Leader 1 of replicas (3, 2, 1) being moved to (3, 2): 3 is being added, 1 removed."""
    return LeaderReplicaSet(
        leader_id=LEADER,
        replicas=(3, 2, 1),
        isr=(1, 2),
        leader_epoch=5,
        leader_epoch_start_offset=0,
        partition_epoch=10,
        min_insync_replicas=1,
        high_watermark=10,
        now_ms=T0,
        replica_lag_time_max_ms=LAG,
        leader_log_end_offset=10,
    )


def test_new_leader_elected_keeps_the_proposal_and_the_hw_waits_for_the_new_leader() -> None:
    rs = leader_being_removed()
    rs.update_follower_fetch(2, 10, 0, T0)
    rs.update_follower_fetch(NEW_LEADER, 10, 0, T0)  # caught up: proposed for the ISR
    proposal = rs.propose_isr((1, 2, NEW_LEADER))

    outcome = rs.apply_proposal_result(proposal, ErrorCode.NEW_LEADER_ELECTED, now_ms=T0)

    assert outcome is ProposalOutcome.FAILED
    assert rs.pending is proposal and rs.maximal_isr == (1, 2, NEW_LEADER)
    # the metadata has not reached this broker yet: it still leads, takes records, 2 copies them,
    # 3 (leading elsewhere now) fetches nothing more and stops counting as caught up
    later = T0 + 10 * LAG
    rs.update_leader_log_end_offset(20, later)
    rs.update_follower_fetch(2, 20, 0, later)
    assert rs.high_watermark == 10  # nothing past what the new leader has is committed here
    assert rs.shrink_candidates(later) == []  # and no other proposal goes out meanwhile


def test_the_metadata_replaces_the_kept_proposal() -> None:
    rs = leader_being_removed()
    rs.update_follower_fetch(2, 10, 0, T0)
    rs.update_follower_fetch(NEW_LEADER, 10, 0, T0)
    proposal = rs.propose_isr((1, 2, NEW_LEADER))
    rs.apply_proposal_result(proposal, ErrorCode.NEW_LEADER_ELECTED, now_ms=T0)

    rs.clear_pending()  # what stopping to lead does (Partition.make_follower)

    assert rs.pending is None and rs.maximal_isr == rs.isr == (1, 2)


def test_other_refusals_still_clear_the_proposal() -> None:
    rs = leader_being_removed()
    rs.update_follower_fetch(NEW_LEADER, 10, 0, T0)
    proposal = rs.propose_isr((1, 2, NEW_LEADER))

    assert rs.apply_proposal_result(proposal, ErrorCode.INVALID_UPDATE_VERSION) is ProposalOutcome.FAILED
    assert rs.pending is None and rs.maximal_isr == (1, 2)
