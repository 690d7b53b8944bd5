"""DescribeConfigs (32): the configuration of topics and of this broker, as Kafka's ConfigHelper.

Resources, each answered on its own (an error in one never fails the others):
- TOPIC (2): every topic-level key with its value and source: an override is DYNAMIC_TOPIC_CONFIG
  (KRaft's source for topic overrides), else the broker key behind it, which may itself be a
  dynamic per-broker or cluster-default value; synonyms list the override, then the broker keys in
  Kafka's order (DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG, STATIC_BROKER_CONFIG,
  DEFAULT_CONFIG) from the first broker key's own first entry on, as Kafka drops the ones before
  it (no ``log.retention.ms`` set: ``retention.ms`` has no broker synonyms and DEFAULT_CONFIG).
  A broker key likewise lists its synonyms from its own first entry on. An illegal name is
  INVALID_TOPIC_EXCEPTION, a missing topic UNKNOWN_TOPIC_OR_PARTITION.
- BROKER (4): the name is a broker id. This node's id gives every broker key: the dynamic ones
  (server_common.config.DYNAMIC_BROKER_KEYS) are writable and show where their value comes from,
  the others are read-only. The empty name lists the cluster-wide dynamic defaults, as in Kafka
  (``kafka-configs --entity-default``). Another id, or a name that is not a number, is
  INVALID_REQUEST with Kafka's message.
- GROUP (32, Kafka 4.0): the name is a consumer group's id, which need not exist (a group without
  overrides shows the defaults); ``""`` is INVALID_REQUEST. Every group config kipling applies
  (:mod:`server_common.config.group_config`, no ``share.*`` key: kipling has no share groups), INT,
  writable: a group's override is GROUP_CONFIG, else the value of the broker key behind it
  (``group.consumer.session.timeout.ms``) as DEFAULT_CONFIG. Synonyms list the override, then the
  broker key with its own source.
- any other type (BROKER_LOGGER, CLIENT_METRICS, ...): INVALID_REQUEST.

``configuration_keys`` (null = all) filters by name; synonyms are sent only when asked for; v3+
adds each key's type, and its documentation when asked for.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

from broker.handlers.authorization import ALLOW_EVERYTHING, config_resource_refusal
from broker.handlers.base import Handler, RequestContext
from metadata import topic_names
from metadata.authorizer.standard import Authorizer
from metadata.topics import TopicLookup
from protocol.acl_types import AclOperation
from protocol.api_keys import ApiKey
from protocol.data import MessageData
from protocol.error_codes import ErrorCode, KafkaError
from server_common.config import (
    BrokerConfig,
    BrokerConfigLayers,
    ConfigEntry,
    describe_topic_configs,
    layers_of,
)
from server_common.config.group_config import describe_group_configs


class ResourceType(IntEnum):
    """Kafka's ConfigResource.Type codes."""

    UNKNOWN = 0
    TOPIC = 2
    BROKER = 4
    BROKER_LOGGER = 8
    CLIENT_METRICS = 16
    GROUP = 32


