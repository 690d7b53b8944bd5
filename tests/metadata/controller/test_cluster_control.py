"""Registration, heartbeats, sessions, fencing and controlled shutdown on a fake clock."""

from __future__ import annotations

import pytest

from metadata.controller.controller import ControllerConfig
from metadata.producer_id_block import BLOCK_SIZE
from metadata.records import (
    FenceBrokerRecord,
    PartitionChangeRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    UnfenceBrokerRecord,
    UnregisterBrokerRecord,
)
from metadata.topics import NO_LEADER
from protocol.error_codes import ErrorCode, KafkaError
from tests.metadata.controller.helpers import (
    CLUSTER_ID,
    SESSION_MS,
    Cluster,
    endpoints,
    incarnation,
    replayed,
)


@pytest.fixture
def cluster() -> Cluster:
    return Cluster()


def records_since(cluster: Cluster, offset: int) -> list[object]:
    return [record for _, _, record in cluster.log.read(offset)]


# -- registration ----------------------------------------------------------------------------------


def test_a_registered_broker_starts_fenced_with_its_record_offset_as_epoch(cluster: Cluster) -> None:
    cluster.join(1)
    epoch = cluster.register(2)
    assert epoch == cluster.log.end_offset - 1 == 2
    registration = cluster.image.broker(2)
    assert registration is not None and registration.fenced and registration.broker_epoch == epoch
    assert registration.endpoints == endpoints(2)
    assert cluster.image.live_broker_ids() == [1]


def test_a_wrong_cluster_id_is_inconsistent_cluster_id(cluster: Cluster) -> None:
    with pytest.raises(KafkaError) as info:
        cluster.controller.register_broker(1, incarnation(1), "other", endpoints(1))
    assert info.value.code is ErrorCode.INCONSISTENT_CLUSTER_ID
    assert info.value.message == f"Expected cluster ID {CLUSTER_ID}, but got cluster ID other"
    assert cluster.log.end_offset == 0


def test_another_incarnation_is_refused_while_the_session_lives(cluster: Cluster) -> None:
    cluster.join(1)
    cluster.clock.advance(SESSION_MS)
    with pytest.raises(KafkaError) as info:
        cluster.register(1, generation=1)
    assert info.value.code is ErrorCode.DUPLICATE_BROKER_REGISTRATION
    assert cluster.image.broker(1).incarnation_id == incarnation(1)  # type: ignore[union-attr]


def test_a_new_incarnation_replaces_a_fenced_one_at_once(cluster: Cluster) -> None:
    """A broker restarted right after its controlled shutdown is not made to wait out the session."""
    cluster.join(1, 2)
    cluster.create_assigned("t", [2, 1])
    assert cluster.heartbeat(1, want_shutdown=True).should_shutdown
    old_epoch = cluster.epochs[1]
    new_epoch = cluster.register(1, generation=1)  # no time has passed
    assert new_epoch > old_epoch
    registration = cluster.image.broker(1)
    assert registration is not None and registration.incarnation_id == incarnation(1, 1)
    assert registration.fenced


def test_a_new_incarnation_after_the_session_expired_gets_a_new_epoch(cluster: Cluster) -> None:
    cluster.join(1, 2)
    cluster.create_assigned("t", [1, 2])
    old_epoch = cluster.epochs[1]
    cluster.clock.advance(SESSION_MS + 1)
    cluster.keep_alive([2])
    start = cluster.log.end_offset
    new_epoch = cluster.register(1, generation=1)
    assert new_epoch > old_epoch
    # the old incarnation leaves the ISR and its leadership in the same batch, before the registration
    change, register = records_since(cluster, start)
    assert isinstance(change, PartitionChangeRecord) and change.leader == 2 and change.isr == (2,)
    assert isinstance(register, RegisterBrokerRecord) and register.broker_epoch == start + 1 == new_epoch
    assert cluster.image.broker(1).fenced  # type: ignore[union-attr]
    # the old epoch is stale now, the new one heartbeats and is unfenced once caught up
    assert (
        cluster.controller.heartbeat(1, old_epoch, cluster.log.end_offset).error
        is ErrorCode.STALE_BROKER_EPOCH
    )
    assert not cluster.heartbeat(1).is_fenced


