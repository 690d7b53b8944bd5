"""Broker configuration: Kafka's keys read from server.properties, validated once at start-up.

:mod:`~broker.config.properties` reads the Java properties format, :mod:`~broker.config.definitions`
declares every key, :mod:`~broker.config.broker_config` builds the typed :class:`BrokerConfig`, and
:mod:`~broker.config.topic_config` handles topic-level keys (CreateTopics, DescribeConfigs, LogConfig).
"""

from broker.config.broker_config import BrokerConfig, Listener, QuorumVoter, load_config
from broker.config.definitions import (
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
from broker.config.properties import PropertiesError, parse_properties
from broker.config.topic_config import (
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
