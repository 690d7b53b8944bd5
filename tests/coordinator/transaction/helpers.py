"""A transaction coordinator over in-memory collaborators, for tests."""

from __future__ import annotations

import asyncio
from typing import Any

from coordinator.transaction import (
    InMemoryMarkerSender,
    InMemoryProducerIdSource,
    InMemoryTransactionLog,
    LoggedRecord,
    TransactionConfig,
    TransactionCoordinator,
)
from protocol.error_codes import ErrorCode
from storage.clock import FakeClock

E = ErrorCode
TIMEOUT_MS = 60_000
PARTITIONS = 4
"""Few partitions, so that tests can own all of them."""
T0 = 1_000_000


def _future() -> asyncio.Future[Any]:
    return asyncio.get_running_loop().create_future()


class Harness:
    """A coordinator owning every partition of a 4-partition ``__transaction_state``."""

    def __init__(self, config: TransactionConfig | None = None, *, load: bool = True, epoch: int = 1) -> None:
        self.config = config or TransactionConfig(transaction_state_log_num_partitions=PARTITIONS)
        self.clock = FakeClock(T0)
        self.log = InMemoryTransactionLog(future_factory=_future)
        self.markers = InMemoryMarkerSender(future_factory=_future)
        self.producer_ids = InMemoryProducerIdSource(start=1000)
        self.coordinator_epoch = epoch
        self.coordinator = self._new_coordinator()
        if load:
            self.load_all()

    def _new_coordinator(self) -> TransactionCoordinator:
        return TransactionCoordinator(
            self.config,
            self.log,
            self.markers,
            self.producer_ids,
            self.clock,
            PARTITIONS,
            spawn=asyncio.create_task,
        )

    def load_all(self) -> None:
        for partition in range(PARTITIONS):
            self.coordinator.load_partition(partition, self.coordinator_epoch, self.log.records(partition))

    def reload(self) -> None:
        """Leadership moves away and back (a higher coordinator epoch): unload, then load the log."""
        for partition in range(PARTITIONS):
            self.coordinator.unload_partition(partition)
        self.coordinator_epoch += 1
        self.load_all()

    def fresh(self) -> TransactionCoordinator:
        """A brand-new coordinator that loads the same log at a higher coordinator epoch."""
        self.coordinator_epoch += 1
        other = self._new_coordinator()
        for partition in range(PARTITIONS):
            other.load_partition(partition, self.coordinator_epoch, self.log.records(partition))
        return other

    def records(self) -> list[LoggedRecord]:
        return [r for p in range(PARTITIONS) for r in self.log.records(p)]

    async def settle(self, coordinator: TransactionCoordinator | None = None) -> None:
        """Let background work (markers, Complete* writes) run until none is left or it waits."""
        coordinator = coordinator or self.coordinator
        for _ in range(50):
            await asyncio.sleep(0)
            if coordinator.pending_completions == 0:
                return

    async def init(self, transactional_id: str, timeout_ms: int = TIMEOUT_MS) -> tuple[int, int]:
        result = await self.coordinator.init_producer_id(transactional_id, timeout_ms)
        assert result.error is E.NONE, result
        return result.producer_id, result.producer_epoch

    async def begin(
        self, transactional_id: str, *partitions: tuple[str, int], transaction_version: int = 0
    ) -> tuple[int, int]:
        """Init, then add ``partitions`` (default: ("t", 0))."""
        pid, epoch = await self.init(transactional_id)
        errors = await self.coordinator.add_partitions(
            transactional_id,
            pid,
            epoch,
            list(partitions) or [("t", 0)],
            transaction_version=transaction_version,
        )
        assert set(errors.values()) == {E.NONE}, errors
        return pid, epoch
