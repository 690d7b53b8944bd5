"""Dynamic configs on the controller: IncrementalAlterConfigs and AlterConfigs (Kafka's
ConfigurationControlManager with the broker-side checks of its ConfigAdminManager).

Each request is checked resource by resource against the image (an error in one resource never
fails the others); the changes of every valid resource are then written as ConfigRecords in one
batch, so a request takes effect entirely or, for a resource that failed, not at all. A record is
written only for a key whose override actually changes (a null value deletes it).

Resources:

- TOPIC: the name must be a legal, existing topic (``""``: INVALID_REQUEST "Default topic resources
  are not allowed.", unknown: UNKNOWN_TOPIC_OR_PARTITION). The resulting overrides are validated as
  CreateTopics validates them (INVALID_CONFIG with the same messages).
- BROKER: ``""`` is the cluster-wide default, otherwise a broker id (registered or not, as Kafka's
  controller accepts). Only the keys of :data:`~server_common.config.DYNAMIC_BROKER_KEYS` may be set;
  any other real broker key is INVALID_REQUEST "Cannot update these configs dynamically: Set(...)",
  and so is an unknown key or a bad value (Kafka's broker-side check answers INVALID_REQUEST).
- GROUP (Kafka 4.0, KIP-848): a consumer group's overrides of the group configs
  (:mod:`server_common.config.group_config`); the group need not exist, but ``""`` is
  INVALID_REQUEST "Default group resources are not allowed.". The resulting overrides, over the
  defaults, are validated with the bounds of the controller's ``group.consumer.*`` settings
  (INVALID_CONFIG with Kafka's GroupConfig messages; ``share.*`` keys are refused, kipling has no
  share groups).
- anything else (BROKER_LOGGER, CLIENT_METRICS, UNKNOWN): INVALID_REQUEST naming the type.

Operations (IncrementalAlterConfigs): SET (0), DELETE (1), APPEND (2) and SUBTRACT (3); APPEND and
SUBTRACT apply only to LIST keys (no group key is one) and start from the current override, else
the key's default.
AlterConfigs replaces the resource's whole override set: every key not named loses its override.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import IntEnum

import structlog

from metadata import topic_names
from metadata.controller.metadata_log import MetadataWriter
from metadata.image import MetadataImage
from metadata.records import ConfigRecord, ConfigResourceType, MetadataRecord
from protocol.error_codes import ErrorCode, KafkaError
from server_common.config import ConfigError, validate_broker_configs
from server_common.config.dynamic import default_list_value, is_list_key
from server_common.config.group_config import GroupConfigBounds, validate_group_configs

__all__ = [
    "AlterConfigsResult",
    "AlterableConfig",
    "ConfigControl",
    "ConfigResourceChange",
    "OpType",
    "resource_type_name",
]

_log = structlog.get_logger("kipling.controller.configs")

TopicConfigValidator = Callable[[Mapping[str, str | None]], dict[str, str]]

_RESOURCE_TYPE_NAMES = {
    0: "UNKNOWN",
    2: "TOPIC",
    4: "BROKER",
    8: "BROKER_LOGGER",
    16: "CLIENT_METRICS",
    32: "GROUP",
}
"""Kafka's ConfigResource.Type ids."""


class OpType(IntEnum):
    """Kafka's AlterConfigOp.OpType."""

    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


def resource_type_name(resource_type: int) -> str:
    return _RESOURCE_TYPE_NAMES.get(resource_type, str(resource_type))


@dataclass(frozen=True, slots=True)
class AlterableConfig:
    """One key of a request; ``operation`` is SET for AlterConfigs."""

    name: str
    value: str | None
    operation: int = OpType.SET


@dataclass(frozen=True, slots=True)
class ConfigResourceChange:
    resource_type: int
    resource_name: str
    configs: tuple[AlterableConfig, ...]


@dataclass(frozen=True, slots=True)
class AlterConfigsResult:
    resource_type: int
    resource_name: str
    error: ErrorCode = ErrorCode.NONE
    message: str | None = None


