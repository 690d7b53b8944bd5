"""KIP-392 on the leader: Kafka's RackAwareReplicaSelector and findPreferredReadReplica rules, the
``replica.selector.class`` key, and the preferred read replica in fetch responses (sessionless and
in incremental sessions)."""

from __future__ import annotations

import asyncio
import pathlib
import random
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from broker.fetch.replica_selector import (
    ClientMetadata,
    RackAwareReplicaSelector,
    ReplicaView,
    find_preferred_read_replica,
    replica_selector,
)
from broker.fetch.service import FetchRequest, FetchService
from broker.fetch_session import (
    FetchManager,
    FetchSessionCache,
    FetchSessionCacheMetrics,
    PartitionFetchParams,
)
from broker.fetch_session.partition import NO_PREFERRED_READ_REPLICA
from broker.handlers.base import EncodedResponse, RequestContext
from broker.handlers.fetch import FetchHandler, fetch_request
from broker.replication.partition import Partition
from broker.replication.replica_manager import ReplicaManager
from protocol.api_keys import ApiKey
from protocol.error_codes import ErrorCode
from protocol.messages import REQUESTS, RESPONSES
from protocol.sentinels import IsolationLevel
from server_common.config import ConfigError, load_config, to_log_config
from server_common.config.definitions import RACK_AWARE_REPLICA_SELECTOR
from server_common.purgatory import DelayedOperationPurgatory
from storage.clock import FakeClock
from storage.log_manager import LogManager
from tests.broker.local_topics import LocalTopics
from tests.broker.test_fetch_service import BIG, NOW, batch, by_key, key, records_of

pytestmark = pytest.mark.timeout(30)

NODE = 1
SELECTOR = RackAwareReplicaSelector()


def view(broker_id: int | None, rack: str | None, leo: int = 10, lag_ms: int = 0) -> ReplicaView:
    return ReplicaView(broker_id, rack, leo, lag_ms)


def client(rack: str = "") -> ClientMetadata:
    return ClientMetadata(rack, "PLAINTEXT")


# -- the selector ------------------------------------------------------------------------------------


def test_no_client_rack_gets_the_leader() -> None:
    leader = view(1, "a")
    assert SELECTOR.select(client(""), leader, [leader, view(2, "")]) is leader


def test_no_replica_in_the_client_rack_gets_the_leader() -> None:
    leader = view(1, "a")
    assert SELECTOR.select(client("c"), leader, [leader, view(2, "b")]) is leader


def test_leader_in_the_client_rack_is_kept_over_a_more_caught_up_follower() -> None:
    leader = view(1, "a", leo=5)
    assert SELECTOR.select(client("a"), leader, [leader, view(2, "a", leo=9)]) is leader


def test_most_caught_up_replica_of_the_rack_wins() -> None:
    """Kafka's comparator: largest LEO, then shortest time since caught up, then largest id."""
    leader = view(1, "a")
    by_leo = [leader, view(2, "b", leo=8), view(3, "b", leo=9, lag_ms=500)]
    assert SELECTOR.select(client("b"), leader, by_leo) == view(3, "b", leo=9, lag_ms=500)
    by_lag = [leader, view(2, "b", lag_ms=10), view(3, "b", lag_ms=20)]
    assert SELECTOR.select(client("b"), leader, by_lag) == view(2, "b", lag_ms=10)
    by_id = [leader, view(2, "b"), view(4, "b"), view(3, "b")]
    assert SELECTOR.select(client("b"), leader, by_id) == view(4, "b")


@dataclass
class Follower:
    log_end_offset: int = 10
    log_start_offset: int = 0
    last_caught_up_time_ms: int = NOW


def preferred(
    followers: Mapping[int, Follower],
    *,
    isr: tuple[int, ...] = (1, 2, 3),
    racks: Mapping[int, str | None] | None = None,
    fetch_offset: int = 5,
    rack: str = "b",
) -> int | None:
    return find_preferred_read_replica(
        SELECTOR,
        client(rack),
        leader_id=1,
        leader_log_end_offset=10,
        followers=followers,
        isr=isr,
        racks={1: "a", 2: "b", 3: "c"} if racks is None else racks,
        fetch_offset=fetch_offset,
        now_ms=NOW,
    )


