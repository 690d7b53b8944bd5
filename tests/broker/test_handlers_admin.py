"""Metadata, CreateTopics, DeleteTopics, CreatePartitions and DescribeConfigs handlers, called with
requests that went through the request codec, at the lowest and highest version each serves; every
response must encode with the response codec of its version."""

from __future__ import annotations

import pathlib
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from broker.handlers.base import Handler, RequestContext
from broker.handlers.create_partitions import CreatePartitionsHandler
from broker.handlers.create_topics import CreateTopicsHandler
from broker.handlers.delete_topics import DeleteTopicsHandler
from broker.handlers.describe_configs import DescribeConfigsHandler, ResourceType
from broker.handlers.metadata import (
    AUTHORIZED_OPERATIONS_OMITTED,
    CLUSTER_AUTHORIZED_OPERATIONS,
    TOPIC_AUTHORIZED_OPERATIONS,
    BrokerEndpoint,
    MetadataHandler,
)
from broker.handlers.registry import HandlerRegistry
from broker.replication.replica_manager import ReplicaManager
from protocol.data import MessageData
from protocol.error_codes import ErrorCode
from protocol.messages import REQUESTS, RESPONSES
from protocol.sentinels import ZERO_UUID
from server_common.config import BrokerConfig, BrokerConfigLayers
from server_common.config.dynamic import DYNAMIC_ONLY_DEFINITIONS
from storage.clock import FakeClock
from storage.config import LogConfig
from storage.log_manager import LogManager
from tests.broker.local_topics import LocalTopics

NODE = 1
CLUSTER_ID = "kipling-test-cluster"
ENDPOINT = BrokerEndpoint(NODE, "broker.example", 19092)
NONE, UNKNOWN_TOPIC = int(ErrorCode.NONE), int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)


class Env:
    def __init__(self, tmp_path: pathlib.Path, **props: str) -> None:
        self.log_dir = tmp_path / "logs"
        self.config, _ = BrokerConfig.from_properties(
            {"log.dirs": str(self.log_dir), "node.id": str(NODE), **props}
        )
        clock = FakeClock(1_700_000_000_000)
        self.logs = LogManager([self.log_dir], LogConfig(), clock)
        # the controller's defaults are the broker's (a cluster of one node configures both)
        self.topics = LocalTopics(
            NODE,
            default_num_partitions=self.config.num_partitions,
            default_replication_factor=self.config.default_replication_factor,
        )
        # the real ReplicaManager: partition directories come and go through production wiring
        self.replicas = ReplicaManager(self.logs, self.topics, NODE, self.config, clock)
        self.topics.subscribe(self.replicas)

    def metadata(self) -> MetadataHandler:
        return MetadataHandler(
            self.topics,
            lambda listener: [ENDPOINT],
            CLUSTER_ID,
            NODE,
            self.config.auto_create_topics_enable,
            self.topics.auto_create,
        )

    def partition_dirs(self) -> list[str]:
        return sorted(p.name for p in self.log_dir.iterdir() if p.is_dir())


@pytest.fixture
def env(tmp_path: pathlib.Path) -> Iterator[Env]:
    environment = Env(tmp_path)
    yield environment
    environment.replicas.shutdown()
    environment.logs.shutdown()


def ctx(handler: Handler, version: int) -> RequestContext:
    return RequestContext(int(handler.api_key), version, 7, "test-client", "127.0.0.1:5555", 1, 0)


def decoded(handler: Handler, version: int, body: dict[str, Any]) -> MessageData:
    codec = REQUESTS[int(handler.api_key)].codec(version)
    return codec.decode(codec.encode(body))


async def call(handler: Handler, version: int, body: dict[str, Any]) -> MessageData:
    """Send ``body`` as a real request would arrive; return the response as a client decodes it."""
    response = await handler.handle(ctx(handler, version), decoded(handler, version, body))
    codec = RESPONSES[int(handler.api_key)].codec(version)
    return codec.decode(codec.encode(response))


