"""The authorization matrix of the admin APIs: the forwarded ones checked on the broker before
forwarding (there is no Envelope; denied entries are answered here, the rest forwarded), and the
ones a broker answers itself (DeleteRecords, DescribeConfigs, AlterConfigs, DescribeLogDirs,
DescribeCluster, DescribeClientQuotas, DescribeUserScramCredentials)."""

from __future__ import annotations

import pathlib
from collections.abc import Iterator
from typing import Any

import pytest

from broker.handlers.alter_configs import AlterConfigsHandler
from broker.handlers.authorized_forwarding import AuthorizedForwarding
from broker.handlers.base import Handler
from broker.handlers.client_quotas import AlterClientQuotasHandler, DescribeClientQuotasHandler
from broker.handlers.create_partitions import CreatePartitionsHandler
from broker.handlers.create_topics import CreateTopicsHandler
from broker.handlers.delete_records import DeleteRecordsHandler
from broker.handlers.delete_topics import DeleteTopicsHandler
from broker.handlers.describe_cluster import ClusterNode, DescribeClusterHandler, EndpointType
from broker.handlers.describe_configs import DescribeConfigsHandler
from broker.handlers.describe_log_dirs import DescribeLogDirsHandler
from broker.handlers.elect_leaders import ElectLeadersHandler
from broker.handlers.forwarding import ForwardingHandler, effect_of
from broker.handlers.incremental_alter_configs import (
    ForwardedAlterConfigsHandler,
    IncrementalAlterConfigsHandler,
)
from broker.handlers.metadata import CLUSTER_AUTHORIZED_OPERATIONS
from broker.handlers.partition_reassignments import (
    AlterPartitionReassignmentsHandler,
    ListPartitionReassignmentsHandler,
)
from broker.handlers.quorum import ForwardedDescribeQuorumHandler
from broker.handlers.user_scram_credentials import (
    AlterUserScramCredentialsHandler,
    DescribeUserScramCredentialsHandler,
)
from protocol.acl_types import AclOperation, PatternType, ResourceType
from protocol.api_keys import ApiKey
from protocol.data import MessageData
from protocol.error_codes import ErrorCode
from protocol.messages import REQUESTS, RESPONSES
from tests.broker.authorization_support import (
    ADMIN,
    ALICE,
    BOB,
    acl,
    authorizer,
    call_as,
    cluster_acl,
    context_as,
)
from tests.broker.cluster_admin_support import ctx
from tests.broker.test_handlers_admin import Env

pytestmark = pytest.mark.timeout(60)

TOPIC = ResourceType.TOPIC
NONE = int(ErrorCode.NONE)
TOPIC_DENIED = int(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
CLUSTER_DENIED = int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)


@pytest.fixture
def env(tmp_path: pathlib.Path) -> Iterator[Env]:
    environment = Env(tmp_path)
    environment.topics.create_topic("app-orders", 1, 1, {})
    environment.topics.create_topic("secret", 1, 1, {})
    yield environment
    environment.replicas.shutdown()
    environment.logs.shutdown()


class Channel:
    """The controller listener, in process: forwarded bodies go to the controller's handlers."""

    def __init__(self, env: Env) -> None:
        self.sent: list[tuple[ApiKey, MessageData]] = []
        self._handlers: dict[ApiKey, Handler] = {
            ApiKey.CREATE_TOPICS: CreateTopicsHandler(env.topics, env.config),
            ApiKey.DELETE_TOPICS: DeleteTopicsHandler(env.topics, True),
            ApiKey.CREATE_PARTITIONS: CreatePartitionsHandler(env.topics),
        }

    async def forward(self, api_key: ApiKey, version: int, body: MessageData, timeout_s: float) -> Any:
        self.sent.append((api_key, body))
        handler = self._handlers.get(api_key)
        out = RESPONSES[int(api_key)].codec(version)
        if handler is None:  # the cluster-level APIs: what was forwarded is all these tests check
            api: Any = next(api for api, *_ in CLUSTER_LEVEL if api.api_key == api_key)
            return out.decode(out.encode(api.error_body(ctx(api, version), body, ErrorCode.NONE)))
        response = await handler.handle(ctx(handler, version), body)
        return out.decode(out.encode(response))


class Loader:
    def __init__(self, env: Env) -> None:
        self.image = env.topics

    async def wait_for(self, predicate: Any, timeout_s: float) -> bool:
        return True


