"""Unit tests of the broker's glue to the controller, driven through small in-file fakes.

What they pin down:

* ``AlterPartitionManager``: a proposal is sent once and its answer (accepted or refused per
  partition) reaches the partition; a newer proposal for a partition replaces an unsent one, also
  when it arrives while an older one is in flight and then has to be retried; an unreachable
  controller and a STALE_BROKER_EPOCH answer are retried (with the broker epoch read afresh); any
  other top-level error (INVALID_REQUEST) is reported to every partition of the batch, not retried.
* ``BrokerLifecycleManager``: registration is retried while the controller is unreachable, the
  epoch reaches ``wait_registered`` and ``on_epoch``; a heartbeat answering ``is_fenced=False``
  completes ``wait_unfenced``; STALE_BROKER_EPOCH or BROKER_ID_NOT_REGISTERED makes the broker
  register again (fenced meanwhile, previous epoch sent along); ``controlled_shutdown`` is True once
  the controller says ``should_shut_down``, False on timeout or an unreachable controller.
* ``MetadataLoader``: batches before the catch-up are applied silently, ``publish_initial`` runs
  exactly once when the fetch offset reaches the high watermark, later batches are published as
  deltas one by one in log order, ``next_offset`` follows the applied batches, ``wait_for`` answers
  True once a batch makes its predicate hold and False on timeout, and an error response or a
  diverging epoch applies nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections import deque
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any

import pytest

import broker.cluster.alter_partition_manager as apm_module
import broker.cluster.lifecycle as lifecycle_module
import broker.cluster.metadata_loader as loader_module
from broker.cluster.alter_partition_manager import AlterPartitionManager
from broker.cluster.controller_channel import (
    AlterPartitionItem,
    AlterPartitionReply,
    BrokerListener,
    ControllerUnavailableError,
    HeartbeatReply,
    MetadataFetch,
)
from broker.cluster.lifecycle import BrokerLifecycleManager
from broker.cluster.metadata_loader import MetadataLoader
from broker.replication.replica_state import IsrProposal
from metadata.image import MetadataDelta, MetadataImage
from metadata.records import (
    BrokerEndpointRecord,
    MetadataRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    TopicRecord,
)
from metadata.serde import encode_metadata_batch
from protocol.error_codes import ErrorCode
from protocol.records import stamp_base_offset

TIMEOUT_S = 1.0
TINY_BACKOFF_S = 0.001


async def wait_until(predicate: Any, timeout_s: float = TIMEOUT_S) -> None:
    """Yield to the loop until ``predicate()`` holds; fail the test after ``timeout_s``."""

    async def poll() -> None:
        while not predicate():
            await asyncio.sleep(0.001)

    await asyncio.wait_for(poll(), timeout_s)


# =================================================================================================
# AlterPartitionManager
# =================================================================================================


@dataclass
class Result:
    proposal: IsrProposal
    error: ErrorCode
    leader_epoch: int
    isr: tuple[int, ...]
    partition_epoch: int


class FakePartition:
    """Records every ``on_alter_partition_result``."""

    def __init__(self, topic: str, index: int) -> None:
        self.topic = topic
        self.index = index
        self._topic_id = uuid.uuid5(uuid.NAMESPACE_DNS, topic)
        self.results: list[Result] = []

    @property
    def topic_id(self) -> uuid.UUID:
        return self._topic_id

    def on_alter_partition_result(
        self,
        proposal: IsrProposal,
        error: ErrorCode,
        leader_epoch: int,
        isr: tuple[int, ...],
        partition_epoch: int,
    ) -> None:
        self.results.append(Result(proposal, error, leader_epoch, isr, partition_epoch))


@dataclass
class AlterCall:
    broker_id: int
    broker_epoch: int
    items: list[AlterPartitionItem]


class FakeAlterChannel:
    """Answers scripted outcomes in order, then accepts every proposal (partition epoch + 1)."""

    def __init__(self) -> None:
        self.calls: list[AlterCall] = []
        self.script: deque[Any] = deque()
        """Each entry: an exception to raise, an ErrorCode for the top level, or a callable."""
        self.refuse: dict[tuple[uuid.UUID, int], ErrorCode] = {}
        self.gate: asyncio.Event | None = None

    async def alter_partition(
        self, *, broker_id: int, broker_epoch: int, items: Sequence[AlterPartitionItem]
    ) -> tuple[ErrorCode, list[AlterPartitionReply]]:
        self.calls.append(AlterCall(broker_id, broker_epoch, list(items)))
        if self.gate is not None:
            gate, self.gate = self.gate, None
            await gate.wait()
        if self.script:
            outcome = self.script.popleft()
            if callable(outcome) and not isinstance(outcome, ErrorCode):
                outcome = outcome()
            if isinstance(outcome, Exception):
                raise outcome
            return outcome, []
        replies = []
        for item in items:
            error = self.refuse.get((item.topic_id, item.partition), ErrorCode.NONE)
            epoch = item.partition_epoch + 1 if error == ErrorCode.NONE else item.partition_epoch
            replies.append(
                AlterPartitionReply(
                    item.topic_id, item.partition, error, 1, item.leader_epoch, item.new_isr, epoch
                )
            )
        return ErrorCode.NONE, replies


@pytest.fixture
def alter_channel(monkeypatch: pytest.MonkeyPatch) -> FakeAlterChannel:
    monkeypatch.setattr(apm_module, "RETRY_BACKOFF_S", TINY_BACKOFF_S)
    return FakeAlterChannel()


@pytest.fixture
async def epoch_holder() -> list[int]:
    return [10]


@pytest.fixture
async def manager(
    alter_channel: FakeAlterChannel, epoch_holder: list[int]
) -> AsyncIterator[AlterPartitionManager]:
    m = AlterPartitionManager(alter_channel, broker_id=1, broker_epoch=lambda: epoch_holder[0])
    yield m
    await m.stop()


async def test_proposal_is_sent_once_and_each_answer_reaches_its_partition(
    manager: AlterPartitionManager, alter_channel: FakeAlterChannel
) -> None:
    accepted, refused = FakePartition("a", 0), FakePartition("b", 3)
    alter_channel.refuse[(refused.topic_id, 3)] = ErrorCode.FENCED_LEADER_EPOCH
    p_accepted = IsrProposal(new_isr=(1, 2), leader_epoch=4, partition_epoch=7)
    p_refused = IsrProposal(new_isr=(1,), leader_epoch=2, partition_epoch=5)
    manager.start()
    manager.submit(accepted, p_accepted)
    manager.submit(refused, p_refused)

    await wait_until(lambda: accepted.results and refused.results)
    await asyncio.sleep(0.01)  # a spurious retry would have happened by now

    assert len(alter_channel.calls) == 1
    call = alter_channel.calls[0]
    assert (call.broker_id, call.broker_epoch) == (1, 10)
    assert sorted(call.items, key=lambda i: i.partition) == [
        AlterPartitionItem(accepted.topic_id, 0, 4, (1, 2), 7),
        AlterPartitionItem(refused.topic_id, 3, 2, (1,), 5),
    ]
    assert accepted.results == [Result(p_accepted, ErrorCode.NONE, 4, (1, 2), 8)]
    assert refused.results == [Result(p_refused, ErrorCode.FENCED_LEADER_EPOCH, 2, (1,), 5)]


async def test_newer_submission_replaces_an_unsent_one(
    manager: AlterPartitionManager, alter_channel: FakeAlterChannel
) -> None:
    partition = FakePartition("a", 0)
    older = IsrProposal(new_isr=(1, 2, 3), leader_epoch=1, partition_epoch=1)
    newer = IsrProposal(new_isr=(1, 2), leader_epoch=1, partition_epoch=1)
    manager.submit(partition, older)
    manager.submit(partition, newer)
    manager.start()

    await wait_until(lambda: partition.results)
    await asyncio.sleep(0.01)

    assert [[item.new_isr for item in call.items] for call in alter_channel.calls] == [[(1, 2)]]
    assert [r.proposal for r in partition.results] == [newer]


async def test_unreachable_controller_is_retried_and_a_newer_submission_wins_the_retry(
    manager: AlterPartitionManager, alter_channel: FakeAlterChannel
) -> None:
    partition, other = FakePartition("a", 0), FakePartition("b", 0)
    first = IsrProposal(new_isr=(1, 2, 3), leader_epoch=1, partition_epoch=1)
    second = IsrProposal(new_isr=(1, 3), leader_epoch=1, partition_epoch=1)
    other_proposal = IsrProposal(new_isr=(1,), leader_epoch=9, partition_epoch=9)
    gate = asyncio.Event()
    alter_channel.gate = gate
    alter_channel.script.append(ControllerUnavailableError("down"))
    manager.start()
    manager.submit(partition, first)
    manager.submit(other, other_proposal)
    await wait_until(lambda: alter_channel.calls)
    manager.submit(partition, second)  # while the first request is in flight
    gate.set()

    await wait_until(lambda: partition.results and other.results)

    assert len(alter_channel.calls) == 2
    retried = {(item.topic_id, item.new_isr) for item in alter_channel.calls[1].items}
    assert retried == {(partition.topic_id, (1, 3)), (other.topic_id, (1,))}
    assert [r.proposal for r in partition.results] == [second]
    assert [(r.proposal, r.error) for r in other.results] == [(other_proposal, ErrorCode.NONE)]


async def test_top_level_error_is_reported_to_every_partition_without_retry(
    manager: AlterPartitionManager, alter_channel: FakeAlterChannel
) -> None:
    partitions = [FakePartition("a", 0), FakePartition("a", 1)]
    proposals = [
        IsrProposal(new_isr=(1, 2), leader_epoch=3, partition_epoch=4),
        IsrProposal(new_isr=(2,), leader_epoch=5, partition_epoch=6),
    ]
    alter_channel.script.append(ErrorCode.INVALID_REQUEST)
    manager.start()
    for partition, proposal in zip(partitions, proposals, strict=True):
        manager.submit(partition, proposal)

    await wait_until(lambda: all(p.results for p in partitions))
    await asyncio.sleep(0.01)

    assert len(alter_channel.calls) == 1
    for partition, proposal in zip(partitions, proposals, strict=True):
        assert partition.results == [
            Result(
                proposal,
                ErrorCode.INVALID_REQUEST,
                proposal.leader_epoch,
                proposal.new_isr,
                proposal.partition_epoch,
            )
        ]


@pytest.mark.parametrize("error", [ErrorCode.STALE_BROKER_EPOCH, ErrorCode.NOT_CONTROLLER])
async def test_stale_broker_epoch_is_retried_with_the_current_epoch(
    manager: AlterPartitionManager,
    alter_channel: FakeAlterChannel,
    epoch_holder: list[int],
    error: ErrorCode,
) -> None:
    partition = FakePartition("a", 0)
    proposal = IsrProposal(new_isr=(1, 2), leader_epoch=1, partition_epoch=2)

    def refuse_then_reregister() -> ErrorCode:
        epoch_holder[0] = 11  # the broker registered again meanwhile
        return error

    alter_channel.script.append(refuse_then_reregister)
    manager.start()
    manager.submit(partition, proposal)

    await wait_until(lambda: partition.results)

    assert [call.broker_epoch for call in alter_channel.calls] == [10, 11]
    assert partition.results == [Result(proposal, ErrorCode.NONE, 1, (1, 2), 3)]


# =================================================================================================
# BrokerLifecycleManager
# =================================================================================================


class FakeLifecycleChannel:
    """Scripted registrations and heartbeats; unscripted ones succeed with the current state."""

    def __init__(self) -> None:
        self.register_script: deque[Exception | tuple[ErrorCode, int]] = deque()
        self.next_epoch = 100
        self.registrations: list[dict[str, Any]] = []
        self.heartbeat_script: deque[Exception | HeartbeatReply] = deque()
        self.heartbeats: list[dict[str, Any]] = []
        self.fenced = True
        self.grant_shutdown = False
        self.unreachable = False

    async def register(
        self,
        *,
        broker_id: int,
        cluster_id: str,
        incarnation_id: uuid.UUID,
        listeners: Sequence[BrokerListener],
        rack: str | None,
        previous_broker_epoch: int = -1,
    ) -> tuple[ErrorCode, int]:
        self.registrations.append(
            {
                "broker_id": broker_id,
                "cluster_id": cluster_id,
                "incarnation_id": incarnation_id,
                "listeners": list(listeners),
                "rack": rack,
                "previous_broker_epoch": previous_broker_epoch,
            }
        )
        await asyncio.sleep(0)
        if self.register_script:
            outcome = self.register_script.popleft()
            if isinstance(outcome, Exception):
                raise outcome
            return outcome
        self.next_epoch += 1
        return ErrorCode.NONE, self.next_epoch

    async def heartbeat(
        self,
        *,
        broker_id: int,
        broker_epoch: int,
        current_metadata_offset: int,
        want_fence: bool,
        want_shut_down: bool,
        timeout_s: float | None = None,
    ) -> HeartbeatReply:
        self.heartbeats.append(
            {
                "broker_id": broker_id,
                "broker_epoch": broker_epoch,
                "current_metadata_offset": current_metadata_offset,
                "want_fence": want_fence,
                "want_shut_down": want_shut_down,
            }
        )
        await asyncio.sleep(0)
        if self.unreachable:
            raise ControllerUnavailableError("down")
        if self.heartbeat_script:
            outcome = self.heartbeat_script.popleft()
            if isinstance(outcome, Exception):
                raise outcome
            return outcome
        return HeartbeatReply(
            ErrorCode.NONE,
            is_caught_up=True,
            is_fenced=self.fenced,
            should_shut_down=want_shut_down and self.grant_shutdown,
        )


LISTENERS = [BrokerListener("PLAINTEXT", "localhost", 9092)]


@pytest.fixture
def lifecycle_channel(monkeypatch: pytest.MonkeyPatch) -> FakeLifecycleChannel:
    monkeypatch.setattr(lifecycle_module, "REGISTRATION_BACKOFF_S", TINY_BACKOFF_S)
    return FakeLifecycleChannel()


@pytest.fixture
async def epochs_seen() -> list[int]:
    return []


@pytest.fixture
async def lifecycle(
    lifecycle_channel: FakeLifecycleChannel, epochs_seen: list[int]
) -> AsyncIterator[BrokerLifecycleManager]:
    m = BrokerLifecycleManager(
        lifecycle_channel,
        broker_id=2,
        cluster_id="cluster-x",
        listeners=lambda: LISTENERS,
        rack="r1",
        heartbeat_interval_ms=20,
        metadata_offset=lambda: 42,
        on_epoch=epochs_seen.append,
    )
    yield m
    await m.stop()


async def test_registration_is_retried_while_the_controller_is_unreachable(
    lifecycle: BrokerLifecycleManager, lifecycle_channel: FakeLifecycleChannel, epochs_seen: list[int]
) -> None:
    lifecycle_channel.register_script.extend(
        [ControllerUnavailableError("down"), ControllerUnavailableError("down"), (ErrorCode.NONE, 7)]
    )
    lifecycle.start()

    epoch = await asyncio.wait_for(lifecycle.wait_registered(), TIMEOUT_S)

    assert epoch == 7 == lifecycle.broker_epoch
    assert epochs_seen == [7]
    assert len(lifecycle_channel.registrations) == 3
    assert lifecycle_channel.registrations[-1] == {
        "broker_id": 2,
        "cluster_id": "cluster-x",
        "incarnation_id": lifecycle.incarnation_id,
        "listeners": LISTENERS,
        "rack": "r1",
        "previous_broker_epoch": -1,
    }


async def test_wait_unfenced_completes_once_a_heartbeat_says_unfenced(
    lifecycle: BrokerLifecycleManager, lifecycle_channel: FakeLifecycleChannel
) -> None:
    lifecycle.start()
    epoch = await asyncio.wait_for(lifecycle.wait_registered(), TIMEOUT_S)
    await wait_until(lambda: len(lifecycle_channel.heartbeats) >= 2)
    assert lifecycle.is_fenced

    lifecycle_channel.fenced = False
    await asyncio.wait_for(lifecycle.wait_unfenced(), TIMEOUT_S)

    assert not lifecycle.is_fenced
    assert lifecycle_channel.heartbeats[0] == {
        "broker_id": 2,
        "broker_epoch": epoch,
        "current_metadata_offset": 42,
        "want_fence": False,
        "want_shut_down": False,
    }


@pytest.mark.parametrize("error", [ErrorCode.STALE_BROKER_EPOCH, ErrorCode.BROKER_ID_NOT_REGISTERED])
async def test_heartbeat_saying_the_registration_is_lost_registers_again(
    lifecycle: BrokerLifecycleManager,
    lifecycle_channel: FakeLifecycleChannel,
    epochs_seen: list[int],
    error: ErrorCode,
) -> None:
    lifecycle_channel.register_script.extend([(ErrorCode.NONE, 5), (ErrorCode.NONE, 9)])
    lifecycle_channel.heartbeat_script.extend(
        [
            HeartbeatReply(ErrorCode.NONE, is_caught_up=True, is_fenced=False, should_shut_down=False),
            HeartbeatReply(error, is_caught_up=False, is_fenced=True, should_shut_down=False),
        ]
    )
    lifecycle.start()
    await asyncio.wait_for(lifecycle.wait_unfenced(), TIMEOUT_S)

    await wait_until(lambda: any(h["broker_epoch"] == 9 for h in lifecycle_channel.heartbeats))

    assert epochs_seen == [5, 9]
    assert await lifecycle.wait_registered() == 9
    assert [r["previous_broker_epoch"] for r in lifecycle_channel.registrations] == [-1, 5]
    assert len({r["incarnation_id"] for r in lifecycle_channel.registrations}) == 1
    assert lifecycle.is_fenced  # until a heartbeat of the new registration says otherwise
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(lifecycle.wait_unfenced(), 0.05)


async def test_controlled_shutdown_is_granted_when_the_controller_says_so(
    lifecycle: BrokerLifecycleManager, lifecycle_channel: FakeLifecycleChannel
) -> None:
    lifecycle_channel.grant_shutdown = True
    lifecycle.start()
    epoch = await asyncio.wait_for(lifecycle.wait_registered(), TIMEOUT_S)

    assert await asyncio.wait_for(lifecycle.controlled_shutdown(TIMEOUT_S), TIMEOUT_S) is True

    asked = [h for h in lifecycle_channel.heartbeats if h["want_shut_down"]]
    assert asked and all(h["broker_epoch"] == epoch for h in asked)


async def test_controlled_shutdown_times_out_when_not_granted(
    lifecycle: BrokerLifecycleManager, lifecycle_channel: FakeLifecycleChannel
) -> None:
    lifecycle.start()
    await asyncio.wait_for(lifecycle.wait_registered(), TIMEOUT_S)
    loop = asyncio.get_running_loop()
    started = loop.time()

    assert await asyncio.wait_for(lifecycle.controlled_shutdown(0.15), TIMEOUT_S) is False

    assert loop.time() - started >= 0.15
    assert any(h["want_shut_down"] for h in lifecycle_channel.heartbeats)


async def test_controlled_shutdown_fails_fast_when_the_controller_is_unreachable(
    lifecycle: BrokerLifecycleManager, lifecycle_channel: FakeLifecycleChannel
) -> None:
    lifecycle.start()
    await asyncio.wait_for(lifecycle.wait_registered(), TIMEOUT_S)
    lifecycle_channel.unreachable = True

    assert await asyncio.wait_for(lifecycle.controlled_shutdown(5.0), TIMEOUT_S) is False


async def test_controlled_shutdown_before_registration_has_nothing_to_ask(
    lifecycle: BrokerLifecycleManager, lifecycle_channel: FakeLifecycleChannel
) -> None:
    assert await lifecycle.controlled_shutdown(TIMEOUT_S) is True
    assert lifecycle_channel.heartbeats == []


# =================================================================================================
# MetadataLoader
# =================================================================================================

TOPIC_A = uuid.UUID(int=0xA)
TOPIC_B = uuid.UUID(int=0xB)
BROKER_RECORD = RegisterBrokerRecord(
    broker_id=1,
    incarnation_id=uuid.UUID(int=1),
    broker_epoch=0,
    endpoints=(BrokerEndpointRecord("PLAINTEXT", "localhost", 9092, 0),),
    rack=None,
    fenced=False,
)


def partition_record(topic_id: uuid.UUID) -> PartitionRecord:
    return PartitionRecord(
        partition_id=0,
        topic_id=topic_id,
        replicas=(1,),
        isr=(1,),
        leader=1,
        leader_epoch=0,
        partition_epoch=0,
    )


@dataclass
class StoredBatch:
    base: int
    last: int
    data: bytes


@dataclass
class FetchCall:
    fetch_offset: int
    last_fetched_epoch: int
    max_wait_ms: int


class FakeMetadataChannel:
    """A metadata log served one batch per fetch, long-polled; scripted answers come first."""

    def __init__(self) -> None:
        self.log: list[StoredBatch] = []
        self.script: deque[Exception | MetadataFetch] = deque()
        self.calls: list[FetchCall] = []
        self.gate_at: int | None = None
        """Fetches at or past this offset wait for :attr:`gate`."""
        self.gate = asyncio.Event()
        self._appended = asyncio.Event()

    @property
    def end(self) -> int:
        return self.log[-1].last + 1 if self.log else 0

    def append(self, records: Sequence[MetadataRecord], *, epoch: int) -> None:
        buf = bytearray(encode_metadata_batch(records, epoch=epoch, timestamp_ms=0))
        stamp_base_offset(buf, 0, self.end)
        self.log.append(StoredBatch(self.end, self.end + len(records) - 1, bytes(buf)))
        self._appended.set()

    async def fetch_metadata(
        self,
        *,
        broker_id: int,
        fetch_offset: int,
        last_fetched_epoch: int,
        max_wait_ms: int,
        replica_id: int = -1,
    ) -> MetadataFetch:
        self.calls.append(FetchCall(fetch_offset, last_fetched_epoch, max_wait_ms))
        await asyncio.sleep(0)
        if self.script:
            outcome = self.script.popleft()
            if isinstance(outcome, Exception):
                raise outcome
            return outcome
        if self.gate_at is not None and fetch_offset >= self.gate_at:
            await self.gate.wait()
        if fetch_offset >= self.end and max_wait_ms > 0:
            self._appended.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._appended.wait(), max_wait_ms / 1000)
        pending = [b for b in self.log if b.last >= fetch_offset]
        return MetadataFetch(ErrorCode.NONE, pending[0].data if pending else b"", self.end, None)


class Publications:
    """What the loader published: (delta, image offset at publication) and initial image offsets."""

    def __init__(self) -> None:
        self.deltas: list[tuple[MetadataDelta, int]] = []
        self.initial: list[tuple[int, list[str]]] = []
        self.images: list[MetadataImage] = []

    async def publish(self, delta: MetadataDelta, image: MetadataImage) -> None:
        await asyncio.sleep(0)
        self.deltas.append((delta, image.offset))
        self.images.append(image)

    async def publish_initial(self, image: MetadataImage) -> None:
        await asyncio.sleep(0)
        self.initial.append((image.offset, [t.name for t in image.all()]))
        self.images.append(image)


@pytest.fixture
def metadata_channel(monkeypatch: pytest.MonkeyPatch) -> FakeMetadataChannel:
    monkeypatch.setattr(loader_module, "RETRY_BACKOFF_S", TINY_BACKOFF_S)
    channel = FakeMetadataChannel()
    channel.append([BROKER_RECORD], epoch=1)
    channel.append([TopicRecord("a", TOPIC_A), partition_record(TOPIC_A)], epoch=1)
    return channel


@pytest.fixture
async def publications() -> Publications:
    return Publications()


@pytest.fixture
async def loader(
    metadata_channel: FakeMetadataChannel, publications: Publications
) -> AsyncIterator[MetadataLoader]:
    m = MetadataLoader(
        metadata_channel,
        MetadataImage(),
        publications.publish,
        publications.publish_initial,
        broker_id=1,
        fetch_max_wait_ms=200,
    )
    yield m
    await m.stop()


async def test_catch_up_applies_silently_then_publishes_the_whole_image_once(
    loader: MetadataLoader, metadata_channel: FakeMetadataChannel, publications: Publications
) -> None:
    metadata_channel.gate_at = 1
    loader.start()
    await wait_until(lambda: len(metadata_channel.calls) >= 2)

    # The first batch is applied, but the high watermark (3) is not reached yet.
    assert loader.next_offset == 1
    assert loader.image.broker(1) is not None
    assert not loader.caught_up
    assert publications.initial == [] and publications.deltas == []

    metadata_channel.gate.set()
    await asyncio.wait_for(loader.wait_caught_up(), TIMEOUT_S)

    assert publications.initial == [(2, ["a"])]
    assert publications.deltas == []
    assert publications.images == [loader.image]
    assert loader.next_offset == 3
    assert [(c.fetch_offset, c.last_fetched_epoch, c.max_wait_ms) for c in metadata_channel.calls[:2]] == [
        (0, -1, 0),
        (1, 1, 0),
    ]


async def test_an_unknown_high_watermark_is_never_caught_up_to(
    loader: MetadataLoader, metadata_channel: FakeMetadataChannel, publications: Publications
) -> None:
    """A leader that has not yet committed an entry of its epoch answers HW -1 (after a restart of
    every voter its own HW is 0): a broker at offset 0 must not take that for the end of the log,
    publish an empty image and delete every partition's log as a stray."""
    metadata_channel.script.extend([MetadataFetch(ErrorCode.NONE, b"", -1, None)] * 3)
    metadata_channel.gate_at = 0  # the real log is served only once the gate opens
    loader.start()
    await wait_until(lambda: len(metadata_channel.calls) >= 4)  # 3 unknown HWs, 1 at the gate
    assert not loader.caught_up and publications.initial == []
    metadata_channel.gate.set()
    await asyncio.wait_for(loader.wait_caught_up(), TIMEOUT_S)
    assert publications.initial == [(2, ["a"])]


