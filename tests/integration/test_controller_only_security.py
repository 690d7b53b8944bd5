"""Two controller-only voters with an authorizer and SASL_PLAINTEXT on their controller listener:
PLAIN for the voters' own logins (a super user), SCRAM-SHA-512 for a user created through the
active controller. The standby controller has no QuorumController, yet checks SCRAM logins and ACLs
against the committed metadata log it replicates, as the active one does: in Kafka every
controller replays the committed log into its authorizer and SCRAM credentials."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from client.connection import KafkaConnection
from client.errors import AuthenticationFailedError
from client.security import ClientSecurityConfig
from metadata.raft import wire
from protocol.acl_types import AclOperation, AclPermissionType, PatternType, ResourceType
from protocol.api_keys import ApiKey
from protocol.error_codes import ErrorCode
from security.scram import ScramMechanism, salted_password
from tests.integration.broker_process import BrokerProcess, free_port
from tests.integration.cluster import wait_until

pytestmark = [pytest.mark.timeout(150)]

PLAIN_JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="controller" password="controller-secret" user_controller="controller-secret";'
)
CONTROLLER = ("PLAIN", "controller", "controller-secret")
CAROL = ("SCRAM-SHA-512", "carol", "carol-secret")
LOGIN_REFUSED = "login refused"
TIMEOUT_S = 30


@pytest.fixture
def controllers(tmp_path: Path) -> Iterator[dict[int, BrokerProcess]]:
    """Voters 1 and 2, controller-only; each process's port is its controller listener."""
    nodes = {node: BrokerProcess(tmp_path / f"controller-{node}", port=free_port()) for node in (1, 2)}
    voters = ",".join(f"{node}@127.0.0.1:{process.port}" for node, process in nodes.items())
    for node, process in nodes.items():
        process.overrides = [
            "cluster.id=kipling-controller-only-security",
            f"node.id={node}",
            "process.roles=controller",
            f"controller.quorum.voters={voters}",
            "controller.listener.names=CONTROLLER",
            f"listeners=CONTROLLER://127.0.0.1:{process.port}",
            "listener.security.protocol.map=CONTROLLER:SASL_PLAINTEXT",
            "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-512",
            "sasl.mechanism.controller.protocol=PLAIN",
            f"listener.name.controller.plain.sasl.jaas.config={PLAIN_JAAS}",
            "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users=User:controller",
        ]
    try:
        for process in nodes.values():
            process.launch()
        for process in nodes.values():
            process.wait_listening(60)
        yield nodes
    finally:
        for process in nodes.values():
            process.stop()


async def _request(port: int, login: tuple[str, str, str], api: ApiKey, version: int, body: Any) -> Any:
    """``api``'s answer on ``port``'s controller listener, logged in as ``login``; LOGIN_REFUSED
    when the login is."""
    mechanism, user, password = login
    security = ClientSecurityConfig(
        protocol="SASL_PLAINTEXT", sasl_mechanism=mechanism, username=user, password=password
    ).build()
    try:
        connection = await KafkaConnection.open(
            "127.0.0.1", port, security=security, connect_timeout_s=5, request_timeout_s=10
        )
    except AuthenticationFailedError:
        return LOGIN_REFUSED
    try:
        return await connection.request(api, version, body)
    finally:
        connection.close()
        await connection.wait_closed()


def describe_quorum(port: int, login: tuple[str, str, str]) -> int | str:
    """The DescribeQuorum error ``port`` answers ``login`` with (DESCRIBE on the cluster needed)."""
    answer = asyncio.run(
        _request(port, login, ApiKey.DESCRIBE_QUORUM, 2, wire.describe_quorum_request_body())
    )
    return answer if isinstance(answer, str) else int(answer.topics[0].partitions[0].error_code)


def active_port(controllers: dict[int, BrokerProcess]) -> int:
    found: list[int] = []

    def one_leads() -> bool:
        found[:] = [p.port for p in controllers.values() if describe_quorum(p.port, CONTROLLER) == 0]
        return len(found) == 1

    wait_until(one_leads, TIMEOUT_S, "a voter to lead the metadata quorum", interval_s=0.2)
    return found[0]


def create_carol(port: int) -> None:
    salt, iterations = os.urandom(16), 4096
    upsertion = {
        "name": CAROL[1],
        "mechanism": ScramMechanism.SCRAM_SHA_512.type_id,
        "iterations": iterations,
        "salt": salt,
        "salted_password": salted_password(ScramMechanism.SCRAM_SHA_512, CAROL[2], salt, iterations),
    }
    body = {"deletions": [], "upsertions": [upsertion]}
    answer = asyncio.run(_request(port, CONTROLLER, ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0, body))
    assert [int(r.error_code) for r in answer.results] == [0]


def grant_carol_describe(port: int) -> None:
    binding = {
        "resource_type": int(ResourceType.CLUSTER),
        "resource_name": "kafka-cluster",
        "resource_pattern_type": int(PatternType.LITERAL),
        "principal": "User:carol",
        "host": "*",
        "operation": int(AclOperation.DESCRIBE),
        "permission_type": int(AclPermissionType.ALLOW),
    }
    answer = asyncio.run(_request(port, CONTROLLER, ApiKey.CREATE_ACLS, 3, {"creations": [binding]}))
    assert [int(r.error_code) for r in answer.results] == [0]


def test_a_scram_user_logs_in_to_the_standby_controller_and_its_acls_apply(
    controllers: dict[int, BrokerProcess],
) -> None:
    active = active_port(controllers)
    ports = [p.port for p in controllers.values()]
    assert {describe_quorum(port, CAROL) for port in ports} == {LOGIN_REFUSED}  # no such user yet

    create_carol(active)
    authenticated_everywhere = {int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)}  # logged in, no ACL yet
    wait_until(
        lambda: {describe_quorum(port, CAROL) for port in ports} == authenticated_everywhere,
        TIMEOUT_S,
        "carol's SCRAM login on both controllers",
        interval_s=0.2,
    )

    grant_carol_describe(active)
    allowed = {int(ErrorCode.NONE), int(ErrorCode.NOT_LEADER_OR_FOLLOWER)}  # the active, the standby
    wait_until(
        lambda: {describe_quorum(port, CAROL) for port in ports} == allowed,
        TIMEOUT_S,
        "carol's ACL on both controllers",
        interval_s=0.2,
    )
    standby = next(port for port in ports if port != active)
    assert describe_quorum(standby, (CAROL[0], CAROL[1], "wrong-secret")) == LOGIN_REFUSED
