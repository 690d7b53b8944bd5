"""The request memory pool's gauges, named after Kafka's SocketServer MBeans.

``kafka.network:type=SocketServer,name=MemoryPoolAvailable`` and ``...MemoryPoolUsed`` become
``kafka_network_socketserver_memorypoolavailable`` and ``kafka_network_socketserver_memorypoolused``
(bytes), read from the pool when Prometheus scrapes. An unbounded pool reports +Inf available
(Kafka's reports Long.MAX_VALUE). Connections the broker closes, over a connection limit or a
request too slow in arriving among them, are counted by reason in RequestMetrics' connection-close
counter.
"""

from __future__ import annotations

from typing import Protocol

from prometheus_client import CollectorRegistry, Gauge


class MemoryPoolView(Protocol):
    @property
    def used(self) -> int: ...

    @property
    def available(self) -> float: ...


class SocketServerMetrics:
    def __init__(self, registry: CollectorRegistry, pool: MemoryPoolView) -> None:
        self.pool_available = Gauge(
            "kafka_network_socketserver_memorypoolavailable",
            "Bytes left in the request memory pool (queued.max.request.bytes); negative while one "
            "request overdraws it",
            registry=registry,
        )
        self.pool_available.set_function(lambda: pool.available)
        self.pool_used = Gauge(
            "kafka_network_socketserver_memorypoolused",
            "Bytes held by requests received and not yet answered, partial ones included",
            registry=registry,
        )
        self.pool_used.set_function(lambda: pool.used)
