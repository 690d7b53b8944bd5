"""The metadata quorum on real processes: three combined voters elect one active controller, and
the cluster survives the loss of any one of them, the active controller included."""

from __future__ import annotations

import re
import shutil
import signal
import time
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.errors import KafkaConnectionError

from client.connection import KafkaConnection
from metadata.raft import wire
from protocol.api_keys import ApiKey
from tests.integration.cluster import FAST_FAILOVER, Cluster, wait_until
from tests.integration.test_replication import (
    KAFKA_SESSION_DEFAULTS,
    TOPIC,
    ContinuousProducer,
    _check_acked,
    _create_topic,
    _wait_replicas_identical,
)
from tools.cli import main

pytestmark = [pytest.mark.timeout(240)]

ACTIVATED = re.compile(r"\[info\s*\] active controller\s")
"""The line a node logs when its controller becomes active (broker/quorum: ActiveController)."""


def _quorum_partition(port: int) -> Any | None:
    """The metadata partition of a voter's DescribeQuorum answer; None if unreachable."""
    import asyncio

    async def ask() -> Any:
        connection = await KafkaConnection.open("127.0.0.1", port, connect_timeout_s=2, request_timeout_s=5)
        try:
            body = wire.describe_quorum_request_body()
            response = await connection.request(ApiKey.DESCRIBE_QUORUM, 2, body)
        finally:
            connection.close()
            await connection.wait_closed()
        return response.topics[0].partitions[0]

    try:
        return asyncio.run(ask())
    except Exception:
        return None


def _describe(port: int) -> tuple[int, int, int] | None:
    """(leader id, epoch, high watermark) from a voter's DescribeQuorum, None if it does not lead."""
    partition = _quorum_partition(port)
    if partition is None or partition.error_code:
        return None
    return int(partition.leader_id), int(partition.leader_epoch), int(partition.high_watermark)


def _active_controller(cluster: Cluster, alive: set[int]) -> tuple[int, int]:
    """(leader id, epoch) as the voters in ``alive`` report it; waits for one to lead."""
    found: list[tuple[int, int]] = []

    def one_leads() -> bool:
        for node in alive:
            answer = _describe(cluster.controller_ports[node])
            if answer is not None and answer[0] == node:
                found[:] = [(answer[0], answer[1])]
                return True
        return False

    wait_until(one_leads, 30, "a voter to lead the metadata quorum", interval_s=0.2)
    return found[0]


