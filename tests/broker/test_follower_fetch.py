"""Follower fetches through FetchService, end to end in process (no sockets): they update the
follower's state in the partition, move the high watermark, complete parked acks=-1 produces and
consumer long polls through the partition listeners, and keep an idle partition's caught-up
follower in the ISR without the fetch ever touching that partition (DESIGN "Follower liveness
without touching idle partitions")."""

from __future__ import annotations

import asyncio
import pathlib
import random
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field, replace

import pytest
from prometheus_client import CollectorRegistry

from broker.fetch.service import FetchRequest, FetchService
from broker.fetch_session import (
    FetchContext,
    FetchManager,
    FetchResponseParts,
    FetchSessionCache,
    FetchSessionCacheMetrics,
    IncrementalFetchContext,
    PartitionFetchParams,
    TopicPartitionKey,
)
from broker.produce.service import PartitionOutcome, ProducePartitionData, ProduceRequest, ProduceService
from broker.replication.partition import Partition
from broker.replication.replica_manager import ReplicaManager
from metadata.topics import PartitionState, TopicState
from protocol.error_codes import ErrorCode
from protocol.errors import ProtocolError
from protocol.records.batch import read_header
from protocol.sentinels import IsolationLevel
from server_common.config import load_config, to_log_config
from server_common.purgatory import DelayedOperationPurgatory
from storage.clock import FakeClock
from storage.log_manager import LogManager
from tests.broker.test_fetch_service import BIG, NOW, batch, by_key, key, records_of
from tests.broker.test_leader_replication import FakeController

NODE = 1
FOLLOWER = 2


class Topics:
    """Topic metadata as the leader's image holds it, written directly: these tests need ISRs and
    replica sets of their choosing, which a controller would not hand out."""

    def __init__(self) -> None:
        self.topics: dict[str, TopicState] = {}

    def get(self, name: str) -> TopicState | None:
        return self.topics.get(name)

    def get_by_id(self, topic_id: uuid.UUID) -> TopicState | None:
        return next((t for t in self.topics.values() if t.topic_id == topic_id), None)

    def all(self) -> list[TopicState]:
        return list(self.topics.values())


LAG = 30_000
NONE = ErrorCode.NONE


@dataclass
class Broker:
    """The leader's request path: a ReplicaManager, FetchService and ProduceService on one clock."""

    clock: FakeClock
    topics: Topics
    replicas: ReplicaManager
    fetch: FetchService
    produce: ProduceService
    manager: FetchManager
    controller: FakeController
    purgatories: list[DelayedOperationPurgatory]
    logs: LogManager
    contexts: list[FetchContext] = field(default_factory=list)

    def partition(self, topic: str, index: int = 0) -> Partition:
        partition = self.replicas.get_partition(topic, index)
        assert partition is not None
        return partition

    def append(self, topic: str, index: int = 0, n: int = 1) -> int:
        """Append ``n`` records with acks=1; returns the LEO."""
        partition = self.partition(topic, index)
        partition.append_records(batch(n), required_acks=1, now_ms=self.clock.time_ms())
        return partition.log_end_offset

    def create(
        self,
        name: str,
        partitions: int = 1,
        *,
        min_isr: int = 1,
        replicas: Sequence[int] = (NODE, FOLLOWER),
        isr: Sequence[int] | None = None,
    ) -> None:
        """A topic led here, by default with follower 2 as its other replica, all in the ISR."""
        in_sync = list(replicas if isr is None else isr)
        states = {i: PartitionState(i, NODE, 0, 0, list(replicas), in_sync) for i in range(partitions)}
        topic = TopicState(name, uuid.uuid4(), states, {"min.insync.replicas": str(min_isr)})
        self.topics.topics[name] = topic
        for state in topic.sorted_partitions():  # as the replica transitions do for a new leader
            self.replicas.lead(topic, state)

    def produce_all(
        self, topic: str, n: int = 1, *, timeout_ms: int = 30_000
    ) -> asyncio.Task[list[PartitionOutcome]]:
        request = ProduceRequest(
            version=9,
            client_id="producer",
            acks=-1,
            timeout_ms=timeout_ms,
            transactional_id=None,
            partitions=[ProducePartitionData(topic, 0, batch(n))],
        )
        return asyncio.create_task(self.produce.produce(request))


