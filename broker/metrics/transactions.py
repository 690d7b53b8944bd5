"""Transaction gauges of the partitions this broker leads, read at scrape time.

Kafka's two ReplicaManager gauges, by their MBean names in Prometheus style:

- ``kafka_server_replicamanager_partitionswithlatetransactionscount``: led partitions whose oldest
  open transaction last wrote more than ``transaction.max.timeout.ms`` + 5 minutes ago (Kafka's
  ``ProducerStateManager.hasLateTransaction``: no coordinator would let it run that long, so it is
  probably hanging; ``kipling transactions find-hanging`` names it and ``abort`` ends it);
- ``kafka_server_replicamanager_produceridcount``: producer ids held by the producer states of the
  partitions led here.

Kafka has no per-partition gauge of open transactions or of the last stable offset; kipling adds
two (``kipling_`` prefix, not Kafka's names; labelled like ``kafka_log_log_*``):

- ``kipling_log_ongoingtransactions{topic,partition}``: transactions open on the partition
  (written to, no marker yet);
- ``kipling_log_laststableoffsetlag{topic,partition}``: high watermark minus last stable offset,
  the records a read_committed consumer cannot read yet although a read_uncommitted one can. A value
  that only grows is a transaction that does not end.

A collector rather than gauges with children, as the per-partition log gauges
(:mod:`broker.replication.partition_metrics`): values come from the live partitions, so appends update
nothing and partitions that are no longer led here disappear from the output.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from prometheus_client import CollectorRegistry
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from broker.replication.partition import Partition

LATE_TRANSACTIONS = "kafka_server_replicamanager_partitionswithlatetransactionscount"
PRODUCER_ID_COUNT = "kafka_server_replicamanager_produceridcount"
ONGOING_TRANSACTIONS = "kipling_log_ongoingtransactions"
LSO_LAG = "kipling_log_laststableoffsetlag"

LATE_TRANSACTION_BUFFER_MS = 5 * 60 * 1000
"""Kafka's ProducerStateManager.LATE_TRANSACTION_BUFFER_MS: slack past the longest allowed timeout."""


def has_late_transaction(partition: Partition, now_ms: int, max_transaction_timeout_ms: int) -> bool:
    """Kafka's ``hasLateTransaction``: the last write of the producer of the oldest open transaction
    (its first offset is the lowest) is older than the longest timeout a coordinator allows plus
    :data:`LATE_TRANSACTION_BUFFER_MS`."""
    ongoing = partition.producer_state.ongoing_transactions()
    if not ongoing:
        return False
    last_timestamp = ongoing[0].last_timestamp
    return (
        last_timestamp > 0
        and now_ms - last_timestamp > max_transaction_timeout_ms + LATE_TRANSACTION_BUFFER_MS
    )


class TransactionMetricsCollector(Collector):
    """The gauges above, over ``partitions()`` (those led here) at ``now_ms()``."""

    def __init__(
        self,
        partitions: Callable[[], Iterable[Partition]],
        now_ms: Callable[[], int],
        max_transaction_timeout_ms: int,
    ) -> None:
        self._partitions = partitions
        self._now_ms = now_ms
        self._max_timeout_ms = max_transaction_timeout_ms

    def collect(self) -> Iterator[GaugeMetricFamily]:
        labels = ["topic", "partition"]
        late = GaugeMetricFamily(
            LATE_TRANSACTIONS,
            "Partitions led here with an open transaction older than transaction.max.timeout.ms + 5 min.",
        )
        producers = GaugeMetricFamily(
            PRODUCER_ID_COUNT, "Producer ids held by the producer states of the partitions led here."
        )
        ongoing = GaugeMetricFamily(
            ONGOING_TRANSACTIONS, "Transactions open on the partition (no marker yet).", labels=labels
        )
        lag = GaugeMetricFamily(
            LSO_LAG, "High watermark minus last stable offset of the partition.", labels=labels
        )
        now = self._now_ms()
        late_count = producer_count = 0
        for partition in self._partitions():
            if partition.is_offline or not partition.is_leader:
                continue
            key = [partition.topic, str(partition.index)]
            state = partition.producer_state
            open_count = len(state.ongoing_transactions())
            ongoing.add_metric(key, open_count)
            lag.add_metric(key, max(partition.high_watermark - partition.last_stable_offset, 0))
            producer_count += len(state.producers)
            if open_count and has_late_transaction(partition, now, self._max_timeout_ms):
                late_count += 1
        late.add_metric([], late_count)
        producers.add_metric([], producer_count)
        yield from (late, producers, ongoing, lag)


def register_transaction_metrics(
    registry: CollectorRegistry,
    partitions: Callable[[], Iterable[Partition]],
    now_ms: Callable[[], int],
    max_transaction_timeout_ms: int,
) -> TransactionMetricsCollector:
    collector = TransactionMetricsCollector(partitions, now_ms, max_transaction_timeout_ms)
    registry.register(collector)
    return collector


__all__ = [
    "LATE_TRANSACTIONS",
    "LSO_LAG",
    "ONGOING_TRANSACTIONS",
    "PRODUCER_ID_COUNT",
    "TransactionMetricsCollector",
    "has_late_transaction",
    "register_transaction_metrics",
]