def test_a_follower_in_the_client_rack_is_preferred() -> None:
    assert preferred({2: Follower(), 3: Follower()}) == 2


def test_the_leader_selected_means_no_preferred_replica() -> None:
    assert preferred({2: Follower(), 3: Follower()}, rack="a") is None
    assert preferred({2: Follower(), 3: Follower()}, rack="") is None
    assert preferred({2: Follower(), 3: Follower()}, rack="elsewhere") is None


def test_only_in_sync_followers_holding_the_fetch_offset_are_candidates() -> None:
    assert preferred({2: Follower(), 3: Follower()}, isr=(1, 3)) is None
    assert preferred({2: Follower(log_end_offset=4), 3: Follower()}) is None
    assert preferred({2: Follower(log_start_offset=6), 3: Follower()}) is None
    assert preferred({2: Follower(log_end_offset=5), 3: Follower()}) == 2  # LEO == fetch offset


def test_a_broker_without_an_endpoint_on_the_listener_is_no_node() -> None:
    """Kafka's Node.noNode(): a fenced broker, or one not on the client's listener, has no rack."""
    assert preferred({2: Follower(), 3: Follower()}, racks={1: "a", 3: "c"}) is None


def test_replica_selector_class_names() -> None:
    assert replica_selector(None) is None
    assert isinstance(replica_selector(RACK_AWARE_REPLICA_SELECTOR), RackAwareReplicaSelector)


def test_replica_selector_class_refuses_any_other_class() -> None:
    config = load_config(None, [f"replica.selector.class={RACK_AWARE_REPLICA_SELECTOR}"])[0]
    assert config.replica_selector_class == RACK_AWARE_REPLICA_SELECTOR
    assert load_config(None, [])[0].replica_selector_class is None
    with pytest.raises(ConfigError) as raised:
        load_config(None, ["replica.selector.class=com.example.MySelector"])
    message = str(raised.value)
    assert "replica.selector.class" in message and "\n" not in message


# -- preferred read replica in fetch responses ---------------------------------------------------------


@dataclass
class Env:
    service: FetchService
    replicas: ReplicaManager
    topics: LocalTopics
    purgatory: DelayedOperationPurgatory
    logs: LogManager
    racks: dict[int, str | None]

    def partition(self, index: int = 0) -> Partition:
        partition = self.replicas.get_partition("orders", index)
        assert partition is not None
        return partition

    def follower_fetched(self, replica_id: int, offset: int, index: int = 0) -> None:
        partition = self.partition(index)
        partition.update_follower_fetch(replica_id, offset, 0, NOW, partition.log_end_offset)


@pytest.fixture
async def env(tmp_path: pathlib.Path) -> AsyncIterator[Env]:
    config = load_config(None, [f"log.dirs={tmp_path / 'logs'}", f"node.id={NODE}"])[0]
    clock = FakeClock(NOW)
    logs = LogManager(config.log_dirs, to_log_config({}, config), clock)
    topics = LocalTopics(NODE, brokers=[2, 3])
    replicas = ReplicaManager(logs, topics, NODE, config, clock)
    topics.subscribe(replicas)
    purgatory = DelayedOperationPurgatory("Fetch", asyncio.get_running_loop())
    cache = FetchSessionCache(FetchSessionCacheMetrics(CollectorRegistry()), random_source=random.Random(7))
    racks: dict[int, str | None] = {1: "a", 2: "b", 3: "c"}
    service = FetchService(
        FetchManager(cache, clock.time_ms),
        replicas,
        topics,
        purgatory,
        fetch_max_bytes=BIG,
        replica_selector=SELECTOR,
        replica_racks=lambda listener: racks if listener == "PLAINTEXT" else {},
    )
    replicas.add_partition_listener(service.on_partition_changed)
    topics.create_topic("orders", -1, -1, {}, assignments=[(0, [1, 2, 3]), (1, [1, 2, 3])])
    built = Env(service, replicas, topics, purgatory, logs, racks)
    for index in (0, 1):
        built.partition(index).append_records(batch(2), required_acks=1, now_ms=NOW)
        built.follower_fetched(2, 2, index)
        built.follower_fetched(3, 2, index)
    yield built
    purgatory.shutdown()
    replicas.shutdown()
    logs.shutdown()


