"""`kipling leader-election` without a broker: its arguments (Kafka's checks), the JSON file, Kafka's
output lines and exception names, and one line with status 1 when no broker answers. Against real
brokers: tests/integration/test_leader_election_cluster.py."""

from __future__ import annotations

import argparse
import io
import re
import socket
from pathlib import Path

import pytest

from client.admin import ElectionResult, TopicPartitionKey
from metadata.controller.leader_election import ElectionType
from protocol.error_codes import ErrorCode
from tools.cli import build_parser
from tools.commands.leader_election import (
    LeaderElectionCommandError,
    exception_name,
    leader_election_command,
    parse_election_json,
    report_lines,
    requested_partitions,
)
from tools.commands.topics import run_async

TP = TopicPartitionKey


def args(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(["leader-election", "--bootstrap-server", "127.0.0.1:1", *argv])


@pytest.mark.parametrize("text", ["preferred", "PREFERRED", "Preferred"])
def test_the_election_type_is_case_insensitive(text: str) -> None:
    assert args("--election-type", text, "--all-topic-partitions").election_type is ElectionType.PREFERRED


def test_an_unknown_election_type_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        args("--election-type", "fastest", "--all-topic-partitions")
    assert "Unrecognized value 'fastest', expected one of: PREFERRED, UNCLEAN" in capsys.readouterr().err


def test_what_to_elect(tmp_path: Path) -> None:
    assert requested_partitions(args("--election-type", "unclean", "--all-topic-partitions")) is None
    assert requested_partitions(args("--election-type", "preferred", "--topic", "t", "--partition", "3")) == {
        "t": [3]
    }
    path = tmp_path / "e.json"
    path.write_text(
        '{"partitions": [{"topic": "a", "partition": 1}, {"topic": "b", "partition": 0},'
        ' {"topic": "a", "partition": 0}]}'
    )
    assert requested_partitions(args("--election-type", "preferred", "--path-to-json-file", str(path))) == {
        "a": [1, 0],
        "b": [0],
    }


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            [],
            "One and only one of the following options is required: "
            "--topic, --all-topic-partitions, --path-to-json-file",
        ),
        (
            ["--topic", "t", "--partition", "0", "--all-topic-partitions"],
            "One and only one of the following options is required",
        ),
        (["--topic", "t"], "Missing required option(s) [partition]"),
        (["--partition", "0", "--all-topic-partitions"], "Option partition is only allowed if topic is used"),
    ],
)
def test_kafkas_option_checks(argv: list[str], message: str) -> None:
    with pytest.raises(
        LeaderElectionCommandError,
        match=re.escape(message),
    ):
        requested_partitions(args("--election-type", "preferred", *argv))


def test_the_json_file_refuses_duplicates_and_bad_entries() -> None:
    with pytest.raises(LeaderElectionCommandError, match="duplicate partitions: t-0"):
        parse_election_json(
            '{"partitions": [{"topic": "t", "partition": 0}, {"topic": "t", "partition": 0}]}'
        )
    with pytest.raises(LeaderElectionCommandError, match="not a valid JSON"):
        parse_election_json("{")
    with pytest.raises(LeaderElectionCommandError, match="missing"):
        parse_election_json("{}")
    with pytest.raises(LeaderElectionCommandError, match="Invalid partition entry"):
        parse_election_json('{"partitions": [{"topic": "t"}]}')
    assert parse_election_json('{"partitions": []}') == []


def test_kafkas_output_lines() -> None:
    results = {
        TP("t", 1): ElectionResult(ErrorCode.NONE, None),
        TP("t", 0): ElectionResult(ErrorCode.NONE, None),
        TP("u", 0): ElectionResult(
            ErrorCode.ELECTION_NOT_NEEDED, "Leader election not needed for topic partition."
        ),
        TP("v", 2): ElectionResult(
            ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE, "The preferred leader was not available."
        ),
    }
    assert report_lines(ElectionType.PREFERRED, results) == [
        "Successfully completed leader election (PREFERRED) for partitions t-0, t-1",
        "Valid replica already elected for partitions u-0",
        "Error completing leader election (PREFERRED) for partition: v-2: "
        "org.apache.kafka.common.errors.PreferredLeaderNotAvailableException: "
        "The preferred leader was not available.",
    ]


def test_exception_names_are_kafkas() -> None:
    assert exception_name(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION) == (
        "org.apache.kafka.common.errors.UnknownTopicOrPartitionException"
    )
    assert exception_name(ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE) == (
        "org.apache.kafka.common.errors.EligibleLeadersNotAvailableException"
    )
    assert exception_name(ErrorCode.REQUEST_TIMED_OUT) == "org.apache.kafka.common.errors.TimeoutException"


def test_no_broker_reachable_is_one_line_and_status_1() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    parsed = build_parser().parse_args(
        [
            "leader-election",
            "--bootstrap-server",
            f"127.0.0.1:{port}",
            "--election-type",
            "preferred",
            "--all-topic-partitions",
        ]
    )
    out, err = io.StringIO(), io.StringIO()
    assert run_async(leader_election_command(parsed, out, err)) == 1
    assert out.getvalue() == ""
    assert err.getvalue().startswith("Leader election failed: ") and err.getvalue().count("\n") == 1
