"""ACLs on a real broker process with ``authorizer.class.name`` set and ``super.users=User:ANONYMOUS``
(so the PLAINTEXT clients administer): ApiVersions advertises DescribeAcls, CreateAcls and
DeleteAcls, confluent-kafka's AdminClient creates, describes and deletes ACLs with Kafka's errors,
a SASL user without the cluster permissions is refused until an ACL grants them, the ACLs survive a
restart, ``kipling acls`` goes round trip, and a broker without an authorizer answers
SECURITY_DISABLED.

librdkafka drops DescribeAcls' top-level error (``rd_kafka_DescribeAclsResponse_parse`` returns
success with no bindings whatever the code), so those refusals are checked with kafka-python."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (  # type: ignore[attr-defined]  # exported, but not in __all__
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)
from kafka import KafkaAdminClient
from kafka.admin import (
    ACLFilter,
    ACLOperation,
    ACLPermissionType,
    ACLResourcePatternType,
    ResourcePatternFilter,
)
from kafka.admin import ResourceType as PyResourceType
from kafka.errors import ClusterAuthorizationFailedError, SecurityDisabledError

from protocol.api_keys import ApiKey
from tests.integration.broker_process import BrokerProcess, free_port
from tests.integration.wire_client import WireClient
from tools.cli import build_parser
from tools.commands.acls import acls_command
from tools.commands.topics import run_async

pytestmark = [pytest.mark.timeout(180)]

TIMEOUT_S = 30
PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
PLAIN_JAAS = (
    f"{PLAIN_MODULE} required "
    'username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";'
)
TOPIC, GROUP, CLUSTER = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.BROKER
LITERAL, PREFIXED = ResourcePatternType.LITERAL, ResourcePatternType.PREFIXED
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY


class Node:
    def __init__(self, process: BrokerProcess, sasl_port: int) -> None:
        self.process = process
        self.sasl_port = sasl_port

    @property
    def bootstrap(self) -> str:
        return self.process.bootstrap

    def admin(self) -> AdminClient:
        return AdminClient({"bootstrap.servers": self.bootstrap, "client.id": "acl-admin"})

    def alice(self) -> AdminClient:
        return AdminClient(
            {
                "bootstrap.servers": f"127.0.0.1:{self.sasl_port}",
                "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "PLAIN",
                "sasl.username": "alice",
                "sasl.password": "alice-secret",
                "client.id": "acl-alice",
            }
        )


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Node]:
    process = BrokerProcess(tmp_path_factory.mktemp("acls"))
    sasl_port = free_port()
    process.overrides = [
        f"listeners=PLAINTEXT://127.0.0.1:{process.port},SASL_PLAINTEXT://127.0.0.1:{sasl_port}",
        "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
        "sasl.enabled.mechanisms=PLAIN",
        f"listener.name.sasl_plaintext.plain.sasl.jaas.config={PLAIN_JAAS}",
        "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users=User:ANONYMOUS",
    ]
    process.start()
    yield Node(process, sasl_port)
    process.stop()


def kafka_python_describe(bootstrap: str, **security: Any) -> list[Any]:
    """Every ACL, through kafka-python's describe_acls (it raises the response's error)."""
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=TIMEOUT_S * 1000, **security)
    try:
        any_filter = ACLFilter(
            None,
            None,
            ACLOperation.ANY,
            ACLPermissionType.ANY,
            ResourcePatternFilter(PyResourceType.ANY, None, ACLResourcePatternType.ANY),
        )
        acls, _ = admin.describe_acls(any_filter)
        return list(acls)
    finally:
        admin.close()


def acl(
    name: str,
    operation: AclOperation = AclOperation.READ,
    permission: AclPermissionType = ALLOW,
    *,
    restype: ResourceType = TOPIC,
    pattern: ResourcePatternType = LITERAL,
    principal: str = "User:alice",
    host: str = "*",
) -> AclBinding:
    return AclBinding(restype, name, pattern, principal, host, operation, permission)


def acl_filter(
    restype: ResourceType = ResourceType.ANY,
    name: str | None = None,
    pattern: ResourcePatternType = ResourcePatternType.ANY,
    principal: str | None = None,
) -> AclBindingFilter:
    """A filter: None matches any name, principal and host."""
    anything: Any = None  # the stubs declare str where librdkafka takes None
    return AclBindingFilter(
        restype,
        anything if name is None else name,
        pattern,
        anything if principal is None else principal,
        anything,
        AclOperation.ANY,
        AclPermissionType.ANY,
    )


def everything(restype: ResourceType = ResourceType.ANY, name: str | None = None) -> AclBindingFilter:
    return acl_filter(restype, name)


def outcome(futures: dict[Any, Any]) -> dict[Any, Any]:
    """Each future's result, or the KafkaError it raised."""
    out = {}
    for key, future in futures.items():
        try:
            out[key] = future.result(timeout=TIMEOUT_S)
        except KafkaException as exc:
            out[key] = exc.args[0]
    return out