async def test_batches_after_catch_up_are_published_as_deltas_in_order(
    loader: MetadataLoader, metadata_channel: FakeMetadataChannel, publications: Publications
) -> None:
    loader.start()
    await asyncio.wait_for(loader.wait_caught_up(), TIMEOUT_S)

    metadata_channel.append([TopicRecord("b", TOPIC_B), partition_record(TOPIC_B)], epoch=1)
    metadata_channel.append(
        [
            PartitionChangeRecord(
                partition_id=0,
                topic_id=TOPIC_A,
                replicas=(1,),
                isr=(1,),
                leader=1,
                leader_epoch=1,
                partition_epoch=1,
            )
        ],
        epoch=2,
    )
    await wait_until(lambda: len(publications.deltas) >= 2)

    (created, created_at), (changed, changed_at) = publications.deltas
    assert (created_at, changed_at) == (4, 5)
    assert [t.name for t in created.topics_created] == ["b"]
    assert created.partitions_changed == ()
    assert created.topics_created[0].partitions[0].leader_id == 1
    assert changed.topics_created == ()
    assert [(c.topic_name, c.old.leader_epoch, c.new.leader_epoch) for c in changed.partitions_changed] == [
        ("a", 0, 1)
    ]
    assert len(publications.initial) == 1
    assert loader.next_offset == 6
    await wait_until(lambda: metadata_channel.calls[-1].fetch_offset == 6)
    assert metadata_channel.calls[-1].last_fetched_epoch == 2
    assert metadata_channel.calls[-1].max_wait_ms == 200


