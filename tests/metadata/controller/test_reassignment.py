"""Partition reassignment on the controller: Kafka's adding/removing semantics, completion by the
leader's ISR expansion, leadership handover, cancel, list, errors; and a model test that random
sequences of reassignments, cancels and ISR changes keep the partition's invariants."""

from __future__ import annotations

import pytest
import structlog
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from metadata.controller.reassignment import maybe_complete, plan
from metadata.controller.reassignment_control import OngoingReassignment, ReassignablePartition
from metadata.controller.replication_control import AlterPartitionItem
from metadata.records import PartitionChangeRecord
from metadata.topics import NO_LEADER, PartitionState
from protocol.error_codes import ErrorCode
from tests.metadata.controller.helpers import SESSION_MS, Cluster, replayed


@pytest.fixture
def cluster() -> Cluster:
    cluster = Cluster()
    cluster.join(0, 1, 2, 3, 4, 5)
    cluster.create_assigned("t", [0, 1, 2], [1, 2, 0])
    return cluster


def reassign(
    cluster: Cluster, *targets: tuple[str, int, tuple[int, ...] | None]
) -> list[tuple[ErrorCode, str | None]]:
    results = cluster.controller.alter_partition_reassignments(
        [ReassignablePartition(topic, index, replicas) for topic, index, replicas in targets]
    )
    return [(r.error, r.message) for r in results]


def expand(cluster: Cluster, name: str, index: int, isr: tuple[int, ...]) -> ErrorCode:
    """The partition's leader proposes ``isr`` at its current epochs; the partition's error."""
    state = cluster.partition(name, index)
    response = cluster.controller.alter_partition(
        state.leader_id,
        cluster.epochs[state.leader_id],
        [AlterPartitionItem(name, index, state.leader_epoch, isr, state.partition_epoch)],
    )
    assert response.error is ErrorCode.NONE
    return response.partitions[0].error


def lists(state: PartitionState) -> tuple[list[int], list[int], list[int], list[int], int]:
    return state.replicas, state.isr, state.removing_replicas, state.adding_replicas, state.leader_id


def test_plan_is_kafkas() -> None:
    moved = plan([0, 1, 2], [3, 4, 5])
    assert (moved.replicas, moved.removing, moved.adding) == ((3, 4, 5, 0, 1, 2), (0, 1, 2), (3, 4, 5))
    assert maybe_complete(moved.replicas, moved.removing, moved.adding, (0, 1, 2, 3, 4)) is None
    done = maybe_complete(moved.replicas, moved.removing, moved.adding, (0, 1, 2, 3, 4, 5))
    assert done is not None and (done.replicas, done.isr) == ((3, 4, 5), (3, 4, 5))


def test_a_move_grows_then_completes_when_the_last_adding_replica_joins(cluster: Cluster) -> None:
    before = cluster.partition("t")
    assert reassign(cluster, ("t", 0, (1, 2, 3))) == [(ErrorCode.NONE, None)]
    state = cluster.partition("t")
    assert lists(state) == ([1, 2, 3, 0], [0, 1, 2], [0], [3], 0)
    assert (state.leader_epoch, state.partition_epoch) == (before.leader_epoch, before.partition_epoch + 1)
    assert cluster.controller.list_partition_reassignments() == [
        OngoingReassignment("t", 0, (1, 2, 3, 0), (3,), (0,))
    ]
    # the leader (0, being removed) adds 3: complete; leadership moves to 1, told NEW_LEADER_ELECTED
    assert expand(cluster, "t", 0, (0, 1, 2, 3)) is ErrorCode.NEW_LEADER_ELECTED
    state = cluster.partition("t")
    assert lists(state) == ([1, 2, 3], [1, 2, 3], [], [], 1)
    assert state.leader_epoch == before.leader_epoch + 1
    assert cluster.controller.list_partition_reassignments() == []
    assert replayed(cluster.log) == cluster.image


