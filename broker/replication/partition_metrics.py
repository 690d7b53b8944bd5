"""Per-partition log gauges, read at scrape time.

A collector rather than one gauge child per partition: values are taken from the live
partitions when Prometheus scrapes, so the append path updates nothing and deleted partitions
disappear from the output by themselves.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from prometheus_client import CollectorRegistry
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from broker.replication.partition import Partition


class PartitionLogCollector(Collector):
    """kafka_log_log_{logendoffset,logstartoffset,highwatermark,size}{topic,partition}."""

    def __init__(self, partitions: Callable[[], Iterable[Partition]]) -> None:
        self._partitions = partitions

    def collect(self) -> Iterator[GaugeMetricFamily]:
        labels = ["topic", "partition"]
        end = GaugeMetricFamily("kafka_log_log_logendoffset", "Log end offset", labels=labels)
        start = GaugeMetricFamily("kafka_log_log_logstartoffset", "Log start offset", labels=labels)
        high = GaugeMetricFamily("kafka_log_log_highwatermark", "High watermark", labels=labels)
        size = GaugeMetricFamily("kafka_log_log_size", "Bytes of the partition's segments", labels=labels)
        for partition in self._partitions():
            key = [partition.topic, str(partition.index)]
            end.add_metric(key, partition.log_end_offset)
            start.add_metric(key, partition.log_start_offset)
            high.add_metric(key, partition.high_watermark)
            size.add_metric(key, partition.log.size_in_bytes)
        yield from (end, start, high, size)


def register_partition_metrics(
    registry: CollectorRegistry, partitions: Callable[[], Iterable[Partition]]
) -> None:
    registry.register(PartitionLogCollector(partitions))
