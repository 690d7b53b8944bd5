"""Client quota throttling, per quota type and client id (Kafka's ``kafka.server:type=Produce`` /
``type=Fetch`` ``throttle-time`` per user and client id, here as totals Prometheus can rate):
``kafka_server_quota_throttled_requests_total`` and ``kafka_server_quota_throttle_time_ms_total``
with labels ``quota`` (Produce, Fetch), ``user`` and ``client_id``."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter

__all__ = ["ClientQuotaMetrics"]


class ClientQuotaMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.throttled = Counter(
            "kafka_server_quota_throttled_requests",
            "Requests a client quota throttled, by quota type, user and client id",
            ["quota", "user", "client_id"],
            registry=registry,
        )
        self.throttle_time = Counter(
            "kafka_server_quota_throttle_time_ms",
            "Milliseconds clients were throttled for, by quota type, user and client id",
            ["quota", "user", "client_id"],
            registry=registry,
        )

    def record(self, quota: str, user: str, client_id: str, throttle_ms: int) -> None:
        self.throttled.labels(quota, user, client_id).inc()
        self.throttle_time.labels(quota, user, client_id).inc(throttle_ms)
