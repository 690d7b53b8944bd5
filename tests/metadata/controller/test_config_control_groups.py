"""The GROUP config resource on the controller (Kafka 4.0, KIP-848): group configs written as
ConfigRecords of the group, validated against the controller's group.consumer.* bounds."""

from __future__ import annotations

from metadata.controller.config_control import AlterableConfig, ConfigResourceChange, OpType
from metadata.controller.controller import ControllerConfig
from metadata.records import ConfigRecord, ConfigResourceType
from protocol.error_codes import ErrorCode
from server_common.config.group_config import GroupConfigBounds
from tests.metadata.controller.helpers import SESSION_MS, Cluster, replayed

GROUP = int(ConfigResourceType.GROUP)
SESSION, HEARTBEAT = "consumer.session.timeout.ms", "consumer.heartbeat.interval.ms"


def _op(name: str, *ops: tuple[str, int, str | None]) -> ConfigResourceChange:
    return ConfigResourceChange(GROUP, name, tuple(AlterableConfig(k, v, op) for k, op, v in ops))


def _errors(results: list) -> list[tuple[ErrorCode, str | None]]:  # type: ignore[type-arg]
    return [(r.error, r.message) for r in results]


def _written(cluster: Cluster, since: int) -> list[ConfigRecord]:
    return [
        record
        for offset, _, record in cluster.log.read()
        if offset >= since and isinstance(record, ConfigRecord)
    ]


def test_set_then_delete_on_a_group_that_does_not_exist() -> None:
    cluster = Cluster()
    start = cluster.log.end_offset
    results = cluster.controller.incremental_alter_configs([_op("g", (SESSION, OpType.SET, "50000"))])
    assert _errors(results) == [(ErrorCode.NONE, None)]
    assert _written(cluster, start) == [ConfigRecord(GROUP, "g", SESSION, "50000")]
    assert cluster.image.group_configs("g") == {SESSION: "50000"}
    assert cluster.image.broker_configs("g") == {}  # kept apart from broker configs
    assert replayed(cluster.log).group_configs("g") == {SESSION: "50000"}

    end = cluster.log.end_offset
    cluster.controller.incremental_alter_configs([_op("g", (SESSION, OpType.SET, "50000"))])
    assert cluster.log.end_offset == end  # unchanged: nothing written

    results = cluster.controller.incremental_alter_configs([_op("g", (SESSION, OpType.DELETE, None))])
    assert _errors(results) == [(ErrorCode.NONE, None)]
    assert _written(cluster, end) == [ConfigRecord(GROUP, "g", SESSION, None)]
    assert cluster.image.group_configs("g") == {}
    assert cluster.image.group_config_resources() == []
    # deleting a key that has no override writes nothing and succeeds (librdkafka 0081)
    end = cluster.log.end_offset
    assert _errors(
        cluster.controller.incremental_alter_configs([_op("g", (SESSION, OpType.DELETE, None))])
    ) == [(ErrorCode.NONE, None)]
    assert cluster.log.end_offset == end


def test_validate_only_writes_nothing() -> None:
    cluster = Cluster()
    end = cluster.log.end_offset
    results = cluster.controller.incremental_alter_configs(
        [_op("g", (HEARTBEAT, OpType.SET, "6000"))], validate_only=True
    )
    assert _errors(results) == [(ErrorCode.NONE, None)]
    assert cluster.log.end_offset == end
    assert cluster.image.group_configs("g") == {}


