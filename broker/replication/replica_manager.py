"""The partitions this broker leads, kept in step with the metadata by the replica transitions.

As the metadata loader replays the metadata log, :class:`~broker.replication.transitions.ReplicaTransitions`
calls :meth:`ReplicaManager.lead` for each partition this node comes to lead (its log is opened, or
created, with its producer state rebuilt), :meth:`ReplicaManager.stop_leading` when leadership moves
away, and :meth:`ReplicaManager.on_topic_deleted` when a topic goes (files included). Request
handlers look partitions up here and ask :meth:`partition_error` which Kafka error a partition they
cannot serve deserves.

A partition whose log cannot be created or opened (disk error, a directory left by an older topic
of the same name) is reported as KAFKA_STORAGE_ERROR; its files are never deleted automatically.

Partitions are opened with the broker's ``replica.lag.time.max.ms``, the AlterPartition sender and
the ISR eligibility check given here; :meth:`ReplicaManager.maybe_shrink_isr` is the body of Kafka's
periodic "isr-expiration" task (every ``replica.lag.time.max.ms / 2``).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Hashable, Iterable

import structlog

from broker.replication.keyed_waiters import KeyedWaiters
from broker.replication.partition import AlterPartitionSender, Partition
from broker.replication.replica_state import BrokerEligibility
from metadata.topics import PartitionState, TopicLookup, TopicState
from protocol.error_codes import ErrorCode
from protocol.errors import ProtocolError
from server_common.config import (
    BrokerConfig,
    BrokerConfigLayers,
    ConfigError,
    effective_topic_configs,
    to_log_config,
)
from storage.clock import Clock
from storage.config import LogConfig
from storage.errors import StorageError, is_log_dir_full
from storage.log_manager import LogManager

_log = structlog.get_logger("kipling.replica_manager")

PartitionListener = Callable[[Partition], None]
LeadershipListener = Callable[[Partition, bool], None]
"""Told when this broker starts (True) or stops (False) leading a partition."""
TopicPartition = tuple[str, int]


class ReplicaManager:
    """Partitions led here, by name and by topic id."""

    def __init__(
        self,
        log_manager: LogManager,
        topics: TopicLookup,
        node_id: int,
        broker_config: BrokerConfig,
        clock: Clock,
        *,
        alter_partition: AlterPartitionSender | None = None,
        broker_eligibility: BrokerEligibility | None = None,
        broker_layers: Callable[[], BrokerConfigLayers] | None = None,
    ) -> None:
        """``alter_partition`` and ``broker_eligibility`` go to every partition (see :class:`Partition`);
        ``topics`` (the broker's metadata image) answers lookups. ``broker_layers`` gives the broker
        config with the dynamic configs on top (default: the static config alone), which topics'
        settings resolve over."""
        self._log_manager = log_manager
        self._alter_partition = alter_partition
        self._broker_eligibility = broker_eligibility
        self._topics = topics
        self._node_id = node_id
        self._config = broker_config
        self._broker_layers = broker_layers or (lambda: BrokerConfigLayers(broker_config))
        self._clock = clock
        self._partitions: dict[TopicPartition, Partition] = {}
        self._by_id: dict[tuple[uuid.UUID, int], Partition] = {}
        self._failed: set[TopicPartition] = set()
        self._listeners: list[PartitionListener] = []
        self._leadership_listeners: list[LeadershipListener] = []
        self._taking_lead_waiters = KeyedWaiters()
        _log.info("replica manager started", node_id=node_id)

    # -- lookups ---------------------------------------------------------------------------------

    @property
    def node_id(self) -> int:
        return self._node_id

    @property
    def log_manager(self) -> LogManager:
        """The node's logs, led and (as external entries) followed: for reading what they hold."""
        return self._log_manager

    def get_partition(self, topic: str, index: int) -> Partition | None:
        return self._partitions.get((topic, index))

    def get_partition_by_id(self, topic_id: uuid.UUID, index: int) -> Partition | None:
        return self._by_id.get((topic_id, index))

    def get_partition_by_key(self, key: Hashable) -> Partition | None:
        """The partition whose :attr:`Partition.key` is ``key`` (what purgatories watch)."""
        if not isinstance(key, tuple):
            return None  # keys are (topic, index) tuples: no partition has another
        return self._partitions.get(key)

    def partitions(self) -> list[Partition]:
        return list(self._partitions.values())

    def partition_error(self, topic: str, index: int) -> ErrorCode:
        """Why this broker cannot serve a partition it has no Partition for.

        UNKNOWN_TOPIC_OR_PARTITION when the topic or index does not exist, KAFKA_STORAGE_ERROR when
        its log failed here, NOT_LEADER_OR_FOLLOWER when another broker leads it.
        """
        state = self.partition_state(topic, index)
        if state is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        if (topic, index) in self._failed:
            return ErrorCode.KAFKA_STORAGE_ERROR
        return ErrorCode.NOT_LEADER_OR_FOLLOWER

    def taking_lead(self, topic: str, index: int) -> bool:
        """The metadata names this broker the partition's leader, but it does not lead it yet.

        The window between the metadata record and the partition led here: the follower process
        hands the log back (an IPC round trip, a flush, a snapshot) before the broker opens it. Kafka
        makes a replica leader in the same step that publishes the metadata; here clients that
        learned of the new leader from any broker's Metadata can reach it inside the window.
        """
        key = (topic, index)
        if key in self._partitions or key in self._failed:
            return False
        state = self.partition_state(topic, index)
        return state is not None and state.leader_id == self._node_id

    async def wait_until_led(self, topic: str, index: int, timeout_s: float) -> None:
        """While :meth:`taking_lead`, wait (at most ``timeout_s``) for the replica transitions to be
        done with the partition: led here, or failed (the caller then answers what
        :meth:`partition_error` says)."""
        if self.taking_lead(topic, index):
            await self._taking_lead_waiters.wait((topic, index), timeout_s)

    def mark_failed(self, topic: str, index: int) -> None:
        """Taking the lead of this partition failed (its log could not be taken back or opened): it
        answers KAFKA_STORAGE_ERROR until newer metadata gives it to this broker again or elsewhere."""
        if (topic, index) not in self._partitions:
            self._failed.add((topic, index))

    def transition_done(self, topic: str, index: int) -> None:
        """The replica transitions finished with this partition (led, followed or failed): wake the
        requests that waited in :meth:`wait_until_led`."""
        self._taking_lead_waiters.wake((topic, index))

    def partition_state(self, topic: str, index: int) -> PartitionState | None:
        """The metadata of a partition (its leader and epoch), whoever leads it."""
        topic_state = self._topics.get(topic)
        return None if topic_state is None else topic_state.partitions.get(index)

    def add_partition_listener(self, fn: PartitionListener) -> None:
        """``fn(partition)`` runs after every change of any partition, including ones created later."""
        self._listeners.append(fn)
        for partition in self._partitions.values():
            partition.add_listener(fn)

    def add_leadership_listener(self, fn: LeadershipListener) -> None:
        """``fn(partition, True)`` once this broker leads a partition (at once for those it leads
        now), ``fn(partition, False)`` when it stops leading it or the partition is deleted.

        The group coordinator moves with leadership of ``__consumer_offsets`` this way.
        """
        self._leadership_listeners.append(fn)
        for partition in list(self._partitions.values()):
            fn(partition, True)

    def _tell_leadership(self, partition: Partition, led: bool) -> None:
        for listener in self._leadership_listeners:
            try:
                listener(partition, led)
            except Exception:
                _log.exception("leadership listener failed", topic=partition.topic, partition=partition.index)

    # -- topic deletion --------------------------------------------------------------------------

    def on_topic_deleted(self, topic: TopicState) -> None:
        """Remove the partitions first (waiters then find them gone), then delete their logs."""
        for index in sorted(topic.partitions):
            key = (topic.name, index)
            self._failed.discard(key)
            partition = self._partitions.pop(key, None)
            if partition is not None:
                self._by_id.pop((partition.topic_id, index), None)
                partition.mark_removed()
                self._tell_leadership(partition, False)
            try:
                self._log_manager.delete_log(topic.name, index)
            except (OSError, StorageError):
                _log.exception("could not delete log", topic=topic.name, partition=index)
        _log.info("topic partitions removed", topic=topic.name, partitions=len(topic.partitions))

    # -- creation --------------------------------------------------------------------------------

    def _create_partitions(self, topic: TopicState, states: Iterable[PartitionState]) -> None:
        led = [state for state in states if state.leader_id == self._node_id]
        if not led:
            return
        try:
            log_config, min_isr = self._topic_settings(topic)
        except ConfigError:
            _log.exception("invalid topic configuration", topic=topic.name)
            self._failed.update((topic.name, state.partition) for state in led)
            return
        for state in led:
            self._create_partition(topic, state, log_config, min_isr)

    def _topic_settings(self, topic: TopicState) -> tuple[LogConfig, int]:
        layers = self._broker_layers()
        log_config = to_log_config(topic.configs, layers)
        min_isr = int(effective_topic_configs(topic.configs, layers)["min.insync.replicas"])
        return log_config, min_isr

    def reconfigure_topic(self, topic: TopicState) -> int:
        """A dynamic config change of ``topic`` (or of the broker defaults it inherits): the
        partitions led here take the new LogConfig and min.insync.replicas at once (the log reads
        it at its next append, roll or retention pass; an acks=-1 produce checks the new minimum
        from its next append). Returns how many partitions changed."""
        return self.reconfigure_topics([topic])

    def reconfigure_topics(self, topics: Iterable[TopicState]) -> int:
        """:meth:`reconfigure_topic` for many topics (every topic, when a broker default changed),
        with one pass over the led partitions rather than one per topic."""
        wanted = {topic.name: topic for topic in topics}
        led: dict[str, list[Partition]] = {}
        for (name, _), partition in self._partitions.items():
            if name in wanted:
                led.setdefault(name, []).append(partition)
        return sum(self._reconfigure(wanted[name], partitions) for name, partitions in led.items())

    def _reconfigure(self, topic: TopicState, led: list[Partition]) -> int:
        try:
            log_config, min_isr = self._topic_settings(topic)
        except ConfigError:
            _log.exception("invalid topic configuration: keeping the current one", topic=topic.name)
            return 0
        changed = 0
        for partition in led:
            if partition.log.config != log_config or partition.configured_min_insync_replicas != min_isr:
                partition.log.reconfigure(log_config)
                partition.configured_min_insync_replicas = min_isr
                changed += 1
        return changed

    def _create_partition(
        self, topic: TopicState, state: PartitionState, log_config: LogConfig, min_isr: int
    ) -> None:
        key = (topic.name, state.partition)
        if key in self._partitions:
            return
        try:
            partition = self._open_partition(topic, state, log_config, min_isr)
        except (OSError, StorageError, ProtocolError, ValueError) as exc:
            if is_log_dir_full(exc):  # an operational condition, said in one line: no traceback
                _log.error(
                    "cannot open partition", topic=topic.name, partition=state.partition, error=str(exc)
                )
            else:
                _log.exception("cannot open partition", topic=topic.name, partition=state.partition)
            self._failed.add(key)
            return
        self._failed.discard(key)
        for listener in self._listeners:
            partition.add_listener(listener)
        self._partitions[key] = partition
        self._by_id[(topic.topic_id, state.partition)] = partition
        if not partition.is_offline:  # damaged while taking the lead: it serves nobody, it resigns
            self._tell_leadership(partition, True)

    def _open_partition(
        self, topic: TopicState, state: PartitionState, log_config: LogConfig, min_isr: int
    ) -> Partition:
        log = self._log_manager.get_or_create_log(topic.name, state.partition, topic.topic_id, log_config)
        if log.config != log_config:
            log.config = log_config  # a log loaded at start-up got the broker defaults
        return Partition.open(
            log,
            node_id=self._node_id,
            topic_id=topic.topic_id,
            leader_epoch=state.leader_epoch,
            partition_epoch=state.partition_epoch,
            replicas=state.replicas,
            isr=state.isr,
            min_insync_replicas=min_isr,
            clock=self._clock,
            producer_id_expiration_ms=self._config.producer_id_expiration_ms,
            replica_lag_time_max_ms=self._config.replica_lag_time_max_ms,
            alter_partition=self._alter_partition,
            broker_eligibility=self._broker_eligibility,
            verify_transactions=self._config.transaction_partition_verification_enable,
        )

    # -- leadership changes ------------------------------------------------------------------

    def lead(self, topic: TopicState, state: PartitionState) -> Partition | None:
        """Open and lead one partition assigned here (its log is created if new); None if it failed."""
        self._create_partitions(topic, [state])
        return self._partitions.get((topic.name, state.partition))

    def stop_leading(self, topic: str, index: int) -> bool:
        """This broker no longer leads the partition: waiters are answered, the log is left open in
        the LogManager for whoever takes it next. False if it was not led here."""
        partition = self._partitions.pop((topic, index), None)
        self._failed.discard((topic, index))
        if partition is None:
            return False
        self._by_id.pop((partition.topic_id, index), None)
        partition.make_follower()
        self._tell_leadership(partition, False)
        partition.close()
        return True

    # -- maintenance -----------------------------------------------------------------------------

    def run_retention(self) -> int:
        """Apply retention to every log, then let partitions report moved log start offsets."""
        deleted = self._log_manager.run_retention()
        for partition in list(self._partitions.values()):
            partition.after_retention()
        return deleted

    def maybe_shrink_isr(self) -> int:
        """The "isr-expiration" task: propose ISR shrinks where followers fell out of sync.

        O(partitions led here), every ``replica.lag.time.max.ms / 2``; returns how many partitions
        proposed a shrink. A partition with nothing to shrink also retries the expansion of a
        caught-up follower (a refused proposal, or one blocked while another was in flight): Kafka
        retries at the follower's next fetch, which an idle partition of a fetch session never
        gets here. Idle partitions need no walk of the sessions: their followers' state is settled
        when the idle stretch ends (see :mod:`broker.fetch_session.cache`).
        """
        now = self._clock.time_ms()
        shrunk = 0
        for partition in list(self._partitions.values()):
            if partition.maybe_shrink_isr(now):
                shrunk += 1
            else:
                partition.maybe_expand_isr(now)
        return shrunk

    def on_brokers_unfenced(self, broker_ids: Iterable[int]) -> int:
        """Retry ISR expansion where a follower's broker became eligible again; returns proposals.

        A follower that caught up while its broker was fenced was not eligible then; on an idle
        partition no fetch of its would re-check, and without this it would wait for the periodic
        ISR check (``replica.lag.time.max.ms / 2``). O(partitions led here), once per unfencing.
        """
        unfenced = set(broker_ids)
        now = self._clock.time_ms()
        return sum(
            1
            for partition in list(self._partitions.values())
            if unfenced.intersection(partition.replicas) and partition.maybe_expand_isr(now)
        )

    def remove_expired_producers(self) -> int:
        """Forget producers idle for producer.id.expiration.ms in every partition; returns how many."""
        now = self._clock.time_ms()
        return sum(len(p.remove_expired_producers(now)) for p in self._partitions.values())

    def shutdown(self) -> None:
        """Stop leading and snapshot producer state; call before ``LogManager.shutdown``."""
        for partition in self._partitions.values():
            partition.close()
        _log.info("replica manager shut down", partitions=len(self._partitions))
