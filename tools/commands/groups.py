"""`kipling groups`: list, describe, reset and delete consumer groups and their offsets, like
kafka-consumer-groups.sh.

* ``--list``: ListGroups is sent to every broker of the cluster (each answers for the groups it
  coordinates); the union of the consumer groups (protocol type ``consumer`` or empty, as Kafka's admin
  client filters them) is printed, one group id per line.
* ``--describe --group G``: FindCoordinator for G, then DescribeGroups and OffsetFetch at the
  coordinator, and ListOffsets (latest) at each partition's leader; printed as Kafka's table
  ``GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG CONSUMER-ID HOST CLIENT-ID``. The member
  columns come from the members' assignments (the consumer protocol's Assignment bytes); a member
  without partitions gets a row of ``-``; partitions with a committed offset but no member follow.
  ``--members`` prints one row per member instead (``GROUP CONSUMER-ID [GROUP-INSTANCE-ID] HOST
  CLIENT-ID #PARTITIONS``, with ``--verbose`` also ``ASSIGNMENT`` as ``topic(0,1), other(2)``), and
  ``--state`` one row for the group (``GROUP COORDINATOR (ID) ASSIGNMENT-STRATEGY STATE #MEMBERS``),
  as kafka-consumer-groups.sh (3.6) prints them.
* ``--reset-offsets --group G (--topic T[:P,P]... | --all-topics) <scenario> (--dry-run | --execute)``:
  the new offsets (clamped to the partition's [earliest, latest]) are printed as
  ``GROUP TOPIC PARTITION NEW-OFFSET``; ``--execute`` commits them with OffsetCommit (generation -1,
  member id "", as Kafka's tool does for an inactive group). A group with members is refused.
* ``--delete --group G``: DeleteGroups at the coordinator.
* ``--delete-offsets --group G --topic T[:P,P]...``: OffsetDelete at the coordinator (KIP-496); a
  topic without partitions means all of its partitions (a topic that does not exist is a row of its
  own). Printed as Kafka's tool does: a line on the request, then ``TOPIC PARTITION STATUS`` per
  partition. An Empty group loses the offsets; a consumer group with members keeps those of the
  topics it subscribes to (GROUP_SUBSCRIBED_TO_TOPIC).

Errors are printed on stderr with the protocol error's name, and the status is 1.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TextIO

from client.connection import KafkaConnection
from client.errors import ClientError, KafkaResponseError, error_code
from client.fetch_session import TopicPartition
from client.offsets import list_offsets
from protocol import consumer_protocol
from protocol.api_keys import ApiKey
from protocol.error_codes import ErrorCode
from protocol.sentinels import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP
from tools.commands.arguments import command_security
from tools.commands.topics import (
    BrokerAddress,
    ClusterConnections,
    add_bootstrap_argument,
    configure_tool_logging,
    error_text,
    run_async,
)

MISSING = "-"
"""Kafka's MISSING_COLUMN_VALUE."""
GROUP_KEY_TYPE = 0
CONSUMER_PROTOCOL_TYPES = ("consumer", "")
COORDINATOR_RETRY_S = 0.2
COORDINATOR_ATTEMPTS = 25
"""FindCoordinator answers COORDINATOR_NOT_AVAILABLE while the offsets topic loads: retry for ~5 s."""
INACTIVE_STATES = ("Empty", "Dead")
REBALANCING_STATES = ("PreparingRebalance", "CompletingRebalance", "Assigning", "Reconciling")


class GroupCommandError(Exception):
    """A failure printed as ``Error: <message>`` with status 1."""


# -- the consumer protocol -----------------------------------------------------------------------


def decode_assignment(data: bytes | None) -> dict[str, list[int]]:
    """The partitions of a member's consumer protocol Assignment (user data ignored). Empty or
    undecodable bytes give no partitions: a member of a non-consumer group is shown without any."""
    if not data:
        return {}
    try:
        return consumer_protocol.decode_assignment(data).as_dict()
    except consumer_protocol.ConsumerProtocolError:
        return {}


def encode_assignment(partitions: Mapping[str, Sequence[int]], version: int = 0) -> bytes:
    """The inverse of :func:`decode_assignment` (null user data); for tests and tools."""
    return consumer_protocol.encode_assignment(consumer_protocol.Assignment.from_mapping(partitions), version)