def error_response(
    handler: Handler, version: int, body: dict[str, Any] | None, code: ErrorCode
) -> MessageData:
    request = decoded(handler, version, body) if body is not None else None
    response = handler.error_response(ctx(handler, version), request, code)
    codec = RESPONSES[int(handler.api_key)].codec(version)
    return codec.decode(codec.encode(response))


def test_every_handler_declares_its_schema_range(env: Env) -> None:
    handlers = [
        env.metadata(),
        CreateTopicsHandler(env.topics, env.config),
        DeleteTopicsHandler(env.topics, True),
        CreatePartitionsHandler(env.topics),
        DescribeConfigsHandler(env.topics, env.config),
    ]
    registry = HandlerRegistry(handlers)
    for handler in handlers:
        versions = REQUESTS[int(handler.api_key)].versions
        assert (handler.min_version, handler.max_version) == (versions.low, versions.high)
        assert registry.supports(int(handler.api_key), handler.max_version)


# -- Metadata --------------------------------------------------------------------------------------


def names(response: MessageData) -> list[str]:
    return [t.name for t in response.topics]


async def test_metadata_v0_lists_every_topic_for_an_empty_list(env: Env) -> None:
    env.topics.create_topic("b", 2, 1, {})
    env.topics.create_topic("a", 1, 1, {})
    response = await call(env.metadata(), 0, {"topics": []})
    assert [(b.node_id, b.host, b.port) for b in response.brokers] == [(NODE, "broker.example", 19092)]
    assert names(response) == ["a", "b"]
    b = response.topics[1]
    assert b.error_code == NONE
    assert [(p.partition_index, p.leader_id, p.replica_nodes, p.isr_nodes) for p in b.partitions] == [
        (0, NODE, [NODE], [NODE]),
        (1, NODE, [NODE], [NODE]),
    ]


async def test_metadata_v12_describes_the_cluster_and_topics(env: Env) -> None:
    topic = env.topics.create_topic("orders", 2, 1, {})
    env.topics.create_topic("__consumer_offsets", 1, 1, {})
    response = await call(env.metadata(), 12, {"topics": None})
    assert response.cluster_id == CLUSTER_ID
    assert response.controller_id == NODE
    assert names(response) == ["__consumer_offsets", "orders"]
    offsets, orders = response.topics
    assert offsets.is_internal and not orders.is_internal
    assert orders.topic_id == topic.topic_id
    assert orders.topic_authorized_operations == AUTHORIZED_OPERATIONS_OMITTED
    assert [(p.leader_epoch, p.offline_replicas) for p in orders.partitions] == [(0, []), (0, [])]


async def test_metadata_reuses_a_topics_encoded_partitions_until_the_topic_changes(env: Env) -> None:
    """The handler encodes a topic's partitions once per change: new partitions, a deleted and
    recreated topic and every version still answer what the metadata says now."""
    handler = env.metadata()
    env.topics.create_topic("orders", 2, 1, {})
    for version in (1, 9, 12):
        for _ in range(2):  # the second request answers from the encoded partitions
            response = await call(handler, version, {"topics": None})
            assert [p.partition_index for p in response.topics[0].partitions] == [0, 1]
    env.topics.create_partitions("orders", 4)
    response = await call(handler, 12, {"topics": [{"name": "orders", "topic_id": ZERO_UUID}]})
    assert [p.partition_index for p in response.topics[0].partitions] == [0, 1, 2, 3]
    env.topics.delete_topic("orders")
    recreated = env.topics.create_topic("orders", 1, 1, {})
    response = await call(handler, 12, {"topics": None})
    assert response.topics[0].topic_id == recreated.topic_id
    assert [p.partition_index for p in response.topics[0].partitions] == [0]


async def test_metadata_empty_list_means_no_topics_from_v1(env: Env) -> None:
    env.topics.create_topic("a", 1, 1, {})
    assert names(await call(env.metadata(), 1, {"topics": []})) == []
    assert names(await call(env.metadata(), 12, {"topics": []})) == []
    assert names(await call(env.metadata(), 1, {"topics": None})) == ["a"]


