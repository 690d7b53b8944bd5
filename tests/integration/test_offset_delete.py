"""OffsetDelete (KIP-496) on a real broker process, through kafka-python's
``KafkaAdminClient.delete_group_offsets`` (the only installed client library that exposes it:
confluent-kafka 2.16.1 and aiokafka 0.14.0 have no such call).

A kafka-python consumer subscribes to one topic and commits offsets of it and of another topic.
While it is a member, the offsets of its topic are kept (GroupSubscribedToTopicError) and those of
the other topic go; once it has left (the group is Empty), its own topic's go too. The deletions are
tombstones in ``__consumer_offsets``: after the broker is killed and started again, OffsetFetch
still answers -1 for them and the offset that was not deleted is still there.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable, Iterator, Sequence

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition
from kafka.errors import GroupIdNotFoundError, GroupSubscribedToTopicError, NoError
from kafka.structs import OffsetAndMetadata

from tests.integration.broker_process import BrokerProcess
from tests.integration.group_members import create_topic, wait_for

pytestmark = [pytest.mark.timeout(180)]

TIMEOUT_S = 30
OVERRIDES = ("group.initial.rebalance.delay.ms=0", "offsets.topic.num.partitions=3")
ORDERS, AUDIT, GROUP = "od-orders", "od-audit", "od-app"
O0, O1, A0 = TopicPartition(ORDERS, 0), TopicPartition(ORDERS, 1), TopicPartition(AUDIT, 0)


def _admin(broker: BrokerProcess) -> KafkaAdminClient:
    return KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=15_000)


@pytest.fixture
def broker(broker_factory: Callable[[Sequence[str]], BrokerProcess]) -> BrokerProcess:
    """A broker of this test's own (named ``broker`` so that a failure shows its log tail): the
    test restarts it."""
    return broker_factory(OVERRIDES)


@pytest.fixture
def member(broker: BrokerProcess) -> Iterator[KafkaConsumer]:
    """A member of GROUP subscribed to ORDERS, with its partitions assigned."""
    create_topic(broker.bootstrap, ORDERS, 2)
    create_topic(broker.bootstrap, AUDIT, 1)
    consumer = KafkaConsumer(
        ORDERS, bootstrap_servers=broker.bootstrap, group_id=GROUP, enable_auto_commit=False
    )
    try:
        deadline = time.monotonic() + TIMEOUT_S
        while not consumer.assignment() and time.monotonic() < deadline:
            consumer.poll(timeout_ms=200)
        assert consumer.assignment() == {O0, O1}
        yield consumer
    finally:
        consumer.close(autocommit=False)


def _fetched(broker: BrokerProcess) -> dict[TopicPartition, int]:
    """OffsetFetch of the three partitions by name (-1: no committed offset)."""
    admin = _admin(broker)
    try:
        offsets = admin.list_group_offsets({GROUP: [O0, O1, A0]})[GROUP]
    finally:
        admin.close()
    return {tp: meta.offset for tp, meta in offsets.items()}


def _state(broker: BrokerProcess) -> str:
    admin = _admin(broker)
    try:
        return str(admin.describe_groups([GROUP])[GROUP]["group_state"])
    finally:
        admin.close()


def test_offsets_are_deleted_unless_subscribed_and_stay_deleted_after_a_restart(
    broker: BrokerProcess, member: KafkaConsumer
) -> None:
    member.commit({O0: OffsetAndMetadata(3, "", -1), O1: OffsetAndMetadata(4, "", -1),
                   A0: OffsetAndMetadata(5, "", -1)})  # fmt: skip
    admin = _admin(broker)
    try:
        assert admin.delete_group_offsets(GROUP, [O0, A0]) == {O0: GroupSubscribedToTopicError, A0: NoError}
        assert _fetched(broker) == {O0: 3, O1: 4, A0: -1}
        with pytest.raises(GroupIdNotFoundError):
            admin.delete_group_offsets("od-nobody", [O0])

        member.close(autocommit=False)
        wait_for(lambda: _state(broker) == "Empty", TIMEOUT_S, "the member to leave", interval_s=0.1)
        assert admin.delete_group_offsets(GROUP, [O0]) == {O0: NoError}
        assert _fetched(broker) == {O0: -1, O1: 4, A0: -1}
    finally:
        admin.close()

    broker.restart(signal.SIGKILL)
    wait_for(
        lambda: _fetched(broker) == {O0: -1, O1: 4, A0: -1},
        TIMEOUT_S,
        "the restarted broker to serve the offsets left",
        interval_s=0.2,
    )
    assert _state(broker) == "Empty"
