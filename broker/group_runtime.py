"""Where the group coordinator meets the broker: ``__consumer_offsets``, its leadership, its log.

The coordinator (:mod:`coordinator.group`) is free of I/O. This module gives it what Kafka's
GroupMetadataManager and KafkaApis give theirs:

* **Its log**: :class:`OffsetsTopicGroupLog` appends the coordinator's records as one batch to a
  partition of ``__consumer_offsets`` through the broker's own produce path, with acks=-1 and
  ``offsets.commit.timeout.ms``, as the internal admin client (the only client allowed to write to
  internal topics), and reports the outcome to the coordinator.
* **Moving with leadership**: the coordinator of a group is the leader of the partition its id
  hashes to. :class:`GroupCoordinatorRuntime` listens to the replica manager: when this broker
  starts leading a partition of ``__consumer_offsets`` it loads that partition's groups and offsets
  from the log (requests for them answer COORDINATOR_LOAD_IN_PROGRESS meanwhile); when it stops
  leading it, the coordinator unloads them and waiting members are told NOT_COORDINATOR, so they
  look up the new coordinator.
* **FindCoordinator**: the leader of the group's partition, on the listener the request came in on.
  The first lookup creates ``__consumer_offsets`` (``offsets.topic.num.partitions``,
  ``offsets.topic.replication.factor``, compacted) and is answered COORDINATOR_NOT_AVAILABLE, which
  clients retry, as Kafka does.
* **Offset retention**: :meth:`GroupCoordinatorRuntime.expire_offsets` every
  ``offsets.retention.check.interval.ms`` (a periodic task of the entry point).

Loading reads the partition up to its log end in chunks, yielding to the event loop between
chunks, so a large offsets partition does not stall the broker. ``__consumer_offsets`` is
compacted (``cleanup.policy=compact``) by the log cleaner, so a load replays the latest record of
each key plus the dirty tail (the coordinator keeps the last value of each key).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

import structlog

from broker.handlers.metadata import BrokerEndpoint
from broker.internal_log import TxnMarkerEntry, read_partition
from broker.internal_topics import (
    PartitionLoads,
    TopicCreation,
    TopicCreator,
    cancel_all,
    partition_leader_endpoint,
)
from broker.produce.service import (
    ADMIN_CLIENT_ID,
    PartitionOutcome,
    ProducePartitionData,
    ProduceRequest,
    ProduceService,
)
from broker.replication.partition import Partition
from coordinator.group import GroupCoordinator
from coordinator.group.log import (
    AppendCallback,
    LoggedEntry,
    LoggedRecord,
    LoggedTxnMarker,
    OffsetsRecord,
    TxnProducer,
)
from metadata import topic_names
from metadata.topics import TopicLookup
from protocol.error_codes import ErrorCode
from protocol.records import Record, build_batch
from protocol.sentinels import UNKNOWN_OFFSET

OFFSETS_TOPIC = topic_names.GROUP_METADATA_TOPIC
OFFSETS_TOPIC_CONFIGS = {
    "cleanup.policy": "compact",
    "segment.bytes": str(100 * 1024 * 1024),
    "compression.type": "producer",
}
"""Kafka's GroupMetadataManager.offsetsTopicConfigs: ``compression.type=producer`` keeps a broker-wide
``compression.type`` from recompressing the coordinator's own batches."""
PRODUCE_VERSION = 9

_log = structlog.get_logger("kipling.groups.runtime")


OffsetsTopicCreator = TopicCreator
"""Creates ``__consumer_offsets`` (raises KafkaError when it cannot)."""


