"""`kipling log-dirs` without a broker: its JSON (Kafka's shape and error names), its arguments,
and one line with status 1 when no broker answers. Against real brokers:
tests/integration/test_describe_log_dirs.py."""

from __future__ import annotations

import io
import json
import socket

import pytest

from client.admin import LogDirDescription, ReplicaInfo, TopicPartitionKey
from protocol.error_codes import ErrorCode
from tools.cli import build_parser
from tools.commands.log_dirs import error_name, format_json, log_dirs_command
from tools.commands.topics import run_async


def test_json_is_kafkas_shape_filtered_by_topic_with_error_class_names() -> None:
    descriptions = {
        2: {"/d": LogDirDescription(ErrorCode.NONE, {TopicPartitionKey("x", 0): ReplicaInfo(1, 0, False)})},
        1: {
            "/a": LogDirDescription(
                ErrorCode.NONE,
                {
                    TopicPartitionKey("t", 1): ReplicaInfo(20, 0, False),
                    TopicPartitionKey("t", 0): ReplicaInfo(10, 0, False),
                    TopicPartitionKey("other", 0): ReplicaInfo(5, 0, False),
                },
                100,
                50,
            ),
            "/b": LogDirDescription(ErrorCode.KAFKA_STORAGE_ERROR, {}),
        },
    }
    text = format_json(descriptions, ["t"])
    assert text == (
        '{"version":1,"brokers":[{"broker":1,"logDirs":['
        '{"logDir":"/a","error":null,"partitions":['
        '{"partition":"t-0","size":10,"offsetLag":0,"isFuture":false},'
        '{"partition":"t-1","size":20,"offsetLag":0,"isFuture":false}]},'
        '{"logDir":"/b","error":"org.apache.kafka.common.errors.KafkaStorageException","partitions":[]}]},'
        '{"broker":2,"logDirs":[{"logDir":"/d","error":null,"partitions":[]}]}]}'
    )
    everything = json.loads(format_json(descriptions, []))
    assert [p["partition"] for p in everything["brokers"][0]["logDirs"][0]["partitions"]] == [
        "other-0",
        "t-0",
        "t-1",
    ]
    assert error_name(ErrorCode.NONE) is None
    assert error_name(ErrorCode.NOT_CONTROLLER) == "NOT_CONTROLLER"


def test_arguments() -> None:
    parser = build_parser()
    args = parser.parse_args(
        [
            "log-dirs",
            "--bootstrap-server",
            "h:1",
            "--describe",
            "--topic-list",
            "a,,b",
            "--broker-list",
            "3,1",
        ]
    )
    assert (args.topic_list, args.broker_list) == (["a", "b"], [3, 1])
    defaults = parser.parse_args(["log-dirs", "--bootstrap-server", "h:1", "--describe"])
    assert (defaults.topic_list, defaults.broker_list) == ([], [])
    with pytest.raises(SystemExit):
        parser.parse_args(["log-dirs", "--bootstrap-server", "h:1"])  # --describe is required
    with pytest.raises(SystemExit):
        parser.parse_args(["log-dirs", "--bootstrap-server", "h:1", "--describe", "--broker-list", "one"])


def test_no_broker_answering_is_one_line_and_status_1() -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    args = build_parser().parse_args(["log-dirs", "--bootstrap-server", f"127.0.0.1:{port}", "--describe"])
    out, err = io.StringIO(), io.StringIO()
    assert run_async(log_dirs_command(args, out, err)) == 1
    assert out.getvalue() == ""
    assert err.getvalue().startswith("Failed to list the cluster's brokers: no broker reachable")
    assert err.getvalue().count("\n") == 1
