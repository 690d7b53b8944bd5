"""connection_creation_rate (KIP-612) for IP entities: Kafka's per-IP connection rate in
ConnectionQuotas.

Each new connection from an IP with a quota (its own IP entity, else the default IP entity) is
recorded in a sampled rate of that IP (the byte quotas' :class:`~broker.quotas.rate.SampledRate`
over ``quota.window.num`` windows of ``quota.window.size.seconds``). A connection that takes the
rate above the quota is taken back out of the rate and throttled for
``(rate - quota) / quota x window``, at most one window (Kafka's ``recordIpConnectionMaybeThrottle``
with its bounded throttle time). Kafka's acceptor does not serve a throttled connection and closes
it only once the throttle time has passed (its delayed close), so a client that reconnects at once
cannot spin; kipling does the same (:mod:`broker.server.connection`). Without any client quota in
the image nothing is recorded.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from broker.quotas.client_quota_manager import (
    DEFAULT_QUOTA_WINDOW_NUM,
    DEFAULT_QUOTA_WINDOW_SIZE_SECONDS,
    INACTIVE_SENSOR_EXPIRATION_MS,
    SENSOR_EXPIRY_INTERVAL_MS,
    QuotaLookup,
)
from broker.quotas.rate import SampledRate
from metadata.client_quotas import IP, IP_CONNECTION_RATE


class IpConnectionRates:
    """The connection creation rate of every IP with a ``connection_creation_rate`` quota."""

    def __init__(
        self,
        quotas: QuotaLookup,
        *,
        any_quota: Callable[[], bool] = lambda: True,
        samples: int = DEFAULT_QUOTA_WINDOW_NUM,
        window_s: int = DEFAULT_QUOTA_WINDOW_SIZE_SECONDS,
        clock_ms: Callable[[], int] = lambda: int(time.time() * 1000),
    ) -> None:
        self._quotas = quotas
        self._any_quota = any_quota
        self._samples = samples
        self._window_ms = window_s * 1000
        self._clock_ms = clock_ms
        self._rates: dict[str, tuple[SampledRate, int]] = {}
        self._next_expiry_ms: int | None = None

    def quota_for(self, ip: str) -> float | None:
        """The IP's quota: its own entity's, else the default IP entity's; None for no limit."""
        if not self._any_quota():
            return None
        for name in (ip, None):
            value = self._quotas(((IP, name),)).get(IP_CONNECTION_RATE)
            if value is not None:
                return value
        return None

    def record_and_get_throttle_ms(self, ip: str) -> int:
        """Record a new connection from ``ip`` (a normalized address); 0 to accept it, else the
        time to hold it before closing it (then it is not counted in the rate)."""
        quota = self.quota_for(ip)
        if quota is None:
            return 0
        now_ms = self._clock_ms()
        self._expire(now_ms)
        kept = self._rates.get(ip)
        rate = kept[0] if kept is not None else SampledRate(self._samples, self._window_ms, now_ms)
        self._rates[ip] = (rate, now_ms)
        rate.record(1.0, now_ms)
        measured = rate.measure(now_ms)
        if measured <= quota:
            return 0
        rate.record(-1.0, now_ms)  # a connection not accepted does not count
        if quota <= 0:
            return self._window_ms
        throttle_ms = round((measured - quota) / quota * rate.window_size_ms(now_ms))
        return max(1, min(throttle_ms, self._window_ms))

    def _expire(self, now_ms: int) -> None:
        if self._next_expiry_ms is not None and now_ms < self._next_expiry_ms:
            return
        self._next_expiry_ms = now_ms + SENSOR_EXPIRY_INTERVAL_MS
        idle = [ip for ip, (_, used) in self._rates.items() if now_ms - used > INACTIVE_SENSOR_EXPIRATION_MS]
        for ip in idle:
            del self._rates[ip]


class BrokerConnectionRate:
    """``max.connection.creation.rate``: the broker-wide rate of new connections (KIP-612).

    Kafka's acceptor records each new connection in the broker's rate and, over it, blocks for the
    throttle time (at most one window) before it accepts the next: connections wait, they are not
    refused. An asyncio server cannot stop accepting, so each connection is given the time it
    would have waited behind that blocked acceptor: connections are admitted one after another
    from a cursor that each throttle moves on, and a connection is served only once its turn has
    come (:attr:`broker.server.connection.KafkaConnection.start_delay_s`).
    """

    def __init__(
        self,
        max_rate: int,
        *,
        samples: int = DEFAULT_QUOTA_WINDOW_NUM,
        window_s: int = DEFAULT_QUOTA_WINDOW_SIZE_SECONDS,
        clock_ms: Callable[[], int] = lambda: int(time.time() * 1000),
    ) -> None:
        self._quota = float(max_rate)
        self._window_ms = window_s * 1000
        self._clock_ms = clock_ms
        self._rate = SampledRate(samples, self._window_ms, clock_ms())
        self._accepting_at_ms = 0

    def delay_ms(self) -> int:
        """Record a new connection; how long it waits before it is served (0: at once)."""
        now_ms = self._clock_ms()
        start_ms = max(now_ms, self._accepting_at_ms)
        self._rate.record(1.0, start_ms)
        measured = self._rate.measure(start_ms)
        throttle_ms = 0
        if measured > self._quota:
            if self._quota <= 0:
                throttle_ms = self._window_ms
            else:
                throttle_ms = round(
                    (measured - self._quota) / self._quota * self._rate.window_size_ms(start_ms)
                )
                throttle_ms = max(1, min(throttle_ms, self._window_ms))
        self._accepting_at_ms = start_ms + throttle_ms
        return self._accepting_at_ms - now_ms