def test_refusals() -> None:
    cluster = Cluster()
    results = cluster.controller.incremental_alter_configs(
        [
            _op("", (SESSION, OpType.SET, "50000")),
            _op("a", ("foobar", OpType.SET, "1")),
            _op("b", ("share.session.timeout.ms", OpType.SET, "50000")),
            _op("c", (SESSION, OpType.SET, "x")),
            _op("d", (SESSION, OpType.APPEND, "1")),
            _op("e", (HEARTBEAT, OpType.SET, "100")),
            _op("f", (SESSION, OpType.SET, "50000"), (SESSION, OpType.SET, "51000")),
        ]
    )
    assert _errors(results) == [
        (ErrorCode.INVALID_REQUEST, "Default group resources are not allowed."),
        (ErrorCode.INVALID_CONFIG, "Unknown group config name: foobar"),
        (ErrorCode.INVALID_CONFIG, "Share groups are not supported: share.session.timeout.ms cannot be set"),
        (
            ErrorCode.INVALID_CONFIG,
            "Invalid value x for configuration consumer.session.timeout.ms: Not a number of type INT",
        ),
        (
            ErrorCode.INVALID_CONFIG,
            "Can't APPEND to key consumer.session.timeout.ms because its type is not LIST.",
        ),
        (
            ErrorCode.INVALID_CONFIG,
            f"{HEARTBEAT} must be greater than or equal to group.consumer.min.heartbeat.interval.ms",
        ),
        (ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys"),
    ]
    assert cluster.image.group_config_resources() == []


def test_bounds_are_the_controllers_broker_settings() -> None:
    bounds = GroupConfigBounds(
        group_consumer_min_heartbeat_interval_ms=1000, group_consumer_min_session_timeout_ms=2000
    )
    cluster = Cluster(ControllerConfig(broker_session_timeout_ms=SESSION_MS, group_config_bounds=bounds))
    # the heartbeat alone is checked against the default session timeout (45000)
    results = cluster.controller.incremental_alter_configs([_op("g", (HEARTBEAT, OpType.SET, "1000"))])
    assert _errors(results) == [(ErrorCode.NONE, None)]
    results = cluster.controller.incremental_alter_configs([_op("g", (SESSION, OpType.SET, "1000"))])
    assert _errors(results) == [
        (ErrorCode.INVALID_CONFIG, "consumer.session.timeout.ms must be greater than or equal to "
         "group.consumer.min.session.timeout.ms"),
    ]  # fmt: skip
    results = cluster.controller.incremental_alter_configs([_op("g", (SESSION, OpType.SET, "2000"))])
    assert _errors(results) == [(ErrorCode.NONE, None)]
    assert cluster.image.group_configs("g") == {HEARTBEAT: "1000", SESSION: "2000"}
    # raising the heartbeat over the stored session timeout is refused on the resulting map
    results = cluster.controller.incremental_alter_configs([_op("g", (HEARTBEAT, OpType.SET, "2000"))])
    assert _errors(results) == [
        (
            ErrorCode.INVALID_CONFIG,
            "consumer.session.timeout.ms must be greater than consumer.heartbeat.interval.ms",
        )
    ]


def test_legacy_alter_configs_replaces_the_groups_overrides() -> None:
    cluster = Cluster()
    cluster.controller.incremental_alter_configs(
        [_op("g", (SESSION, OpType.SET, "50000"), (HEARTBEAT, OpType.SET, "6000"))]
    )
    [ok] = cluster.controller.alter_configs([_op("g", (HEARTBEAT, OpType.SET, "7000"))])
    assert ok.error == ErrorCode.NONE
    assert cluster.image.group_configs("g") == {HEARTBEAT: "7000"}
    [refused] = cluster.controller.alter_configs([_op("", (HEARTBEAT, OpType.SET, "7000"))])
    assert _errors([refused]) == [(ErrorCode.INVALID_REQUEST, "Default group resources are not allowed.")]
    cluster.controller.alter_configs([ConfigResourceChange(GROUP, "g", ())])
    assert cluster.image.group_configs("g") == {}


def test_group_configs_survive_a_controller_restart() -> None:
    cluster = Cluster()
    cluster.controller.incremental_alter_configs([_op("g", (SESSION, OpType.SET, "50000"))])
    assert cluster.restart().image.group_configs("g") == {SESSION: "50000"}