@pytest.mark.slow
def test_three_voters_elect_one_leader_that_brokers_follow(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster = Cluster(tmp_path, voters=3).start()
    try:
        leader, epoch = _active_controller(cluster, {1, 2, 3})
        others = [n for n in (1, 2, 3) if n != leader]
        for node in others:  # followers refuse DescribeQuorum: only the leader has the answer
            assert _describe(cluster.controller_ports[node]) is None
        _create_topic(cluster, [1, 2, 3])
        assert ACTIVATED.search(cluster.brokers[leader].output())
        for node in others:
            assert not ACTIVATED.search(cluster.brokers[node].output())
        # kafka.server:type=raft-metrics, on every voter's /metrics
        metrics = cluster.brokers[leader]
        assert metrics.metric("kafka_server_raftmetrics_current_state", state="leader") == 1
        assert metrics.metric("kafka_server_raftmetrics_current_leader") == leader
        assert metrics.metric("kafka_server_raftmetrics_current_epoch") == epoch
        assert metrics.metric("kafka_server_raftmetrics_high_watermark") > 0
        for node in others:
            follower = cluster.brokers[node]
            assert follower.metric("kafka_server_raftmetrics_current_state", state="follower") == 1
            assert follower.metric("kafka_server_raftmetrics_current_leader") == leader
        # kafka-metadata-quorum's view, through a broker that is not the leader (it forwards)
        capsys.readouterr()
        bootstrap = cluster.brokers[others[0]].bootstrap
        assert main(["metadata-quorum", "--bootstrap-server", bootstrap, "describe", "--status"]) == 0
        status = capsys.readouterr().out
        assert re.search(rf"^LeaderId:\s+{leader}$", status, re.M), status
        assert re.search(rf"^LeaderEpoch:\s+{epoch}$", status, re.M), status
        assert main(["metadata-quorum", "--bootstrap-server", bootstrap, "describe", "--replication"]) == 0
        rows = capsys.readouterr().out.splitlines()[1:]
        assert sorted(row.split()[0] for row in rows) == ["1", "2", "3"], rows
        assert sum("Leader" in row for row in rows) == 1 and sum("Follower" in row for row in rows) == 2
        print(f"leader {leader} in epoch {epoch}")
    finally:
        cluster.stop()


@pytest.mark.slow
def test_killing_the_active_controller_loses_no_acknowledged_write(tmp_path: Path) -> None:
    """SIGKILL of the node that is the active controller and leads the partition: another voter is
    elected, the broker's session and the partition move, and acks=all writes resume with nothing
    acknowledged lost or duplicated."""
    cluster = Cluster(tmp_path, voters=3, overrides=KAFKA_SESSION_DEFAULTS).start()
    try:
        leader, epoch = _active_controller(cluster, {1, 2, 3})
        others = [n for n in (1, 2, 3) if n != leader]
        _create_topic(cluster, [leader, *others])
        process = cluster.brokers[leader].process
        assert process is not None
        with ContinuousProducer(cluster, "k") as producer:
            producer.wait_for_more(100, "before the active controller is killed")
            killed_at = time.monotonic()
            process.send_signal(signal.SIGKILL)
            new_leader, new_epoch = _active_controller(cluster, set(others))
            elected_s = time.monotonic() - killed_at
            producer.wait_for_more(20, "after the active controller was killed", timeout_s=90)
            resumed_s = time.monotonic() - killed_at
            acked = producer.stop()
        print(
            f"new active controller {new_leader} (epoch {new_epoch}) {elected_s:.1f} s after SIGKILL of "
            f"{leader}; acks=all writes resumed after {resumed_s:.1f} s"
        )
        assert new_epoch > epoch
        assert resumed_s < 30, f"writes resumed only after {resumed_s:.1f} s"
        _wait_replicas_identical(cluster, others, len(acked))
        for node in others:
            _check_acked(cluster, node, acked)
    finally:
        cluster.stop()


FENCED = re.compile(r"\] broker fenced\s+broker=(\d+)")


def _fenced_brokers(output: str) -> set[int]:
    return {int(match.group(1)) for match in FENCED.finditer(output)}


@pytest.mark.slow
def test_a_paused_active_controller_is_replaced_and_fences_nobody_when_it_resumes(tmp_path: Path) -> None:
    """SIGSTOP of the active controller for longer than the broker session: the other voters elect
    a new one, which fences only the paused node; when it resumes, its stale controller fences
    nobody (it learns it was deposed), and its replica rejoins every ISR."""
    cluster = Cluster(tmp_path, voters=3).start()
    try:
        paused, epoch = _active_controller(cluster, {1, 2, 3})
        others = [n for n in (1, 2, 3) if n != paused]
        _create_topic(cluster, [*others, paused])
        process = cluster.brokers[paused].process
        assert process is not None
        mark = len(cluster.brokers[paused].output())
        process.send_signal(signal.SIGSTOP)
        try:
            _, new_epoch = _active_controller(cluster, set(others))
            time.sleep(5)  # past broker.session.timeout.ms (3 s in FAST_FAILOVER)
        finally:
            process.send_signal(signal.SIGCONT)
        assert new_epoch > epoch
        wait_until(lambda: _isr_via(cluster, others[0]) == [[1, 2, 3]], 60, "the paused replica to rejoin")
        time.sleep(2)  # several session checks and heartbeats after the resume
        assert _fenced_brokers(cluster.brokers[paused].output()[mark:]) == set(), (
            "a deposed controller fenced"
        )
        for node in others:
            assert _fenced_brokers(cluster.brokers[node].output()) <= {paused}
        assert _describe(cluster.controller_ports[paused]) is None  # it follows, it does not lead
    finally:
        cluster.stop()


@pytest.mark.slow
def test_with_two_voters_down_nothing_commits_but_the_data_plane_serves(tmp_path: Path) -> None:
    """Two of three voters killed: no metadata change commits (CreateTopics fails), but the survivor
    keeps serving the partition it leads with the metadata it has; one voter back and the quorum
    commits again."""
    cluster = Cluster(tmp_path, voters=3, overrides=(*FAST_FAILOVER_RF1,)).start()
    try:
        _active_controller(cluster, {1, 2, 3})
        survivor = cluster.brokers[1]
        admin = KafkaAdminClient(bootstrap_servers=survivor.bootstrap, request_timeout_ms=10_000)
        try:
            admin.create_topics([NewTopic("kept", 1, 1, replica_assignments=None)])
        finally:
            admin.close()
        _wait_leader_is(cluster, "kept", 1)
        _produce(survivor.bootstrap, "kept", [b"before"])
        for node in (2, 3):
            cluster.brokers[node].stop(signal.SIGKILL)
        wait_until(lambda: _describe(cluster.controller_ports[1]) is None, 30, "the lone voter to resign")
        _produce(survivor.bootstrap, "kept", [b"during-1", b"during-2"])
        assert _consume(survivor.bootstrap, "kept", 3) == [b"before", b"during-1", b"during-2"]
        admin = KafkaAdminClient(bootstrap_servers=survivor.bootstrap, request_timeout_ms=5_000)
        try:
            with pytest.raises(Exception):  # noqa: B017 - kafka-python raises per error kind
                _create_or_raise(admin, "not-committed")
        finally:
            admin.close()
        cluster.brokers[2].start(timeout_s=60)
        _active_controller(cluster, {1, 2})
        admin = KafkaAdminClient(bootstrap_servers=survivor.bootstrap, request_timeout_ms=20_000)
        try:
            _create_or_raise(admin, "after")
        finally:
            admin.close()
        _produce(survivor.bootstrap, "kept", [b"after"])
        assert _consume(survivor.bootstrap, "kept", 4)[-1] == b"after"
    finally:
        cluster.stop()


FAST_FAILOVER_RF1 = (
    *(o for o in FAST_FAILOVER if not o.startswith(("default.replication.factor", "min.insync.replicas"))),
    "default.replication.factor=1",
    "min.insync.replicas=1",
    "offsets.topic.replication.factor=1",
)


def _isr_via(cluster: Cluster, node: int) -> list[list[int]]:
    admin = KafkaAdminClient(bootstrap_servers=cluster.brokers[node].bootstrap)
    try:
        [described] = admin.describe_topics([TOPIC])
    finally:
        admin.close()
    return [sorted(p["isr_nodes"]) for p in described["partitions"]]


def _create_or_raise(admin: KafkaAdminClient, topic: str) -> None:
    response = admin.create_topics([NewTopic(topic, 1, 1)])
    for _name, code, *_rest in getattr(response, "topic_errors", []) or []:
        if code:
            raise RuntimeError(f"CreateTopics {topic}: error {code}")


def _wait_leader_is(cluster: Cluster, topic: str, node: int) -> None:
    def leads() -> bool:
        consumer = KafkaConsumer(bootstrap_servers=cluster.brokers[node].bootstrap)
        try:
            partitions = consumer.partitions_for_topic(topic)
            return bool(partitions)
        finally:
            consumer.close()

    wait_until(leads, 30, f"{topic} to be known")


def _produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks=1, retries=5, request_timeout_ms=10_000)
    try:
        for value in values:
            producer.send(topic, value).get(timeout=30)
    finally:
        producer.close()


