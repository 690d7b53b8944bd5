"""kipling configs: Kafka's --add-config syntax, headers and lines, and the errors found before any
broker is asked."""

from __future__ import annotations

import importlib.util
import io

import pytest

from client.admin import ConfigEntryDescription, ConfigSynonymDescription
from tools.cli import build_parser
from tools.commands.configs import (
    QUOTA_MODULE,
    completed,
    configs_command,
    format_entry,
    header,
    parse_config_list,
)
from tools.commands.topics import run_async


def test_add_config_syntax_with_bracketed_lists() -> None:
    assert parse_config_list("retention.ms=1000, cleanup.policy=[delete,compact],x=a=b") == {
        "retention.ms": "1000",
        "cleanup.policy": "delete,compact",
        "x": "a=b",
    }
    with pytest.raises(Exception, match="key=val"):
        parse_config_list("novalue")


def test_headers_lines_and_completion_messages_are_kafkas() -> None:
    assert header("topics", "t", False) == "Dynamic configs for topic t are:"
    assert header("topics", "t", True) == "All configs for topic t are:"
    assert header("brokers", "1", False) == "Dynamic configs for broker 1 are:"
    assert header("brokers", "", False) == "Default configs for brokers in the cluster are:"
    assert completed("topics", "t") == "Completed updating config for topic t."
    assert completed("brokers", "2") == "Completed updating config for broker 2."
    assert completed("brokers", "") == "Completed updating default config for brokers in the cluster."
    assert header("groups", "g", False) == "Dynamic configs for group g are:"
    assert completed("groups", "g") == "Completed updating config for group g."
    entry = ConfigEntryDescription(
        "retention.ms",
        "1000",
        1,
        False,
        False,
        (
            ConfigSynonymDescription("retention.ms", "1000", 1),
            ConfigSynonymDescription("log.retention.hours", "168", 5),
        ),
    )
    assert format_entry(entry) == (
        "  retention.ms=1000 sensitive=false "
        "synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=1000, DEFAULT_CONFIG:log.retention.hours=168}"
    )


def run(*argv: str) -> tuple[int, str, str]:
    args = build_parser().parse_args(["configs", "--bootstrap-server", "127.0.0.1:1", *argv])
    out, err = io.StringIO(), io.StringIO()
    return run_async(configs_command(args, out, err)), out.getvalue(), err.getvalue()


def test_errors_before_any_request() -> None:
    assert run("--entity-type", "topics", "--entity-name", "t") == (
        1,
        "",
        "Command must include exactly one action: --describe, --alter\n",
    )
    assert run("--entity-type", "brokers", "--entity-name", "one", "--describe")[2] == (
        "The entity name for brokers must be a valid integer broker id, but it is: one\n"
    )
    assert run("--entity-type", "topics", "--entity-default", "--describe")[2] == (
        "--entity-default is not supported for topics\n"
    )
    assert run("--entity-type", "groups", "--entity-default", "--describe")[2] == (
        "--entity-default is not supported for groups\n"
    )
    assert run("--entity-type", "broker-loggers", "--entity-name", "1", "--describe")[2] == (
        "Entity type broker-loggers is not supported by kipling\n"
    )
    status, _, err = run(
        "--entity-type",
        "topics",
        "--entity-name",
        "t",
        "--alter",
        "--add-config",
        "a=1",
        "--delete-config",
        "a",
    )
    assert (status, err) == (1, "Invalid config(s): a are both added and deleted\n")


@pytest.mark.skipif(importlib.util.find_spec(QUOTA_MODULE) is not None, reason="client quotas installed")
def test_client_quota_entities_without_the_quotas_module() -> None:
    assert run("--entity-type", "clients", "--describe") == (
        1,
        "",
        "Entity type clients (client quotas) is not supported by this kipling\n",
    )


@pytest.mark.skipif(importlib.util.find_spec(QUOTA_MODULE) is None, reason="no client quotas module")
def test_client_quota_entities_go_to_the_quotas_module() -> None:
    """--entity-type clients|users (or the --user/--client shortcuts) are the quotas module's to
    answer, on this command's output streams."""
    assert run("--entity-type", "clients", "--entity-name", "c") == (
        1,
        "",
        "Command must include exactly one action: --describe, --alter\n",
    )
    assert run("--user", "alice")[2] == "Command must include exactly one action: --describe, --alter\n"
