"""Acting on metadata changes: lead, follow, or drop each partition this broker holds a replica of.

Kafka's ReplicaManager.applyDelta, for a broker whose followed partitions live in follower
processes. For every partition in a metadata delta that names this broker as a replica:

* **leader here**: a partition already led gets the new epochs, replicas and ISR
  (``Partition.make_leader``); one followed by a follower process is first taken back from it (the
  process stops fetching, flushes, closes the log and reports its final offsets; only then does the
  broker open the log and become leader, so the files never have two writers); otherwise the log
  is opened (created if new) and led.
* **follower here**: a partition led here stops being led (parked fetches and produces are answered
  NOT_LEADER_OR_FOLLOWER, the producer state is snapshotted, the log is released by the broker's
  LogManager) and is handed to the follower process chosen by Kafka's fetcher hash, with the
  leader's inter-broker address. A followed partition whose leader or leader epoch changed is
  re-added with the new leader; the process moves it to that leader's fetcher.
* **no leader** (every ISR member fenced): a partition led here stops being led; its log stays
  with the broker until a leader is elected.
* **deleted topic**: its partitions are removed wherever they are and their logs deleted.
* **no longer a replica here** (a reassignment completed or was cancelled): the partition stops
  being led or followed and its log is deleted; also when a metadata snapshot replaces the image.

At start-up the broker first catches up with the whole metadata log, then applies one
"everything exists" delta (:meth:`ReplicaTransitions.apply_initial`); logs on disk that the
metadata does not know are deleted then, not earlier, so a topic is never mistaken for a stray
because its records had not been replayed yet.

Transitions are applied one delta at a time, in metadata order, by the metadata loader's task.
Opening or creating a log is synchronous disk work (about 2 ms, more with fsyncs), so a delta that
creates thousands of partitions, or the initial one at start-up, yields to the event loop every
:data:`YIELD_EVERY_S` of it: requests keep being served meanwhile, and a partition not taken up yet
answers as one this broker does not lead (clients retry), as in Kafka, where another thread
applies the delta.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable, Iterable

import structlog

from broker.replication.followers import FollowedPartition, FollowerSupervisor
from broker.replication.replica_manager import ReplicaManager
from metadata.image import MetadataDelta, MetadataImage
from metadata.log_topic import METADATA_TOPIC
from metadata.topics import NO_LEADER, PartitionState, TopicState
from storage.config import LogConfig
from storage.errors import LogDirFullError, StorageError
from storage.handover import LogHandover
from storage.log_manager import LogManager

__all__ = ["ReplicaTransitions"]

TopicPartition = tuple[str, int]

_log = structlog.get_logger("kipling.transitions")

YIELD_EVERY_S = 0.05
"""Longest stretch of partition transitions between two yields to the event loop."""


class ReplicaTransitions:
    """Applies metadata deltas to the partitions led here and those the follower processes own."""

    def __init__(
        self,
        replicas: ReplicaManager,
        log_manager: LogManager,
        supervisor: FollowerSupervisor,
        *,
        node_id: int,
        inter_broker_listener: str,
        log_config: Callable[[TopicState], LogConfig],
    ) -> None:
        self._replicas = replicas
        self._log_manager = log_manager
        self._supervisor = supervisor
        self._node_id = node_id
        self._listener = inter_broker_listener
        self._log_config = log_config
        self._image: MetadataImage | None = None
        self._logger = _log.bind(broker_id=node_id)
        self._busy_since = time.monotonic()

    async def apply_initial(self, image: MetadataImage, *, delete_strays: bool = True) -> None:
        """The first publication after catching up: delete stray logs, then take up every partition.

        ``delete_strays`` False when the image is only this node's local copy (no controller was
        reachable): a log of a topic created after the copy's end is not a stray. The strays are
        deleted once the metadata caught up (:meth:`delete_strays`)."""
        self._image = image
        if delete_strays:
            await self._remove_unassigned(image)
            self.delete_strays(image)
        for topic in image.all():
            await self._apply_partitions(topic, topic.sorted_partitions())

    async def apply(self, delta: MetadataDelta, image: MetadataImage) -> None:
        self._image = image
        for topic in delta.topics_deleted:
            await self._delete_topic(topic)
        for topic in delta.topics_created:
            await self._apply_partitions(topic, topic.sorted_partitions())
        for added in delta.partitions_created:
            await self._apply_partitions(added.topic, added.partitions)
        for change in delta.partitions_changed:
            changed = image.get_by_id(change.topic_id)
            if changed is None:
                continue
            if self._node_id in change.old.replicas and self._node_id not in change.new.replicas:
                await self._remove_replica(changed, change.new.partition)
            else:
                await self._apply_partitions(changed, [change.new])
        moved = {registration.broker_id for registration in delta.brokers_registered}
        if moved:
            await self._refollow_leaders(moved, image)
        if delta.brokers_unfenced:
            self._replicas.on_brokers_unfenced(delta.brokers_unfenced)

    # -- per partition -----------------------------------------------------------------------------

    async def _apply_partitions(self, topic: TopicState, states: Iterable[PartitionState]) -> None:
        for state in states:
            if self._node_id not in state.replicas:
                continue
            try:
                if state.leader_id == self._node_id:
                    await self._become_leader(topic, state)
                else:
                    await self._become_follower(topic, state)
            except LogDirFullError as exc:  # an operational condition, not a bug: one line, no traceback
                self._logger.error(
                    "partition transition failed", topic=topic.name, partition=state.partition, error=str(exc)
                )
                self._fail_transition(topic, state)
            except Exception:  # disk, IPC, a follower process that cannot start: this partition only
                # the loader must go on applying metadata; the partition's error is in the log
                self._logger.exception(
                    "partition transition failed", topic=topic.name, partition=state.partition
                )
                self._fail_transition(topic, state)
            finally:
                self._replicas.transition_done(topic.name, state.partition)
            await self._yield_now_and_then()

    def _fail_transition(self, topic: TopicState, state: PartitionState) -> None:
        if state.leader_id == self._node_id:
            self._replicas.mark_failed(topic.name, state.partition)

    async def _yield_now_and_then(self) -> None:
        """Let the event loop serve requests once transitions have held it for YIELD_EVERY_S."""
        if time.monotonic() - self._busy_since >= YIELD_EVERY_S:
            await asyncio.sleep(0)
            self._busy_since = time.monotonic()

    async def _become_leader(self, topic: TopicState, state: PartitionState) -> None:
        partition = self._replicas.get_partition(topic.name, state.partition)
        if partition is not None:
            partition.make_leader(state.leader_epoch, state.partition_epoch, state.replicas, state.isr)
            return
        tp = (topic.name, state.partition)
        if tp in self._supervisor.assignments:
            handovers = await self._supervisor.remove_partitions([tp])
            self._log_manager.adopt_log(handovers[tp], self._log_config(topic))
        self._replicas.lead(topic, state)
        self._logger.info(
            "became leader", topic=topic.name, partition=state.partition, leader_epoch=state.leader_epoch
        )

    async def _become_follower(self, topic: TopicState, state: PartitionState) -> None:
        tp = (topic.name, state.partition)
        if self._replicas.stop_leading(topic.name, state.partition):
            self._logger.info(
                "stopped leading", topic=topic.name, partition=state.partition, leader=state.leader_id
            )
        followed = self._supervisor.assignments.get(tp)
        if state.leader_id == NO_LEADER:
            return  # nobody to fetch from; a follower process keeps retrying its last leader
        endpoint = self._leader_endpoint(state.leader_id)
        if endpoint is None:
            self._logger.warning(
                "leader has no inter-broker endpoint", topic=topic.name, leader=state.leader_id
            )
            return
        host, port = endpoint
        if followed is not None:
            if (followed.leader_id, followed.leader_epoch, followed.leader_host, followed.leader_port) == (
                state.leader_id,
                state.leader_epoch,
                host,
                port,
            ):
                return
            handover = followed.handover
        else:
            handover = self._release(topic, state)
        await self._supervisor.add_partitions(
            [
                FollowedPartition(
                    handover,
                    state.leader_id,
                    host,
                    port,
                    state.leader_epoch,
                    state.partition_epoch,
                    self._log_config(topic),
                )
            ]
        )
        self._logger.info(
            "following",
            topic=topic.name,
            partition=state.partition,
            leader=state.leader_id,
            epoch=state.leader_epoch,
        )

    def _release(self, topic: TopicState, state: PartitionState) -> LogHandover:
        """The log handed to a follower process: released from the LogManager (created if new)."""
        if self._log_manager.get_log(topic.name, state.partition) is None:
            self._log_manager.get_or_create_log(
                topic.name, state.partition, topic.topic_id, self._log_config(topic)
            )
        return self._log_manager.release_log(topic.name, state.partition)

    def _leader_endpoint(self, leader_id: int) -> tuple[str, int] | None:
        registration = self._image.broker(leader_id) if self._image is not None else None
        if registration is None:
            return None
        for endpoint in registration.endpoints:
            if endpoint.name == self._listener:
                return endpoint.host, endpoint.port
        return None

    async def _refollow_leaders(self, broker_ids: set[int], image: MetadataImage) -> None:
        """A leader that re-registered may listen elsewhere now: re-add the partitions it leads.

        Partitions replicated here that it leads but no follower process has (skipped while it had
        no endpoint for the inter-broker listener) are taken up now too.
        """
        assignments = self._supervisor.assignments
        for tp, followed in list(assignments.items()):
            if followed.leader_id not in broker_ids:
                continue
            topic = image.get(tp[0])
            state = topic.partitions.get(tp[1]) if topic is not None else None
            if topic is not None and state is not None and state.leader_id == followed.leader_id:
                await self._become_follower(topic, state)
        for topic in image.all():
            unfollowed = [
                state
                for state in topic.sorted_partitions()
                if state.leader_id in broker_ids
                and state.leader_id != self._node_id
                and (topic.name, state.partition) not in assignments
            ]
            if unfollowed:
                await self._apply_partitions(topic, unfollowed)

    # -- deletion ----------------------------------------------------------------------------------

    async def _remove_replica(self, topic: TopicState | str, index: int) -> None:
        """A reassignment moved this partition off this broker: stop leading or following it and
        delete its log (Kafka's stopPartitions with deletion, for a replica no longer assigned).
        ``topic`` is the topic's name alone when the image no longer has it (a snapshot)."""
        name = topic if isinstance(topic, str) else topic.name
        tp = (name, index)
        try:
            if tp in self._supervisor.assignments:
                handovers = await self._supervisor.remove_partitions([tp])
                config = None if isinstance(topic, str) else self._log_config(topic)
                self._log_manager.adopt_log(handovers[tp], config)
            self._replicas.stop_leading(name, index)
            if self._log_manager.get_log(name, index) is not None:
                self._log_manager.delete_log(name, index)
            self._logger.info("replica removed: log deleted", topic=name, partition=index)
        except Exception:  # disk, IPC: this partition only; its files stay and are a stray at restart
            self._logger.exception("could not remove a replica", topic=name, partition=index)
        finally:
            self._replicas.transition_done(name, index)

    async def _remove_unassigned(self, image: MetadataImage) -> None:
        """A whole image over a running broker (a metadata snapshot installed after it fell behind)
        comes without a delta: a partition led or followed here that the image no longer assigns
        here (a reassignment completed or was cancelled meanwhile, or its topic was deleted, maybe
        re-created under another id) is removed as the delta would have removed it (Kafka's snapshot
        delta lists it among the local deletes). Otherwise a follower process would go on fetching
        it, and a led one would lose its log while still led (delete_strays)."""
        held: dict[TopicPartition, uuid.UUID | None] = {
            tp: followed.handover.topic_id for tp, followed in self._supervisor.assignments.items()
        }
        held.update({(p.topic, p.index): p.topic_id for p in self._replicas.partitions()})
        for (name, index), topic_id in sorted(held.items()):
            topic = image.get(name)
            state = topic.partitions.get(index) if topic is not None else None
            if topic is None or state is None or (topic_id is not None and topic_id != topic.topic_id):
                await self._remove_replica(name, index)
            elif self._node_id not in state.replicas:
                await self._remove_replica(topic, index)

    async def _delete_topic(self, topic: TopicState) -> None:
        followed = [
            (topic.name, index)
            for index in topic.partitions
            if (topic.name, index) in self._supervisor.assignments
        ]
        if followed:
            handovers = await self._supervisor.remove_partitions(followed)
            for handover in handovers.values():
                try:
                    self._log_manager.adopt_log(handover, self._log_config(topic))
                except (OSError, StorageError):  # its files stay; the rest of the delta goes on
                    self._logger.exception(
                        "could not take back the log of a deleted partition",
                        topic=handover.topic,
                        partition=handover.partition,
                    )
        self._replicas.on_topic_deleted(topic)

    def delete_strays(self, image: MetadataImage) -> None:
        """Delete the logs of partitions ``image`` does not have (or marks them stray)."""
        for log in self._log_manager.all_logs():
            if log.topic == METADATA_TOPIC:
                continue
            topic = image.get(log.topic)
            try:
                state = topic.partitions.get(log.partition) if topic is not None else None
                if state is not None and self._node_id not in state.replicas:
                    self._logger.warning(
                        "deleting the log of a partition not assigned here (reassigned away)",
                        topic=log.topic,
                        partition=log.partition,
                    )
                    self._log_manager.delete_log(log.topic, log.partition)
                elif topic is None or log.partition not in topic.partitions:
                    self._logger.warning(
                        "deleting the log of a partition the metadata does not know",
                        topic=log.topic,
                        partition=log.partition,
                    )
                    self._log_manager.delete_log(log.topic, log.partition)
                elif log.topic_id is not None and log.topic_id != topic.topic_id:
                    self._log_manager.mark_stray(log.topic, log.partition)
            except (OSError, StorageError):  # the partitions are still taken up
                self._logger.exception(
                    "could not remove a stray log", topic=log.topic, partition=log.partition
                )