def test_a_full_move_to_other_brokers(cluster: Cluster) -> None:
    assert reassign(cluster, ("t", 1, (3, 4, 5))) == [(ErrorCode.NONE, None)]
    assert lists(cluster.partition("t", 1)) == ([3, 4, 5, 0, 1, 2], [1, 2, 0], [0, 1, 2], [3, 4, 5], 1)
    assert expand(cluster, "t", 1, (1, 2, 0, 3)) is ErrorCode.NONE
    assert expand(cluster, "t", 1, (1, 2, 0, 3, 5)) is ErrorCode.NONE
    assert cluster.partition("t", 1).is_reassigning
    assert expand(cluster, "t", 1, (1, 2, 0, 3, 5, 4)) is ErrorCode.NEW_LEADER_ELECTED
    assert lists(cluster.partition("t", 1)) == ([3, 4, 5], [3, 5, 4], [], [], 3)


def test_the_leader_stays_when_it_is_kept_and_the_epoch_bumps_when_replicas_leave(cluster: Cluster) -> None:
    before = cluster.partition("t")
    assert reassign(cluster, ("t", 0, (0, 4))) == [(ErrorCode.NONE, None)]
    assert expand(cluster, "t", 0, (0, 1, 2, 4)) is ErrorCode.NONE
    state = cluster.partition("t")
    assert lists(state) == ([0, 4], [0, 4], [], [], 0)
    assert state.leader_epoch == before.leader_epoch + 1


def test_a_reorder_or_a_shrink_completes_at_once(cluster: Cluster) -> None:
    assert reassign(cluster, ("t", 0, (2, 1, 0)), ("t", 1, (1, 2))) == [(ErrorCode.NONE, None)] * 2
    assert lists(cluster.partition("t", 0)) == ([2, 1, 0], [0, 1, 2], [], [], 0)
    assert lists(cluster.partition("t", 1)) == ([1, 2], [1, 2], [], [], 1)


def test_the_same_target_again_changes_nothing(cluster: Cluster) -> None:
    end = cluster.log.end_offset
    assert reassign(cluster, ("t", 0, (0, 1, 2))) == [(ErrorCode.NONE, None)]
    assert cluster.log.end_offset == end


def test_cancel_reverts_to_the_original_replicas(cluster: Cluster) -> None:
    assert reassign(cluster, ("t", 0, (3, 4, 5))) == [(ErrorCode.NONE, None)]
    assert expand(cluster, "t", 0, (0, 1, 2, 3)) is ErrorCode.NONE
    assert reassign(cluster, ("t", 0, None)) == [(ErrorCode.NONE, None)]
    assert lists(cluster.partition("t")) == ([0, 1, 2], [0, 1, 2], [], [], 0)
    assert reassign(cluster, ("t", 0, None)) == [
        (ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, "No partition reassignment is in progress.")
    ]


def test_a_new_target_during_a_reassignment_starts_from_the_union(cluster: Cluster) -> None:
    assert reassign(cluster, ("t", 0, (1, 2, 3))) == [(ErrorCode.NONE, None)]
    assert reassign(cluster, ("t", 0, (1, 2, 4))) == [(ErrorCode.NONE, None)]
    assert lists(cluster.partition("t")) == ([1, 2, 4, 0, 3], [0, 1, 2], [0, 3], [4], 0)


def test_errors_carry_kafkas_messages(cluster: Cluster) -> None:
    assert reassign(
        cluster,
        ("nope", 0, (1,)),
        ("t", 7, (1,)),
        ("t", 0, ()),
        ("t", 0, (1, 9)),
        ("t", 0, (1, 1)),
    ) == [
        (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "Unable to find a topic named nope."),
        (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "Unable to find partition t:7."),
        (
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            "The manual partition assignment includes an empty replica list.",
        ),
        (
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            "The manual partition assignment includes broker 9, but no such broker is registered.",
        ),
        (
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            "The manual partition assignment includes the broker 1 more than once.",
        ),
    ]
    assert not cluster.partition("t").is_reassigning


def test_replication_factor_change_can_be_refused(cluster: Cluster) -> None:
    [result] = cluster.controller.alter_partition_reassignments(
        [ReassignablePartition("t", 0, (3, 4))], allow_replication_factor_change=False
    )
    assert result.error is ErrorCode.INVALID_REPLICATION_FACTOR
    [result] = cluster.controller.alter_partition_reassignments(
        [ReassignablePartition("t", 0, (3, 4, 5))], allow_replication_factor_change=False
    )
    assert result.error is ErrorCode.NONE


