"""The authorization matrix of the data plane (Produce, Fetch, ListOffsets, OffsetForLeaderEpoch):
each API as a principal the ACLs allow and as one they do not, answered with Kafka's error codes
(KafkaApis), and the default (no authorizer) untouched."""

from __future__ import annotations

import pathlib
from collections.abc import AsyncIterator

import pytest

from broker.handlers.fetch import FetchHandler
from broker.handlers.list_offsets import ListOffsetsHandler
from broker.handlers.offset_for_leader_epoch import OffsetForLeaderEpochHandler
from broker.handlers.produce import ProduceHandler
from protocol.acl_types import AclOperation, AclPermissionType, PatternType, ResourceType
from protocol.error_codes import ErrorCode
from tests.broker.authorization_support import ADMIN, ALICE, BOB, acl, authorizer, call_as, cluster_acl
from tests.broker.test_fetch_service import FetchEnv, batch, fetch_env
from tests.broker.test_handlers_fetch import P, body, partitions_of
from tests.broker.test_handlers_offsets import epoch_body, list_body
from tests.broker.test_handlers_offsets import replicas as replicas
from tests.broker.test_handlers_produce import ProduceEnv, partition_results, produce_body, produce_env
from tests.broker.test_handlers_produce import batch as produce_batch

pytestmark = pytest.mark.timeout(60)

TOPIC, TXN_ID, CLUSTER = ResourceType.TOPIC, ResourceType.TRANSACTIONAL_ID, ResourceType.CLUSTER
NONE = int(ErrorCode.NONE)
TOPIC_DENIED = int(ErrorCode.TOPIC_AUTHORIZATION_FAILED)


# -- Produce ---------------------------------------------------------------------------------------


@pytest.fixture
def produce(tmp_path: pathlib.Path) -> ProduceEnv:
    return produce_env(tmp_path)


def produce_handler(env: ProduceEnv, *bindings: object) -> ProduceHandler:
    return ProduceHandler(env.handler._service, authorizer=authorizer(*bindings))  # type: ignore[arg-type]


@pytest.mark.parametrize("version", [3, 11])
async def test_produce_needs_write_on_each_topic(produce: ProduceEnv, version: int) -> None:
    handler = produce_handler(produce, acl(TOPIC, "ord", AclOperation.WRITE, pattern=PatternType.PREFIXED))
    request = produce_body(
        [("orders", 0, produce_batch()), ("zipped", 0, produce_batch()), ("nope", 0, None)]
    )
    alice = partition_results(await call_as(handler, version, request, ALICE))
    # authorization comes first: a topic that does not exist is TOPIC_AUTHORIZATION_FAILED too
    assert {k: p.error_code for k, p in alice.items()} == {
        ("orders", 0): NONE,
        ("zipped", 0): TOPIC_DENIED,
        ("nope", 0): TOPIC_DENIED,
    }
    assert alice[("orders", 0)].base_offset == 0
    bob = partition_results(await call_as(handler, version, request, BOB))
    assert {p.error_code for p in bob.values()} == {TOPIC_DENIED}
    admin = partition_results(await call_as(handler, version, request, ADMIN))
    assert admin[("orders", 0)].error_code == NONE and admin[("orders", 0)].base_offset == 1


async def test_produce_deny_wins_over_allow(produce: ProduceEnv) -> None:
    handler = produce_handler(
        produce,
        acl(TOPIC, "*", AclOperation.WRITE),
        acl(TOPIC, "orders", AclOperation.WRITE, permission=AclPermissionType.DENY),
    )
    answer = partition_results(
        await call_as(
            handler, 11, produce_body([("orders", 0, produce_batch()), ("zipped", 0, produce_batch())]), ALICE
        )
    )
    assert answer[("orders", 0)].error_code == TOPIC_DENIED
    assert answer[("zipped", 0)].error_code == NONE


async def test_transactional_produce_needs_write_on_the_transactional_id(produce: ProduceEnv) -> None:
    handler = produce_handler(produce, acl(TOPIC, "orders", AclOperation.WRITE))
    request = produce_body([("orders", 0, produce_batch())], transactional_id="txn-1")
    answer = partition_results(await call_as(handler, 11, request, ALICE))
    assert answer[("orders", 0)].error_code == int(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)


async def test_produce_without_an_authorizer_is_unchanged(produce: ProduceEnv) -> None:
    answer = partition_results(
        await call_as(produce.handler, 11, produce_body([("orders", 0, produce_batch())]), BOB)
    )
    assert answer[("orders", 0)].error_code == NONE


