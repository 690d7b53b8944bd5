"""Client quotas: the per-client rates stay bounded at a bounded cost.

Kafka drops a client's quota sensors after an hour without a record, from a task that runs every
30 s. Kipling looked for idle rates on every recorded request once 64 clients had a rate (a scan of
every client per produce or fetch) and never below 64.
"""

from __future__ import annotations

from typing import Any

from broker.quotas.client_quota_manager import (
    INACTIVE_SENSOR_EXPIRATION_MS,
    SENSOR_EXPIRY_INTERVAL_MS,
    ClientQuotaManager,
)
from metadata.image import QuotaEntity

DEFAULT_CLIENT: QuotaEntity = (("client-id", None),)


class _CountingDict(dict[Any, Any]):
    """A dict that counts full scans (``items``)."""

    scans = 0

    def items(self) -> Any:
        type(self).scans += 1
        return super().items()


def _manager() -> ClientQuotaManager:
    table = {DEFAULT_CLIENT: {"producer_byte_rate": 1e12}}
    return ClientQuotaManager("producer_byte_rate", lambda entity: table.get(entity, {}))


def test_idle_rates_are_dropped_even_for_a_few_clients() -> None:
    manager = _manager()
    for index in range(5):
        manager.record_and_get_throttle_ms(f"client-{index}", 100, 0)
    assert len(manager._sensors) == 5
    later = INACTIVE_SENSOR_EXPIRATION_MS + SENSOR_EXPIRY_INTERVAL_MS + 1
    manager.record_and_get_throttle_ms("client-new", 100, later)
    assert list(manager._sensors) == [("", "client-new")]


def test_many_clients_are_not_scanned_on_every_request() -> None:
    manager = _manager()
    manager._sensors = _CountingDict()
    _CountingDict.scans = 0
    for index in range(2_000):
        manager.record_and_get_throttle_ms(f"client-{index}", 100, index)  # 2 s of requests
    assert len(manager._sensors) == 2_000
    assert _CountingDict.scans <= 1
    for index in range(2_000):
        manager.record_and_get_throttle_ms(f"client-{index}", 100, 2 * SENSOR_EXPIRY_INTERVAL_MS + index)
    assert _CountingDict.scans <= 3
