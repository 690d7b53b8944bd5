"""A small harness around QuorumController: brokers that register and heartbeat on a fake clock."""

from __future__ import annotations

import uuid
from collections.abc import Iterable

from metadata.controller.cluster_control import HeartbeatResult
from metadata.controller.controller import ControllerConfig, QuorumController
from metadata.controller.metadata_log import InMemoryMetadataLog
from metadata.controller.replication_control import CreatableTopic
from metadata.image import MetadataImage
from metadata.records import BrokerEndpointRecord, SecurityProtocol
from metadata.topics import PartitionState, TopicState
from protocol.error_codes import ErrorCode
from storage.clock import FakeClock

CLUSTER_ID = "kipling-test-cluster"
EPOCH = 1
SESSION_MS = 9000


def endpoints(broker_id: int) -> tuple[BrokerEndpointRecord, ...]:
    return (BrokerEndpointRecord("PLAINTEXT", f"broker-{broker_id}", 9092, SecurityProtocol.PLAINTEXT),)


def incarnation(broker_id: int, generation: int = 0) -> uuid.UUID:
    """A stable incarnation id per (broker, restart count), so tests can name them."""
    return uuid.UUID(int=(broker_id << 32) | (generation + 1))


class Cluster:
    """A controller over an in-memory log, and the broker epochs it handed out."""

    def __init__(
        self,
        config: ControllerConfig | None = None,
        *,
        log: InMemoryMetadataLog | None = None,
        clock: FakeClock | None = None,
        epoch: int = EPOCH,
    ) -> None:
        self.log = log if log is not None else InMemoryMetadataLog()
        self.clock = clock if clock is not None else FakeClock(1_000_000)
        self.config = config or ControllerConfig(broker_session_timeout_ms=SESSION_MS)
        self.controller = QuorumController(
            self.log, self.clock, epoch, CLUSTER_ID, self.config, records=self.log.read()
        )
        self.epochs: dict[int, int] = {b.broker_id: b.broker_epoch for b in self.controller.image.brokers()}

    @property
    def image(self) -> MetadataImage:
        return self.controller.image

    def restart(self, epoch: int = EPOCH + 1) -> Cluster:
        """A new controller on the same log (and clock), as after a controller failover."""
        return Cluster(self.config, log=self.log, clock=self.clock, epoch=epoch)

    def register(self, broker_id: int, generation: int = 0) -> int:
        epoch = self.controller.register_broker(
            broker_id, incarnation(broker_id, generation), CLUSTER_ID, endpoints(broker_id)
        )
        self.epochs[broker_id] = epoch
        return epoch

    def heartbeat(
        self,
        broker_id: int,
        offset: int | None = None,
        *,
        want_fence: bool = False,
        want_shutdown: bool = False,
    ) -> HeartbeatResult:
        """A heartbeat; by default the broker reports having replayed the whole log."""
        return self.controller.heartbeat(
            broker_id,
            self.epochs[broker_id],
            self.log.end_offset - 1 if offset is None else offset,
            want_fence=want_fence,
            want_shutdown=want_shutdown,
        )

    def join(self, *broker_ids: int) -> None:
        """Register each broker and unfence it with a caught-up heartbeat."""
        for broker_id in broker_ids:
            self.register(broker_id)
            result = self.heartbeat(broker_id)
            assert result.error is ErrorCode.NONE and not result.is_fenced, result

    def keep_alive(self, broker_ids: Iterable[int]) -> None:
        for broker_id in broker_ids:
            assert self.heartbeat(broker_id).error is ErrorCode.NONE

    def create(
        self, name: str, partitions: int = 1, factor: int = 1, configs: dict[str, str | None] | None = None
    ) -> TopicState:
        [result] = self.controller.create_topics([CreatableTopic(name, partitions, factor, configs or {})])
        assert result.error is ErrorCode.NONE, result
        assert result.topic is not None
        return result.topic

    def create_assigned(self, name: str, *replica_lists: list[int]) -> TopicState:
        assignments = [(index, replicas) for index, replicas in enumerate(replica_lists)]
        [result] = self.controller.create_topics([CreatableTopic(name, -1, -1, {}, assignments)])
        assert result.error is ErrorCode.NONE, result
        assert result.topic is not None
        return result.topic

    def partition(self, name: str, index: int = 0) -> PartitionState:
        topic = self.image.get(name)
        assert topic is not None
        return topic.partitions[index]


def replayed(log: InMemoryMetadataLog) -> MetadataImage:
    """A fresh image fed the whole log, batch by batch, as a broker would replay it."""
    image = MetadataImage()
    for offset, epoch, record in log.read():
        image.apply(record, offset, epoch)
    return image
