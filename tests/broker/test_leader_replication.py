"""Leader side of replication on a real Partition (kafka-behaviour.md 6): follower fetches drive the
high watermark, ISR expansion and shrink go through a fake AlterPartition sender, acks=-1 admission
and completion follow the committed and maximal ISR, and the leader-epoch rules of KIP-101, KIP-279
and KAFKA-7128 hold where they concern the leader. Deterministic: a FakeClock, real logs in tmp_path.
"""

from __future__ import annotations

import pathlib
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest

from broker.replication.partition import AlterPartitionSender, Partition, PartitionRead
from broker.replication.replica_state import IsrProposal, check_alter_partition
from protocol.error_codes import ErrorCode, KafkaError
from protocol.records import Record, build_batch
from protocol.sentinels import NO_LEADER_EPOCH
from storage.clock import FakeClock
from storage.config import LogConfig
from storage.log import PartitionLog

LEADER = 1
NOW = 1_700_000_000_000
LAG = 30_000
TOPIC_ID = uuid.UUID(int=11)
BIG = 1 << 30


def batch(n: int = 1) -> bytes:
    return build_batch([Record(value=b"v%d" % i, timestamp=NOW + i) for i in range(n)])


@dataclass
class FakeController:
    """An AlterPartitionSender that records proposals and answers them when the test says so,
    with the controller's check against the partition's committed state."""

    submitted: list[tuple[Partition, IsrProposal]] = field(default_factory=list)

    def submit(self, partition: Partition, proposal: IsrProposal) -> None:
        self.submitted.append((partition, proposal))

    @property
    def proposals(self) -> list[tuple[int, ...]]:
        return [proposal.new_isr for _, proposal in self.submitted]

    def answer(self, error: ErrorCode | None = None) -> bool:
        """Answer the oldest proposal: accepted (partition epoch + 1) unless ``error`` is given."""
        partition, proposal = self.submitted.pop(0)
        code = error
        if code is None:
            code = check_alter_partition(
                proposal,
                leader_epoch=partition.leader_epoch,
                partition_epoch=partition.partition_epoch,
                replicas=partition.replicas,
            )
        if code != ErrorCode.NONE:
            return partition.on_alter_partition_result(proposal, code, -1, (), -1)
        return partition.on_alter_partition_result(
            proposal, code, proposal.leader_epoch, proposal.new_isr, proposal.partition_epoch + 1
        )


def as_sender(controller: FakeController) -> AlterPartitionSender:
    """Static check (for type checkers) that the fake satisfies the protocol."""
    return controller


@dataclass
class Leader:
    partition: Partition
    clock: FakeClock
    controller: FakeController
    hw_seen: list[int]

    def append(self, n: int = 1, acks: int = 1) -> int:
        """Append ``n`` records; returns the LEO."""
        self.partition.append_records(batch(n), required_acks=acks, now_ms=self.clock.time_ms())
        return self.partition.log_end_offset

    def fetch(
        self, replica_id: int, offset: int, *, last_fetched_epoch: int = NO_LEADER_EPOCH, epoch: int = -1
    ) -> PartitionRead:
        """A follower fetch as FetchService makes it: read, then update the follower's state."""
        read = self.partition.read(
            offset,
            BIG,
            isolation_level=0,
            is_follower=True,
            min_one_batch=True,
            current_leader_epoch=NO_LEADER_EPOCH,
            last_fetched_epoch=last_fetched_epoch,
        )
        if read.error_code == ErrorCode.NONE and read.diverging_epoch is None:
            self.partition.update_follower_fetch(
                replica_id, offset, 0, self.clock.time_ms(), read.log_end_offset, epoch
            )
        return read

    @property
    def hw(self) -> int:
        return self.partition.high_watermark


