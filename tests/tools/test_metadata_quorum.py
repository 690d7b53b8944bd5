"""`kipling metadata-quorum`: kafka-metadata-quorum.sh's output from decoded DescribeQuorum answers,
its option checks, and its errors against a closed port and a scripted fake server."""

from __future__ import annotations

import io
import socket
import uuid
from collections.abc import Sequence
from typing import Any

import pytest

from client.errors import KafkaResponseError
from protocol.api import Request, decode_response, encode_response
from protocol.api_keys import ApiKey
from protocol.error_codes import ErrorCode
from tests.fake_broker import FakeBroker, Reply
from tools.cli import build_parser, main
from tools.commands.metadata_quorum import (
    QuorumCommandError,
    QuorumInfo,
    describe_quorum_request,
    format_replication,
    format_status,
    metadata_quorum_command,
    quorum_info,
    relative_time_ms,
)

TOPIC = "__cluster_metadata"
DIR_1 = uuid.UUID(int=1)
NOW = 1_700_000_010_000


def replica(
    node: int, end: int, fetched: int = -1, caught_up: int = -1, directory: uuid.UUID | None = None
) -> dict[str, Any]:
    return {
        "replica_id": node,
        "replica_directory_id": directory or uuid.UUID(int=0),
        "log_end_offset": end,
        "last_fetch_timestamp": fetched,
        "last_caught_up_timestamp": caught_up,
    }


def response_body(
    voters: list[dict[str, Any]],
    observers: Sequence[dict[str, Any]] = (),
    *,
    leader: int = 1,
    epoch: int = 3,
    high_watermark: int = 42,
    error: ErrorCode = ErrorCode.NONE,
    partition_error: ErrorCode = ErrorCode.NONE,
    message: str | None = None,
    nodes: Sequence[dict[str, Any]] = (),
) -> dict[str, Any]:
    return {
        "error_code": int(error),
        "error_message": message if error else None,
        "topics": [
            {
                "topic_name": TOPIC,
                "partitions": [
                    {
                        "partition_index": 0,
                        "error_code": int(partition_error),
                        "error_message": message if partition_error else None,
                        "leader_id": leader,
                        "leader_epoch": epoch,
                        "high_watermark": high_watermark,
                        "current_voters": voters,
                        "observers": list(observers),
                    }
                ],
            }
        ],
        "nodes": list(nodes),
    }


def decoded(body: dict[str, Any], version: int) -> Any:
    """``body`` as a client reads it: encoded at ``version`` and decoded again."""
    frame = encode_response(ApiKey.DESCRIBE_QUORUM, version, 7, body)
    return decode_response(frame, ApiKey.DESCRIBE_QUORUM, version).body


def node(node_id: int, *listeners: tuple[str, str, int]) -> dict[str, Any]:
    return {"node_id": node_id, "listeners": [{"name": n, "host": h, "port": p} for n, h, p in listeners]}


THREE_VOTERS = response_body(
    [
        replica(1, 45, NOW - 5, NOW - 5, DIR_1),
        replica(2, 45, NOW - 200, NOW - 200),
        replica(3, 40, NOW - 300, NOW - 1300),
    ],
    [replica(4, 44, NOW - 20, NOW - 120)],
    nodes=[
        node(1, ("CONTROLLER", "localhost", 9093), ("REPLICATION", "::1", 9095)),
        node(2, ("CONTROLLER", "localhost", 9094)),
    ],
)


def info(body: dict[str, Any] = THREE_VOTERS, version: int = 2) -> QuorumInfo:
    return quorum_info(decoded(body, version))


# -- --status -------------------------------------------------------------------------------------


def test_status_as_kafka_4_prints_it() -> None:
    assert format_status(info(), "q1Sh-9_ISia_zwGINzRvyQ") == (
        "ClusterId:              q1Sh-9_ISia_zwGINzRvyQ\n"
        "LeaderId:               1\n"
        "LeaderEpoch:            3\n"
        "HighWatermark:          42\n"
        "MaxFollowerLag:         5\n"
        "MaxFollowerLagTimeMs:   1295\n"
        'CurrentVoters:          [{"id": 1, "directoryId": "AAAAAAAAAAAAAAAAAAAAAQ", "endpoints": '
        '["CONTROLLER://localhost:9093", "REPLICATION://[::1]:9095"]}, '
        '{"id": 2, "endpoints": ["CONTROLLER://localhost:9094"]}, {"id": 3}]\n'
        'CurrentObservers:       [{"id": 4}]\n'
    )


