"""ReplicaTransitions: metadata deltas make this broker lead, follow, stop leading or drop partitions.

Built as broker/cluster_node.py builds it: a real LogManager in a temporary directory, a real
ReplicaManager reading a real MetadataImage, and metadata made of real
records applied with ``MetadataImage.apply_batch``, so the deltas are the ones the loader publishes.
Only the FollowerSupervisor is faked (no process is started): it keeps the assignment table as the
real one does, and plays the follower process in-process when a test asks it to (it opens the
handed-over log, the test appends to it, and ``remove_partitions`` closes it and returns the final
offsets, as ``python -m follower`` does).
"""

from __future__ import annotations

import asyncio
import pathlib
import uuid
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

import pytest
from structlog.testing import capture_logs

from broker.produce.service import ProducePartitionData, ProduceRequest, ProduceService
from broker.replication import transitions as transitions_module
from broker.replication.followers import FollowedPartition
from broker.replication.partition import Partition
from broker.replication.replica_manager import ReplicaManager
from broker.replication.replica_state import IsrProposal
from broker.replication.transitions import ReplicaTransitions
from metadata.image import MetadataDelta, MetadataImage
from metadata.log_topic import METADATA_PARTITION, METADATA_TOPIC, METADATA_TOPIC_ID
from metadata.records import (
    BrokerEndpointRecord,
    ConfigRecord,
    ConfigResourceType,
    FenceBrokerRecord,
    MetadataRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    RemoveTopicRecord,
    TopicRecord,
    UnfenceBrokerRecord,
)
from metadata.topics import NO_LEADER, TopicState
from protocol.error_codes import ErrorCode
from protocol.records.builder import Record, build_batch
from server_common.config import BrokerConfig, load_config, to_log_config
from server_common.purgatory import DelayedOperationPurgatory
from storage.clock import FakeClock
from storage.config import LogConfig
from storage.errors import KiplingStorageError
from storage.handover import LogHandover, close_for_handover, open_handed_over_log
from storage.log import PartitionLog
from storage.log_manager import STRAY_DIR_SUFFIX, LogManager

NODE = 1
"""This broker."""
LISTENER = "REPLICATION"
"""The inter-broker listener name; every broker also has a PLAINTEXT (client) listener elsewhere."""
NOW = 1_700_000_000_000
BIG = 1 << 30
ORDERS = uuid.UUID(int=0x0D)
EVENTS = uuid.UUID(int=0x0E)

TopicPartition = tuple[str, int]


# -- metadata --------------------------------------------------------------------------------------


def host_of(broker_id: int) -> str:
    return f"broker-{broker_id}.internal"


def port_of(broker_id: int) -> int:
    """The inter-broker port a broker first registers with."""
    return 9000 + broker_id


def registration(
    broker_id: int, broker_epoch: int, port: int | None = None, *, inter_broker: bool = True
) -> RegisterBrokerRecord:
    """A broker listening for clients on PLAINTEXT and, unless told not to, for brokers on LISTENER."""
    port = port_of(broker_id) if port is None else port
    endpoints = [BrokerEndpointRecord("PLAINTEXT", f"clients-{broker_id}", 19000 + broker_id, 0)]
    if inter_broker:
        endpoints.append(BrokerEndpointRecord(LISTENER, host_of(broker_id), port, 0))
    return RegisterBrokerRecord(
        broker_id=broker_id,
        incarnation_id=uuid.UUID(int=broker_id * 1000 + broker_epoch),
        broker_epoch=broker_epoch,
        endpoints=tuple(endpoints),
        rack=None,
        fenced=False,
    )


def partition(
    topic_id: uuid.UUID,
    index: int,
    leader: int,
    *,
    replicas: Sequence[int] = (1, 2, 3),
    isr: Sequence[int] | None = None,
    leader_epoch: int = 0,
    partition_epoch: int = 0,
) -> PartitionRecord:
    return PartitionRecord(
        partition_id=index,
        topic_id=topic_id,
        replicas=tuple(replicas),
        isr=tuple(replicas if isr is None else isr),
        leader=leader,
        leader_epoch=leader_epoch,
        partition_epoch=partition_epoch,
    )


def change(
    topic_id: uuid.UUID,
    index: int,
    leader: int,
    *,
    leader_epoch: int,
    partition_epoch: int,
    replicas: Sequence[int] = (1, 2, 3),
    isr: Sequence[int] | None = None,
) -> PartitionChangeRecord:
    return PartitionChangeRecord(
        partition_id=index,
        topic_id=topic_id,
        replicas=tuple(replicas),
        isr=tuple(replicas if isr is None else isr),
        leader=leader,
        leader_epoch=leader_epoch,
        partition_epoch=partition_epoch,
    )


def topic(name: str, topic_id: uuid.UUID, *partitions: PartitionRecord) -> list[MetadataRecord]:
    return [TopicRecord(name, topic_id), *partitions]


class Metadata:
    """A MetadataImage fed with real records, one batch per :meth:`batch`, at increasing offsets."""

    def __init__(self) -> None:
        self.image = MetadataImage()
        self._next_offset = 0

    @property
    def next_offset(self) -> int:
        return self._next_offset

    def batch(self, *records: MetadataRecord | list[MetadataRecord]) -> MetadataDelta:
        """Apply the records (lists are flattened) as one batch; returns the batch's delta."""
        flat: list[MetadataRecord] = []
        for item in records:
            flat.extend(item if isinstance(item, list) else [item])
        offsets = range(self._next_offset, self._next_offset + len(flat))
        self._next_offset += len(flat)
        return self.image.apply_batch(zip(offsets, flat), epoch=1)

    def brokers(self, *broker_ids: int) -> MetadataDelta:
        """Register every broker with its first port (broker epoch = the record's offset)."""
        return self.batch(
            [registration(broker_id, self._next_offset + i) for i, broker_id in enumerate(broker_ids)]
        )