@pytest.mark.parametrize("version", [0, 12])
async def test_metadata_missing_and_illegal_topics(tmp_path: pathlib.Path, version: int) -> None:
    env = Env(tmp_path, **{"auto.create.topics.enable": "false"})
    try:
        response = await call(
            env.metadata(), version, {"topics": [{"name": "missing"}, {"name": "bad name"}]}
        )
        assert [(t.name, t.error_code, t.partitions) for t in response.topics] == [
            ("missing", UNKNOWN_TOPIC, []),
            ("bad name", int(ErrorCode.INVALID_TOPIC_EXCEPTION), []),
        ]
        assert env.topics.all() == []
    finally:
        env.logs.shutdown()


@pytest.mark.parametrize("version", [0, 3, 4, 12])
async def test_metadata_auto_creates_a_missing_topic(env: Env, version: int) -> None:
    response = await call(env.metadata(), version, {"topics": [{"name": "fresh"}, {"name": "fresh"}]})
    assert names(response) == ["fresh"]
    fresh = response.topics[0]
    assert fresh.error_code == NONE
    assert [p.partition_index for p in fresh.partitions] == [0]
    created = env.topics.get("fresh")
    assert created is not None
    if version >= 10:
        assert fresh.topic_id == created.topic_id
    assert env.partition_dirs() == ["fresh-0"]


async def test_metadata_auto_creation_uses_num_partitions(tmp_path: pathlib.Path) -> None:
    env = Env(tmp_path, **{"num.partitions": "3"})
    try:
        response = await call(env.metadata(), 12, {"topics": [{"name": "t"}]})
        assert len(response.topics[0].partitions) == 3
    finally:
        env.logs.shutdown()


async def test_metadata_honours_allow_auto_topic_creation_false(env: Env) -> None:
    body = {"topics": [{"name": "fresh"}], "allow_auto_topic_creation": False}
    response = await call(env.metadata(), 4, body)
    assert response.topics[0].error_code == UNKNOWN_TOPIC
    assert env.topics.get("fresh") is None


async def test_metadata_never_auto_creates_internal_topics(env: Env) -> None:
    response = await call(env.metadata(), 12, {"topics": [{"name": "__consumer_offsets"}]})
    assert response.topics[0].error_code == UNKNOWN_TOPIC
    assert response.topics[0].is_internal


async def test_metadata_reports_a_failed_auto_creation(tmp_path: pathlib.Path) -> None:
    env = Env(tmp_path, **{"default.replication.factor": "3"})
    try:
        response = await call(env.metadata(), 9, {"topics": [{"name": "t"}]})
        assert response.topics[0].error_code == int(ErrorCode.INVALID_REPLICATION_FACTOR)
    finally:
        env.logs.shutdown()


async def test_metadata_v12_looks_topics_up_by_id(env: Env) -> None:
    topic = env.topics.create_topic("t", 1, 1, {})
    unknown = uuid.uuid4()
    body = {"topics": [{"name": None, "topic_id": topic.topic_id}, {"name": None, "topic_id": unknown}]}
    response = await call(env.metadata(), 12, body)
    assert [(t.name, t.topic_id, t.error_code) for t in response.topics] == [
        ("t", topic.topic_id, NONE),
        (None, unknown, int(ErrorCode.UNKNOWN_TOPIC_ID)),
    ]


async def test_metadata_v10_refuses_topic_ids(env: Env) -> None:
    body = {"topics": [{"name": "t", "topic_id": uuid.uuid4()}]}
    response = await call(env.metadata(), 10, body)
    assert [(t.name, t.error_code) for t in response.topics] == [("t", int(ErrorCode.INVALID_REQUEST))]
    assert env.topics.get("t") is None


async def test_metadata_authorized_operations_when_asked(env: Env) -> None:
    env.topics.create_topic("t", 1, 1, {})
    body = {
        "topics": None,
        "include_cluster_authorized_operations": True,
        "include_topic_authorized_operations": True,
    }
    response = await call(env.metadata(), 8, body)
    assert response.cluster_authorized_operations == CLUSTER_AUTHORIZED_OPERATIONS == 8096
    assert response.topics[0].topic_authorized_operations == TOPIC_AUTHORIZED_OPERATIONS == 3576
    response = await call(env.metadata(), 10, {"topics": None})
    assert response.cluster_authorized_operations == AUTHORIZED_OPERATIONS_OMITTED


