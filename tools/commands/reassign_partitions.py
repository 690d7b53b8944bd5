"""``kipling reassign-partitions``: Kafka's ``kafka-reassign-partitions.sh``.

Actions (exactly one), with Kafka's output lines:

* ``--generate --topics-to-move-json-file F --broker-list 1,2,3``: prints the current assignment of
  the topics in ``F`` (``{"topics": [{"topic": "foo"}], "version": 1}``) and a proposed one over the
  given brokers, as reassignment JSON. The proposal places replicas round-robin over the brokers in
  id order (kipling's topic placement; Kafka's starts at a random broker).
* ``--execute --reassignment-json-file F [--throttle B/s] [--additional]``: prints the current
  assignment (to roll back with), optionally sets the replication throttles, and starts the
  reassignments. With ``--throttle``, as Kafka: each moving partition's topic gets
  ``leader.replication.throttled.replicas`` (partition:broker for every source replica) and
  ``follower.replication.throttled.replicas`` (partition:broker for every new replica), and every
  broker taking part gets ``leader.`` and ``follower.replication.throttled.rate``, all through
  IncrementalAlterConfigs (a BROKER resource is sent to that broker, as Kafka's admin client does).
* ``--verify --reassignment-json-file F [--preserve-throttles]``: prints each partition's status;
  once no reassignment is in progress anywhere, removes the throttles (broker rates on every broker,
  the throttled-replicas lists of the file's topics).
* ``--cancel --reassignment-json-file F [--preserve-throttles]``: cancels the file's reassignments
  in progress (Kafka's choice of which: those not only adding replicas), then removes the throttles.
* ``--list``: the reassignments in progress.

A failure is reported as one line on stderr (Kafka prints it on stdout) and exit status 1.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TextIO

from client.admin import AdminClient, PartitionReassignment, TopicPartitionKey
from client.connection import KafkaConnection
from client.errors import ClientError, error_code
from metadata.controller.topic_rules import place
from protocol.api_keys import ApiKey
from protocol.error_codes import ErrorCode, KafkaError
from tools.commands.arguments import add_command_config_argument, command_security
from tools.commands.topics import (
    ClusterConnections,
    bootstrap_servers,
    configure_tool_logging,
    error_text,
    run_async,
)

__all__ = [
    "ReassignCommandError",
    "format_reassignment_json",
    "parse_reassignment_json",
    "parse_topics_json",
    "reassign_partitions_command",
    "register",
    "run",
]

ANY_LOG_DIR = "any"
LEADER_THROTTLED_RATE = "leader.replication.throttled.rate"
FOLLOWER_THROTTLED_RATE = "follower.replication.throttled.rate"
LEADER_THROTTLED_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_THROTTLED_REPLICAS = "follower.replication.throttled.replicas"
BROKER_RESOURCE, TOPIC_RESOURCE = 4, 2
SET, DELETE = 0, 1
CANNOT_EXECUTE_BECAUSE_OF_EXISTING_MESSAGE = (
    "Cannot execute because there is an existing partition assignment.  Use --additional to override "
    "this and create a new partition assignment in addition to the existing one. The --additional "
    "flag can also be used to change the throttle by resubmitting the current reassignment."
)
YOU_MUST_RUN_VERIFY_PERIODICALLY_MESSAGE = (
    "Warning: You must run --verify periodically, until the reassignment completes, to ensure the "
    "throttle is removed."
)

Assignment = dict[TopicPartitionKey, list[int]]


class ReassignCommandError(Exception):
    """A failure printed as one line on stderr, with status 1."""


# -- JSON ----------------------------------------------------------------------------------------------


def _load(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        raise ReassignCommandError("The input string is not a valid JSON") from None


def parse_topics_json(text: str) -> list[str]:
    """The topics of a --topics-to-move-json-file (Kafka's parseTopicsData), duplicates refused."""
    data = _load(text)
    if not isinstance(data, dict) or not isinstance(data.get("topics"), list):
        raise ReassignCommandError("Missing topics field in the JSON")
    version = data.get("version", 1)
    if version != 1:
        raise ReassignCommandError(f"Not supported version field value {version}")
    topics = []
    for entry in data["topics"]:
        if not isinstance(entry, dict) or not isinstance(entry.get("topic"), str):
            raise ReassignCommandError(f"Invalid topic entry {json.dumps(entry)}")
        topics.append(entry["topic"])
    duplicates = sorted({t for t in topics if topics.count(t) > 1})
    if duplicates:
        raise ReassignCommandError(
            f"List of topics to reassign contains duplicate entries: {', '.join(duplicates)}"
        )
    return topics


def parse_reassignment_json(text: str) -> Assignment:
    """The partitions and target replicas of a reassignment JSON file, with Kafka's checks
    (parsePartitionReassignmentData and parseExecuteAssignmentArgs)."""
    data = _load(text)
    if not isinstance(data, dict) or not isinstance(data.get("partitions"), list):
        raise ReassignCommandError("Missing partitions field in the JSON")
    version = data.get("version", 1)
    if version != 1:
        raise ReassignCommandError(f"Not supported version field value {version}")
    out: Assignment = {}
    duplicated: list[str] = []
    for entry in data["partitions"]:
        if not isinstance(entry, dict):
            raise ReassignCommandError(f"Invalid partition entry {json.dumps(entry)}")
        topic, partition, replicas = entry.get("topic"), entry.get("partition"), entry.get("replicas")
        if not isinstance(topic, str) or not isinstance(partition, int) or not isinstance(replicas, list):
            raise ReassignCommandError(f"Invalid partition entry {json.dumps(entry)}")
        log_dirs = entry.get("log_dirs")
        if log_dirs is not None and any(d != ANY_LOG_DIR for d in log_dirs):
            raise ReassignCommandError("Moving replicas between log directories is not supported")
        tp = TopicPartitionKey(topic, partition)
        if tp in out:
            duplicated.append(str(tp))
        out[tp] = [int(r) for r in replicas]
    if not out:
        raise ReassignCommandError("Partition reassignment list cannot be empty")
    if any(not replicas for replicas in out.values()):
        raise ReassignCommandError("Partition replica list cannot be empty")
    if duplicated:
        raise ReassignCommandError(
            f"Partition reassignment contains duplicate topic partitions: {','.join(duplicated)}"
        )
    repeated = [
        f"{tp} contains multiple entries for {','.join(map(str, sorted({r for r in rs if rs.count(r) > 1})))}"
        for tp, rs in out.items()
        if len(set(rs)) != len(rs)
    ]
    if repeated:
        raise ReassignCommandError(
            f"Partition replica lists may not contain duplicate entries: {'. '.join(repeated)}"
        )
    return out


def _sorted(parts: Iterable[TopicPartitionKey]) -> list[TopicPartitionKey]:
    return sorted(parts, key=lambda tp: (tp.topic, tp.partition))


def format_reassignment_json(assignment: Mapping[TopicPartitionKey, Sequence[int]]) -> str:
    """Kafka's formatAsReassignmentJson: compact, partitions by topic then index."""
    partitions = [
        {
            "topic": tp.topic,
            "partition": tp.partition,
            "replicas": list(assignment[tp]),
            "log_dirs": [ANY_LOG_DIR] * len(assignment[tp]),
        }
        for tp in _sorted(assignment)
    ]
    return json.dumps({"version": 1, "partitions": partitions}, separators=(",", ":"))


def _joined(parts: Iterable[TopicPartitionKey]) -> str:
    return ",".join(str(tp) for tp in _sorted(parts))


# -- cluster reads ---------------------------------------------------------------------------------


async def current_assignment(admin: AdminClient, topics: Iterable[str]) -> Assignment:
    """Every partition's replicas for ``topics``; an unknown topic raises "Topic X not found."."""
    names = sorted(set(topics))
    described = await admin.describe_topics(names)
    out: Assignment = {}
    for name in names:
        topic = described.get(name)
        if topic is None or topic.error is not ErrorCode.NONE:
            raise ReassignCommandError(f"Topic {name} not found.")
        for p in topic.partitions:
            out[TopicPartitionKey(name, p.partition)] = list(p.replicas)
    return out


async def _partitions_assignment(admin: AdminClient, partitions: Iterable[TopicPartitionKey]) -> Assignment:
    wanted = set(partitions)
    everything = await current_assignment(admin, {tp.topic for tp in wanted})
    missing = wanted - set(everything)
    if missing:
        raise ReassignCommandError(
            f"Unable to find partition: {', '.join(str(tp) for tp in _sorted(missing))}"
        )
    return {tp: everything[tp] for tp in wanted}


async def _broker_ids(cluster: ClusterConnections) -> list[int]:
    """The brokers in the cluster's metadata (which also tells ``cluster`` where they listen)."""
    return sorted(b.node_id for b in (await cluster.metadata([])).brokers)


# -- throttles -------------------------------------------------------------------------------------


async def incremental_alter_configs(
    connection: KafkaConnection, resources: Mapping[tuple[int, str], Sequence[tuple[str, int, str | None]]]
) -> None:
    """IncrementalAlterConfigs of ``resources`` ((type, name) -> [(key, op, value)]) at one broker;
    any resource's error raises ReassignCommandError."""
    version = connection.version_for(ApiKey.INCREMENTAL_ALTER_CONFIGS)
    body = {
        "resources": [
            {
                "resource_type": rtype,
                "resource_name": name,
                "configs": [{"name": k, "config_operation": op, "value": v} for k, op, v in ops],
            }
            for (rtype, name), ops in resources.items()
        ],
        "validate_only": False,
    }
    response = await connection.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, version, body)
    for r in response.responses:
        code = error_code(r.error_code)
        if code is not ErrorCode.NONE:
            raise ReassignCommandError(
                f"Altering the configs of {r.resource_name or '<default>'} failed: "
                f"{code.name}: {r.error_message or code.description}"
            )


