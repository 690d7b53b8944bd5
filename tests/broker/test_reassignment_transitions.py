"""A broker under a reassignment: an added replica creates its log and follows, a led partition
learns its new replica set, a removed replica (followed or led) stops and its log is deleted, and a
log of a partition reassigned away while the broker was down is deleted at start-up."""

from __future__ import annotations

import pathlib

from structlog.testing import capture_logs

from metadata.records import PartitionChangeRecord
from tests.broker.test_replica_transitions import (
    NODE,
    NOW,
    ORDERS,
    Metadata,
    Node,
    batch,
    build_node,
    node,
    partition,
    partition_dirs,
    produced,
    topic,
)

__all__ = ["node"]  # the fixture, re-exported for pytest


def moving(
    leader: int,
    replicas: tuple[int, ...],
    isr: tuple[int, ...],
    *,
    leader_epoch: int,
    partition_epoch: int,
    removing: tuple[int, ...] = (),
    adding: tuple[int, ...] = (),
) -> PartitionChangeRecord:
    return PartitionChangeRecord(
        0, ORDERS, replicas, isr, leader, leader_epoch, partition_epoch, removing, adding
    )


async def test_an_added_replica_creates_its_log_and_follows_the_leader(node: Node) -> None:
    node.metadata.batch(topic("orders", ORDERS, partition(ORDERS, 0, 2, replicas=(2, 3))))
    await node.initial()
    assert partition_dirs(node) == []

    await node.apply(moving(2, (2, 3, NODE), (2, 3), leader_epoch=0, partition_epoch=1, adding=(NODE,)))

    followed = node.followed("orders", 0)
    assert (followed.leader_id, followed.leader_epoch, followed.partition_epoch) == (2, 0, 1)
    assert followed.handover.log_end_offset == 0
    assert partition_dirs(node) == ["orders-0"]


async def test_a_led_partition_learns_its_new_replicas(node: Node) -> None:
    node.metadata.batch(topic("orders", ORDERS, partition(ORDERS, 0, NODE, replicas=(NODE, 2))))
    await node.initial()

    await node.apply(moving(NODE, (NODE, 2, 3), (NODE, 2), leader_epoch=0, partition_epoch=1, adding=(3,)))

    led = node.led("orders", 0)
    assert (led.replicas, led.isr, led.partition_epoch) == ([NODE, 2, 3], [NODE, 2], 1)


async def test_a_removed_follower_stops_and_its_log_is_deleted(node: Node) -> None:
    node.metadata.batch(topic("orders", ORDERS, partition(ORDERS, 0, 2, replicas=(2, NODE))))
    await node.initial()
    node.supervisor.open_as_follower(("orders", 0)).append_as_follower(batch(0, 0))

    await node.apply(moving(2, (2, 3), (2, 3), leader_epoch=1, partition_epoch=1))

    assert node.supervisor.removed == [("orders", 0)]
    assert node.supervisor.assignments == {}
    assert node.log_manager.get_log("orders", 0) is None and not node.log_manager.is_external("orders", 0)
    assert partition_dirs(node) == []


async def test_a_removed_leader_stops_leading_and_its_log_is_deleted(node: Node) -> None:
    node.metadata.batch(topic("orders", ORDERS, partition(ORDERS, 0, NODE, replicas=(NODE, 2))))
    await node.initial()
    led = node.led("orders", 0)
    led.append_records(produced(2), required_acks=1, now_ms=NOW)

    await node.apply(moving(2, (2, 3), (2, 3), leader_epoch=1, partition_epoch=1))

    assert node.replicas.get_partition("orders", 0) is None and not led.is_leader
    assert node.supervisor.assignments == {}
    assert partition_dirs(node) == []


async def test_a_log_reassigned_away_while_down_is_deleted_at_start_up(tmp_path: pathlib.Path) -> None:
    metadata = Metadata()
    metadata.brokers(1, 2, 3)
    metadata.batch(topic("orders", ORDERS, partition(ORDERS, 0, 2, replicas=(2, 3))))
    previous = build_node(tmp_path, metadata)
    previous.log_manager.get_or_create_log("orders", 0, ORDERS).append_as_follower(batch(0, 0))
    previous.shutdown()

    restarted = build_node(tmp_path, metadata)
    try:
        with capture_logs() as logs:
            await restarted.initial()
        assert partition_dirs(restarted) == []
        assert any(e["event"].startswith("deleting the log of a partition not assigned here") for e in logs)
    finally:
        restarted.shutdown()
