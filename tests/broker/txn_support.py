"""A transaction coordinator over in-memory parts, for handler tests."""

from __future__ import annotations

import asyncio

from coordinator.transaction import (
    InMemoryMarkerSender,
    InMemoryProducerIdSource,
    InMemoryTransactionLog,
    TransactionConfig,
    TransactionCoordinator,
)
from storage.clock import FakeClock


def in_memory_transaction_coordinator(
    *, owned: bool = False, num_partitions: int = 1
) -> TransactionCoordinator:
    """A coordinator on an in-memory log; ``owned``: every partition loaded (empty), else none."""
    coordinator = TransactionCoordinator(
        TransactionConfig(transaction_state_log_num_partitions=num_partitions),
        InMemoryTransactionLog(),
        InMemoryMarkerSender(),
        InMemoryProducerIdSource(),
        FakeClock(1_000_000),
        num_partitions,
        spawn=asyncio.get_running_loop().create_task,
    )
    return coordinator
