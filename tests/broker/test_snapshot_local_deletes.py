"""The broker side of reassignments: a metadata snapshot installed over a running broker
(it fell behind the controller's log start) is published as a whole image, without a delta. A
partition led or followed here that the snapshot assigns elsewhere (a reassignment completed or was
cancelled meanwhile) must stop being led or followed and lose its log, as Kafka's snapshot delta
lists it among the broker's local deletes; before the fix the follower process went on fetching it
(and kept the log) and a led partition had its log deleted while still led. The same holds for a
topic deleted (or deleted and re-created under another id) while the broker was behind."""

from __future__ import annotations

import uuid

from metadata.records import MetadataRecord
from tests.broker.test_replica_transitions import (
    NODE,
    NOW,
    ORDERS,
    Metadata,
    Node,
    batch,
    node,
    partition,
    partition_dirs,
    produced,
    topic,
)

__all__ = ["node"]  # the fixture, re-exported for pytest


async def install_snapshot(node: Node, *records: MetadataRecord | list[MetadataRecord]) -> None:
    """What the metadata loader does with a snapshot over a running broker: the image is replaced
    in place, then published whole (apply_initial)."""
    snapshot = Metadata()
    snapshot.brokers(1, 2, 3)
    snapshot.batch(*records)
    node.image.replace_with(snapshot.image)
    await node.transitions.apply_initial(node.image)


async def test_a_followed_replica_reassigned_away_in_a_snapshot_stops_and_its_log_is_deleted(
    node: Node,
) -> None:
    node.metadata.batch(topic("orders", ORDERS, partition(ORDERS, 0, 2, replicas=(2, NODE))))
    await node.initial()
    node.supervisor.open_as_follower(("orders", 0)).append_as_follower(batch(0, 0))

    await install_snapshot(
        node,
        topic("orders", ORDERS, partition(ORDERS, 0, 2, replicas=(2, 3), leader_epoch=1, partition_epoch=3)),
    )

    assert node.supervisor.removed == [("orders", 0)]
    assert node.supervisor.assignments == {}
    assert node.log_manager.get_log("orders", 0) is None and not node.log_manager.is_external("orders", 0)
    assert partition_dirs(node) == []


async def test_a_led_replica_reassigned_away_in_a_snapshot_stops_leading_before_its_log_goes(
    node: Node,
) -> None:
    node.metadata.batch(topic("orders", ORDERS, partition(ORDERS, 0, NODE, replicas=(NODE, 2))))
    await node.initial()
    led = node.led("orders", 0)
    led.append_records(produced(2), required_acks=1, now_ms=NOW)

    await install_snapshot(
        node,
        topic("orders", ORDERS, partition(ORDERS, 0, 2, replicas=(2, 3), leader_epoch=1, partition_epoch=3)),
    )

    assert node.replicas.get_partition("orders", 0) is None and not led.is_leader
    assert node.supervisor.assignments == {}
    assert partition_dirs(node) == []


async def test_a_replica_still_assigned_in_the_snapshot_is_kept(node: Node) -> None:
    node.metadata.batch(topic("orders", ORDERS, partition(ORDERS, 0, 2, replicas=(2, NODE))))
    await node.initial()
    node.supervisor.open_as_follower(("orders", 0)).append_as_follower(batch(0, 0))

    await install_snapshot(
        node,
        topic("orders", ORDERS, partition(ORDERS, 0, 2, replicas=(2, NODE, 3), partition_epoch=1)),
    )

    assert node.supervisor.removed == []
    assert ("orders", 0) in node.supervisor.assignments
    assert partition_dirs(node) == ["orders-0"]


OTHER_ORDERS = uuid.UUID(int=0x0DE5)


async def test_a_followed_partition_of_a_topic_deleted_before_the_snapshot_stops(node: Node) -> None:
    node.metadata.batch(topic("orders", ORDERS, partition(ORDERS, 0, 2, replicas=(2, NODE))))
    await node.initial()
    node.supervisor.open_as_follower(("orders", 0)).append_as_follower(batch(0, 0))

    await install_snapshot(node)

    assert node.supervisor.removed == [("orders", 0)]
    assert node.supervisor.assignments == {}
    assert partition_dirs(node) == []


async def test_a_led_partition_of_a_topic_deleted_before_the_snapshot_stops_leading(node: Node) -> None:
    node.metadata.batch(topic("orders", ORDERS, partition(ORDERS, 0, NODE, replicas=(NODE, 2))))
    await node.initial()
    led = node.led("orders", 0)
    led.append_records(produced(2), required_acks=1, now_ms=NOW)

    await install_snapshot(node)

    assert node.replicas.get_partition("orders", 0) is None and not led.is_leader
    assert partition_dirs(node) == []


async def test_a_topic_re_created_before_the_snapshot_starts_over_with_an_empty_log(node: Node) -> None:
    node.metadata.batch(topic("orders", ORDERS, partition(ORDERS, 0, 2, replicas=(2, NODE))))
    await node.initial()
    node.supervisor.open_as_follower(("orders", 0)).append_as_follower(batch(0, 0))

    await install_snapshot(
        node, topic("orders", OTHER_ORDERS, partition(OTHER_ORDERS, 0, 2, replicas=(2, NODE)))
    )

    assert node.supervisor.removed == [("orders", 0)]
    followed = node.followed("orders", 0)
    assert followed.handover.topic_id == OTHER_ORDERS and followed.handover.log_end_offset == 0