@pytest.mark.parametrize("version", [0, 12])
def test_metadata_error_response_names_every_topic(env: Env, version: int) -> None:
    handler = env.metadata()
    response = error_response(handler, version, {"topics": [{"name": "a"}]}, ErrorCode.UNSUPPORTED_VERSION)
    assert [(t.name, t.error_code) for t in response.topics] == [("a", int(ErrorCode.UNSUPPORTED_VERSION))]
    assert error_response(handler, version, None, ErrorCode.INVALID_REQUEST).topics == []


# -- CreateTopics ----------------------------------------------------------------------------------


def creatable(name: str, partitions: int = 1, factor: int = 1, **extra: Any) -> dict[str, Any]:
    return {"name": name, "num_partitions": partitions, "replication_factor": factor, **extra}


def outcomes(results: list[MessageData]) -> dict[str, int]:
    return {r.name: r.error_code for r in results}


@pytest.mark.parametrize("version", [2, 7])
async def test_create_topics_per_topic_errors(env: Env, version: int) -> None:
    env.topics.create_topic("exists", 1, 1, {})
    body = {
        "topics": [
            creatable("ok", 2, configs=[{"name": "retention.ms", "value": "1000"}]),
            creatable("exists"),
            creatable("bad/name"),
            creatable("zero", 0),
            creatable("wide", 1, 3),
            creatable("conf", configs=[{"name": "no.such.key", "value": "1"}]),
            creatable("manual", 1, 1, assignments=[{"partition_index": 0, "broker_ids": [NODE]}]),
        ],
        "timeout_ms": 1000,
    }
    response = await call(CreateTopicsHandler(env.topics, env.config), version, body)
    assert outcomes(response.topics) == {
        "ok": NONE,
        "exists": int(ErrorCode.TOPIC_ALREADY_EXISTS),
        "bad/name": int(ErrorCode.INVALID_TOPIC_EXCEPTION),
        "zero": int(ErrorCode.INVALID_PARTITIONS),
        "wide": int(ErrorCode.INVALID_REPLICATION_FACTOR),
        "conf": int(ErrorCode.INVALID_CONFIG),
        "manual": int(ErrorCode.INVALID_REQUEST),
    }
    messages = {r.name: r.error_message for r in response.topics}
    assert messages["ok"] is None
    assert messages["wide"].startswith("Unable to replicate the partition 3 time(s)")
    assert env.partition_dirs() == ["exists-0", "ok-0", "ok-1"]
    assert env.topics.get("ok").configs == {"retention.ms": "1000"}  # type: ignore[union-attr]


async def test_create_topics_v7_reports_id_counts_and_configs(env: Env) -> None:
    body = {"topics": [creatable("t", -1, -1, configs=[{"name": "retention.ms", "value": "1000"}])]}
    response = await call(CreateTopicsHandler(env.topics, env.config), 7, body)
    (result,) = response.topics
    topic = env.topics.get("t")
    assert topic is not None
    assert (result.topic_id, result.num_partitions, result.replication_factor) == (topic.topic_id, 1, 1)
    configs = {c.name: c for c in result.configs}
    assert (configs["retention.ms"].value, configs["retention.ms"].config_source) == ("1000", 1)
    assert (configs["segment.bytes"].value, configs["segment.bytes"].config_source) == ("1073741824", 5)
    assert not configs["segment.bytes"].read_only


async def test_create_topics_v7_failure_has_no_details(env: Env) -> None:
    response = await call(CreateTopicsHandler(env.topics, env.config), 7, {"topics": [creatable("t", 0)]})
    (result,) = response.topics
    assert (result.topic_id, result.num_partitions, result.replication_factor) == (ZERO_UUID, -1, -1)