def test_status_without_a_cluster_id_leaves_the_line_out() -> None:
    text = format_status(info(), None)
    assert text.startswith("LeaderId:               1\n")
    assert "ClusterId" not in text


def test_status_from_a_v0_answer_has_no_times_directories_or_endpoints() -> None:
    text = format_status(info(version=0), "c")
    assert "MaxFollowerLag:         5\n" in text
    assert "MaxFollowerLagTimeMs:   -1\n" in text  # no last-caught-up times before v1
    assert 'CurrentVoters:          [{"id": 1}, {"id": 2}, {"id": 3}]\n' in text


def test_status_when_the_leader_is_the_slowest_voter() -> None:
    body = response_body([replica(1, 10, NOW, NOW), replica(2, 10, NOW, NOW - 50)])
    assert "MaxFollowerLag:         0\nMaxFollowerLagTimeMs:   0\n" in format_status(info(body), "c")
    single = response_body([replica(1, 7, NOW, NOW)], high_watermark=7)
    text = format_status(info(single), "c")
    assert "MaxFollowerLag:         0\nMaxFollowerLagTimeMs:   0\n" in text
    assert "CurrentObservers:       []\n" in text


# -- --replication --------------------------------------------------------------------------------


def test_replication_table_as_kafka_prints_it() -> None:
    t1, t2, t3, t4 = (str(NOW - d) for d in (5, 200, 300, 20))
    c3, c4 = str(NOW - 1300), str(NOW - 120)
    lines = format_replication(info()).splitlines()
    assert lines[0] == (
        "NodeId\tDirectoryId           \tLogEndOffset\tLag\tLastFetchTimestamp\t"
        "LastCaughtUpTimestamp\tStatus  \t"
    )
    assert lines[1:] == [
        f"1     \tAAAAAAAAAAAAAAAAAAAAAQ\t45          \t0  \t{t1}     \t{t1}        \tLeader  \t",
        f"2     \tAAAAAAAAAAAAAAAAAAAAAA\t45          \t0  \t{t2}     \t{t2}        \tFollower\t",
        f"3     \tAAAAAAAAAAAAAAAAAAAAAA\t40          \t5  \t{t3}     \t{c3}        \tFollower\t",
        f"4     \tAAAAAAAAAAAAAAAAAAAAAA\t44          \t1  \t{t4}     \t{c4}        \tObserver\t",
    ]


def test_replication_unknown_times_and_human_readable_times() -> None:
    old = format_replication(info(version=0)).splitlines()
    assert [row.split("\t")[4:6] for row in old[1:]] == [["-1                ", "-1                   "]] * 4
    rows = format_replication(info(), now_ms=NOW).splitlines()[1:]
    assert [[cell.strip() for cell in row.split("\t")[4:6]] for row in rows] == [
        ["5 ms ago", "5 ms ago"],
        ["200 ms ago", "200 ms ago"],
        ["300 ms ago", "1300 ms ago"],
        ["20 ms ago", "120 ms ago"],
    ]


def test_human_readable_refuses_a_timestamp_from_the_future() -> None:
    assert relative_time_ms(NOW - 1, NOW, "last fetch") == 1
    with pytest.raises(QuorumCommandError, match=r"drift in system clock.*last fetch timestamp is"):
        format_replication(info(), now_ms=NOW - 10)


# -- what the answer may say instead --------------------------------------------------------------


def test_request_body_names_the_metadata_partition() -> None:
    assert describe_quorum_request() == {
        "topics": [{"topic_name": "__cluster_metadata", "partitions": [{"partition_index": 0}]}]
    }


