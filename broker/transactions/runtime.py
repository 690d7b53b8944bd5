"""The transaction coordinator on a broker: its log, its leadership, and locating it.

The coordinator (:mod:`coordinator.transaction`) is a domain free of I/O. This module gives it what
Kafka's ``TransactionStateManager`` and ``KafkaApis`` give theirs:

* **Its log**: :class:`TransactionStateLog` appends one record at a time to a partition of
  ``__transaction_state`` through the broker's own produce path (acks=-1, the internal client that
  alone may write internal topics) and resolves with the outcome.
* **Moving with leadership**: a transactional id's coordinator is the leader of the partition the id
  hashes to. When this broker starts leading a partition of ``__transaction_state``, the partition
  is read back and loaded, with the partition's leader epoch as the coordinator epoch that fences
  markers of earlier coordinators; requests for its ids answer COORDINATOR_LOAD_IN_PROGRESS
  meanwhile. When it stops leading, the coordinator unloads it (NOT_COORDINATOR).
* **FindCoordinator** with key type TRANSACTION: the leader of the id's partition. The first lookup
  creates ``__transaction_state`` (``transaction.state.log.*``) and answers
  COORDINATOR_NOT_AVAILABLE meanwhile, which clients retry, as Kafka does.
* **Housekeeping**: aborting transactions past their timeout and forgetting idle transactional ids,
  periodic tasks of the node.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence

import structlog

from broker.handlers.metadata import BrokerEndpoint
from broker.internal_log import RecordEntry, read_partition
from broker.internal_topics import (
    PartitionLoads,
    TopicCreation,
    TopicCreator,
    cancel_all,
    partition_leader_endpoint,
)
from broker.produce.service import ADMIN_CLIENT_ID, ProducePartitionData, ProduceRequest, ProduceService
from broker.replication.partition import Partition
from coordinator.transaction import TransactionCoordinator
from coordinator.transaction.log import LoggedRecord
from metadata import topic_names
from metadata.topics import TopicLookup
from protocol.error_codes import ErrorCode
from protocol.records import Record, build_batch

TRANSACTION_STATE_TOPIC = topic_names.TRANSACTION_STATE_TOPIC
PRODUCE_VERSION = 9

_log = structlog.get_logger("kipling.transactions.runtime")


def transaction_state_topic_configs(min_isr: int, segment_bytes: int) -> dict[str, str]:
    """Kafka's TransactionLog topic configs: compacted, uncompressed, its own min ISR and segments."""
    return {
        "cleanup.policy": "compact",
        "compression.type": "uncompressed",
        "min.insync.replicas": str(min_isr),
        "segment.bytes": str(segment_bytes),
        "unclean.leader.election.enable": "false",
    }


class TransactionStateLog:
    """The coordinator's :class:`~coordinator.transaction.log.TransactionLog` on the produce path."""

    def __init__(self, produce: ProduceService, timeout_ms: int) -> None:
        self._produce = produce
        self._timeout_ms = timeout_ms

    async def append(self, partition: int, key: bytes, value: bytes | None, timestamp_ms: int) -> ErrorCode:
        request = ProduceRequest(
            version=PRODUCE_VERSION,
            client_id=ADMIN_CLIENT_ID,
            acks=-1,
            timeout_ms=self._timeout_ms,
            transactional_id=None,
            origin="coordinator",
            partitions=[
                ProducePartitionData(
                    TRANSACTION_STATE_TOPIC,
                    partition,
                    build_batch([Record(value, key, timestamp=timestamp_ms)]),
                )
            ],
        )
        try:
            [outcome] = await self._produce.produce(request)
        except Exception:
            _log.exception("append to __transaction_state failed", partition=partition)
            return ErrorCode.UNKNOWN_SERVER_ERROR
        return outcome.error_code


class TransactionCoordinatorRuntime:
    """Moves the coordinator with leadership of ``__transaction_state`` and locates coordinators."""

    def __init__(
        self,
        coordinator: TransactionCoordinator,
        topics: TopicLookup,
        brokers: Callable[[str], Sequence[BrokerEndpoint]],
        create_topic: TopicCreator,
    ) -> None:
        self.coordinator = coordinator
        self._topics = topics
        self._brokers = brokers
        self._creation = TopicCreation(TRANSACTION_STATE_TOPIC, create_topic)
        self._loads = PartitionLoads()
        self._housekeeping: dict[str, asyncio.Task[None]] = {}

    def on_leadership(self, partition: Partition, led: bool) -> None:
        """A ReplicaManager leadership listener: load or unload a partition of the state topic."""
        if partition.topic != TRANSACTION_STATE_TOPIC:
            return
        index = partition.index
        self._loads.cancel(index)
        if not led:
            self.coordinator.unload_partition(index)
            return
        epoch = partition.leader_epoch
        self.coordinator.begin_loading(index, epoch)
        self._loads.start(index, self._load(partition, epoch))

    async def _load(self, partition: Partition, coordinator_epoch: int) -> None:
        index = partition.index
        try:
            entries = await read_partition(partition)
        except asyncio.CancelledError:
            raise
        except Exception:
            # Never load it as empty: ongoing transactions would be forgotten and their partitions'
            # last stable offsets stuck. Unloaded, its ids answer NOT_COORDINATOR.
            _log.exception("loading __transaction_state failed: its ids stay unserved here", partition=index)
            self.coordinator.unload_partition(index)
            return
        records = [LoggedRecord(e.offset, e.key, e.value) for e in entries if isinstance(e, RecordEntry)]
        self.coordinator.load_partition(index, coordinator_epoch, records)
        _log.info("transaction coordinator loaded partition", partition=index, records=len(records))

    async def find_transaction_coordinator(
        self, transactional_id: str, listener: str
    ) -> tuple[ErrorCode, BrokerEndpoint | None]:
        topic = self._topics.get(TRANSACTION_STATE_TOPIC)
        if topic is None:
            self._creation.start()
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, None
        partition = self.coordinator.partition_for(transactional_id)
        return partition_leader_endpoint(topic, partition, self._brokers(listener))

    def abort_timed_out_transactions(self) -> None:
        """A periodic task: abort (epoch-fence) transactions past their timeout."""
        self._housekeep("abort-timed-out", self.coordinator.abort_timed_out_transactions)

    def expire_transactional_ids(self) -> None:
        """A periodic task: forget transactional ids idle for transactional.id.expiration.ms."""
        self._housekeep("expire-ids", self.coordinator.expire_transactional_ids)

    def _housekeep(self, name: str, job: Callable[[], Awaitable[int]]) -> None:
        """Run ``job`` in a task unless the previous run of it is still going."""
        running = self._housekeeping.get(name)
        if running is not None and not running.done():
            return
        self._housekeeping[name] = asyncio.get_running_loop().create_task(self._run_housekeeping(name, job))

    async def _run_housekeeping(self, name: str, job: Callable[[], Awaitable[int]]) -> None:
        try:
            count = await job()
        except Exception:
            _log.exception("transaction housekeeping failed", job=name)
            return
        if count:
            _log.info("transaction housekeeping", job=name, transactions=count)

    async def stop(self) -> None:
        await cancel_all([*self._loads.tasks(), *self._housekeeping.values(), *self._creation.tasks()])
        self._loads.clear()
