"""Client quota throttling, per quota type and client id (Kafka's ``kafka.server:type=Produce`` /
``type=Fetch`` ``throttle-time`` per user and client id, here as totals Prometheus can rate):
``kafka_server_quota_throttled_requests_total`` and ``kafka_server_quota_throttle_time_ms_total``
with labels ``quota`` (Produce, Fetch, Request, ControllerMutation), ``user`` and ``client_id``.

The request quota's own sensor, Kafka's ``kafka.server:type=Request`` ``request-time`` (a
client's request thread time as a percentage of one thread), is
``kafka_server_request_request_time_total`` by ``user`` and ``client_id``: the percent-seconds
of event-loop time the client's requests took, so that its ``rate()`` is Kafka's request-time. It
is recorded while any client quota exists (Kafka records it while quotas are enabled).

Client ids are chosen by clients, so a label set not throttled for an hour is removed, as Kafka
expires a client's quota sensors after an hour without a record (looked for every 30 s): a broker
throttling ever new client ids keeps a bounded number of series.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter

__all__ = ["INACTIVE_SERIES_EXPIRATION_S", "ClientQuotaMetrics"]

INACTIVE_SERIES_EXPIRATION_S = 3600.0
"""Kafka's ClientQuotaManager.InactiveSensorExpirationTimeSeconds."""
_EXPIRY_INTERVAL_S = 30.0

_Labels = tuple[str, str, str]


class ClientQuotaMetrics:
    def __init__(self, registry: CollectorRegistry, clock: Callable[[], float] = time.monotonic) -> None:
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
        self.request_time = Counter(
            "kafka_server_request_request_time",
            "Request thread (event loop) time of a client's requests, in percent of one thread "
            "times seconds: its rate is Kafka's type=Request request-time",
            ["user", "client_id"],
            registry=registry,
        )
        self._clock = clock
        self._last_seen: dict[_Labels, float] = {}
        self._request_seen: dict[tuple[str, str], float] = {}
        self._next_expiry = clock() + _EXPIRY_INTERVAL_S

    def record(self, quota: str, user: str, client_id: str, throttle_ms: int) -> None:
        now = self._clock()
        labels = (quota, user, client_id)
        self.throttled.labels(*labels).inc()
        self.throttle_time.labels(*labels).inc(throttle_ms)
        self._last_seen[labels] = now
        if now >= self._next_expiry:
            self._expire(now)

    def record_request_time(self, user: str, client_id: str, percent_seconds: float) -> None:
        now = self._clock()
        self.request_time.labels(user, client_id).inc(percent_seconds)
        self._request_seen[(user, client_id)] = now
        if now >= self._next_expiry:
            self._expire(now)

    def _expire(self, now: float) -> None:
        self._next_expiry = now + _EXPIRY_INTERVAL_S
        idle_clients = [
            labels for labels, seen in self._request_seen.items() if now - seen > INACTIVE_SERIES_EXPIRATION_S
        ]
        for user_client in idle_clients:
            del self._request_seen[user_client]
            self.request_time.remove(*user_client)
        idle = [
            labels for labels, seen in self._last_seen.items() if now - seen > INACTIVE_SERIES_EXPIRATION_S
        ]
        for labels in idle:
            del self._last_seen[labels]
            self.throttled.remove(*labels)
            self.throttle_time.remove(*labels)
