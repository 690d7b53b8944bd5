"""`kipling metadata-quorum`: the state of the KRaft metadata quorum, as Kafka's kafka-metadata-quorum.sh.

``kipling metadata-quorum (--bootstrap-server | --bootstrap-controller) HOST:PORT[,...] describe
(--status | --replication [--human-readable])`` connects to the first reachable address and sends
DescribeQuorum (v0-2) for ``__cluster_metadata-0``. The output is Kafka 4's MetadataQuorumCommand's:

* ``--status``: ``Label:`` padded to 24 columns, then the value: ClusterId, LeaderId, LeaderEpoch,
  HighWatermark, MaxFollowerLag (the leader's log end offset minus the lowest voter's),
  MaxFollowerLagTimeMs (how much earlier that voter last caught up than the leader; 0 when it is
  the leader, -1 when a time is unknown), CurrentVoters and CurrentObservers. The replicas are
  printed as Kafka 4 prints them (3.x printed bare ids, ``[1,2,3]``; 4.x, checked against its
  source, prints an object per replica): ``[{"id": 1, "directoryId": "...", "endpoints":
  ["CONTROLLER://host:9093"]}, ...]``, the directory id left out when it is zero and the endpoints
  when the answer names none (DescribeQuorum before v2 has neither). Kafka reads the cluster id
  with DescribeCluster, which kipling does not serve: it is read with Metadata instead, and the
  ClusterId line is left out where that cannot tell it (a listener that does not serve Metadata,
  such as a controller's, or a null cluster id).
* ``--replication``: Kafka's table ``NodeId DirectoryId LogEndOffset Lag LastFetchTimestamp
  LastCaughtUpTimestamp Status``, each cell padded to its column's width and followed by a tab, the
  leader first, then the other voters (Follower), then the observers (Observer). Lag is the
  leader's log end offset minus the replica's; an unknown timestamp is -1; ``--human-readable``
  prints timestamps as ``N ms ago``.

The formatting functions take the decoded response (:func:`quorum_info`), so they are tested without a
server. A broker error (NOT_LEADER_OR_FOLLOWER, ...), a server that does not serve DescribeQuorum or
one that cannot be reached prints one line on stderr and exits with status 1.
"""

from __future__ import annotations

import argparse
import sys
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TextIO

from client.admin import AdminClient
from client.connection import KafkaConnection
from client.errors import (
    ClientError,
    ConnectError,
    KafkaResponseError,
    UnsupportedApiVersionError,
    error_code,
)
from client.security import ClientSecurity
from protocol.api_keys import ApiKey
from protocol.error_codes import ErrorCode
from protocol.sentinels import ZERO_UUID
from tools.commands.arguments import add_command_config_argument, command_security
from tools.commands.topics import (
    CONNECT_TIMEOUT_S,
    REQUEST_TIMEOUT_S,
    BrokerAddress,
    bootstrap_servers,
    configure_tool_logging,
    error_text,
    kafka_uuid,
    run_async,
)

METADATA_TOPIC = "__cluster_metadata"
METADATA_PARTITION = 0
CLIENT_ID = "kipling-metadata-quorum"
LABEL_WIDTH = 24
"""kafka-metadata-quorum.sh pads ``Label:`` to 24 columns."""
UNKNOWN = -1
REPLICATION_HEADERS = (
    "NodeId",
    "DirectoryId",
    "LogEndOffset",
    "Lag",
    "LastFetchTimestamp",
    "LastCaughtUpTimestamp",
    "Status",
)


class QuorumCommandError(Exception):
    """A failure printed as its message alone (Kafka's TerseException)."""


