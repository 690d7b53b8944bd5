"""Kafka's transaction coordinator as a pure domain (KIP-98, with KIP-360 and KIP-890).

No sockets, no files, no asyncio: time comes from an injected clock, ``__transaction_state`` is an
injected :class:`~coordinator.transaction.log.TransactionLog`, markers go through an injected
:class:`~coordinator.transaction.markers.TransactionMarkerSender`, producer ids come from an injected
:class:`~coordinator.transaction.producer_ids.ProducerIdSource`, and background work is started by an
injected ``spawn`` (``asyncio.create_task``). The record formats are in :mod:`protocol.transaction_log`.

Modules: :mod:`~coordinator.transaction.state` (states, ids, transitions),
:mod:`~coordinator.transaction.metadata` (TransactionMetadata, prepare/complete),
:mod:`~coordinator.transaction.store` (ids held per partition, writes),
:mod:`~coordinator.transaction.records` and :mod:`~coordinator.transaction.loader` (the log),
:mod:`~coordinator.transaction.coordinator` (the requests), :mod:`~coordinator.transaction.results`.
"""

from coordinator.transaction.background import BackgroundTask, Spawn
from coordinator.transaction.config import TransactionConfig
from coordinator.transaction.coordinator import TransactionCoordinator
from coordinator.transaction.log import (
    InMemoryTransactionLog,
    LoggedRecord,
    TransactionLog,
    transaction_log_error,
)
from coordinator.transaction.markers import (
    CoordinatorFencedError,
    InMemoryMarkerSender,
    MarkerRequest,
    TransactionMarkerSender,
)
from coordinator.transaction.metadata import TransactionMetadata, TransactionStateError, TxnTransitMetadata
from coordinator.transaction.producer_ids import (
    InMemoryProducerIdSource,
    ProducerIdSource,
    ProducerIdUnavailableError,
)
from coordinator.transaction.results import (
    DescribedTransaction,
    EndTxnResult,
    InitProducerIdResult,
    ListedTransaction,
    ListTransactionsResult,
    error_for_version,
)
from coordinator.transaction.state import TransactionState
from coordinator.transaction.store import partition_for

__all__ = [
    "BackgroundTask",
    "CoordinatorFencedError",
    "DescribedTransaction",
    "EndTxnResult",
    "InMemoryMarkerSender",
    "InMemoryProducerIdSource",
    "InMemoryTransactionLog",
    "InitProducerIdResult",
    "ListTransactionsResult",
    "ListedTransaction",
    "LoggedRecord",
    "MarkerRequest",
    "ProducerIdSource",
    "ProducerIdUnavailableError",
    "Spawn",
    "TransactionConfig",
    "TransactionCoordinator",
    "TransactionLog",
    "TransactionMarkerSender",
    "TransactionMetadata",
    "TransactionState",
    "TransactionStateError",
    "TxnTransitMetadata",
    "error_for_version",
    "partition_for",
    "transaction_log_error",
]