def forwarding(env: Env, api: Any, channel: Channel, *bindings: Any) -> AuthorizedForwarding:
    inner = ForwardingHandler(api, channel, Loader(env), effect_of(api.api_key))  # type: ignore[arg-type]
    return AuthorizedForwarding(api, inner, authorizer(*bindings), env.topics)  # type: ignore[arg-type]


def results(response: Any, field: str) -> dict[Any, int]:
    return {r.name: r.error_code for r in response[field]}


@pytest.mark.parametrize("version", [2, 7])
async def test_create_topics_needs_create_on_the_cluster_or_the_topic(env: Env, version: int) -> None:
    channel = Channel(env)
    handler = forwarding(
        env,
        CreateTopicsHandler,
        channel,
        acl(TOPIC, "app-", AclOperation.CREATE, pattern=PatternType.PREFIXED),
    )
    topic = {"num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}
    body: dict[str, Any] = {
        "topics": [{"name": "app-new", **topic}, {"name": "other-new", **topic}],
        "timeout_ms": 5000,
    }
    answer = await call_as(handler, version, body, ALICE)
    assert results(answer, "topics") == {"app-new": NONE, "other-new": TOPIC_DENIED}
    assert [t.name for t in channel.sent[0][1].topics] == ["app-new"]  # only what is allowed
    if version >= 5:  # alice may not DESCRIBE_CONFIGS app-new: its configs are not returned
        created = next(t for t in answer.topics if t.name == "app-new")
        assert created.topic_config_error_code == TOPIC_DENIED and created.configs == []
    bob = await call_as(handler, version, body | {"topics": body["topics"][1:]}, BOB)
    assert results(bob, "topics") == {"other-new": TOPIC_DENIED}
    assert len(channel.sent) == 1  # nothing left to forward
    admin = await call_as(handler, version, body | {"topics": body["topics"][1:]}, ADMIN)
    assert results(admin, "topics") == {"other-new": NONE}
    cluster_wide = forwarding(env, CreateTopicsHandler, channel, cluster_acl(AclOperation.CREATE, user=BOB))
    topics = [{"name": "bob-new", **topic}]
    assert results(
        await call_as(cluster_wide, version, {"topics": topics, "timeout_ms": 5000}, BOB), "topics"
    ) == {"bob-new": NONE}


async def test_delete_topics_needs_delete(env: Env) -> None:
    channel = Channel(env)
    handler = forwarding(
        env,
        DeleteTopicsHandler,
        channel,
        acl(TOPIC, "app-", AclOperation.DELETE, pattern=PatternType.PREFIXED),
        acl(TOPIC, "secret", AclOperation.READ),
    )
    secret = env.topics.get("secret")
    assert secret is not None
    by_id = await call_as(
        handler, 6, {"topics": [{"name": None, "topic_id": secret.topic_id}], "timeout_ms": 5000}, ALICE
    )
    # described (READ implies DESCRIBE), so the name is told
    assert [(r.name, r.error_code) for r in by_id.responses] == [("secret", TOPIC_DENIED)]
    by_id_bob = await call_as(
        handler, 6, {"topics": [{"name": None, "topic_id": secret.topic_id}], "timeout_ms": 5000}, BOB
    )
    assert [(r.name, r.error_code) for r in by_id_bob.responses] == [(None, TOPIC_DENIED)]
    names = ["app-orders", "secret", "app-ghost", "ghost"]
    answer = await call_as(handler, 5, {"topic_names": names, "timeout_ms": 5000}, ALICE)
    assert results(answer, "responses") == {
        "app-orders": NONE,
        "secret": TOPIC_DENIED,
        "app-ghost": int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),  # described: its absence may be told
        "ghost": TOPIC_DENIED,
    }
    assert env.topics.get("app-orders") is None and env.topics.get("secret") is not None
    everything = forwarding(env, DeleteTopicsHandler, channel, cluster_acl(AclOperation.DELETE, user=BOB))
    answer = await call_as(everything, 5, {"topic_names": ["secret"], "timeout_ms": 5000}, BOB)
    assert results(answer, "responses") == {"secret": NONE}