def _moves(
    ongoing: Mapping[TopicPartitionKey, PartitionReassignment], proposed: Assignment, current: Assignment
) -> dict[TopicPartitionKey, tuple[set[int], set[int]]]:
    """Kafka's calculateProposedMoveMap: (sources, destinations) per partition, the reassignments in
    progress included."""
    moves: dict[TopicPartitionKey, tuple[set[int], set[int]]] = {
        tp: (set(r.replicas) - set(r.adding_replicas), set(r.adding_replicas)) for tp, r in ongoing.items()
    }
    for tp, replicas in proposed.items():
        sources = moves[tp][0] if tp in moves else set(current[tp])
        moves[tp] = (sources, set(replicas) - sources)
    return moves


def _throttled_replicas(
    moves: Mapping[TopicPartitionKey, tuple[set[int], set[int]]],
) -> tuple[dict[str, str], dict[str, str]]:
    leader: dict[str, set[str]] = {}
    follower: dict[str, set[str]] = {}
    for tp, (sources, destinations) in moves.items():
        leader.setdefault(tp.topic, set()).update(f"{tp.partition}:{b}" for b in sources)
        follower.setdefault(tp.topic, set()).update(f"{tp.partition}:{b}" for b in destinations - sources)
    return (
        {t: ",".join(sorted(v)) for t, v in leader.items()},
        {t: ",".join(sorted(v)) for t, v in follower.items()},
    )


