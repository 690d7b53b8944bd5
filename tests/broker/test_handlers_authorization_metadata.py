"""The authorization matrix of Metadata and DescribeTopicPartitions: topics a principal may not
DESCRIBE are left out of an all-topics answer and answered TOPIC_AUTHORIZATION_FAILED when named,
auto-creation needs CREATE, and authorized operations are the authorizer's bit fields."""

from __future__ import annotations

import pathlib
from collections.abc import Iterator
from typing import Any

import pytest

from broker.handlers.describe_topic_partitions import DescribeTopicPartitionsHandler
from broker.handlers.metadata import (
    AUTHORIZED_OPERATIONS_OMITTED,
    CLUSTER_AUTHORIZED_OPERATIONS,
    MetadataHandler,
)
from protocol.acl_types import AclOperation, AclPermissionType, PatternType, ResourceType
from protocol.error_codes import ErrorCode
from protocol.sentinels import ZERO_UUID
from tests.broker.authorization_support import (
    ADMIN,
    ALICE,
    BOB,
    acl,
    authorizer,
    call_as,
    cluster_acl,
    with_authorizer,
)
from tests.broker.cluster_admin_support import three_brokers
from tests.broker.test_handlers_admin import Env
from tests.broker.test_handlers_describe_topic_partitions import dtp_body

pytestmark = pytest.mark.timeout(60)