def described(admin: AdminClient, binding_filter: AclBindingFilter) -> set[tuple[Any, ...]]:
    bindings = admin.describe_acls(binding_filter, request_timeout=TIMEOUT_S).result(timeout=TIMEOUT_S)
    return {
        (b.restype, b.name, b.resource_pattern_type, b.principal, b.host, b.operation, b.permission_type)
        for b in bindings
    }


def key(b: AclBinding) -> tuple[Any, ...]:
    return (b.restype, b.name, b.resource_pattern_type, b.principal, b.host, b.operation, b.permission_type)


def test_api_versions_advertises_the_acl_apis(node: Node) -> None:
    body = {"client_software_name": "kipling-tests", "client_software_version": "1.0"}
    with WireClient(node.process.port) as client:
        response = client.request(ApiKey.API_VERSIONS, 3, body)
    advertised = {k.api_key: (k.min_version, k.max_version) for k in response.body.api_keys}
    for api in (ApiKey.DESCRIBE_ACLS, ApiKey.CREATE_ACLS, ApiKey.DELETE_ACLS):
        assert advertised[api] == (1, 3)


def test_confluent_admin_creates_describes_and_deletes(node: Node) -> None:
    admin = node.admin()
    read = acl("cf-orders")
    deny = acl("cf-orders", AclOperation.WRITE, DENY, principal="User:bob", host="10.0.0.1")
    prefixed = acl("cf-", AclOperation.DESCRIBE, pattern=PREFIXED, principal="User:*")
    group = acl("cf-app", restype=GROUP)
    bad = acl("my-cluster", AclOperation.ALTER, restype=CLUSTER)
    created = outcome(admin.create_acls([read, deny, prefixed, group, bad], request_timeout=TIMEOUT_S))
    assert [created[b] for b in (read, deny, prefixed, group)] == [None] * 4
    assert isinstance(created[bad], KafkaError) and created[bad].code() == KafkaError.INVALID_REQUEST
    assert "kafka-cluster" in created[bad].str()

    assert described(admin, everything(TOPIC)) >= {key(read), key(deny), key(prefixed)}
    match = acl_filter(TOPIC, "cf-orders", ResourcePatternType.MATCH)
    assert described(admin, match) == {key(read), key(deny), key(prefixed)}
    assert described(admin, everything(GROUP, "cf-app")) == {key(group)}

    only_bob = acl_filter(TOPIC, "cf-orders", LITERAL, "User:bob")
    deleted = outcome(admin.delete_acls([only_bob, everything(GROUP)], request_timeout=TIMEOUT_S))
    assert [key(b) for b in deleted[only_bob]] == [key(deny)]
    assert key(group) in {key(b) for b in deleted[everything(GROUP)]}
    assert described(admin, match) == {key(read), key(prefixed)}


def test_a_user_needs_cluster_permissions(node: Node, tmp_path: Path) -> None:
    alice, admin = node.alice(), node.admin()
    alice_config = tmp_path / "alice.properties"
    alice_config.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
        f'sasl.jaas.config={PLAIN_MODULE} required username="alice" password="alice-secret";\n'
    )
    tool_as_alice = (
        "--bootstrap-server",
        f"127.0.0.1:{node.sasl_port}",
        "--command-config",
        str(alice_config),
    )
    as_alice = {
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "PLAIN",
        "sasl_plain_username": "alice",
        "sasl_plain_password": "alice-secret",
    }
    alice_bootstrap = f"127.0.0.1:{node.sasl_port}"
    with pytest.raises(ClusterAuthorizationFailedError):
        kafka_python_describe(alice_bootstrap, **as_alice)
    assert described(alice, everything()) == set()  # librdkafka: the refusal reads as no ACL
    status, out, err = run_acls(None, *tool_as_alice, "--list")
    assert (status, out) == (1, "")
    assert err.startswith("Error while executing ACL command: CLUSTER_AUTHORIZATION_FAILED")
    mine = acl("alice-topic")
    created = outcome(alice.create_acls([mine], request_timeout=TIMEOUT_S))
    assert created[mine].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED

    grant = acl("kafka-cluster", AclOperation.DESCRIBE, restype=CLUSTER)
    assert outcome(admin.create_acls([grant], request_timeout=TIMEOUT_S)) == {grant: None}
    assert key(grant) in described(alice, everything())
    assert any(a.principal == "User:alice" for a in kafka_python_describe(alice_bootstrap, **as_alice))
    status, out, _ = run_acls(None, *tool_as_alice, "--list", "--cluster")
    assert status == 0 and "(principal=User:alice, host=*, operation=DESCRIBE, permissionType=ALLOW)" in out
    created = outcome(alice.create_acls([mine], request_timeout=TIMEOUT_S))
    assert created[mine].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED  # DESCRIBE is not ALTER

    alter = acl("kafka-cluster", AclOperation.ALTER, restype=CLUSTER)
    assert outcome(admin.create_acls([alter], request_timeout=TIMEOUT_S)) == {alter: None}
    assert outcome(alice.create_acls([mine], request_timeout=TIMEOUT_S)) == {mine: None}
    assert key(mine) in described(admin, everything(TOPIC, "alice-topic"))