# -- the fake supervisor ----------------------------------------------------------------------------


class FakeSupervisor:
    """FollowerSupervisor's table and its add/remove semantics, with the follower process in-process.

    ``add_partitions`` keeps the known handover of a partition already followed (its log stays where
    it is); ``remove_partitions`` ignores partitions not followed and returns each removed one's
    handover: the final offsets of the log the "process" had open (closed here as the follower does),
    or the table's handover if the process never opened it.
    """

    def __init__(self, clock: FakeClock) -> None:
        self._clock = clock
        self._assignments: dict[TopicPartition, FollowedPartition] = {}
        self.added: list[FollowedPartition] = []
        """Every entry add_partitions received, in order (as sent, before the handover is kept)."""
        self.removed: list[TopicPartition] = []
        self.process_logs: dict[TopicPartition, PartitionLog] = {}
        """The logs the in-process "follower process" has open."""
        self.on_remove: list[Callable[[list[TopicPartition]], object]] = []
        """Callables run at the start of remove_partitions with the requested partitions."""

    @property
    def assignments(self) -> Mapping[TopicPartition, FollowedPartition]:
        return dict(self._assignments)

    async def add_partitions(self, entries: Iterable[FollowedPartition]) -> None:
        for entry in entries:
            self.added.append(entry)
            tp = entry.topic_partition
            known = self._assignments.get(tp)
            if known is not None:
                entry = replace(entry, handover=known.handover)
            self._assignments[tp] = entry

    async def remove_partitions(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, LogHandover]:
        tps = list(dict.fromkeys(tps))
        for hook in self.on_remove:
            hook(tps)
        out: dict[TopicPartition, LogHandover] = {}
        for tp in tps:
            entry = self._assignments.pop(tp, None)
            if entry is None:
                continue
            self.removed.append(tp)
            log = self.process_logs.pop(tp, None)
            out[tp] = close_for_handover(log) if log is not None else entry.handover
        return out

    def open_as_follower(self, tp: TopicPartition) -> PartitionLog:
        """Play the follower process: open the handed-over log as ``follower/service.py`` does."""
        entry = self._assignments[tp]
        log = open_handed_over_log(entry.handover, entry.log_config or LogConfig(), self._clock)
        self.process_logs[tp] = log
        return log

    def close_all(self) -> list[LogHandover]:
        """The follower process shuts down: every open log closed, its handover returned."""
        handovers = [close_for_handover(log) for log in self.process_logs.values()]
        self.process_logs.clear()
        return handovers


# -- one broker ------------------------------------------------------------------------------------


@dataclass
class Node:
    """Broker ``NODE``'s pieces, wired as ``build_cluster_broker`` wires them."""

    config: BrokerConfig
    clock: FakeClock
    metadata: Metadata
    log_manager: LogManager
    replicas: ReplicaManager
    supervisor: FakeSupervisor
    transitions: ReplicaTransitions
    closed: bool = False

    @property
    def image(self) -> MetadataImage:
        return self.metadata.image

    async def initial(self) -> None:
        await self.transitions.apply_initial(self.image)

    async def apply(self, *records: MetadataRecord | list[MetadataRecord]) -> MetadataDelta:
        """Apply a batch to the image, then publish its delta to the transitions."""
        delta = self.metadata.batch(*records)
        await self.transitions.apply(delta, self.image)
        return delta

    def led(self, name: str, index: int) -> Partition:
        found = self.replicas.get_partition(name, index)
        assert found is not None, f"{name}-{index} is not led here"
        return found

    def followed(self, name: str, index: int) -> FollowedPartition:
        return self.supervisor.assignments[(name, index)]

    def log_config(self, name: str) -> LogConfig:
        state = self.image.get(name)
        return to_log_config(state.configs if state is not None else {}, self.config)

    def shutdown(self) -> None:
        if self.closed:
            return
        self.closed = True
        self.replicas.shutdown()
        for handover in self.supervisor.close_all():
            self.log_manager.external_log_closed(handover)
        self.log_manager.shutdown()


def build_node(root: pathlib.Path, metadata: Metadata | None = None) -> Node:
    """A broker on ``root/logs`` (loading whatever logs are there) reading ``metadata``'s image."""
    config = load_config(None, [f"log.dirs={root / 'logs'}", f"node.id={NODE}"])[0]
    clock = FakeClock(NOW)
    metadata = metadata or Metadata()
    image = metadata.image

    def topic_log_config(state: TopicState) -> LogConfig:
        return to_log_config(state.configs, config)

    def log_config_by_name(name: str) -> LogConfig:
        state = image.get(name)
        return to_log_config(state.configs if state else {}, config)

    log_manager = LogManager(
        config.log_dirs, to_log_config({}, config), clock, topic_configs=log_config_by_name
    )
    replicas = ReplicaManager(log_manager, image, NODE, config, clock)
    supervisor = FakeSupervisor(clock)
    transitions = ReplicaTransitions(
        replicas,
        log_manager,
        supervisor,  # type: ignore[arg-type]
        node_id=NODE,
        inter_broker_listener=LISTENER,
        log_config=topic_log_config,
    )
    return Node(config, clock, metadata, log_manager, replicas, supervisor, transitions)


@pytest.fixture
async def node(tmp_path: pathlib.Path) -> AsyncIterator[Node]:
    """A broker whose image already knows brokers 1, 2 and 3."""
    built = build_node(tmp_path)
    built.metadata.brokers(1, 2, 3)
    yield built
    built.shutdown()