async def test_create_partitions_needs_alter(env: Env) -> None:
    handler = forwarding(
        env, CreatePartitionsHandler, Channel(env), acl(TOPIC, "app-orders", AclOperation.ALTER)
    )
    body = {
        "topics": [{"name": n, "count": 2, "assignments": None} for n in ("app-orders", "secret")],
        "timeout_ms": 5000,
        "validate_only": False,
    }
    answer = await call_as(handler, 3, body, ALICE)
    assert results(answer, "results") == {"app-orders": NONE, "secret": TOPIC_DENIED}


CLUSTER_LEVEL = [
    (
        ElectLeadersHandler,
        AclOperation.ALTER,
        {"election_type": 0, "topic_partitions": None, "timeout_ms": 1},
        lambda r: r.error_code,
    ),
    (
        AlterPartitionReassignmentsHandler,
        AclOperation.ALTER,
        {"timeout_ms": 1, "topics": []},
        lambda r: r.error_code,
    ),
    (
        ListPartitionReassignmentsHandler,
        AclOperation.DESCRIBE,
        {"timeout_ms": 1, "topics": None},
        lambda r: r.error_code,
    ),
    (
        AlterUserScramCredentialsHandler,
        AclOperation.ALTER,
        {"deletions": [{"name": "carol", "mechanism": 1}], "upsertions": []},
        lambda r: r.results[0].error_code,
    ),
    (
        AlterClientQuotasHandler,
        AclOperation.ALTER_CONFIGS,
        {
            "entries": [
                {
                    "entity": [{"entity_type": "user", "entity_name": "carol"}],
                    "ops": [{"key": "producer_byte_rate", "value": 1.0, "remove": False}],
                }
            ],
            "validate_only": False,
        },
        lambda r: r.entries[0].error_code,
    ),
]


@pytest.mark.parametrize(("api", "operation", "body", "error_of"), CLUSTER_LEVEL)
async def test_cluster_level_forwarded_apis(
    env: Env, api: Any, operation: AclOperation, body: dict[str, Any], error_of: Any
) -> None:
    channel = Channel(env)
    handler = forwarding(env, api, channel, cluster_acl(operation))
    version = api.max_version
    refused = await call_as(handler, version, body, BOB)
    assert error_of(refused) == CLUSTER_DENIED and channel.sent == []
    codec = REQUESTS[int(api.api_key)].codec(version)
    await handler.handle(context_as(handler, version, ALICE), codec.decode(codec.encode(body)))
    assert [key for key, _ in channel.sent] == [api.api_key]


# -- answered by the broker ------------------------------------------------------------------------


async def test_delete_records_needs_delete(env: Env) -> None:
    from server_common.purgatory import DelayedOperationPurgatory, FakeScheduler

    purgatory = DelayedOperationPurgatory("DeleteRecords", FakeScheduler())
    handler = DeleteRecordsHandler(
        env.replicas, purgatory, authorizer(acl(TOPIC, "app-orders", AclOperation.DELETE))
    )
    body = {
        "topics": [
            {"name": n, "partitions": [{"partition_index": 0, "offset": 0}]} for n in ("app-orders", "secret")
        ],
        "timeout_ms": 1000,
    }
    answer = await call_as(handler, 2, body, ALICE)
    assert {t.name: t.partitions[0].error_code for t in answer.topics} == {
        "app-orders": NONE,
        "secret": TOPIC_DENIED,
    }


async def test_describe_configs_per_resource(env: Env) -> None:
    handler = DescribeConfigsHandler(
        env.topics,
        env.config,
        authorizer(
            acl(TOPIC, "app-orders", AclOperation.ALTER_CONFIGS),
            cluster_acl(AclOperation.DESCRIBE_CONFIGS, user=BOB),
        ),
    )
    body = {
        "resources": [
            {"resource_type": 2, "resource_name": "app-orders", "configuration_keys": None},
            {"resource_type": 2, "resource_name": "secret", "configuration_keys": None},
            {"resource_type": 4, "resource_name": "", "configuration_keys": None},
        ],
        "include_synonyms": False,
        "include_documentation": False,
    }
    alice = await call_as(handler, 4, body, ALICE)  # ALTER_CONFIGS implies DESCRIBE_CONFIGS
    assert [r.error_code for r in alice.results] == [NONE, TOPIC_DENIED, CLUSTER_DENIED]
    assert alice.results[1].configs == []
    bob = await call_as(handler, 4, body, BOB)
    assert [r.error_code for r in bob.results] == [TOPIC_DENIED, TOPIC_DENIED, NONE]