def _consume(bootstrap: str, topic: str, count: int, attempts: int = 3) -> list[bytes]:
    """Read ``count`` values of partition 0 from the start. kafka-python may pick a killed broker
    (still listed while no controller can fence it) for a metadata request and raise its refused
    connection out of the iterator: the read is started again, a bounded number of times."""
    for attempt in range(attempts):
        try:
            return _consume_once(bootstrap, topic, count)
        except KafkaConnectionError:
            if attempt == attempts - 1:
                raise
    raise AssertionError("unreachable")


def _consume_once(bootstrap: str, topic: str, count: int) -> list[bytes]:
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        consumer_timeout_ms=10_000,
    )
    try:
        consumer.assign([TopicPartition(topic, 0)])
        consumer.seek_to_beginning()
        values: list[bytes] = []
        for message in consumer:
            values.append(message.value)
            if len(values) >= count:
                break
        return values
    finally:
        consumer.close()


@pytest.mark.slow
@pytest.mark.parametrize("node", [1, 4], ids=["voter", "observer"])
def test_a_broker_restarted_while_the_whole_quorum_is_down_serves_from_its_local_copy(
    tmp_path: Path, node: int
) -> None:
    """Every broker keeps the committed metadata log on its disk (a voter its voter's log, a broker
    that is not a voter a copy of its own): restarted while no voter answers, it waits one session,
    then serves the partitions it leads with what that copy holds; when a quorum is back it
    registers and catches up. (The whole cluster lost power; this node comes back first.)"""
    overrides = (*FAST_FAILOVER_RF1, "replica.high.watermark.checkpoint.interval.ms=200")
    cluster = Cluster(tmp_path, size=4, voters=3, overrides=overrides).start()
    try:
        leader, _ = _active_controller(cluster, {1, 2, 3})
        if node == 4:  # the observer is listed by the leader's DescribeQuorum
            wait_until(
                lambda: 4 in _observers(cluster.controller_ports[leader]), 30, "broker 4 as an observer"
            )
        broker = cluster.brokers[node]
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10_000)
        try:
            admin.create_topics([NewTopic("local", -1, -1, replica_assignments={0: [node]})])
        finally:
            admin.close()
        _wait_leader_is(cluster, "local", node)
        _produce(broker.bootstrap, "local", [b"one", b"two"])
        time.sleep(1)  # a high watermark checkpoint (every 200 ms here) holds the topic's records
        broker.stop(signal.SIGKILL)  # a crash: after a clean stop it would lead nothing
        for voter in (1, 2, 3):
            if voter != node:
                cluster.brokers[voter].stop(signal.SIGKILL)
        broker.start(timeout_s=60)  # no quorum: listens after one session, from its local copy
        assert "serving with the local metadata copy" in broker.output()
        assert _consume(broker.bootstrap, "local", 2) == [b"one", b"two"]
        _produce(broker.bootstrap, "local", [b"three"])
        back = {v for v in (1, 2, 3) if cluster.brokers[v].process is not None}
        for voter in (2, 3):  # a majority of the voters back
            if len(back) < 2:
                cluster.brokers[voter].launch()
                back.add(voter)
        for voter in back:
            cluster.brokers[voter].wait_listening(60)
        _active_controller(cluster, back)
        wait_until(
            lambda: "metadata caught up" in broker.output().split("local metadata copy")[-1], 60, "catch-up"
        )
        assert _consume(broker.bootstrap, "local", 3) == [b"one", b"two", b"three"]
    finally:
        cluster.stop()


