"""IncrementalAlterConfigs and AlterConfigs on the controller: validation, operations, records."""

from __future__ import annotations

from metadata.controller.config_control import AlterableConfig, ConfigResourceChange, OpType
from metadata.records import ConfigRecord, ConfigResourceType
from protocol.error_codes import ErrorCode
from tests.metadata.controller.helpers import Cluster, replayed

TOPIC = int(ConfigResourceType.TOPIC)
BROKER = int(ConfigResourceType.BROKER)


def _cluster() -> Cluster:
    cluster = Cluster()
    cluster.join(1)
    cluster.create("orders", 2, 1)
    return cluster


def _set(resource_type: int, name: str, **configs: str) -> ConfigResourceChange:
    return ConfigResourceChange(
        resource_type, name, tuple(AlterableConfig(k.replace("_", "."), v) for k, v in configs.items())
    )


def _op(resource_type: int, name: str, *ops: tuple[str, int, str | None]) -> ConfigResourceChange:
    return ConfigResourceChange(resource_type, name, tuple(AlterableConfig(k, v, op) for k, op, v in ops))


def _errors(results: list) -> list[tuple[ErrorCode, str | None]]:  # type: ignore[type-arg]
    return [(r.error, r.message) for r in results]


def test_set_and_delete_topic_configs_write_one_batch() -> None:
    cluster = _cluster()
    before = cluster.log.end_offset
    results = cluster.controller.incremental_alter_configs(
        [_op(TOPIC, "orders", ("retention.ms", OpType.SET, "1000"), ("segment.bytes", OpType.SET, "2048"))]
    )
    assert _errors(results) == [(ErrorCode.NONE, None)]
    assert cluster.image.get("orders").configs == {"retention.ms": "1000", "segment.bytes": "2048"}
    batches = cluster.log.end_offset - before
    assert batches == 2  # two records, one batch
    results = cluster.controller.incremental_alter_configs(
        [_op(TOPIC, "orders", ("retention.ms", OpType.DELETE, None))]
    )
    assert _errors(results) == [(ErrorCode.NONE, None)]
    assert cluster.image.get("orders").configs == {"segment.bytes": "2048"}
    assert replayed(cluster.log).get("orders").configs == {"segment.bytes": "2048"}


def test_unchanged_value_writes_nothing_and_validate_only_writes_nothing() -> None:
    cluster = _cluster()
    cluster.controller.incremental_alter_configs([_op(TOPIC, "orders", ("retention.ms", OpType.SET, "1000"))])
    end = cluster.log.end_offset
    cluster.controller.incremental_alter_configs([_op(TOPIC, "orders", ("retention.ms", OpType.SET, "1000"))])
    results = cluster.controller.incremental_alter_configs(
        [_op(TOPIC, "orders", ("retention.ms", OpType.SET, "5"))], validate_only=True
    )
    assert _errors(results) == [(ErrorCode.NONE, None)]
    assert cluster.log.end_offset == end
    assert cluster.image.get("orders").configs == {"retention.ms": "1000"}


