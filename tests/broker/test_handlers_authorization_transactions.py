"""The authorization matrix of the transaction APIs (KafkaApis): InitProducerId (WRITE on the
transactional id; an idempotent producer IDEMPOTENT_WRITE on the cluster or WRITE on some topic),
AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, TxnOffsetCommit, DescribeTransactions,
ListTransactions, DescribeProducers and WriteTxnMarkers."""

from __future__ import annotations

import pathlib
from typing import Any

import pytest

from broker.handlers.add_offsets_to_txn import AddOffsetsToTxnHandler
from broker.handlers.add_partitions_to_txn import AddPartitionsToTxnHandler
from broker.handlers.describe_producers import DescribeProducersHandler
from broker.handlers.describe_transactions import DescribeTransactionsHandler
from broker.handlers.end_txn import EndTxnHandler
from broker.handlers.init_producer_id import InitProducerIdHandler
from broker.handlers.list_transactions import ListTransactionsHandler
from broker.handlers.txn_offset_commit import TxnOffsetCommitHandler
from broker.handlers.write_txn_markers import WriteTxnMarkersHandler
from protocol.acl_types import AclOperation, PatternType, ResourceType
from protocol.error_codes import ErrorCode
from tests.broker.authorization_support import ALICE, BOB, acl, authorizer, call_as, cluster_acl
from tests.broker.group_handlers_support import Env as GroupEnv
from tests.broker.local_topics import LocalTopics
from tests.broker.test_handlers_produce import NODE, produce_env
from tests.coordinator.transaction.helpers import Harness

pytestmark = pytest.mark.timeout(60)