def build(tmp_path: pathlib.Path, *, eligibility: Callable[[int, int], bool] | None = None) -> Broker:
    config = load_config(
        None, [f"log.dirs={tmp_path / 'logs'}", f"node.id={NODE}", f"replica.lag.time.max.ms={LAG}"]
    )[0]
    clock = FakeClock(NOW)
    logs = LogManager(config.log_dirs, to_log_config({}, config), clock)
    topics = Topics()
    controller = FakeController()
    replicas = ReplicaManager(
        logs,
        topics,
        NODE,
        config,
        clock,
        alter_partition=controller,
        broker_eligibility=eligibility,  # type: ignore[arg-type]
    )
    loop = asyncio.get_running_loop()
    fetch_purgatory = DelayedOperationPurgatory("Fetch", loop)
    produce_purgatory = DelayedOperationPurgatory("Produce", loop)
    cache = FetchSessionCache(FetchSessionCacheMetrics(CollectorRegistry()), random_source=random.Random(3))
    manager = FetchManager(cache, clock.time_ms)
    fetch = FetchService(manager, replicas, topics, fetch_purgatory, fetch_max_bytes=BIG)
    produce = ProduceService(replicas, produce_purgatory, clock)
    replicas.add_partition_listener(fetch.on_partition_changed)
    replicas.add_partition_listener(produce.on_partition_changed)
    broker = Broker(
        clock,
        topics,
        replicas,
        fetch,
        produce,
        manager,
        controller,
        [fetch_purgatory, produce_purgatory],
        logs,
    )
    new_context = manager.new_context

    def recording(**kwargs: object) -> FetchContext:
        broker.contexts.append(new_context(**kwargs))  # type: ignore[arg-type]
        return broker.contexts[-1]

    manager.new_context = recording  # type: ignore[method-assign]
    return broker


@pytest.fixture
async def broker(tmp_path: pathlib.Path) -> AsyncIterator[Broker]:
    node = build(tmp_path)
    yield node
    for purgatory in node.purgatories:
        purgatory.shutdown()
    node.replicas.shutdown()
    node.logs.shutdown()


def next_offset(records: bytes, offset: int) -> int:
    """Where a follower continues after appending the whole batches of ``records``."""
    position = 0
    while position < len(records):
        try:
            header = read_header(records, position)
        except ProtocolError:
            break
        if position + header.size > len(records):
            break
        offset = header.next_offset
        position += header.size
    return offset


@dataclass
class Follower:
    """A follower's Fetch requests to this leader, like the follower process builds them.

    With ``session`` it uses an incremental fetch session as a privileged client and sends only the
    partitions whose fetch offset changed; otherwise every request is sessionless and lists all.
    """

    broker: Broker
    keys: list[TopicPartitionKey]
    session: bool = True
    replica_id: int = FOLLOWER
    offsets: dict[TopicPartitionKey, int] = field(default_factory=dict)
    sent: dict[TopicPartitionKey, int] = field(default_factory=dict)
    session_id: int = 0
    epoch: int = 0
    current_leader_epoch: int = -1

    def __post_init__(self) -> None:
        self.offsets = {k: 0 for k in self.keys}

    async def fetch(self, *, max_wait_ms: int = 0) -> FetchResponseParts:
        if self.session and self.session_id:
            changed = [k for k in self.keys if self.offsets[k] != self.sent.get(k)]
            session = (self.session_id, self.epoch)
        else:
            changed = list(self.keys)
            session = (0, 0) if self.session else (0, -1)
        data = [(k, self._params(k)) for k in changed]
        parts = await self.broker.fetch.fetch(
            FetchRequest(
                version=12,
                replica_id=self.replica_id,
                max_wait_ms=max_wait_ms,
                min_bytes=1,
                max_bytes=BIG,
                isolation_level=IsolationLevel.READ_UNCOMMITTED,
                session_id=session[0],
                session_epoch=session[1],
                fetch_data=data,
                to_forget=[],
            )
        )
        self.sent.update((k, self.offsets[k]) for k in changed)
        if self.session:
            assert parts.error_code == NONE
            self.session_id, self.epoch = parts.session_id, (self.epoch + 1 if self.session_id else 1)
        for k, result in parts.partitions:
            if result.error_code == NONE and result.records_size:
                self.offsets[k] = next_offset(records_of(result), self.offsets[k])
        return parts

    def _params(self, k: TopicPartitionKey) -> PartitionFetchParams:
        return PartitionFetchParams(
            fetch_offset=self.offsets[k], max_bytes=BIG, current_leader_epoch=self.current_leader_epoch
        )