def open_leader(
    directory: pathlib.Path,
    *,
    replicas: tuple[int, ...] = (1, 2, 3),
    isr: tuple[int, ...] | None = None,
    min_isr: int = 1,
    leader_epoch: int = 0,
    eligibility: Callable[[int, int], bool] | None = None,
    clock: FakeClock | None = None,
    sender: AlterPartitionSender | None = None,
) -> Leader:
    clock = clock or FakeClock(NOW)
    controller = FakeController()
    log = PartitionLog.open(directory, LogConfig(), clock, topic_id=TOPIC_ID)
    partition = Partition.open(
        log,
        node_id=LEADER,
        topic_id=TOPIC_ID,
        leader_epoch=leader_epoch,
        partition_epoch=10,
        replicas=list(replicas),
        isr=list(replicas if isr is None else isr),
        min_insync_replicas=min_isr,
        clock=clock,
        replica_lag_time_max_ms=LAG,
        alter_partition=sender or as_sender(controller),
        broker_eligibility=eligibility,
    )
    hw_seen: list[int] = []
    partition.add_listener(lambda p: hw_seen.append(p.high_watermark))
    return Leader(partition, clock, controller, hw_seen)


@pytest.fixture
def leader(tmp_path: pathlib.Path) -> Leader:
    return open_leader(tmp_path / "t-0")


# -- 6.1/6.2 high watermark from follower fetches ------------------------------------------------------


def test_hw_is_the_min_over_the_isr_of_two_followers_at_different_offsets(leader: Leader) -> None:
    assert leader.append(10) == 10
    assert leader.hw == 0  # both followers are in the ISR and have not fetched in this epoch
    leader.fetch(2, 10)
    assert leader.hw == 0  # follower 3 still unknown (LEO -1)
    leader.fetch(3, 4)
    assert leader.hw == 4
    leader.fetch(3, 7)
    assert leader.hw == 7
    leader.fetch(2, 10)  # no move of follower 2: nothing changes
    leader.fetch(3, 10)
    assert leader.hw == 10
    consumer = leader.partition.read(
        0,
        BIG,
        isolation_level=0,
        is_follower=False,
        min_one_batch=True,
        current_leader_epoch=-1,
        last_fetched_epoch=-1,
    )
    assert consumer.high_watermark == 10 and consumer.records_size > 0


def test_listeners_hear_only_fetches_that_move_the_hw(leader: Leader) -> None:
    leader.append(5)
    leader.hw_seen.clear()
    leader.fetch(2, 5)
    leader.fetch(3, 2)
    leader.fetch(3, 2)
    leader.fetch(3, 5)
    assert leader.hw_seen == [2, 5]


def test_a_follower_in_the_isr_never_moves_the_hw_backwards(leader: Leader) -> None:
    leader.append(6)
    leader.fetch(2, 6)
    leader.fetch(3, 6)
    assert leader.hw == 6
    leader.fetch(3, 3)  # the follower truncated
    assert leader.hw == 6


def test_only_the_leader_in_the_isr_commits_at_each_append(tmp_path: pathlib.Path) -> None:
    single = open_leader(tmp_path / "t-0", replicas=(1,))
    single.append(3)
    assert single.hw == 3 and single.hw_seen == [3]


def test_the_hw_waits_for_a_follower_whose_expansion_is_in_flight(tmp_path: pathlib.Path) -> None:
    leader = open_leader(tmp_path / "t-0", isr=(1, 2))
    leader.append(4)
    leader.fetch(2, 4)
    leader.fetch(3, 4)  # not in the ISR but caught up: proposed; the maximal ISR now holds it
    assert leader.controller.proposals == [(1, 2, 3)]
    leader.append(2)
    leader.fetch(2, 6)
    assert leader.hw == 4
    leader.fetch(3, 6)
    assert leader.hw == 6


# -- leader epochs: KIP-101, KIP-279, KAFKA-7128 -----------------------------------------------------