async def test_create_topics_manual_assignment(env: Env) -> None:
    assignments = [{"partition_index": i, "broker_ids": [NODE]} for i in (1, 0)]
    body = {"topics": [creatable("t", -1, -1, assignments=assignments)]}
    response = await call(CreateTopicsHandler(env.topics, env.config), 7, body)
    assert response.topics[0].error_code == NONE
    assert response.topics[0].num_partitions == 2
    body = {"topics": [creatable("u", -1, -1, assignments=[{"partition_index": 0, "broker_ids": [2]}])]}
    response = await call(CreateTopicsHandler(env.topics, env.config), 2, body)
    assert response.topics[0].error_code == int(ErrorCode.INVALID_REPLICA_ASSIGNMENT)


@pytest.mark.parametrize("version", [2, 7])
async def test_create_topics_duplicates_are_invalid_request(env: Env, version: int) -> None:
    body = {"topics": [creatable("dup"), creatable("solo"), creatable("dup", 3)]}
    response = await call(CreateTopicsHandler(env.topics, env.config), version, body)
    assert [(r.name, r.error_code, r.error_message) for r in response.topics] == [
        ("solo", NONE, None),
        ("dup", int(ErrorCode.INVALID_REQUEST), "Duplicate topic name."),
    ]
    assert env.topics.get("dup") is None


async def test_create_topics_validate_only(env: Env) -> None:
    body = {"topics": [creatable("t", 4)], "validate_only": True}
    response = await call(CreateTopicsHandler(env.topics, env.config), 7, body)
    assert (response.topics[0].error_code, response.topics[0].num_partitions) == (NONE, 4)
    assert env.topics.get("t") is None
    assert env.partition_dirs() == []


async def test_create_topics_too_many_partitions_in_one_request(env: Env) -> None:
    body = {"topics": [creatable("a", 6000), creatable("b", 6000)]}
    response = await call(CreateTopicsHandler(env.topics, env.config), 7, body)
    assert outcomes(response.topics) == {
        "a": int(ErrorCode.POLICY_VIOLATION),
        "b": int(ErrorCode.POLICY_VIOLATION),
    }
    assert env.topics.all() == []


@pytest.mark.parametrize("version", [2, 7])
def test_create_topics_error_response(env: Env, version: int) -> None:
    handler = CreateTopicsHandler(env.topics, env.config)
    response = error_response(handler, version, {"topics": [creatable("a")]}, ErrorCode.UNSUPPORTED_VERSION)
    assert outcomes(response.topics) == {"a": int(ErrorCode.UNSUPPORTED_VERSION)}
    assert error_response(handler, version, None, ErrorCode.INVALID_REQUEST).topics == []


# -- DeleteTopics ----------------------------------------------------------------------------------


async def test_delete_topics_v1_by_name_removes_the_files(env: Env) -> None:
    env.topics.create_topic("gone", 2, 1, {})
    env.topics.create_topic("kept", 1, 1, {})
    assert env.partition_dirs() == ["gone-0", "gone-1", "kept-0"]
    response = await call(DeleteTopicsHandler(env.topics, True), 1, {"topic_names": ["gone", "missing"]})
    assert outcomes(response.responses) == {"gone": NONE, "missing": UNKNOWN_TOPIC}
    assert env.topics.get("gone") is None
    assert env.partition_dirs() == ["kept-0"]
    assert env.logs.get_log("gone", 0) is None


async def test_delete_topics_v6_by_name_and_by_id(env: Env) -> None:
    by_id = env.topics.create_topic("by-id", 1, 1, {})
    by_name = env.topics.create_topic("by-name", 1, 1, {})
    unknown = uuid.uuid4()
    body = {
        "topics": [
            {"name": None, "topic_id": by_id.topic_id},
            {"name": "by-name", "topic_id": ZERO_UUID},
            {"name": None, "topic_id": unknown},
            {"name": "missing", "topic_id": ZERO_UUID},
        ]
    }
    response = await call(DeleteTopicsHandler(env.topics, True), 6, body)
    results = {(r.name, r.topic_id): r.error_code for r in response.responses}
    assert results == {
        ("by-id", by_id.topic_id): NONE,
        ("by-name", by_name.topic_id): NONE,
        (None, unknown): int(ErrorCode.UNKNOWN_TOPIC_ID),
        ("missing", ZERO_UUID): UNKNOWN_TOPIC,
    }
    assert env.topics.all() == []
    assert env.partition_dirs() == []