class ConfigControl:
    """Validates config changes against the image and writes them through the controller's writer."""

    def __init__(
        self,
        image: MetadataImage,
        writer: MetadataWriter,
        topic_validator: TopicConfigValidator,
        group_bounds: GroupConfigBounds | None = None,
    ) -> None:
        self._image = image
        self._writer = writer
        self._validate_topic = topic_validator
        self._group_bounds = group_bounds if group_bounds is not None else GroupConfigBounds()
        """The controller's group.consumer.* settings: the defaults and bounds of group configs."""

    def incremental_alter_configs(
        self, resources: Sequence[ConfigResourceChange], *, validate_only: bool = False
    ) -> list[AlterConfigsResult]:
        return self._alter(resources, validate_only, incremental=True)

    def alter_configs(
        self, resources: Sequence[ConfigResourceChange], *, validate_only: bool = False
    ) -> list[AlterConfigsResult]:
        """Legacy AlterConfigs: each resource's overrides become exactly the keys given."""
        return self._alter(resources, validate_only, incremental=False)

    def _alter(
        self, resources: Sequence[ConfigResourceChange], validate_only: bool, *, incremental: bool
    ) -> list[AlterConfigsResult]:
        counts = Counter((r.resource_type, r.resource_name) for r in resources)
        results: list[AlterConfigsResult] = []
        records: list[MetadataRecord] = []
        for resource in resources:
            try:
                if counts[(resource.resource_type, resource.resource_name)] > 1:
                    raise KafkaError(ErrorCode.INVALID_REQUEST, "Each resource must appear at most once.")
                records += self._records_for(resource, incremental)
            except KafkaError as exc:
                results.append(
                    AlterConfigsResult(resource.resource_type, resource.resource_name, exc.code, exc.message)
                )
            else:
                results.append(AlterConfigsResult(resource.resource_type, resource.resource_name))
        if records and not validate_only:
            self._writer.commit(records)
            _log.info("configs altered", records=len(records), incremental=incremental)
        return results

    def _records_for(self, resource: ConfigResourceChange, incremental: bool) -> list[ConfigRecord]:
        _check_shape(resource, incremental)
        if resource.resource_type == ConfigResourceType.TOPIC:
            current = self._topic_overrides(resource.resource_name)
            wanted = _apply(current, resource.configs, kind=_TOPIC, incremental=incremental)
            try:
                canonical = self._validate_topic(wanted)
            except ConfigError as exc:
                raise KafkaError(ErrorCode.INVALID_CONFIG, str(exc)) from None
            record_type = ConfigResourceType.TOPIC
        elif resource.resource_type == ConfigResourceType.BROKER:
            _check_broker_name(resource.resource_name)
            current = self._image.broker_configs(resource.resource_name)
            wanted = _apply(current, resource.configs, kind=_BROKER, incremental=incremental)
            try:
                canonical = validate_broker_configs(wanted, per_broker=resource.resource_name != "")
            except ConfigError as exc:
                # Kafka's broker checks a BROKER change (ConfigAdminManager, DynamicBrokerConfig
                # .validate) before forwarding it and answers every failure INVALID_REQUEST (KAFKA-13609)
                raise KafkaError(ErrorCode.INVALID_REQUEST, str(exc)) from None
            record_type = ConfigResourceType.BROKER
        elif resource.resource_type == ConfigResourceType.GROUP:
            if resource.resource_name == "":
                raise KafkaError(ErrorCode.INVALID_REQUEST, "Default group resources are not allowed.")
            current = self._image.group_configs(resource.resource_name)
            wanted = _apply(current, resource.configs, kind=_GROUP, incremental=incremental)
            try:
                canonical = validate_group_configs(wanted, self._group_bounds)
            except ConfigError as exc:
                raise KafkaError(ErrorCode.INVALID_CONFIG, str(exc)) from None
            record_type = ConfigResourceType.GROUP
        else:
            raise KafkaError(
                ErrorCode.INVALID_REQUEST,
                f"Unsupported resource type: {resource_type_name(resource.resource_type)}",
            )
        name = resource.resource_name
        changes = [
            ConfigRecord(record_type, name, key, value)
            for key, value in sorted(canonical.items())
            if current.get(key) != value
        ]
        changes += [
            ConfigRecord(record_type, name, key, None) for key in sorted(current) if key not in canonical
        ]
        return changes

    def _topic_overrides(self, name: str) -> dict[str, str]:
        if name == "":
            raise KafkaError(ErrorCode.INVALID_REQUEST, "Default topic resources are not allowed.")
        topic_names.validate(name)
        topic = self._image.get(name)
        if topic is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist.")
        return dict(topic.configs)


def _check_shape(resource: ConfigResourceChange, incremental: bool) -> None:
    """The request-level rules Kafka's broker applies before anything else: a key named once, a
    null value only with DELETE, a known operation."""
    counts = Counter(config.name for config in resource.configs)
    if any(count > 1 for count in counts.values()):
        raise KafkaError(ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys")
    for config in resource.configs:
        if config.operation not in tuple(OpType):
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"Unknown operation type {config.operation}")
    nulls = [
        config.name
        for config in resource.configs
        if config.value is None and (not incremental or config.operation != OpType.DELETE)
    ]
    if nulls:
        raise KafkaError(ErrorCode.INVALID_REQUEST, "Null value not supported for : " + ", ".join(nulls))


def _check_broker_name(name: str) -> None:
    if name == "":
        return
    try:
        broker_id = int(name)
    except ValueError:
        raise KafkaError(ErrorCode.INVALID_REQUEST, f"Unable to parse broker name {name}") from None
    if broker_id < 0:
        raise KafkaError(ErrorCode.INVALID_REQUEST, "Invalid negative broker ID.")


_TOPIC, _BROKER, _GROUP = "topic", "broker", "group"
"""Which keys a resource holds, for APPEND and SUBTRACT (no group key is a LIST)."""


def _apply(
    current: Mapping[str, str], configs: Sequence[AlterableConfig], *, kind: str, incremental: bool
) -> dict[str, str | None]:
    """The resource's overrides after the request's operations (not yet validated)."""
    result: dict[str, str | None] = dict(current) if incremental else {}
    for config in configs:
        op = OpType(config.operation)
        if op is OpType.SET:
            result[config.name] = config.value
        elif op is OpType.DELETE:
            result.pop(config.name, None)
        else:
            topic = kind == _TOPIC
            if kind == _GROUP or not is_list_key(config.name, topic=topic):
                # a BROKER resource meets Kafka's broker-side check (prepareIncrementalConfigs)
                # first, a TOPIC or GROUP resource the controller's
                message = (
                    f"Can't {op.name} to key {config.name} because its type is not LIST."
                    if kind != _BROKER
                    else f"Config value {op.name.lower()} is not allowed for config key: {config.name}"
                )
                raise KafkaError(ErrorCode.INVALID_CONFIG, message)
            existing = result.get(config.name)
            items = (
                [item.strip() for item in existing.split(",") if item.strip()]
                if existing is not None
                else default_list_value(config.name, topic=topic)
            )
            given = [item.strip() for item in (config.value or "").split(",") if item.strip()]
            if op is OpType.APPEND:
                items += [item for item in given if item not in items]
            else:
                items = [item for item in items if item not in given]
            result[config.name] = ",".join(items)
    return result