def test_a_retried_registration_keeps_the_epoch_and_fencing(cluster: Cluster) -> None:
    cluster.join(1)
    epoch = cluster.epochs[1]
    assert cluster.register(1) == epoch
    registration = cluster.image.broker(1)
    assert registration is not None and registration.broker_epoch == epoch and not registration.fenced
    assert isinstance(records_since(cluster, cluster.log.end_offset - 1)[0], RegisterBrokerRecord)


def test_unregistering_removes_the_broker_from_isrs_and_the_image(cluster: Cluster) -> None:
    cluster.join(1, 2)
    cluster.create_assigned("t", [1, 2])
    start = cluster.log.end_offset
    cluster.controller.unregister_broker(1)
    change, unregister = records_since(cluster, start)
    assert isinstance(change, PartitionChangeRecord) and (change.leader, change.isr) == (2, (2,))
    assert unregister == UnregisterBrokerRecord(1, cluster.epochs[1])
    assert cluster.image.broker_ids() == [2]
    assert cluster.heartbeat(1).error is ErrorCode.BROKER_ID_NOT_REGISTERED
    with pytest.raises(KafkaError) as info:
        cluster.controller.unregister_broker(1)
    assert info.value.code is ErrorCode.BROKER_ID_NOT_REGISTERED
    cluster.register(1, generation=1)  # no session left to wait for
    assert replayed(cluster.log) == cluster.image


# -- heartbeats ------------------------------------------------------------------------------------


def test_unknown_broker_and_stale_epoch(cluster: Cluster) -> None:
    result = cluster.controller.heartbeat(7, 0, 0)
    assert result.error is ErrorCode.BROKER_ID_NOT_REGISTERED
    assert result.is_fenced and not result.should_shutdown
    cluster.join(1)
    assert cluster.controller.heartbeat(1, 99, 5).error is ErrorCode.STALE_BROKER_EPOCH


def test_a_stale_heartbeat_does_not_keep_the_session_alive(cluster: Cluster) -> None:
    cluster.join(1)
    cluster.clock.advance(SESSION_MS)
    cluster.controller.heartbeat(1, 99, 5)
    cluster.clock.advance(1)
    assert cluster.controller.tick() == [1]


def test_a_fenced_broker_is_unfenced_once_caught_up_with_its_registration(cluster: Cluster) -> None:
    cluster.join(1)
    epoch = cluster.register(2)
    behind = cluster.heartbeat(2, offset=epoch - 1)
    assert behind.error is ErrorCode.NONE
    assert behind.is_fenced and not behind.is_caught_up
    assert cluster.image.broker(2).fenced  # type: ignore[union-attr]
    caught_up = cluster.heartbeat(2, offset=epoch)
    assert caught_up.is_caught_up and not caught_up.is_fenced and not caught_up.should_shutdown
    assert records_since(cluster, epoch + 1) == [UnfenceBrokerRecord(2, epoch)]
    assert cluster.image.live_broker_ids() == [1, 2]


def test_want_fence_keeps_or_makes_a_broker_fenced(cluster: Cluster) -> None:
    epoch = cluster.register(1)
    assert cluster.heartbeat(1, want_fence=True).is_fenced
    assert cluster.image.broker(1).fenced  # type: ignore[union-attr]
    assert not cluster.heartbeat(1).is_fenced
    result = cluster.heartbeat(1, want_fence=True)
    assert result.is_fenced and not result.should_shutdown
    assert records_since(cluster, cluster.log.end_offset - 1) == [FenceBrokerRecord(1, epoch)]