async def test_delete_topics_v6_invalid_entries(env: Env) -> None:
    a = env.topics.create_topic("a", 1, 1, {})
    env.topics.create_topic("b", 1, 1, {})
    c = env.topics.create_topic("c", 1, 1, {})
    body = {
        "topics": [
            {"name": None, "topic_id": ZERO_UUID},
            {"name": "a", "topic_id": a.topic_id},
            {"name": "b", "topic_id": ZERO_UUID},
            {"name": "b", "topic_id": ZERO_UUID},
            {"name": None, "topic_id": c.topic_id},
            {"name": "c", "topic_id": ZERO_UUID},
        ]
    }
    response = await call(DeleteTopicsHandler(env.topics, True), 6, body)
    messages = sorted((r.name or "", r.error_code, r.error_message) for r in response.responses)
    invalid = int(ErrorCode.INVALID_REQUEST)
    assert messages == [
        ("", invalid, "Neither topic name nor id were specified."),
        ("a", invalid, "You may not specify both topic name and topic id."),
        ("b", invalid, "Duplicate topic name."),
        ("c", invalid, "The provided topic name maps to an ID that was already supplied."),
    ]
    assert [t.name for t in env.topics.all()] == ["a", "b", "c"]


async def test_delete_topics_duplicate_ids(env: Env) -> None:
    t = env.topics.create_topic("t", 1, 1, {})
    body = {"topics": [{"name": None, "topic_id": t.topic_id}] * 2}
    response = await call(DeleteTopicsHandler(env.topics, True), 6, body)
    assert [(r.topic_id, r.error_message) for r in response.responses] == [
        (t.topic_id, "Duplicate topic id.")
    ]
    assert env.topics.get("t") is not None


@pytest.mark.parametrize(
    ("version", "code"),
    [
        (1, ErrorCode.INVALID_REQUEST),
        (3, ErrorCode.TOPIC_DELETION_DISABLED),
        (6, ErrorCode.TOPIC_DELETION_DISABLED),
    ],
)
async def test_delete_topics_disabled(env: Env, version: int, code: ErrorCode) -> None:
    env.topics.create_topic("t", 1, 1, {})
    body = {"topics": [{"name": "t"}]} if version >= 6 else {"topic_names": ["t"]}
    response = await call(DeleteTopicsHandler(env.topics, False), version, body)
    assert outcomes(response.responses) == {"t": int(code)}
    assert env.topics.get("t") is not None
    assert env.partition_dirs() == ["t-0"]


@pytest.mark.parametrize("version", [1, 6])
def test_delete_topics_error_response(env: Env, version: int) -> None:
    handler = DeleteTopicsHandler(env.topics, True)
    body = {"topics": [{"name": "t"}]} if version >= 6 else {"topic_names": ["t"]}
    response = error_response(handler, version, body, ErrorCode.UNSUPPORTED_VERSION)
    assert outcomes(response.responses) == {"t": int(ErrorCode.UNSUPPORTED_VERSION)}


async def test_recreated_topic_gets_fresh_logs(env: Env) -> None:
    first = env.topics.create_topic("t", 1, 1, {})
    await call(DeleteTopicsHandler(env.topics, True), 6, {"topics": [{"name": "t"}]})
    second = env.topics.create_topic("t", 1, 1, {})
    log = env.logs.get_log("t", 0)
    assert log is not None and log.topic_id == second.topic_id != first.topic_id


# -- CreatePartitions ------------------------------------------------------------------------------