# -- acks=-1 completes through follower fetches -----------------------------------------------------


@pytest.mark.parametrize("session", [False, True], ids=["sessionless", "incremental-session"])
async def test_follower_fetches_move_the_hw_and_complete_a_parked_produce(
    broker: Broker, session: bool
) -> None:
    broker.create("shared")
    follower = Follower(broker, [key("shared")], session=session)
    await follower.fetch()  # caught up on the empty log (a session is created here)
    task = broker.produce_all("shared", 3)
    await asyncio.sleep(0)
    assert not task.done()  # the ISR {1, 2}: the HW waits for the follower
    parts = await follower.fetch()  # at offset 0: gets the batch, has nothing yet
    assert by_key(parts)[key("shared")].records_size > 0 and follower.offsets[key("shared")] == 3
    await asyncio.sleep(0)
    assert not task.done() and broker.partition("shared").high_watermark == 0
    await follower.fetch()  # at offset 3: the leader learns the follower has the batch
    outcome = (await asyncio.wait_for(task, 1))[0]
    assert (outcome.error_code, outcome.result.base_offset) == (NONE, 0)  # type: ignore[union-attr]
    assert broker.partition("shared").high_watermark == 3
    parts = await follower.fetch()  # and the follower learns the new HW from its next response
    assert by_key(parts)[key("shared")].high_watermark == 3


async def test_a_consumer_long_poll_wakes_when_a_follower_fetch_moves_the_hw(broker: Broker) -> None:
    broker.create("shared")
    follower = Follower(broker, [key("shared")], session=False)
    consumer = asyncio.create_task(
        broker.fetch.fetch(
            FetchRequest(
                version=12,
                replica_id=-1,
                max_wait_ms=5_000,
                min_bytes=1,
                max_bytes=BIG,
                isolation_level=IsolationLevel.READ_UNCOMMITTED,
                session_id=0,
                session_epoch=-1,
                fetch_data=[(key("shared"), PartitionFetchParams(fetch_offset=0, max_bytes=BIG))],
                to_forget=[],
            )
        )
    )
    await asyncio.sleep(0.01)
    broker.append("shared", n=2)
    await asyncio.sleep(0.01)
    assert not consumer.done()  # appended, but not committed: a consumer reads up to the HW
    await follower.fetch()
    await follower.fetch()
    result = by_key(await asyncio.wait_for(consumer, 1))[key("shared")]
    assert (result.high_watermark, result.records_size > 0) == (2, True)


async def test_losing_leadership_answers_parked_produces_and_fetches(broker: Broker) -> None:
    broker.create("shared", replicas=(NODE, FOLLOWER, 3))  # follower 3 never fetches: the HW waits
    follower = Follower(broker, [key("shared")], session=False)
    await follower.fetch()
    produce = broker.produce_all("shared")
    await asyncio.sleep(0)  # the produce appends and parks
    await follower.fetch()  # follower 2 gets the record; its next fetch parks, caught up
    parked = asyncio.create_task(follower.fetch(max_wait_ms=5_000))
    await asyncio.sleep(0.01)
    assert not produce.done() and not parked.done()
    assert broker.partition("shared").make_follower(leader_epoch=1)
    assert (await asyncio.wait_for(produce, 1))[0].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    result = by_key(await asyncio.wait_for(parked, 1))[key("shared")]
    assert result.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER


async def test_an_isr_below_min_isr_freezes_the_hw_and_refuses_new_acks_all(broker: Broker) -> None:
    broker.create("strict", min_isr=2)
    follower = Follower(broker, [key("strict")], session=False)
    await follower.fetch()
    partition = broker.partition("strict")
    parked = broker.produce_all("strict", timeout_ms=50)
    await asyncio.sleep(0)
    broker.clock.advance(LAG + 1)  # the follower stopped fetching
    assert broker.replicas.maybe_shrink_isr() == 1
    assert broker.controller.answer() and partition.isr == [NODE]
    await follower.fetch()  # it comes back and has the record, but the committed ISR is 1 < 2
    assert partition.high_watermark == 0
    outcome = (await asyncio.wait_for(parked, 1))[0]
    assert outcome.error_code == ErrorCode.REQUEST_TIMED_OUT  # Kafka 3.7+: 7, rarely 20
    refused = (await broker.produce_all("strict"))[0]
    assert refused.error_code == ErrorCode.NOT_ENOUGH_REPLICAS and partition.log_end_offset == 1
    assert broker.controller.proposals == [(NODE, FOLLOWER)]  # at the HW again: proposed for the ISR


async def test_the_fast_path_answers_a_produce_already_committed(broker: Broker) -> None:
    broker.create("solo", isr=(NODE,))
    broker.partition("solo").make_leader(0, 1, [NODE], [NODE])  # reassigned to a single replica
    outcome = (await asyncio.wait_for(broker.produce_all("solo"), 1))[0]
    assert outcome.error_code == NONE and broker.purgatories[1].num_delayed == 0


# -- who may update follower state -----------------------------------------------------------------


async def test_a_follower_outside_the_replica_set_is_refused_and_changes_nothing(broker: Broker) -> None:
    broker.create("shared", isr=(NODE,))
    broker.append("shared", n=2)
    partition = broker.partition("shared")
    before = (partition.high_watermark, {r: replace(s) for r, s in partition.replica_set.followers.items()})
    for session in (False, True):
        stranger = Follower(broker, [key("shared")], session=session, replica_id=3)
        parts = await stranger.fetch()
        assert by_key(parts)[key("shared")].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
        stranger.current_leader_epoch = 0
        stranger.session_id = 0
        parts = await stranger.fetch()
        assert by_key(parts)[key("shared")].error_code == ErrorCode.UNKNOWN_LEADER_EPOCH
    assert (partition.high_watermark, partition.replica_set.followers) == before
    assert 3 not in partition.replica_set.followers and broker.controller.proposals == []
    assert partition.replica_set.followers[FOLLOWER].log_end_offset == -1


async def test_a_stale_broker_epoch_does_not_expand_the_isr(tmp_path: pathlib.Path) -> None:
    """Fetch v15 carries the follower's broker epoch; the eligibility check knows epoch 7 only."""
    node = build(tmp_path, eligibility=lambda replica_id, epoch: epoch in (-1, 7))
    node.create("shared", isr=(NODE,))
    topic_id = node.topics.topics["shared"].topic_id
    by_id = TopicPartitionKey(topic_id, None, 0)

    async def fetch(replica_epoch: int) -> ErrorCode:
        request = FetchRequest(
            version=15,
            replica_id=FOLLOWER,
            max_wait_ms=0,
            min_bytes=1,
            max_bytes=BIG,
            isolation_level=IsolationLevel.READ_UNCOMMITTED,
            session_id=0,
            session_epoch=-1,
            fetch_data=[(by_id, PartitionFetchParams(fetch_offset=0, max_bytes=BIG))],
            to_forget=[],
            replica_epoch=replica_epoch,
        )
        return (await node.fetch.fetch(request)).partitions[0][1].error_code  # type: ignore[return-value]

    assert await fetch(5) == NONE  # served...
    assert node.controller.proposals == []  # ...but not proposed for the ISR
    assert node.partition("shared").replica_set.followers[FOLLOWER].broker_epoch == 5
    assert await fetch(7) == NONE
    assert node.controller.proposals == [(NODE, FOLLOWER)]
    for purgatory in node.purgatories:
        purgatory.shutdown()
    node.replicas.shutdown()
    node.logs.shutdown()