# -- Fetch -----------------------------------------------------------------------------------------


@pytest.fixture
async def fetch(tmp_path: pathlib.Path) -> AsyncIterator[FetchEnv]:
    env = fetch_env(tmp_path)
    env.append("orders", 0, batch(2))
    env.append("other", 0, batch(1))
    yield env
    env.purgatory.shutdown()
    env.replicas.shutdown()
    env.logs.shutdown()


def fetch_handler(env: FetchEnv, *bindings: object) -> FetchHandler:
    return FetchHandler(env.service, authorizer=authorizer(*bindings))  # type: ignore[arg-type]


@pytest.mark.parametrize("version", [4, 12, 13, 17])
async def test_consumer_fetch_needs_read_on_each_topic(fetch: FetchEnv, version: int) -> None:
    handler = fetch_handler(fetch, acl(TOPIC, "orders", AclOperation.READ))
    request = body(fetch, version, [P("orders"), P("other")])
    alice = partitions_of(await call_as(handler, version, request, ALICE), version)
    errors = [p.error_code for _, p in alice]
    assert errors == [NONE, TOPIC_DENIED]  # the denied partition is erroneous: reported last
    assert alice[0][1].high_watermark == 2
    bob = partitions_of(await call_as(handler, version, request, BOB), version)
    assert [p.error_code for _, p in bob] == [TOPIC_DENIED, TOPIC_DENIED]


async def test_fetch_session_keeps_answering_a_denied_partition(fetch: FetchEnv) -> None:
    """KIP-227: the denied partition is in the session; each incremental fetch reports it."""
    handler = fetch_handler(fetch, acl(TOPIC, "orders", AclOperation.READ))
    request = body(fetch, 12, [P("orders", offset=2), P("other")], session=(0, 0))
    full = await call_as(handler, 12, request, ALICE)
    assert full.session_id != 0
    assert sorted(p.error_code for _, p in partitions_of(full, 12)) == [NONE, TOPIC_DENIED]
    incremental = await call_as(handler, 12, body(fetch, 12, [], session=(full.session_id, 1)), ALICE)
    assert incremental.error_code == NONE
    assert [(t, p.error_code) for t, p in partitions_of(incremental, 12)] == [("other", TOPIC_DENIED)]


@pytest.mark.parametrize("version", [12, 17])
async def test_follower_fetch_needs_cluster_action(fetch: FetchEnv, version: int) -> None:
    handler = fetch_handler(
        fetch, cluster_acl(AclOperation.CLUSTER_ACTION), acl(TOPIC, "*", AclOperation.READ, user=BOB)
    )
    request = body(fetch, version, [P("orders")], replica_id=2)
    alice = partitions_of(await call_as(handler, version, request, ALICE), version)
    assert [p.error_code for _, p in alice] != [TOPIC_DENIED]
    bob = partitions_of(await call_as(handler, version, request, BOB), version)  # READ is not enough
    assert [p.error_code for _, p in bob] == [TOPIC_DENIED]


# -- ListOffsets and OffsetForLeaderEpoch ----------------------------------------------------------


@pytest.mark.parametrize("version", [1, 9])
async def test_list_offsets_needs_describe_on_the_topic(replicas: object, version: int) -> None:
    handler = ListOffsetsHandler(replicas, authorizer(acl(TOPIC, "orders", AclOperation.READ)))  # type: ignore[arg-type]
    request = list_body([("orders", 0, -1), ("secret", 0, -1)])
    alice = await call_as(handler, version, request, ALICE)
    assert {t.name: [p.error_code for p in t.partitions] for t in alice.topics} == {
        "orders": [NONE],
        "secret": [TOPIC_DENIED],
    }
    bob = await call_as(handler, version, request, BOB)
    assert {p.error_code for t in bob.topics for p in t.partitions} == {TOPIC_DENIED}


@pytest.mark.parametrize("version", [2, 4])
async def test_offset_for_leader_epoch_describe_or_cluster_action(replicas: object, version: int) -> None:
    handler = OffsetForLeaderEpochHandler(
        replicas,  # type: ignore[arg-type]
        authorizer(
            acl(TOPIC, "orders", AclOperation.DESCRIBE),
            cluster_acl(AclOperation.CLUSTER_ACTION, user="follower"),
        ),
    )
    request = epoch_body([("orders", 0, -1, 3)])
    for user, expected in ((ALICE, NONE), ("follower", NONE), (BOB, TOPIC_DENIED)):
        answer = await call_as(handler, version, request, user)
        assert [p.error_code for t in answer.topics for p in t.partitions] == [expected], user