def consumer_fetch(
    offset: int = 0,
    *,
    rack: str = "b",
    version: int = 12,
    index: int = 0,
    session: tuple[int, int] = (0, -1),
    leader_epoch: int = -1,
    listener: str = "PLAINTEXT",
) -> FetchRequest:
    params = PartitionFetchParams(fetch_offset=offset, max_bytes=BIG, current_leader_epoch=leader_epoch)
    return FetchRequest(
        version=version,
        replica_id=-1,
        max_wait_ms=500,
        min_bytes=1,
        max_bytes=BIG,
        isolation_level=IsolationLevel.READ_UNCOMMITTED,
        session_id=session[0],
        session_epoch=session[1],
        fetch_data=[(key("orders", index), params)],
        to_forget=[],
        rack_id=rack,
        listener=listener,
    )


async def test_consumer_in_a_follower_rack_gets_the_follower_and_no_records(env: Env) -> None:
    parts = await asyncio.wait_for(env.service.fetch(consumer_fetch()), 5)  # answered at once
    result = by_key(parts)[key("orders")]
    assert (result.error_code, result.preferred_read_replica) == (ErrorCode.NONE, 2)
    assert (result.high_watermark, result.last_stable_offset, result.log_start_offset) == (2, 2, 0)
    assert (result.records_size, records_of(result)) == (0, b"")


async def test_consumer_in_the_leader_rack_or_without_rack_reads_from_the_leader(env: Env) -> None:
    for rack in ("a", "", "elsewhere"):
        result = by_key(await env.service.fetch(consumer_fetch(rack=rack)))[key("orders")]
        assert result.preferred_read_replica == NO_PREFERRED_READ_REPLICA
        assert result.records_size > 0


async def test_no_preferred_replica_before_fetch_v11_or_on_another_listener(env: Env) -> None:
    for request in (consumer_fetch(version=10), consumer_fetch(listener="INTERNAL")):
        result = by_key(await env.service.fetch(request))[key("orders")]
        assert (result.preferred_read_replica, result.records_size > 0) == (NO_PREFERRED_READ_REPLICA, True)


async def test_follower_out_of_the_isr_or_behind_the_fetch_offset_is_not_preferred(env: Env) -> None:
    partition = env.partition()
    partition.append_records(batch(1), required_acks=1, now_ms=NOW)  # LEO 3, followers at 2
    result = by_key(await env.service.fetch(consumer_fetch(3)))[key("orders")]
    assert result.preferred_read_replica == NO_PREFERRED_READ_REPLICA
    env.racks[2] = "elsewhere"
    result = by_key(await env.service.fetch(consumer_fetch(0)))[key("orders")]
    assert result.preferred_read_replica == NO_PREFERRED_READ_REPLICA


async def test_preferred_replica_checks_the_leader_epoch_first(env: Env) -> None:
    partition = env.partition()
    partition.make_leader(partition.leader_epoch + 2, partition.partition_epoch + 1, [1, 2, 3], [1, 2, 3])
    env.follower_fetched(2, 2)
    epoch = partition.leader_epoch
    fenced = by_key(await env.service.fetch(consumer_fetch(leader_epoch=epoch - 1)))[key("orders")]
    assert (fenced.error_code, fenced.preferred_read_replica) == (ErrorCode.FENCED_LEADER_EPOCH, -1)
    unknown = by_key(await env.service.fetch(consumer_fetch(leader_epoch=epoch + 1)))[key("orders")]
    assert unknown.error_code == ErrorCode.UNKNOWN_LEADER_EPOCH
    ok = by_key(await env.service.fetch(consumer_fetch(leader_epoch=epoch)))[key("orders")]
    assert (ok.error_code, ok.preferred_read_replica) == (ErrorCode.NONE, 2)


