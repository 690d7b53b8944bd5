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
    """One node's request and connection metrics, shared by all its listeners (the controller's
    too, as Kafka's request metrics are one set per process), each series labelled with the
    listener that served it: ``sum by (request)`` gives Kafka's figures, and a broker's client
    traffic is told apart from its controller listener's Raft fetches and heartbeats."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.requests = Counter(
            "kafka_network_requestmetrics_requests",
            "Requests handled, by API and listener",
            ["request", "listener"],
            registry=registry,
        )
        self.latency = Histogram(
            "kafka_network_requestmetrics_totaltime_seconds",
            "Time from a request's arrival to its response being queued, by API and listener",
            ["request", "listener"],
            buckets=_LATENCY_BUCKETS,
            registry=registry,
        )
        self.errors = Counter(
            "kafka_network_requestmetrics_errors",
            "Responses carrying a top-level error or connections closed on a bad request, by API, "
            "error and listener",
            ["request", "error", "listener"],
            registry=registry,
        )
        self.bytes_in = Counter(
            "kafka_server_brokertopicmetrics_bytesin", "Request bytes received", registry=registry
        )
        self.bytes_out = Counter(
            "kafka_server_brokertopicmetrics_bytesout", "Response bytes sent", registry=registry
        )
        self.connections = Gauge(
            "kafka_server_socketservermetrics_connection_count",
            "Open connections, by listener",
            ["listener"],
            registry=registry,
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
            "SASL exchanges, TLS handshakes and TLS client certificates refused, by listener",
            ["listener"],
            registry=registry,
        )

    def authenticated(self, listener: str, succeeded: bool) -> None:
        counter = self.successful_authentication if succeeded else self.failed_authentication
        counter.labels(listener).inc()

    def of_listener(self, listener: str) -> ListenerRequestMetrics:
        """The request metrics of one listener's dispatcher."""
        return ListenerRequestMetrics(self, listener)


class ListenerRequestMetrics:
    """What one listener's dispatcher records: the node's metrics with the listener's label."""

    def __init__(self, metrics: RequestMetrics, listener: str) -> None:
        self._metrics = metrics
        self._listener = listener
        self._series: dict[int, tuple[Counter, Histogram]] = {}
        """Each API's labelled children, looked up once (a request then costs no label lookup)."""

    def observe(self, api_key: int, seconds: float, bytes_in: int, bytes_out: int) -> None:
        metrics = self._metrics
        series = self._series.get(api_key)
        if series is None:
            name = api_name(api_key)
            listener = self._listener
            series = metrics.requests.labels(name, listener), metrics.latency.labels(name, listener)
            self._series[api_key] = series
        requests, latency = series
        requests.inc()
        latency.observe(seconds)
        metrics.bytes_in.inc(bytes_in)
        metrics.bytes_out.inc(bytes_out)

    def error(self, request: str, error: str) -> None:
        self._metrics.errors.labels(request, error, self._listener).inc()