def test_hw_counts_only_offsets_of_the_current_leader_epoch(leader: Leader) -> None:
    """A re-elected leader (new epoch starting at its LEO 5) does not commit the previous epoch's
    offsets 3-4 while the followers are below 5, even though every ISR member has them."""
    leader.append(5)
    leader.fetch(2, 3)
    leader.fetch(3, 3)
    assert leader.hw == 3
    assert leader.partition.make_leader(1, 11, [1, 2, 3], [1, 2, 3])
    assert leader.partition.log.leader_epoch_cache.latest_entry == (1, 5)
    leader.fetch(2, 4)
    leader.fetch(3, 4)
    assert leader.hw == 3  # min over the ISR is 4, below the epoch start 5
    leader.fetch(2, 5)
    leader.fetch(3, 5)
    assert leader.hw == 5
    leader.append(2)
    leader.fetch(2, 7)
    leader.fetch(3, 6)
    assert leader.hw == 6


def test_a_new_leader_waits_for_every_isr_follower_to_fetch_in_its_epoch(leader: Leader) -> None:
    leader.append(4)
    leader.fetch(2, 4)
    leader.fetch(3, 4)
    assert leader.partition.make_follower(leader_epoch=1)
    assert leader.partition.make_leader(2, 12, [1, 2, 3], [1, 2, 3])  # leads again: a new leader
    assert leader.partition.replica_set.followers[2].log_end_offset == -1
    leader.append(1)
    leader.fetch(2, 5)
    assert leader.hw == 4  # follower 3 has not fetched from this leader yet
    leader.fetch(3, 5)
    assert leader.hw == 5


def test_kip_101_a_diverging_follower_does_not_move_the_hw(tmp_path: pathlib.Path) -> None:
    """Epoch 0 holds 0-2 and epoch 3 starts at 3. A follower that wrote 3-5 in an epoch 1 this leader
    never had fetches at 6 with LastFetchedEpoch 1: it gets DivergingEpoch (0, 3), and its claimed LEO
    counts for nothing until it truncated to 3 and fetches within the leader's history."""
    directory = tmp_path / "t-0"
    first = open_leader(directory, replicas=(1,))
    first.append(3)
    first.partition.close()
    first.partition.log.close()
    leader = open_leader(directory, replicas=(1, 2), isr=(1, 2), leader_epoch=3)
    leader.append(3)
    read = leader.fetch(2, 6, last_fetched_epoch=1)
    assert read.diverging_epoch == (0, 3)
    assert leader.partition.replica_set.followers[2].log_end_offset == -1
    assert leader.hw == 0
    leader.fetch(2, 3, last_fetched_epoch=0)  # truncated to 3: in step with the leader
    assert leader.hw == 3
    leader.fetch(2, 6, last_fetched_epoch=3)
    assert leader.hw == 6


def test_kip_279_the_leader_answers_the_largest_epoch_it_knows(tmp_path: pathlib.Path) -> None:
    """Leaders 0 (offsets 0-1), 2 (2-3), 4 (4-): a follower whose log ends in epoch 3 (a leader this
    one never knew) learns where epoch 2 ended here, truncates, and only then counts for the HW."""
    directory = tmp_path / "t-0"
    for epoch in (0, 2):
        previous = open_leader(directory, replicas=(1,), leader_epoch=epoch)
        previous.append(2)
        previous.partition.close()
        previous.partition.log.close()
    leader = open_leader(directory, replicas=(1, 2), isr=(1, 2), leader_epoch=4)
    leader.append(2)
    assert leader.partition.last_offset_for_leader_epoch(4, 3) == (2, 4)
    assert leader.partition.last_offset_for_leader_epoch(4, 1) == (0, 2)
    assert leader.fetch(2, 5, last_fetched_epoch=3).diverging_epoch == (2, 4)
    assert leader.hw == 0
    leader.fetch(2, 4, last_fetched_epoch=2)
    assert leader.hw == 4  # the follower reached the start of epoch 4
    leader.fetch(2, 6, last_fetched_epoch=4)
    assert leader.hw == 6


