"""Issue 17's admin matrix on one node: every admin API kipling added, through each installed client
library that exposes it, at the version the library sends (read off the wire by a recording proxy,
``test_admin_matrix_support.RecordingProxy``), with its effect checked afterwards.

kafka-python 3.0.12 and librdkafka (confluent-kafka 2.16.1) pick the highest version both sides
support from kipling's ApiVersions; aiokafka 0.14.0 picks the highest of the request structs it
ships. ElectLeaders and the partition reassignments need several brokers:
``test_admin_matrix_cluster.py``. docs/admin-clients.md is the table these tests verify.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import pytest
from aiokafka.admin import AIOKafkaAdminClient, RecordsToDelete
from aiokafka.admin.config_resource import ConfigResource as AioConfigResource
from aiokafka.admin.config_resource import ConfigResourceType as AioResourceType
from aiokafka.errors import OffsetOutOfRangeError as AioOffsetOutOfRangeError
from aiokafka.structs import TopicPartition as AioTopicPartition
from confluent_kafka import OFFSET_END, KafkaError, KafkaException, TopicCollection, TopicPartition
from confluent_kafka.admin import AdminClient as ConfluentAdmin
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource, ResourceType
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka.admin import ConfigResource as KpConfigResource
from kafka.admin import ConfigResourceType as KpResourceType
from kafka.admin import NewTopic
from kafka.errors import CoordinatorNotAvailableError, NoError, OffsetOutOfRangeError
from kafka.protocol.admin.client_quotas import AlterClientQuotasRequest, DescribeClientQuotasRequest
from kafka.structs import OffsetAndMetadata
from kafka.structs import TopicPartition as KpTopicPartition

from protocol.api_keys import ApiKey
from tests.integration.broker_process import BrokerProcess, free_port
from tests.integration.test_admin_matrix_support import RecordingProxy
from tests.integration.wire_client import WireClient

pytestmark = [pytest.mark.timeout(180)]

TIMEOUT_S = 30
KP = "matrix-kafka-python"
CF = "matrix-confluent"
AIO = "matrix-aiokafka"


@pytest.fixture(scope="module")
def proxy() -> Iterator[RecordingProxy]:
    running = RecordingProxy(free_port()).start()
    yield running
    running.stop()


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory, proxy: RecordingProxy) -> Iterator[BrokerProcess]:
    root = tmp_path_factory.mktemp("admin-matrix")
    process = BrokerProcess(root, overrides=[proxy.advertised], port=proxy.broker_port).start()
    yield process
    process.stop()


@pytest.fixture(scope="module")
def kp(node: BrokerProcess, proxy: RecordingProxy) -> Iterator[KafkaAdminClient]:
    client = KafkaAdminClient(bootstrap_servers=proxy.bootstrap, client_id=KP)
    yield client
    client.close()


@pytest.fixture(scope="module")
def cf(node: BrokerProcess, proxy: RecordingProxy) -> ConfluentAdmin:
    """One handle for the module: a future outlives its call only while the handle lives."""
    return ConfluentAdmin({"bootstrap.servers": proxy.bootstrap, "client.id": CF})


def aio(proxy: RecordingProxy, call: Any) -> Any:
    """Run ``call(client)`` on a started aiokafka admin client; its result."""

    async def run() -> Any:
        client = AIOKafkaAdminClient(bootstrap_servers=proxy.bootstrap, client_id=AIO)
        await client.start()
        try:
            return await call(client)
        finally:
            await client.close()

    return asyncio.run(run())


def kp_topic_config(kp: KafkaAdminClient, topic: str, key: str) -> dict[str, Any]:
    described = kp.describe_configs(
        [KpConfigResource(KpResourceType.TOPIC, topic, [key])], include_synonyms=True, config_filter="all"
    )
    entry: dict[str, Any] = described["topic"][topic][key]
    return entry


def produce(proxy: RecordingProxy, topic: str, partitions: int, count: int) -> None:
    producer = KafkaProducer(bootstrap_servers=proxy.bootstrap, linger_ms=0)
    try:
        for partition in range(partitions):
            for i in range(count):
                producer.send(topic, f"{partition}-{i}".encode(), partition=partition).get(timeout=TIMEOUT_S)
    finally:
        producer.close(timeout=10)


def first_offsets(proxy: RecordingProxy, topic: str, partitions: int) -> dict[int, int]:
    consumer = KafkaConsumer(bootstrap_servers=proxy.bootstrap, enable_auto_commit=False)
    try:
        tps = [KpTopicPartition(topic, p) for p in range(partitions)]
        return {tp.partition: offset for tp, offset in consumer.beginning_offsets(tps).items()}
    finally:
        consumer.close()


SERVED = {
    ApiKey.DELETE_RECORDS: (0, 2),
    ApiKey.DESCRIBE_CONFIGS: (1, 4),
    ApiKey.ALTER_CONFIGS: (0, 2),
    ApiKey.DESCRIBE_LOG_DIRS: (1, 5),
    ApiKey.ELECT_LEADERS: (0, 2),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: (0, 1),
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: (0, 1),
    ApiKey.LIST_PARTITION_REASSIGNMENTS: (0, 0),
    ApiKey.DESCRIBE_CLIENT_QUOTAS: (0, 1),
    ApiKey.ALTER_CLIENT_QUOTAS: (0, 1),
    ApiKey.DESCRIBE_CLUSTER: (0, 1),
    ApiKey.DESCRIBE_TOPIC_PARTITIONS: (0, 0),
    ApiKey.OFFSET_DELETE: (0, 0),
}
"""The version ranges kipling advertises for the admin APIs of the matrix (docs/admin-clients.md)."""


def test_api_versions_advertises_the_matrix_ranges(node: BrokerProcess) -> None:
    body = {"client_software_name": "kipling-tests", "client_software_version": "1.0"}
    with WireClient(node.port) as client:
        response = client.request(ApiKey.API_VERSIONS, 3, body)
    advertised = {k.api_key: (k.min_version, k.max_version) for k in response.body.api_keys}
    assert {key: advertised.get(key) for key in SERVED} == SERVED


# -- DescribeConfigs (32) -------------------------------------------------------------------------


def test_describe_configs_sources_through_each_library(
    kp: KafkaAdminClient, cf: ConfluentAdmin, proxy: RecordingProxy
) -> None:
    kp.create_topics([NewTopic("dc", 1, 1, topic_configs={"retention.ms": "654321"})])

    entry = kp_topic_config(kp, "dc", "retention.ms")
    assert (entry["value"], entry["config_source"]) == ("654321", "DYNAMIC_TOPIC_CONFIG")
    # Kafka lists no log.retention.hours synonym: it drops those before log.retention.ms's own entry
    assert [s["source"] for s in entry["synonyms"]] == ["DYNAMIC_TOPIC_CONFIG"]

    [future] = cf.describe_configs([ConfigResource(ResourceType.TOPIC, "dc")]).values()
    configs = future.result(timeout=TIMEOUT_S)
    assert configs["retention.ms"].value == "654321"
    assert configs["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert configs["segment.bytes"].source == ConfigSource.DEFAULT_CONFIG.value
    assert [s.source for s in configs["retention.ms"].synonyms.values()] == [
        ConfigSource.DYNAMIC_TOPIC_CONFIG.value,
    ]

    async def describe(client: AIOKafkaAdminClient) -> Any:
        return await client.describe_configs(
            [AioConfigResource(AioResourceType.TOPIC, "dc", {"retention.ms": None})], include_synonyms=True
        )

    [response] = aio(proxy, describe)
    [(error_code, _message, _type, name, entries)] = response.resources
    assert (error_code, name) == (0, "dc")
    [(key, value, read_only, source, sensitive, synonyms, *_)] = entries
    assert (key, value, read_only, source, sensitive) == ("retention.ms", "654321", False, 1, False)
    assert [s[2] for s in synonyms] == [1]  # DYNAMIC_TOPIC_CONFIG

    assert proxy.versions(ApiKey.DESCRIBE_CONFIGS, KP) == {4}
    assert proxy.versions(ApiKey.DESCRIBE_CONFIGS, CF) == {1}  # librdkafka's highest
    assert proxy.versions(ApiKey.DESCRIBE_CONFIGS, AIO) == {2}


# -- AlterConfigs (33) and IncrementalAlterConfigs (44) -------------------------------------------


def test_alter_configs_through_each_library(
    kp: KafkaAdminClient, cf: ConfluentAdmin, proxy: RecordingProxy
) -> None:
    kp.create_topics([NewTopic(t, 1, 1) for t in ("ac-kp", "ac-cf", "ac-aio")])

    result = kp.alter_configs(
        [KpConfigResource(KpResourceType.TOPIC, "ac-kp", {"retention.ms": "111111"})], incremental=False
    )
    assert result == {"topic": {"ac-kp": "OK"}}

    legacy = ConfigResource(ResourceType.TOPIC, "ac-cf", set_config={"retention.ms": "222222"})
    with pytest.warns(DeprecationWarning):  # deprecated by confluent-kafka; still sent
        futures = cf.alter_configs([legacy])
    for future in futures.values():
        future.result(timeout=TIMEOUT_S)

    async def alter(client: AIOKafkaAdminClient) -> Any:
        return await client.alter_configs(
            [AioConfigResource(AioResourceType.TOPIC, "ac-aio", {"retention.ms": "333333"})]
        )

    [response] = aio(proxy, alter)
    assert [r[0] for r in response.resources] == [0]

    for topic, value in (("ac-kp", "111111"), ("ac-cf", "222222"), ("ac-aio", "333333")):
        entry = kp_topic_config(kp, topic, "retention.ms")
        assert (entry["value"], entry["config_source"]) == (value, "DYNAMIC_TOPIC_CONFIG")
    assert proxy.versions(ApiKey.ALTER_CONFIGS, KP) == {2}
    assert proxy.versions(ApiKey.ALTER_CONFIGS, CF) == {2}
    assert proxy.versions(ApiKey.ALTER_CONFIGS, AIO) == {1}


def test_incremental_alter_configs_through_each_library(
    kp: KafkaAdminClient, cf: ConfluentAdmin, proxy: RecordingProxy
) -> None:
    kp.create_topics([NewTopic(t, 1, 1) for t in ("iac-kp", "iac-cf")])

    result = kp.alter_configs([KpConfigResource(KpResourceType.TOPIC, "iac-kp", {"segment.ms": "444444"})])
    assert result == {"topic": {"iac-kp": "OK"}}

    resource = ConfigResource(
        ResourceType.TOPIC,
        "iac-cf",
        incremental_configs=[
            ConfigEntry("segment.ms", "555555", incremental_operation=AlterConfigOpType.SET),
            ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND),
        ],
    )
    for future in cf.incremental_alter_configs([resource]).values():
        future.result(timeout=TIMEOUT_S)

    assert kp_topic_config(kp, "iac-kp", "segment.ms")["value"] == "444444"
    assert kp_topic_config(kp, "iac-cf", "segment.ms")["value"] == "555555"
    assert kp_topic_config(kp, "iac-cf", "cleanup.policy")["value"] == "delete,compact"
    assert proxy.versions(ApiKey.INCREMENTAL_ALTER_CONFIGS, KP) == {1}
    assert proxy.versions(ApiKey.INCREMENTAL_ALTER_CONFIGS, CF) == {1}


def test_validate_only_changes_nothing(kp: KafkaAdminClient, cf: ConfluentAdmin) -> None:
    """validate_only through kafka-python (both APIs) and confluent-kafka (both APIs): a valid change
    is answered OK but not applied, an invalid one gets its error."""
    kp.create_topics([NewTopic("vo", 1, 1)])
    resource = KpConfigResource(KpResourceType.TOPIC, "vo", {"retention.ms": "1000"})
    assert kp.alter_configs([resource], validate_only=True) == {"topic": {"vo": "OK"}}
    assert kp.alter_configs([resource], validate_only=True, incremental=False) == {"topic": {"vo": "OK"}}
    bad = kp.alter_configs(
        [KpConfigResource(KpResourceType.TOPIC, "vo", {"retention.ms": "-7"})], validate_only=True
    )
    assert "InvalidConfigurationError" in bad["topic"]["vo"]
    incremental = ConfigResource(
        ResourceType.TOPIC,
        "vo",
        incremental_configs=[
            ConfigEntry("retention.ms", "2000", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    for future in cf.incremental_alter_configs([incremental], validate_only=True).values():
        future.result(timeout=TIMEOUT_S)
    legacy = ConfigResource(ResourceType.TOPIC, "vo", set_config={"retention.ms": "3000"})
    with pytest.warns(DeprecationWarning):
        futures = cf.alter_configs([legacy], validate_only=True)
    for future in futures.values():
        future.result(timeout=TIMEOUT_S)
    entry = kp_topic_config(kp, "vo", "retention.ms")
    assert (entry["value"], entry["config_source"]) == ("604800000", "DEFAULT_CONFIG")


def test_broker_resources_through_each_library(
    kp: KafkaAdminClient, cf: ConfluentAdmin, proxy: RecordingProxy
) -> None:
    """BROKER resource "1": aiokafka's legacy AlterConfigs (sent to broker 1, replacing its set) and
    confluent-kafka's IncrementalAlterConfigs write a key each; every library describes both as
    DYNAMIC_BROKER_CONFIG over the default; confluent-kafka's DELETE takes them away again."""

    async def alter(client: AIOKafkaAdminClient) -> Any:
        return await client.alter_configs(
            [AioConfigResource(AioResourceType.BROKER, "1", {"log.flush.interval.ms": "60000"})]
        )

    # aiokafka always sends a topic request too, here with no resource: two responses
    responses = aio(proxy, alter)
    assert [(r[0], r[3]) for response in responses for r in response.resources] == [(0, "1")]
    incremental = ConfigResource(
        ResourceType.BROKER,
        "1",
        incremental_configs=[
            ConfigEntry("log.roll.ms", "7200000", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    for future in cf.incremental_alter_configs([incremental]).values():
        future.result(timeout=TIMEOUT_S)

    keys = ["log.flush.interval.ms", "log.roll.ms"]
    described = kp.describe_configs(
        [KpConfigResource(KpResourceType.BROKER, "1", keys)], include_synonyms=True, config_filter="all"
    )["broker"]["1"]
    assert {k: (described[k]["value"], described[k]["config_source"]) for k in keys} == {
        "log.flush.interval.ms": ("60000", "DYNAMIC_BROKER_CONFIG"),
        "log.roll.ms": ("7200000", "DYNAMIC_BROKER_CONFIG"),
    }
    [future] = cf.describe_configs([ConfigResource(ResourceType.BROKER, "1")]).values()
    configs = future.result(timeout=TIMEOUT_S)
    assert {k: (configs[k].value, configs[k].source) for k in keys} == {
        "log.flush.interval.ms": ("60000", ConfigSource.DYNAMIC_BROKER_CONFIG.value),
        "log.roll.ms": ("7200000", ConfigSource.DYNAMIC_BROKER_CONFIG.value),
    }
    assert configs["log.roll.ms"].is_read_only is False and configs["num.partitions"].is_read_only is True

    async def describe(client: AIOKafkaAdminClient) -> Any:
        return await client.describe_configs(
            [AioConfigResource(AioResourceType.BROKER, "1", dict.fromkeys(keys))], include_synonyms=True
        )

    [aio_response] = aio(proxy, describe)
    [(error_code, _message, _type, name, entries)] = aio_response.resources
    assert (error_code, name) == (0, "1")
    assert sorted((e[0], e[1], e[3]) for e in entries) == [
        ("log.flush.interval.ms", "60000", 2),  # DYNAMIC_BROKER_CONFIG
        ("log.roll.ms", "7200000", 2),
    ]

    delete = ConfigResource(
        ResourceType.BROKER,
        "1",
        incremental_configs=[
            ConfigEntry(k, None, incremental_operation=AlterConfigOpType.DELETE) for k in keys
        ],
    )
    for future in cf.incremental_alter_configs([delete]).values():
        future.result(timeout=TIMEOUT_S)
    [future] = cf.describe_configs([ConfigResource(ResourceType.BROKER, "1")]).values()
    configs = future.result(timeout=TIMEOUT_S)
    assert {configs[k].source for k in keys} == {ConfigSource.DEFAULT_CONFIG.value}
    assert proxy.versions(ApiKey.ALTER_CONFIGS, AIO) == {1}  # to broker 1 as to the topics' broker
    assert proxy.versions(ApiKey.INCREMENTAL_ALTER_CONFIGS, CF) == {1}
    assert proxy.versions(ApiKey.DESCRIBE_CONFIGS, CF) == {1}
    assert proxy.versions(ApiKey.DESCRIBE_CONFIGS, AIO) == {2}


# -- DeleteRecords (21) ---------------------------------------------------------------------------


def test_delete_records_through_each_library(
    kp: KafkaAdminClient, cf: ConfluentAdmin, proxy: RecordingProxy
) -> None:
    kp.create_topics([NewTopic("dr", 3, 1)])
    produce(proxy, "dr", 3, 10)

    deleted = kp.delete_records({KpTopicPartition("dr", 0): 4})
    assert [m["low_watermark"] for m in deleted.values()] == [4]

    [future] = cf.delete_records([TopicPartition("dr", 1, 5)]).values()
    assert future.result(timeout=TIMEOUT_S).low_watermark == 5

    async def delete(client: AIOKafkaAdminClient) -> Any:
        return await client.delete_records({AioTopicPartition("dr", 2): RecordsToDelete(6)})

    assert aio(proxy, delete) == {AioTopicPartition("dr", 2): 6}

    assert first_offsets(proxy, "dr", 3) == {0: 4, 1: 5, 2: 6}
    assert proxy.versions(ApiKey.DELETE_RECORDS, KP) == {2}
    assert proxy.versions(ApiKey.DELETE_RECORDS, CF) == {2}
    assert proxy.versions(ApiKey.DELETE_RECORDS, AIO) == {2}


def test_delete_records_to_the_high_watermark_and_errors_through_each_library(
    kp: KafkaAdminClient, cf: ConfluentAdmin, proxy: RecordingProxy
) -> None:
    """Offset -1 (confluent-kafka's OFFSET_END) deletes up to the high watermark; an offset past it
    is OFFSET_OUT_OF_RANGE, raised in each library's way."""
    kp.create_topics([NewTopic("dr-edges", 1, 1)])
    produce(proxy, "dr-edges", 1, 8)

    [future] = cf.delete_records([TopicPartition("dr-edges", 0, OFFSET_END)]).values()
    assert future.result(timeout=TIMEOUT_S).low_watermark == 8
    assert first_offsets(proxy, "dr-edges", 1) == {0: 8}

    [future] = cf.delete_records([TopicPartition("dr-edges", 0, 50)]).values()
    with pytest.raises(KafkaException) as refused:
        future.result(timeout=TIMEOUT_S)
    assert refused.value.args[0].code() == KafkaError.OFFSET_OUT_OF_RANGE
    with pytest.raises(OffsetOutOfRangeError):
        kp.delete_records({KpTopicPartition("dr-edges", 0): 50})

    async def delete(client: AIOKafkaAdminClient) -> Any:
        return await client.delete_records({AioTopicPartition("dr-edges", 0): RecordsToDelete(50)})

    with pytest.raises(AioOffsetOutOfRangeError):
        aio(proxy, delete)

    assert first_offsets(proxy, "dr-edges", 1) == {0: 8}  # nothing moved by the refusals


# -- DescribeLogDirs (35) -------------------------------------------------------------------------


def test_describe_log_dirs_through_kafka_python(
    node: BrokerProcess, kp: KafkaAdminClient, proxy: RecordingProxy
) -> None:
    kp.create_topics([NewTopic("ld", 2, 1)])
    produce(proxy, "ld", 2, 5)
    [broker] = kp.describe_log_dirs(topic_partitions={"ld": [0, 1]})
    [log_dir] = broker["log_dirs"]
    assert (broker["broker"], log_dir["error_code"]) == (1, 0), broker
    assert log_dir["log_dir"] == str(node.data_dir / "logs")
    [topic] = log_dir["topics"]
    assert topic["name"] == "ld"
    sizes = {p["partition_index"]: p["partition_size"] for p in topic["partitions"]}
    files = {p: (node.data_dir / "logs" / f"ld-{p}" / f"{0:020d}.log").stat().st_size for p in (0, 1)}
    assert sizes == files and all(size > 0 for size in sizes.values())
    assert proxy.versions(ApiKey.DESCRIBE_LOG_DIRS, KP) == {5}


# -- DescribeTopicPartitions (75) and DescribeCluster (60) ----------------------------------------


def test_describe_topic_partitions_and_describe_cluster(
    node: BrokerProcess, kp: KafkaAdminClient, cf: ConfluentAdmin, proxy: RecordingProxy
) -> None:
    kp.create_topics([NewTopic("dtp", 3, 1)])
    described = kp.describe_topic_partitions(["dtp"], response_partition_limit=2)
    [topic] = described["topics"]
    assert (topic["name"], [p["partition_index"] for p in topic["partitions"]]) == ("dtp", [0, 1])
    assert described["next_cursor"] == {"topic_name": "dtp", "partition_index": 2}
    [cf_topic] = cf.describe_topics(TopicCollection(["dtp"])).values()
    assert [p.id for p in cf_topic.result(timeout=TIMEOUT_S).partitions] == [0, 1, 2]
    assert proxy.versions(ApiKey.DESCRIBE_TOPIC_PARTITIONS, KP) == {0}
    assert proxy.versions(ApiKey.DESCRIBE_TOPIC_PARTITIONS, CF) == set()  # librdkafka sends Metadata

    cluster = kp.describe_cluster()
    assert (cluster["controller_id"], [b["port"] for b in cluster["brokers"]]) == (1, [proxy.port])
    cf_cluster = cf.describe_cluster().result(timeout=TIMEOUT_S)
    assert ([n.port for n in cf_cluster.nodes], cf_cluster.controller.id) == ([proxy.port], 1)

    async def describe(client: AIOKafkaAdminClient) -> Any:
        return await client.describe_cluster()

    aio_cluster = aio(proxy, describe)
    assert aio_cluster["controller_id"] == 1 and aio_cluster["brokers"][0]["port"] == proxy.port
    assert proxy.versions(ApiKey.DESCRIBE_CLUSTER, KP) == {1}
    assert proxy.versions(ApiKey.DESCRIBE_CLUSTER, CF) == set()  # librdkafka sends Metadata
    assert proxy.versions(ApiKey.DESCRIBE_CLUSTER, AIO) == set()  # aiokafka sends Metadata
    assert proxy.versions(ApiKey.METADATA, CF) == {12}
    assert proxy.versions(ApiKey.METADATA, AIO) == {5}


# -- OffsetDelete (47) ----------------------------------------------------------------------------


def test_offset_delete_through_kafka_python(kp: KafkaAdminClient, proxy: RecordingProxy) -> None:
    """kafka-python's ``delete_group_offsets`` on an Empty group whose offsets its
    ``alter_group_offsets`` committed (confluent-kafka and aiokafka have no such call)."""
    kp.create_topics([NewTopic("od", 2, 1)])
    tps = [KpTopicPartition("od", p) for p in (0, 1)]
    deadline = time.monotonic() + TIMEOUT_S
    while True:  # the first group request creates __consumer_offsets: no coordinator for a moment
        try:  # (a moment later the answer can be NOT_COORDINATOR per partition, which is returned)
            errors = kp.alter_group_offsets("od-group", {tp: OffsetAndMetadata(7, "", -1) for tp in tps})
            if set(errors.values()) == {NoError}:
                break
        except CoordinatorNotAvailableError:
            pass
        assert time.monotonic() < deadline, "no group coordinator"
        time.sleep(0.2)
    assert kp.delete_group_offsets("od-group", tps[:1]) == {tps[0]: NoError}
    left = kp.list_group_offsets({"od-group": tps})["od-group"]
    assert {tp.partition: meta.offset for tp, meta in left.items()} == {0: -1, 1: 7}
    assert proxy.versions(ApiKey.OFFSET_DELETE, KP) == {0}


# -- DescribeClientQuotas (48) and AlterClientQuotas (49) ----------------------------------------


def test_client_quotas_through_kafka_pythons_request_classes(
    kp: KafkaAdminClient, proxy: RecordingProxy
) -> None:
    """No library has an admin call for them; kafka-python ships the request classes, sent here
    through its admin client's connections at the version it negotiates."""
    entry = AlterClientQuotasRequest.EntryData
    altered = kp._manager.run(
        kp._manager.send,
        AlterClientQuotasRequest(
            entries=[
                entry(
                    entity=[entry.EntityData(entity_type="client-id", entity_name="matrix-app")],
                    ops=[entry.OpData(key="consumer_byte_rate", value=2048.0, remove=False)],
                )
            ],
            validate_only=False,
        ),
    )
    assert [(e.error_code, e.error_message) for e in altered.entries] == [(0, None)]
    component = DescribeClientQuotasRequest.ComponentData
    described = kp._manager.run(
        kp._manager.send,
        DescribeClientQuotasRequest(
            components=[component(entity_type="client-id", match_type=0, match="matrix-app")], strict=True
        ),
    )
    assert described.error_code == 0
    [found] = described.entries
    assert [(e.entity_type, e.entity_name) for e in found.entity] == [("client-id", "matrix-app")]
    assert [(v.key, v.value) for v in found.values] == [("consumer_byte_rate", 2048.0)]
    assert proxy.versions(ApiKey.ALTER_CLIENT_QUOTAS, KP) == {1}
    assert proxy.versions(ApiKey.DESCRIBE_CLIENT_QUOTAS, KP) == {1}


# -- what the libraries do not expose -------------------------------------------------------------

NOT_EXPOSED = {
    # kafka-python 3.0.12 ships the client-quota request classes but no admin call for them
    KafkaAdminClient: ("describe_client_quotas", "alter_client_quotas"),
    ConfluentAdmin: (
        "describe_log_dirs",
        "describe_topic_partitions",
        "alter_partition_reassignments",
        "list_partition_reassignments",
        "describe_client_quotas",
        "alter_client_quotas",
        "delete_consumer_group_offsets",
    ),
    AIOKafkaAdminClient: (
        "incremental_alter_configs",
        "elect_leaders",
        "describe_log_dirs",
        "describe_topic_partitions",
        "alter_partition_reassignments",
        "list_partition_reassignments",
        "describe_client_quotas",
        "alter_client_quotas",
        "delete_consumer_group_offsets",
        "delete_group_offsets",
    ),
}


@pytest.mark.parametrize("library", NOT_EXPOSED, ids=lambda cls: cls.__module__.split(".")[0])
def test_the_admin_calls_a_library_does_not_expose(library: type) -> None:
    """The table's "not exposed" cells: no public method of that name, nor any about quotas on
    any of them, nor about log dirs or reassignments on confluent-kafka's or aiokafka's."""
    public = [name for name in dir(library) if not name.startswith("_")]
    assert [name for name in NOT_EXPOSED[library] if name in public] == []
    assert [name for name in public if "quota" in name] == []
    if library is not KafkaAdminClient:
        assert [name for name in public if "log_dir" in name or "reassign" in name] == []