@pytest.mark.parametrize("version", [0, 3])
async def test_create_partitions(env: Env, version: int) -> None:
    env.topics.create_topic("grow", 1, 1, {})
    env.topics.create_topic("same", 2, 1, {})
    body = {
        "topics": [
            {"name": "grow", "count": 3, "assignments": None},
            {"name": "same", "count": 2, "assignments": None},
            {"name": "shrink", "count": 1, "assignments": None},
            {"name": "dup", "count": 4, "assignments": None},
            {"name": "dup", "count": 5, "assignments": None},
        ],
        "timeout_ms": 100,
    }
    env.topics.create_topic("shrink", 2, 1, {})
    response = await call(CreatePartitionsHandler(env.topics), version, body)
    assert [(r.name, r.error_code, r.error_message) for r in response.results] == [
        ("dup", int(ErrorCode.INVALID_REQUEST), "Duplicate topic name."),
        ("grow", NONE, None),
        ("same", int(ErrorCode.INVALID_PARTITIONS), "Topic already has 2 partition(s)."),
        (
            "shrink",
            int(ErrorCode.INVALID_PARTITIONS),
            "The topic shrink currently has 2 partition(s); 1 would not be an increase.",
        ),
    ]
    assert "grow-2" in env.partition_dirs()


async def test_create_partitions_unknown_topic_and_assignments(env: Env) -> None:
    env.topics.create_topic("t", 1, 1, {})
    body = {
        "topics": [
            {"name": "missing", "count": 2, "assignments": None},
            {"name": "t", "count": 3, "assignments": [{"broker_ids": [NODE]}, {"broker_ids": [NODE]}]},
        ]
    }
    response = await call(CreatePartitionsHandler(env.topics), 3, body)
    assert outcomes(response.results) == {"missing": UNKNOWN_TOPIC, "t": NONE}
    body = {"topics": [{"name": "t", "count": 4, "assignments": [{"broker_ids": [5]}]}]}
    response = await call(CreatePartitionsHandler(env.topics), 0, body)
    assert outcomes(response.results) == {"t": int(ErrorCode.INVALID_REPLICA_ASSIGNMENT)}


async def test_create_partitions_validate_only(env: Env) -> None:
    env.topics.create_topic("t", 1, 1, {})
    body = {"topics": [{"name": "t", "count": 3, "assignments": None}], "validate_only": True}
    response = await call(CreatePartitionsHandler(env.topics), 3, body)
    assert outcomes(response.results) == {"t": NONE}
    assert env.partition_dirs() == ["t-0"]


@pytest.mark.parametrize("version", [0, 3])
def test_create_partitions_error_response(env: Env, version: int) -> None:
    body = {"topics": [{"name": "t", "count": 3, "assignments": None}]}
    response = error_response(
        CreatePartitionsHandler(env.topics), version, body, ErrorCode.UNSUPPORTED_VERSION
    )
    assert outcomes(response.results) == {"t": int(ErrorCode.UNSUPPORTED_VERSION)}


# -- DescribeConfigs -------------------------------------------------------------------------------


def resource(kind: ResourceType, name: str, keys: list[str] | None = None) -> dict[str, Any]:
    return {"resource_type": int(kind), "resource_name": name, "configuration_keys": keys}


@pytest.mark.parametrize("version", [1, 4])
async def test_describe_topic_configs(env: Env, version: int) -> None:
    env.topics.create_topic("t", 1, 1, {"retention.ms": "1000"})
    body = {"resources": [resource(ResourceType.TOPIC, "t", ["retention.ms", "segment.bytes", "no.such"])]}
    response = await call(DescribeConfigsHandler(env.topics, env.config), version, body)
    (result,) = response.results
    assert (result.error_code, result.resource_type, result.resource_name) == (NONE, 2, "t")
    configs = {c.name: c for c in result.configs}
    assert sorted(configs) == ["retention.ms", "segment.bytes"]
    assert (configs["retention.ms"].value, configs["retention.ms"].config_source) == ("1000", 1)
    assert configs["segment.bytes"].config_source == 5
    assert all(c.synonyms == [] for c in result.configs)
    if version >= 3:
        assert configs["segment.bytes"].config_type == 3
        assert configs["segment.bytes"].documentation is None