async def set_throttles(
    cluster: ClusterConnections,
    admin: AdminClient,
    moves: Mapping[TopicPartitionKey, tuple[set[int], set[int]]],
    rate: int,
    out: TextIO,
) -> None:
    leader, follower = _throttled_replicas(moves)
    topic_ops: dict[tuple[int, str], list[tuple[str, int, str | None]]] = {}
    for topic in sorted(set(leader) | set(follower)):
        ops = topic_ops.setdefault((TOPIC_RESOURCE, topic), [])
        if topic in leader:
            ops.append((LEADER_THROTTLED_REPLICAS, SET, leader[topic]))
        if topic in follower:
            ops.append((FOLLOWER_THROTTLED_REPLICAS, SET, follower[topic]))
    await incremental_alter_configs(await cluster.any_connection(), topic_ops)
    known = set(await _broker_ids(cluster))
    brokers = sorted({b for sources, destinations in moves.values() for b in sources | destinations})
    for broker in (b for b in brokers if b in known):
        ops_: list[tuple[str, int, str | None]] = [
            (LEADER_THROTTLED_RATE, SET, str(rate)),
            (FOLLOWER_THROTTLED_RATE, SET, str(rate)),
        ]
        await incremental_alter_configs(await cluster.broker(broker), {(BROKER_RESOURCE, str(broker)): ops_})
    out.write(f"The inter-broker throttle limit was set to {rate} B/s\n")