def test_heartbeats_keep_the_session_and_silence_fences(cluster: Cluster) -> None:
    cluster.join(1, 2)
    fenced = []
    for _ in range(6):
        cluster.clock.advance(SESSION_MS // 3)
        cluster.keep_alive([1])
        fenced.append(cluster.controller.tick())
    assert fenced == [[], [], [], [2], [], []]
    assert cluster.image.live_broker_ids() == [1]


def test_the_session_timeout_is_inclusive(cluster: Cluster) -> None:
    cluster.join(1)
    now = cluster.clock.time_ms()
    assert cluster.controller.tick(now + SESSION_MS) == []
    assert cluster.controller.tick(now + SESSION_MS + 1) == [1]
    assert cluster.controller.tick(now + 10 * SESSION_MS) == []
    assert cluster.image.broker(1).fenced  # type: ignore[union-attr]


def test_a_fenced_broker_comes_back_with_a_heartbeat(cluster: Cluster) -> None:
    cluster.join(1)
    cluster.clock.advance(SESSION_MS + 1)
    cluster.controller.tick()
    assert not cluster.heartbeat(1).is_fenced
    assert cluster.image.live_broker_ids() == [1]


# -- controller restart ----------------------------------------------------------------------------


def test_a_new_controller_gives_every_broker_a_fresh_session(cluster: Cluster) -> None:
    cluster.join(1, 2)
    cluster.clock.advance(SESSION_MS - 1)  # both nearly expired when the controller goes away
    cluster.clock.advance(60_000)  # ... and it stays down for a minute
    restarted = cluster.restart()
    assert restarted.image == cluster.image
    assert restarted.controller.tick() == []
    restarted.clock.advance(SESSION_MS)
    restarted.keep_alive([1])
    restarted.clock.advance(1)
    assert restarted.controller.tick() == [2]
    assert restarted.image.live_broker_ids() == [1]
    assert restarted.log.read()[-1][1] == restarted.controller.controller_epoch == 2
    assert replayed(restarted.log) == restarted.image


def test_a_restarted_broker_registers_anew_after_a_controller_restart() -> None:
    cluster = Cluster()
    cluster.join(1)
    restarted = cluster.restart()
    with pytest.raises(KafkaError):
        restarted.register(1, generation=1)
    restarted.clock.advance(SESSION_MS + 1)
    new_epoch = restarted.register(1, generation=1)
    assert new_epoch > cluster.epochs[1]
    assert not restarted.heartbeat(1).is_fenced


# -- controlled shutdown ---------------------------------------------------------------------------


def test_controlled_shutdown_moves_leadership_then_lets_the_broker_go(cluster: Cluster) -> None:
    cluster.join(1, 2, 3)
    cluster.create_assigned("t", [1, 2], [2, 3])
    result = cluster.heartbeat(1, want_shutdown=True)
    assert result.in_controlled_shutdown and not result.should_shutdown and not result.is_fenced
    moved = cluster.partition("t")
    assert (moved.leader_id, moved.isr, moved.leader_epoch) == (2, [2], 1)
    assert not cluster.image.broker(1).fenced  # type: ignore[union-attr]
    shutdown_offset = cluster.log.end_offset - 1
    # broker 3 has not replayed the change yet: broker 1 must wait
    cluster.heartbeat(3, offset=shutdown_offset - 1)
    cluster.heartbeat(2)
    assert not cluster.heartbeat(1, want_shutdown=True).should_shutdown
    cluster.heartbeat(3)
    result = cluster.heartbeat(1, want_shutdown=True)
    assert result.should_shutdown and result.is_fenced
    assert cluster.image.broker(1).fenced  # type: ignore[union-attr]


def test_a_broker_in_controlled_shutdown_gets_no_new_replicas(cluster: Cluster) -> None:
    cluster.join(1, 2)
    cluster.create_assigned("led", [1, 2])
    cluster.heartbeat(1, want_shutdown=True)
    topic = cluster.create("new", 2, 1)
    assert {p.leader_id for p in topic.partitions.values()} == {2}


def test_a_broker_leading_nothing_shuts_down_at_once(cluster: Cluster) -> None:
    cluster.join(1, 2)
    cluster.create_assigned("t", [2, 1])
    result = cluster.heartbeat(1, want_shutdown=True)
    assert result.should_shutdown and result.is_fenced and not result.in_controlled_shutdown
    assert cluster.partition("t").isr == [2]
    assert cluster.image.broker(1).fenced  # type: ignore[union-attr]


def test_a_fenced_broker_may_shut_down_without_a_record(cluster: Cluster) -> None:
    cluster.register(1)
    end = cluster.log.end_offset
    result = cluster.heartbeat(1, want_shutdown=True)
    assert result.should_shutdown and result.is_fenced
    assert cluster.log.end_offset == end


def test_the_sole_isr_member_shutting_down_leaves_its_partition_leaderless(cluster: Cluster) -> None:
    cluster.join(1, 2)
    cluster.create_assigned("t", [1, 2])
    cluster.heartbeat(2, want_fence=True)  # now ISR = [1]
    cluster.heartbeat(1, want_shutdown=True)
    partition = cluster.partition("t")
    assert (partition.leader_id, partition.isr) == (NO_LEADER, [1])
    assert cluster.heartbeat(1, want_shutdown=True).should_shutdown


# -- producer ids ----------------------------------------------------------------------------------


def test_producer_id_blocks_are_consecutive_and_logged(cluster: Cluster) -> None:
    cluster.join(1, 2)
    first = cluster.controller.allocate_producer_ids(1, cluster.epochs[1])
    second = cluster.controller.allocate_producer_ids(2, cluster.epochs[2])
    assert (first.first_id, first.size, second.first_id) == (0, BLOCK_SIZE, BLOCK_SIZE)
    assert records_since(cluster, cluster.log.end_offset - 1) == [
        ProducerIdsRecord(2, cluster.epochs[2], 2 * BLOCK_SIZE)
    ]
    with pytest.raises(KafkaError) as info:
        cluster.controller.allocate_producer_ids(1, 999)
    assert info.value.code is ErrorCode.STALE_BROKER_EPOCH
    assert cluster.restart().image.next_producer_id == 2 * BLOCK_SIZE


def test_session_timeout_comes_from_the_config() -> None:
    cluster = Cluster(ControllerConfig(broker_session_timeout_ms=100))
    cluster.join(1)
    cluster.clock.advance(101)
    assert cluster.controller.tick() == [1]


def test_a_stalled_controller_fences_nobody_for_the_time_it_could_not_run(cluster: Cluster) -> None:
    """A controller paused for longer than the session timeout (SIGSTOP, a blocked loop) reads the
    heartbeats that queued meanwhile only after its next session check: that check must not fence
    brokers for silence the controller itself caused. Its driver reports the stall first."""
    cluster.join(1, 2)
    stall = 3 * SESSION_MS
    cluster.clock.advance(stall)
    cluster.controller.forgive_stall(stall)
    assert cluster.controller.tick() == []
    assert cluster.image.live_broker_ids() == [1, 2]
    cluster.clock.advance(SESSION_MS + 1)  # real silence after the stall still fences
    cluster.keep_alive([1])
    assert cluster.controller.tick() == [2]


def test_a_broker_whose_heartbeat_connection_closed_is_fenced_after_the_grace(cluster: Cluster) -> None:
    """A dead broker's connection closes long before its session would expire: its session then
    ends after lost_connection_grace_ms, unless it heartbeats again (a live one reconnects)."""
    cluster.join(1, 2, 3)
    grace = cluster.config.lost_connection_grace_ms
    cluster.controller.broker_connection_lost(2, cluster.epochs[2])
    cluster.controller.broker_connection_lost(3, cluster.epochs[3])
    cluster.clock.advance(grace // 2)
    cluster.keep_alive([1, 3])  # broker 3 reconnected and heartbeats: its session is whole again
    assert cluster.controller.tick() == []
    cluster.clock.advance(grace // 2 + 1)
    cluster.keep_alive([1, 3])
    assert cluster.controller.tick() == [2]
    cluster.controller.broker_connection_lost(1, cluster.epochs[1] + 1)  # a stale incarnation: ignored
    cluster.clock.advance(grace + 1)
    cluster.keep_alive([1, 3])
    assert cluster.controller.tick() == []