# -- records ---------------------------------------------------------------------------------------


def batch(base_offset: int, epoch: int, records: int = 2) -> bytes:
    """A batch as a leader of ``epoch`` wrote it, for a follower to append as is."""
    return build_batch(
        [Record(b"v-%d" % (base_offset + i), timestamp=NOW + base_offset + i) for i in range(records)],
        base_offset=base_offset,
        partition_leader_epoch=epoch,
    )


def produced(records: int = 1) -> bytes:
    return build_batch([Record(b"p-%d" % i, timestamp=NOW + i) for i in range(records)])


def contents(log: PartitionLog) -> bytes:
    result = log.read(log.log_start_offset, BIG)
    return b"" if result.slice is None else result.slice.read_bytes()


def epochs(log: PartitionLog) -> list[tuple[int, int]]:
    return [(entry.epoch, entry.start_offset) for entry in log.leader_epoch_cache.entries()]


def partition_dirs(node: Node) -> list[str]:
    return sorted(child.name for child in node.config.log_dirs[0].iterdir() if child.is_dir())


# =================================================================================================
# apply_initial
# =================================================================================================


async def test_initial_leads_the_partitions_led_here_with_their_epochs_and_isr(node: Node) -> None:
    node.metadata.batch(
        topic(
            "orders",
            ORDERS,
            partition(ORDERS, 0, NODE, isr=(1, 3), leader_epoch=4, partition_epoch=7),
            partition(ORDERS, 1, NODE, replicas=(1,), leader_epoch=2, partition_epoch=2),
        )
    )

    await node.initial()

    first = node.led("orders", 0)
    assert first.is_leader and first.topic_id == ORDERS
    assert (first.leader_epoch, first.partition_epoch) == (4, 7)
    assert (first.replicas, first.isr) == ([1, 2, 3], [1, 3])
    assert epochs(first.log) == [(4, 0)]
    assert node.log_manager.get_log("orders", 0) is first.log
    assert first.log.topic_id == ORDERS
    second = node.led("orders", 1)
    assert (second.leader_epoch, second.partition_epoch, second.replicas, second.isr) == (2, 2, [1], [1])
    assert node.supervisor.added == []
    assert partition_dirs(node) == ["orders-0", "orders-1"]


async def test_initial_hands_partitions_led_elsewhere_to_the_supervisor(tmp_path: pathlib.Path) -> None:
    # A previous run followed orders-0 and wrote 6 records to it; orders-1 has no log yet.
    metadata = Metadata()
    metadata.brokers(1, 2, 3)
    metadata.batch(
        topic("orders", ORDERS, partition(ORDERS, 0, 2, leader_epoch=3), partition(ORDERS, 1, 3)),
        ConfigRecord(ConfigResourceType.TOPIC, "orders", "max.message.bytes", "4096"),
    )
    previous = build_node(tmp_path, metadata)
    old = previous.log_manager.get_or_create_log("orders", 0, ORDERS)
    old.append_as_follower(batch(0, 1, 4) + batch(4, 3, 2))
    old.update_high_watermark(5)
    previous.shutdown()

    node = build_node(tmp_path, metadata)
    try:
        await node.initial()

        assert node.replicas.partitions() == []
        log_dir = node.config.log_dirs[0]
        assert [entry.topic_partition for entry in node.supervisor.added] == [("orders", 0), ("orders", 1)]
        first, second = node.supervisor.added
        assert first == FollowedPartition(
            LogHandover(
                topic="orders",
                partition=0,
                topic_id=ORDERS,
                directory=str(log_dir / "orders-0"),
                log_dir=str(log_dir),
                log_end_offset=6,
                high_watermark=5,
                recovery_point=6,
                log_start_offset=0,
                clean=True,
            ),
            leader_id=2,
            leader_host=host_of(2),
            leader_port=port_of(2),  # the LISTENER endpoint, not the PLAINTEXT one
            leader_epoch=3,
            partition_epoch=0,
            log_config=node.log_config("orders"),
        )
        assert first.log_config is not None and first.log_config.max_message_bytes == 4096
        assert (second.leader_id, second.leader_host, second.leader_port) == (3, host_of(3), port_of(3))
        assert second.handover.log_end_offset == 0 and second.handover.topic_id == ORDERS
        assert (log_dir / "orders-1").is_dir()  # created for the follower process
        for index in (0, 1):
            assert node.log_manager.get_log("orders", index) is None
            assert node.log_manager.is_external("orders", index)

        # The follower process can open what it was given, data and epochs intact.
        followed = node.supervisor.open_as_follower(("orders", 0))
        assert followed.log_end_offset == 6 and epochs(followed) == [(1, 0), (3, 4)]
    finally:
        node.shutdown()


async def test_initial_deletes_logs_the_metadata_does_not_know_and_keeps_the_metadata_log(
    tmp_path: pathlib.Path,
) -> None:
    metadata = Metadata()
    metadata.brokers(1, 2, 3)
    metadata.batch(topic("orders", ORDERS, partition(ORDERS, 0, NODE)))
    previous = build_node(tmp_path, metadata)
    for name, index, topic_id in [
        ("orders", 0, ORDERS),
        ("orders", 5, ORDERS),  # a partition index the topic does not have
        ("gone", 0, uuid.UUID(int=0x60)),  # a topic deleted while this broker was down
        (METADATA_TOPIC, METADATA_PARTITION, METADATA_TOPIC_ID),
    ]:
        previous.log_manager.get_or_create_log(name, index, topic_id).append_as_follower(batch(0, 0))
    previous.shutdown()

    node = build_node(tmp_path, metadata)
    try:
        with capture_logs() as logs:
            await node.initial()

        assert partition_dirs(node) == [f"{METADATA_TOPIC}-0", "orders-0"]
        assert node.log_manager.get_log("gone", 0) is None
        assert node.log_manager.get_log("orders", 5) is None
        metadata_log = node.log_manager.get_log(METADATA_TOPIC, METADATA_PARTITION)
        assert metadata_log is not None and metadata_log.log_end_offset == 2
        assert node.replicas.get_partition(METADATA_TOPIC, METADATA_PARTITION) is None
        assert node.led("orders", 0).log_end_offset == 2  # its data kept
        deleted = sorted(
            (entry["topic"], entry["partition"])
            for entry in logs
            if entry["event"] == "deleting the log of a partition the metadata does not know"
        )
        assert deleted == [("gone", 0), ("orders", 5)]
    finally:
        node.shutdown()