@dataclass(frozen=True)
class Endpoint:
    """One listener of a voter, as DescribeQuorum v2's ``nodes`` lists it."""

    listener: str
    host: str
    port: int

    def __str__(self) -> str:
        """Kafka's RaftVoterEndpoint: ``NAME://host:port``, an IPv6 host in brackets."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.listener}://{host}:{self.port}"


@dataclass(frozen=True)
class ReplicaState:
    """One voter or observer; a timestamp the answer leaves at -1 (or lacks, before v1) is None."""

    replica_id: int
    directory_id: uuid.UUID
    log_end_offset: int
    last_fetch_timestamp: int | None
    last_caught_up_timestamp: int | None


@dataclass(frozen=True)
class QuorumInfo:
    """DescribeQuorum's answer for ``__cluster_metadata-0`` (Kafka's admin ``QuorumInfo``)."""

    leader_id: int
    leader_epoch: int
    high_watermark: int
    voters: tuple[ReplicaState, ...]
    observers: tuple[ReplicaState, ...]
    nodes: Mapping[int, tuple[Endpoint, ...]]

    def leader(self) -> ReplicaState:
        for voter in self.voters:
            if voter.replica_id == self.leader_id:
                return voter
        voters = ",".join(str(v.replica_id) for v in self.voters)
        raise QuorumCommandError(f"The leader {self.leader_id} is not among the voters [{voters}]")


# -- the request and its answer ----------------------------------------------------------------------


def describe_quorum_request() -> dict[str, Any]:
    return {
        "topics": [{"topic_name": METADATA_TOPIC, "partitions": [{"partition_index": METADATA_PARTITION}]}]
    }


def _timestamp(value: int) -> int | None:
    return None if value == UNKNOWN else value


def _replica(state: Mapping[str, Any]) -> ReplicaState:
    return ReplicaState(
        replica_id=state["replica_id"],
        directory_id=state.get("replica_directory_id") or ZERO_UUID,
        log_end_offset=state["log_end_offset"],
        last_fetch_timestamp=_timestamp(state.get("last_fetch_timestamp", UNKNOWN)),
        last_caught_up_timestamp=_timestamp(state.get("last_caught_up_timestamp", UNKNOWN)),
    )


def quorum_info(response: Mapping[str, Any]) -> QuorumInfo:
    """The quorum described by a decoded DescribeQuorum response (any version).

    Raises :class:`KafkaResponseError` for a top-level or partition error, with the answer's error
    message when it has one (v2), and :class:`QuorumCommandError` when it does not describe
    ``__cluster_metadata-0``.
    """
    code = error_code(response["error_code"])
    if code is not ErrorCode.NONE:
        raise KafkaResponseError(code, response.get("error_message"), context="DescribeQuorum")
    partition = next(
        (
            p
            for t in response["topics"]
            if t["topic_name"] == METADATA_TOPIC
            for p in t["partitions"]
            if p["partition_index"] == METADATA_PARTITION
        ),
        None,
    )
    if partition is None:
        raise QuorumCommandError(
            f"The DescribeQuorum response does not describe {METADATA_TOPIC}-{METADATA_PARTITION}"
        )
    code = error_code(partition["error_code"])
    if code is not ErrorCode.NONE:
        raise KafkaResponseError(code, partition.get("error_message"), context="DescribeQuorum")
    return QuorumInfo(
        leader_id=partition["leader_id"],
        leader_epoch=partition["leader_epoch"],
        high_watermark=partition["high_watermark"],
        voters=tuple(_replica(v) for v in partition["current_voters"]),
        observers=tuple(_replica(o) for o in partition["observers"]),
        nodes={
            node["node_id"]: tuple(Endpoint(li["name"], li["host"], li["port"]) for li in node["listeners"])
            for node in response.get("nodes") or ()
        },
    )


# -- --status -----------------------------------------------------------------------------------------


def _node_text(replica: ReplicaState, endpoints: Sequence[Endpoint]) -> str:
    """Kafka 4's ``{"id": 1, "directoryId": "...", "endpoints": ["CONTROLLER://h:9093"]}``."""
    text = f'{{"id": {replica.replica_id}'
    if replica.directory_id != ZERO_UUID:
        text += f', "directoryId": "{kafka_uuid(replica.directory_id)}"'
    if endpoints:
        text += ', "endpoints": [' + ", ".join(f'"{e}"' for e in endpoints) + "]"
    return text + "}"


def _replicas_text(info: QuorumInfo, replicas: Sequence[ReplicaState]) -> str:
    return "[" + ", ".join(_node_text(r, info.nodes.get(r.replica_id, ())) for r in replicas) + "]"


def max_follower_lag(info: QuorumInfo) -> tuple[int, int]:
    """(MaxFollowerLag, MaxFollowerLagTimeMs) as Kafka computes them: the voter with the lowest log
    end offset (the first such in the answer), its offset and last-caught-up distance to the leader."""
    leader = info.leader()
    slowest = min(info.voters, key=lambda v: v.log_end_offset)
    lag = leader.log_end_offset - slowest.log_end_offset
    if slowest.replica_id == leader.replica_id:
        return lag, 0
    if leader.last_caught_up_timestamp is None or slowest.last_caught_up_timestamp is None:
        return lag, UNKNOWN
    return lag, leader.last_caught_up_timestamp - slowest.last_caught_up_timestamp