class OffsetsTopicGroupLog:
    """The coordinator's :class:`~coordinator.group.log.GroupLog` on the broker's produce path.

    The batch is appended to the local log during :meth:`append`, and only the wait for the
    acks=-1 commit runs later in a task. Kafka's GroupMetadataManager appends on the request thread
    too, before the request that caused the write is answered. Starting the append in a task
    instead lets the answer overtake it: the LeaveGroup that empties a group was answered before the
    Empty generation reached the log, and a broker killed in between brought the departed member
    back when it loaded the group (it then held the group until its session expired, and a new
    member with another assignor was refused with INCONSISTENT_GROUP_PROTOCOL).

    A batch the log refuses (too large, not the leader, ...) is answered before :meth:`append`
    returns, as :class:`~coordinator.group.log.GroupLog` requires: the coordinator applies a
    write's records at once and takes them back when the write fails, and it must do so before it
    applies the next operation on top of them. Answered from the task, a refusal came after a
    later heartbeat had been computed from the refused records and written: the rollback then
    also took back that heartbeat, which had been answered as written and was in the log.
    """

    def __init__(self, produce: ProduceService, commit_timeout_ms: int = 5000) -> None:
        self._produce = produce
        self._timeout_ms = commit_timeout_ms
        self._appends: set[asyncio.Task[None]] = set()

    def append(
        self,
        partition: int,
        records: Sequence[OffsetsRecord],
        timestamp_ms: int,
        callback: AppendCallback,
        producer: TxnProducer | None = None,
    ) -> None:
        """Append now (appends of one partition land in call order); call back later, from a task,
        once the batch is committed or failed, or at once if the log refused it. A transactional
        batch (TxnOffsetCommit) carries the producer's id and epoch and no sequence, as Kafka's
        coordinator writes it."""
        batch = _offsets_batch(records, timestamp_ms, producer)
        request = ProduceRequest(
            version=PRODUCE_VERSION,
            client_id=ADMIN_CLIENT_ID,
            acks=-1,
            timeout_ms=self._timeout_ms,
            transactional_id=None,
            origin="coordinator",
            partitions=[ProducePartitionData(OFFSETS_TOPIC, partition, batch)],
        )
        try:
            # ProduceService.produce() in two halves: the append now, the acks=-1 wait in a task.
            verified = {} if producer is None or producer.verification is None else {0: producer.verification}
            outcomes = self._produce.append(request, verified)
        except Exception:
            _log.exception("append to __consumer_offsets failed", partition=partition)
            callback(ErrorCode.UNKNOWN_SERVER_ERROR, UNKNOWN_OFFSET)
            return
        [outcome] = outcomes
        if outcome.error_code is not ErrorCode.NONE or outcome.result is None:
            callback(outcome.error_code or ErrorCode.UNKNOWN_SERVER_ERROR, UNKNOWN_OFFSET)
            return
        task = asyncio.get_running_loop().create_task(self._complete(partition, outcomes, callback))
        self._appends.add(task)
        task.add_done_callback(self._appends.discard)

    async def _complete(
        self, partition: int, outcomes: list[PartitionOutcome], callback: AppendCallback
    ) -> None:
        """The batch is in the local log: wait until it is committed (acks=-1) or failed."""
        try:
            await self._produce.wait_for_commit(self._timeout_ms, outcomes)
        except Exception:
            _log.exception("waiting for __consumer_offsets to commit failed", partition=partition)
            callback(ErrorCode.UNKNOWN_SERVER_ERROR, UNKNOWN_OFFSET)
            return
        [outcome] = outcomes
        if outcome.error_code != ErrorCode.NONE or outcome.result is None:
            callback(outcome.error_code or ErrorCode.UNKNOWN_SERVER_ERROR, UNKNOWN_OFFSET)
        else:
            callback(ErrorCode.NONE, outcome.result.base_offset)


def _offsets_batch(
    records: Sequence[OffsetsRecord], timestamp_ms: int, producer: TxnProducer | None
) -> bytes:
    built = [Record(r.value, r.key, timestamp=timestamp_ms) for r in records]
    if producer is None:
        return build_batch(built)
    return build_batch(
        built,
        producer_id=producer.producer_id,
        producer_epoch=producer.producer_epoch,
        is_transactional=True,
    )