async def test_initial_sets_aside_a_log_of_another_incarnation_of_the_topic(tmp_path: pathlib.Path) -> None:
    # "orders" was deleted and re-created (new id) while this broker was down.
    older_id = uuid.UUID(int=0x01D)
    metadata = Metadata()
    metadata.brokers(1, 2, 3)
    metadata.batch(topic("orders", ORDERS, partition(ORDERS, 0, NODE), partition(ORDERS, 1, 2)))
    previous = build_node(tmp_path, metadata)
    for index in (0, 1):
        previous.log_manager.get_or_create_log("orders", index, older_id).append_as_follower(batch(0, 0, 3))
    previous.shutdown()

    node = build_node(tmp_path, metadata)
    try:
        await node.initial()

        strays = [name for name in partition_dirs(node) if name.endswith(STRAY_DIR_SUFFIX)]
        assert sorted(name.split(".")[0] for name in strays) == ["orders-0", "orders-1"]
        for name in strays:  # set aside with the data, not deleted
            assert any((node.config.log_dirs[0] / name).glob("*.log"))
        led = node.led("orders", 0)
        assert led.log.topic_id == ORDERS and led.log_end_offset == 0
        handover = node.followed("orders", 1).handover
        assert handover.topic_id == ORDERS and handover.log_end_offset == 0
    finally:
        node.shutdown()


async def test_initial_ignores_partitions_not_replicated_here(node: Node) -> None:
    node.metadata.batch(
        topic(
            "orders",
            ORDERS,
            partition(ORDERS, 0, 2, replicas=(2, 3)),
            partition(ORDERS, 1, 3, replicas=(3,)),
            partition(ORDERS, 2, 2, replicas=(2, 1)),
        )
    )

    await node.initial()

    assert node.replicas.partitions() == []
    assert list(node.supervisor.assignments) == [("orders", 2)]
    assert partition_dirs(node) == ["orders-2"]


# =================================================================================================
# apply(delta): leadership changes
# =================================================================================================


async def test_leadership_moving_here_takes_the_log_back_from_the_follower_process(node: Node) -> None:
    node.metadata.batch(topic("orders", ORDERS, partition(ORDERS, 0, 2, leader_epoch=1, partition_epoch=1)))
    await node.initial()
    follower_log = node.supervisor.open_as_follower(("orders", 0))
    replicated = batch(0, 0, 3) + batch(3, 1, 2)
    follower_log.append_as_follower(replicated)
    follower_log.update_high_watermark(4)
    seen_at_removal: list[tuple[bool, bool]] = []
    node.supervisor.on_remove.append(
        lambda tps: seen_at_removal.append(
            (node.log_manager.is_external("orders", 0), node.replicas.get_partition("orders", 0) is None)
        )
    )

    await node.apply(change(ORDERS, 0, NODE, leader_epoch=2, partition_epoch=2, isr=(1, 3)))

    # Taken back before anything opened the log here (it was still external and not led).
    assert node.supervisor.removed == [("orders", 0)]
    assert seen_at_removal == [(True, True)]
    assert node.supervisor.assignments == {}
    assert not node.log_manager.is_external("orders", 0)
    led = node.led("orders", 0)
    assert led.log is node.log_manager.get_log("orders", 0)
    assert (led.leader_epoch, led.partition_epoch, led.isr) == (2, 2, [1, 3])
    # What the follower process wrote is there, and the new epoch starts at its end.
    assert led.log_end_offset == 5 and led.high_watermark == 4
    assert contents(led.log) == replicated
    assert epochs(led.log) == [(0, 0), (1, 3), (2, 5)]
    assert led.log.config == node.log_config("orders")
    led.append_records(produced(), required_acks=1, now_ms=NOW)
    assert led.log_end_offset == 6


async def test_leadership_moving_away_stops_leading_and_hands_the_log_over(node: Node) -> None:
    node.metadata.batch(topic("orders", ORDERS, partition(ORDERS, 0, NODE)))
    await node.initial()
    led = node.led("orders", 0)
    led.append_records(produced(3), required_acks=1, now_ms=NOW)
    written = contents(led.log)

    await node.apply(change(ORDERS, 0, 3, leader_epoch=1, partition_epoch=1))

    assert node.replicas.get_partition("orders", 0) is None
    assert not led.is_leader
    assert node.log_manager.get_log("orders", 0) is None and node.log_manager.is_external("orders", 0)
    entry = node.followed("orders", 0)
    assert (entry.leader_id, entry.leader_host, entry.leader_port) == (3, host_of(3), port_of(3))
    assert (entry.leader_epoch, entry.partition_epoch) == (1, 1)
    assert entry.handover.clean and entry.handover.log_end_offset == 3
    assert entry.handover.recovery_point == 3  # flushed before the handover
    follower_log = node.supervisor.open_as_follower(("orders", 0))
    assert contents(follower_log) == written