def test_list_names_partitions(cluster: Cluster) -> None:
    reassign(cluster, ("t", 0, (1, 2, 3)), ("t", 1, (3, 4, 5)))
    assert [
        (o.topic, o.partition) for o in cluster.controller.list_partition_reassignments([("t", [1, 9])])
    ] == [("t", 1)]
    assert cluster.controller.list_partition_reassignments([("nope", [0])]) == []


def test_isr_changes_before_completion_keep_the_reassignment(
    cluster: Cluster,
) -> None:
    reassign(cluster, ("t", 0, (1, 2, 3)))
    assert expand(cluster, "t", 0, (0, 1)) is ErrorCode.NONE  # a shrink while moving
    state = cluster.partition("t")
    assert lists(state) == ([1, 2, 3, 0], [0, 1], [0], [3], 0)
    assert expand(cluster, "t", 0, (0, 1, 3)) is ErrorCode.NONE  # 2 is a target replica, not in the ISR
    assert cluster.partition("t").is_reassigning
    records = [r for _, _, r in cluster.log.read() if isinstance(r, PartitionChangeRecord)]
    assert all(r.adding_replicas == (3,) for r in records[-3:])


# -- model test ---------------------------------------------------------------------------------

BROKERS = range(6)

step = st.one_of(
    st.tuples(st.just("reassign"), st.lists(st.sampled_from(BROKERS), min_size=1, max_size=4, unique=True)),
    st.tuples(st.just("cancel"), st.none()),
    st.tuples(st.just("expand"), st.sampled_from(BROKERS)),
    st.tuples(st.just("shrink"), st.sampled_from(BROKERS)),
    st.tuples(st.just("fence"), st.sampled_from(BROKERS)),
    st.tuples(st.just("unfence"), st.sampled_from(BROKERS)),
)


def check_invariants(state: PartitionState) -> None:
    replicas, isr = set(state.replicas), set(state.isr)
    assert len(replicas) == len(state.replicas)
    assert isr and isr <= replicas
    assert state.leader_id == NO_LEADER or state.leader_id in isr
    assert set(state.adding_replicas) <= replicas and set(state.removing_replicas) <= replicas
    assert not set(state.adding_replicas) & set(state.removing_replicas)
    assert state.target_replicas


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(step, max_size=25))
def test_random_reassignments_keep_the_invariants(steps: list[tuple[str, object]]) -> None:
    with structlog.testing.capture_logs():
        cluster = Cluster()
        cluster.join(*BROKERS)
        cluster.create_assigned("t", [0, 1, 2])
        for kind, arg in steps:
            state = cluster.partition("t")
            if kind == "reassign":
                assert isinstance(arg, list)
                [(error, _)] = reassign(cluster, ("t", 0, tuple(arg)))
                assert error is ErrorCode.NONE
            elif kind == "cancel":
                [(error, _)] = reassign(cluster, ("t", 0, None))
                assert error in (ErrorCode.NONE, ErrorCode.NO_REASSIGNMENT_IN_PROGRESS)
                assert error is ErrorCode.NONE or not state.is_reassigning
            elif kind == "fence":
                if arg in cluster.image.live_broker_ids():
                    cluster.clock.advance(SESSION_MS + 1)
                    cluster.keep_alive(b for b in cluster.image.live_broker_ids() if b != arg)
                    cluster.controller.tick()
            elif kind == "unfence":
                if arg not in cluster.image.live_broker_ids():
                    cluster.heartbeat(arg)
            elif state.leader_id != NO_LEADER:
                broker = arg
                if kind == "expand" and broker in state.replicas and broker not in state.isr:
                    expand(cluster, "t", 0, (*state.isr, broker))
                elif kind == "shrink" and broker in state.isr and broker != state.leader_id:
                    expand(cluster, "t", 0, tuple(r for r in state.isr if r != broker))
            after = cluster.partition("t")
            check_invariants(after)
            # a reassignment the ISR already allows is never left pending
            assert (
                maybe_complete(after.replicas, after.removing_replicas, after.adding_replicas, after.isr)
                is None
            )
        assert replayed(cluster.log) == cluster.image
