"""The broker's client quotas in one object the produce and fetch handlers and the dispatcher share.

* Every request that is not exempt: its time on the event loop is recorded against the client's
  ``request_percentage`` (KIP-124; see :mod:`broker.quotas.request_quota`).

* Produce: the request's record bytes are recorded against the client's ``producer_byte_rate``;
  over the quota, the response carries the throttle time and the connection is muted for it
  (Kafka's handleProduceRequest; the records are appended all the same).
* Fetch (consumers only; replication is never throttled by client quotas): ``max_bytes`` is capped
  to the quota over ``quota.window.num - 1`` windows; the response's record bytes are recorded
  against ``consumer_byte_rate``; over the quota they are taken back and the
  client gets an empty response with the throttle time, then a muted connection (Kafka's
  handleFetchRequest with its throttled fetch response).

Kafka records the whole request size for produce; kipling records the record batches' bytes, the
bulk of it.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from broker.quotas.client_quota_manager import (
    ANONYMOUS_USER,
    DEFAULT_QUOTA_WINDOW_NUM,
    DEFAULT_QUOTA_WINDOW_SIZE_SECONDS,
    ClientQuotaManager,
    QuotaLookup,
)
from broker.quotas.controller_mutation import ControllerMutationQuotaManager
from broker.quotas.throttle import ChannelThrottles
from metadata.client_quotas import CONSUMER_BYTE_RATE, PRODUCER_BYTE_RATE, REQUEST_PERCENTAGE

__all__ = [
    "CLIENT_THROTTLES_FETCH_VERSION",
    "CLIENT_THROTTLES_PRODUCE_VERSION",
    "BrokerQuotas",
    "ChannelThrottles",
]

ThrottleListener = Callable[[str, str, str, int], None]
RequestTimeListener = Callable[[str, str, float], None]

CLIENT_THROTTLES_PRODUCE_VERSION = 6
CLIENT_THROTTLES_FETCH_VERSION = 8
"""From these versions (KIP-219) a client backs off by itself for the throttle time it is sent, so
the response goes out at once; to an older client the response is sent only once the throttle time
has passed (Kafka's ``shouldClientThrottle``)."""
NANOS_TO_PERCENTAGE_PER_SECOND = 100.0 / 1e9
"""One second of thread time is 100 (Kafka's ``NanosToPercentagePerSecond``): a rate of 100 per
second is one request thread kept busy."""


class BrokerQuotas:
    """Produce and fetch byte-rate quotas over the quotas of the broker's metadata image."""

    def __init__(
        self,
        quotas: QuotaLookup,
        *,
        any_quota: Callable[[], bool] = lambda: True,
        samples: int = DEFAULT_QUOTA_WINDOW_NUM,
        window_s: int = DEFAULT_QUOTA_WINDOW_SIZE_SECONDS,
        throttles: ChannelThrottles | None = None,
        clock_ms: Callable[[], int] = lambda: int(time.time() * 1000),
        on_throttle: ThrottleListener | None = None,
        on_request_time: RequestTimeListener | None = None,
    ) -> None:
        """``on_throttle(quota type, user, client id, ms)`` hears every throttle and
        ``on_request_time(user, client id, percent-seconds)`` every request's measured time (the
        metrics)."""
        self.produce = ClientQuotaManager(
            PRODUCER_BYTE_RATE, quotas, any_quota=any_quota, samples=samples, window_s=window_s
        )
        self.fetch = ClientQuotaManager(
            CONSUMER_BYTE_RATE, quotas, any_quota=any_quota, samples=samples, window_s=window_s
        )
        self.request = ClientQuotaManager(
            REQUEST_PERCENTAGE,
            quotas,
            any_quota=any_quota,
            samples=samples,
            window_s=window_s,
            max_throttle_ms=window_s * 1000,
        )
        self.mutations = ControllerMutationQuotaManager(
            quotas, any_quota=any_quota, samples=samples, window_s=window_s, clock_ms=clock_ms
        )
        self.any_quota = any_quota
        self.throttles = throttles if throttles is not None else ChannelThrottles()
        self._clock_ms = clock_ms
        self._on_throttle = on_throttle
        self._on_request_time = on_request_time

    @property
    def on_throttle(self) -> ThrottleListener | None:
        """Who hears throttles (the metrics), for the quotas kept outside this object."""
        return self._on_throttle

    def produce_throttle_ms(self, connection_id: int, client_id: str | None, size: int) -> int:
        """Record a produce request's bytes; the throttle time (the connection muted for it)."""
        throttle_ms = self.produce.record_and_get_throttle_ms(client_id, size, self._clock_ms())
        if throttle_ms > 0:
            self.throttles.mute(connection_id, throttle_ms)
            self._heard("Produce", client_id, throttle_ms)
        return throttle_ms

    async def hold_for_old_client(
        self, connection_id: int, version: int, first_throttling_version: int
    ) -> None:
        """Before KIP-219 the broker itself delays a throttled response: wait out the mute."""
        if version < first_throttling_version:
            await self.throttles.wait(connection_id)

    def fetch_max_bytes(self, client_id: str | None, max_bytes: int) -> int:
        """A consumer fetch's ``max_bytes`` capped to what its quota allows in one window, as Kafka
        caps it, so that a fetch is not throttled merely for being large."""
        allowed = self.fetch.max_value_in_window(client_id)
        return max_bytes if allowed is None else min(max_bytes, max(int(allowed), 1))

    def fetch_throttle_ms(self, connection_id: int, client_id: str | None, size: int) -> int:
        """Record a consumer fetch response's bytes; when throttled they are taken back (the response
        goes out empty) and the connection is muted."""
        now_ms = self._clock_ms()
        throttle_ms = self.fetch.record_and_get_throttle_ms(client_id, size, now_ms)
        if throttle_ms > 0:
            self.fetch.unrecord(client_id, size, now_ms)
            self.throttles.mute(connection_id, throttle_ms)
            self._heard("Fetch", client_id, throttle_ms)
        return throttle_ms

    def request_throttle_ms(self, connection_id: int, client_id: str | None, thread_ns: int) -> int:
        """Record a request's time on the event loop against the client's ``request_percentage``
        (Kafka's ClientRequestQuotaManager: nanoseconds as a percentage of one thread for a
        second); the throttle time, at most one window (the connection muted for it)."""
        value = thread_ns * NANOS_TO_PERCENTAGE_PER_SECOND
        self._request_time(client_id, value)
        throttle_ms = self.request.record_and_get_throttle_ms(client_id, value, self._clock_ms())
        if throttle_ms > 0:
            self.throttles.mute(connection_id, throttle_ms)
            self._heard("Request", client_id, throttle_ms)
        return throttle_ms

    def record_request_time(self, client_id: str | None, thread_ns: int) -> None:
        """Time spent on a request after its throttle was decided (encoding the response): it
        counts toward the client's next requests, as Kafka records network-thread time."""
        value = thread_ns * NANOS_TO_PERCENTAGE_PER_SECOND
        self._request_time(client_id, value)
        self.request.record_no_throttle(client_id, value, self._clock_ms())

    def _request_time(self, client_id: str | None, value: float) -> None:
        if self._on_request_time is not None:
            self._on_request_time(ANONYMOUS_USER, client_id or "", value)

    def _heard(self, quota: str, client_id: str | None, throttle_ms: int) -> None:
        if self._on_throttle is not None:
            self._on_throttle(quota, ANONYMOUS_USER, client_id or "", throttle_ms)
