"""Dynamic configs on a broker: the effective broker config, and applying changes without a restart.

The controller writes config changes as ConfigRecords (IncrementalAlterConfigs, AlterConfigs); every
broker replays them into its metadata image like any other record. :class:`DynamicBrokerConfig` is
this broker's effective configuration read from that image (the precedence rule itself lives in
:mod:`server_common.config.dynamic`): topics' LogConfigs and min.insync.replicas, and any
broker-level value such as the replication throttle rates, come from it. Because the image is
loaded (local copy, then the controller's log) before the broker opens any partition, dynamic
values apply from start-up on, and they survive restarts with the metadata log and its snapshots.
The logs already open when the local copy is loaded (all of them: the LogManager opens them first)
get their topic's configuration at once (:func:`reconfigure_loaded_logs`).

:class:`DynamicConfigPublisher` reacts to each metadata delta after the replica transitions: for
the topics whose overrides changed (every topic when this broker's or the cluster's dynamic
defaults changed) the partitions led here get their new LogConfig and min.insync.replicas at once,
and the follower processes get the new LogConfig of every log they own (``update_log_configs``).
A whole image published without a delta (a metadata snapshot installed while running) is checked
topic by topic (:meth:`DynamicConfigPublisher.apply_image`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable

import structlog

from broker.replication.followers import FollowerSupervisor
from broker.replication.replica_manager import ReplicaManager
from metadata.image import MetadataDelta, MetadataImage
from metadata.topics import TopicState
from server_common.config import BrokerConfig, BrokerConfigLayers, to_log_config
from server_common.config.dynamic import CLUSTER_DEFAULT
from storage.config import LogConfig
from storage.log import PartitionLog

__all__ = ["DynamicBrokerConfig", "DynamicConfigPublisher", "reconfigure_loaded_logs", "then"]

_log = structlog.get_logger("kipling.dynamic_config")

Publisher = Callable[[MetadataDelta, MetadataImage], Awaitable[None]]


class DynamicBrokerConfig:
    """This broker's configuration as of its metadata image: static keys with dynamic overrides on top."""

    def __init__(self, static: BrokerConfig, image: MetadataImage) -> None:
        self._static = static
        self._image = image
        self._cached: tuple[object, BrokerConfigLayers] | None = None

    @property
    def static(self) -> BrokerConfig:
        return self._static

    def layers(self) -> BrokerConfigLayers:
        """The current layers (rebuilt only when the dynamic overrides changed)."""
        default = self._image.broker_configs(CLUSTER_DEFAULT)
        own = self._image.broker_configs(str(self._static.node_id))
        key = (tuple(sorted(default.items())), tuple(sorted(own.items())))
        if self._cached is None or self._cached[0] != key:
            self._cached = (key, BrokerConfigLayers(self._static, default, own))
        return self._cached[1]

    def effective(self) -> BrokerConfig:
        """The broker config with the dynamic values of static keys applied."""
        return self.layers().effective

    def value(self, key: str) -> object:
        """The effective typed value of one broker key, dynamic-only keys included: e.g.
        ``leader.replication.throttled.rate`` (an int; Kafka's Long.MAX_VALUE when unset)."""
        return self.layers().value(key)

    def topic_log_config(self, topic: TopicState) -> LogConfig:
        """The LogConfig of a topic's partitions: its overrides over the effective broker defaults."""
        return to_log_config(topic.configs, self.layers())


class DynamicConfigPublisher:
    """Applies config changes of each metadata delta to the partitions led and followed here."""

    def __init__(
        self, config: DynamicBrokerConfig, replicas: ReplicaManager, supervisor: FollowerSupervisor
    ) -> None:
        self._config = config
        self._replicas = replicas
        self._supervisor = supervisor
        self._own = {CLUSTER_DEFAULT, str(config.static.node_id)}

    async def apply(self, delta: MetadataDelta, image: MetadataImage) -> None:
        if self._own.intersection(delta.broker_configs_changed):
            topics = image.all()
        elif delta.topic_configs_changed:
            topics = [t for name in delta.topic_configs_changed if (t := image.get(name)) is not None]
        else:
            return
        await self._reconfigure(topics, sorted(self._own.intersection(delta.broker_configs_changed)))

    async def apply_image(self, image: MetadataImage) -> None:
        """A whole image published (a metadata snapshot installed over a running broker): it has no
        delta, so every topic's config is checked again; only what differs is changed or sent."""
        await self._reconfigure(image.all(), sorted(self._own))

    async def _reconfigure(self, topics: list[TopicState], broker_defaults: list[str]) -> None:
        led = self._replicas.reconfigure_topics(topics)
        by_name = {topic.name: topic for topic in topics}
        followed: dict[tuple[str, int], LogConfig] = {}
        configs: dict[str, LogConfig] = {}
        for tp in self._supervisor.assignments:
            topic = by_name.get(tp[0])
            if topic is None:
                continue
            if topic.name not in configs:
                try:
                    configs[topic.name] = self._config.topic_log_config(topic)
                except ValueError:
                    _log.exception("invalid topic configuration: followers keep theirs", topic=topic.name)
                    continue
            followed[tp] = configs[topic.name]
        await self._supervisor.update_log_configs(followed)
        _log.info(
            "dynamic configs applied",
            topics=len(topics),
            led_partitions=led,
            followed_partitions=len(followed),
            broker_defaults=broker_defaults,
        )


def reconfigure_loaded_logs(
    logs: Iterable[PartitionLog], config: DynamicBrokerConfig, image: MetadataImage
) -> int:
    """Give the logs opened at start-up their topic's configuration once ``image`` holds the local
    metadata copy; returns how many changed.

    The LogManager opens every log before any metadata is read (the metadata log is one of them),
    so each log starts with the static broker defaults; without this, a log kept its static
    settings (index sizes of its next segment, retention once retention runs) until this broker led
    or followed its partition. A log of a topic the image does not know (the metadata log, a
    deleted topic) or of an older topic of the same name keeps its configuration.
    """
    changed = 0
    for log in logs:
        topic = image.get(log.topic)
        if topic is None or (log.topic_id is not None and log.topic_id != topic.topic_id):
            continue
        try:
            new = config.topic_log_config(topic)
        except ValueError:
            _log.exception("invalid topic configuration: the log keeps its own", topic=topic.name)
            continue
        if new != log.config:
            log.reconfigure(new)
            changed += 1
    if changed:
        _log.info("dynamic configs applied to the logs loaded at start-up", logs=changed)
    return changed


def then(first: Publisher, second: Publisher) -> Publisher:
    """A publisher that runs ``first`` and then ``second`` for each delta."""

    async def publish(delta: MetadataDelta, image: MetadataImage) -> None:
        await first(delta, image)
        await second(delta, image)

    return publish