def test_errors_in_the_answer_are_raised_with_their_message() -> None:
    refused = response_body([], error=ErrorCode.NOT_LEADER_OR_FOLLOWER, message="ask node 2")
    with pytest.raises(KafkaResponseError) as caught:
        info(refused)
    assert (caught.value.code, caught.value.message) == (ErrorCode.NOT_LEADER_OR_FOLLOWER, "ask node 2")
    partition = response_body([], partition_error=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    with pytest.raises(KafkaResponseError) as caught:
        info(partition, version=1)  # no error messages before v2: the code's description
    assert caught.value.code is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    other = response_body([replica(1, 0)])
    other["topics"][0]["topic_name"] = "elsewhere"
    with pytest.raises(QuorumCommandError, match="does not describe __cluster_metadata-0"):
        info(other)


def test_a_leader_that_is_not_a_voter_is_reported() -> None:
    body = response_body([replica(2, 5), replica(3, 5)], leader=1)
    with pytest.raises(QuorumCommandError, match=r"leader 1 is not among the voters \[2,3\]"):
        format_status(info(body), None)


# -- the command ----------------------------------------------------------------------------------


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize("option", ["--bootstrap-server", "--bootstrap-controller"])
@pytest.mark.parametrize("view", ["--status", "--replication"])
def test_an_unreachable_server_is_one_line_and_status_1(
    option: str, view: str, capsys: pytest.CaptureFixture[str]
) -> None:
    port = closed_port()
    assert main(["metadata-quorum", option, f"127.0.0.1:{port}", "describe", view]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1
    assert captured.err.startswith("Error: cannot connect to 127.0.0.1:") and str(port) in captured.err


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--status", "--replication"], "Only one of --status or --replication should be specified"),
        ([], "One of --status or --replication must be specified"),
        (["--status", "--human-readable"], "--human-readable is only supported along with --replication"),
    ],
)
def test_describe_option_checks(options: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["metadata-quorum", "--bootstrap-server", "127.0.0.1:1", "describe", *options]) == 1
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_a_server_is_required() -> None:
    with pytest.raises(SystemExit) as exc:
        build_parser().parse_args(["metadata-quorum", "describe", "--status"])
    assert exc.value.code == 2


def api_versions(request: Request, *, quorum: bool = True) -> Reply:
    ranges = [
        {"api_key": ApiKey.API_VERSIONS, "min_version": 0, "max_version": 3},
        {"api_key": ApiKey.METADATA, "min_version": 0, "max_version": 12},
    ]
    if quorum:
        ranges.append({"api_key": ApiKey.DESCRIBE_QUORUM, "min_version": 0, "max_version": 2})
    return request.api_version, {"error_code": 0, "api_keys": ranges, "throttle_time_ms": 0}, None


async def run_against(broker: FakeBroker, *arguments: str) -> tuple[int, str, str]:
    args = build_parser().parse_args(
        ["metadata-quorum", "--bootstrap-server", f"127.0.0.1:1,127.0.0.1:{broker.port}", *arguments]
    )
    out, err = io.StringIO(), io.StringIO()
    code = await metadata_quorum_command(args, out, err)
    await broker.stop()
    return code, out.getvalue(), err.getvalue()


async def test_status_from_a_server_skips_an_unreachable_one() -> None:
    async def script(request: Request) -> Reply:
        if request.api_key == ApiKey.API_VERSIONS:
            return api_versions(request)
        if request.api_key == ApiKey.METADATA:
            body = {"brokers": [], "cluster_id": "the-cluster", "controller_id": 1, "topics": []}
            return request.api_version, body, None
        assert request.api_key == ApiKey.DESCRIBE_QUORUM and request.api_version == 2
        assert request.body.topics[0].topic_name == TOPIC
        assert request.body.topics[0].partitions[0].partition_index == 0
        return request.api_version, THREE_VOTERS, None

    broker = await FakeBroker(script).start()
    code, out, err = await run_against(broker, "describe", "--status")
    assert (code, err) == (0, "")
    assert out == format_status(info(), "the-cluster")
    assert out.startswith("ClusterId:              the-cluster\nLeaderId:               1\n")


async def test_an_error_answer_is_one_line_and_status_1() -> None:
    async def script(request: Request) -> Reply:
        if request.api_key == ApiKey.API_VERSIONS:
            return api_versions(request)
        refused = response_body([], error=ErrorCode.NOT_LEADER_OR_FOLLOWER, message="not the leader")
        return request.api_version, refused, None

    broker = await FakeBroker(script).start()
    code, out, err = await run_against(broker, "describe", "--replication")
    assert (code, out) == (1, "")
    assert err == "Error: NOT_LEADER_OR_FOLLOWER: not the leader\n"


async def test_a_server_without_describe_quorum_is_one_line_and_status_1() -> None:
    async def script(request: Request) -> Reply:
        return api_versions(request, quorum=False)

    broker = await FakeBroker(script).start()
    code, out, err = await run_against(broker, "describe", "--replication")
    assert (code, out) == (1, "")
    assert err == "Error: broker does not serve DescribeQuorum\n"