def test_kafka_7128_a_follower_joins_only_once_caught_up_within_the_epoch(tmp_path: pathlib.Path) -> None:
    """Follower 3 is out of the ISR. After a new epoch starting at 10 it reaches the HW (8) but is
    still below 10: it is not proposed until it reaches the epoch start."""
    leader = open_leader(tmp_path / "t-0", isr=(1, 2))
    partition = leader.partition
    leader.append(10)
    leader.fetch(2, 8)
    assert leader.hw == 8
    assert partition.make_leader(1, 12, [1, 2, 3], [1, 2])
    assert partition.replica_set.leader_epoch_start_offset == 10
    leader.fetch(3, 9)
    assert leader.controller.proposals == []
    leader.fetch(3, 10)
    assert leader.controller.proposals == [(1, 2, 3)]


# -- 6.3 expansion -------------------------------------------------------------------------------------


def test_a_caught_up_follower_is_proposed_and_joins_when_committed(tmp_path: pathlib.Path) -> None:
    leader = open_leader(tmp_path / "t-0", isr=(1, 2), min_isr=3)
    partition = leader.partition
    leader.append(4)
    assert leader.hw == 0  # min.insync.replicas=3 and the ISR has 2: frozen
    leader.fetch(2, 4)
    leader.fetch(3, 3)  # at or above the HW (frozen at 0) within the epoch: proposed
    assert leader.controller.proposals == [(1, 2, 3)]
    proposal = leader.controller.submitted[0][1]
    assert (proposal.leader_epoch, proposal.partition_epoch) == (0, 10)
    assert partition.isr == [1, 2] and partition.maximal_isr == [1, 2, 3]
    leader.fetch(3, 4)  # a proposal is in flight: nothing new
    assert len(leader.controller.submitted) == 1
    assert leader.controller.answer()
    assert partition.isr == [1, 2, 3] and partition.partition_epoch == 11
    assert leader.hw == 4  # the committed ISR now meets min.insync.replicas


def test_a_refused_expansion_is_proposed_again_by_a_fetch_or_the_periodic_check(
    tmp_path: pathlib.Path,
) -> None:
    leader = open_leader(tmp_path / "t-0", isr=(1, 2))
    leader.fetch(3, 0)
    assert not leader.controller.answer(ErrorCode.INVALID_UPDATE_VERSION)
    assert leader.partition.isr == leader.partition.maximal_isr == [1, 2]
    assert leader.controller.proposals == []  # no retry loop at the controller's pace
    leader.fetch(3, 0)  # Kafka's retry: the follower's next fetch
    assert leader.controller.proposals == [(1, 2, 3)]
    assert not leader.controller.answer(ErrorCode.INVALID_UPDATE_VERSION)
    # an idle partition gets no fetch that re-checks: the periodic task does (ReplicaManager)
    assert leader.partition.maybe_expand_isr()
    assert leader.controller.proposals == [(1, 2, 3)]
    assert leader.controller.answer()
    assert leader.partition.isr == [1, 2, 3]


def test_a_committed_expansion_proposes_the_next_caught_up_follower(tmp_path: pathlib.Path) -> None:
    leader = open_leader(tmp_path / "t-0", replicas=(1, 2, 3), isr=(1,))
    leader.fetch(2, 0)
    leader.fetch(3, 0)  # caught up too, but one proposal at a time
    assert leader.controller.proposals == [(1, 2)]
    assert leader.controller.answer()
    assert leader.controller.proposals == [(1, 2, 3)]  # no fetch of follower 3 needed (idle partition)
    assert leader.controller.answer()
    assert leader.partition.isr == [1, 2, 3]


def test_an_ineligible_broker_epoch_does_not_expand_the_isr(tmp_path: pathlib.Path) -> None:
    """The eligibility check (not fenced, not shutting down, current broker epoch 7) refuses a fetch
    made with the stale broker epoch 5: the follower is not proposed, the fetch itself is served."""
    leader = open_leader(tmp_path / "t-0", isr=(1, 2), eligibility=lambda rid, epoch: epoch in (-1, 7))
    leader.append(2)
    leader.fetch(2, 2)
    read = leader.fetch(3, 2, epoch=5)
    assert read.error_code == ErrorCode.NONE
    assert leader.controller.proposals == []
    leader.fetch(3, 2, epoch=7)
    assert leader.controller.proposals == [(1, 2, 3)]


