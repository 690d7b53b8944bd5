"""Prometheus metrics of the fetch session cache, named after Kafka's FetchSessionCache MBeans.

The only module of the package that imports prometheus_client. The cache reports deltas as they
happen (sessions and partitions are totals over all shards, as Kafka's gauges are); evictions are a
counter so that ``rate()`` gives Kafka's IncrementalFetchSessionEvictionsPerSec. Operators watch it
because clients that ask for a new session on every fetch (e.g. @platformatic/kafka) make evictions
part of normal traffic.

Kafka has no gauge of follower sessions; kipling adds two (``kipling_`` prefix, not Kafka's names)
because a replicated cluster's health shows there: each follower fetcher holds one privileged
session with every leader it fetches from, so on a healthy cluster a leader counts one per
(follower broker, fetcher) pair with partitions it leads, and these are the sessions eviction
protects.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge

NUM_SESSIONS = "kafka_server_fetchsessioncache_numincrementalfetchsessions"
NUM_PARTITIONS_CACHED = "kafka_server_fetchsessioncache_numincrementalfetchpartitionscached"
EVICTIONS = "kafka_server_fetchsessioncache_incrementalfetchsessionevictions"
"""Exposed as ``..._total`` (prometheus_client adds the counter suffix)."""
NUM_PRIVILEGED_SESSIONS = "kipling_fetchsessioncache_privilegedsessions"
NUM_PRIVILEGED_PARTITIONS_CACHED = "kipling_fetchsessioncache_privilegedpartitionscached"


class FetchSessionCacheMetrics:
    """Gauges and counter of one cache, registered on the registry passed in."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self._sessions = Gauge(
            NUM_SESSIONS, "Number of incremental fetch sessions cached.", registry=registry
        )
        self._partitions = Gauge(
            NUM_PARTITIONS_CACHED,
            "Number of partitions held by cached fetch sessions (as of each session's last use).",
            registry=registry,
        )
        self._evictions = Counter(
            EVICTIONS, "Fetch sessions evicted to make room for new ones.", registry=registry
        )
        self._privileged_sessions = Gauge(
            NUM_PRIVILEGED_SESSIONS,
            "Cached fetch sessions of followers (privileged); included in the total.",
            registry=registry,
        )
        self._privileged_partitions = Gauge(
            NUM_PRIVILEGED_PARTITIONS_CACHED,
            "Partitions held by followers' (privileged) sessions; included in the total.",
            registry=registry,
        )

    def sessions_changed(self, delta: int, privileged: bool = False) -> None:
        self._sessions.inc(delta)
        if privileged:
            self._privileged_sessions.inc(delta)

    def partitions_changed(self, delta: int, privileged: bool = False) -> None:
        self._partitions.inc(delta)
        if privileged:
            self._privileged_partitions.inc(delta)

    def session_evicted(self) -> None:
        self._evictions.inc()