async def test_wait_for_answers_once_a_batch_makes_the_predicate_hold(
    loader: MetadataLoader, metadata_channel: FakeMetadataChannel
) -> None:
    loader.start()
    await asyncio.wait_for(loader.wait_caught_up(), TIMEOUT_S)
    waiter = asyncio.create_task(loader.wait_for(lambda image: image.get("b") is not None, TIMEOUT_S))
    await asyncio.sleep(0.01)
    assert not waiter.done()

    metadata_channel.append([TopicRecord("b", TOPIC_B), partition_record(TOPIC_B)], epoch=1)

    assert await asyncio.wait_for(waiter, TIMEOUT_S) is True
    assert loader.image.get("b") is not None


async def test_wait_for_is_false_on_timeout(loader: MetadataLoader) -> None:
    loader.start()
    await asyncio.wait_for(loader.wait_caught_up(), TIMEOUT_S)
    loop = asyncio.get_running_loop()
    started = loop.time()

    assert await loader.wait_for(lambda image: image.get("missing") is not None, 0.05) is False
    assert loop.time() - started >= 0.05


async def test_error_response_or_diverging_epoch_applies_nothing(
    loader: MetadataLoader, metadata_channel: FakeMetadataChannel, publications: Publications
) -> None:
    everything = b"".join(b.data for b in metadata_channel.log)
    # A high watermark of 0 would count as caught up at once if these answers were not refused.
    metadata_channel.script.extend(
        [
            ControllerUnavailableError("down"),
            MetadataFetch(ErrorCode.NOT_LEADER_OR_FOLLOWER, everything, 0, None),
            MetadataFetch(ErrorCode.NONE, everything, 0, (1, 0)),
        ]
    )
    loader.start()
    await asyncio.wait_for(loader.wait_caught_up(), TIMEOUT_S)

    # Each refused answer was fetched again from offset 0, with no epoch and no long poll.
    assert [(c.fetch_offset, c.last_fetched_epoch, c.max_wait_ms) for c in metadata_channel.calls[:4]] == [
        (0, -1, 0)
    ] * 4
    # The image was built by the ordinary fetches that followed, once.
    assert publications.initial == [(2, ["a"])]
    assert loader.next_offset == 3