async def test_new_leader_epoch_of_the_same_leader_re_adds_the_followed_partition(node: Node) -> None:
    node.metadata.batch(topic("orders", ORDERS, partition(ORDERS, 0, 2), partition(ORDERS, 1, 2)))
    await node.initial()
    handover = node.followed("orders", 0).handover
    assert len(node.supervisor.added) == 2

    await node.apply(change(ORDERS, 0, 2, leader_epoch=1, partition_epoch=1))

    assert len(node.supervisor.added) == 3
    readded = node.supervisor.added[-1]
    assert readded.topic_partition == ("orders", 0)
    assert (readded.leader_id, readded.leader_epoch, readded.partition_epoch) == (2, 1, 1)
    assert (readded.leader_host, readded.leader_port) == (host_of(2), port_of(2))
    assert node.followed("orders", 0).handover == handover  # the log stays with the process
    assert node.supervisor.removed == []


async def test_leader_moving_between_other_brokers_re_adds_with_the_new_leader(node: Node) -> None:
    node.metadata.batch(topic("orders", ORDERS, partition(ORDERS, 0, 2)))
    await node.initial()

    await node.apply(change(ORDERS, 0, 3, leader_epoch=1, partition_epoch=1))

    entry = node.followed("orders", 0)
    assert (entry.leader_id, entry.leader_host, entry.leader_port, entry.leader_epoch) == (
        3,
        host_of(3),
        port_of(3),
        1,
    )
    assert node.supervisor.removed == []
    assert node.log_manager.is_external("orders", 0)


async def test_unchanged_followed_partition_is_not_re_added(node: Node) -> None:
    node.metadata.batch(topic("orders", ORDERS, partition(ORDERS, 0, 2)))
    await node.initial()
    added = list(node.supervisor.added)

    delta = await node.apply(change(ORDERS, 0, 2, leader_epoch=0, partition_epoch=1, isr=(1, 2)))

    assert len(delta.partitions_changed) == 1  # an ISR change only
    assert node.supervisor.added == added
    assert node.supervisor.removed == []


async def test_isr_change_of_a_led_partition_reaches_the_partition(node: Node) -> None:
    node.metadata.batch(topic("orders", ORDERS, partition(ORDERS, 0, NODE, isr=(1,))))
    await node.initial()
    led = node.led("orders", 0)

    await node.apply(change(ORDERS, 0, NODE, leader_epoch=0, partition_epoch=1, isr=(1, 2)))

    assert node.led("orders", 0) is led
    assert (led.leader_epoch, led.partition_epoch, led.isr) == (0, 1, [1, 2])
    assert node.supervisor.added == []


async def test_no_leader_stops_leading_and_keeps_the_log_here(node: Node) -> None:
    node.metadata.batch(topic("orders", ORDERS, partition(ORDERS, 0, NODE), partition(ORDERS, 1, 2)))
    await node.initial()
    led = node.led("orders", 0)
    led.append_records(produced(2), required_acks=1, now_ms=NOW)
    followed_before = node.followed("orders", 1)
    added = list(node.supervisor.added)

    with capture_logs() as logs:
        await node.apply(
            change(ORDERS, 0, NO_LEADER, leader_epoch=1, partition_epoch=1, isr=(1,)),
            change(ORDERS, 1, NO_LEADER, leader_epoch=1, partition_epoch=1, isr=(2,)),
        )

    assert node.replicas.get_partition("orders", 0) is None and not led.is_leader
    log = node.log_manager.get_log("orders", 0)
    assert log is led.log and log.log_end_offset == 2  # still open here, not handed over
    assert not node.log_manager.is_external("orders", 0)
    # Nothing sent to the supervisor: the followed partition stays with its last leader.
    assert node.supervisor.added == added and node.supervisor.removed == []
    assert node.supervisor.assignments == {("orders", 1): followed_before}
    assert [e["event"] for e in logs if e["log_level"] in ("warning", "error")] == []  # expected, not odd

    # Once elected again here, the same log is led with the new epoch.
    await node.apply(change(ORDERS, 0, NODE, leader_epoch=2, partition_epoch=2, isr=(1,)))
    again = node.led("orders", 0)
    assert again.log is log and again.leader_epoch == 2 and again.log_end_offset == 2


async def test_leader_without_an_inter_broker_endpoint_is_logged_and_skipped(node: Node) -> None:
    node.metadata.batch(registration(4, node.metadata.next_offset, inter_broker=False))
    node.metadata.batch(
        topic(
            "orders",
            ORDERS,
            partition(ORDERS, 0, NODE, replicas=(1, 4)),
            partition(ORDERS, 1, 4, replicas=(1, 4)),
        )
    )
    with capture_logs() as logs:
        await node.initial()
        led = node.led("orders", 0)
        await node.apply(change(ORDERS, 0, 4, leader_epoch=1, partition_epoch=1, replicas=(1, 4)))

    warnings = [
        (entry["topic"], entry["leader"])
        for entry in logs
        if entry["event"] == "leader has no inter-broker endpoint"
    ]
    assert warnings == [("orders", 4), ("orders", 4)]
    assert node.supervisor.added == []
    assert node.replicas.get_partition("orders", 0) is None and not led.is_leader
    # Nobody to hand them to: the log led until now stays here, and none is created for the other.
    assert node.log_manager.get_log("orders", 0) is led.log
    assert not node.log_manager.is_external("orders", 0)
    assert node.log_manager.log_dir_of("orders", 1) is None
    assert not node.log_manager.is_external("orders", 1)