def test_topic_errors_have_kafkas_codes_and_messages() -> None:
    cluster = _cluster()
    results = cluster.controller.incremental_alter_configs(
        [
            _op(TOPIC, "orders", ("no.such.key", OpType.SET, "1")),
            _op(TOPIC, "missing", ("retention.ms", OpType.SET, "1")),
            _op(TOPIC, "", ("retention.ms", OpType.SET, "1")),
            _op(TOPIC, "bad name!", ("retention.ms", OpType.SET, "1")),
        ]
    )
    assert _errors(results)[:3] == [
        (ErrorCode.INVALID_CONFIG, "Unknown topic config name: no.such.key"),
        (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The topic 'missing' does not exist."),
        (ErrorCode.INVALID_REQUEST, "Default topic resources are not allowed."),
    ]
    assert results[3].error == ErrorCode.INVALID_TOPIC_EXCEPTION
    [bad] = cluster.controller.incremental_alter_configs(
        [_op(TOPIC, "orders", ("segment.bytes", OpType.SET, "1"))]
    )
    assert bad.error == ErrorCode.INVALID_CONFIG
    assert (
        bad.message
        == "Invalid value '1' for configuration segment.bytes: expected a 32-bit integer, at least 14"
    )


def test_one_bad_resource_leaves_the_others_applied() -> None:
    cluster = _cluster()
    cluster.create("payments", 1, 1)
    results = cluster.controller.incremental_alter_configs(
        [_set(TOPIC, "orders", retention_ms="-5"), _set(TOPIC, "payments", retention_ms="77")]
    )
    assert [r.error for r in results] == [ErrorCode.INVALID_CONFIG, ErrorCode.NONE]
    assert cluster.image.get("orders").configs == {}
    assert cluster.image.get("payments").configs == {"retention.ms": "77"}


def test_duplicates_nulls_and_unknown_operations_are_invalid_requests() -> None:
    cluster = _cluster()
    results = cluster.controller.incremental_alter_configs(
        [_set(TOPIC, "orders", retention_ms="1"), _set(TOPIC, "orders", retention_ms="2")]
    )
    assert _errors(results) == [(ErrorCode.INVALID_REQUEST, "Each resource must appear at most once.")] * 2
    [dup_key, null, unknown_op] = cluster.controller.incremental_alter_configs(
        [
            _op(TOPIC, "orders", ("retention.ms", OpType.SET, "1"), ("retention.ms", OpType.SET, "2")),
            _op(BROKER, "1", ("message.max.bytes", OpType.SET, None)),
            _op(BROKER, "", ("message.max.bytes", 7, "1")),
        ]
    )
    assert _errors([dup_key, null, unknown_op]) == [
        (ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys"),
        (ErrorCode.INVALID_REQUEST, "Null value not supported for : message.max.bytes"),
        (ErrorCode.INVALID_REQUEST, "Unknown operation type 7"),
    ]


def test_append_and_subtract_on_list_keys_only() -> None:
    cluster = _cluster()
    [ok] = cluster.controller.incremental_alter_configs(
        [_op(TOPIC, "orders", ("cleanup.policy", OpType.APPEND, "compact"))]
    )
    assert ok.error == ErrorCode.NONE
    assert cluster.image.get("orders").configs["cleanup.policy"] == "delete,compact"
    cluster.controller.incremental_alter_configs(
        [_op(TOPIC, "orders", ("cleanup.policy", OpType.SUBTRACT, "delete"))]
    )
    assert cluster.image.get("orders").configs["cleanup.policy"] == "compact"
    [bad] = cluster.controller.incremental_alter_configs(
        [_op(TOPIC, "orders", ("retention.ms", OpType.APPEND, "5"))]
    )
    assert _errors([bad]) == [
        (ErrorCode.INVALID_CONFIG, "Can't APPEND to key retention.ms because its type is not LIST.")
    ]


def test_broker_resources_cluster_default_and_per_broker() -> None:
    cluster = _cluster()
    results = cluster.controller.incremental_alter_configs(
        [
            _set(BROKER, "", log_retention_ms="60000"),
            _set(BROKER, "7", message_max_bytes="2048"),  # not registered: accepted, as Kafka
        ]
    )
    assert _errors(results) == [(ErrorCode.NONE, None)] * 2
    assert cluster.image.broker_configs("") == {"log.retention.ms": "60000"}
    assert cluster.image.broker_configs("7") == {"message.max.bytes": "2048"}
    records = [r for _, _, r in cluster.log.read() if isinstance(r, ConfigRecord)]
    assert ConfigRecord(BROKER, "", "log.retention.ms", "60000") in records


def test_broker_keys_that_are_not_dynamic_or_bad() -> None:
    cluster = _cluster()
    results = cluster.controller.incremental_alter_configs(
        [
            _set(BROKER, "1", log_dirs="/tmp/x", num_partitions="3"),
            _set(BROKER, "2", message_max_bytes="-1"),
            _set(BROKER, "x", message_max_bytes="1"),
            _set(BROKER, "-3", message_max_bytes="1"),
            _set(BROKER, "4", **{"listener_name_ssl_ssl_client_auth": "required"}),
        ]
    )
    assert _errors(results) == [
        (ErrorCode.INVALID_REQUEST, "Cannot update these configs dynamically: Set(log.dirs, num.partitions)"),
        (
            ErrorCode.INVALID_REQUEST,
            "Invalid value '-1' for configuration message.max.bytes: expected a 32-bit integer, at least 0",
        ),
        (ErrorCode.INVALID_REQUEST, "Unable to parse broker name x"),
        (ErrorCode.INVALID_REQUEST, "Invalid negative broker ID."),
        (ErrorCode.INVALID_REQUEST, "Unknown broker config name: listener.name.ssl.ssl.client.auth"),
    ]


def test_broker_keys_kipling_does_not_know_are_stored_as_kafka_stores_them() -> None:
    """Kafka's broker checks only the keys KafkaConfig defines (DynamicBrokerConfig.validateConfigs):
    a plugin's key, or a Kafka key kipling lacks (librdkafka's test 0081 sets
    sasl.kerberos.min.time.before.relogin and background.threads), is stored as given."""
    cluster = _cluster()
    results = cluster.controller.incremental_alter_configs(
        [
            _set(BROKER, "1", **{"sasl_kerberos_min_time_before_relogin": "58000"}),
            _set(BROKER, "", **{"background_threads": "9", "no_such_key": "x"}),
        ]
    )
    assert _errors(results) == [(ErrorCode.NONE, None)] * 2
    assert cluster.image.broker_configs("1") == {"sasl.kerberos.min.time.before.relogin": "58000"}
    assert cluster.image.broker_configs("") == {"background.threads": "9", "no.such.key": "x"}
    results = cluster.controller.incremental_alter_configs(
        [_op(BROKER, "", ("background.threads", OpType.DELETE, None), ("no.such.key", OpType.APPEND, "y"))]
    )
    assert results[0].error == ErrorCode.INVALID_CONFIG  # APPEND needs a LIST key, as in Kafka
    results = cluster.controller.incremental_alter_configs(
        [_op(BROKER, "", ("background.threads", OpType.DELETE, None))]
    )
    assert _errors(results) == [(ErrorCode.NONE, None)]
    assert cluster.image.broker_configs("") == {"no.such.key": "x"}


def test_throttle_rates_are_dynamic_broker_keys() -> None:
    cluster = _cluster()
    results = cluster.controller.incremental_alter_configs(
        [
            _set(
                BROKER,
                "1",
                leader_replication_throttled_rate="1000",
                follower_replication_throttled_rate="500",
            )
        ]
    )
    assert _errors(results) == [(ErrorCode.NONE, None)]
    assert cluster.image.broker_configs("1") == {
        "leader.replication.throttled.rate": "1000",
        "follower.replication.throttled.rate": "500",
    }


def test_other_resource_types_are_invalid_requests() -> None:
    cluster = _cluster()
    results = cluster.controller.incremental_alter_configs([_set(8, "1", root="INFO"), _set(16, "m", x="1")])
    assert _errors(results) == [
        (ErrorCode.INVALID_REQUEST, "Unsupported resource type: BROKER_LOGGER"),
        (ErrorCode.INVALID_REQUEST, "Unsupported resource type: CLIENT_METRICS"),
    ]


def test_legacy_alter_configs_replaces_the_whole_set() -> None:
    cluster = _cluster()
    cluster.controller.incremental_alter_configs(
        [_set(TOPIC, "orders", retention_ms="1000", segment_bytes="4096")]
    )
    [ok] = cluster.controller.alter_configs([_set(TOPIC, "orders", max_message_bytes="5000")])
    assert ok.error == ErrorCode.NONE
    assert cluster.image.get("orders").configs == {"max.message.bytes": "5000"}
    [null] = cluster.controller.alter_configs(
        [ConfigResourceChange(TOPIC, "orders", (AlterableConfig("retention.ms", None),))]
    )
    assert _errors([null]) == [(ErrorCode.INVALID_REQUEST, "Null value not supported for : retention.ms")]
    cluster.controller.alter_configs([ConfigResourceChange(TOPIC, "orders", ())])
    assert cluster.image.get("orders").configs == {}


def test_enabling_unclean_election_dynamically_elects_leaderless_partitions() -> None:
    """unclean.leader.election.enable set at run time (cluster default, then a topic override) elects
    a live replica outside the ISR of a partition left without a leader, without a broker change."""
    from metadata.topics import NO_LEADER
    from tests.metadata.controller.test_elections import expire

    cluster = Cluster()
    cluster.join(1, 2)
    cluster.create_assigned("t", [1, 2])
    cluster.create_assigned("kept", [1, 2])
    cluster.controller.incremental_alter_configs(
        [_set(TOPIC, "kept", unclean_leader_election_enable="false")]
    )
    expire(cluster, 2)
    assert not cluster.heartbeat(2).is_fenced  # back, but out of the ISR
    expire(cluster, 1)
    assert cluster.partition("t").leader_id == cluster.partition("kept").leader_id == NO_LEADER
    [ok] = cluster.controller.incremental_alter_configs(
        [_set(BROKER, "", unclean_leader_election_enable="true")]
    )
    assert ok.error == ErrorCode.NONE
    assert (cluster.partition("t").leader_id, cluster.partition("t").isr) == (2, [2])
    assert cluster.partition("kept").leader_id == NO_LEADER  # its own override still says no
    cluster.controller.incremental_alter_configs(
        [_op(TOPIC, "kept", ("unclean.leader.election.enable", OpType.DELETE, None))]
    )
    assert cluster.partition("kept").leader_id == 2
