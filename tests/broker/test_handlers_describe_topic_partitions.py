"""DescribeTopicPartitions (75) handler through the codecs: partitions, unknown names and Kafka's
cursor pagination."""

from __future__ import annotations

from typing import Any

import pytest

from broker.handlers.describe_topic_partitions import DescribeTopicPartitionsHandler
from broker.handlers.metadata import TOPIC_AUTHORIZED_OPERATIONS
from protocol.data import MessageData
from protocol.error_codes import ErrorCode
from protocol.sentinels import ZERO_UUID
from tests.broker.cluster_admin_support import call, fence, three_brokers
from tests.metadata.controller.helpers import Cluster

NONE = int(ErrorCode.NONE)


@pytest.fixture
def cluster() -> Cluster:
    return three_brokers()


# -- DescribeTopicPartitions -----------------------------------------------------------------------


def dtp_body(names: list[str], limit: int = 2000, cursor: tuple[str, int] | None = None) -> dict[str, Any]:
    return {
        "topics": [{"name": n} for n in names],
        "response_partition_limit": limit,
        "cursor": None if cursor is None else {"topic_name": cursor[0], "partition_index": cursor[1]},
    }


def page(response: MessageData) -> tuple[list[tuple[str, int, list[int]]], tuple[str, int] | None]:
    topics = [(t.name, t.error_code, [p.partition_index for p in t.partitions]) for t in response.topics]
    cursor = response.next_cursor
    return topics, None if cursor is None else (cursor.topic_name, cursor.partition_index)


@pytest.fixture
def topics(cluster: Cluster) -> Cluster:
    cluster.create_assigned("a", [1, 2], [2, 3], [3, 1])
    cluster.create_assigned("b", [2, 3])
    cluster.create_assigned("c", [3, 1], [1, 2])
    return cluster


async def test_describe_topic_partitions_describes_each_partition(topics: Cluster) -> None:
    fence(topics, 3)
    handler = DescribeTopicPartitionsHandler(topics.image)
    response = await call(handler, 0, dtp_body(["b", "a"]))
    assert page(response) == ([("a", NONE, [0, 1, 2]), ("b", NONE, [0])], None)
    a = response.topics[0]
    assert a.topic_id == topics.image.get("a").topic_id  # type: ignore[union-attr]
    assert a.is_internal is False
    assert a.topic_authorized_operations == TOPIC_AUTHORIZED_OPERATIONS
    p1 = a.partitions[1]
    state = topics.partition("a", 1)
    assert (p1.leader_id, p1.leader_epoch, p1.replica_nodes, p1.isr_nodes) == (
        state.leader_id,
        state.leader_epoch,
        [2, 3],
        state.isr,
    )
    assert p1.offline_replicas == [3]
    assert (p1.eligible_leader_replicas, p1.last_known_elr) == ([], [])


async def test_describe_topic_partitions_unknown_and_invalid_names(topics: Cluster) -> None:
    handler = DescribeTopicPartitionsHandler(topics.image)
    response = await call(handler, 0, dtp_body(["zz", "a", "bad name"]))
    assert page(response) == (
        [
            ("a", NONE, [0, 1, 2]),
            ("bad name", int(ErrorCode.INVALID_TOPIC_EXCEPTION), []),
            ("zz", int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), []),
        ],
        None,
    )
    assert response.topics[2].topic_id == ZERO_UUID


async def test_describe_topic_partitions_pages_through_every_topic(topics: Cluster) -> None:
    handler = DescribeTopicPartitionsHandler(topics.image)
    first = page(await call(handler, 0, dtp_body([], limit=2)))
    assert first == ([("a", NONE, [0, 1])], ("a", 2))
    second = page(await call(handler, 0, dtp_body([], limit=2, cursor=("a", 2))))
    assert second == ([("a", NONE, [2]), ("b", NONE, [0])], ("c", 0))  # the limit used up at b's end
    third = page(await call(handler, 0, dtp_body([], limit=2, cursor=("c", 0))))
    assert third == ([("c", NONE, [0, 1])], None)


async def test_describe_topic_partitions_named_topics_with_a_cursor(topics: Cluster) -> None:
    handler = DescribeTopicPartitionsHandler(topics.image)
    response = page(await call(handler, 0, dtp_body(["a", "c", "nope"], limit=3, cursor=("c", 1))))
    assert response == ([("c", NONE, [1]), ("nope", int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), [])], None)


async def test_describe_topic_partitions_cursor_topic_must_be_named(topics: Cluster) -> None:
    handler = DescribeTopicPartitionsHandler(topics.image)
    response = await call(handler, 0, dtp_body(["a", "b"], cursor=("c", 0)))
    assert page(response) == (
        [("a", int(ErrorCode.INVALID_REQUEST), []), ("b", int(ErrorCode.INVALID_REQUEST), [])],
        None,
    )


async def test_describe_topic_partitions_limit_above_the_broker_maximum_is_capped(cluster: Cluster) -> None:
    cluster.create("big", 2001)
    handler = DescribeTopicPartitionsHandler(cluster.image)
    topics, cursor = page(await call(handler, 0, dtp_body(["big"], limit=5000)))
    assert len(topics[0][2]) == 2000 and cursor == ("big", 2000)