async def test_a_diverging_follower_does_not_update_its_state(broker: Broker) -> None:
    """KIP-101 through the fetch path: a DivergingEpoch answer records nothing for the follower."""
    broker.create("shared")
    broker.append("shared", n=3)
    partition = broker.partition("shared")
    assert partition.make_leader(2, 1, [NODE, FOLLOWER], [NODE, FOLLOWER])
    broker.append("shared", n=3)
    stale = PartitionFetchParams(fetch_offset=5, max_bytes=BIG, last_fetched_epoch=1)
    request = FetchRequest(
        version=12,
        replica_id=FOLLOWER,
        max_wait_ms=0,
        min_bytes=1,
        max_bytes=BIG,
        isolation_level=IsolationLevel.READ_UNCOMMITTED,
        session_id=0,
        session_epoch=-1,
        fetch_data=[(key("shared"), stale)],
        to_forget=[],
    )
    result = by_key(await broker.fetch.fetch(request))[key("shared")]
    assert result.diverging_epoch == 0
    assert partition.replica_set.followers[FOLLOWER].log_end_offset == -1
    assert partition.high_watermark == 0


# -- follower liveness of idle partitions ----------------------------------------------------------


async def test_idle_partitions_of_a_large_follower_session_keep_their_follower_in_sync(
    broker: Broker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """1,000 partitions in one follower session, appends to one only, for 10 lag periods.

    Each incremental fetch evaluates the changed partition only, and no follower state is touched
    for the 999 idle ones; still none of them loses its caught-up follower, including one that gets
    an append after 10 lag periods of silence while the ISR check runs before the follower's next
    fetch (Kafka's per-fetch bookkeeping would have it caught up at the follower's last fetch).
    When the follower stops fetching, the partitions that get appends drop it within
    (lag, 1.5 lag] of its last fetch; the idle ones keep it (at the leader's LEO, as in Kafka).
    """
    calls = {"fetch": 0, "idle": 0}
    update_fetch, update_idle = Partition.update_follower_fetch, Partition.update_idle_follower_fetch

    def counting_fetch(self: Partition, *args: int) -> bool:
        calls["fetch"] += 1
        return update_fetch(self, *args)

    def counting_idle(self: Partition, *args: int) -> bool:
        calls["idle"] += 1
        return update_idle(self, *args)

    monkeypatch.setattr(Partition, "update_follower_fetch", counting_fetch)
    monkeypatch.setattr(Partition, "update_idle_follower_fetch", counting_idle)
    size, step = 1_000, 5_000
    broker.create("wide", size)
    follower = Follower(broker, [key("wide", i) for i in range(size)])
    await follower.fetch()
    assert calls == {"fetch": size, "idle": 0}  # the full fetch reads (and records) every partition
    calls["fetch"] = 0

    async def run(rounds: int, *, append_to: int | None = 0) -> None:
        for n in range(1, rounds + 1):
            broker.clock.advance(step)
            if append_to is not None:
                broker.append("wide", append_to)
            await follower.fetch()
            context = broker.contexts[-1]
            assert isinstance(context, IncrementalFetchContext) and context.partitions_evaluated <= 2
            if n % (LAG // 2 // step) == 0:  # the isr-expiration task, every lag/2
                assert broker.replicas.maybe_shrink_isr() == 0

    await run(10 * LAG // step)
    assert broker.controller.proposals == []
    # one real update per fetch; one idle credit: the first append to partition 0 ended its idle stretch
    assert calls["fetch"] <= 2 * 10 * LAG // step and calls["idle"] == 1
    assert all(p.isr == [NODE, FOLLOWER] for p in broker.replicas.partitions())

    # an idle partition gets an append; the ISR check runs before the follower fetches again
    broker.clock.advance(step)
    broker.append("wide", 500)
    assert calls["idle"] == 2  # the end of its idle stretch, credited at the session's last use
    assert broker.replicas.maybe_shrink_isr() == 0
    await run(LAG // step, append_to=None)  # the follower catches up on it, no one is removed
    assert broker.partition("wide", 500).high_watermark == 1

    # the follower stops: partitions with appends drop it, the idle ones keep it
    await follower.fetch()
    stopped = broker.clock.time_ms()
    broker.append("wide", 0)
    broker.clock.advance(LAG // 3)
    broker.append("wide", 700)
    removed_at = []
    for k in range(1, 5):  # the isr-expiration task, every lag/2
        broker.clock.set(stopped + k * LAG // 2)
        if broker.replicas.maybe_shrink_isr():
            removed_at.append(broker.clock.time_ms())
    assert sorted(partition.index for partition, _ in broker.controller.submitted) == [0, 700]
    assert len(removed_at) == 1 and stopped + LAG < removed_at[0] <= stopped + 3 * LAG // 2
