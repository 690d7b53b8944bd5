"""Client quota enforcement on a fake clock: Kafka's sampled Rate, the quota entity a client falls
under, the throttle time, the fetch unrecord, and the muted connection."""

from __future__ import annotations

import asyncio

import pytest

from broker.quotas.client_quota_manager import ANONYMOUS_USER, ClientQuotaManager, QuotaLookup
from broker.quotas.enforcement import BrokerQuotas
from broker.quotas.rate import SampledRate
from broker.quotas.throttle import PURGE_AT, ChannelThrottles
from metadata.image import QuotaEntity


def test_a_young_rate_is_measured_over_at_least_samples_minus_one_windows() -> None:
    rate = SampledRate(samples=11, window_ms=1000, now_ms=0)
    rate.record(10_000, 0)
    assert rate.window_size_ms(0) == 10_000
    assert rate.measure(0) == pytest.approx(1000.0)
    rate.record(10_000, 5_500)  # a new window: 5.5 s elapsed, 5 full windows, 5 more added
    assert rate.window_size_ms(5_500) == 10_500
    assert rate.measure(5_500) == pytest.approx(20_000 / 10.5)


def test_old_windows_are_purged() -> None:
    rate = SampledRate(samples=3, window_ms=1000, now_ms=0)
    rate.record(3000, 0)
    assert rate.measure(2999) > 0
    assert rate.measure(3000) == 0  # the window that started at 0 is samples * window old


def quotas_of(table: dict[QuotaEntity, dict[str, float]]) -> QuotaLookup:
    return lambda entity: table.get(entity, {})


def test_the_most_specific_entity_wins_in_kafkas_order() -> None:
    table: dict[QuotaEntity, dict[str, float]] = {
        (("client-id", None),): {"producer_byte_rate": 1.0},
        (("client-id", "app"),): {"producer_byte_rate": 2.0},
        (("user", None),): {"producer_byte_rate": 3.0},
        (("client-id", "app"), ("user", ANONYMOUS_USER)): {"producer_byte_rate": 4.0},
    }
    manager = ClientQuotaManager("producer_byte_rate", quotas_of(table))
    assert manager.quota_for(ANONYMOUS_USER, "app") == (4.0, (ANONYMOUS_USER, "app"))
    assert manager.quota_for(ANONYMOUS_USER, "other") == (3.0, (ANONYMOUS_USER, ""))
    del table[(("user", None),)]
    assert manager.quota_for(ANONYMOUS_USER, "other") == (1.0, ("", "other"))
    assert ClientQuotaManager("consumer_byte_rate", quotas_of(table)).quota_for(ANONYMOUS_USER, "app") is None


def test_throttle_time_brings_the_rate_back_to_the_quota() -> None:
    table: dict[QuotaEntity, dict[str, float]] = {(("client-id", "app"),): {"producer_byte_rate": 1000.0}}
    manager = ClientQuotaManager("producer_byte_rate", quotas_of(table), samples=11, window_s=1)
    assert manager.record_and_get_throttle_ms("app", 5_000, 0) == 0  # 500 B/s over 10 s
    # 20,000 bytes over a 10 s window: 2000 B/s, twice the quota: throttled for one more window
    assert manager.record_and_get_throttle_ms("app", 15_000, 0) == 10_000
    assert manager.record_and_get_throttle_ms("other", 1_000_000, 0) == 0  # no quota


def test_throttles_mute_connections_until_their_time() -> None:
    now = [100.0]
    throttles = ChannelThrottles(clock=lambda: now[0])
    throttles.mute(7, 1500)
    throttles.mute(7, 500)  # never shortened
    assert throttles.remaining_s(7) == pytest.approx(1.5)
    assert throttles.remaining_s(8) == 0
    now[0] += 1.5
    assert throttles.remaining_s(7) == 0


def test_mutes_of_connections_gone_are_dropped() -> None:
    now = [0.0]
    throttles = ChannelThrottles(clock=lambda: now[0])
    for connection_id in range(PURGE_AT):
        throttles.mute(connection_id, 1000)
    now[0] = 2.0
    throttles.mute(99_999, 1000)
    assert len(throttles._muted_until) == 1


async def test_wait_returns_at_once_when_not_muted() -> None:
    throttles = ChannelThrottles()
    async with asyncio.timeout(1):
        await throttles.wait(1)
    throttles.mute(1, 20)
    async with asyncio.timeout(5):
        await throttles.wait(1)
    assert throttles.remaining_s(1) == 0


def test_a_throttled_fetch_takes_its_bytes_back_and_mutes() -> None:
    table: dict[QuotaEntity, dict[str, float]] = {(("client-id", None),): {"consumer_byte_rate": 100.0}}
    now = [0]
    quotas = BrokerQuotas(quotas_of(table), samples=2, window_s=1, clock_ms=lambda: now[0])
    assert quotas.fetch_throttle_ms(1, "c", 50) == 0
    throttle = quotas.fetch_throttle_ms(1, "c", 1000)
    assert throttle > 0 and quotas.throttles.remaining_s(1) > 0
    # the throttled response carried nothing: the rate only holds the 50 bytes served
    assert quotas.fetch.record_and_get_throttle_ms("c", 0, now[0]) == 0
    assert quotas.produce_throttle_ms(2, "c", 10**9) == 0  # no producer quota


def test_without_any_quota_nothing_is_looked_up() -> None:
    looked_up: list[QuotaEntity] = []

    def lookup(entity: QuotaEntity) -> dict[str, float]:
        looked_up.append(entity)
        return {}

    quotas = BrokerQuotas(lookup, any_quota=lambda: False)
    assert quotas.produce_throttle_ms(1, "c", 10**9) == 0
    assert quotas.fetch_max_bytes("c", 123) == 123
    assert looked_up == []
