"""`kipling configs --entity-type users` with SCRAM mechanisms (tools/commands/scram_credentials.py)
without a broker: the credential syntax, Kafka's describe line, which requests go the SCRAM way,
and ConfigCommand's refusals. Against a real broker: tests/integration/test_scram_credentials.py."""

from __future__ import annotations

import argparse
import io

import pytest

from client.admin import ScramCredentialUpsertion, UserScramCredentialsDescription, _upsertion
from protocol.error_codes import ErrorCode
from security.scram import ScramMechanism, salted_password
from tools.cli import build_parser
from tools.commands.configs import configs_command
from tools.commands.scram_credentials import (
    ScramCommandError,
    describes_scram,
    is_scram,
    parse_credential,
    scram_line,
    wants_scram_alter,
)
from tools.commands.topics import run_async

pytestmark = pytest.mark.timeout(60)

SHA256, SHA512 = ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512


def args(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(["configs", "--bootstrap-server", "127.0.0.1:1", *argv])


def test_scram_config_names() -> None:
    assert is_scram("SCRAM-SHA-256") and is_scram("SCRAM-SHA-512")
    assert (
        not is_scram("SCRAM-SHA-1") and not is_scram("producer_byte_rate") and not is_scram("scram-sha-256")
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("iterations=8192,password=alice-secret", (8192, "alice-secret")),
        ("password=alice-secret", (4096, "alice-secret")),
        ("iterations=-1,password=p", (4096, "p")),
        ("password=with,comma=and=equals", (4096, "with,comma=and=equals")),
        ("password=", (4096, "")),
    ],
)
def test_credentials_parse_as_config_command_parses_them(text: str, expected: tuple[int, str]) -> None:
    assert parse_credential(SHA256, text) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "iterations=100,password=p",
            "Iterations 100 is less than the minimum 4096 required for SCRAM-SHA-512",
        ),
        ("secret", "Invalid credential property SCRAM-SHA-512: expected [iterations=N,]password=P"),
        (
            "iterations=,password=p",
            "Invalid credential property SCRAM-SHA-512: expected [iterations=N,]password=P",
        ),
        ("password=p,iterations=8192", None),  # the password is everything after "password="
    ],
)
def test_bad_credentials(text: str, message: str | None) -> None:
    if message is None:
        assert parse_credential(SHA512, text) == (4096, "p,iterations=8192")
        return
    with pytest.raises(ScramCommandError) as raised:
        parse_credential(SHA512, text)
    assert str(raised.value) == message
    assert "secret" not in str(raised.value)  # the text (a password) is not echoed


def test_kafkas_describe_line() -> None:
    description = UserScramCredentialsDescription("alice", ErrorCode.NONE, None, ((1, 8192), (2, 4096)))
    assert scram_line(description) == (
        "SCRAM credential configs for user-principal 'alice' are "
        "SCRAM-SHA-256=iterations=8192, SCRAM-SHA-512=iterations=4096"
    )


def test_the_admin_client_sends_a_salted_password_never_the_password() -> None:
    body = _upsertion(ScramCredentialUpsertion("alice", SHA256, "alice-secret", 8192))
    assert (body["name"], body["mechanism"], body["iterations"]) == ("alice", 1, 8192)
    assert (
        len(body["salt"]) >= 20
        and body["salt"] != _upsertion(ScramCredentialUpsertion("a", SHA256, "x"))["salt"]
    )
    assert body["salted_password"] == salted_password(SHA256, "alice-secret", body["salt"], 8192)
    assert b"alice-secret" not in body["salted_password"] and "alice-secret" not in repr(body)
    assert "alice-secret" not in repr(ScramCredentialUpsertion("alice", SHA256, "alice-secret"))


def test_which_requests_go_the_scram_way() -> None:
    scram = "SCRAM-SHA-256=[iterations=8192,password=s]"
    assert wants_scram_alter(
        args("--entity-type", "users", "--entity-name", "a", "--alter", "--add-config", scram)
    )
    assert wants_scram_alter(args("--user", "a", "--alter", "--delete-config", "SCRAM-SHA-512"))
    assert not wants_scram_alter(
        args(
            "--entity-type", "users", "--entity-name", "a", "--alter", "--add-config", "producer_byte_rate=1"
        )
    )
    assert describes_scram(args("--entity-type", "users", "--describe"))
    assert describes_scram(args("--entity-type", "users", "--entity-name", "alice", "--describe"))
    assert not describes_scram(args("--entity-type", "users", "--entity-default", "--describe"))
    assert not describes_scram(args("--entity-type", "clients", "--describe"))
    assert not describes_scram(args("--user", "alice", "--client", "app", "--describe"))


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            [
                "--entity-type",
                "users",
                "--entity-name",
                "a",
                "--add-config",
                "SCRAM-SHA-256=[password=p],nonsense=1",
            ],
            "Only quota and SCRAM credential configs can be added for 'users' using --bootstrap-server. "
            "Unexpected config names: nonsense",
        ),
        (
            ["--entity-type", "users", "--entity-name", "a", "--delete-config", "SCRAM-SHA-256,nonsense"],
            "Only quota and SCRAM credential configs can be deleted for 'users' using --bootstrap-server. "
            "Unexpected config names: nonsense",
        ),
        (
            ["--entity-type", "users", "--entity-default", "--add-config", "SCRAM-SHA-256=[password=p]"],
            "The use of --entity-default or --user-defaults is not allowed with User SCRAM Credentials "
            "using --bootstrap-server.",
        ),
        (
            [
                "--entity-type",
                "users",
                "--entity-name",
                "a",
                "--add-config",
                "SCRAM-SHA-256=[password=p],producer_byte_rate=1024",
            ],
            "Cannot alter both quota and SCRAM credential configs simultaneously for 'users' using "
            "--bootstrap-server.",
        ),
        (
            ["--user", "a", "--client", "app", "--add-config", "SCRAM-SHA-256=[password=p]"],
            "Only quota configs can be added for 'clients' using --bootstrap-server. "
            "Unexpected config names: SCRAM-SHA-256",
        ),
        (
            [
                "--entity-type",
                "users",
                "--entity-name",
                "a",
                "--add-config",
                "SCRAM-SHA-256=[iterations=1,password=p]",
            ],
            "Iterations 1 is less than the minimum 4096 required for SCRAM-SHA-256",
        ),
    ],
    ids=["unknown-add", "unknown-delete", "default-user", "with-quotas", "with-client", "few-iterations"],
)
def test_config_commands_refusals_before_any_connection(argv: list[str], message: str) -> None:
    out, err = io.StringIO(), io.StringIO()
    assert run_async(configs_command(args("--alter", *argv), out, err)) == 1
    assert (out.getvalue(), err.getvalue()) == ("", message + "\n")