def _observers(port: int) -> set[int]:
    partition = _quorum_partition(port)
    return set() if partition is None else {int(o.replica_id) for o in partition.observers}


@pytest.mark.slow
def test_a_broker_added_later_catches_up_from_a_snapshot(tmp_path: Path) -> None:
    """With a snapshot at every commit, the voters clean their metadata logs below it (KIP-630); a
    fourth node that starts afterwards, an observer, is pointed to the snapshot, fetches it with
    FetchSnapshot, loads it and follows the log from its end: it knows every topic."""
    overrides = (*FAST_FAILOVER_RF1, "metadata.log.max.record.bytes.between.snapshots=1")
    cluster = Cluster(tmp_path, size=4, voters=3, overrides=overrides)
    late = cluster.brokers.pop(4)
    cluster.start()
    try:
        leader, _ = _active_controller(cluster, {1, 2, 3})
        admin = KafkaAdminClient(bootstrap_servers=cluster.brokers[1].bootstrap, request_timeout_ms=10_000)
        try:
            admin.create_topics([NewTopic(f"before-{i}", 1, 1) for i in range(3)])
        finally:
            admin.close()
        metadata_dir = cluster.brokers[leader].data_dir / "logs" / "__cluster_metadata-0"
        wait_until(lambda: any(metadata_dir.glob("*.checkpoint")), 30, "a metadata snapshot")
        assert "metadata log cleaned" in cluster.brokers[leader].output()
        cluster.brokers[4] = late
        late.start(timeout_s=60)
        output = late.output()
        assert "fetching a metadata snapshot" in output and "metadata snapshot loaded" in output
        assert {f"before-{i}" for i in range(3)} <= _topics(late.bootstrap)
        wait_until(lambda: 4 in _observers(cluster.controller_ports[leader]), 30, "broker 4 as an observer")
        admin = KafkaAdminClient(bootstrap_servers=late.bootstrap, request_timeout_ms=10_000)
        try:
            admin.create_topics([NewTopic("after", 1, 1)])
        finally:
            admin.close()
        wait_until(lambda: "after" in _topics(late.bootstrap), 30, "the new topic on broker 4")
    finally:
        cluster.stop()


