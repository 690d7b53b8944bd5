"""Client quotas: the per-client throttle metrics stay bounded.

Client ids are the clients' choice; a series per throttled client id that is never dropped grows
without bound. Kafka expires a client's quota sensors after an hour without a record: the label
sets are now removed after an hour without a throttle.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from broker.metrics.client_quotas import INACTIVE_SERIES_EXPIRATION_S, ClientQuotaMetrics


def _series(registry: CollectorRegistry) -> set[str]:
    return {
        sample.labels["client_id"]
        for metric in registry.collect()
        if metric.name == "kafka_server_quota_throttled_requests"
        for sample in metric.samples
        if sample.name.endswith("_total")
    }


def test_series_of_clients_idle_for_an_hour_are_removed() -> None:
    now = [0.0]
    registry = CollectorRegistry()
    metrics = ClientQuotaMetrics(registry, clock=lambda: now[0])
    for index in range(100):
        metrics.record("Produce", "ANONYMOUS", f"app-{index}", 10)
    metrics.record("Fetch", "ANONYMOUS", "steady", 5)
    assert len(_series(registry)) == 101
    for _ in range(4):  # "steady" keeps being throttled through the hour
        now[0] += INACTIVE_SERIES_EXPIRATION_S / 3
        metrics.record("Fetch", "ANONYMOUS", "steady", 5)
    assert _series(registry) == {"steady"}
    assert (
        registry.get_sample_value(
            "kafka_server_quota_throttle_time_ms_total",
            {"quota": "Fetch", "user": "ANONYMOUS", "client_id": "steady"},
        )
        == 25.0
    )
