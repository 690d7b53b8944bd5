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
from broker.produce.service import ADMIN_CLIENT_ID, ProducePartitionData, ProduceRequest, ProduceService
from broker.replication.partition import Partition
from coordinator.transaction import TransactionCoordinator
from coordinator.transaction.log import LoggedRecord
from metadata import topic_names
from metadata.topics import NO_LEADER, TopicLookup
from protocol.error_codes import ErrorCode
from protocol.records import Record, build_batch

TRANSACTION_STATE_TOPIC = topic_names.TRANSACTION_STATE_TOPIC
PRODUCE_VERSION = 9
CREATION_RETRY_S = 1.0

_log = structlog.get_logger("kipling.transactions.runtime")

TopicCreator = Callable[[], Awaitable[None]]


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
        self._create_topic = create_topic
        self._loads: dict[int, asyncio.Task[None]] = {}
        self._creation: asyncio.Task[None] | None = None
        self._creation_retry_at = 0.0
        self._creation_error: str | None = None
        self._housekeeping: dict[str, asyncio.Task[None]] = {}

    def on_leadership(self, partition: Partition, led: bool) -> None:
        """A ReplicaManager leadership listener: load or unload a partition of the state topic."""
        if partition.topic != TRANSACTION_STATE_TOPIC:
            return
        index = partition.index
        previous = self._loads.pop(index, None)
        if previous is not None:
            previous.cancel()
        if not led:
            self.coordinator.unload_partition(index)
            return
        epoch = partition.leader_epoch
        self.coordinator.begin_loading(index, epoch)
        task = asyncio.get_running_loop().create_task(self._load(partition, epoch))
        self._loads[index] = task
        task.add_done_callback(
            lambda done: self._loads.pop(index, None) if self._loads.get(index) is done else None
        )

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
            self._start_creation()
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, None
        state = topic.partitions.get(self.coordinator.partition_for(transactional_id))
        if state is None or state.leader_id == NO_LEADER:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, None
        for endpoint in self._brokers(listener):
            if endpoint.node_id == state.leader_id:
                return ErrorCode.NONE, endpoint
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, None

    def _start_creation(self) -> None:
        loop = asyncio.get_running_loop()
        if self._creation is not None and not self._creation.done():
            return
        if loop.time() < self._creation_retry_at:
            return
        self._creation_retry_at = loop.time() + CREATION_RETRY_S
        self._creation = loop.create_task(self._create())

    async def _create(self) -> None:
        try:
            await self._create_topic()
        except Exception as exc:  # answered COORDINATOR_NOT_AVAILABLE until it exists
            if str(exc) != self._creation_error:
                _log.warning("could not create __transaction_state", error=str(exc))
            self._creation_error = str(exc)
        else:
            _log.info("created __transaction_state")
            self._creation_error = None

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
        tasks = [
            *self._loads.values(),
            *self._housekeeping.values(),
            *([self._creation] if self._creation is not None else []),
        ]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._loads.clear()