def fail_adopting(node: Node, monkeypatch: pytest.MonkeyPatch, failing: tuple[str, int]) -> None:
    """Taking ``failing``'s log back raises a storage error (a log dir gone); other logs are adopted."""
    adopt_log = node.log_manager.adopt_log

    def failing_adopt(handover: LogHandover, config: LogConfig | None = None) -> PartitionLog:
        if handover.topic_partition == failing:
            raise KiplingStorageError("log dir gone")
        return adopt_log(handover, config)

    monkeypatch.setattr(node.log_manager, "adopt_log", failing_adopt)


async def test_a_failed_transition_is_logged_and_the_other_partitions_still_transition(
    node: Node, monkeypatch: pytest.MonkeyPatch
) -> None:
    node.metadata.batch(
        topic("orders", ORDERS, *(partition(ORDERS, index, 2) for index in range(3))),
        topic("events", EVENTS, *(partition(EVENTS, index, NODE) for index in range(2))),
    )
    release_log = node.log_manager.release_log

    def failing_release(name: str, index: int) -> LogHandover:
        if (name, index) == ("orders", 1):
            raise OSError(5, "Input/output error")
        return release_log(name, index)

    monkeypatch.setattr(node.log_manager, "release_log", failing_release)

    with capture_logs() as logs:
        await node.initial()

    assert sorted(node.supervisor.assignments) == [("orders", 0), ("orders", 2)]
    assert sorted(p.key for p in node.replicas.partitions()) == [("events", 0), ("events", 1)]
    failures = [entry for entry in logs if entry["event"] == "partition transition failed"]
    assert [(entry["topic"], entry["partition"], entry["log_level"]) for entry in failures] == [
        ("orders", 1, "error")
    ]

    # A storage error while taking a log back fails that partition only, too.
    fail_adopting(node, monkeypatch, ("orders", 0))
    with capture_logs() as logs:
        await node.apply(
            change(ORDERS, 0, NODE, leader_epoch=1, partition_epoch=1),
            change(ORDERS, 2, NODE, leader_epoch=1, partition_epoch=1),
        )

    assert [(e["topic"], e["partition"]) for e in logs if e["event"] == "partition transition failed"] == [
        ("orders", 0)
    ]
    assert node.led("orders", 2).leader_epoch == 1
    assert node.replicas.get_partition("orders", 0) is None


# =================================================================================================
# apply(delta): topics and partitions created or deleted
# =================================================================================================


async def test_created_topic_and_partitions_are_taken_up(node: Node) -> None:
    await node.initial()

    delta = await node.apply(topic("orders", ORDERS, partition(ORDERS, 0, NODE), partition(ORDERS, 1, 2)))
    assert [t.name for t in delta.topics_created] == ["orders"]
    assert node.led("orders", 0).leader_epoch == 0
    assert list(node.supervisor.assignments) == [("orders", 1)]

    delta = await node.apply(
        partition(ORDERS, 2, 3),
        partition(ORDERS, 3, NODE, replicas=(1, 2), leader_epoch=0),
        partition(ORDERS, 4, 2, replicas=(2, 3)),
    )

    assert [len(added.partitions) for added in delta.partitions_created] == [3]
    assert sorted(p.index for p in node.replicas.partitions()) == [0, 3]
    assert node.led("orders", 3).replicas == [1, 2]
    assert sorted(node.supervisor.assignments) == [("orders", 1), ("orders", 2)]
    assert node.followed("orders", 2).leader_port == port_of(3)
    assert node.log_manager.log_dir_of("orders", 4) is None


async def test_topic_deletion_takes_followed_partitions_back_and_deletes_every_log(node: Node) -> None:
    node.metadata.batch(
        topic("orders", ORDERS, partition(ORDERS, 0, NODE), partition(ORDERS, 1, 2), partition(ORDERS, 2, 3)),
        topic("events", EVENTS, partition(EVENTS, 0, 2)),
    )
    await node.initial()
    led = node.led("orders", 0)
    led.append_records(produced(), required_acks=1, now_ms=NOW)
    node.supervisor.open_as_follower(("orders", 1)).append_as_follower(batch(0, 0))

    delta = await node.apply(RemoveTopicRecord(ORDERS))

    assert [t.name for t in delta.topics_deleted] == ["orders"]
    assert sorted(node.supervisor.removed) == [("orders", 1), ("orders", 2)]
    assert list(node.supervisor.assignments) == [("events", 0)]
    assert node.replicas.get_partition("orders", 0) is None and not led.is_leader
    for index in range(3):
        assert node.log_manager.get_log("orders", index) is None
        assert not node.log_manager.is_external("orders", index)
    assert partition_dirs(node) == ["events-0"]


async def test_topic_deleted_and_recreated_in_one_batch_starts_empty(node: Node) -> None:
    node.metadata.batch(topic("orders", ORDERS, partition(ORDERS, 0, 2)))
    await node.initial()
    node.supervisor.open_as_follower(("orders", 0)).append_as_follower(batch(0, 0, 4))
    recreated = uuid.UUID(int=0x2D)

    await node.apply(RemoveTopicRecord(ORDERS), topic("orders", recreated, partition(recreated, 0, 2)))

    assert node.supervisor.removed == [("orders", 0)]
    handover = node.followed("orders", 0).handover
    assert handover.topic_id == recreated and handover.log_end_offset == 0


# =================================================================================================
# apply(delta): brokers re-registering
# =================================================================================================