class DescribeConfigsHandler(Handler):
    api_key = ApiKey.DESCRIBE_CONFIGS
    min_version = 1
    max_version = 4

    def __init__(
        self, topics: TopicLookup, config: BrokerConfig, authorizer: Authorizer = ALLOW_EVERYTHING
    ) -> None:
        self._topics = topics
        self._config = config
        self._authorizer = authorizer
        self._describers: dict[int, Callable[[str], list[ConfigEntry]]] = {
            ResourceType.TOPIC: self._topic_entries,
            ResourceType.BROKER: self._broker_entries,
            ResourceType.GROUP: self._group_entries,
        }

    async def handle(self, ctx: RequestContext, request: MessageData) -> Any:
        options = _Options(
            synonyms=request.include_synonyms,
            documentation=ctx.api_version >= 3 and request.include_documentation,
        )
        results = []
        for resource in request.resources:
            refusal = config_resource_refusal(
                self._authorizer,
                ctx,
                AclOperation.DESCRIBE_CONFIGS,
                resource.resource_type,
                resource.resource_name,
            )
            if refusal is not None:  # Kafka's ConfigHelper: the error with its default message, no configs
                results.append(_error_result(resource, refusal, refusal.description))
            else:
                results.append(self._describe(resource, options))
        return {"throttle_time_ms": 0, "results": results}

    def error_response(self, ctx: RequestContext, request: MessageData | None, code: ErrorCode) -> Any:
        """Every resource of the request carries ``code`` (DescribeConfigs has no top-level error)."""
        resources = request.resources if request is not None else []
        return {"throttle_time_ms": 0, "results": [_error_result(r, code, None) for r in resources]}

    def _describe(self, resource: MessageData, options: _Options) -> dict[str, Any]:
        describer = self._describers.get(resource.resource_type)
        try:
            if describer is None:
                raise KafkaError(
                    ErrorCode.INVALID_REQUEST, f"Unsupported resource type: {_type_name(resource)}"
                )
            entries = describer(resource.resource_name)
        except KafkaError as exc:
            return _error_result(resource, exc.code, exc.message)
        wanted = resource.configuration_keys
        if wanted is not None:
            keys = set(wanted)
            entries = [entry for entry in entries if entry.name in keys]
        return {
            "error_code": int(ErrorCode.NONE),
            "error_message": None,
            "resource_type": resource.resource_type,
            "resource_name": resource.resource_name,
            "configs": [options.encode(entry) for entry in entries],
        }

    def _topic_entries(self, name: str) -> list[ConfigEntry]:
        topic_names.validate(name)
        topic = self._topics.get(name)
        if topic is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {name} does not exist.")
        return describe_topic_configs(topic.configs, self._layers())

    def _layers(self) -> BrokerConfigLayers:
        """This broker's config with the dynamic overrides its metadata image holds."""
        broker_configs = getattr(self._topics, "broker_configs", None)
        if broker_configs is None:  # a lookup without configs (tests): the static config alone
            return BrokerConfigLayers(self._config)
        names = ("", str(self._config.node_id))
        return layers_of(self._config, {name: broker_configs(name) for name in names}, self._config.node_id)

    def _group_entries(self, name: str) -> list[ConfigEntry]:
        if name == "":
            raise KafkaError(ErrorCode.INVALID_REQUEST, "Group name must not be empty")
        group_configs = getattr(self._topics, "group_configs", None)
        overrides: dict[str, str] = group_configs(name) if group_configs is not None else {}
        return describe_group_configs(overrides, self._layers())

    def _broker_entries(self, name: str) -> list[ConfigEntry]:
        if name == "":
            return self._layers().describe_cluster_defaults()
        try:
            broker_id = int(name)
        except ValueError:
            raise KafkaError(
                ErrorCode.INVALID_REQUEST, f"Broker id must be an integer, but it is: {name}"
            ) from None
        if broker_id != self._config.node_id:
            raise KafkaError(
                ErrorCode.INVALID_REQUEST,
                f"Unexpected broker id, expected {self._config.node_id} or empty string, but received {name}",
            )
        return self._layers().describe()


@dataclass(frozen=True)
class _Options:
    """What the request asked to include for each config entry."""

    synonyms: bool
    documentation: bool

    def encode(self, entry: ConfigEntry) -> dict[str, Any]:
        return {
            "name": entry.name,
            "value": None if entry.is_sensitive else entry.value,
            "read_only": entry.read_only,
            "config_source": entry.source.code,
            "is_sensitive": entry.is_sensitive,
            "synonyms": [
                {"name": s.name, "value": None if entry.is_sensitive else s.value, "source": s.source.code}
                for s in entry.synonyms
            ]
            if self.synonyms
            else [],
            "config_type": int(entry.type),
            "documentation": entry.doc if self.documentation else None,
        }


def _error_result(resource: MessageData, code: ErrorCode, message: str | None) -> dict[str, Any]:
    return {
        "error_code": int(code),
        "error_message": message,
        "resource_type": resource.resource_type,
        "resource_name": resource.resource_name,
        "configs": [],
    }


def _type_name(resource: MessageData) -> str:
    try:
        return ResourceType(resource.resource_type).name
    except ValueError:
        return str(resource.resource_type)
