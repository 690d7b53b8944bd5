"""Replication quotas on the broker: their effective settings from the metadata image, the leader
side in the fetch path, and the follower side pushed to the follower processes.

The settings are plain config keys, read from the image by the functions below, so they work the
same whether they were set at topic creation, in a ConfigRecord altered dynamically
(IncrementalAlterConfigs), or not at all:

* ``leader.replication.throttled.rate`` / ``follower.replication.throttled.rate``: this broker's
  override, else the cluster default (the BROKER resource ``""``), else the static config (when
  server.properties sets it), else Long.MAX (no throttle);
* ``leader.replication.throttled.replicas`` / ``follower.replication.throttled.replicas``: each
  topic's list, the partitions named with this broker's id (or ``*``).

:class:`LeaderReplicationQuota` is Kafka's leader ReplicationQuotaManager as the fetch path uses it
(``shouldLeaderThrottle``: a throttled partition's replica that is not in the ISR gets no records
while the rate is over the bound; the bytes of throttled partitions sent to followers are recorded).
It refreshes its settings from the image whenever the image moved on. :class:`FollowerQuotaPublisher`
sends the follower side to the follower processes after each metadata delta that changes it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping

import structlog

from client.replication_quota import UNBOUNDED, ReplicationQuota, ThrottledPartitions, throttled_partitions
from metadata.image import MetadataDelta, MetadataImage

__all__ = [
    "FOLLOWER_THROTTLED_RATE",
    "FOLLOWER_THROTTLED_REPLICAS",
    "LEADER_THROTTLED_RATE",
    "LEADER_THROTTLED_REPLICAS",
    "FollowerQuotaPublisher",
    "LeaderReplicationQuota",
    "throttled_rate",
    "throttled_replicas",
]

LEADER_THROTTLED_RATE = "leader.replication.throttled.rate"
FOLLOWER_THROTTLED_RATE = "follower.replication.throttled.rate"
LEADER_THROTTLED_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_THROTTLED_REPLICAS = "follower.replication.throttled.replicas"
CLUSTER_DEFAULT = ""

_log = structlog.get_logger("kipling.replication_quota")


def throttled_rate(
    image: MetadataImage, broker_id: int, key: str, static: Mapping[str, str] | None = None
) -> int:
    """The effective bytes/s bound of ``key`` on ``broker_id`` (UNBOUNDED when none is set)."""
    for layer in (image.broker_configs(str(broker_id)), image.broker_configs(CLUSTER_DEFAULT), static or {}):
        value = layer.get(key)
        if value is not None:
            try:
                return max(0, int(value))
            except ValueError:
                continue
    return UNBOUNDED


def throttled_replicas(image: MetadataImage, broker_id: int, key: str) -> dict[str, frozenset[int] | str]:
    """Each topic's partitions throttled on ``broker_id`` by the topic config ``key``."""
    out: dict[str, frozenset[int] | str] = {}
    for topic in image.all():
        partitions = throttled_partitions(topic.configs.get(key), broker_id)
        if partitions:
            out[topic.name] = partitions
    return out


class LeaderReplicationQuota:
    """The leader side of the replication quota, for the fetch path."""

    def __init__(
        self,
        image: MetadataImage,
        broker_id: int,
        now_ms: Callable[[], int],
        static: Mapping[str, str] | None = None,
    ) -> None:
        self._image = image
        self._broker_id = broker_id
        self._static = dict(static or {})
        self.quota = ReplicationQuota(now_ms)
        self._offset = -2

    def _refresh(self) -> None:
        if self._image.offset == self._offset:
            return
        self._offset = self._image.offset
        self.quota.update(
            throttled_rate(self._image, self._broker_id, LEADER_THROTTLED_RATE, self._static),
            throttled_replicas(self._image, self._broker_id, LEADER_THROTTLED_REPLICAS),
        )

    def is_throttled(self, topic: str, partition: int) -> bool:
        self._refresh()
        return self.quota.is_throttled(topic, partition)

    def should_throttle(self, topic: str, partition: int, replica_in_sync: bool) -> bool:
        """Kafka's shouldLeaderThrottle: no records for an out-of-sync replica of a throttled
        partition while the leader's rate is over the bound."""
        if replica_in_sync or not self.is_throttled(topic, partition):
            return False
        return self.quota.is_quota_exceeded()

    def record(self, size: int) -> None:
        self.quota.record(size)

    def rate(self) -> float:
        return self.quota.rate()


FollowerQuotaSender = Callable[[int, ThrottledPartitions], Awaitable[None]]
"""(rate, throttled partitions): FollowerSupervisor.update_replication_quota."""


class FollowerQuotaPublisher:
    """After each metadata delta, sends the follower side of the quota to the follower processes
    when it changed (and once at start, from the initial image)."""

    def __init__(
        self, broker_id: int, send: FollowerQuotaSender, static: Mapping[str, str] | None = None
    ) -> None:
        self._broker_id = broker_id
        self._send = send
        self._static = dict(static or {})
        self._last: tuple[int, dict[str, frozenset[int] | str]] | None = None

    async def apply(self, delta: MetadataDelta, image: MetadataImage) -> None:
        relevant = (
            self._last is None
            or delta.topic_configs_changed
            or delta.broker_configs_changed
            or delta.topics_created
            or delta.topics_deleted
        )
        if relevant:
            await self.apply_image(image)

    async def apply_image(self, image: MetadataImage) -> None:
        settings = (
            throttled_rate(image, self._broker_id, FOLLOWER_THROTTLED_RATE, self._static),
            throttled_replicas(image, self._broker_id, FOLLOWER_THROTTLED_REPLICAS),
        )
        if settings == self._last:
            return
        try:
            await self._send(*settings)
        except Exception:  # a follower process down gets the settings when it is launched again
            _log.exception("could not send the follower replication quota")
            return
        self._last = settings
        _log.info("follower replication quota", rate=settings[0], throttled=sorted(settings[1]))
