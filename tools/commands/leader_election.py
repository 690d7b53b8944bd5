"""``kipling leader-election``: Kafka's ``kafka-leader-election.sh`` (``LeaderElectionCommand``).

``--election-type PREFERRED|UNCLEAN`` (any case) and exactly one of ``--topic T --partition P``,
``--all-topic-partitions`` or ``--path-to-json-file F`` (``{"partitions": [{"topic": "t",
"partition": 0}, ...]}``). One ElectLeaders request goes to a broker of the cluster, which forwards
it to the controller. Prints Kafka's lines::

    Successfully completed leader election (PREFERRED) for partitions t-0, u-1
    Valid replica already elected for partitions t-1
    Error completing leader election (PREFERRED) for partition: t-2: EXCEPTION: MESSAGE

where EXCEPTION is Kafka's exception class (``org.apache.kafka.common.errors.
PreferredLeaderNotAvailableException``) and MESSAGE the controller's message (partitions in order;
Kafka's order is its hash sets'). Any failed partition makes the command print
``N replica(s) could not be elected`` on stderr and exit 1, as Kafka's does. A bad option, a bad
JSON file or an unreachable cluster is one line on stderr and exit 1.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from typing import TextIO

from client.admin import AdminClient, ElectionResult, TopicPartitionKey
from client.errors import ClientError
from metadata.controller.leader_election import ElectionType
from protocol.error_codes import ErrorCode
from tools.commands.arguments import add_command_config_argument, command_security
from tools.commands.topics import (
    ClusterConnections,
    bootstrap_servers,
    configure_tool_logging,
    error_text,
    run_async,
)

EXCEPTION_CLASSES = {
    ErrorCode.TOPIC_AUTHORIZATION_FAILED: "TopicAuthorizationException",
    ErrorCode.CLUSTER_AUTHORIZATION_FAILED: "ClusterAuthorizationException",
    ErrorCode.REQUEST_TIMED_OUT: "TimeoutException",
    ErrorCode.INVALID_TOPIC_EXCEPTION: "InvalidTopicException",
}
"""Kafka's exception classes whose names do not follow from the error's name."""
ERRORS_PACKAGE = "org.apache.kafka.common.errors"


class LeaderElectionCommandError(Exception):
    """A failure printed as one line on stderr, with status 1."""


def election_type(text: str) -> ElectionType:
    """``--election-type``: PREFERRED or UNCLEAN, in any case (Kafka's EnumConverter)."""
    try:
        return ElectionType[text.strip().upper()]
    except KeyError:
        raise argparse.ArgumentTypeError(
            f"Unrecognized value '{text}', expected one of: PREFERRED, UNCLEAN"
        ) from None


def exception_name(code: ErrorCode) -> str:
    """Kafka's exception class for ``code`` (``UNKNOWN_TOPIC_OR_PARTITION`` is
    ``org.apache.kafka.common.errors.UnknownTopicOrPartitionException``)."""
    name = EXCEPTION_CLASSES.get(code) or "".join(w.capitalize() for w in code.name.split("_")) + "Exception"
    return f"{ERRORS_PACKAGE}.{name}"


def parse_election_json(text: str) -> list[TopicPartitionKey]:
    """The partitions of a ``--path-to-json-file`` (Kafka's ``parseReplicaElectionData``), refusing
    duplicates as Kafka does."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        raise LeaderElectionCommandError("The input string is not a valid JSON") from None
    partitions = data.get("partitions") if isinstance(data, dict) else None
    if not isinstance(partitions, list):
        raise LeaderElectionCommandError('Replica election data is missing "partitions" field')
    out: list[TopicPartitionKey] = []
    for entry in partitions:
        topic = entry.get("topic") if isinstance(entry, dict) else None
        partition = entry.get("partition") if isinstance(entry, dict) else None
        if not isinstance(topic, str) or not isinstance(partition, int) or isinstance(partition, bool):
            raise LeaderElectionCommandError(f"Invalid partition entry {json.dumps(entry)}")
        out.append(TopicPartitionKey(topic, partition))
    duplicates = sorted({str(tp) for tp in out if out.count(tp) > 1})
    if duplicates:
        raise LeaderElectionCommandError(
            f"Replica election data contains duplicate partitions: {','.join(duplicates)}"
        )
    return out


def requested_partitions(args: argparse.Namespace) -> dict[str, list[int]] | None:
    """What to elect: one partition, every partition (None), or the JSON file's (Kafka's checks)."""
    chosen = [
        name
        for name, given in (
            ("topic", args.topic is not None),
            ("all-topic-partitions", args.all_topic_partitions),
            ("path-to-json-file", args.path_to_json_file is not None),
        )
        if given
    ]
    if len(chosen) != 1:
        raise LeaderElectionCommandError(
            "One and only one of the following options is required: "
            "--topic, --all-topic-partitions, --path-to-json-file"
        )
    if args.topic is not None and args.partition is None:
        raise LeaderElectionCommandError("Missing required option(s) [partition]")
    if args.partition is not None and args.topic is None:
        raise LeaderElectionCommandError("Option partition is only allowed if topic is used")
    if args.all_topic_partitions:
        return None
    if args.topic is not None:
        return {args.topic: [args.partition]}
    try:
        with open(args.path_to_json_file, encoding="utf-8") as f:
            listed = parse_election_json(f.read())
    except OSError as exc:
        raise LeaderElectionCommandError(
            f"Cannot read the JSON file {args.path_to_json_file}: {exc.strerror or exc}"
        ) from None
    by_topic: dict[str, list[int]] = {}
    for tp in listed:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return by_topic


def report_lines(kind: ElectionType, results: Mapping[TopicPartitionKey, ElectionResult]) -> list[str]:
    """Kafka's lines: the elected, those that needed no election, then one line per failure."""
    succeeded = sorted(tp for tp, r in results.items() if r.error is ErrorCode.NONE)
    noop = sorted(tp for tp, r in results.items() if r.error is ErrorCode.ELECTION_NOT_NEEDED)
    failed = sorted(
        (tp, r) for tp, r in results.items() if r.error not in (ErrorCode.NONE, ErrorCode.ELECTION_NOT_NEEDED)
    )
    lines = []
    if succeeded:
        lines.append(
            f"Successfully completed leader election ({kind.name}) for partitions {_joined(succeeded)}"
        )
    if noop:
        lines.append(f"Valid replica already elected for partitions {_joined(noop)}")
    for tp, result in failed:
        message = result.message or result.error.description
        lines.append(
            f"Error completing leader election ({kind.name}) for partition: {tp}: "
            f"{exception_name(result.error)}: {message}"
        )
    return lines