def test_a_sender_that_fails_does_not_leave_a_proposal_in_flight(tmp_path: pathlib.Path) -> None:
    class Broken:
        def submit(self, partition: Partition, proposal: IsrProposal) -> None:
            raise ConnectionError("controller unreachable")

    leader = open_leader(tmp_path / "t-0", isr=(1, 2), sender=Broken())
    leader.fetch(3, 0)  # the fetch itself is served
    assert leader.partition.replica_set.pending is None and leader.partition.maximal_isr == [1, 2]


# -- 6.4 shrink ----------------------------------------------------------------------------------------


def test_a_lagging_follower_is_shrunk_after_lag_max_and_the_hw_moves_on(leader: Leader) -> None:
    leader.append(2)
    leader.fetch(2, 2)
    leader.fetch(3, 2)
    stopped = leader.clock.time_ms()
    checks = []
    for _ in range(4):  # the isr-expiration task runs every lag/2; follower 2 keeps up
        leader.clock.advance(LAG // 2)
        leader.fetch(2, leader.append(1))
        if leader.partition.maybe_shrink_isr():
            checks.append(leader.clock.time_ms())
    assert leader.controller.proposals == [(1, 2)]
    assert stopped + LAG < checks[0] <= stopped + 3 * LAG // 2
    assert leader.hw == 2  # the pending shrink keeps the larger ISR: the HW still waits for 3
    assert leader.controller.answer()
    assert leader.partition.isr == [1, 2]
    assert leader.hw == leader.partition.log_end_offset  # unblocked
    assert leader.hw_seen[-1] == leader.hw


def test_no_shrink_before_lag_max_nor_of_a_follower_at_the_leader_leo(leader: Leader) -> None:
    leader.append(2)
    leader.fetch(2, 2)
    leader.fetch(3, 1)
    leader.clock.advance(LAG)
    assert not leader.partition.maybe_shrink_isr()  # lag max is inclusive
    leader.clock.advance(1)
    assert leader.partition.maybe_shrink_isr()
    # follower 2 has not fetched for longer than lag max either, but it sits at the leader's LEO
    assert leader.controller.proposals == [(1, 2)]


def test_a_stale_answer_is_ignored(leader: Leader) -> None:
    partition = leader.partition
    leader.append(1)
    leader.clock.advance(2 * LAG)
    assert partition.maybe_shrink_isr()
    _, proposal = leader.controller.submitted[0]
    # meanwhile the metadata moved the partition epoch: the proposal in flight is void
    assert partition.make_leader(0, 12, [1, 2, 3], [1, 2, 3])
    assert not partition.on_alter_partition_result(proposal, ErrorCode.NONE, 0, (1,), 11)
    assert partition.isr == [1, 2, 3] and partition.partition_epoch == 12
    # an answer for another leader epoch is not applied either
    assert partition.maybe_shrink_isr()
    _, second = leader.controller.submitted[1]
    assert not partition.on_alter_partition_result(second, ErrorCode.NONE, 5, (1,), 13)
    assert partition.isr == [1, 2, 3] and partition.replica_set.pending is None


def test_stale_metadata_is_ignored(leader: Leader) -> None:
    assert not leader.partition.make_leader(0, 9, [1, 2], [1])
    assert not leader.partition.make_leader(0, 10, [1, 2, 3], [1, 2, 3])  # nothing new
    assert leader.partition.isr == [1, 2, 3]


# -- 6.5 acks=-1 ---------------------------------------------------------------------------------------


def test_acks_all_below_the_committed_min_isr_appends_nothing(tmp_path: pathlib.Path) -> None:
    leader = open_leader(tmp_path / "t-0", isr=(1,), min_isr=2)
    with pytest.raises(KafkaError) as refused:
        leader.append(1, acks=-1)
    assert refused.value.code is ErrorCode.NOT_ENOUGH_REPLICAS
    assert leader.partition.log_end_offset == 0
    leader.fetch(2, 0)  # caught up: proposed, but admission uses the committed ISR
    assert leader.controller.proposals == [(1, 2)]
    with pytest.raises(KafkaError):
        leader.append(1, acks=-1)
    assert leader.partition.acks_all_completion_error() is ErrorCode.NONE  # the maximal ISR has 2
    leader.controller.answer()
    assert leader.append(1, acks=-1) == 1


def test_acks_all_completion_error_after_a_committed_shrink(tmp_path: pathlib.Path) -> None:
    leader = open_leader(tmp_path / "t-0", replicas=(1, 2), min_isr=2)
    leader.append(1, acks=-1)
    leader.fetch(2, 1)
    assert leader.hw == 1 and leader.partition.acks_all_completion_error() is ErrorCode.NONE
    leader.append(1)
    leader.clock.advance(2 * LAG)
    assert leader.partition.maybe_shrink_isr()
    leader.controller.answer()
    assert leader.partition.isr == [1]
    assert leader.partition.acks_all_completion_error() is ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
    leader.append(1)
    assert leader.hw == 1  # frozen below min.insync.replicas (Kafka 3.7+)


# -- leadership ----------------------------------------------------------------------------------------


def test_make_follower_tells_the_listeners_and_refuses_leader_work(leader: Leader) -> None:
    partition = leader.partition
    leader.append(2)
    leader.clock.advance(2 * LAG)
    assert partition.maybe_shrink_isr()
    leader.hw_seen.clear()
    assert partition.make_follower(leader_epoch=1, partition_epoch=11)
    assert leader.hw_seen == [0]  # told once, with the state after the change
    assert not partition.make_follower()
    with pytest.raises(KafkaError) as caught:
        leader.append(1)
    assert caught.value.code is ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert leader.fetch(2, 2).error_code is ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert not partition.update_follower_fetch(2, 2, 0, NOW, 2)
    assert not leader.controller.answer()  # the answer to the old proposal is ignored
    assert not partition.maybe_shrink_isr()
    assert partition.check_leader_epoch(0) is ErrorCode.FENCED_LEADER_EPOCH


def test_an_isr_update_by_metadata_adds_and_removes_followers(leader: Leader) -> None:
    partition = leader.partition
    leader.append(3)
    leader.fetch(2, 3)
    assert partition.make_leader(0, 11, [1, 2, 4], [1, 2])
    assert sorted(partition.replica_set.followers) == [2, 4]
    assert partition.replica_set.followers[2].log_end_offset == 3  # same epoch: state kept
    assert leader.hw == 3  # follower 3 left the ISR, 4 never was in it
    assert leader.fetch(3, 3).error_code is ErrorCode.NONE
    assert not partition.update_follower_fetch(3, 3, 0, NOW, 3)  # no longer a replica: ignored


# -- follower liveness of idle partitions -----------------------------------------------------------


def test_idle_credit_keeps_the_follower_caught_up_and_is_dropped_when_stale(leader: Leader) -> None:
    partition = leader.partition
    leader.append(2)
    leader.fetch(2, 2)
    leader.fetch(3, 2)
    follower = partition.replica_set.followers[2]
    # the follower's session held the partition idle; it was last used 5 lag periods later
    partition.update_idle_follower_fetch(2, NOW + 5 * LAG, 2)
    assert (follower.last_fetch_time_ms, follower.last_caught_up_time_ms) == (NOW + 5 * LAG, NOW + 5 * LAG)
    partition.update_idle_follower_fetch(2, NOW + LAG, 2)  # older than what is known: dropped
    assert follower.last_fetch_time_ms == NOW + 5 * LAG
    leader.clock.set(NOW + 6 * LAG)
    assert partition.make_leader(1, 11, [1, 2, 3], [1, 2])  # a new epoch: follower 3 out, reset
    partition.update_idle_follower_fetch(3, NOW + 5 * LAG + 1, 2)  # from before this leader epoch
    assert partition.replica_set.followers[3].last_fetch_time_ms == 0
