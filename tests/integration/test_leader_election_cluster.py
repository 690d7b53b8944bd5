"""ElectLeaders, DescribeCluster and DescribeTopicPartitions on a 3-node cluster, through the real
clients at the versions they send.

* A preferred election after the preferred leader bounced: broker 2 is stopped (leadership moves),
  restarted (it rejoins the ISR but does not lead), then kafka-python's ``elect_leaders`` (3.0.12
  has no ``perform_leader_election``), confluent-kafka's ``AdminClient.elect_leaders`` and
  ``kipling leader-election`` each move one partition back to it; no record is lost.
* An unclean election with the ISR gone: the only ISR member is stopped, a replica outside the ISR
  comes back; a preferred election is refused, an unclean one by each client elects it.
* DescribeCluster through kafka-python and confluent-kafka; DescribeTopicPartitions pages through
  kafka-python's ``describe_topic_partitions``. confluent-kafka 2.16.1's ``describe_topics`` sends
  Metadata, not DescribeTopicPartitions (checked with the brokers' request counters).
aiokafka 0.14.0's admin has no election, and its ``describe_cluster`` sends Metadata: not driven here.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import ElectionType, TopicCollection, TopicPartition
from confluent_kafka.admin import AdminClient as ConfluentAdmin
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka.admin import NewTopic
from kafka.structs import TopicPartition as KafkaTopicPartition

from protocol.api_keys import ApiKey
from tests.integration.cluster import FAST_FAILOVER, Cluster, wait_until
from tests.integration.transactions_support import PartitionState, partition_states
from tests.integration.wire_client import WireClient
from tools.cli import build_parser
from tools.commands.leader_election import leader_election_command
from tools.commands.topics import run_async

pytestmark = [pytest.mark.timeout(300)]

TIMEOUT_S = 30
CLUSTER_ID = "kipling-test-cluster"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    running = Cluster(tmp_path_factory.mktemp("leader-election"), overrides=FAST_FAILOVER).start()
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture(scope="module")
def admin(cluster: Cluster) -> Iterator[KafkaAdminClient]:
    # broker 1 runs the only controller and is never stopped: bootstrap from it
    client = KafkaAdminClient(bootstrap_servers=cluster.brokers[1].bootstrap, client_id="election-test")
    yield client
    client.close()


@pytest.fixture(scope="module")
def confluent(cluster: Cluster) -> ConfluentAdmin:
    """One handle for the module: a future outlives its call only while the handle lives."""
    return ConfluentAdmin({"bootstrap.servers": cluster.brokers[1].bootstrap})


def run_tool(*argv: str) -> tuple[int, str, str]:
    args = build_parser().parse_args(["leader-election", *argv])
    out, err = io.StringIO(), io.StringIO()
    status = run_async(leader_election_command(args, out, err))
    return status, out.getvalue(), err.getvalue()


def produce(cluster: Cluster, topic: str, partition: int, values: list[bytes]) -> None:
    producer = KafkaProducer(bootstrap_servers=cluster.brokers[1].bootstrap, acks="all", linger_ms=0)
    try:
        for value in values:
            producer.send(topic, value, partition=partition).get(timeout=TIMEOUT_S)
    finally:
        producer.close(timeout=10)


def consume(cluster: Cluster, topic: str, partition: int, count: int) -> list[bytes]:
    consumer = KafkaConsumer(
        bootstrap_servers=cluster.brokers[1].bootstrap, enable_auto_commit=False, consumer_timeout_ms=10_000
    )
    try:
        tp = KafkaTopicPartition(topic, partition)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        values: list[bytes] = []
        for record in consumer:
            values.append(record.value)
            if len(values) >= count:
                break
        return values
    finally:
        consumer.close()


def state(cluster: Cluster, topic: str, partition: int = 0, node: int | None = None) -> PartitionState | None:
    return partition_states(cluster, topic, node).get(partition)


def wait_state(cluster: Cluster, topic: str, what: str, check: Any, partition: int = 0) -> PartitionState:
    found: list[PartitionState] = []

    def ready() -> bool:
        current = state(cluster, topic, partition)
        if current is None or not check(current):
            return False
        found.append(current)
        return True

    wait_until(ready, TIMEOUT_S, f"{topic}-{partition}: {what}")
    return found[-1]


# -- DescribeCluster and DescribeTopicPartitions --------------------------------------------------


def test_kafka_python_and_confluent_describe_the_cluster(
    cluster: Cluster, admin: KafkaAdminClient, confluent: ConfluentAdmin
) -> None:
    described = admin.describe_cluster()
    assert described["cluster_id"] == CLUSTER_ID
    ports = {b["broker_id"]: b["port"] for b in described["brokers"]}
    assert ports == {node: process.port for node, process in cluster.brokers.items()}
    assert described["controller_id"] in ports
    assert "DESCRIBE" in described["authorized_operations"]

    result = confluent.describe_cluster().result(timeout=TIMEOUT_S)
    assert result.cluster_id == CLUSTER_ID
    assert sorted((n.id, n.port) for n in result.nodes) == sorted(ports.items())
    assert result.controller.id in ports


def test_kafka_python_pages_through_describe_topic_partitions(
    cluster: Cluster, admin: KafkaAdminClient
) -> None:
    admin.create_topics([NewTopic("dtp-a", 3, 3), NewTopic("dtp-b", 2, 3)])
    for node in cluster.brokers:  # kafka-python may send each page to another broker
        for topic, count in (("dtp-a", 3), ("dtp-b", 2)):
            wait_until(
                lambda n=node, t=topic, c=count: len(partition_states(cluster, t, n)) == c,  # type: ignore[misc]
                TIMEOUT_S,
                f"broker {node} to know {topic}",
            )
    pages = []
    cursor = None
    while True:
        page = admin.describe_topic_partitions(
            ["dtp-b", "dtp-a", "dtp-none"], response_partition_limit=2, cursor=cursor
        )
        pages.append(
            [
                (t["name"], t["error_code"], [p["partition_index"] for p in t["partitions"]])
                for t in page["topics"]
            ]
        )
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert pages == [
        [("dtp-a", 0, [0, 1])],
        [("dtp-a", 0, [2]), ("dtp-b", 0, [0])],
        [("dtp-b", 0, [1]), ("dtp-none", 3, [])],
    ]
    full = admin.describe_topic_partitions(["dtp-a"])["topics"][0]
    for p in full["partitions"]:
        expected = state(cluster, "dtp-a", p["partition_index"])
        assert expected is not None
        assert (p["leader_id"], p["leader_epoch"], tuple(p["replica_nodes"])) == (
            expected.leader,
            expected.leader_epoch,
            expected.replicas,
        )
        assert p["offline_replicas"] == []


def test_confluent_describe_topics_sends_metadata_not_describe_topic_partitions(
    cluster: Cluster, confluent: ConfluentAdmin
) -> None:
    def counts(api: str) -> float:
        return sum(
            b.metric("kafka_network_requestmetrics_requests_total", request=api)
            for b in cluster.brokers.values()
        )

    before = counts("DescribeTopicPartitions"), counts("Metadata")
    futures = confluent.describe_topics(TopicCollection(["dtp-a"]))
    description = futures["dtp-a"].result(timeout=TIMEOUT_S)
    assert [p.id for p in description.partitions] == [0, 1, 2]
    assert counts("DescribeTopicPartitions") == before[0]
    assert counts("Metadata") > before[1]


# -- a preferred election after the preferred leader bounced ---------------------------------------


PREFERRED_TOPICS = ("pref-kafka-python", "pref-confluent", "pref-tool")


def test_preferred_election_brings_leadership_back_to_a_bounced_broker(
    cluster: Cluster, admin: KafkaAdminClient, confluent: ConfluentAdmin
) -> None:
    admin.create_topics([NewTopic(t, replica_assignments={0: [2, 1, 3]}) for t in PREFERRED_TOPICS])
    for topic in PREFERRED_TOPICS:
        wait_state(cluster, topic, "led by 2 with a full ISR", lambda s: s.leader == 2 and len(s.isr) == 3)
        produce(cluster, topic, 0, [f"{topic}-{i}".encode() for i in range(5)])

    cluster.brokers[2].stop()
    moved = {
        t: wait_state(cluster, t, "led by another broker", lambda s: s.leader not in (-1, 2))
        for t in PREFERRED_TOPICS
    }
    cluster.brokers[2].start()
    for topic in PREFERRED_TOPICS:
        back = wait_state(cluster, topic, "2 back in the ISR", lambda s: 2 in s.isr)
        assert back.leader == moved[topic].leader  # the ISR grows; leadership does not move by itself

    # kafka-python (ElectLeaders v2): no exception means every partition was elected
    response = admin.elect_leaders(0, {"pref-kafka-python": [0]})
    [result] = response.replica_election_results
    assert [(p.partition_id, p.error_code) for p in result.partition_result] == [(0, 0)]
    # confluent-kafka: None for an elected partition
    elected = confluent.elect_leaders(ElectionType.PREFERRED, [TopicPartition("pref-confluent", 0)])
    assert elected.result(timeout=TIMEOUT_S) == {TopicPartition("pref-confluent", 0): None}
    # the tool
    status, out, err = run_tool(
        "--bootstrap-server",
        cluster.bootstrap,
        "--election-type",
        "preferred",
        "--topic",
        "pref-tool",
        "--partition",
        "0",
    )
    assert (status, out, err) == (
        0,
        "Successfully completed leader election (PREFERRED) for partitions pref-tool-0\n",
        "",
    )

    for topic in PREFERRED_TOPICS:
        after = wait_state(cluster, topic, "led by 2 again", lambda s: s.leader == 2)
        assert after.leader_epoch > moved[topic].leader_epoch
        produce(cluster, topic, 0, [f"{topic}-after".encode()])
        assert consume(cluster, topic, 0, 6) == [f"{topic}-{i}".encode() for i in range(5)] + [
            f"{topic}-after".encode()
        ]

    # a second election needs nothing: kafka-python ignores ELECTION_NOT_NEEDED, the tool says so
    again = admin.elect_leaders(0, {"pref-kafka-python": [0]})
    assert again.replica_election_results[0].partition_result[0].error_code == 84
    path = Path(cluster.root) / "election.json"
    path.write_text(json.dumps({"partitions": [{"topic": "pref-tool", "partition": 0}]}))
    status, out, err = run_tool(
        "--bootstrap-server",
        cluster.bootstrap,
        "--election-type",
        "PREFERRED",
        "--path-to-json-file",
        str(path),
    )
    assert (status, out, err) == (0, "Valid replica already elected for partitions pref-tool-0\n", "")
    # every partition at once: whatever else broker 2 led moves back too; then nothing is left to do
    status, out, err = run_tool(
        "--bootstrap-server", cluster.bootstrap, "--election-type", "preferred", "--all-topic-partitions"
    )
    assert status == 0 and "Error" not in out and err == ""
    status, out, err = run_tool(
        "--bootstrap-server", cluster.bootstrap, "--election-type", "preferred", "--all-topic-partitions"
    )
    assert (status, out, err) == (0, "", "")


# -- an unclean election with the ISR gone ---------------------------------------------------------


def test_unclean_election_elects_a_replica_outside_the_lost_isr(
    cluster: Cluster, admin: KafkaAdminClient, confluent: ConfluentAdmin
) -> None:
    topic = "unclean"
    admin.create_topics(
        [
            NewTopic(
                topic,
                replica_assignments={p: [3, 2] for p in range(3)},
                topic_configs={"min.insync.replicas": "1"},
            )
        ]
    )
    for p in range(3):
        wait_state(cluster, topic, "a full ISR", lambda s: len(s.isr) == 2, p)
        produce(cluster, topic, p, [b"before"])
    cluster.brokers[2].stop()
    for p in range(3):
        wait_state(cluster, topic, "ISR [3]", lambda s: s.isr == (3,), p)
    cluster.brokers[3].stop()
    for p in range(3):
        wait_state(cluster, topic, "no leader", lambda s: s.leader == -1, p)
    cluster.brokers[2].start()
    wait_until(
        lambda: 2 in {b["broker_id"] for b in admin.describe_cluster()["brokers"]},
        TIMEOUT_S,
        "broker 2 to be back",
    )
    assert state(cluster, topic, 0) == PartitionState(-1, state(cluster, topic, 0).leader_epoch, (3, 2), (3,))  # type: ignore[union-attr]

    # a preferred election cannot help: the preferred replica (3) is down
    refused = admin.elect_leaders(0, {topic: [0]}, raise_errors=False)
    assert (
        refused.replica_election_results[0].partition_result[0].error_code == 80
    )  # PREFERRED_LEADER_NOT_AVAILABLE

    response = admin.elect_leaders(1, {topic: [0]})  # kafka-python, UNCLEAN
    assert response.replica_election_results[0].partition_result[0].error_code == 0
    elected = confluent.elect_leaders(ElectionType.UNCLEAN, [TopicPartition(topic, 1)])
    assert elected.result(timeout=TIMEOUT_S) == {TopicPartition(topic, 1): None}
    status, out, err = run_tool(
        "--bootstrap-server",
        cluster.bootstrap,
        "--election-type",
        "unclean",
        "--topic",
        topic,
        "--partition",
        "2",
    )
    assert (status, out, err) == (
        0,
        f"Successfully completed leader election (UNCLEAN) for partitions {topic}-2\n",
        "",
    )
    for p in range(3):
        after = wait_state(cluster, topic, "led by 2 alone", lambda s: s.leader == 2, p)
        assert after.isr == (2,)
        produce(cluster, topic, p, [b"after"])  # the partition takes writes again

    # an unclean election of a partition that has a leader is not needed
    status, out, err = run_tool(
        "--bootstrap-server",
        cluster.bootstrap,
        "--election-type",
        "unclean",
        "--topic",
        topic,
        "--partition",
        "0",
    )
    assert (status, out) == (0, f"Valid replica already elected for partitions {topic}-0\n")

    cluster.brokers[3].start()  # the old ISR member comes back, truncates to the new leader, follows
    for p in range(3):
        wait_state(cluster, topic, "3 back in the ISR", lambda s: 3 in s.isr, p)
    assert consume(cluster, topic, 0, 2)[-1] == b"after"


def test_the_tool_reports_a_failed_election(cluster: Cluster, admin: KafkaAdminClient) -> None:
    status, out, err = run_tool(
        "--bootstrap-server",
        cluster.bootstrap,
        "--election-type",
        "preferred",
        "--topic",
        "no-such-topic",
        "--partition",
        "0",
    )
    assert status == 1
    assert out == (
        "Error completing leader election (PREFERRED) for partition: no-such-topic-0: "
        "org.apache.kafka.common.errors.UnknownTopicOrPartitionException: No such topic as no-such-topic\n"
    )
    assert err == "1 replica(s) could not be elected\n"


def test_describe_cluster_on_the_controller_listener_lists_the_voters(cluster: Cluster) -> None:
    body = {"include_cluster_authorized_operations": False, "endpoint_type": 2}
    with WireClient(cluster.controller_port) as client:
        response = client.request(int(ApiKey.DESCRIBE_CLUSTER), 1, body).body
    assert (response.error_code, response.endpoint_type, response.cluster_id) == (0, 2, CLUSTER_ID)
    assert [(b.broker_id, b.port) for b in response.brokers] == [(1, cluster.controller_port)]
    assert response.controller_id == 1
    with WireClient(cluster.brokers[2].port) as client:
        mismatched = client.request(int(ApiKey.DESCRIBE_CLUSTER), 1, body).body
    assert mismatched.error_code == 114  # MISMATCHED_ENDPOINT_TYPE: a broker listener is not a controller's