async def clear_throttles(
    cluster: ClusterConnections, admin: AdminClient, targets: Assignment, out: TextIO
) -> None:
    """Kafka's clearAllThrottles: the rates on every broker (and every target replica's broker),
    the throttled-replicas lists of the targets' topics."""
    known = set(await _broker_ids(cluster))
    brokers = sorted(known | {b for rs in targets.values() for b in rs})
    plural = "" if len(brokers) == 1 else "s"
    out.write(f"Clearing broker-level throttles on broker{plural} {','.join(map(str, brokers))}\n")
    for broker in (b for b in brokers if b in known):  # a broker that is down has nobody to ask
        ops: list[tuple[str, int, str | None]] = [
            (LEADER_THROTTLED_RATE, DELETE, None),
            (FOLLOWER_THROTTLED_RATE, DELETE, None),
        ]
        await incremental_alter_configs(await cluster.broker(broker), {(BROKER_RESOURCE, str(broker)): ops})
    topics = sorted({tp.topic for tp in targets})
    plural = "" if len(topics) == 1 else "s"
    out.write(f"Clearing topic-level throttles on topic{plural} {','.join(topics)}\n")
    await incremental_alter_configs(
        await cluster.any_connection(),
        {
            (TOPIC_RESOURCE, topic): [
                (LEADER_THROTTLED_REPLICAS, DELETE, None),
                (FOLLOWER_THROTTLED_REPLICAS, DELETE, None),
            ]
            for topic in topics
        },
    )


# -- actions ---------------------------------------------------------------------------------------


async def generate(
    cluster: ClusterConnections, admin: AdminClient, topics: list[str], broker_list: str, out: TextIO
) -> None:
    try:
        brokers = [int(b) for b in broker_list.split(",")]
    except ValueError:
        raise ReassignCommandError(f"Invalid broker list {broker_list!r}") from None
    duplicates = sorted({b for b in brokers if brokers.count(b) > 1})
    if duplicates:
        raise ReassignCommandError(
            f"Broker list contains duplicate entries: {', '.join(map(str, duplicates))}"
        )
    current = await current_assignment(admin, topics)
    known = set(await _broker_ids(cluster))
    usable = sorted(b for b in brokers if b in known)
    proposed: Assignment = {}
    for topic in sorted({tp.topic for tp in current}):
        parts = sorted(tp.partition for tp in current if tp.topic == topic)
        factor = len(current[TopicPartitionKey(topic, parts[0])])
        try:
            placed = place(len(parts), factor, usable)
        except KafkaError as exc:
            raise ReassignCommandError(exc.message or exc.code.description) from None
        for index, replicas in zip(parts, placed):
            proposed[TopicPartitionKey(topic, index)] = replicas
    out.write(f"Current partition replica assignment\n{format_reassignment_json(current)}\n\n")
    out.write(f"Proposed partition reassignment configuration\n{format_reassignment_json(proposed)}\n")


