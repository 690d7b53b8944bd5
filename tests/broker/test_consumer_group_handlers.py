"""ConsumerGroupHeartbeat and ConsumerGroupDescribe through their codecs, every version, over a real
coordinator on simulated time; their authorization as Kafka 4.0's KafkaApis; OffsetCommit v9 and
OffsetFetch v9 with a member epoch; and the APIs served (advertised) only while
``group.coordinator.rebalance.protocols`` lists ``consumer``."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from broker.assembly import group_handlers
from broker.handlers.consumer_group_describe import ConsumerGroupDescribeHandler
from broker.handlers.consumer_group_heartbeat import ConsumerGroupHeartbeatHandler
from broker.handlers.offset_commit import OffsetCommitHandler
from broker.handlers.offset_fetch import OffsetFetchHandler
from protocol.acl_types import AclOperation, ResourceType
from protocol.api_keys import ApiKey
from protocol.data import MessageData
from protocol.error_codes import ErrorCode
from tests.broker.authorization_support import ALICE, acl, authorizer, call_as, with_authorizer
from tests.broker.group_handlers_support import call
from tests.coordinator.group.consumer_helpers import ConsumerHarness
from tests.coordinator.group.helpers import config

pytestmark = pytest.mark.timeout(60)

E = ErrorCode
GROUP, TOPIC = ResourceType.GROUP, ResourceType.TOPIC


class ConsumerEnv:
    def __init__(self, **overrides: Any) -> None:
        self.h = ConsumerHarness(config(**overrides))
        self.topic_id = self.h.topics.create("orders", 4)
        coordinator = self.h.coordinator
        self.heartbeat = ConsumerGroupHeartbeatHandler(coordinator)
        self.describe = ConsumerGroupDescribeHandler(coordinator)
        self.commit = OffsetCommitHandler(coordinator)
        self.fetch = OffsetFetchHandler(coordinator)


def join_body(member_id: str = "m1", group_id: str = "app-group", **extra: Any) -> dict[str, Any]:
    return {
        "group_id": group_id,
        "member_id": member_id,
        "member_epoch": 0,
        "rebalance_timeout_ms": 300_000,
        "subscribed_topic_names": ["orders"],
        "topic_partitions": [],
        **extra,
    }


@pytest.mark.parametrize("version", [0, 1])
def test_join_heartbeat_and_leave(version: int) -> None:
    env = ConsumerEnv()

    async def run() -> None:
        joined = await call(env.heartbeat, version, join_body())
        assert (joined.error_code, joined.member_id, joined.member_epoch) == (0, "m1", 1)
        assert joined.heartbeat_interval_ms == 5000
        [tp] = joined.assignment.topic_partitions
        assert (tp.topic_id, tp.partitions) == (env.topic_id, [0, 1, 2, 3])
        steady = await call(
            env.heartbeat, version, {"group_id": "app-group", "member_id": "m1", "member_epoch": 1}
        )
        assert (steady.error_code, steady.member_epoch, steady.assignment) == (0, 1, None)
        left = await call(
            env.heartbeat, version, {"group_id": "app-group", "member_id": "m1", "member_epoch": -1}
        )
        assert (left.error_code, left.member_id, left.member_epoch) == (0, "m1", -1)

    asyncio.run(run())


def test_v0_joins_without_a_member_id_and_v1_may_not() -> None:
    env = ConsumerEnv()

    async def run() -> None:
        v0 = await call(env.heartbeat, 0, join_body(""))
        assert v0.error_code == 0 and v0.member_id == "generated-1"
        v1 = await call(env.heartbeat, 1, join_body(""))
        assert (v1.error_code, v1.error_message) == (int(E.INVALID_REQUEST), "MemberId can't be empty.")
        assert (v1.member_id, v1.member_epoch, v1.assignment) == (None, 0, None)

    asyncio.run(run())


def test_describe_shows_members_and_assignments() -> None:
    env = ConsumerEnv()

    async def run() -> None:
        await call(env.heartbeat, 1, join_body())
        for version in (0, 1):
            answer = await call(
                env.describe,
                version,
                {"group_ids": ["app-group", "nobody"], "include_authorized_operations": True},
            )
            group, missing = answer.groups
            assert (group.error_code, group.group_state, group.group_epoch, group.assignor_name) == (
                0,
                "Stable",
                1,
                "uniform",
            )
            assert group.authorized_operations == (1 << 3) | (1 << 6) | (1 << 8)
            [member] = group.members
            assert (member.member_id, member.client_id, member.client_host) == (
                "m1",
                "consumer-1",
                "/10.1.2.3",
            )
            assert member.subscribed_topic_names == ["orders"]
            assert member.assignment.topic_partitions[0].topic_name == "orders"
            assert member.member_type == (1 if version == 1 else -1)
            assert missing.error_code == int(E.GROUP_ID_NOT_FOUND)

    asyncio.run(run())


def test_offset_commit_v9_and_fetch_v9_carry_the_member_epoch() -> None:
    env = ConsumerEnv()

    def commit(epoch: int, version: int = 9) -> dict[str, Any]:
        partitions = [{"partition_index": 0, "committed_offset": 10, "committed_metadata": None}]
        return {
            "group_id": "app-group",
            "generation_id_or_member_epoch": epoch,
            "member_id": "m1",
            "topics": [{"name": "orders", "partitions": partitions}],
        }

    def fetch(epoch: int) -> dict[str, Any]:
        group = {
            "group_id": "app-group",
            "member_id": "m1",
            "member_epoch": epoch,
            "topics": [{"name": "orders", "partition_indexes": [0]}],
        }
        return {"groups": [group], "require_stable": True}

    async def run() -> None:
        await call(env.heartbeat, 1, join_body())
        ok = await call(env.commit, 9, commit(1))
        assert ok.topics[0].partitions[0].error_code == 0
        stale = await call(env.commit, 9, commit(0))
        assert stale.topics[0].partitions[0].error_code == int(E.STALE_MEMBER_EPOCH)
        old = await call(env.commit, 8, commit(1))
        assert old.topics[0].partitions[0].error_code == int(E.UNSUPPORTED_VERSION)
        fetched = await call(env.fetch, 9, fetch(1))
        assert fetched.groups[0].error_code == 0
        assert fetched.groups[0].topics[0].partitions[0].committed_offset == 10
        refused = await call(env.fetch, 9, fetch(5))
        assert refused.groups[0].error_code == int(E.STALE_MEMBER_EPOCH)
        missing = await call(env.commit, 9, {**commit(3), "group_id": "no-such-group"})
        assert missing.topics[0].partitions[0].error_code == int(E.GROUP_ID_NOT_FOUND)

    asyncio.run(run())


# -- authorization ----------------------------------------------------------------------------------


def test_heartbeat_needs_read_on_the_group_and_describe_on_its_topics() -> None:
    env = ConsumerEnv()
    read = acl(GROUP, "app-group", AclOperation.READ)
    describe = acl(TOPIC, "orders", AclOperation.DESCRIBE)

    async def run() -> MessageData:
        nothing = await call_as(with_authorizer(env.heartbeat, authorizer()), 1, join_body(), ALICE)
        assert nothing.error_code == int(E.GROUP_AUTHORIZATION_FAILED)
        no_topic = await call_as(with_authorizer(env.heartbeat, authorizer(read)), 1, join_body(), ALICE)
        assert no_topic.error_code == int(E.TOPIC_AUTHORIZATION_FAILED)
        assert env.h.coordinator.consumer_group("app-group") is None
        return await call_as(
            with_authorizer(env.heartbeat, authorizer(read, describe)), 1, join_body(), ALICE
        )

    assert asyncio.run(run()).error_code == 0


def test_describe_needs_describe_on_the_group_and_on_its_topics() -> None:
    env = ConsumerEnv()
    body = {"group_ids": ["hidden", "app-group"], "include_authorized_operations": True}

    async def run() -> None:
        await call(env.heartbeat, 1, join_body())
        group_only = authorizer(acl(GROUP, "app-group", AclOperation.DESCRIBE))
        answer = await call_as(with_authorizer(env.describe, group_only), 1, body, ALICE)
        assert [(g.group_id, g.error_code) for g in answer.groups] == [
            ("hidden", int(E.GROUP_AUTHORIZATION_FAILED)),
            ("app-group", int(E.TOPIC_AUTHORIZATION_FAILED)),
        ]
        both = authorizer(
            acl(GROUP, "app-group", AclOperation.DESCRIBE), acl(TOPIC, "orders", AclOperation.DESCRIBE)
        )
        answer = await call_as(with_authorizer(env.describe, both), 1, body, ALICE)
        described = answer.groups[1]
        assert (described.error_code, len(described.members)) == (0, 1)
        assert described.authorized_operations == 1 << 8  # DESCRIBE only

    asyncio.run(run())


# -- served only with the consumer protocol ------------------------------------------------------------


class _Groups:
    def __init__(self, coordinator: Any) -> None:
        self.runtime = type("Runtime", (), {"coordinator": coordinator})()


def _api_keys(**overrides: Any) -> set[int]:
    h = ConsumerHarness(config(**overrides))
    transactions = type("Txn", (), {"runtime": None})()
    handlers = group_handlers(_Groups(h.coordinator), transactions, h.topics)  # type: ignore[arg-type]
    return {int(handler.api_key) for handler in handlers}


def test_consumer_group_apis_are_served_only_with_the_consumer_protocol() -> None:
    served = _api_keys()
    assert {ApiKey.CONSUMER_GROUP_HEARTBEAT, ApiKey.CONSUMER_GROUP_DESCRIBE} <= served
    classic_only = _api_keys(group_coordinator_rebalance_protocols=("classic",))
    assert not {ApiKey.CONSUMER_GROUP_HEARTBEAT, ApiKey.CONSUMER_GROUP_DESCRIBE} & classic_only
    assert ApiKey.JOIN_GROUP in classic_only
