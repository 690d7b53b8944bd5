"""Users' SCRAM credentials on a real broker process: ApiVersions advertises Describe- and
AlterUserScramCredentials, confluent-kafka's AdminClient (librdkafka salts the password itself)
upserts, deletes and describes credentials with Kafka's per-user errors, the credentials survive a
restart (replayed from the metadata log), and ``kipling configs --entity-type users`` goes round
trip with kafka-configs.sh's syntax and output."""

from __future__ import annotations

import io
from collections.abc import Iterator

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient as ConfluentAdmin
from confluent_kafka.admin import (  # type: ignore[attr-defined]  # exported, but not in __all__
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialAlteration,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)

from protocol.api_keys import ApiKey
from tests.integration.broker_process import BrokerProcess
from tests.integration.wire_client import WireClient
from tools.cli import build_parser
from tools.commands.configs import configs_command
from tools.commands.topics import run_async

pytestmark = [pytest.mark.timeout(180)]

REQUEST_TIMEOUT_S = 30


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    process = BrokerProcess(tmp_path_factory.mktemp("scram-credentials")).start()
    yield process
    process.stop()


@pytest.fixture
def admin(node: BrokerProcess) -> ConfluentAdmin:
    return ConfluentAdmin({"bootstrap.servers": node.bootstrap, "client.id": "scram-admin"})


def alter(admin: ConfluentAdmin, *alterations: UserScramCredentialAlteration) -> dict[str, KafkaError | None]:
    """Each user's outcome: None, or the KafkaError its future raised."""
    outcome: dict[str, KafkaError | None] = {}
    for user, future in admin.alter_user_scram_credentials(list(alterations)).items():
        try:
            future.result(timeout=REQUEST_TIMEOUT_S)
            outcome[user] = None
        except KafkaException as exc:
            outcome[user] = exc.args[0]
    return outcome


def infos(admin: ConfluentAdmin, user: str) -> list[tuple[str, int]]:
    futures = admin.describe_user_scram_credentials([user])
    assert isinstance(futures, dict)
    description = futures[user].result(timeout=REQUEST_TIMEOUT_S)
    return [(i.mechanism.name, i.iterations) for i in description.scram_credential_infos]


def test_api_versions_advertises_both_apis(node: BrokerProcess) -> None:
    body = {"client_software_name": "kipling-tests", "client_software_version": "1.0"}
    with WireClient(node.port) as client:
        response = client.request(ApiKey.API_VERSIONS, 3, body)
    advertised = {k.api_key: (k.min_version, k.max_version) for k in response.body.api_keys}
    assert advertised[ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS] == (0, 0)
    assert advertised[ApiKey.ALTER_USER_SCRAM_CREDENTIALS] == (0, 0)


def test_confluent_admin_upserts_describes_and_deletes(node: BrokerProcess, admin: ConfluentAdmin) -> None:
    sha256, sha512 = ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512
    assert alter(
        admin,
        UserScramCredentialUpsertion("cf-alice", ScramCredentialInfo(sha256, 8192), b"alice-secret"),
        UserScramCredentialUpsertion("cf-alice", ScramCredentialInfo(sha512, 4096), b"alice-secret"),
        UserScramCredentialUpsertion("cf-bob", ScramCredentialInfo(sha256, 10_000), b"bob-secret", b"pepper"),
    ) == {"cf-alice": None, "cf-bob": None}
    assert infos(admin, "cf-alice") == [("SCRAM_SHA_256", 8192), ("SCRAM_SHA_512", 4096)]
    assert infos(admin, "cf-bob") == [("SCRAM_SHA_256", 10_000)]
    every_future = admin.describe_user_scram_credentials()
    assert not isinstance(every_future, dict)
    everyone = every_future.result(timeout=REQUEST_TIMEOUT_S)
    assert {"cf-alice", "cf-bob"} <= set(everyone)

    assert alter(admin, UserScramCredentialDeletion("cf-alice", sha512)) == {"cf-alice": None}
    assert infos(admin, "cf-alice") == [("SCRAM_SHA_256", 8192)]

    refused = alter(
        admin,
        UserScramCredentialUpsertion("cf-carol", ScramCredentialInfo(sha256, 100), b"x"),
        UserScramCredentialDeletion("cf-dave", sha512),
    )
    carol, dave = refused["cf-carol"], refused["cf-dave"]
    assert carol is not None and carol.code() == KafkaError.UNACCEPTABLE_CREDENTIAL
    assert dave is not None and dave.code() == KafkaError.RESOURCE_NOT_FOUND
    futures = admin.describe_user_scram_credentials(["cf-carol"])
    assert isinstance(futures, dict)
    with pytest.raises(KafkaException) as missing:
        futures["cf-carol"].result(timeout=REQUEST_TIMEOUT_S)
    assert missing.value.args[0].code() == KafkaError.RESOURCE_NOT_FOUND


def run_configs(node: BrokerProcess, *argv: str) -> tuple[int, str, str]:
    args = build_parser().parse_args(["configs", "--bootstrap-server", node.bootstrap, *argv])
    out, err = io.StringIO(), io.StringIO()
    status = run_async(configs_command(args, out, err))
    return status, out.getvalue(), err.getvalue()


def test_kipling_configs_round_trip(node: BrokerProcess) -> None:
    user = ("--entity-type", "users", "--entity-name", "alice")
    assert run_configs(
        node,
        *user,
        "--alter",
        "--add-config",
        "SCRAM-SHA-256=[iterations=8192,password=alice-secret],SCRAM-SHA-512=[password=alice-secret]",
    ) == (0, "Completed updating config for user alice.\n", "")
    line = (
        "SCRAM credential configs for user-principal 'alice' are "
        "SCRAM-SHA-256=iterations=8192, SCRAM-SHA-512=iterations=4096\n"
    )
    assert run_configs(node, *user, "--describe") == (0, line, "")
    status, everyone, err = run_configs(node, "--entity-type", "users", "--describe")
    assert (status, err) == (0, "") and line in everyone.splitlines(keepends=True)

    assert run_configs(node, *user, "--alter", "--delete-config", "SCRAM-SHA-512") == (
        0,
        "Completed updating config for user alice.\n",
        "",
    )
    assert run_configs(node, *user, "--describe") == (
        0,
        "SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-256=iterations=8192\n",
        "",
    )
    status, out, err = run_configs(node, *user, "--alter", "--delete-config", "SCRAM-SHA-512")
    assert (status, out) == (1, "")
    assert err.startswith("Error while executing config command: RESOURCE_NOT_FOUND")
    status, out, err = run_configs(
        node, *user, "--alter", "--add-config", "SCRAM-SHA-256=[iterations=20000,password=p]"
    )
    assert (status, out, err) == (
        1,
        "",
        "Error while executing config command: UNACCEPTABLE_CREDENTIAL: Too many iterations\n",
    )
    # a user with neither quotas nor credentials describes as nothing, as with Kafka's tool
    assert run_configs(node, "--entity-type", "users", "--entity-name", "nobody", "--describe") == (0, "", "")


def test_credentials_survive_a_restart(node: BrokerProcess, admin: ConfluentAdmin) -> None:
    sha512 = ScramMechanism.SCRAM_SHA_512
    assert alter(
        admin, UserScramCredentialUpsertion("durable", ScramCredentialInfo(sha512, 5000), b"kept")
    ) == {"durable": None}
    node.restart()
    restarted = ConfluentAdmin({"bootstrap.servers": node.bootstrap, "client.id": "scram-admin-2"})
    assert infos(restarted, "durable") == [("SCRAM_SHA_512", 5000)]