async def test_leader_re_registering_with_a_new_port_is_followed_there(node: Node) -> None:
    node.metadata.batch(
        topic("orders", ORDERS, partition(ORDERS, 0, 2), partition(ORDERS, 1, 3), partition(ORDERS, 2, NODE))
    )
    await node.initial()
    before = node.followed("orders", 0)
    added = len(node.supervisor.added)

    delta = await node.apply(registration(2, node.metadata.next_offset, port=9999))

    assert [b.broker_id for b in delta.brokers_registered] == [2]
    assert len(node.supervisor.added) == added + 1
    entry = node.followed("orders", 0)
    assert (entry.leader_id, entry.leader_host, entry.leader_port) == (2, host_of(2), 9999)
    assert entry.leader_epoch == before.leader_epoch and entry.handover == before.handover
    assert node.followed("orders", 1).leader_port == port_of(3)  # another leader's: untouched
    assert node.led("orders", 2).is_leader
    assert node.supervisor.removed == []

    # The same endpoint again (a new incarnation listening where it did) changes nothing.
    await node.apply(registration(2, node.metadata.next_offset, port=9999))
    assert len(node.supervisor.added) == added + 1


async def test_partition_skipped_for_a_missing_endpoint_is_followed_once_its_leader_has_one(
    node: Node,
) -> None:
    node.metadata.batch(registration(4, node.metadata.next_offset, inter_broker=False))
    node.metadata.batch(topic("orders", ORDERS, partition(ORDERS, 0, 4, replicas=(1, 4))))
    await node.initial()
    assert node.supervisor.assignments == {}

    await node.apply(registration(4, node.metadata.next_offset, port=9444))

    entry = node.followed("orders", 0)
    assert (entry.leader_id, entry.leader_host, entry.leader_port) == (4, host_of(4), 9444)
    assert node.log_manager.is_external("orders", 0)


# =================================================================================================
# storage errors outside a single partition's lead/follow transition
# =================================================================================================


async def test_a_deleted_topic_whose_log_cannot_be_taken_back_does_not_stop_the_rest_of_the_delta(
    node: Node, monkeypatch: pytest.MonkeyPatch
) -> None:
    node.metadata.batch(
        topic("orders", ORDERS, partition(ORDERS, 0, 2), partition(ORDERS, 1, 2)),
        topic("events", EVENTS, partition(EVENTS, 0, 2)),
    )
    await node.initial()
    fail_adopting(node, monkeypatch, ("orders", 0))

    with capture_logs() as logs:
        await node.apply(
            RemoveTopicRecord(ORDERS), change(EVENTS, 0, NODE, leader_epoch=1, partition_epoch=1)
        )

    errors = [(e["event"], e["topic"], e["partition"]) for e in logs if e["log_level"] == "error"]
    assert errors == [
        ("could not take back the log of a deleted partition", "orders", 0),
        ("could not delete log", "orders", 0),  # still external: its files are left alone
    ]
    assert node.led("events", 0).leader_epoch == 1
    assert node.supervisor.assignments == {}
    assert node.log_manager.log_dir_of("orders", 1) is None  # the other partition's log is deleted
    assert "orders-1" not in partition_dirs(node)
    assert "orders-0" in partition_dirs(node)