TOPIC = ResourceType.TOPIC
NONE = int(ErrorCode.NONE)
TOPIC_DENIED = int(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
ALICE_READS_APP = acl(TOPIC, "app-", AclOperation.READ, pattern=PatternType.PREFIXED)


@pytest.fixture
def env(tmp_path: pathlib.Path) -> Iterator[Env]:
    environment = Env(tmp_path)
    environment.topics.create_topic("app-orders", 1, 1, {})
    environment.topics.create_topic("secret", 1, 1, {})
    yield environment
    environment.replicas.shutdown()
    environment.logs.shutdown()


def metadata(env: Env, *bindings: Any) -> MetadataHandler:
    return with_authorizer(env.metadata(), authorizer(*bindings))  # type: ignore[return-value]


def names(response: Any) -> dict[str, int]:
    return {t.name: t.error_code for t in response.topics}


@pytest.mark.parametrize("version", [0, 1, 12])
async def test_all_topics_lists_only_described_ones(env: Env, version: int) -> None:
    handler = metadata(env, ALICE_READS_APP)
    request: dict[str, Any] = {"topics": [] if version == 0 else None, "allow_auto_topic_creation": False}
    assert names(await call_as(handler, version, request, ALICE)) == {"app-orders": NONE}
    assert names(await call_as(handler, version, request, BOB)) == {}
    assert names(await call_as(handler, version, request, ADMIN)) == {"app-orders": NONE, "secret": NONE}


@pytest.mark.parametrize("version", [1, 12])
async def test_named_topics_not_described_are_authorization_failures(env: Env, version: int) -> None:
    handler = metadata(env, ALICE_READS_APP)
    request: dict[str, Any] = {"topics": [{"name": "app-orders"}, {"name": "secret"}, {"name": "ghost"}]}
    if version >= 4:
        request["allow_auto_topic_creation"] = False
    answer = await call_as(handler, version, request, ALICE)
    # whether "ghost" exists is not disclosed
    assert names(answer) == {"app-orders": NONE, "secret": TOPIC_DENIED, "ghost": TOPIC_DENIED}
    secret = next(t for t in answer.topics if t.name == "secret")
    assert secret.partitions == [] and (version < 10 or secret.topic_id == ZERO_UUID)


async def test_topic_named_by_id_not_described(env: Env) -> None:
    handler = metadata(env, ALICE_READS_APP)
    secret = env.topics.get("secret")
    assert secret is not None
    answer = await call_as(handler, 12, {"topics": [{"topic_id": secret.topic_id, "name": None}]}, ALICE)
    assert [(t.name, t.topic_id, t.error_code) for t in answer.topics] == [
        (None, secret.topic_id, TOPIC_DENIED)
    ]


async def test_auto_creation_needs_create(env: Env) -> None:
    handler = metadata(
        env,
        acl(TOPIC, "*", AclOperation.DESCRIBE, user=BOB),
        acl(TOPIC, "*", AclOperation.DESCRIBE),
        acl(TOPIC, "auto-", AclOperation.CREATE, pattern=PatternType.PREFIXED),
    )
    request = {"topics": [{"name": "auto-made"}, {"name": "other-made"}], "allow_auto_topic_creation": True}
    assert names(await call_as(handler, 12, request, BOB)) == {
        "auto-made": TOPIC_DENIED,
        "other-made": TOPIC_DENIED,
    }
    assert env.topics.get("auto-made") is None
    assert names(await call_as(handler, 12, request, ALICE)) == {
        "auto-made": NONE,
        "other-made": TOPIC_DENIED,
    }
    assert env.topics.get("auto-made") is not None


async def test_auto_creation_with_create_on_the_cluster(env: Env) -> None:
    handler = metadata(env, acl(TOPIC, "*", AclOperation.DESCRIBE), cluster_acl(AclOperation.CREATE))
    request = {"topics": [{"name": "made"}], "allow_auto_topic_creation": True}
    assert names(await call_as(handler, 12, request, ALICE)) == {"made": NONE}


async def test_authorized_operations_are_the_authorizers(env: Env) -> None:
    handler = metadata(env, ALICE_READS_APP, cluster_acl(AclOperation.DESCRIBE))
    request = {
        "topics": [{"name": "app-orders"}],
        "allow_auto_topic_creation": False,
        "include_cluster_authorized_operations": True,
        "include_topic_authorized_operations": True,
    }
    alice = await call_as(handler, 10, request, ALICE)
    read, describe = int(AclOperation.READ), int(AclOperation.DESCRIBE)
    assert alice.topics[0].topic_authorized_operations == (1 << read) | (1 << describe)
    assert alice.cluster_authorized_operations == 1 << describe
    bob = await call_as(handler, 10, request, BOB)
    assert bob.cluster_authorized_operations == 0
    assert bob.topics[0].topic_authorized_operations == AUTHORIZED_OPERATIONS_OMITTED
    admin = await call_as(handler, 10, request, ADMIN)
    assert admin.cluster_authorized_operations == CLUSTER_AUTHORIZED_OPERATIONS


async def test_deny_wins_over_allow(env: Env) -> None:
    handler = metadata(
        env,
        acl(TOPIC, "*", AclOperation.DESCRIBE),
        acl(TOPIC, "secret", AclOperation.DESCRIBE, permission=AclPermissionType.DENY),
    )
    answer = await call_as(handler, 12, {"topics": None, "allow_auto_topic_creation": False}, ALICE)
    assert names(answer) == {"app-orders": NONE}


async def test_metadata_without_an_authorizer_is_unchanged(env: Env) -> None:
    answer = await call_as(env.metadata(), 12, {"topics": None, "allow_auto_topic_creation": False}, BOB)
    assert names(answer) == {"app-orders": NONE, "secret": NONE}


# -- DescribeTopicPartitions -----------------------------------------------------------------------


async def test_describe_topic_partitions_filters_and_denies() -> None:
    cluster = three_brokers()
    cluster.create_assigned("app-a", [1, 2])
    cluster.create_assigned("b", [2, 3])
    handler = DescribeTopicPartitionsHandler(cluster.image, authorizer(ALICE_READS_APP))
    everything = await call_as(handler, 0, dtp_body([]), ALICE)
    assert [(t.name, t.error_code) for t in everything.topics] == [("app-a", NONE)]
    read, describe = int(AclOperation.READ), int(AclOperation.DESCRIBE)
    assert everything.topics[0].topic_authorized_operations == (1 << read) | (1 << describe)
    named = await call_as(handler, 0, dtp_body(["b", "app-a", "ghost"]), ALICE)
    assert [(t.name, t.error_code) for t in named.topics] == [
        ("app-a", NONE),
        ("b", TOPIC_DENIED),
        ("ghost", TOPIC_DENIED),
    ]
    bob = await call_as(handler, 0, dtp_body([]), BOB)
    assert bob.topics == []
