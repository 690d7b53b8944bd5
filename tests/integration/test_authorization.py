"""Authorization on a real broker process (``authorizer.class.name`` = StandardAuthorizer): clients
log in over a SASL_PLAINTEXT PLAIN listener as admin (``super.users=User:admin``), alice (READ,
WRITE and DESCRIBE on topics prefixed ``alice-``, READ on groups prefixed ``alice-``, and a DENY of
WRITE on ``alice-denied``, WRITE on transactional ids prefixed ``alice-``) or bob (READ on groups
prefixed ``bob-``, nothing on topics).
confluent-kafka produces and consumes as alice; as bob a produce fails TOPIC_AUTHORIZATION_FAILED,
a consumer of alice's group GROUP_AUTHORIZATION_FAILED and one of his own group
TOPIC_AUTHORIZATION_FAILED; bob's Metadata does not list alice's topics; DENY wins over ALLOW; the
super user may do anything; alice's idempotent and transactional producers work, bob's
transactional one is refused TRANSACTIONAL_ID_AUTHORIZATION_FAILED; neither may create topics
(TOPIC_AUTHORIZATION_FAILED)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import (  # type: ignore[attr-defined]  # exported, but not in __all__
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from tests.integration.broker_process import BrokerProcess, free_port

pytestmark = [pytest.mark.timeout(180)]

TIMEOUT_S = 30
MESSAGES = 20
PLAIN_JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="admin" password="admin-secret" user_admin="admin-secret" '
    'user_alice="alice-secret" user_bob="bob-secret";'
)
TOPIC, GROUP, TXN_ID = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.TRANSACTIONAL_ID
LITERAL, PREFIXED = ResourcePatternType.LITERAL, ResourcePatternType.PREFIXED
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY


class Node:
    def __init__(self, process: BrokerProcess, sasl_port: int) -> None:
        self.process = process
        self.sasl_port = sasl_port

    def config(self, user: str) -> dict[str, Any]:
        return {
            "bootstrap.servers": f"127.0.0.1:{self.sasl_port}",
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.username": user,
            "sasl.password": f"{user}-secret",
            "client.id": f"authz-{user}",
        }


def binding(
    restype: ResourceType,
    name: str,
    principal: str,
    operation: AclOperation,
    *,
    pattern: Any = LITERAL,
    permission: Any = ALLOW,
) -> AclBinding:
    return AclBinding(restype, name, pattern, f"User:{principal}", "*", operation, permission)


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Node]:
    process = BrokerProcess(tmp_path_factory.mktemp("authorization"))
    sasl_port = free_port()
    process.overrides = [
        f"listeners=PLAINTEXT://127.0.0.1:{process.port},SASL_PLAINTEXT://127.0.0.1:{sasl_port}",
        "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
        "sasl.enabled.mechanisms=PLAIN",
        f"listener.name.sasl_plaintext.plain.sasl.jaas.config={PLAIN_JAAS}",
        "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users=User:admin",
    ]
    process.start()
    node = Node(process, sasl_port)
    admin = AdminClient(node.config("admin"))
    topics = [NewTopic(name, 2, 1) for name in ("alice-orders", "alice-denied", "secret")]
    for future in admin.create_topics(topics, request_timeout=TIMEOUT_S).values():
        future.result(timeout=TIMEOUT_S)
    acls = [
        *(
            binding(TOPIC, "alice-", "alice", op, pattern=PREFIXED)
            for op in (AclOperation.READ, AclOperation.WRITE, AclOperation.DESCRIBE)
        ),
        binding(GROUP, "alice-", "alice", AclOperation.READ, pattern=PREFIXED),
        binding(TOPIC, "alice-denied", "alice", AclOperation.WRITE, permission=DENY),
        binding(GROUP, "bob-", "bob", AclOperation.READ, pattern=PREFIXED),
        binding(TXN_ID, "alice-", "alice", AclOperation.WRITE, pattern=PREFIXED),
    ]
    for future in admin.create_acls(acls, request_timeout=TIMEOUT_S).values():
        future.result(timeout=TIMEOUT_S)
    yield node
    process.stop()


def produce(config: dict[str, Any], topic: str, count: int = MESSAGES) -> list[Any]:
    """Produce ``count`` records; the delivery errors (empty when all were written)."""
    producer = Producer({**config, "linger.ms": 5, "message.timeout.ms": 20000, "retries": 2})
    errors: list[Any] = []

    def delivered(error: Any, _message: Any) -> None:
        if error is not None:
            errors.append(error)

    for i in range(count):
        producer.produce(topic, b"value-%d" % i, on_delivery=delivered)
    producer.flush(40)
    return errors


def consume(config: dict[str, Any], topic: str, group: str, want: int) -> tuple[list[bytes], list[Any]]:
    """(values read, errors seen) of a consumer of ``topic`` in ``group``, until ``want`` values
    or an error (or 30 seconds)."""
    consumer = Consumer({**config, "group.id": group, "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    values: list[bytes] = []
    errors: list[Any] = []
    try:
        for _ in range(60):
            message = consumer.poll(0.5)
            if message is None:
                continue
            if message.error() is not None:
                errors.append(message.error())
                break
            values.append(message.value() or b"")
            if len(values) >= want:
                break
    finally:
        consumer.close()
    return values, errors


def test_alice_produces_and_consumes_her_topics(node: Node) -> None:
    alice = node.config("alice")
    assert produce(alice, "alice-orders") == []
    values, errors = consume(alice, "alice-orders", "alice-group", MESSAGES)
    assert errors == [] and sorted(values) == sorted(b"value-%d" % i for i in range(MESSAGES))


def test_bob_may_not_produce(node: Node) -> None:
    errors = produce(node.config("bob"), "alice-orders", count=1)
    assert [e.code() for e in errors] == [KafkaError.TOPIC_AUTHORIZATION_FAILED]


def test_bob_may_not_consume(node: Node) -> None:
    bob = node.config("bob")
    _, errors = consume(bob, "alice-orders", "alice-group", 1)
    assert errors and errors[0].code() == KafkaError.GROUP_AUTHORIZATION_FAILED
    _, errors = consume(bob, "alice-orders", f"bob-{uuid.uuid4().hex[:6]}", 1)
    assert errors and errors[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_metadata_lists_only_described_topics(node: Node) -> None:
    def listed(user: str) -> set[str]:
        return set(AdminClient(node.config(user)).list_topics(timeout=TIMEOUT_S).topics)

    assert listed("bob") == set()
    assert listed("alice") == {"alice-orders", "alice-denied"}
    assert {"alice-orders", "alice-denied", "secret"} <= listed("admin")


def test_deny_wins_over_allow(node: Node) -> None:
    errors = produce(node.config("alice"), "alice-denied", count=1)
    assert [e.code() for e in errors] == [KafkaError.TOPIC_AUTHORIZATION_FAILED]


def test_the_super_user_may_do_anything(node: Node) -> None:
    admin = node.config("admin")
    assert produce(admin, "secret", count=3) == []
    values, errors = consume(admin, "secret", "any-group", 3)
    assert errors == [] and len(values) == 3


def test_idempotent_and_transactional_producers(node: Node) -> None:
    alice = node.config("alice")
    assert produce({**alice, "enable.idempotence": True}, "alice-orders", count=3) == []
    producer = Producer({**alice, "transactional.id": "alice-txn", "message.timeout.ms": 20000})
    producer.init_transactions(TIMEOUT_S)
    producer.begin_transaction()
    producer.produce("alice-orders", b"in-a-transaction")
    producer.commit_transaction(TIMEOUT_S)
    refused = Producer({**node.config("bob"), "transactional.id": "bob-txn", "message.timeout.ms": 20000})
    with pytest.raises(KafkaException) as failure:
        refused.init_transactions(TIMEOUT_S)
    assert failure.value.args[0].code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


def test_creating_topics_needs_create(node: Node) -> None:
    for user in ("alice", "bob"):
        name = f"alice-made-by-{user}"
        admin = AdminClient(node.config(user))  # kept: its futures fail when it is collected
        futures = admin.create_topics([NewTopic(name, 1, 1)], request_timeout=TIMEOUT_S)
        with pytest.raises(KafkaException) as failure:
            futures[name].result(timeout=TIMEOUT_S)
        assert failure.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, user


def test_the_internal_controller_listener_admits_only_this_node(node: Node) -> None:
    """A single node with an authorizer and no controller listener configured serves its
    controller on loopback behind an in-memory PLAIN login: another local process gets
    ApiVersions, and any other request before logging in closes the connection."""
    import re
    import socket

    from protocol.api import decode_response, encode_request
    from protocol.framing import encode_frame

    listening = re.findall(r"listening\s+addresses=\['127\.0\.0\.1:(\d+)'\]", node.process.output())
    bound = {int(port) for port in listening}
    controller_port = next(iter(bound - {node.process.port, node.sasl_port}))
    create = {
        "creations": [
            {
                "resource_type": 4,
                "resource_name": "kafka-cluster",
                "resource_pattern_type": 3,
                "principal": "User:mallory",
                "host": "*",
                "operation": 2,
                "permission_type": 3,
            }
        ]
    }
    with socket.create_connection(("127.0.0.1", controller_port), timeout=30) as sock:
        reader = sock.makefile("rb")
        versions = {"client_software_name": "probe", "client_software_version": "1"}
        sock.sendall(encode_frame(encode_request(18, 3, 1, "probe", versions)))
        size = int.from_bytes(reader.read(4), "big")
        assert decode_response(reader.read(size), 18, 3).body.error_code == 0
        sock.sendall(encode_frame(encode_request(30, 3, 2, "probe", create)))
        assert reader.read(1) == b""  # closed, unanswered
    every = AclBindingFilter(
        ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY, AclPermissionType.ANY
    )
    admin = AdminClient(node.config("admin"))
    listed = admin.describe_acls(every, request_timeout=TIMEOUT_S).result(timeout=TIMEOUT_S)
    assert listed and "User:mallory" not in str(listed)