def run_acls(node: Node | BrokerProcess | None, *argv: str) -> tuple[int, str, str]:
    """``kipling acls`` in process (``node`` None: ``argv`` names the servers); answers yes."""
    bootstrap = [] if node is None else ["--bootstrap-server", node.bootstrap]
    args = build_parser().parse_args(["acls", *bootstrap, *argv])
    out, err = io.StringIO(), io.StringIO()
    status = run_async(acls_command(args, out, err, lambda: True))
    return status, out.getvalue(), err.getvalue()


def test_kipling_acls_round_trip(node: Node) -> None:
    pattern = "ResourcePattern(resourceType=TOPIC, name=cli-orders, patternType=LITERAL)"
    read = "(principal=User:carol, host=*, operation=READ, permissionType=ALLOW)"
    write = "(principal=User:carol, host=*, operation=WRITE, permissionType=ALLOW)"
    added = run_acls(
        node, "--add", "--allow-principal", "User:carol", "--operation", "Read", "--operation", "Write",
        "--topic", "cli-orders",
    )  # fmt: skip
    assert added == (0, f"Adding ACLs for resource `{pattern}`: \n \t{read}\n\t{write}\n\n", "")
    assert run_acls(node, "--list", "--topic", "cli-orders") == (
        0,
        f"Current ACLs for resource `{pattern}`:\n\t{read}\n\t{write}\n\n",
        "",
    )
    again = run_acls(
        node, "--add", "--allow-principal", "User:carol", "--operation", "Read", "--topic", "cli-orders"
    )
    assert again == (0, f"Acl (pattern={pattern}, entry={read}) already exists.\n", "")

    consumer = run_acls(
        node, "--add", "--allow-principal", "User:dave", "--consumer", "--topic", "cli-",
        "--group", "cli-app", "--resource-pattern-type", "prefixed",
    )  # fmt: skip
    assert consumer[0] == 0 and consumer[1].count("Adding ACLs for resource") == 2
    status, listed, _ = run_acls(node, "--list", "--topic", "cli-orders", "--resource-pattern-type", "match")
    assert status == 0
    assert "ResourcePattern(resourceType=TOPIC, name=cli-, patternType=PREFIXED)" in listed
    assert "(principal=User:dave, host=*, operation=DESCRIBE, permissionType=ALLOW)" in listed

    removed = run_acls(
        node, "--remove", "--allow-principal", "User:carol", "--operation", "Write", "--topic", "cli-orders"
    )
    assert removed[0] == 0 and "Are you sure you want to remove ACLs" in removed[1]
    assert (
        run_acls(node, "--list", "--topic", "cli-orders")[1]
        == f"Current ACLs for resource `{pattern}`:\n\t{read}\n\n"
    )
    assert (
        run_acls(
            node,
            "--remove",
            "--topic",
            "cli-",
            "--group",
            "cli-app",
            "--resource-pattern-type",
            "prefixed",
            "--force",
        )[0]
        == 0
    )
    assert "dave" not in run_acls(node, "--list")[1]

    status, out, err = run_acls(
        node, "--add", "--allow-principal", "User:x", "--cluster", "--operation", "Read"
    )
    assert (status, out) == (1, "")
    assert err.startswith("ResourceType CLUSTER only supports operations")


def test_acls_survive_a_restart(node: Node) -> None:
    durable = acl("durable", AclOperation.WRITE, principal="User:kept")
    assert outcome(node.admin().create_acls([durable], request_timeout=TIMEOUT_S)) == {durable: None}
    node.process.restart()
    assert key(durable) in described(node.admin(), everything(TOPIC, "durable"))


@pytest.fixture(scope="module")
def open_node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    process = BrokerProcess(tmp_path_factory.mktemp("no-authorizer")).start()
    yield process
    process.stop()


def test_without_an_authorizer_the_acl_apis_are_security_disabled(open_node: BrokerProcess) -> None:
    admin = AdminClient({"bootstrap.servers": open_node.bootstrap})
    with pytest.raises(SecurityDisabledError, match="No Authorizer is configured on the broker"):
        kafka_python_describe(open_node.bootstrap)
    binding = acl("t")
    assert (
        outcome(admin.create_acls([binding], request_timeout=TIMEOUT_S))[binding].code()
        == KafkaError.SECURITY_DISABLED
    )
    assert run_acls(open_node, "--list") == (
        1,
        "",
        "Error while executing ACL command: SECURITY_DISABLED: No Authorizer is configured on the broker\n",
    )
