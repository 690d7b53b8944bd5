"""Prometheus metrics of the replica fetchers, named after Kafka's fetcher MBeans.

The only module of the package that imports prometheus_client. One :class:`FetcherMetrics` is made
per registry (per follower process); each fetcher gets a :class:`FetcherStats` view bound to its
client id (Kafka's ``ReplicaFetcherThread-<fetcherId>-<sourceBrokerId>``), so fetchers of several
source brokers share the metric families without clashing.

- ``kafka_server_fetcherlagmetrics_consumerlag{client_id,topic,partition}``: the leader's HW minus
  the fetch offset, per partition (Kafka's FetcherLagMetrics ConsumerLag);
- ``kafka_server_fetcherstats_requestspersec_total`` / ``kafka_server_fetcherstats_bytespersec_total``:
  rate() gives Kafka's FetcherStats RequestsPerSec and BytesPerSec;
- ``kafka_server_fetcherstats_requestfailures_total``: whole Fetch requests that failed;
- ``kafka_server_fetcherstats_requestlatency_seconds``: time from sending a Fetch to its response
  (no Kafka equivalent on the follower side; the leader has TotalTimeMs for FetchFollower);
- ``kafka_server_replicafetchermanager_failedpartitionscount{client_id}``: Kafka's
  FailedPartitionsCount, per fetcher here.

Follower processes run with prometheus-client's multiprocess mode (the broker sets
``PROMETHEUS_MULTIPROC_DIR`` for them and merges their files into its own ``/metrics``). Counters and
histograms then add up across processes and restarts; the gauges are ``live*`` so that a dead
process's values vanish when the broker marks it dead. Label sets cannot be removed from the shared
files, so a partition that leaves a fetcher gets its lag set to 0 instead (the broker's collector
also drops lag series of partitions no longer assigned to that fetcher).
"""

from __future__ import annotations

import os

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

CONSUMER_LAG = "kafka_server_fetcherlagmetrics_consumerlag"
REQUESTS = "kafka_server_fetcherstats_requestspersec"
BYTES = "kafka_server_fetcherstats_bytespersec"
REQUEST_FAILURES = "kafka_server_fetcherstats_requestfailures"
REQUEST_LATENCY = "kafka_server_fetcherstats_requestlatency_seconds"
FAILED_PARTITIONS = "kafka_server_replicafetchermanager_failedpartitionscount"

_LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
"""A follower fetch waits up to replica.fetch.wait.max.ms (500 ms) at the leader when idle."""
MULTIPROCESS_DIR_ENV = "PROMETHEUS_MULTIPROC_DIR"


FOLLOWER_REPLICATION_BYTE_RATE = "kafka_server_followerreplication_byte_rate"


def multiprocess_mode() -> bool:
    """True when prometheus-client writes values to the shared files of a multiprocess directory."""
    return bool(os.environ.get(MULTIPROCESS_DIR_ENV))


class FetcherMetrics:
    """The metric families of every fetcher of a process, registered on the registry passed in."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.multiprocess = multiprocess_mode()
        self.lag = Gauge(
            CONSUMER_LAG,
            "Leader high watermark minus the follower's fetch offset, per partition.",
            ["client_id", "topic", "partition"],
            registry=registry,
            multiprocess_mode="livemostrecent",
        )
        self.requests = Counter(REQUESTS, "Fetch requests sent.", ["client_id"], registry=registry)
        self.bytes = Counter(BYTES, "Record bytes received.", ["client_id"], registry=registry)
        self.failures = Counter(
            REQUEST_FAILURES, "Fetch requests that failed as a whole.", ["client_id"], registry=registry
        )
        self.latency = Histogram(
            REQUEST_LATENCY,
            "Seconds from sending a Fetch to receiving its response.",
            ["client_id"],
            buckets=_LATENCY_BUCKETS,
            registry=registry,
        )
        self.follower_replication_byte_rate = Gauge(
            FOLLOWER_REPLICATION_BYTE_RATE,
            "Bytes per second this broker's followers fetched for throttled partitions (Kafka's "
            "FollowerReplication byte-rate, KIP-73; the processes' rates summed).",
            registry=registry,
            multiprocess_mode="livesum",
        )
        self.failed_partitions = Gauge(
            FAILED_PARTITIONS,
            "Partitions this fetcher stopped fetching after an unrecoverable error.",
            ["client_id"],
            registry=registry,
            multiprocess_mode="livesum",
        )

    def fetcher(self, client_id: str) -> FetcherStats:
        """The view one fetcher reports through."""
        return FetcherStats(self, client_id)


class FetcherStats:
    """One fetcher's metrics: the families of :class:`FetcherMetrics` with its client id bound."""

    def __init__(self, metrics: FetcherMetrics, client_id: str) -> None:
        self._metrics = metrics
        self._client_id = client_id
        self._requests = metrics.requests.labels(client_id)
        self._bytes = metrics.bytes.labels(client_id)
        self._failures = metrics.failures.labels(client_id)
        self._latency = metrics.latency.labels(client_id)
        self._failed = metrics.failed_partitions.labels(client_id)
        self._lagging: set[tuple[str, int]] = set()

    def request_completed(self, seconds: float, record_bytes: int) -> None:
        self._requests.inc()
        self._latency.observe(seconds)
        self._bytes.inc(record_bytes)

    def request_failed(self, seconds: float) -> None:
        self._requests.inc()
        self._failures.inc()
        self._latency.observe(seconds)

    def set_lag(self, tp: tuple[str, int], lag: int) -> None:
        self._metrics.lag.labels(self._client_id, tp[0], str(tp[1])).set(lag)
        self._lagging.add(tp)

    def remove_partition(self, tp: tuple[str, int]) -> None:
        """Drop the partition's lag series (it left this fetcher); in multiprocess mode, zero it."""
        if tp not in self._lagging:
            return
        self._lagging.discard(tp)
        labels = (self._client_id, tp[0], str(tp[1]))
        if self._metrics.multiprocess:
            self._metrics.lag.labels(*labels).set(0)  # the shared files cannot forget a series
        else:
            self._metrics.lag.remove(*labels)

    def set_failed_partitions(self, count: int) -> None:
        self._failed.set(count)