TOPIC, GROUP, TXN_ID = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.TRANSACTIONAL_ID
NONE = int(ErrorCode.NONE)
TOPIC_DENIED = int(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
TXN_DENIED = int(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
GROUP_DENIED = int(ErrorCode.GROUP_AUTHORIZATION_FAILED)
CLUSTER_DENIED = int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
ALICE_ACLS = (
    acl(TXN_ID, "txn", AclOperation.WRITE),
    acl(TOPIC, "orders", AclOperation.WRITE),
    acl(TOPIC, "orders", AclOperation.READ),
    acl(GROUP, "app-", AclOperation.READ, pattern=PatternType.PREFIXED),
)


class ProducerIds:
    def generate_producer_id(self) -> int:
        return 42


async def test_init_producer_id() -> None:
    h = Harness()
    handler = InitProducerIdHandler(
        ProducerIds(),
        h.coordinator,
        authorizer(*ALICE_ACLS, cluster_acl(AclOperation.IDEMPOTENT_WRITE, user="carol")),
    )
    transactional = {
        "transactional_id": "txn",
        "transaction_timeout_ms": 60_000,
        "producer_id": -1,
        "producer_epoch": -1,
    }
    assert (await call_as(handler, 4, transactional, ALICE)).error_code == NONE
    assert (await call_as(handler, 4, transactional, BOB)).error_code == TXN_DENIED
    idempotent = {**transactional, "transactional_id": None}
    for user, expected in ((ALICE, NONE), ("carol", NONE), (BOB, CLUSTER_DENIED)):
        answer = await call_as(handler, 4, idempotent, user)
        assert answer.error_code == expected, user
    assert (await call_as(handler, 4, idempotent, ALICE)).producer_id == 42


def add_body(
    version: int, txn_id: str, pid: int, epoch: int, partitions: dict[str, list[int]]
) -> dict[str, Any]:
    topics = [{"name": name, "partitions": indexes} for name, indexes in partitions.items()]
    if version < 4:
        return {
            "v3_and_below_transactional_id": txn_id,
            "v3_and_below_producer_id": pid,
            "v3_and_below_producer_epoch": epoch,
            "v3_and_below_topics": topics,
        }
    txn = {
        "transactional_id": txn_id,
        "producer_id": pid,
        "producer_epoch": epoch,
        "verify_only": True,
        "topics": topics,
    }
    return {"transactions": [txn]}


def v3_errors(answer: Any) -> dict[tuple[str, int], int]:
    return {
        (t.name, p.partition_index): p.partition_error_code
        for t in answer.results_by_topic_v3_and_below
        for p in t.results_by_partition
    }


async def test_add_partitions_to_txn() -> None:
    h = Harness()
    pid, epoch = await h.init("txn")
    handler = AddPartitionsToTxnHandler(
        h.coordinator,
        lambda topic, index: True,
        authorizer(*ALICE_ACLS, cluster_acl(AclOperation.CLUSTER_ACTION, user="broker")),
    )
    both = add_body(3, "txn", pid, epoch, {"orders": [0], "secret": [0]})
    assert v3_errors(await call_as(handler, 3, both, BOB)) == {
        ("orders", 0): TXN_DENIED,
        ("secret", 0): TXN_DENIED,
    }
    assert v3_errors(await call_as(handler, 3, both, ALICE)) == {
        ("orders", 0): int(ErrorCode.OPERATION_NOT_ATTEMPTED),
        ("secret", 0): TOPIC_DENIED,
    }
    # internal topics need no topic ACL
    allowed = add_body(3, "txn", pid, epoch, {"orders": [0], "__consumer_offsets": [0]})
    assert set(v3_errors(await call_as(handler, 3, allowed, ALICE)).values()) == {NONE}
    # v4+ come from brokers: CLUSTER_ACTION
    batched = add_body(4, "txn", pid, epoch, {"orders": [0]})
    assert (await call_as(handler, 4, batched, ALICE)).error_code == CLUSTER_DENIED
    assert (await call_as(handler, 4, batched, "broker")).error_code == NONE


async def test_add_offsets_and_end_txn() -> None:
    h = Harness()
    pid, epoch = await h.begin("txn", ("orders", 0))
    authz = authorizer(*ALICE_ACLS)
    add_offsets = AddOffsetsToTxnHandler(h.coordinator, lambda group: 0, authz)
    body = {"transactional_id": "txn", "producer_id": pid, "producer_epoch": epoch}
    assert (await call_as(add_offsets, 3, {**body, "group_id": "app-1"}, BOB)).error_code == TXN_DENIED
    assert (await call_as(add_offsets, 3, {**body, "group_id": "other"}, ALICE)).error_code == GROUP_DENIED
    end = EndTxnHandler(h.coordinator, authz)
    assert (await call_as(end, 3, {**body, "committed": False}, BOB)).error_code == TXN_DENIED
    assert (await call_as(end, 3, {**body, "committed": False}, ALICE)).error_code == NONE


async def test_txn_offset_commit() -> None:
    groups = GroupEnv()

    async def verify(*_: Any) -> object:
        return ErrorCode.NOT_COORDINATOR  # the commit is not carried out: only authorization matters

    handler = TxnOffsetCommitHandler(
        groups.coordinator, lambda topic, index: True, verify, authorizer(*ALICE_ACLS)
    )

    def body(group: str) -> dict[str, Any]:
        return {
            "transactional_id": "txn",
            "group_id": group,
            "producer_id": 1,
            "producer_epoch": 0,
            "generation_id": -1,
            "member_id": "",
            "group_instance_id": None,
            "topics": [
                {
                    "name": name,
                    "partitions": [
                        {
                            "partition_index": 0,
                            "committed_offset": 1,
                            "committed_leader_epoch": -1,
                            "committed_metadata": "",
                        }
                    ],
                }
                for name in ("orders", "secret")
            ],
        }

    def errors(answer: Any) -> dict[str, int]:
        return {t.name: t.partitions[0].error_code for t in answer.topics}

    assert errors(await call_as(handler, 3, body("app-1"), BOB)) == {
        "orders": TXN_DENIED,
        "secret": TXN_DENIED,
    }
    assert errors(await call_as(handler, 3, body("other"), ALICE)) == {
        "orders": GROUP_DENIED,
        "secret": GROUP_DENIED,
    }
    alice = errors(await call_as(handler, 3, body("app-1"), ALICE))
    assert alice["secret"] == TOPIC_DENIED and alice["orders"] not in (TOPIC_DENIED, TXN_DENIED, GROUP_DENIED)


async def test_describe_and_list_transactions() -> None:
    h = Harness()
    await h.begin("txn", ("orders", 0), ("secret", 0))
    await h.begin("other", ("orders", 1))
    authz = authorizer(*ALICE_ACLS)
    describe = DescribeTransactionsHandler(h.coordinator, authz)
    answer = await call_as(describe, 0, {"transactional_ids": ["txn", "other"]}, ALICE)
    txn, other = answer.transaction_states
    # WRITE on the id implies DESCRIBE; only the topics alice may DESCRIBE are listed
    assert (txn.error_code, [t.topic for t in txn.topics]) == (NONE, ["orders"])
    assert other.error_code == TXN_DENIED
    listing = ListTransactionsHandler(h.coordinator, authz)
    body = {"state_filters": [], "producer_id_filters": [], "duration_filter": -1}
    assert [t.transactional_id for t in (await call_as(listing, 1, body, ALICE)).transaction_states] == [
        "txn"
    ]
    assert (await call_as(listing, 1, body, BOB)).transaction_states == []


async def test_describe_producers_needs_read(tmp_path: pathlib.Path) -> None:
    topics = LocalTopics(NODE)
    topics.create_topic("orders", 1, 1, {})
    topics.create_topic("secret", 1, 1, {})
    env = produce_env(tmp_path, topics)
    handler = DescribeProducersHandler(env.replicas, topics, authorizer(*ALICE_ACLS))
    body = {"topics": [{"name": n, "partition_indexes": [0]} for n in ("orders", "secret")]}
    answer = await call_as(handler, 0, body, ALICE)
    assert {t.name: t.partitions[0].error_code for t in answer.topics} == {
        "orders": NONE,
        "secret": TOPIC_DENIED,
    }


async def test_write_txn_markers_needs_cluster_action() -> None:
    handler = WriteTxnMarkersHandler(None, authorizer(*ALICE_ACLS))  # type: ignore[arg-type]
    marker = {
        "producer_id": 1,
        "producer_epoch": 0,
        "transaction_result": True,
        "topics": [{"name": "orders", "partition_indexes": [0]}],
        "coordinator_epoch": 0,
    }
    answer = await call_as(handler, 1, {"markers": [marker]}, ALICE)
    assert answer.markers[0].topics[0].partitions[0].error_code == CLUSTER_DENIED