def _topics(bootstrap: str) -> set[str]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap)
    try:
        return set(consumer.topics())
    finally:
        consumer.close()


@pytest.mark.slow
def test_a_voter_that_lost_its_metadata_log_catches_up_from_the_leaders_snapshot(tmp_path: Path) -> None:
    """The voters clean their logs below a snapshot (KIP-630). A voter whose metadata log is lost
    (its directory wiped while it was down) fetches from offset 0, below the leader's log start: it
    fetches the leader's snapshot with FetchSnapshot, restarts its log at the snapshot's end and
    follows on, back in step with the leader."""
    overrides = (*FAST_FAILOVER_RF1, "metadata.log.max.record.bytes.between.snapshots=1")
    cluster = Cluster(tmp_path, voters=3, overrides=overrides).start()
    try:
        leader, _ = _active_controller(cluster, {1, 2, 3})
        lost = next(n for n in (1, 2, 3) if n != leader)
        admin = KafkaAdminClient(
            bootstrap_servers=cluster.brokers[leader].bootstrap, request_timeout_ms=10_000
        )
        try:
            admin.create_topics([NewTopic(f"t-{i}", 1, 1) for i in range(3)])
        finally:
            admin.close()
        leader_dir = cluster.brokers[leader].data_dir / "logs" / "__cluster_metadata-0"
        wait_until(lambda: "metadata log cleaned" in cluster.brokers[leader].output(), 30, "the log cleaned")
        assert cluster.brokers[lost].stop() == 0
        shutil.rmtree(cluster.brokers[lost].data_dir / "logs" / "__cluster_metadata-0")
        cluster.brokers[lost].start(timeout_s=60)
        assert any(leader_dir.glob("*.checkpoint"))
        lost_dir = cluster.brokers[lost].data_dir / "logs" / "__cluster_metadata-0"
        wait_until(lambda: any(lost_dir.glob("*.checkpoint")), 30, "the snapshot fetched by the voter")
        wait_until(
            lambda: _voter_caught_up(cluster.controller_ports[leader], lost), 30, "the voter caught up"
        )
        assert "metadata snapshot installed" in cluster.brokers[lost].output()
    finally:
        cluster.stop()


def _voter_caught_up(port: int, voter: int) -> bool:
    partition = _quorum_partition(port)
    if partition is None or partition.error_code:
        return False
    ends = {int(v.replica_id): int(v.log_end_offset) for v in partition.current_voters}
    return ends.get(voter, -1) >= int(partition.high_watermark) > 0
