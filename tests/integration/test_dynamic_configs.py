"""Dynamic configs on a single node, through the real clients at the versions they send:
kafka-python 3.0.12 (``alter_configs``: IncrementalAlterConfigs v1, or AlterConfigs v2 with
``incremental=False``), confluent-kafka 2.16.1 (``incremental_alter_configs`` v1, ``alter_configs``
v2), aiokafka 0.14.0 (``AIOKafkaAdminClient.alter_configs``: AlterConfigs v1), and ``kipling
configs``. A change takes effect without a restart (a produce over a lowered max.message.bytes is
MESSAGE_TOO_LARGE), DescribeConfigs shows where each value comes from, and the change survives a
restart of the node.
"""

from __future__ import annotations

import asyncio
import io
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.admin.config_resource import ConfigResource as AioConfigResource
from aiokafka.admin.config_resource import ConfigResourceType as AioResourceType
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient as ConfluentAdmin
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource, ResourceType
from kafka import KafkaAdminClient
from kafka.admin import ConfigResource as KpConfigResource
from kafka.admin import ConfigResourceType as KpResourceType
from kafka.admin import NewTopic
from kafka.errors import InvalidConfigurationError
from kafka.errors import KafkaError as KpKafkaError

from protocol.api_keys import ApiKey
from protocol.error_codes import ErrorCode
from tests.integration.broker_process import BrokerProcess
from tests.integration.wire_client import WireClient
from tools.cli import build_parser
from tools.commands.configs import configs_command
from tools.commands.topics import run_async

pytestmark = [pytest.mark.timeout(180)]

TIMEOUT_S = 30
KP_CLIENT = "dynamic-configs-test"


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    root = tmp_path_factory.mktemp("dynamic-configs")
    process = BrokerProcess(root, overrides=["log.retention.check.interval.ms=300"]).start()
    yield process
    process.stop()


@pytest.fixture(scope="module")
def admin(node: BrokerProcess) -> Iterator[KafkaAdminClient]:
    client = KafkaAdminClient(bootstrap_servers=node.bootstrap, client_id=KP_CLIENT)
    yield client
    client.close()


def create(admin: KafkaAdminClient, name: str) -> None:
    admin.create_topics([NewTopic(name, 1, 1)])


def confluent(node: BrokerProcess) -> ConfluentAdmin:
    return ConfluentAdmin({"bootstrap.servers": node.bootstrap})


def topic_configs(admin: KafkaAdminClient, topic: str, *keys: str) -> dict[str, dict[str, object]]:
    described = admin.describe_configs(
        [KpConfigResource(KpResourceType.TOPIC, topic, list(keys) or None)],
        include_synonyms=True,
        config_filter="all",
    )
    result: dict[str, dict[str, object]] = described["topic"][topic]
    return result


def produce(node: BrokerProcess, topic: str, size: int) -> KafkaError | None:
    """Produce one record of ``size`` bytes; the delivery error, or None."""
    producer = Producer(
        {"bootstrap.servers": node.bootstrap, "message.max.bytes": 10_000_000, "linger.ms": 0}
    )
    errors: list[KafkaError | None] = []
    # keyed: the topic becomes compacted, where a keyless record is refused (INVALID_RECORD)
    producer.produce(topic, key=b"k", value=b"v" * size, on_delivery=lambda err, msg: errors.append(err))
    assert producer.flush(TIMEOUT_S) == 0
    return errors[0]


def versions_seen(node: BrokerProcess, api: str, client_id: str) -> set[int]:
    """The versions of ``api`` the broker logged receiving from clients whose id starts with
    ``client_id`` ("config change received")."""
    return {
        int(match)
        for line in node.output().splitlines()
        if "config change received" in line and f"api={api}" in line and f"client_id={client_id}" in line
        for match in re.findall(r"version=(\d+)", line)
    }


def run_tool(*argv: str) -> tuple[int, str, str]:
    args = build_parser().parse_args(["configs", *argv])
    out, err = io.StringIO(), io.StringIO()
    status = run_async(configs_command(args, out, err))
    return status, out.getvalue(), err.getvalue()


