"""A consumer group's group configs (Kafka 4.0's GROUP resource) in the coordinator: its
consumer.heartbeat.interval.ms is what a heartbeat answers and its consumer.session.timeout.ms
what fences a silent member, from the next heartbeat after a change on (Kafka's
GroupMetadataManager.consumerGroupHeartbeatIntervalMs / consumerGroupSessionTimeoutMs).
Simulated time throughout."""

from __future__ import annotations

import pytest

from tests.coordinator.group.consumer_helpers import Consumer, ConsumerHarness
from tests.coordinator.group.helpers import config


@pytest.fixture
def h() -> ConsumerHarness:
    harness = ConsumerHarness(config(group_consumer_max_session_timeout_ms=90_000))
    harness.topics.create("t", 3)
    return harness


def test_the_heartbeat_interval_answered_is_the_groups_override(h: ConsumerHarness) -> None:
    a = Consumer(h, "a", ("t",))
    other = Consumer(h, "b", ("t",), group_id="other")
    assert a.heartbeat().heartbeat_interval_ms == 5_000  # the broker's default
    h.group_configs["group"] = {"consumer.heartbeat.interval.ms": "8000"}
    assert a.heartbeat().heartbeat_interval_ms == 8_000  # from the next heartbeat on
    assert other.heartbeat().heartbeat_interval_ms == 5_000  # another group keeps the default
    del h.group_configs["group"]
    assert a.heartbeat().heartbeat_interval_ms == 5_000


def test_the_session_timeout_is_the_groups_override(h: ConsumerHarness) -> None:
    h.group_configs["group"] = {"consumer.session.timeout.ms": "80000"}
    a, b = Consumer(h, "a", ("t",)), Consumer(h, "b", ("t",))
    for _ in range(4):
        a.heartbeat()
        b.heartbeat()
    group = h.coordinator.consumer_group("group")
    assert group is not None
    for _ in range(12):  # b goes silent; a heartbeats every 5 s: 60 s, past the broker's 45 s
        h.advance(5_000)
        a.heartbeat()
    assert group.has_member("b")
    h.advance(20_000)  # 80 s since b's last heartbeat
    assert not group.has_member("b")
