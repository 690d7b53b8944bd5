"""`kipling configs --entity-type clients|users` (tools/commands/client_quotas.py) without a broker:
its options on kipling configs' parser, Kafka's describe line and Java's double format, argument
errors. Against a real broker: tests/integration/test_client_quotas.py."""

from __future__ import annotations

import argparse
import io

import pytest

from tools.cli import build_parser
from tools.commands.client_quotas import java_double, quota_line, requested_entity, run_client_quotas
from tools.commands.topics import run_async


def args(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(["configs", "--bootstrap-server", "127.0.0.1:1", *argv])


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (1024.0, "1024.0"),
        (12.5, "12.5"),
        (1e7, "1.0E7"),
        (1.5e-4, "1.5E-4"),
        (0.001, "0.001"),
        (5e6, "5000000.0"),
    ],
)
def test_values_print_as_java_doubles(value: float, text: str) -> None:
    assert java_double(value) == text


def test_kafkas_describe_line() -> None:
    assert quota_line(
        (("client-id", "app"), ("user", "alice")), {"producer_byte_rate": 1024.0, "consumer_byte_rate": 1e7}
    ) == (
        "Quota configs for user-principal 'alice', client-id 'app' are "
        "consumer_byte_rate=1.0E7, producer_byte_rate=1024.0"
    )
    assert quota_line((("client-id", None),), {"request_percentage": 12.5}) == (
        "Quota configs for the default client-id are request_percentage=12.5"
    )


def test_entities_from_the_options() -> None:
    assert requested_entity(args("--entity-type", "clients", "--entity-name", "app", "--describe")) == [
        ("client-id", "app")
    ]
    assert requested_entity(args("--entity-type", "users", "--entity-default", "--describe")) == [
        ("user", None)
    ]
    assert requested_entity(args("--entity-type", "clients", "--describe")) == [("client-id", False)]
    assert requested_entity(args("--user", "alice", "--client", "app", "--describe")) == [
        ("user", "alice"),
        ("client-id", "app"),
    ]
    assert requested_entity(args("--user", "alice", "--client-defaults", "--describe")) == [
        ("user", "alice"),
        ("client-id", None),
    ]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["--entity-type", "clients", "--entity-name", "a"],
            "Command must include exactly one action: --describe, --alter\n",
        ),
        (
            ["--entity-type", "clients", "--entity-name", "a", "--alter"],
            "--add-config or --delete-config must be specified with --alter\n",
        ),
        (
            [
                "--entity-type",
                "clients",
                "--entity-name",
                "a",
                "--alter",
                "--add-config",
                "producer_byte_rate=fast",
            ],
            "Cannot parse quota configuration value for producer_byte_rate: fast\n",
        ),
        (["--describe"], "--entity-type must be specified\n"),
    ],
)
def test_argument_errors_are_one_line(argv: list[str], message: str) -> None:
    out, err = io.StringIO(), io.StringIO()
    assert run_async(run_client_quotas(args(*argv), out, err)) == 1
    assert (out.getvalue(), err.getvalue()) == ("", message)
