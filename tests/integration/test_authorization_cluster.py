"""Authorization in a three-node cluster: every listener SASL_PLAINTEXT with PLAIN logins (the
controller listener too, which only admits nodes: CLUSTER_ACTION), the brokers' own principal
``User:broker`` a super user (Kafka's requirement for follower fetches, transaction verification,
markers and the controller), alice granted her
prefixed topics, groups and transactional ids. Alice's transactional producer writes an RF3 topic
with acks=all (replication, AddPartitionsToTxn verification and WriteTxnMarkers between brokers all
pass the authorizer) and a read_committed consumer reads it back; bob's produce is refused; admin
requests forwarded to the controller are checked on the broker that receives them."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import (  # type: ignore[attr-defined]  # exported, but not in __all__
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from client.connection import KafkaConnection
from client.security import ClientSecurity
from protocol.api_keys import ApiKey
from tests.integration.cluster import FAST_FAILOVER, Cluster, wait_until

pytestmark = [pytest.mark.timeout(240)]

TIMEOUT_S = 30
MESSAGES = 30
PLAIN_JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="broker" password="broker-secret" user_broker="broker-secret" '
    'user_alice="alice-secret" user_bob="bob-secret";'
)


def client(cluster: Cluster, user: str, **extra: Any) -> dict[str, Any]:
    return {
        "bootstrap.servers": cluster.bootstrap,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": user,
        "sasl.password": f"{user}-secret",
        **extra,
    }


async def acls_held(port: int) -> int:
    """How many ACLs the broker on ``port`` itself answers DescribeAcls with (asked directly)."""
    login = ClientSecurity(None, None, "PLAIN", "broker", "broker-secret")
    connection = await KafkaConnection.open("127.0.0.1", port, security=login, connect_timeout_s=TIMEOUT_S)
    try:
        any_acl = {
            "resource_type_filter": 1,
            "resource_name_filter": None,
            "pattern_type_filter": 1,
            "principal_filter": None,
            "host_filter": None,
            "operation": 1,
            "permission_type": 1,
        }
        response = await connection.request(ApiKey.DESCRIBE_ACLS, 2, any_acl)
        return sum(len(resource.acls) for resource in response.resources)
    finally:
        connection.close()
        await connection.wait_closed()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    root = tmp_path_factory.mktemp("authorization-cluster")
    security = [
        "listener.security.protocol.map=SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:SASL_PLAINTEXT",
        "inter.broker.listener.name=SASL_PLAINTEXT",
        "sasl.enabled.mechanisms=PLAIN",
        "sasl.mechanism.inter.broker.protocol=PLAIN",
        "sasl.mechanism.controller.protocol=PLAIN",
        f"listener.name.sasl_plaintext.plain.sasl.jaas.config={PLAIN_JAAS}",
        f"listener.name.controller.plain.sasl.jaas.config={PLAIN_JAAS}",
        "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users=User:broker",
    ]
    nodes = Cluster(root, voters=1, overrides=[*FAST_FAILOVER, *security])
    for node, process in nodes.brokers.items():
        listeners = f"SASL_PLAINTEXT://127.0.0.1:{process.port}"
        if node in nodes.controller_ports:
            listeners += f",CONTROLLER://127.0.0.1:{nodes.controller_ports[node]}"
        process.overrides.append(f"listeners={listeners}")
    nodes.start(timeout_s=90)
    try:
        admin = AdminClient(client(nodes, "broker"))
        admin.create_topics([NewTopic("alice-orders", 2, 3)], request_timeout=TIMEOUT_S)[
            "alice-orders"
        ].result(timeout=TIMEOUT_S)
        prefixed = ResourcePatternType.PREFIXED
        acls = [
            AclBinding(restype, "alice-", prefixed, "User:alice", "*", op, AclPermissionType.ALLOW)
            for restype, op in (
                (ResourceType.TOPIC, AclOperation.READ),
                (ResourceType.TOPIC, AclOperation.WRITE),
                (ResourceType.GROUP, AclOperation.READ),
                (ResourceType.TRANSACTIONAL_ID, AclOperation.WRITE),
            )
        ]
        for future in admin.create_acls(acls, request_timeout=TIMEOUT_S).values():
            future.result(timeout=TIMEOUT_S)
        # CreateAcls is answered once the broker that took it holds the ACLs; the others hold them
        # a metadata fetch later: alice's first requests may go to any broker
        for node, process in nodes.brokers.items():
            wait_until(
                lambda port=process.port: asyncio.run(acls_held(port)) >= len(acls),
                TIMEOUT_S,
                f"broker {node} to hold alice's ACLs",
            )
        yield nodes
    finally:
        nodes.stop()


def test_alice_writes_transactionally_with_acks_all_and_reads_committed(cluster: Cluster) -> None:
    producer = Producer(client(cluster, "alice", **{"transactional.id": "alice-txn", "acks": "all"}))
    producer.init_transactions(TIMEOUT_S)
    producer.begin_transaction()
    for i in range(MESSAGES):
        producer.produce("alice-orders", b"value-%d" % i)
    producer.commit_transaction(TIMEOUT_S)
    consumer = Consumer(
        client(
            cluster,
            "alice",
            **{
                "group.id": "alice-readers",
                "auto.offset.reset": "earliest",
                "isolation.level": "read_committed",
            },
        )
    )
    consumer.subscribe(["alice-orders"])
    values: list[bytes] = []
    try:
        for _ in range(120):
            message = consumer.poll(0.5)
            if message is None:
                continue
            assert message.error() is None, message.error()
            values.append(message.value() or b"")
            if len(values) >= MESSAGES:
                break
    finally:
        consumer.close()
    assert sorted(values) == sorted(b"value-%d" % i for i in range(MESSAGES))


def test_bob_is_refused(cluster: Cluster) -> None:
    errors: list[Any] = []

    def delivered(error: Any, _message: Any) -> None:
        if error is not None:
            errors.append(error)

    producer = Producer(client(cluster, "bob", **{"message.timeout.ms": 20000}))
    producer.produce("alice-orders", b"nope", on_delivery=delivered)
    producer.flush(30)
    assert [e.code() for e in errors] == [KafkaError.TOPIC_AUTHORIZATION_FAILED]
    admin = AdminClient(client(cluster, "bob"))
    futures = admin.delete_topics(["alice-orders"], request_timeout=TIMEOUT_S)
    with pytest.raises(KafkaException) as failure:
        futures["alice-orders"].result(timeout=TIMEOUT_S)
    assert failure.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert "alice-orders" in AdminClient(client(cluster, "broker")).list_topics(timeout=TIMEOUT_S).topics


def test_the_controller_listener_admits_only_nodes(cluster: Cluster) -> None:
    """bob can log in to the controller listener (its JAAS lists him) but, without CLUSTER_ACTION,
    every request there is refused: he cannot grant himself ACLs or SCRAM users behind the
    brokers' backs (the brokers, super users, register and replicate through it above)."""
    import asyncio

    from client.connection import KafkaConnection
    from client.security import ClientSecurityConfig
    from protocol.api_keys import ApiKey

    binding = {
        "resource_type": 4,  # CLUSTER
        "resource_name": "kafka-cluster",
        "resource_pattern_type": 3,  # LITERAL
        "principal": "User:bob",
        "host": "*",
        "operation": 2,  # ALL
        "permission_type": 3,  # ALLOW
    }

    async def create_acls_as(user: str) -> int:
        security = ClientSecurityConfig(
            protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN", username=user, password=f"{user}-secret"
        ).build()
        port = next(iter(cluster.controller_ports.values()))
        connection = await KafkaConnection.open("127.0.0.1", port, security=security)
        try:
            answer = await connection.request(ApiKey.CREATE_ACLS, 3, {"creations": [binding]})
            return int(answer.results[0].error_code)
        finally:
            connection.close()

    assert asyncio.run(create_acls_as("bob")) == 31  # CLUSTER_AUTHORIZATION_FAILED
