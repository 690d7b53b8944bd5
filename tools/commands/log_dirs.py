"""`kipling log-dirs`: the log directories of brokers and the partitions in them, as Kafka's
kafka-log-dirs.sh (``LogDirsCommand``) prints them.

``--describe`` asks every broker of the cluster (or those of ``--broker-list``) with DescribeLogDirs
for all partitions, keeps those of ``--topic-list`` (all when absent), and prints::

    Querying brokers for log directories information
    Received log directory information from brokers 1,2,3
    {"version":1,"brokers":[{"broker":1,"logDirs":[{"logDir":"/data","error":null,
     "partitions":[{"partition":"t-0","size":1234,"offsetLag":0,"isFuture":false}]}]}]}

(the JSON on one line). A log dir's ``error`` is the name of Kafka's exception class for its error
(``org.apache.kafka.common.errors.KafkaStorageException`` for an offline dir), else null. Brokers,
and partitions within a log dir, are in order; Kafka's order is its hash maps'.

A broker of ``--broker-list`` that the cluster does not have, a broker that cannot be reached or
that answers an error prints one line on stderr and exits 1.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TextIO

from client.admin import AdminClient, LogDirDescription
from client.errors import ClientError
from protocol.error_codes import ErrorCode
from tools.commands.arguments import add_command_config_argument, command_security
from tools.commands.topics import (
    ClusterConnections,
    bootstrap_servers,
    configure_tool_logging,
    error_text,
    run_async,
)

OUTPUT_VERSION = 1
EXCEPTION_CLASSES = {
    ErrorCode.KAFKA_STORAGE_ERROR: "org.apache.kafka.common.errors.KafkaStorageException",
    ErrorCode.UNKNOWN_SERVER_ERROR: "org.apache.kafka.common.errors.UnknownServerException",
    ErrorCode.CLUSTER_AUTHORIZATION_FAILED: "org.apache.kafka.common.errors.ClusterAuthorizationException",
}
"""Kafka's exception class for the errors a log dir can have; another code prints its name."""


class LogDirsCommandError(Exception):
    """A failure printed as one line on stderr, with status 1."""


def _ids(ids: Iterable[int]) -> str:
    return ",".join(str(i) for i in sorted(ids))


def parse_topic_list(text: str) -> list[str]:
    """Kafka's ``splitAtCommasAndFilterOutEmpty``."""
    return [item for item in text.split(",") if item]


def parse_broker_list(text: str) -> list[int]:
    try:
        return [int(item) for item in parse_topic_list(text)]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected broker ids such as 0,1,2, got {text!r}") from None


def error_name(code: ErrorCode) -> str | None:
    if code is ErrorCode.NONE:
        return None
    return EXCEPTION_CLASSES.get(code, code.name)


def format_json(descriptions: Mapping[int, Mapping[str, LogDirDescription]], topics: Sequence[str]) -> str:
    """Kafka's ``formatAsJson``: per broker, per log dir, the partitions of ``topics`` (all if empty)."""
    wanted = set(topics)
    brokers: list[dict[str, Any]] = []
    for broker, dirs in sorted(descriptions.items()):
        log_dirs = []
        for path, description in dirs.items():
            partitions = [
                {
                    "partition": f"{tp.topic}-{tp.partition}",
                    "size": info.size,
                    "offsetLag": info.offset_lag,
                    "isFuture": info.is_future,
                }
                for tp, info in sorted(description.replicas.items())
                if not wanted or tp.topic in wanted
            ]
            log_dirs.append(
                {"logDir": path, "error": error_name(description.error), "partitions": partitions}
            )
        brokers.append({"broker": broker, "logDirs": log_dirs})
    return json.dumps({"version": OUTPUT_VERSION, "brokers": brokers}, separators=(",", ":"))


async def describe(
    cluster: ClusterConnections, broker_list: Sequence[int], out: TextIO
) -> tuple[list[int], dict[int, dict[str, LogDirDescription]]]:
    """The brokers asked and each one's log dirs (says on ``out`` when it starts asking)."""
    try:
        metadata = await cluster.metadata([])
    except ClientError as exc:
        raise LogDirsCommandError(f"Failed to list the cluster's brokers: {error_text(exc)}") from None
    existing = {b.node_id for b in metadata.brokers}
    missing = set(broker_list) - existing
    if missing:
        raise LogDirsCommandError(
            f"ERROR: The given brokers do not exist from --broker-list: {_ids(missing)}. "
            f"Current existent brokers: {_ids(existing)}"
        )
    asked = sorted(set(broker_list) if broker_list else existing)
    out.write("Querying brokers for log directories information\n")
    out.flush()
    described: dict[int, dict[str, LogDirDescription]] = {}
    for broker in asked:
        try:
            described[broker] = await AdminClient(await cluster.broker(broker)).describe_log_dirs(None)
        except ClientError as exc:
            raise LogDirsCommandError(
                f"Failed to describe the log dirs of broker {broker}: {error_text(exc)}"
            ) from None
    return asked, described


async def log_dirs_command(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Run ``kipling log-dirs`` with parsed arguments; the exit status."""
    cluster = ClusterConnections(
        args.bootstrap_server, client_id="log-dirs-tool", security=command_security(args)
    )
    try:
        asked, descriptions = await describe(cluster, args.broker_list, out)
        out.write(f"Received log directory information from brokers {_ids(asked)}\n")
        out.write(format_json(descriptions, args.topic_list) + "\n")
        return 0
    except LogDirsCommandError as exc:
        err.write(f"{exc}\n")
        return 1
    finally:
        out.flush()
        await cluster.close()


LOG_DIRS_DESCRIPTION = """\
This tool helps to query log directory usage on the specified brokers (as kafka-log-dirs.sh): each
broker's log directories, their errors, and the size, offset lag and future flag of every partition
held there, led or followed, printed as JSON.
"""

LOG_DIRS_EPILOG = """\
Examples:
  kipling log-dirs --bootstrap-server 127.0.0.1:9092 --describe
  kipling log-dirs --bootstrap-server 127.0.0.1:9092 --describe --topic-list t1,t2 --broker-list 1,2
"""


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "log-dirs",
        help="describe brokers' log directories and the partitions in them (like kafka-log-dirs.sh)",
        description=LOG_DIRS_DESCRIPTION,
        epilog=LOG_DIRS_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--bootstrap-server",
        required=True,
        type=bootstrap_servers,
        metavar="HOST:PORT[,...]",
        help="REQUIRED: the server(s) to use for bootstrapping",
    )
    add_command_config_argument(p)
    p.add_argument(
        "--describe",
        action="store_true",
        required=True,
        help="describe the specified log directories on the specified brokers",
    )
    p.add_argument(
        "--topic-list",
        type=parse_topic_list,
        default=[],
        metavar="TOPIC1,TOPIC2",
        help='the list of topics to be queried in the form "topic1,topic2,topic3"; all topics will be '
        "queried if no topic list is specified",
    )
    p.add_argument(
        "--broker-list",
        type=parse_broker_list,
        default=[],
        metavar="0,1,2",
        help='the list of brokers to be queried in the form "0,1,2"; all brokers in the cluster will be '
        "queried if no broker list is specified",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    configure_tool_logging()
    return run_async(log_dirs_command(args, sys.stdout, sys.stderr))


__all__ = [
    "LogDirsCommandError",
    "describe",
    "error_name",
    "format_json",
    "log_dirs_command",
    "parse_broker_list",
    "parse_topic_list",
    "register",
    "run",
]