async def test_a_stray_log_that_cannot_be_deleted_does_not_stop_the_initial_take_up(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    metadata = Metadata()
    metadata.brokers(1, 2, 3)
    metadata.batch(topic("orders", ORDERS, partition(ORDERS, 0, NODE), partition(ORDERS, 1, 2)))
    previous = build_node(tmp_path, metadata)
    for name in ("gone", "lost"):
        previous.log_manager.get_or_create_log(name, 0, uuid.UUID(int=0x60))
    previous.shutdown()
    node = build_node(tmp_path, metadata)
    delete_log = node.log_manager.delete_log

    def failing_delete(name: str, index: int) -> None:
        if name == "gone":
            raise OSError(5, "Input/output error")
        delete_log(name, index)

    monkeypatch.setattr(node.log_manager, "delete_log", failing_delete)
    try:
        with capture_logs() as logs:
            await node.initial()

        errors = [(e["event"], e["topic"], e["partition"]) for e in logs if e["log_level"] == "error"]
        assert errors == [("could not remove a stray log", "gone", 0)]
        assert "lost-0" not in partition_dirs(node)
        assert node.led("orders", 0).is_leader
        assert list(node.supervisor.assignments) == [("orders", 1)]
    finally:
        node.shutdown()


# =================================================================================================
# brokers becoming eligible
# =================================================================================================


class RecordingSender:
    """An AlterPartition sender that only records what the partitions propose."""

    def __init__(self) -> None:
        self.proposed: list[tuple[int, ...]] = []

    def submit(self, partition: Partition, proposal: IsrProposal) -> None:
        self.proposed.append(proposal.new_isr)


async def test_a_follower_that_caught_up_while_fenced_is_proposed_when_its_broker_is_unfenced(
    tmp_path: pathlib.Path,
) -> None:
    """Without waiting for the periodic ISR check or a fetch that an idle partition never gets."""
    built = build_node(tmp_path)
    sender = RecordingSender()
    built.replicas = ReplicaManager(
        built.log_manager,
        built.image,
        NODE,
        built.config,
        built.clock,
        alter_partition=sender,
        broker_eligibility=lambda rid, epoch: not getattr(built.image.broker(rid), "fenced", True),
    )
    built.transitions = ReplicaTransitions(
        built.replicas,
        built.log_manager,
        built.supervisor,  # type: ignore[arg-type]
        node_id=NODE,
        inter_broker_listener=LISTENER,
        log_config=lambda state: to_log_config(state.configs, built.config),
    )
    try:
        built.metadata.brokers(1, 2, 3)
        broker_2_epoch = built.image.broker(2).broker_epoch  # type: ignore[union-attr]
        built.metadata.batch(FenceBrokerRecord(2, broker_2_epoch))
        built.metadata.batch(topic("orders", ORDERS, partition(ORDERS, 0, NODE, isr=(1, 3))))
        await built.initial()
        led = built.led("orders", 0)
        led.append_records(produced(3), required_acks=1, now_ms=built.clock.time_ms())
        end = led.log_end_offset
        # broker 3 keeps the HW moving; broker 2 catches up while fenced: not eligible, not proposed
        led.update_follower_fetch(3, end, 0, built.clock.time_ms(), end)
        led.update_follower_fetch(2, end, 0, built.clock.time_ms(), end)
        assert led.high_watermark == end and sender.proposed == []

        await built.apply(UnfenceBrokerRecord(2, broker_2_epoch))

        assert sender.proposed == [(1, 3, 2)]
    finally:
        built.shutdown()


# =================================================================================================
# the window while leadership is being taken back from the follower process
# =================================================================================================


async def test_a_request_waits_while_the_log_is_taken_back_and_finds_the_partition_led(node: Node) -> None:
    """Between the metadata naming this broker leader and the partition led here (the follower
    process hands the log back), :meth:`ReplicaManager.taking_lead` is true and a waiter is woken
    as soon as the partition is led, not at its timeout."""
    node.metadata.batch(topic("orders", ORDERS, partition(ORDERS, 0, 2, leader_epoch=1, partition_epoch=1)))
    await node.initial()
    assert not node.replicas.taking_lead("orders", 0)  # led elsewhere
    node.supervisor.open_as_follower(("orders", 0))
    delta = node.metadata.batch(change(ORDERS, 0, NODE, leader_epoch=2, partition_epoch=2))
    assert node.replicas.taking_lead("orders", 0)
    assert not node.replicas.taking_lead("orders", 9)  # no such partition

    loop = asyncio.get_running_loop()
    started = loop.time()
    waiter = asyncio.create_task(node.replicas.wait_until_led("orders", 0, 30.0))
    await asyncio.sleep(0)
    assert not waiter.done()
    await node.transitions.apply(delta, node.image)
    await asyncio.wait_for(waiter, 5.0)
    assert loop.time() - started < 5.0
    assert node.led("orders", 0).leader_epoch == 2
    assert not node.replicas.taking_lead("orders", 0)


async def test_a_failed_transition_wakes_the_waiters_and_the_wait_is_bounded(
    node: Node, monkeypatch: pytest.MonkeyPatch
) -> None:
    node.metadata.batch(topic("orders", ORDERS, partition(ORDERS, 0, 2, leader_epoch=1, partition_epoch=1)))
    await node.initial()
    delta = node.metadata.batch(change(ORDERS, 0, NODE, leader_epoch=2, partition_epoch=2))

    loop = asyncio.get_running_loop()
    started = loop.time()
    await node.replicas.wait_until_led("orders", 0, 0.05)  # nobody applies the delta: the timeout ends it
    assert loop.time() - started >= 0.05

    fail_adopting(node, monkeypatch, ("orders", 0))
    waiter = asyncio.create_task(node.replicas.wait_until_led("orders", 0, 30.0))
    await asyncio.sleep(0)
    await node.transitions.apply(delta, node.image)
    await asyncio.wait_for(waiter, 5.0)  # woken by the failed transition, not its 30 s
    assert node.replicas.get_partition("orders", 0) is None
    # and later requests do not wait for it again: the partition failed here
    assert not node.replicas.taking_lead("orders", 0)
    assert node.replicas.partition_error("orders", 0) is ErrorCode.KAFKA_STORAGE_ERROR


async def test_a_produce_in_the_window_is_appended_once_the_lead_is_taken(node: Node) -> None:
    """The produce path end to end, with the real ReplicaManager: a produce that arrives after the
    metadata names this broker leader but before the follower process handed the log back waits,
    then is appended, instead of answering NOT_LEADER_OR_FOLLOWER."""
    node.metadata.batch(topic("orders", ORDERS, partition(ORDERS, 0, 2, leader_epoch=1, partition_epoch=1)))
    await node.initial()
    node.supervisor.open_as_follower(("orders", 0)).append_as_follower(batch(0, 1, 3))
    delta = node.metadata.batch(change(ORDERS, 0, NODE, leader_epoch=2, partition_epoch=2, isr=(1,)))
    loop = asyncio.get_running_loop()
    service = ProduceService(node.replicas, DelayedOperationPurgatory("Produce", loop), node.clock)
    request = ProduceRequest(
        version=9,
        client_id="t",
        acks=1,
        timeout_ms=30_000,
        transactional_id=None,
        partitions=[ProducePartitionData("orders", 0, produced())],
    )

    produce = asyncio.create_task(service.produce(request))
    await asyncio.sleep(0)
    assert not produce.done()  # waiting for the lead, not answered NOT_LEADER_OR_FOLLOWER
    await node.transitions.apply(delta, node.image)
    [outcome] = await asyncio.wait_for(produce, 5.0)

    assert outcome.error_code is ErrorCode.NONE
    assert outcome.result is not None and outcome.result.base_offset == 3


async def test_a_large_delta_lets_the_event_loop_serve_meanwhile(
    node: Node, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Creating many partitions is synchronous disk work per partition: the transitions yield to
    the event loop between partitions once they have held it long enough (here: at once)."""
    monkeypatch.setattr(transitions_module, "YIELD_EVERY_S", 0.0)
    await node.initial()
    served: list[int] = []

    async def other_requests() -> None:
        while True:
            served.append(len(node.replicas.partitions()))
            await asyncio.sleep(0)

    running = asyncio.create_task(other_requests())
    try:
        await node.apply(topic("orders", ORDERS, *(partition(ORDERS, i, NODE) for i in range(20))))
    finally:
        running.cancel()
    assert len(node.replicas.partitions()) == 20
    assert any(0 < led < 20 for led in served)  # ran while the delta was half applied