# -- talking to the cluster ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Member:
    member_id: str
    client_id: str
    host: str
    assignment: dict[str, list[int]]
    group_instance_id: str | None = None


@dataclass(frozen=True, slots=True)
class GroupDescription:
    group_id: str
    state: str
    error: ErrorCode
    members: tuple[Member, ...]
    protocol: str = ""
    """The group's chosen protocol: the assignor's name for a consumer group (e.g. ``range``)."""


@dataclass(frozen=True, slots=True)
class Coordinator:
    """The broker that coordinates a group, as FindCoordinator names it."""

    node_id: int
    host: str
    port: int


class GroupAdmin:
    """The requests of the groups tool, over a :class:`ClusterConnections`."""

    def __init__(self, cluster: ClusterConnections) -> None:
        self.cluster = cluster

    async def list_groups(self) -> list[str]:
        metadata = await self.cluster.metadata([])
        names: set[str] = set()
        for broker in metadata.brokers:
            connection = await self.cluster.broker(broker.node_id)
            version = connection.version_for(ApiKey.LIST_GROUPS, wanted_max=4)
            response = await connection.request(ApiKey.LIST_GROUPS, version, {"states_filter": []})
            code = error_code(response.error_code)
            if code is not ErrorCode.NONE:
                raise KafkaResponseError(code, context=f"list groups at broker {broker.node_id}")
            names.update(g.group_id for g in response.groups if g.protocol_type in CONSUMER_PROTOCOL_TYPES)
        return sorted(names)

    async def find_coordinator(self, group: str) -> Coordinator:
        """``group``'s coordinator (retrying while it is not available yet)."""
        code = ErrorCode.NONE
        for _ in range(COORDINATOR_ATTEMPTS):
            connection = await self.cluster.any_connection()
            version = connection.version_for(ApiKey.FIND_COORDINATOR, wanted_max=3)
            response = await connection.request(
                ApiKey.FIND_COORDINATOR, version, {"key": group, "key_type": GROUP_KEY_TYPE}
            )
            code = error_code(response.error_code)
            if code is ErrorCode.NONE:
                return Coordinator(response.node_id, response.host, response.port)
            if not code.retriable:
                break
            await asyncio.sleep(COORDINATOR_RETRY_S)
        raise KafkaResponseError(code, context=f"find coordinator of group {group}")

    async def coordinator(self, group: str) -> KafkaConnection:
        """A connection to ``group``'s coordinator (retrying while it is not available yet)."""
        return await self.connect(await self.find_coordinator(group))

    async def connect(self, coordinator: Coordinator) -> KafkaConnection:
        return await self.cluster.connection_to(BrokerAddress(coordinator.host, coordinator.port))

    async def describe(self, coordinator: KafkaConnection, group: str) -> GroupDescription:
        version = coordinator.version_for(ApiKey.DESCRIBE_GROUPS, wanted_max=5)
        response = await coordinator.request(
            ApiKey.DESCRIBE_GROUPS, version, {"groups": [group], "include_authorized_operations": False}
        )
        described = response.groups[0]
        members = tuple(
            Member(
                m.member_id,
                m.client_id,
                m.client_host,
                decode_assignment(m.member_assignment),
                getattr(m, "group_instance_id", None),
            )
            for m in described.members
        )
        return GroupDescription(
            group, described.group_state, error_code(described.error_code), members, described.protocol_data
        )

    async def committed(self, coordinator: KafkaConnection, group: str) -> dict[TopicPartition, int]:
        """Every committed offset of ``group``."""
        version = coordinator.version_for(ApiKey.OFFSET_FETCH, wanted_max=7)
        response = await coordinator.request(
            ApiKey.OFFSET_FETCH, version, {"group_id": group, "topics": None, "require_stable": False}
        )
        code = error_code(response.error_code)
        if code is not ErrorCode.NONE:
            raise KafkaResponseError(code, context=f"fetch offsets of group {group}")
        out: dict[TopicPartition, int] = {}
        for topic in response.topics:
            for p in topic.partitions:
                if error_code(p.error_code) is ErrorCode.NONE and p.committed_offset >= 0:
                    out[TopicPartition(topic.name, p.partition_index)] = p.committed_offset
        return out

    async def partitions(self, topics: Iterable[str]) -> dict[str, list[int]]:
        """Each topic's partitions; GroupCommandError for a topic that does not exist."""
        names = sorted(set(topics))
        if not names:
            return {}
        metadata = await self.cluster.metadata(names)
        out = {}
        for name in names:
            topic = metadata.topics.get(name)
            if topic is None or topic.error is not ErrorCode.NONE:
                raise GroupCommandError(f"Topic '{name}' does not exist.")
            out[name] = sorted(p.partition for p in topic.partitions)
        return out

    async def offsets(self, tps: Iterable[TopicPartition], timestamp: int) -> dict[TopicPartition, int]:
        """The earliest or latest offset of each partition, asked of its leader (absent on an error)."""
        tps = list(dict.fromkeys(tps))
        if not tps:
            return {}
        metadata = await self.cluster.metadata(sorted({tp.topic for tp in tps}))
        by_leader: dict[int, dict[TopicPartition, int]] = {}
        for tp in tps:
            topic = metadata.topics.get(tp.topic)
            leader = (
                next((p.leader for p in topic.partitions if p.partition == tp.partition), -1) if topic else -1
            )
            if leader >= 0:
                by_leader.setdefault(leader, {})[tp] = timestamp
        out: dict[TopicPartition, int] = {}
        for leader, wanted in by_leader.items():
            answers = await list_offsets(await self.cluster.broker(leader), wanted)
            out.update({tp: a.offset for tp, a in answers.items() if a.ok})
        return out

    async def commit(
        self, coordinator: KafkaConnection, group: str, offsets: Mapping[TopicPartition, int]
    ) -> dict[TopicPartition, ErrorCode]:
        by_topic: dict[str, list[dict[str, object]]] = {}
        for tp, offset in offsets.items():
            by_topic.setdefault(tp.topic, []).append(
                {"partition_index": tp.partition, "committed_offset": offset, "committed_metadata": ""}
            )
        body = {
            "group_id": group,
            "generation_id_or_member_epoch": -1,
            "member_id": "",
            "group_instance_id": None,
            "topics": [{"name": name, "partitions": parts} for name, parts in by_topic.items()],
        }
        version = coordinator.version_for(ApiKey.OFFSET_COMMIT, wanted_max=8)
        response = await coordinator.request(ApiKey.OFFSET_COMMIT, version, body)
        return {
            TopicPartition(t.name, p.partition_index): error_code(p.error_code)
            for t in response.topics
            for p in t.partitions
        }

    async def delete(self, coordinator: KafkaConnection, group: str) -> ErrorCode:
        version = coordinator.version_for(ApiKey.DELETE_GROUPS)
        response = await coordinator.request(ApiKey.DELETE_GROUPS, version, {"groups_names": [group]})
        return error_code(response.results[0].error_code)

    async def delete_offsets(
        self, coordinator: KafkaConnection, group: str, tps: Sequence[TopicPartition]
    ) -> tuple[ErrorCode, dict[TopicPartition, ErrorCode]]:
        """OffsetDelete: the top-level error and each partition's (none when the top-level failed)."""
        by_topic: dict[str, list[dict[str, int]]] = {}
        for tp in tps:
            by_topic.setdefault(tp.topic, []).append({"partition_index": tp.partition})
        body = {"group_id": group, "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]}
        version = coordinator.version_for(ApiKey.OFFSET_DELETE)
        response = await coordinator.request(ApiKey.OFFSET_DELETE, version, body)
        partitions = {
            TopicPartition(t.name, p.partition_index): error_code(p.error_code)
            for t in response.topics
            for p in t.partitions
        }
        return error_code(response.error_code), partitions


# -- --describe ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class OffsetRow:
    group: str
    topic: str = MISSING
    partition: str = MISSING
    current: str = MISSING
    log_end: str = MISSING
    lag: str = MISSING
    consumer_id: str = MISSING
    host: str = MISSING
    client_id: str = MISSING


def offset_rows(
    description: GroupDescription,
    committed: Mapping[TopicPartition, int],
    log_ends: Mapping[TopicPartition, int],
) -> list[OffsetRow]:
    """Kafka's rows: members with the most partitions first (a member without any: one row of '-'),
    then the partitions with a committed offset that no member has."""
    group = description.group_id

    def row(tp: TopicPartition, member: Member | None) -> OffsetRow:
        current, end = committed.get(tp), log_ends.get(tp)
        lag = MISSING if current is None or end is None else str(max(end - current, 0))
        return OffsetRow(
            group,
            tp.topic,
            str(tp.partition),
            MISSING if current is None else str(current),
            MISSING if end is None else str(end),
            lag,
            *((member.member_id, member.host, member.client_id) if member else (MISSING,) * 3),
        )

    rows: list[OffsetRow] = []
    assigned: set[TopicPartition] = set()
    members = sorted(description.members, key=lambda m: -sum(len(p) for p in m.assignment.values()))
    for member in members:
        tps = sorted(TopicPartition(t, p) for t, parts in member.assignment.items() for p in parts)
        if not tps:
            rows.append(
                OffsetRow(group, consumer_id=member.member_id, host=member.host, client_id=member.client_id)
            )
        for tp in tps:
            assigned.add(tp)
            rows.append(row(tp, member))
    rows.extend(row(tp, None) for tp in sorted(set(committed) - assigned))
    return rows


def format_offset_rows(rows: Sequence[OffsetRow]) -> str:
    """kafka-consumer-groups.sh's table: group, topic, consumer id and host columns at least 15 wide."""
    group_w = max([15, *(len(r.group) for r in rows)])
    topic_w = max([15, *(len(r.topic) for r in rows)])
    consumer_w = max([15, *(len(r.consumer_id) for r in rows)])
    host_w = max([15, *(len(r.host) for r in rows)])

    def line(*cells: str) -> str:
        g, t, p, c, e, lag, cid, h, client = cells
        return (
            f"{g:<{group_w}} {t:<{topic_w}} {p:<10} {c:<15} {e:<15} {lag:<15} "
            f"{cid:<{consumer_w}} {h:<{host_w}} {client}"
        )

    out = [
        "",
        line(
            "GROUP",
            "TOPIC",
            "PARTITION",
            "CURRENT-OFFSET",
            "LOG-END-OFFSET",
            "LAG",
            "CONSUMER-ID",
            "HOST",
            "CLIENT-ID",
        ),
    ]
    out.extend(
        line(r.group, r.topic, r.partition, r.current, r.log_end, r.lag, r.consumer_id, r.host, r.client_id)
        for r in rows
    )
    return "\n".join(out) + "\n"


def format_member_rows(description: GroupDescription, *, verbose: bool = False) -> str:
    """kafka-consumer-groups.sh --members: a row per member; the GROUP-INSTANCE-ID column only when
    some member has one, the ASSIGNMENT column with ``verbose``. Trailing blanks are left out."""
    members = description.members
    group = description.group_id
    with_instance = any(m.group_instance_id for m in members)
    group_w = max([15, len(group)])
    consumer_w = max([15, *(len(m.member_id) for m in members)])
    instance_w = max([17, *(len(m.group_instance_id or "") for m in members)])
    host_w = max([15, *(len(m.host) for m in members)])
    client_w = max([15, *(len(m.client_id) for m in members)])

    def line(
        group_id: str, consumer: str, instance: str, host: str, client: str, count: str, more: str
    ) -> str:
        cells = f"{group_id:<{group_w}} {consumer:<{consumer_w}} "
        if with_instance:
            cells += f"{instance:<{instance_w}} "
        cells += f"{host:<{host_w}} {client:<{client_w}} {count:<15} "
        return (cells + more if verbose else cells).rstrip()

    out = [
        "",
        line("GROUP", "CONSUMER-ID", "GROUP-INSTANCE-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "ASSIGNMENT"),
    ]
    for m in members:
        count = sum(len(parts) for parts in m.assignment.values())
        out.append(
            line(group, m.member_id, m.group_instance_id or "", m.host, m.client_id, str(count), _assigned(m))
        )
    return "\n".join(out) + "\n"


def _assigned(member: Member) -> str:
    """``topic(0,1), other(2)``: Kafka's ASSIGNMENT column (``-`` for none)."""
    topics = [
        f"{t}({','.join(str(p) for p in sorted(parts))})" for t, parts in member.assignment.items() if parts
    ]
    return ", ".join(sorted(topics)) if topics else MISSING


def format_state(description: GroupDescription, coordinator: Coordinator) -> str:
    """kafka-consumer-groups.sh --state: the group, its coordinator ``host:port (id)``, the assignor,
    the state and the number of members (the first column as wide as the coordinator's, as Kafka's)."""
    where = f"{coordinator.host}:{coordinator.port} ({coordinator.node_id})"
    width = max(25, len(where))

    def line(*cells: object) -> str:
        group, node, strategy, state, members = (str(c) for c in cells)
        return f"{group:<{width}} {node:<25} {strategy:<20} {state:<15} {members}"

    head = line("GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS")
    row = line(description.group_id, where, description.protocol, description.state, len(description.members))
    return f"\n{head}\n{row}\n"


async def describe_group(
    admin: GroupAdmin, group: str, out: TextIO, err: TextIO, *, view: str = "offsets", verbose: bool = False
) -> int:
    """``--describe`` (``view`` offsets, members or state, as ``--offsets``/``--members``/``--state``)."""
    found = await admin.find_coordinator(group)
    coordinator = await admin.connect(found)
    description = await admin.describe(coordinator, group)
    if description.error is ErrorCode.GROUP_ID_NOT_FOUND or description.state == "Dead":
        raise GroupCommandError(f"Consumer group '{group}' does not exist.")
    if description.error is not ErrorCode.NONE:
        raise KafkaResponseError(description.error, context=f"describe group {group}")
    if description.state == "Empty":
        err.write(f"\nConsumer group '{group}' has no active members.\n")
    elif description.state in REBALANCING_STATES:
        err.write(f"\nWarning: Consumer group '{group}' is rebalancing.\n")
    if view == "state":
        out.write(format_state(description, found))
        return 0
    if view == "members":
        if description.members:
            out.write(format_member_rows(description, verbose=verbose))
        return 0
    committed = await admin.committed(coordinator, group)
    wanted = set(committed)
    for member in description.members:
        wanted.update(TopicPartition(t, p) for t, parts in member.assignment.items() for p in parts)
    log_ends = await admin.offsets(wanted, LATEST_TIMESTAMP)
    rows = offset_rows(description, committed, log_ends)
    if rows:
        out.write(format_offset_rows(rows))
    return 0


# -- --reset-offsets -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ResetScenario:
    kind: str
    """to-earliest, to-latest, to-offset or shift-by."""
    value: int = 0


def parse_topic_partitions(text: str) -> tuple[str, list[int] | None]:
    """``T`` (every partition) or ``T:P,P``; an argparse type."""
    topic, sep, parts = text.partition(":")
    if not topic:
        raise argparse.ArgumentTypeError(f"expected TOPIC[:P,P...], got {text!r}")
    if not sep:
        return topic, None
    try:
        return topic, [int(p) for p in parts.split(",") if p.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected TOPIC[:P,P...], got {text!r}") from None


def new_offsets(
    scenario: ResetScenario,
    tps: Sequence[TopicPartition],
    committed: Mapping[TopicPartition, int],
    earliest: Mapping[TopicPartition, int],
    latest: Mapping[TopicPartition, int],
) -> dict[TopicPartition, int]:
    """The offset each partition is reset to, clamped to [earliest, latest] as Kafka's tool does."""
    out = {}
    for tp in tps:
        if tp not in earliest or tp not in latest:
            raise GroupCommandError(f"Cannot read the offsets of partition {tp.topic}-{tp.partition}.")
        low, high = earliest[tp], latest[tp]
        if scenario.kind == "to-earliest":
            target = low
        elif scenario.kind == "to-latest":
            target = high
        elif scenario.kind == "to-offset":
            target = scenario.value
        else:
            current = committed.get(tp)
            if current is None:
                raise GroupCommandError(
                    f"Cannot shift offset for partition {tp.topic}-{tp.partition} since there is no current "
                    "committed offset"
                )
            target = current + scenario.value
        out[tp] = min(max(target, low), high)
    return out


def format_reset_rows(group: str, offsets: Mapping[TopicPartition, int]) -> str:
    fmt = "{:<30} {:<30} {:<10} {:<15}"
    lines = ["", fmt.format("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET")]
    lines.extend(fmt.format(group, tp.topic, tp.partition, offsets[tp]) for tp in sorted(offsets))
    return "\n".join(line.rstrip() for line in lines) + "\n"


async def reset_offsets(admin: GroupAdmin, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    group = args.group
    scenario = scenario_from(args)
    coordinator = await admin.coordinator(group)
    description = await admin.describe(coordinator, group)
    if description.error not in (ErrorCode.NONE, ErrorCode.GROUP_ID_NOT_FOUND):
        raise KafkaResponseError(description.error, context=f"describe group {group}")
    state = description.state or "Dead"
    if state not in INACTIVE_STATES:
        raise GroupCommandError(
            f"Assignments can only be reset if the group '{group}' is inactive, but the current state is "
            f"{state}."
        )
    committed = await admin.committed(coordinator, group)
    if args.all_topics:
        partitions = await admin.partitions({tp.topic for tp in committed})
        tps = [TopicPartition(t, p) for t, parts in partitions.items() for p in parts]
    else:
        partitions = await admin.partitions(topic for topic, _ in args.topic)
        tps = []
        for topic, chosen in args.topic:
            for p in partitions[topic] if chosen is None else chosen:
                if p not in partitions[topic]:
                    raise GroupCommandError(f"Partition {topic}-{p} does not exist.")
                tps.append(TopicPartition(topic, p))
    tps = list(dict.fromkeys(tps))
    earliest = await admin.offsets(tps, EARLIEST_TIMESTAMP)
    latest = await admin.offsets(tps, LATEST_TIMESTAMP)
    offsets = new_offsets(scenario, tps, committed, earliest, latest)
    if not args.execute and not args.dry_run:
        err.write(
            "WARN: No action will be performed as the --execute option is missing. In a future major "
            "release, the default behavior of this command will be to prompt the user before executing the "
            "reset rather than doing a dry run. You should add the --dry-run option explicitly if you are "
            "scripting this command and want to keep the current default behavior without prompting.\n"
        )
    if args.execute and offsets:
        failed = {tp: code for tp, code in (await admin.commit(coordinator, group, offsets)).items() if code}
        if failed:
            tp, code = next(iter(sorted(failed.items())))
            raise KafkaResponseError(code, context=f"commit offset of {tp.topic}-{tp.partition}")
    if offsets:
        out.write(format_reset_rows(group, offsets))
    return 0


def scenario_from(args: argparse.Namespace) -> ResetScenario:
    if args.to_earliest:
        return ResetScenario("to-earliest")
    if args.to_latest:
        return ResetScenario("to-latest")
    if args.to_offset is not None:
        return ResetScenario("to-offset", args.to_offset)
    if args.shift_by is not None:
        return ResetScenario("shift-by", args.shift_by)
    raise GroupCommandError(
        "One of the reset scopes should be defined: --to-earliest, --to-latest, --to-offset, --shift-by."
    )


# -- --delete ------------------------------------------------------------------------------------


async def delete_group(admin: GroupAdmin, group: str, out: TextIO) -> int:
    coordinator = await admin.coordinator(group)
    code = await admin.delete(coordinator, group)
    if code is ErrorCode.NONE:
        out.write(f"Deletion of requested consumer groups ('{group}') was successful.\n")
        return 0
    out.write(
        f"Deletion of some consumer groups failed:\n* Group '{group}' could not be deleted due to: "
        f"{code.name}: {code.description}\n"
    )
    return 1


# -- --delete-offsets ----------------------------------------------------------------------------

NOT_PROVIDED = -1
"""The partition of a row for a whole topic that could not be described (Kafka's "Not Provided")."""
PARTITION_LEVEL_ERRORS = (
    ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC,
    ErrorCode.TOPIC_AUTHORIZATION_FAILED,
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
)


def delete_offsets_message(group: str, topics: Sequence[str], code: ErrorCode) -> str:
    """The line kafka-consumer-groups.sh --delete-offsets prints about the request as a whole."""
    if code is ErrorCode.NONE:
        return f"Request succeed for deleting offsets with topic {', '.join(topics)} group {group}"
    if code is ErrorCode.INVALID_GROUP_ID:
        return f"Error: '{group}' is not valid."
    if code is ErrorCode.GROUP_ID_NOT_FOUND:
        return f"Error: '{group}' does not exist."
    if code is ErrorCode.GROUP_AUTHORIZATION_FAILED:
        return f"Error: Access to '{group}' is not authorized."
    if code is ErrorCode.NON_EMPTY_GROUP:
        return (
            f"Error: Deleting offsets of a consumer group '{group}' is forbidden if the group is not empty."
        )
    if code in PARTITION_LEVEL_ERRORS:
        return "Error: Encounter some partition level error, see the follow-up details:"
    return f"Error: Encounter some unknown error: {code.name}"


def format_delete_offsets_rows(results: Mapping[TopicPartition, ErrorCode]) -> str:
    """Kafka's ``TOPIC PARTITION STATUS`` table (30, 15 and 15 wide), one row per partition."""
    fmt = "{:<30} {:<15} {:<15}"
    lines = ["", fmt.format("TOPIC", "PARTITION", "STATUS")]
    for tp in sorted(results):
        code = results[tp]
        partition = str(tp.partition) if tp.partition >= 0 else "Not Provided"
        status = "Successful" if code is ErrorCode.NONE else f"Error: {code.name}: {code.description}"
        lines.append(fmt.format(tp.topic, partition, status))
    return "\n".join(line.rstrip() for line in lines) + "\n"


async def delete_offsets(admin: GroupAdmin, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """``--delete-offsets``: status 0 only when every partition's offset was deleted."""
    group = args.group
    results: dict[TopicPartition, ErrorCode] = {}
    tps: list[TopicPartition] = []
    whole = sorted({topic for topic, chosen in args.topic if chosen is None})
    if whole:
        metadata = await admin.cluster.metadata(whole)
        for name in whole:
            topic = metadata.topics.get(name)
            if topic is None or topic.error is not ErrorCode.NONE:
                missing = topic.error if topic is not None else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                results[TopicPartition(name, NOT_PROVIDED)] = missing
            else:
                tps += [TopicPartition(name, p.partition) for p in topic.partitions]
    tps += [TopicPartition(topic, p) for topic, chosen in args.topic if chosen is not None for p in chosen]
    tps = list(dict.fromkeys(tps))
    coordinator = await admin.coordinator(group)
    code, answered = await admin.delete_offsets(coordinator, group, tps)
    if code is ErrorCode.NONE:
        deleted = {tp: answered.get(tp, ErrorCode.UNKNOWN_SERVER_ERROR) for tp in tps}
        code = next((c for c in deleted.values() if c), ErrorCode.NONE)  # as the admin client's all()
    else:
        deleted = dict.fromkeys(tps, code)
    results.update(deleted)
    message = delete_offsets_message(group, [_topic_argument(t, chosen) for t, chosen in args.topic], code)
    if code is ErrorCode.NONE:
        out.write(f"{message}\n")
    else:
        err.write(f"\n{message}\n")
    out.write(format_delete_offsets_rows(results))
    return 1 if any(results.values()) else 0


def _topic_argument(topic: str, partitions: Sequence[int] | None) -> str:
    return topic if partitions is None else f"{topic}:{','.join(str(p) for p in partitions)}"


# -- the command ---------------------------------------------------------------------------------


GROUPS_DESCRIPTION = """\
List, describe, reset and delete consumer groups, as kafka-consumer-groups.sh does: --list prints
the groups of every broker, --describe prints each partition's committed offset, log end offset and
lag with the member that has it (--describe --members: each member's id, host, client id and
partition count, and with --verbose its partitions; --describe --state: the group's coordinator,
assignment strategy, state and member count), --reset-offsets moves an inactive group's committed
offsets, --delete removes a group that has no members, and --delete-offsets removes a group's
committed offsets of some topics (those a consumer group with members subscribes to are kept).
"""

GROUPS_EPILOG = """\
Examples:
  kipling groups --bootstrap-server 127.0.0.1:9092 --list
  kipling groups --bootstrap-server 127.0.0.1:9092 --describe --group g
  kipling groups --bootstrap-server 127.0.0.1:9092 --describe --group g --members --verbose
  kipling groups --bootstrap-server 127.0.0.1:9092 --describe --group g --state
  kipling groups --bootstrap-server 127.0.0.1:9092 --reset-offsets --group g --topic t:0,1 \\
      --to-earliest --execute
  kipling groups --bootstrap-server 127.0.0.1:9092 --delete --group g
  kipling groups --bootstrap-server 127.0.0.1:9092 --delete-offsets --group g --topic t --topic u:0,1
"""


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "groups",
        help="list, describe, reset and delete consumer groups (like kafka-consumer-groups.sh)",
        description=GROUPS_DESCRIPTION,
        epilog=GROUPS_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_bootstrap_argument(p)
    action = p.add_mutually_exclusive_group(required=True)
    action.add_argument("--list", action="store_true", help="list the consumer groups")
    action.add_argument("--describe", action="store_true", help="describe a group's offsets and members")
    action.add_argument("--reset-offsets", action="store_true", help="reset an inactive group's offsets")
    action.add_argument("--delete", action="store_true", help="delete a group without members")
    action.add_argument(
        "--delete-offsets", action="store_true", help="delete a group's committed offsets of some topics"
    )
    p.add_argument("--group", metavar="G", help="the consumer group")
    view = p.add_mutually_exclusive_group()
    view.add_argument(
        "--offsets", action="store_true", help="--describe: offsets and lag per partition (the default)"
    )
    view.add_argument("--members", action="store_true", help="--describe: the group's members")
    view.add_argument(
        "--state", action="store_true", help="--describe: coordinator, assignment strategy, state, #members"
    )
    p.add_argument("--verbose", action="store_true", help="--describe --members: each member's partitions")
    scope = p.add_mutually_exclusive_group()
    scope.add_argument(
        "--topic",
        action="append",
        type=parse_topic_partitions,
        metavar="T[:P,P]",
        help="--reset-offsets, --delete-offsets: a topic, or some of its partitions (repeatable)",
    )
    scope.add_argument(
        "--all-topics", action="store_true", help="--reset-offsets: every topic the group has offsets for"
    )
    how = p.add_mutually_exclusive_group()
    how.add_argument("--to-earliest", action="store_true", help="reset to the earliest offset")
    how.add_argument("--to-latest", action="store_true", help="reset to the latest offset")
    how.add_argument("--to-offset", type=int, metavar="N", help="reset to offset N")
    how.add_argument("--shift-by", type=int, metavar="N", help="move the committed offset by N (may be < 0)")
    run_mode = p.add_mutually_exclusive_group()
    run_mode.add_argument("--dry-run", action="store_true", help="only print the new offsets (default)")
    run_mode.add_argument("--execute", action="store_true", help="commit the new offsets")
    p.set_defaults(func=run, groups_parser=p)


def _check(args: argparse.Namespace) -> None:
    parser: argparse.ArgumentParser = args.groups_parser
    if (args.describe or args.reset_offsets or args.delete or args.delete_offsets) and not args.group:
        parser.error("--group is required with --describe, --reset-offsets, --delete and --delete-offsets")
    if args.reset_offsets and not (args.topic or args.all_topics):
        parser.error("--reset-offsets needs --topic or --all-topics")
    if args.delete_offsets and not args.topic:
        parser.error("--delete-offsets needs --topic (--all-topics is not accepted, as in Kafka's tool)")
    if not args.describe:
        for option in ("offsets", "members", "state", "verbose"):
            if getattr(args, option):
                parser.error(f"--{option} can only be used with --describe")


async def groups_command(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Run ``kipling groups`` with parsed arguments; the exit status."""
    cluster = ClusterConnections(
        args.bootstrap_server, client_id="kipling-consumer-groups", security=command_security(args)
    )
    admin = GroupAdmin(cluster)
    try:
        if args.list:
            for name in await admin.list_groups():
                out.write(name + "\n")
            return 0
        if args.describe:
            view = "members" if args.members else "state" if args.state else "offsets"
            return await describe_group(admin, args.group, out, err, view=view, verbose=args.verbose)
        if args.reset_offsets:
            return await reset_offsets(admin, args, out, err)
        if args.delete_offsets:
            return await delete_offsets(admin, args, out, err)
        return await delete_group(admin, args.group, out)
    except GroupCommandError as exc:
        err.write(f"\nError: {exc}\n")
        return 1
    except ClientError as exc:
        err.write(f"\nError: Executing consumer group command failed due to {error_text(exc)}\n")
        return 1
    finally:
        out.flush()
        await cluster.close()


def run(args: argparse.Namespace) -> int:
    _check(args)
    configure_tool_logging()
    return run_async(groups_command(args, sys.stdout, sys.stderr))


__all__ = [
    "Coordinator",
    "GroupAdmin",
    "GroupCommandError",
    "OffsetRow",
    "ResetScenario",
    "decode_assignment",
    "delete_offsets_message",
    "encode_assignment",
    "format_delete_offsets_rows",
    "format_member_rows",
    "format_offset_rows",
    "format_reset_rows",
    "format_state",
    "groups_command",
    "new_offsets",
    "offset_rows",
    "register",
    "run",
]
