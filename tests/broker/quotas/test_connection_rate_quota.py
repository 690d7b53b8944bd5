"""connection_creation_rate (KIP-612) on a fake clock: an IP's connection rate over the byte quotas'
sampled windows, its own entity before the default IP entity, the bounded throttle time, the
throttled connection not counted, and ConnectionQuotas refusing it for the listener's delayed close."""

from __future__ import annotations

import pytest

from broker.quotas.connection_rate import BrokerConnectionRate, IpConnectionRates
from broker.server.connection_quotas import CONNECTION_RATE_THROTTLED, ConnectionQuotas
from metadata.image import QuotaEntity

pytestmark = [pytest.mark.timeout(10)]


def rates(table: dict[QuotaEntity, dict[str, float]], now: list[int]) -> IpConnectionRates:
    return IpConnectionRates(
        lambda entity: table.get(entity, {}),
        any_quota=lambda: bool(table),
        samples=2,
        window_s=1,
        clock_ms=lambda: now[0],
    )


def test_connections_over_the_ip_rate_are_throttled_and_not_counted() -> None:
    now = [0]
    ip_rates = rates({(("ip", "10.0.0.1"),): {"connection_creation_rate": 2.0}}, now)
    # a young rate is measured over one window (2 samples of 1 s): 2 connections are 2/s
    assert [ip_rates.record_and_get_throttle_ms("10.0.0.1") for _ in range(2)] == [0, 0]
    assert ip_rates.record_and_get_throttle_ms("10.0.0.1") == 500  # 3/s: (3 - 2) / 2 x 1 s
    assert ip_rates.record_and_get_throttle_ms("10.0.0.1") == 500  # the refused one was taken back
    assert ip_rates.record_and_get_throttle_ms("10.0.0.2") == 0  # no quota for this address
    now[0] = 2000  # the windows have rolled over
    assert ip_rates.record_and_get_throttle_ms("10.0.0.1") == 0


def test_the_default_ip_entity_applies_to_ips_without_their_own_and_the_throttle_is_bounded() -> None:
    now = [0]
    table: dict[QuotaEntity, dict[str, float]] = {
        (("ip", None),): {"connection_creation_rate": 1.0},
        (("ip", "10.0.0.5"),): {"connection_creation_rate": 100.0},
    }
    ip_rates = rates(table, now)
    assert ip_rates.quota_for("10.0.0.9") == 1.0 and ip_rates.quota_for("10.0.0.5") == 100.0
    assert ip_rates.record_and_get_throttle_ms("10.0.0.9") == 0
    assert [ip_rates.record_and_get_throttle_ms("10.0.0.9") for _ in range(3)] == [
        1000
    ] * 3  # one window at most
    assert rates({}, now).record_and_get_throttle_ms("10.0.0.9") == 0  # no quota at all: nothing recorded


def test_connection_quotas_refuse_a_throttled_connection_without_counting_it() -> None:
    now = [0]
    ip_rates = rates({(("ip", "127.0.0.1"),): {"connection_creation_rate": 1.0}}, now)
    quotas = ConnectionQuotas(
        max_connections=100, max_connections_per_ip=100, per_ip_overrides={}, ip_rates=ip_rates
    )
    assert quotas.admit("PLAINTEXT", "::ffff:127.0.0.1") is None
    assert quotas.admit("PLAINTEXT", "127.0.0.1") == CONNECTION_RATE_THROTTLED
    assert quotas.throttle_ms == 1000
    assert quotas.count("127.0.0.1") == 1 and quotas.total == 1


def test_the_broker_wide_rate_makes_connections_wait_in_turn_as_a_blocked_acceptor() -> None:
    now = [0]
    rate = BrokerConnectionRate(2, samples=2, window_s=1, clock_ms=lambda: now[0])
    assert [rate.delay_ms() for _ in range(2)] == [0, 0]
    assert rate.delay_ms() == 500  # 3/s over a 1 s window: (3 - 2) / 2 x 1 s
    # the next one waits behind it: recorded when the acceptor gets to it, 500 ms from now
    assert rate.delay_ms() == 1000
    now[0] = 10_000  # long after: the rate is back under the quota
    assert rate.delay_ms() == 0


def test_the_inter_broker_listener_is_exempt_from_the_broker_wide_rate_beside_others() -> None:
    now = [0]
    quotas = ConnectionQuotas(
        max_connections=100,
        max_connections_per_ip=100,
        per_ip_overrides={},
        listeners=["CLIENT", "INTERNAL"],
        inter_broker_listener="INTERNAL",
        broker_rate=BrokerConnectionRate(1, samples=2, window_s=1, clock_ms=lambda: now[0]),
    )
    assert quotas.admit("CLIENT", "10.0.0.1") is None and quotas.accept_delay_ms == 0
    assert quotas.admit("CLIENT", "10.0.0.1") is None and quotas.accept_delay_ms == 1000  # waits, not refused
    assert quotas.admit("INTERNAL", "10.0.0.2") is None and quotas.accept_delay_ms == 0
