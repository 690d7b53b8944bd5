"""Request-path metrics, named after Kafka's MBeans in Prometheus style.

The only importer of prometheus_client on the request path; the registry is passed in so that
tests read values from a fresh one.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from protocol.api_keys import ApiKey

_LATENCY_BUCKETS = (
    0.0001,
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
)


def api_name(api_key: int) -> str:
    key = ApiKey.lookup(api_key)
    return key.message_name if key is not None else f"Unknown{api_key}"


class RequestMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.requests = Counter(
            "kafka_network_requestmetrics_requests",
            "Requests handled, by API",
            ["request"],
            registry=registry,
        )
        self.latency = Histogram(
            "kafka_network_requestmetrics_totaltime_seconds",
            "Time from a request's arrival to its response being queued, by API",
            ["request"],
            buckets=_LATENCY_BUCKETS,
            registry=registry,
        )
        self.errors = Counter(
            "kafka_network_requestmetrics_errors",
            "Responses carrying a top-level error or connections closed on a bad request, by API and error",
            ["request", "error"],
            registry=registry,
        )
        self.bytes_in = Counter(
            "kafka_server_brokertopicmetrics_bytesin", "Request bytes received", registry=registry
        )
        self.bytes_out = Counter(
            "kafka_server_brokertopicmetrics_bytesout", "Response bytes sent", registry=registry
        )
        self.connections = Gauge(
            "kafka_server_socketservermetrics_connection_count", "Open client connections", registry=registry
        )
        self.connections_closed = Counter(
            "kafka_server_socketservermetrics_connection_close",
            "Connections closed by the broker, by reason",
            ["reason"],
            registry=registry,
        )
        self.successful_authentication = Counter(
            "kafka_server_socketservermetrics_successful_authentication",
            "SASL exchanges and TLS client certificates accepted, by listener",
            ["listener"],
            registry=registry,
        )
        self.failed_authentication = Counter(
            "kafka_server_socketservermetrics_failed_authentication",
            "SASL exchanges and TLS client certificates refused, by listener",
            ["listener"],
            registry=registry,
        )

    def authenticated(self, listener: str, succeeded: bool) -> None:
        counter = self.successful_authentication if succeeded else self.failed_authentication
        counter.labels(listener).inc()

    def observe(self, api_key: int, seconds: float, bytes_in: int, bytes_out: int) -> None:
        name = api_name(api_key)
        self.requests.labels(name).inc()
        self.latency.labels(name).observe(seconds)
        self.bytes_in.inc(bytes_in)
        self.bytes_out.inc(bytes_out)