def format_status(info: QuorumInfo, cluster_id: str | None) -> str:
    """kafka-metadata-quorum.sh's ``describe --status``; no ClusterId line when ``cluster_id`` is None."""
    lag, lag_time_ms = max_follower_lag(info)
    fields: list[tuple[str, object]] = [] if cluster_id is None else [("ClusterId", cluster_id)]
    fields += [
        ("LeaderId", info.leader_id),
        ("LeaderEpoch", info.leader_epoch),
        ("HighWatermark", info.high_watermark),
        ("MaxFollowerLag", lag),
        ("MaxFollowerLagTimeMs", lag_time_ms),
        ("CurrentVoters", _replicas_text(info, info.voters)),
        ("CurrentObservers", _replicas_text(info, info.observers)),
    ]
    return "".join(f"{label + ':':<{LABEL_WIDTH}}{value}\n" for label, value in fields)


# -- --replication ------------------------------------------------------------------------------------


def relative_time_ms(timestamp_ms: int, now_ms: int, what: str) -> int:
    """Milliseconds from ``timestamp_ms`` to ``now_ms``; refused, as Kafka does, for a timestamp
    that is not after the epoch or lies in the future (the clocks disagree)."""
    if not 0 < timestamp_ms <= now_ms:
        raise QuorumCommandError(
            f"Error while computing relative time, possible drift in system clock. Current timestamp "
            f"is {now_ms}, {what} timestamp is {timestamp_ms}"
        )
    return now_ms - timestamp_ms


def _timestamp_cell(timestamp_ms: int | None, now_ms: int | None, what: str) -> str:
    if timestamp_ms is None:
        return str(UNKNOWN)
    if now_ms is None:
        return str(timestamp_ms)
    return f"{relative_time_ms(timestamp_ms, now_ms, what)} ms ago"


def replication_rows(info: QuorumInfo, *, now_ms: int | None = None) -> list[list[str]]:
    """The table's rows: the leader, the other voters, the observers. With ``now_ms`` the timestamps
    read ``N ms ago`` (``--human-readable``)."""
    leader = info.leader()
    groups = (
        ("Leader", [leader]),
        ("Follower", [v for v in info.voters if v.replica_id != leader.replica_id]),
        ("Observer", list(info.observers)),
    )
    return [
        [
            str(replica.replica_id),
            kafka_uuid(replica.directory_id),
            str(replica.log_end_offset),
            str(leader.log_end_offset - replica.log_end_offset),
            _timestamp_cell(replica.last_fetch_timestamp, now_ms, "last fetch"),
            _timestamp_cell(replica.last_caught_up_timestamp, now_ms, "last caught up"),
            status,
        ]
        for status, replicas in groups
        for replica in replicas
    ]


def pretty_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Kafka's ToolsUtils.prettyPrintTable: every cell padded to its column's width, then a tab."""
    widths = [max([len(h), *(len(row[i]) for row in rows)]) for i, h in enumerate(headers)]
    return "".join(
        "".join(cell.ljust(width) + "\t" for cell, width in zip(line, widths)) + "\n"
        for line in (headers, *rows)
    )


def format_replication(info: QuorumInfo, *, now_ms: int | None = None) -> str:
    """kafka-metadata-quorum.sh's ``describe --replication`` (``--human-readable`` with ``now_ms``)."""
    return pretty_table(REPLICATION_HEADERS, replication_rows(info, now_ms=now_ms))


# -- talking to the server ----------------------------------------------------------------------------


async def connect(
    servers: Sequence[BrokerAddress],
    *,
    connect_timeout_s: float = CONNECT_TIMEOUT_S,
    request_timeout_s: float = REQUEST_TIMEOUT_S,
    security: ClientSecurity | None = None,
) -> KafkaConnection:
    """A connection to the first of ``servers`` that accepts one; ConnectError naming each failure."""
    errors = []
    for address in servers:
        try:
            return await KafkaConnection.open(
                address.host,
                address.port,
                client_id=CLIENT_ID,
                connect_timeout_s=connect_timeout_s,
                request_timeout_s=request_timeout_s,
                security=security,
            )
        except ConnectError as exc:
            errors.append(str(exc))
    raise ConnectError("; ".join(errors))