@pytest.mark.parametrize("api", [IncrementalAlterConfigsHandler, AlterConfigsHandler])
async def test_alter_configs_per_resource(env: Env, api: Any) -> None:
    sent: list[Any] = []

    class ConfigChannel:
        async def forward(self, api_key: ApiKey, version: int, body: MessageData, timeout_s: float) -> Any:
            sent.append([r.resource_name for r in body.resources])
            return MessageData(
                throttle_time_ms=0,
                responses=[
                    MessageData(
                        error_code=0,
                        error_message=None,
                        resource_type=r.resource_type,
                        resource_name=r.resource_name,
                    )
                    for r in body.resources
                ],
            )

    handler = ForwardedAlterConfigsHandler(
        api,
        ConfigChannel(),  # type: ignore[arg-type]
        Loader(env),  # type: ignore[arg-type]
        1,
        authorizer(acl(TOPIC, "app-orders", AclOperation.ALTER_CONFIGS)),
    )
    config: dict[str, Any] = {"name": "retention.ms", "value": "1000"}
    if api is IncrementalAlterConfigsHandler:
        config["config_operation"] = 0
    body = {
        "resources": [
            {"resource_type": 2, "resource_name": "app-orders", "configs": [config]},
            {"resource_type": 2, "resource_name": "secret", "configs": [config]},
            {"resource_type": 4, "resource_name": "", "configs": [config]},
        ],
        "validate_only": False,
    }
    answer = await call_as(handler, 0 if api is AlterConfigsHandler else 1, body, ALICE)
    assert [r.error_code for r in answer.responses] == [NONE, TOPIC_DENIED, CLUSTER_DENIED]
    assert sent == [["app-orders"]]


async def test_cluster_level_describe_apis(env: Env) -> None:
    authz = authorizer(cluster_acl(AclOperation.DESCRIBE), cluster_acl(AclOperation.DESCRIBE_CONFIGS))
    log_dirs = DescribeLogDirsHandler(env.config.log_dirs, env.replicas.log_manager, authz)
    scram = DescribeUserScramCredentialsHandler(env.topics, authz)  # type: ignore[arg-type]
    quotas = DescribeClientQuotasHandler(env.topics, authz)  # type: ignore[arg-type]
    for handler, version, body in (
        (log_dirs, 4, {"topics": None}),
        (scram, 0, {"users": None}),
        (quotas, 1, {"components": [], "strict": False}),
    ):
        assert (await call_as(handler, version, body, BOB)).error_code == CLUSTER_DENIED, handler
        if handler is log_dirs:  # the stub image has no credentials or quotas to describe
            assert (await call_as(handler, version, body, ALICE)).error_code == NONE, handler


async def test_describe_cluster_authorized_operations() -> None:
    handler = DescribeClusterHandler(
        EndpointType.BROKER,
        "cluster",
        lambda listener: [ClusterNode(1, "h", 1)],
        lambda: 1,
        authorizer(cluster_acl(AclOperation.DESCRIBE)),
    )
    body = {"include_cluster_authorized_operations": True, "endpoint_type": 1}
    assert (await call_as(handler, 1, body, ALICE)).cluster_authorized_operations == 1 << int(
        AclOperation.DESCRIBE
    )
    bob = await call_as(handler, 1, body, BOB)
    assert (bob.error_code, bob.cluster_authorized_operations) == (NONE, 0)
    assert (
        await call_as(handler, 1, body, ADMIN)
    ).cluster_authorized_operations == CLUSTER_AUTHORIZED_OPERATIONS


async def test_describe_quorum_needs_describe_on_the_cluster(env: Env) -> None:
    sent: list[ApiKey] = []

    class QuorumChannel:
        async def forward(self, api_key: ApiKey, version: int, body: MessageData, timeout_s: float) -> Any:
            sent.append(api_key)
            return {"error_code": 0, "error_message": None, "topics": [], "nodes": []}

    handler = ForwardedDescribeQuorumHandler(
        QuorumChannel(),  # type: ignore[arg-type]
        authorizer(cluster_acl(AclOperation.DESCRIBE)),
    )
    body = {"topics": [{"topic_name": "__cluster_metadata", "partitions": [{"partition_index": 0}]}]}
    assert (await call_as(handler, 2, body, BOB)).error_code == CLUSTER_DENIED and sent == []
    assert (await call_as(handler, 2, body, ALICE)).error_code == NONE and sent == [ApiKey.DESCRIBE_QUORUM]
