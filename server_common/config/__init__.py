"""Broker configuration: Kafka's keys read from server.properties, validated once at start-up.

:mod:`~server_common.config.properties` reads the Java properties format,
:mod:`~server_common.config.definitions` declares every key, :mod:`~server_common.config.broker_config`
builds the typed :class:`BrokerConfig`, and :mod:`~server_common.config.topic_config` handles
topic-level keys (CreateTopics, DescribeConfigs, LogConfig)."""

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
from server_common.config.properties import PropertiesError, parse_properties
from server_common.config.topic_config import (
    describe_topic_configs,
    effective_topic_configs,
    to_log_config,
    validate_topic_configs,
)

__all__ = [
    "DEFINITIONS",
    "TOPIC_DEFINITIONS",
    "BrokerConfig",
    "ConfigDef",
    "ConfigEntry",
    "ConfigError",
    "ConfigSource",
    "ConfigSynonym",
    "ConfigType",
    "Listener",
    "PropertiesError",
    "QuorumVoter",
    "TopicConfigDef",
    "describe_topic_configs",
    "effective_topic_configs",
    "load_config",
    "parse_properties",
    "to_log_config",
    "validate_topic_configs",
]