def _joined(partitions: Sequence[TopicPartitionKey]) -> str:
    return ", ".join(str(tp) for tp in partitions)


async def elect(
    cluster: ClusterConnections, kind: ElectionType, partitions: dict[str, list[int]] | None
) -> dict[TopicPartitionKey, ElectionResult]:
    """One ElectLeaders at some broker (it forwards to the controller); a broker that fails is
    dropped and the next one tried."""
    last: ClientError | None = None
    for _ in range(len(cluster.bootstrap) + 1):
        connection = await cluster.any_connection()
        try:
            return await AdminClient(connection).elect_leaders(int(kind), partitions)
        except ClientError as exc:
            last = exc
            cluster.forget(connection)
    assert last is not None
    raise last


async def leader_election_command(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Run ``kipling leader-election`` with parsed arguments; the exit status."""
    try:
        partitions = requested_partitions(args)
    except LeaderElectionCommandError as exc:
        err.write(f"{exc}\n")
        return 1
    cluster = ClusterConnections(
        args.bootstrap_server, client_id="kipling-leader-election", security=command_security(args)
    )
    try:
        results = await elect(cluster, args.election_type, partitions)
    except ClientError as exc:
        err.write(f"Leader election failed: {error_text(exc)}\n")
        return 1
    finally:
        await cluster.close()
    for line in report_lines(args.election_type, results):
        out.write(f"{line}\n")
    out.flush()
    failed = sum(
        1 for r in results.values() if r.error not in (ErrorCode.NONE, ErrorCode.ELECTION_NOT_NEEDED)
    )
    if failed:
        err.write(f"{failed} replica(s) could not be elected\n")
        return 1
    return 0


DESCRIPTION = """\
Elect partition leaders, as Kafka's kafka-leader-election.sh does: PREFERRED moves leadership back
to each partition's first replica when it is alive and in sync; UNCLEAN elects a live replica outside
the ISR of a partition that has no leader (records may be lost). The JSON file looks like
  {"partitions": [{"topic": "foo", "partition": 1}, {"topic": "foobar", "partition": 2}]}"""


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "leader-election",
        help="elect preferred or unclean partition leaders (like kafka-leader-election.sh)",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--bootstrap-server",
        type=bootstrap_servers,
        required=True,
        metavar="HOST:PORT[,...]",
        help="the server(s) to connect to",
    )
    add_command_config_argument(p)
    p.add_argument(
        "--election-type",
        type=election_type,
        required=True,
        metavar="PREFERRED|UNCLEAN",
        help="the type of election (any case)",
    )
    p.add_argument("--topic", help="the topic of the partition to elect a leader for (with --partition)")
    p.add_argument("--partition", type=int, help="the partition to elect a leader for (with --topic)")
    p.add_argument(
        "--all-topic-partitions",
        action="store_true",
        help="elect leaders for every partition of every topic",
    )
    p.add_argument(
        "--path-to-json-file",
        metavar="FILE",
        help="a JSON file listing the partitions to elect leaders for",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    configure_tool_logging()
    return run_async(leader_election_command(args, sys.stdout, sys.stderr))


__all__ = [
    "election_type",
    "exception_name",
    "leader_election_command",
    "parse_election_json",
    "register",
    "report_lines",
    "requested_partitions",
    "run",
]
