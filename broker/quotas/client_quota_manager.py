"""Byte-rate quotas of produce and fetch: Kafka's ClientQuotaManager with its default callback.

Each request's bytes are recorded in a :class:`~broker.quotas.rate.SampledRate` of the client's
*quota entity*, the most specific one that has a quota for this manager's key
(``producer_byte_rate`` or ``consumer_byte_rate``), in Kafka's order::

    user + client-id, user + default client-id, user,
    default user + client-id, default user + default client-id, default user,
    client-id, default client-id

Clients that fall under the same entity share one rate (a quota on user ``alice`` bounds all her
clients together), except that a default entity is per actual user or client id, as Kafka's
metric tags make it. With no quota for the client there is nothing to measure (and no throttle).
Quotas come from the broker's metadata image (ClientQuotaRecords), so a change applies to the next
request. Kipling has no authentication: every client is the user ``ANONYMOUS``, Kafka's principal
name for an unauthenticated connection.

When a recorded value takes the rate above the quota, the throttle time is the time the rate needs
to come back to the quota with nothing more recorded: ``(rate - quota) / quota * window`` (Kafka's
``QuotaUtils.throttleTime``), where the window is the span the rate is measured over. Rates idle
for an hour are dropped, looked for every 30 s, as Kafka expires inactive sensors.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from broker.quotas.rate import SampledRate
from metadata.client_quotas import CLIENT_ID, USER
from metadata.image import QuotaEntity

ANONYMOUS_USER = "ANONYMOUS"
"""Kafka's principal name for an unauthenticated client (every client here)."""
DEFAULT_QUOTA_WINDOW_NUM = 11
DEFAULT_QUOTA_WINDOW_SIZE_SECONDS = 1
INACTIVE_SENSOR_EXPIRATION_MS = 3_600_000
"""Kafka's ClientQuotaManager.InactiveSensorExpirationTimeSeconds."""
SENSOR_EXPIRY_INTERVAL_MS = 30_000
"""How often idle rates are looked for (Kafka's Metrics run their ExpireSensorTask every 30 s): a
scan of every client's rate on each request would cost O(clients) per produce or fetch."""

QuotaLookup = Callable[[QuotaEntity], dict[str, float]]
"""The quotas of one entity, by key (the image's ``client_quota``)."""


@dataclass(slots=True)
class _Sensor:
    rate: SampledRate
    quota: float
    last_record_ms: int


def _candidates(user: str, client_id: str) -> list[tuple[QuotaEntity, tuple[str, str]]]:
    """The entities that may hold a client's quota, most specific first, each with the key of the
    rate it shares (Kafka's metric tags: user, client-id; empty for a level not in use)."""
    return [
        (((CLIENT_ID, client_id), (USER, user)), (user, client_id)),
        (((CLIENT_ID, None), (USER, user)), (user, client_id)),
        (((USER, user),), (user, "")),
        (((CLIENT_ID, client_id), (USER, None)), (user, client_id)),
        (((CLIENT_ID, None), (USER, None)), (user, client_id)),
        (((USER, None),), (user, "")),
        (((CLIENT_ID, client_id),), ("", client_id)),
        (((CLIENT_ID, None),), ("", client_id)),
    ]


class ClientQuotaManager:
    """The quota of one key (``producer_byte_rate`` or ``consumer_byte_rate``) for every client."""

    def __init__(
        self,
        quota_key: str,
        quotas: QuotaLookup,
        *,
        any_quota: Callable[[], bool] = lambda: True,
        samples: int = DEFAULT_QUOTA_WINDOW_NUM,
        window_s: int = DEFAULT_QUOTA_WINDOW_SIZE_SECONDS,
        max_throttle_ms: int | None = None,
    ) -> None:
        """``max_throttle_ms`` bounds every throttle time (Kafka's ``boundedThrottleTime``, which the
        request quota applies with one window, so a burst of thread time never mutes a client for
        longer than a window)."""
        self.quota_key = quota_key
        self._max_throttle_ms = max_throttle_ms
        self._quotas = quotas
        self._any_quota = any_quota
        self._samples = samples
        self._window_ms = window_s * 1000
        self._sensors: dict[tuple[str, str], _Sensor] = {}
        self._next_expiry_ms: int | None = None

    def quota_for(self, user: str, client_id: str) -> tuple[float, tuple[str, str]] | None:
        """The client's quota and the key of the rate it is measured with; None without a quota."""
        if not self._any_quota():  # the common case: no quota at all, no lookups
            return None
        for entity, sensor_key in _candidates(user, client_id):
            value = self._quotas(entity).get(self.quota_key)
            if value is not None:
                return value, sensor_key
        return None

    def record_and_get_throttle_ms(self, client_id: str | None, value: float, now_ms: int) -> int:
        """Record ``value`` (bytes) for the client; the throttle time in ms (0 within its quota)."""
        found = self.quota_for(ANONYMOUS_USER, client_id or "")
        if found is None:
            return 0
        quota, key = found
        sensor = self._sensor(key, quota, now_ms)
        sensor.rate.record(value, now_ms)
        sensor.last_record_ms = now_ms
        rate = sensor.rate.measure(now_ms)
        if rate <= quota:
            return 0
        if quota <= 0:
            throttle_ms = self._window_ms * self._samples
        else:
            throttle_ms = round((rate - quota) / quota * sensor.rate.window_size_ms(now_ms))
        if self._max_throttle_ms is not None:
            return min(throttle_ms, self._max_throttle_ms)
        return throttle_ms

    def record_no_throttle(self, client_id: str | None, value: float, now_ms: int) -> None:
        """Record ``value`` without asking for a throttle (Kafka's ``recordNoThrottle``: the time
        spent after the response was built counts toward the next request's throttle)."""
        found = self.quota_for(ANONYMOUS_USER, client_id or "")
        if found is None:
            return
        sensor = self._sensor(found[1], found[0], now_ms)
        sensor.rate.record(value, now_ms)
        sensor.last_record_ms = now_ms

    def max_value_in_window(self, client_id: str | None) -> float | None:
        """The most one request may carry without being throttled for sure (Kafka's
        ``getMaxValueInQuotaWindow``: the quota over ``samples - 1`` windows); None without a quota."""
        found = self.quota_for(ANONYMOUS_USER, client_id or "")
        if found is None:
            return None
        return found[0] * (self._samples - 1) * self._window_ms / 1000

    def unrecord(self, client_id: str | None, value: float, now_ms: int) -> None:
        """Take back a value recorded for a request answered empty (a throttled fetch), as Kafka's
        ``unrecordQuotaSensor`` does by recording its negative."""
        found = self.quota_for(ANONYMOUS_USER, client_id or "")
        if found is None:
            return
        sensor = self._sensors.get(found[1])
        if sensor is not None:
            sensor.rate.record(-value, now_ms)

    def _sensor(self, key: tuple[str, str], quota: float, now_ms: int) -> _Sensor:
        self._expire(now_ms)
        sensor = self._sensors.get(key)
        if sensor is None:
            sensor = _Sensor(SampledRate(self._samples, self._window_ms, now_ms), quota, now_ms)
            self._sensors[key] = sensor
        sensor.quota = quota
        return sensor

    def _expire(self, now_ms: int) -> None:
        if self._next_expiry_ms is not None and now_ms < self._next_expiry_ms:
            return
        self._next_expiry_ms = now_ms + SENSOR_EXPIRY_INTERVAL_MS
        idle = [
            k for k, s in self._sensors.items() if now_ms - s.last_record_ms > INACTIVE_SENSOR_EXPIRATION_MS
        ]
        for k in idle:
            del self._sensors[k]