async def test_a_heartbeat_that_did_not_get_through_is_retried_soon(
    lifecycle_channel: FakeLifecycleChannel,
) -> None:
    """A broker whose controller connection broke heartbeats again within about 100 ms, not a
    whole interval later: the controller gives it only a short grace once the connection closed."""
    lifecycle_channel.heartbeat_script.extend(
        [ControllerUnavailableError("connection lost"), ControllerUnavailableError("connection lost")]
    )
    manager = BrokerLifecycleManager(
        lifecycle_channel,
        broker_id=2,
        cluster_id="cluster-x",
        listeners=lambda: LISTENERS,
        rack=None,
        heartbeat_interval_ms=60_000,  # were retries spaced by the interval, this test would time out
        metadata_offset=lambda: 42,
        on_epoch=lambda epoch: None,
    )
    manager.start()
    try:
        await wait_until(lambda: len(lifecycle_channel.heartbeats) >= 3, 10.0)  # 2 failures, then through
    finally:
        await manager.stop()


def test_the_heartbeat_retry_backoff_stays_bounded_after_any_number_of_failures(
    lifecycle_channel: FakeLifecycleChannel,
) -> None:
    """A quorum without a leader for a long time means thousands of failed heartbeats: the backoff
    must stay a small number (it once overflowed a float and killed the lifecycle task)."""
    manager = BrokerLifecycleManager(
        lifecycle_channel,
        broker_id=2,
        cluster_id="cluster-x",
        listeners=lambda: LISTENERS,
        rack=None,
        heartbeat_interval_ms=2000,
        metadata_offset=lambda: 42,
        on_epoch=lambda epoch: None,
    )
    waits = [manager._retry_wait_s(failures) for failures in (0, 1, 2, 10, 1025, 10**6)]
    assert waits[0] == 2.0 and waits[1] == 0.1
    assert all(0 < wait <= 0.5 for wait in waits[1:])