async def test_describe_topic_configs_with_synonyms_and_documentation(tmp_path: pathlib.Path) -> None:
    env = Env(tmp_path, **{"log.retention.hours": "24"})
    try:
        env.topics.create_topic("t", 1, 1, {})
        body = {
            "resources": [resource(ResourceType.TOPIC, "t", ["retention.ms"])],
            "include_synonyms": True,
            "include_documentation": True,
        }
        response = await call(DescribeConfigsHandler(env.topics, env.config), 4, body)
        (entry,) = response.results[0].configs
        # As Kafka's ConfigHelper: the synonyms start at log.retention.ms's own entry (none: it is
        # unset and has no default), so the source is DEFAULT_CONFIG though log.retention.hours is set
        assert (entry.value, entry.config_source) == (str(24 * 3_600_000), 5)
        assert entry.synonyms == []
        assert entry.documentation
    finally:
        env.logs.shutdown()


@pytest.mark.parametrize("version", [1, 4])
async def test_describe_broker_configs(env: Env, version: int) -> None:
    body = {"resources": [resource(ResourceType.BROKER, str(NODE), ["num.partitions", "node.id"])]}
    response = await call(DescribeConfigsHandler(env.topics, env.config), version, body)
    (result,) = response.results
    assert result.error_code == NONE
    configs = {c.name: c for c in result.configs}
    assert configs["node.id"].value == str(NODE)
    assert configs["node.id"].config_source == 4
    assert (configs["num.partitions"].value, configs["num.partitions"].config_source) == ("1", 5)
    assert configs["num.partitions"].read_only


async def test_describe_all_broker_configs(env: Env) -> None:
    body = {"resources": [resource(ResourceType.BROKER, str(NODE))]}
    response = await call(DescribeConfigsHandler(env.topics, env.config), 4, body)
    # every static key, plus the dynamic-only ones (the replication throttle rates)
    assert len(response.results[0].configs) == len(BrokerConfigLayers(env.config).describe())
    assert len(response.results[0].configs) == len(env.config.describe()) + len(DYNAMIC_ONLY_DEFINITIONS)


async def test_describe_configs_errors_per_resource(env: Env) -> None:
    body = {
        "resources": [
            resource(ResourceType.TOPIC, "missing"),
            resource(ResourceType.TOPIC, "bad name"),
            resource(ResourceType.BROKER, "2"),
            resource(ResourceType.BROKER, "one"),
            resource(ResourceType.BROKER, ""),
            resource(ResourceType.BROKER_LOGGER, str(NODE)),
            resource(ResourceType.GROUP, "g"),
            resource(ResourceType.GROUP, ""),
        ]
    }
    response = await call(DescribeConfigsHandler(env.topics, env.config), 4, body)
    got = [(r.resource_name, r.error_code, r.error_message, len(r.configs)) for r in response.results]
    invalid = int(ErrorCode.INVALID_REQUEST)
    assert got == [
        ("missing", UNKNOWN_TOPIC, "Topic missing does not exist.", 0),
        ("bad name", int(ErrorCode.INVALID_TOPIC_EXCEPTION), got[1][2], 0),
        ("2", invalid, "Unexpected broker id, expected 1 or empty string, but received 2", 0),
        ("one", invalid, "Broker id must be an integer, but it is: one", 0),
        ("", NONE, None, 0),
        (str(NODE), invalid, "Unsupported resource type: BROKER_LOGGER", 0),
        ("g", NONE, None, 2),  # a group that does not exist: its defaults (Kafka 4.0)
        ("", invalid, "Group name must not be empty", 0),
    ]


@pytest.mark.parametrize("version", [1, 4])
def test_describe_configs_error_response(env: Env, version: int) -> None:
    handler = DescribeConfigsHandler(env.topics, env.config)
    body = {"resources": [resource(ResourceType.TOPIC, "t")]}
    response = error_response(handler, version, body, ErrorCode.UNSUPPORTED_VERSION)
    assert [(r.resource_name, r.error_code) for r in response.results] == [
        ("t", int(ErrorCode.UNSUPPORTED_VERSION))
    ]
    assert error_response(handler, version, None, ErrorCode.INVALID_REQUEST).results == []