async def describe_quorum(connection: KafkaConnection) -> QuorumInfo:
    """Send DescribeQuorum (the highest version both sides speak, at most 2) and read the answer."""
    version = connection.version_for(ApiKey.DESCRIBE_QUORUM)
    response = await connection.request(ApiKey.DESCRIBE_QUORUM, version, describe_quorum_request())
    return quorum_info(response)


async def cluster_id(connection: KafkaConnection) -> str | None:
    """The cluster id from Metadata, or None where the server does not serve it."""
    if ApiKey.METADATA not in connection.api_versions:
        return None
    try:
        return (await AdminClient(connection).metadata([])).cluster_id
    except UnsupportedApiVersionError:
        return None


def _check(args: argparse.Namespace) -> None:
    """kafka-metadata-quorum.sh's checks of describe's options, with its messages."""
    if args.status and args.replication:
        raise QuorumCommandError(
            "Only one of --status or --replication should be specified with describe sub-command"
        )
    if not (args.status or args.replication):
        raise QuorumCommandError(
            "One of --status or --replication must be specified with describe sub-command"
        )
    if args.status and args.human_readable:
        raise QuorumCommandError("The option --human-readable is only supported along with --replication")


async def metadata_quorum_command(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Run ``kipling metadata-quorum`` with parsed arguments; the exit status."""
    try:
        _check(args)
        connection = await connect(
            args.bootstrap_server or args.bootstrap_controller, security=command_security(args)
        )
        try:
            if args.status:
                cluster = await cluster_id(connection)
                out.write(format_status(await describe_quorum(connection), cluster))
            else:
                now_ms = int(time.time() * 1000) if args.human_readable else None
                out.write(format_replication(await describe_quorum(connection), now_ms=now_ms))
        finally:
            connection.close()
            await connection.wait_closed()
    except QuorumCommandError as exc:
        err.write(f"{exc}\n")
        return 1
    except ClientError as exc:
        err.write(f"Error: {error_text(exc)}\n")
        return 1
    finally:
        out.flush()
    return 0


METADATA_QUORUM_DESCRIPTION = """\
Describe the KRaft metadata quorum, as Kafka's kafka-metadata-quorum.sh does, with the same output:
describe --status prints the leader, its epoch, the high watermark, the largest follower lag and the
voters and observers; describe --replication a table of every replica's log end offset, lag and
last fetch and catch-up times. It sends DescribeQuorum to the first reachable server given.

Errors (NOT_LEADER_OR_FOLLOWER, a server that does not serve DescribeQuorum or cannot be reached)
print one line on stderr and exit with status 1.
"""

METADATA_QUORUM_EPILOG = """\
Examples:
  kipling metadata-quorum --bootstrap-server 127.0.0.1:9092 describe --status
  kipling metadata-quorum --bootstrap-controller 127.0.0.1:9093 describe --replication --human-readable
"""


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "metadata-quorum",
        help="describe the KRaft metadata quorum (like kafka-metadata-quorum.sh)",
        description=METADATA_QUORUM_DESCRIPTION,
        epilog=METADATA_QUORUM_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    servers = p.add_mutually_exclusive_group(required=True)
    servers.add_argument(
        "--bootstrap-server",
        type=bootstrap_servers,
        metavar="HOST:PORT[,...]",
        help="brokers to connect to; the first reachable one answers",
    )
    servers.add_argument(
        "--bootstrap-controller",
        type=bootstrap_servers,
        metavar="HOST:PORT[,...]",
        help="controllers to connect to; the first reachable one answers",
    )
    add_command_config_argument(p)
    commands = p.add_subparsers(dest="quorum_command", metavar="COMMAND", required=True)
    describe = commands.add_parser("describe", help="describe the metadata quorum")
    describe.add_argument("--status", action="store_true", help="a short summary of the quorum's status")
    describe.add_argument(
        "--replication", action="store_true", help="each replica's replication progress, as a table"
    )
    describe.add_argument(
        "--human-readable", action="store_true", help="--replication: timestamps as 'N ms ago'"
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    configure_tool_logging()
    return run_async(metadata_quorum_command(args, sys.stdout, sys.stderr))


__all__ = [
    "Endpoint",
    "QuorumCommandError",
    "QuorumInfo",
    "ReplicaState",
    "cluster_id",
    "connect",
    "describe_quorum",
    "describe_quorum_request",
    "format_replication",
    "format_status",
    "max_follower_lag",
    "metadata_quorum_command",
    "pretty_table",
    "quorum_info",
    "register",
    "relative_time_ms",
    "replication_rows",
    "run",
]
