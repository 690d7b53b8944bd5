"""Property: whatever the controller does, replaying its log yields exactly its image.

Random sequences of registrations and unregistrations, heartbeats (caught up or not, wanting
fencing or shutdown), session expiries, topic creation, deletion and growth, ISR changes and
controller restarts run against one controller; after each step a fresh image fed the log must
equal the controller's, a second replay must change nothing, and the image must hold KRaft's
partition invariants.
"""

from __future__ import annotations

import contextlib
import itertools
from typing import Any

import structlog
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from metadata.controller.reassignment_control import ReassignablePartition
from metadata.controller.replication_control import AlterPartitionItem, CreatableTopic, CreatePartitionsTopic
from metadata.image import MetadataImage
from metadata.topics import NO_LEADER
from protocol.error_codes import KafkaError
from tests.metadata.controller.helpers import SESSION_MS, Cluster, replayed

BROKERS = st.integers(1, 4)
NAMES = st.sampled_from(["a", "b", "c.d", "c_d"])

OPERATIONS = st.one_of(
    st.tuples(st.just("register"), BROKERS, st.integers(0, 2)),
    st.tuples(st.just("heartbeat"), BROKERS, st.booleans(), st.booleans(), st.booleans()),
    st.tuples(st.just("heartbeat"), BROKERS, st.just(True), st.just(False), st.just(False)),
    st.tuples(st.just("advance"), st.integers(0, 2 * SESSION_MS)),
    st.tuples(st.just("create"), NAMES, st.integers(1, 3), st.integers(1, 3), st.booleans()),
    st.tuples(st.just("delete"), NAMES),
    st.tuples(st.just("grow"), NAMES, st.integers(1, 5)),
    st.tuples(st.just("alter"), NAMES, st.integers(0, 4), st.integers(0, 15)),
    st.tuples(st.just("unregister"), BROKERS),
    st.tuples(st.just("restart")),
    st.tuples(
        st.just("reassign"),
        NAMES,
        st.integers(0, 4),
        st.none() | st.lists(BROKERS, min_size=1, max_size=3, unique=True),
    ),
)


def run(cluster: Cluster, operation: tuple[Any, ...]) -> Cluster:
    """Apply one operation; refused requests are part of the game (they must write nothing)."""
    kind, *args = operation
    controller = cluster.controller
    if kind == "register":
        broker_id, generation = args
        with contextlib.suppress(KafkaError):
            cluster.register(broker_id, generation)
    elif kind == "heartbeat":
        broker_id, caught_up, want_fence, want_shutdown = args
        if broker_id in cluster.epochs:
            offset = cluster.log.end_offset - (1 if caught_up else 3)
            cluster.heartbeat(broker_id, offset, want_fence=want_fence, want_shutdown=want_shutdown)
    elif kind == "advance":
        cluster.clock.advance(args[0])
        controller.tick()
    elif kind == "create":
        name, partitions, factor, unclean = args
        configs = {"unclean.leader.election.enable": "true"} if unclean else {}
        controller.create_topics([CreatableTopic(name, partitions, factor, configs)])
    elif kind == "delete":
        controller.delete_topics([args[0]])
    elif kind == "grow":
        controller.create_partitions([CreatePartitionsTopic(args[0], args[1])])
    elif kind == "alter":
        alter(cluster, *args)
    elif kind == "unregister":
        with contextlib.suppress(KafkaError):
            controller.unregister_broker(args[0])
    elif kind == "restart":
        return cluster.restart(epoch=controller.controller_epoch + 1)
    elif kind == "reassign":
        name, index, replicas = args
        target = None if replicas is None else tuple(replicas)
        controller.alter_partition_reassignments([ReassignablePartition(name, index, target)])
    return cluster


def alter(cluster: Cluster, name: str, index: int, mask: int) -> None:
    """The partition's leader proposes its leader plus the replicas picked by ``mask``."""
    topic = cluster.image.get(name)
    partition = None if topic is None else topic.partitions.get(index)
    if partition is None or partition.leader_id == NO_LEADER:
        return
    leader = partition.leader_id
    isr = (leader, *(r for bit, r in enumerate(partition.replicas) if mask >> bit & 1 and r != leader))
    registration = cluster.image.broker(leader)
    epoch = registration.broker_epoch if registration is not None else -1
    item = AlterPartitionItem(name, index, partition.leader_epoch, isr, partition.partition_epoch)
    cluster.controller.alter_partition(leader, epoch, [item])


def check_invariants(image: MetadataImage) -> None:
    for topic in image.all():
        for partition in topic.sorted_partitions():
            assert partition.isr and set(partition.isr) <= set(partition.replicas)
            assert partition.leader_id == NO_LEADER or partition.leader_id in partition.isr
            live = set(image.live_broker_ids())
            if partition.leader_id != NO_LEADER:
                assert partition.leader_id in live, (topic.name, partition)
            if len(partition.isr) > 1:
                assert set(partition.isr) <= live, (topic.name, partition)


def check_replay(cluster: Cluster) -> None:
    entries = cluster.log.read()
    one_by_one = replayed(cluster.log)
    assert one_by_one == cluster.image
    by_batch = MetadataImage()
    for epoch, group in itertools.groupby(entries, key=lambda entry: entry[1]):
        by_batch.apply_batch([(offset, record) for offset, _, record in group], epoch)
    assert by_batch == cluster.image
    # feeding the whole log again changes nothing
    assert one_by_one.apply_batch(
        [(offset, record) for offset, _, record in entries], one_by_one.epoch
    ).is_empty
    assert one_by_one == cluster.image


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(OPERATIONS, max_size=40))
def test_replaying_the_log_rebuilds_the_controllers_image(operations: list[tuple[Any, ...]]) -> None:
    with structlog.testing.capture_logs():
        cluster = Cluster()
        cluster.join(1, 2)
        for operation in operations:
            cluster = run(cluster, operation)
            check_invariants(cluster.image)
            check_replay(cluster)
