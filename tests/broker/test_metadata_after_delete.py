"""Metadata for a topic just deleted, as Kafka (KRaft) answers it (librdkafka test 0033 saw a topic
come back half a second after its deletion).

Kafka's controller frees a topic's name with the RemoveTopicRecord itself (ReplicationControlManager
has no "being deleted" state, unlike ZooKeeper-era Kafka), and a broker whose metadata has applied
the deletion treats the name as any missing topic: with allow_auto_topic_creation and
auto.create.topics.enable it asks the controller to create it (AutoTopicCreationManager), which
makes a new topic with a new id. Without allow_auto_topic_creation, what Kafka's Java consumer sends
(and librdkafka's consumer by default, allow.auto.create.topics=false), the name stays unknown.
"""

from __future__ import annotations

import pathlib
from collections.abc import Iterator

import pytest

from protocol.records import Record, build_batch
from tests.broker.test_handlers_admin import NONE, UNKNOWN_TOPIC, Env, call


@pytest.fixture
def env(tmp_path: pathlib.Path) -> Iterator[Env]:
    environment = Env(tmp_path)
    yield environment
    environment.replicas.shutdown()
    environment.logs.shutdown()


async def test_a_deleted_topic_stays_deleted_without_allow_auto_topic_creation(env: Env) -> None:
    env.topics.create_topic("gone", 1, 1, {})
    env.topics.delete_topic("gone")
    for version in (4, 12):
        body = {"topics": [{"name": "gone"}], "allow_auto_topic_creation": False}
        response = await call(env.metadata(), version, body)
        assert response.topics[0].error_code == UNKNOWN_TOPIC
    assert env.topics.get("gone") is None


async def test_a_deleted_topic_is_created_anew_when_auto_creation_is_asked(env: Env) -> None:
    """Kafka's semantics: the name is free once the deletion is applied; the new topic has a new id
    and empty logs."""
    old = env.topics.create_topic("gone", 1, 1, {})
    written = env.replicas.get_partition("gone", 0)
    assert written is not None
    written.append_records(build_batch([Record(b"old")]), required_acks=1, now_ms=1_700_000_000_000)
    env.topics.delete_topic("gone")
    body = {"topics": [{"name": "gone"}], "allow_auto_topic_creation": True}
    response = await call(env.metadata(), 12, body)
    assert response.topics[0].error_code == NONE
    new = env.topics.get("gone")
    assert new is not None and new.topic_id != old.topic_id
    assert response.topics[0].topic_id == new.topic_id
    partition = env.replicas.get_partition("gone", 0)
    assert partition is not None and partition.topic_id == new.topic_id
    assert partition.log_end_offset == 0


async def test_a_deleted_topic_stays_deleted_when_the_broker_disables_auto_creation(
    tmp_path: pathlib.Path,
) -> None:
    env = Env(tmp_path, **{"auto.create.topics.enable": "false"})
    try:
        env.topics.create_topic("gone", 1, 1, {})
        env.topics.delete_topic("gone")
        body = {"topics": [{"name": "gone"}], "allow_auto_topic_creation": True}
        assert (await call(env.metadata(), 12, body)).topics[0].error_code == UNKNOWN_TOPIC
        assert env.topics.get("gone") is None
    finally:
        env.replicas.shutdown()
        env.logs.shutdown()