async def execute(
    cluster: ClusterConnections,
    admin: AdminClient,
    proposed: Assignment,
    out: TextIO,
    *,
    throttle: int,
    additional: bool,
) -> None:
    ongoing = await admin.list_partition_reassignments()
    if ongoing and not additional:
        raise ReassignCommandError(CANNOT_EXECUTE_BECAUSE_OF_EXISTING_MESSAGE)
    known = set(await _broker_ids(cluster))
    unknown = next((b for rs in proposed.values() for b in rs if b not in known), None)
    if unknown is not None:
        raise ReassignCommandError(f"Unknown broker id {unknown}")
    current = await _partitions_assignment(admin, proposed)
    out.write(
        f"Current partition replica assignment\n\n{format_reassignment_json(current)}\n\n"
        "Save this to use as the --reassignment-json-file option during rollback\n"
    )
    if throttle >= 0:
        out.write(f"{YOU_MUST_RUN_VERIFY_PERIODICALLY_MESSAGE}\n")
        await set_throttles(cluster, admin, _moves(ongoing, proposed, current), throttle, out)
    results = await admin.alter_partition_reassignments(proposed)
    errors = {tp: r for tp, r in results.items() if r[0] is not ErrorCode.NONE}
    if errors:
        lines = [f"{tp}: {message or code.description}" for tp, (code, message) in sorted(errors.items())]
        raise ReassignCommandError("Error reassigning partition(s):\n" + "\n".join(lines))
    plural = "" if len(proposed) == 1 else "s"
    out.write(f"Successfully started partition reassignment{plural} for {_joined(proposed)}\n")


async def verify(
    cluster: ClusterConnections,
    admin: AdminClient,
    targets: Assignment,
    out: TextIO,
    *,
    preserve_throttles: bool,
) -> bool:
    """Prints each partition's status; True when none of them is still in progress."""
    ongoing = await admin.list_partition_reassignments()
    settled = [tp for tp in targets if tp not in ongoing]
    current = await _partitions_assignment(admin, settled) if settled else {}
    lines = ["Status of partition reassignment:"]
    for tp in _sorted(targets):
        if tp in ongoing:
            lines.append(f"Reassignment of partition {tp} is still in progress.")
        elif current[tp] == targets[tp]:
            lines.append(f"Reassignment of partition {tp} is completed.")
        else:
            lines.append(
                f"There is no active reassignment of partition {tp}, but replica set is "
                f"{','.join(map(str, current[tp]))} rather than {','.join(map(str, targets[tp]))}."
            )
    out.write("\n".join(lines) + "\n")
    if not ongoing and not preserve_throttles:
        await clear_throttles(cluster, admin, targets, out)
    return not any(tp in ongoing for tp in targets)


async def cancel(
    cluster: ClusterConnections,
    admin: AdminClient,
    targets: Assignment,
    out: TextIO,
    *,
    preserve_throttles: bool,
) -> None:
    ongoing = await admin.list_partition_reassignments(list(targets))
    cancelling = [tp for tp, r in ongoing.items() if not r.adding_replicas or r.removing_replicas]
    if cancelling:
        results = await admin.alter_partition_reassignments(dict.fromkeys(cancelling))
        errors = {tp: r for tp, r in results.items() if r[0] is not ErrorCode.NONE}
        if errors:
            plural = "" if len(errors) == 1 else "s"
            lines = [f"{tp}: {message or code.description}" for tp, (code, message) in sorted(errors.items())]
            raise ReassignCommandError(
                f"Error cancelling partition reassignment{plural} for:\n" + "\n".join(lines)
            )
        plural = "" if len(cancelling) == 1 else "s"
        out.write(f"Successfully cancelled partition reassignment{plural} for: {_joined(cancelling)}\n")
    else:
        out.write("None of the specified partition reassignments are active.\n")
    out.write("None of the specified partition moves are active.\n")
    if not preserve_throttles:
        await clear_throttles(cluster, admin, targets, out)


