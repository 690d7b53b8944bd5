"""Issue 17's admin matrix, the APIs that need several brokers: AlterPartitionReassignments (45),
ListPartitionReassignments (46) and ElectLeaders (43) on one 3-node cluster, through each library
that exposes them, at the version it sends (read off the wire by a recording proxy in front of
every broker, ``test_admin_matrix_support.RecordingProxy``).

One chain, no broker stopped: a reassignment that only reorders the replicas (kafka-python's
``alter_partition_reassignments``) completes at once and leaves the leader where it was, so the new
first replica is a preferred leader that does not lead; kafka-python's ``elect_leaders`` and
confluent-kafka's ``AdminClient.elect_leaders`` then each move one partition's leadership to it.
Every record written before is still there. aiokafka 0.14.0 exposes none of these calls, nor does
confluent-kafka 2.16.1 the reassignment ones (``test_admin_matrix_single.py`` checks that).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import ElectionType, KafkaError, TopicPartition
from confluent_kafka.admin import AdminClient as ConfluentAdmin
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka.admin import NewTopic
from kafka.errors import InvalidReplicationAssignmentError
from kafka.structs import TopicPartition as KpTopicPartition

from protocol.api_keys import ApiKey
from tests.integration.cluster import FAST_FAILOVER, Cluster, wait_until
from tests.integration.test_admin_matrix_support import RecordingProxy
from tests.integration.transactions_support import PartitionState, partition_states

pytestmark = [pytest.mark.timeout(240)]

TIMEOUT_S = 30
TOPIC = "matrix-moved"
PENDING = "matrix-pending"
KP = "matrix-kafka-python"
CF = "matrix-confluent"


@pytest.fixture(scope="module")
def proxies_and_cluster(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[dict[int, RecordingProxy], Cluster]]:
    cluster = Cluster(tmp_path_factory.mktemp("admin-matrix-cluster"), overrides=FAST_FAILOVER)
    proxies = {node: RecordingProxy(process.port).start() for node, process in cluster.brokers.items()}
    for node, process in cluster.brokers.items():
        process.overrides.append(proxies[node].advertised)
    try:
        cluster.start()
        yield proxies, cluster
    finally:
        cluster.stop()
        for proxy in proxies.values():
            proxy.stop()


@pytest.fixture(scope="module")
def cluster(proxies_and_cluster: tuple[dict[int, RecordingProxy], Cluster]) -> Cluster:
    return proxies_and_cluster[1]


@pytest.fixture(scope="module")
def proxies(proxies_and_cluster: tuple[dict[int, RecordingProxy], Cluster]) -> dict[int, RecordingProxy]:
    return proxies_and_cluster[0]


def bootstrap(proxies: dict[int, RecordingProxy]) -> str:
    return ",".join(proxy.bootstrap for proxy in proxies.values())


def versions(proxies: dict[int, RecordingProxy], api: ApiKey, client_id: str) -> set[int]:
    """The versions of ``api`` any broker received from ``client_id``."""
    return set().union(*(proxy.versions(api, client_id) for proxy in proxies.values()))


def wait_state(cluster: Cluster, partition: int, what: str, check: Any, topic: str = TOPIC) -> PartitionState:
    found: list[PartitionState] = []

    def ready() -> bool:
        current = partition_states(cluster, topic, node=1).get(partition)
        if current is None or not check(current):
            return False
        found.append(current)
        return True

    wait_until(ready, TIMEOUT_S, f"{topic}-{partition}: {what}")
    return found[-1]


def produce(servers: str, partition: int, values: list[bytes], topic: str = TOPIC) -> None:
    producer = KafkaProducer(bootstrap_servers=servers, acks="all", linger_ms=0)
    try:
        for value in values:
            producer.send(topic, value, partition=partition).get(timeout=TIMEOUT_S)
    finally:
        producer.close(timeout=10)


def consume(servers: str, partition: int, count: int, topic: str = TOPIC) -> list[bytes]:
    consumer = KafkaConsumer(bootstrap_servers=servers, enable_auto_commit=False, consumer_timeout_ms=10_000)
    try:
        tp = KpTopicPartition(topic, partition)
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


def test_reorder_by_reassignment_then_preferred_elections(
    cluster: Cluster, proxies: dict[int, RecordingProxy]
) -> None:
    servers = bootstrap(proxies)
    kp = KafkaAdminClient(bootstrap_servers=servers, client_id=KP)
    cf = ConfluentAdmin({"bootstrap.servers": servers, "client.id": CF})
    try:
        kp.create_topics([NewTopic(TOPIC, replica_assignments={0: [1, 2, 3], 1: [1, 3, 2]})])
        for partition in (0, 1):
            wait_state(cluster, partition, "led by 1, full ISR", lambda s: s.leader == 1 and len(s.isr) == 3)
            produce(servers, partition, [f"{partition}-{i}".encode() for i in range(5)])

        # AlterPartitionReassignments: the same replicas, another order; ListPartitionReassignments
        tp0, tp1 = KpTopicPartition(TOPIC, 0), KpTopicPartition(TOPIC, 1)
        assert kp.alter_partition_reassignments({tp0: [2, 3, 1], tp1: [3, 1, 2]}) == {tp0: None, tp1: None}
        before = {
            0: wait_state(cluster, 0, "replicas [2, 3, 1]", lambda s: s.replicas == (2, 3, 1)),
            1: wait_state(cluster, 1, "replicas [3, 1, 2]", lambda s: s.replicas == (3, 1, 2)),
        }
        assert {p: s.leader for p, s in before.items()} == {0: 1, 1: 1}  # a reorder moves no leader
        wait_until(lambda: kp.list_partition_reassignments() == {}, TIMEOUT_S, "no reassignment listed")

        # ElectLeaders PREFERRED: kafka-python for partition 0, confluent-kafka for partition 1
        response = kp.elect_leaders(0, {TOPIC: [0]})
        [result] = response.replica_election_results
        assert [(p.partition_id, p.error_code) for p in result.partition_result] == [(0, 0)]
        elected = cf.elect_leaders(ElectionType.PREFERRED, [TopicPartition(TOPIC, 1)])
        assert elected.result(timeout=TIMEOUT_S) == {TopicPartition(TOPIC, 1): None}
        for partition, leader in ((0, 2), (1, 3)):
            after = wait_state(cluster, partition, f"led by {leader}", lambda s, n=leader: s.leader == n)
            assert after.leader_epoch > before[partition].leader_epoch
            assert consume(servers, partition, 5) == [f"{partition}-{i}".encode() for i in range(5)]

        # a second election needs nothing: ELECTION_NOT_NEEDED per partition through both libraries
        again = kp.elect_leaders(0, {TOPIC: [0]}, raise_errors=False)
        assert again.replica_election_results[0].partition_result[0].error_code == 84
        needless = cf.elect_leaders(ElectionType.PREFERRED, [TopicPartition(TOPIC, 1)]).result(
            timeout=TIMEOUT_S
        )
        assert needless[TopicPartition(TOPIC, 1)].code() == KafkaError.ELECTION_NOT_NEEDED
        # null partitions (confluent-kafka's None): every partition, those needing nothing left out
        assert cf.elect_leaders(ElectionType.PREFERRED, None).result(timeout=TIMEOUT_S) == {}
        unknown = kp.elect_leaders(0, {"no-such-topic": [0]}, raise_errors=False)
        [missing] = unknown.replica_election_results[0].partition_result
        assert (missing.error_code, missing.error_message) == (3, "No such topic as no-such-topic")
        # a reassignment onto a broker that does not exist is refused and changes nothing
        refused = kp.alter_partition_reassignments({tp0: [2, 3, 7]})
        assert refused == {tp0: InvalidReplicationAssignmentError}
        assert partition_states(cluster, TOPIC)[0].replicas == (2, 3, 1)
        assert kp.list_partition_reassignments() == {}
    finally:
        kp.close()

    assert versions(proxies, ApiKey.ALTER_PARTITION_REASSIGNMENTS, KP) == {1}  # KIP-860's v1
    assert versions(proxies, ApiKey.LIST_PARTITION_REASSIGNMENTS, KP) == {0}
    assert versions(proxies, ApiKey.ELECT_LEADERS, KP) == {2}
    assert versions(proxies, ApiKey.ELECT_LEADERS, CF) == {2}


def test_pending_reassignment_listed_then_cancelled(
    cluster: Cluster, proxies: dict[int, RecordingProxy]
) -> None:
    """Runs last in the module: broker 3 is stopped so that a replica added on it cannot catch up.
    kafka-python lists the pending move with its adding replica, then cancels it (a None target),
    and the partition keeps its old replicas."""
    servers = bootstrap(proxies)
    kp = KafkaAdminClient(bootstrap_servers=servers, client_id=KP)
    try:
        kp.create_topics([NewTopic(PENDING, replica_assignments={0: [1, 2]})])
        wait_state(cluster, 0, "led by 1, full ISR", lambda s: s.leader == 1 and len(s.isr) == 2, PENDING)
        produce(servers, 0, [b"kept"], PENDING)
        cluster.brokers[3].stop()
        tp = KpTopicPartition(PENDING, 0)
        assert kp.alter_partition_reassignments({tp: [1, 2, 3]}) == {tp: None}
        pending = {tp: {"replicas": [1, 2, 3], "adding_replicas": [3], "removing_replicas": []}}
        assert kp.list_partition_reassignments() == pending
        assert kp.list_partition_reassignments({PENDING: [0]}) == pending
        assert kp.alter_partition_reassignments({tp: None}) == {tp: None}
        assert kp.list_partition_reassignments() == {}
        assert wait_state(cluster, 0, "replicas [1, 2]", lambda s: s.replicas == (1, 2), PENDING).leader == 1
        assert consume(servers, 0, 1, PENDING) == [b"kept"]
    finally:
        kp.close()
    assert versions(proxies, ApiKey.ALTER_PARTITION_REASSIGNMENTS, KP) == {1}
    assert versions(proxies, ApiKey.LIST_PARTITION_REASSIGNMENTS, KP) == {0}