async def test_incremental_session_reports_the_preferred_replica_on_every_fetch(env: Env) -> None:
    """Kafka includes a partition with a preferred replica in every incremental response."""
    full = await env.service.fetch(consumer_fetch(session=(0, 0)))
    assert by_key(full)[key("orders")].preferred_read_replica == 2
    session_id = full.session_id
    assert session_id != 0
    for epoch in (1, 2):
        idle = FetchRequest(
            version=12,
            replica_id=-1,
            max_wait_ms=0,
            min_bytes=1,
            max_bytes=BIG,
            isolation_level=IsolationLevel.READ_UNCOMMITTED,
            session_id=session_id,
            session_epoch=epoch,
            fetch_data=[],
            to_forget=[],
            rack_id="b",
            listener="PLAINTEXT",
        )
        parts = await env.service.fetch(idle)
        assert by_key(parts)[key("orders")].preferred_read_replica == 2


async def test_isr_change_reports_a_new_preferred_replica_in_an_idle_session(env: Env) -> None:
    """A partition not dirty whose selection changes with the ISR is in the next incremental response."""
    env.racks[2] = "elsewhere"  # nobody in rack b: the consumer reads from the leader
    full = await env.service.fetch(consumer_fetch(2, session=(0, 0)))
    result = by_key(full)[key("orders")]
    assert (result.preferred_read_replica, result.high_watermark) == (-1, 2)

    def incremental(epoch: int) -> FetchRequest:
        return FetchRequest(
            version=12,
            replica_id=-1,
            max_wait_ms=0,
            min_bytes=1,
            max_bytes=BIG,
            isolation_level=IsolationLevel.READ_UNCOMMITTED,
            session_id=full.session_id,
            session_epoch=epoch,
            fetch_data=[],
            to_forget=[],
            rack_id="b",
            listener="PLAINTEXT",
        )

    assert by_key(await env.service.fetch(incremental(1))) == {}
    env.racks[2] = "b"  # the selection would change, but nothing tells the session: still clean
    assert by_key(await env.service.fetch(incremental(2))) == {}
    partition = env.partition()
    replica_set = partition.replica_set
    proposal = replica_set.propose_isr((1, 2))
    assert partition.on_alter_partition_result(
        proposal, ErrorCode.NONE, partition.leader_epoch, [1, 2], replica_set.partition_epoch + 1
    )
    parts = by_key(await env.service.fetch(incremental(3)))
    assert parts[key("orders")].preferred_read_replica == 2


@pytest.mark.parametrize("version", [11, 12, 13, 17])
async def test_fetch_handler_carries_the_rack_and_answers_on_the_wire(env: Env, version: int) -> None:
    """Fetch v11+ on the wire: RackId and the connection's listener reach the selector, and the
    response's PreferredReadReplica names the follower."""
    topic: dict[str, Any] = {"topic": "orders"}
    if version >= 13:
        state = env.topics.get("orders")
        assert state is not None
        topic = {"topic_id": state.topic_id}
    partition = {
        "partition": 0,
        "current_leader_epoch": -1,
        "fetch_offset": 0,
        "last_fetched_epoch": -1,
        "partition_max_bytes": 1 << 20,
    }
    message = {
        "replica_id": -1,
        "max_wait_ms": 0,
        "min_bytes": 1,
        "max_bytes": 1 << 20,
        "isolation_level": 0,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [{**topic, "partitions": [partition]}],
        "forgotten_topics_data": [],
        "rack_id": "b",
    }
    codec = REQUESTS[ApiKey.FETCH].codec(version)
    decoded = codec.decode(codec.encode(message))
    fetch = fetch_request(version, decoded, "PLAINTEXT")
    assert (fetch.rack_id, fetch.listener, fetch.client_metadata) == (
        "b",
        "PLAINTEXT",
        ClientMetadata("b", "PLAINTEXT"),
    )
    ctx = RequestContext(ApiKey.FETCH, version, 7, "test", "peer", 1, 0, listener="PLAINTEXT")
    response = await FetchHandler(env.service).handle(ctx, decoded)
    assert isinstance(response, EncodedResponse)
    joined = b"".join(p if isinstance(p, bytes) else p.read_bytes() for p in response.parts)
    data = RESPONSES[ApiKey.FETCH].codec(version).decode(joined).responses[0].partitions[0]
    assert (data.error_code, data.preferred_read_replica, data.records, data.high_watermark) == (0, 2, b"", 2)