async def list_reassignments(admin: AdminClient, out: TextIO) -> None:
    ongoing = await admin.list_partition_reassignments()
    if not ongoing:
        out.write("No partition reassignments found.\n")
        return
    lines = ["Current partition reassignments:"]
    for tp in _sorted(ongoing):
        r = ongoing[tp]
        line = f"{tp}: replicas: {','.join(map(str, r.replicas))}."
        if r.adding_replicas:
            line += f" adding: {','.join(map(str, r.adding_replicas))}."
        if r.removing_replicas:
            line += f" removing: {','.join(map(str, r.removing_replicas))}."
        lines.append(line)
    out.write("\n".join(lines) + "\n")


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError as exc:
        raise ReassignCommandError(f"Cannot read {path}: {exc.strerror or exc}") from None


async def reassign_partitions_command(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    cluster = ClusterConnections(
        args.bootstrap_server, client_id="kipling-reassign-partitions", security=command_security(args)
    )
    try:
        admin = AdminClient(await cluster.any_connection())
        if args.list:
            await list_reassignments(admin, out)
            return 0
        if args.generate:
            if not args.topics_to_move_json_file or not args.broker_list:
                raise ReassignCommandError("--generate needs --topics-to-move-json-file and --broker-list")
            topics = parse_topics_json(_read(args.topics_to_move_json_file))
            await generate(cluster, admin, topics, args.broker_list, out)
            return 0
        if not args.reassignment_json_file:
            raise ReassignCommandError("Missing required argument --reassignment-json-file")
        targets = parse_reassignment_json(_read(args.reassignment_json_file))
        if args.execute:
            await execute(cluster, admin, targets, out, throttle=args.throttle, additional=args.additional)
        elif args.verify:
            await verify(cluster, admin, targets, out, preserve_throttles=args.preserve_throttles)
        else:
            await cancel(cluster, admin, targets, out, preserve_throttles=args.preserve_throttles)
        return 0
    except ReassignCommandError as exc:
        err.write(f"{exc}\n")
        return 1
    except ClientError as exc:
        err.write(f"Error: {error_text(exc)}\n")
        return 1
    finally:
        out.flush()
        await cluster.close()


DESCRIPTION = """\
This tool helps to move topic partitions between replicas (like kafka-reassign-partitions.sh).
A reassignment JSON file looks like
  {"version": 1, "partitions": [{"topic": "foo", "partition": 0, "replicas": [1, 2, 3]}]}"""


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "reassign-partitions",
        help="move partitions between brokers (like kafka-reassign-partitions.sh)",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--bootstrap-server", type=bootstrap_servers, required=True, metavar="HOST:PORT[,...]",
        help="the server(s) to connect to",
    )  # fmt: skip
    add_command_config_argument(p)
    actions = p.add_mutually_exclusive_group(required=True)
    actions.add_argument("--generate", action="store_true", help="propose an assignment of the topics")
    actions.add_argument("--execute", action="store_true", help="start the reassignment in the JSON file")
    actions.add_argument("--verify", action="store_true", help="report the status; clear throttles when done")
    actions.add_argument("--cancel", action="store_true", help="cancel the reassignments in the JSON file")
    actions.add_argument("--list", action="store_true", help="list the reassignments in progress")
    p.add_argument("--topics-to-move-json-file", metavar="FILE", help="topics to move (--generate)")
    p.add_argument("--broker-list", metavar="1,2,3", help="brokers to move the topics to (--generate)")
    p.add_argument("--reassignment-json-file", metavar="FILE", help="the reassignment JSON")
    p.add_argument(
        "--throttle", type=int, default=-1, metavar="BYTES_PER_S",
        help="replication throttle for the moving replicas (--execute)",
    )  # fmt: skip
    p.add_argument("--additional", action="store_true", help="execute while other reassignments run")
    p.add_argument(
        "--preserve-throttles", action="store_true", help="leave the throttles (--verify, --cancel)"
    )
    p.add_argument("--disable-rack-aware", action="store_true", help="accepted for compatibility")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    configure_tool_logging()
    return run_async(reassign_partitions_command(args, sys.stdout, sys.stderr))