class GroupCoordinatorRuntime:
    """Moves the coordinator with leadership of ``__consumer_offsets`` and locates coordinators."""

    def __init__(
        self,
        coordinator: GroupCoordinator,
        topics: TopicLookup,
        brokers: Callable[[str], Sequence[BrokerEndpoint]],
        create_offsets_topic: OffsetsTopicCreator,
    ) -> None:
        self.coordinator = coordinator
        self._topics = topics
        self._brokers = brokers
        self._creation = TopicCreation(OFFSETS_TOPIC, create_offsets_topic)
        self._loads = PartitionLoads()
        self._count_mismatch_logged = False

    # -- leadership ----------------------------------------------------------------------------------

    def on_leadership(self, partition: Partition, led: bool) -> None:
        """A ReplicaManager leadership listener: load or unload a partition of the offsets topic."""
        if partition.topic != OFFSETS_TOPIC:
            return
        self._match_partition_count()
        index = partition.index
        self._loads.cancel(index)
        if not led:
            self.coordinator.unload_partition(index)
            return
        self.coordinator.begin_loading(index)
        self._loads.start(index, self._load(partition))

    async def _load(self, partition: Partition) -> None:
        index = partition.index
        try:
            records = await _read_offsets_partition(partition)
        except asyncio.CancelledError:
            raise
        except Exception:
            # Never load it as empty: every group would lose its committed offsets, and consumers
            # would reset and commit that. Unloaded, its groups answer NOT_COORDINATOR; a damaged
            # log has resigned its leadership, and the next leader loads it.
            _log.exception(
                "loading __consumer_offsets failed: its groups stay unserved here", partition=index
            )
            self.coordinator.unload_partition(index)
            return
        self.coordinator.load_partition(index, records)
        if records:
            _log.info("group coordinator loaded partition", partition=index, records=len(records))

    # -- FindCoordinator -----------------------------------------------------------------------------

    async def find_group_coordinator(
        self, group_id: str, listener: str
    ) -> tuple[ErrorCode, BrokerEndpoint | None]:
        topic = self._topics.get(OFFSETS_TOPIC)
        if topic is None:
            self._creation.start()
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, None
        if not self._match_partition_count():
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, None
        return partition_leader_endpoint(
            topic, self.coordinator.partition_for(group_id), self._brokers(listener)
        )

    def _match_partition_count(self) -> bool:
        """Spread groups over the partitions ``__consumer_offsets`` has (see
        GroupCoordinator.adopt_partition_count); False while the two cannot be matched."""
        topic = self._topics.get(OFFSETS_TOPIC)
        if topic is None or not topic.partitions:
            return True
        count = len(topic.partitions)
        if count == self.coordinator.num_partitions:
            return True
        configured = self.coordinator.num_partitions
        try:
            self.coordinator.adopt_partition_count(count)
        except ValueError as exc:
            if not self._count_mismatch_logged:
                _log.error("__consumer_offsets changed partition count under loaded groups", error=str(exc))
                self._count_mismatch_logged = True
            return False
        _log.warning(
            "__consumer_offsets exists with another partition count than offsets.topic.num.partitions: "
            "groups are spread over the partitions it has",
            partitions=count,
            configured=configured,
        )
        return True

    # -- housekeeping --------------------------------------------------------------------------------

    def expire_offsets(self) -> int:
        return self.coordinator.expire_offsets()

    async def stop(self) -> None:
        await cancel_all([*self._loads.tasks(), *self._creation.tasks()])
        self._loads.clear()
        self.coordinator.shutdown()


async def _read_offsets_partition(partition: Partition) -> list[LoggedEntry]:
    """The partition's records and transaction markers, as the group coordinator loads them."""
    entries: list[LoggedEntry] = []
    for entry in await read_partition(partition):
        if isinstance(entry, TxnMarkerEntry):
            entries.append(LoggedTxnMarker(entry.offset, entry.producer_id, entry.commit))
        else:
            entries.append(LoggedRecord(entry.offset, entry.key, entry.value, entry.producer_id))
    return entries


def internal_topic_replication_factor(topic: str, configured: int, cluster_of_one: bool) -> int:
    """An internal topic's configured replication factor (``offsets.topic.replication.factor``,
    ``transaction.state.log.replication.factor``), or 1 on a cluster of one (a single node with no
    controller.quorum.voters): the quickstart's setting, whatever the file says, since no second
    broker can ever hold a replica there. In a cluster the setting stands, and Kafka's rule with
    it: creating the topic fails until that many brokers are registered."""
    if cluster_of_one and configured > 1:
        _log.info("single node: an internal topic gets one replica", topic=topic, configured=configured)
        return 1
    return configured
