"""Broker configuration: Kafka's keys read from server.properties, validated once at start-up.

:mod:`~server_common.config.properties` reads the Java properties format,
:mod:`~server_common.config.definitions` declares every key, :mod:`~server_common.config.broker_config`
builds the typed :class:`BrokerConfig`, :mod:`~server_common.config.topic_config` handles
topic-level keys (CreateTopics, DescribeConfigs, LogConfig), and :mod:`~server_common.config.dynamic`
the dynamic broker configs layered over the static ones (IncrementalAlterConfigs, AlterConfigs)."""

from server_common.config.broker_config import BrokerConfig, Listener, QuorumVoter, load_config
from server_common.config.definitions import (
    DEFINITIONS,
    TOPIC_DEFINITIONS,
    ConfigDef,
    ConfigEntry,
    ConfigError,
    ConfigSource,
    ConfigSynonym,
    ConfigType,
    TopicConfigDef,
)
from server_common.config.dynamic import (
    DYNAMIC_BROKER_KEYS,
    BrokerConfigLayers,
    NotDynamicError,
    layers_of,
    validate_broker_configs,
)
from server_common.config.properties import PropertiesError, parse_properties
from server_common.config.topic_config import (
    describe_topic_configs,
    effective_topic_configs,
    to_log_config,
    validate_topic_configs,
)

__all__ = [
    "DEFINITIONS",
    "DYNAMIC_BROKER_KEYS",
    "TOPIC_DEFINITIONS",
    "BrokerConfig",
    "BrokerConfigLayers",
    "ConfigDef",
    "ConfigEntry",
    "ConfigError",
    "ConfigSource",
    "ConfigSynonym",
    "ConfigType",
    "Listener",
    "NotDynamicError",
    "PropertiesError",
    "QuorumVoter",
    "TopicConfigDef",
    "describe_topic_configs",
    "effective_topic_configs",
    "layers_of",
    "load_config",
    "parse_properties",
    "to_log_config",
    "validate_broker_configs",
    "validate_topic_configs",
]
