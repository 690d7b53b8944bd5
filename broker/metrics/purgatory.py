"""Prometheus metrics of the purgatories and delayed operations, named after Kafka's MBeans.

The only module of the purgatory code that imports prometheus_client. The purgatory sizes are read
from the purgatory when Prometheus scrapes (``Gauge.set_function``), so parking and completing an
operation costs nothing extra; expirations are counters so that ``rate()`` gives Kafka's
ExpiresPerSec meters.
"""

from __future__ import annotations

from collections.abc import Hashable

from prometheus_client import CollectorRegistry, Counter, Gauge

from server_common.purgatory import DelayedOperationPurgatory

PURGATORY_SIZE = "kafka_server_delayedoperationpurgatory_purgatorysize"
NUM_DELAYED_OPERATIONS = "kafka_server_delayedoperationpurgatory_numdelayedoperations"
FETCH_EXPIRES = "kafka_server_delayedfetchmetrics_expires"
"""Exposed as ``..._total``, labelled fetcherType=consumer|follower."""
PRODUCE_EXPIRES = "kafka_server_delayedproducemetrics_expires"
"""Exposed as ``..._total``; counts partitions, as Kafka's aggregate meter does."""


class PurgatoryMetrics:
    """PurgatorySize and NumDelayedOperations per purgatory (label ``delayedOperation``)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self._size = Gauge(
            PURGATORY_SIZE,
            "Watch entries of parked delayed operations (an operation counts once per key).",
            ["delayedOperation"],
            registry=registry,
        )
        self._delayed = Gauge(
            NUM_DELAYED_OPERATIONS,
            "Delayed operations parked, waiting to complete or expire.",
            ["delayedOperation"],
            registry=registry,
        )

    def track(self, purgatory: DelayedOperationPurgatory) -> None:
        """Export ``purgatory``'s counts under its name (e.g. Fetch, Produce)."""
        self._size.labels(purgatory.name).set_function(lambda: purgatory.watched)
        self._delayed.labels(purgatory.name).set_function(lambda: purgatory.num_delayed)


class DelayedFetchMetrics:
    """Kafka's DelayedFetchMetrics: expired fetches, by fetcher type."""

    def __init__(self, registry: CollectorRegistry) -> None:
        expires = Counter(
            FETCH_EXPIRES, "Delayed fetches answered by their deadline.", ["fetcherType"], registry=registry
        )
        self._follower = expires.labels("follower")
        self._consumer = expires.labels("consumer")

    def record_expiration(self, is_follower: bool) -> None:
        """Pass as a DelayedFetch's ``expiration_meter``."""
        (self._follower if is_follower else self._consumer).inc()


class DelayedProduceMetrics:
    """Kafka's DelayedProduceMetrics aggregate meter (per-partition series are left out: cardinality)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self._expires = Counter(
            PRODUCE_EXPIRES, "Partitions of acks=-1 produces that timed out.", registry=registry
        )

    def record_expiration(self, key: Hashable) -> None:
        """Pass as a DelayedProduce's ``expiration_meter``."""
        self._expires.inc()
