"""Kafka's replication quota byte-rate gauge of the leader side (``kafka.server:type=LeaderReplication,
name=byte-rate``, here ``kafka_server_leaderreplication_byte_rate``): the rate the leader's
throttled replication currently runs at, in bytes per second."""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CollectorRegistry, Gauge

__all__ = ["ReplicationQuotaMetrics"]


class ReplicationQuotaMetrics:
    def __init__(self, registry: CollectorRegistry, leader_rate: Callable[[], float]) -> None:
        self.leader_byte_rate = Gauge(
            "kafka_server_leaderreplication_byte_rate",
            "Bytes per second of throttled partitions this broker's leaders sent to followers "
            "(replication quota, KIP-73).",
            registry=registry,
        )
        self.leader_byte_rate.set_function(leader_rate)