def test_kafka_python_incremental_and_legacy(node: BrokerProcess, admin: KafkaAdminClient) -> None:
    create(admin, "kp")
    result = admin.alter_configs([KpConfigResource(KpResourceType.TOPIC, "kp", {"retention.ms": "123456"})])
    assert result == {"topic": {"kp": "OK"}}
    configs = topic_configs(admin, "kp", "retention.ms", "segment.bytes")
    assert configs["retention.ms"]["value"] == "123456"
    assert configs["retention.ms"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
    assert configs["segment.bytes"]["config_source"] == "DEFAULT_CONFIG"
    # AlterConfigs v2: kafka-python re-sends the other modified keys itself, so retention.ms stays
    legacy = admin.alter_configs(
        [KpConfigResource(KpResourceType.TOPIC, "kp", {"segment.bytes": "1048576"})], incremental=False
    )
    assert legacy == {"topic": {"kp": "OK"}}
    assert versions_seen(node, "INCREMENTAL_ALTER_CONFIGS", KP_CLIENT) == {1}  # kafka-python 3.0.12
    assert versions_seen(node, "ALTER_CONFIGS", KP_CLIENT) == {2}
    configs = topic_configs(admin, "kp", "retention.ms", "segment.bytes")
    assert (configs["retention.ms"]["value"], configs["segment.bytes"]["value"]) == ("123456", "1048576")
    bad = admin.alter_configs([KpConfigResource(KpResourceType.TOPIC, "kp", {"retention.ms": "-7"})])
    assert "InvalidConfigurationError" in bad["topic"]["kp"]
    assert "retention.ms" in bad["topic"]["kp"]
    with pytest.raises((InvalidConfigurationError, ValueError, KpKafkaError)):
        admin.alter_configs([KpConfigResource(KpResourceType.TOPIC, "kp", {"no.such.config": "1"})])


def test_kafka_python_broker_config(admin: KafkaAdminClient) -> None:
    result = admin.alter_configs(
        [KpConfigResource(KpResourceType.BROKER, "1", {"log.retention.bytes": "987654321"})]
    )
    assert result == {"broker": {"1": "OK"}}
    described = admin.describe_configs(
        [KpConfigResource(KpResourceType.BROKER, "1", ["log.retention.bytes", "num.partitions"])],
        include_synonyms=True,
        config_filter="all",
    )["broker"]["1"]
    entry = described["log.retention.bytes"]
    assert (entry["value"], entry["config_source"], entry["read_only"]) == (
        "987654321",
        "DYNAMIC_BROKER_CONFIG",
        False,
    )
    assert [s["source"] for s in entry["synonyms"]] == ["DYNAMIC_BROKER_CONFIG", "DEFAULT_CONFIG"]
    assert described["num.partitions"]["read_only"] is True
    refused = admin.alter_configs(
        [KpConfigResource(KpResourceType.BROKER, "1", {"num.partitions": "3"})], raise_on_unknown=False
    )
    assert "Cannot update these configs dynamically: Set(num.partitions)" in refused["broker"]["1"]
    admin.alter_configs([KpConfigResource(KpResourceType.BROKER, "1", {"log.retention.bytes": (1, None)})])
    create(admin, "kp-broker")
    retention = topic_configs(admin, "kp-broker", "retention.bytes")["retention.bytes"]
    assert (retention["value"], retention["config_source"]) == ("-1", "DEFAULT_CONFIG")


def test_confluent_incremental_then_live_max_message_bytes(
    node: BrokerProcess, admin: KafkaAdminClient
) -> None:
    create(admin, "cf")
    assert produce(node, "cf", 5000) is None
    client = confluent(node)
    resource = ConfigResource(
        ResourceType.TOPIC,
        "cf",
        incremental_configs=[
            ConfigEntry("max.message.bytes", "1000", incremental_operation=AlterConfigOpType.SET),
            ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND),
        ],
    )
    for future in client.incremental_alter_configs([resource]).values():
        future.result(timeout=TIMEOUT_S)
    error = produce(node, "cf", 5000)
    assert error is not None and error.code() == KafkaError.MSG_SIZE_TOO_LARGE, error
    assert produce(node, "cf", 100) is None
    assert topic_configs(admin, "cf", "cleanup.policy")["cleanup.policy"]["value"] == "delete,compact"
    # legacy AlterConfigs replaces the whole override set: max.message.bytes is gone again
    legacy = ConfigResource(ResourceType.TOPIC, "cf", set_config={"retention.ms": "86400000"})
    with pytest.warns(DeprecationWarning):  # confluent-kafka deprecates it; it still sends AlterConfigs v2
        futures = client.alter_configs([legacy])
    for future in futures.values():
        future.result(timeout=TIMEOUT_S)
    assert versions_seen(node, "INCREMENTAL_ALTER_CONFIGS", "rdkafka") == {1}  # confluent-kafka 2.16.1
    assert versions_seen(node, "ALTER_CONFIGS", "rdkafka") == {2}
    configs = topic_configs(admin, "cf", "max.message.bytes", "retention.ms", "cleanup.policy")
    assert configs["max.message.bytes"]["config_source"] == "DEFAULT_CONFIG"
    assert configs["retention.ms"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
    assert configs["cleanup.policy"]["value"] == "delete"
    assert produce(node, "cf", 5000) is None
    bad = ConfigResource(
        ResourceType.TOPIC,
        "cf",
        incremental_configs=[
            ConfigEntry("retention.ms", "5", incremental_operation=AlterConfigOpType.APPEND)
        ],
    )
    with pytest.raises(KafkaException) as info:
        for future in client.incremental_alter_configs([bad]).values():
            future.result(timeout=TIMEOUT_S)
    assert info.value.args[0].code() == KafkaError.INVALID_CONFIG


def test_confluent_per_broker_and_tool_cluster_default(node: BrokerProcess, admin: KafkaAdminClient) -> None:
    # librdkafka refuses a BROKER resource named "" itself: the cluster default goes through the tool
    client = confluent(node)
    resource = ConfigResource(
        ResourceType.BROKER,
        "1",
        incremental_configs=[
            ConfigEntry("log.segment.bytes", "2097152", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    for future in client.incremental_alter_configs([resource]).values():
        future.result(timeout=TIMEOUT_S)
    base = ("--bootstrap-server", node.bootstrap, "--entity-type", "brokers", "--entity-default")
    assert run_tool(*base, "--alter", "--add-config", "log.retention.ms=7200000") == (
        0,
        "Completed updating default config for brokers in the cluster.\n",
        "",
    )
    create(admin, "cf-default")
    configs = topic_configs(admin, "cf-default", "segment.bytes", "retention.ms")
    segment, retention = configs["segment.bytes"], configs["retention.ms"]
    assert (segment["value"], segment["config_source"]) == ("2097152", "DYNAMIC_BROKER_CONFIG")
    assert (retention["value"], retention["config_source"]) == ("7200000", "DYNAMIC_DEFAULT_BROKER_CONFIG")
    status, out, _ = run_tool(*base, "--describe")
    assert status == 0
    assert out == (
        "Default configs for brokers in the cluster are:\n"
        "  log.retention.ms=7200000 sensitive=false "
        "synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=7200000}\n"
    )
    status, out, _ = run_tool(
        "--bootstrap-server", node.bootstrap, "--entity-type", "brokers", "--entity-name", "1", "--describe"
    )
    assert status == 0
    assert out.splitlines() == [
        "Dynamic configs for broker 1 are:",
        "  log.segment.bytes=2097152 sensitive=false "
        "synonyms={DYNAMIC_BROKER_CONFIG:log.segment.bytes=2097152, "
        "DEFAULT_CONFIG:log.segment.bytes=1073741824}",
    ]
    assert run_tool(*base, "--alter", "--delete-config", "log.retention.ms")[0] == 0
    delete = ConfigResource(
        ResourceType.BROKER,
        "1",
        incremental_configs=[
            ConfigEntry("log.segment.bytes", None, incremental_operation=AlterConfigOpType.DELETE)
        ],
    )
    for future in client.incremental_alter_configs([delete]).values():
        future.result(timeout=TIMEOUT_S)
    configs = topic_configs(admin, "cf-default", "segment.bytes", "retention.ms")
    assert (
        configs["segment.bytes"]["config_source"]
        == configs["retention.ms"]["config_source"]
        == "DEFAULT_CONFIG"
    )


def test_confluent_group_configs_and_the_tool(node: BrokerProcess) -> None:
    """Kafka 4.0's GROUP resource: a group's consumer.session.timeout.ms set, described as
    GROUP_CONFIG, deleted back to the broker's default; the group need not exist."""
    client = confluent(node)

    def alter(*entries: ConfigEntry) -> None:
        resource = ConfigResource(ResourceType.GROUP, "cfg-group", incremental_configs=list(entries))
        for future in client.incremental_alter_configs([resource]).values():
            future.result(timeout=TIMEOUT_S)

    def described() -> dict[str, tuple[str | None, ConfigSource]]:
        """Each key's value and source (confluent-kafka hands the source over as a plain int)."""
        futures = client.describe_configs([ConfigResource(ResourceType.GROUP, "cfg-group")])
        [entries] = [future.result(timeout=TIMEOUT_S) for future in futures.values()]
        return {name: (entry.value, ConfigSource(entry.source)) for name, entry in entries.items()}

    session = "consumer.session.timeout.ms"
    alter(ConfigEntry(session, "50000", incremental_operation=AlterConfigOpType.SET))
    entries = described()
    assert sorted(entries) == ["consumer.heartbeat.interval.ms", session]
    assert entries[session] == ("50000", ConfigSource.GROUP_CONFIG)
    assert entries["consumer.heartbeat.interval.ms"] == ("5000", ConfigSource.DEFAULT_CONFIG)
    with pytest.raises(KafkaException) as info:
        alter(ConfigEntry(session, "1000", incremental_operation=AlterConfigOpType.SET))
    assert info.value.args[0].code() == KafkaError.INVALID_CONFIG
    assert "group.consumer.min.session.timeout.ms" in info.value.args[0].str()
    alter(ConfigEntry(session, None, incremental_operation=AlterConfigOpType.DELETE))
    entries = described()
    assert entries[session] == ("45000", ConfigSource.DEFAULT_CONFIG)

    base = ("--bootstrap-server", node.bootstrap, "--entity-type", "groups", "--entity-name", "cfg-group")
    assert run_tool(*base, "--alter", "--add-config", f"{session}=50000") == (
        0,
        "Completed updating config for group cfg-group.\n",
        "",
    )
    status, out, _ = run_tool(*base, "--describe")
    assert status == 0
    assert out.splitlines() == [
        "Dynamic configs for group cfg-group are:",
        f"  {session}=50000 sensitive=false synonyms={{GROUP_CONFIG:{session}=50000, "
        "DEFAULT_CONFIG:group.consumer.session.timeout.ms=45000}",
    ]
    assert run_tool(*base, "--alter", "--delete-config", session)[0] == 0
    assert described()[session] == ("45000", ConfigSource.DEFAULT_CONFIG)


def test_a_groups_heartbeat_interval_is_what_a_kip848_heartbeat_answers(node: BrokerProcess) -> None:
    """A group's consumer.heartbeat.interval.ms override is the interval its members are given."""
    resource = ConfigResource(
        ResourceType.GROUP,
        "hb-group",
        incremental_configs=[
            ConfigEntry("consumer.heartbeat.interval.ms", "7000", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    client = confluent(node)  # held: a dropped client fails its futures
    for future in client.incremental_alter_configs([resource]).values():
        future.result(timeout=TIMEOUT_S)
    with WireClient(node.port) as wire:

        def joined(group: str) -> Any:
            """A first heartbeat of ``group``, retried while its coordinator is not ready yet
            (FindCoordinator creates __consumer_offsets; its partitions then load)."""
            join = {
                "group_id": group,
                "member_id": "hb-member",
                "member_epoch": 0,
                "rebalance_timeout_ms": 30_000,
                "subscribed_topic_names": ["hb-topic"],
                "topic_partitions": [],
            }
            deadline = time.monotonic() + TIMEOUT_S
            while True:
                wire.request(ApiKey.FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": [group]})
                body = wire.request(ApiKey.CONSUMER_GROUP_HEARTBEAT, 0, join).body
                if body.error_code == ErrorCode.NONE or time.monotonic() > deadline:
                    return body
                time.sleep(0.2)

        body = joined("hb-group")
        assert (body.error_code, body.heartbeat_interval_ms) == (ErrorCode.NONE, 7000)
        other = joined("hb-other")  # another group keeps the broker's interval
        assert (other.error_code, other.heartbeat_interval_ms) == (ErrorCode.NONE, 5000)


def test_aiokafka_alter_configs(node: BrokerProcess, admin: KafkaAdminClient) -> None:
    create(admin, "aio")

    async def alter() -> list[object]:
        client = AIOKafkaAdminClient(bootstrap_servers=node.bootstrap)
        await client.start()
        try:
            return await client.alter_configs(
                [AioConfigResource(AioResourceType.TOPIC, "aio", {"retention.ms": "3600000"})]
            )
        finally:
            await client.close()

    responses = asyncio.run(alter())
    assert versions_seen(node, "ALTER_CONFIGS", "aiokafka") == {1}  # aiokafka 0.14.0
    errors = [r.resources[0][0] if getattr(r, "resources", None) else None for r in responses]
    assert all(code in (0, None) for code in errors), responses
    assert topic_configs(admin, "aio", "retention.ms")["retention.ms"]["value"] == "3600000"


def test_tool_alter_and_describe(node: BrokerProcess, admin: KafkaAdminClient, tmp_path: Path) -> None:
    create(admin, "tool")
    base = ("--bootstrap-server", node.bootstrap, "--entity-type", "topics", "--entity-name", "tool")
    assert run_tool(
        *base, "--alter", "--add-config", "retention.ms=60000,cleanup.policy=[delete,compact]"
    ) == (
        0,
        "Completed updating config for topic tool.\n",
        "",
    )
    status, out, _ = run_tool(*base, "--describe")
    assert status == 0
    assert out.splitlines() == [
        "Dynamic configs for topic tool are:",
        "  cleanup.policy=delete,compact sensitive=false "
        "synonyms={DYNAMIC_TOPIC_CONFIG:cleanup.policy=delete,compact, "
        "DEFAULT_CONFIG:log.cleanup.policy=delete}",
        "  retention.ms=60000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=60000}",
    ]
    props = tmp_path / "extra.properties"
    props.write_text("segment.ms=3600000\n")
    assert (
        run_tool(*base, "--alter", "--add-config-file", str(props), "--delete-config", "cleanup.policy")[0]
        == 0
    )
    configs = topic_configs(admin, "tool", "segment.ms", "cleanup.policy")
    assert configs["segment.ms"]["value"] == "3600000"
    assert configs["cleanup.policy"]["config_source"] == "DEFAULT_CONFIG"
    assert run_tool(*base, "--alter", "--delete-config", "segment.bytes") == (
        1,
        "",
        "Invalid config(s): segment.bytes\n",
    )
    status, _, err = run_tool(*base, "--alter", "--add-config", "segment.bytes=1")
    assert status == 1 and "INVALID_CONFIG" in err and "segment.bytes" in err
    status, out, _ = run_tool(*base, "--describe", "--all")
    assert status == 0 and out.startswith("All configs for topic tool are:\n")
    assert "  segment.ms=3600000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:segment.ms=3600000" in out
    status, _, err = run_tool(
        "--bootstrap-server", node.bootstrap, "--entity-type", "broker-loggers", "--describe"
    )
    assert status == 1 and "broker-loggers" in err


def test_dynamic_configs_survive_a_restart(node: BrokerProcess, admin: KafkaAdminClient) -> None:
    create(admin, "durable")
    admin.alter_configs([KpConfigResource(KpResourceType.TOPIC, "durable", {"max.message.bytes": "2000"})])
    admin.alter_configs([KpConfigResource(KpResourceType.BROKER, "1", {"log.roll.ms": "3600000"})])
    node.restart()
    fresh = KafkaAdminClient(bootstrap_servers=node.bootstrap, client_id="after-restart")
    try:
        configs = topic_configs(fresh, "durable", "max.message.bytes", "segment.ms")
        assert (configs["max.message.bytes"]["value"], configs["max.message.bytes"]["config_source"]) == (
            "2000",
            "DYNAMIC_TOPIC_CONFIG",
        )
        assert (configs["segment.ms"]["value"], configs["segment.ms"]["config_source"]) == (
            "3600000",
            "DYNAMIC_BROKER_CONFIG",
        )
    finally:
        fresh.close()
    error = produce(node, "durable", 5000)
    assert error is not None and error.code() == KafkaError.MSG_SIZE_TOO_LARGE, error
