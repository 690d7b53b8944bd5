"""``kipling delete-records``: Kafka's ``kafka-delete-records.sh``.

``--offset-json-file F`` names a JSON file ``{"partitions": [{"topic": "t", "partition": 0,
"offset": 5}, ...], "version": 1}``; each partition's records below its offset are deleted (its log
start offset moves there; -1 means its high watermark). Prints Kafka's lines::

    Executing records delete operation
    Records delete operation completed:
    partition: t-0\tlow_watermark: 5

A partition that failed prints ``partition: t-0\terror: NAME: description`` instead, and the command
then exits 1 (Kafka's tool exits 0). A bad file or an unreachable cluster is one line on stderr and
exit 1. Each request goes to the partition's leader; a leader that moved is asked again.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Mapping
from typing import Any, TextIO

from client.admin import DEFAULT_TIMEOUT_MS, TopicPartitionKey
from client.connection import KafkaConnection
from client.errors import ClientError, error_code
from protocol.api_keys import ApiKey
from protocol.error_codes import ErrorCode
from tools.commands.arguments import add_command_config_argument, command_security
from tools.commands.topics import (
    ClusterConnections,
    bootstrap_servers,
    configure_tool_logging,
    error_text,
    run_async,
)
from tools.commands.transactions import RETRY_ATTEMPTS, RETRY_BACKOFF_S, RETRY_ON_LEADER, TransactionsAdmin

SUPPORTED_VERSION = 1


class DeleteRecordsCommandError(Exception):
    """A failure printed as one line on stderr, with status 1."""


def parse_offset_json(text: str) -> dict[TopicPartitionKey, int]:
    """The partitions and offsets of an offset JSON file (Kafka's ``parseOffsetJsonStringWithoutDedup``),
    refusing duplicates as Kafka does."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        raise DeleteRecordsCommandError("The input string is not a valid JSON") from None
    if not isinstance(data, dict):
        raise DeleteRecordsCommandError("The input string is not a JSON object")
    version = data.get("version", SUPPORTED_VERSION)
    if version != SUPPORTED_VERSION:
        raise DeleteRecordsCommandError(f"Not supported version field value {version}")
    partitions = data.get("partitions")
    if not isinstance(partitions, list):
        raise DeleteRecordsCommandError("Missing partitions field")
    out: dict[TopicPartitionKey, int] = {}
    duplicates: list[str] = []
    for entry in partitions:
        tp, offset = _entry(entry)
        if tp in out:
            duplicates.append(str(tp))
        out[tp] = offset
    if duplicates:
        raise DeleteRecordsCommandError(
            f"Offset json file contains duplicate topic partitions: {','.join(dict.fromkeys(duplicates))}"
        )
    return out


def _entry(entry: Any) -> tuple[TopicPartitionKey, int]:
    if not isinstance(entry, dict):
        raise DeleteRecordsCommandError(f"Invalid partition entry {json.dumps(entry)}")
    topic, partition, offset = entry.get("topic"), entry.get("partition"), entry.get("offset")
    if not isinstance(topic, str) or not topic:
        raise DeleteRecordsCommandError(f"Missing or invalid topic in {json.dumps(entry)}")
    if not isinstance(partition, int) or isinstance(partition, bool):
        raise DeleteRecordsCommandError(f"Missing or invalid partition in {json.dumps(entry)}")
    if not isinstance(offset, int) or isinstance(offset, bool):
        raise DeleteRecordsCommandError(f"Missing or invalid offset in {json.dumps(entry)}")
    return TopicPartitionKey(topic, partition), offset


async def delete_records(
    cluster: ClusterConnections,
    offsets: Mapping[TopicPartitionKey, int],
    *,
    timeout_ms: int = DEFAULT_TIMEOUT_MS,
    backoff_s: float = RETRY_BACKOFF_S,
) -> dict[TopicPartitionKey, tuple[ErrorCode, int]]:
    """DeleteRecords at each partition's leader, asked again (a bounded number of times) where the
    leader moved or is not known yet; each partition's (error, low watermark)."""
    lookup = TransactionsAdmin(cluster)
    wanted = dict(offsets)
    out: dict[TopicPartitionKey, tuple[ErrorCode, int]] = {}
    for attempt in range(RETRY_ATTEMPTS):
        by_leader: dict[int, dict[TopicPartitionKey, int]] = {}
        for tp, leader in (await _leaders(lookup, list(wanted))).items():
            if isinstance(leader, ErrorCode):
                out[tp] = (leader, -1)
            else:
                by_leader.setdefault(leader, {})[tp] = wanted[tp]
        for leader, partitions in sorted(by_leader.items()):
            out.update(await delete_records_at(await cluster.broker(leader), partitions, timeout_ms))
        retry = {tp: offset for tp, offset in wanted.items() if out[tp][0] in RETRY_ON_LEADER}
        if not retry or attempt == RETRY_ATTEMPTS - 1:
            break
        wanted = retry
        await asyncio.sleep(backoff_s)
    return {tp: out[tp] for tp in offsets}  # in the file's order


async def delete_records_at(
    connection: KafkaConnection, offsets: Mapping[TopicPartitionKey, int], timeout_ms: int
) -> dict[TopicPartitionKey, tuple[ErrorCode, int]]:
    """DeleteRecords at one broker (the partitions' leader), at the highest version both sides
    speak: each partition's (error, low watermark). The broker waits up to ``timeout_ms`` for the
    followers; the client a little longer."""
    version = connection.version_for(ApiKey.DELETE_RECORDS)
    by_topic: dict[str, list[dict[str, int]]] = {}
    for tp, offset in offsets.items():
        by_topic.setdefault(tp.topic, []).append({"partition_index": tp.partition, "offset": offset})
    body = {
        "topics": [{"name": name, "partitions": parts} for name, parts in by_topic.items()],
        "timeout_ms": timeout_ms,
    }
    wait_s = max(connection.request_timeout_s, timeout_ms / 1000 + 5)
    response = await connection.request(ApiKey.DELETE_RECORDS, version, body, wait_s)
    out = {
        TopicPartitionKey(topic.name, p.partition_index): (error_code(p.error_code), p.low_watermark)
        for topic in response.topics
        for p in topic.partitions
    }
    for tp in offsets:
        out.setdefault(tp, (ErrorCode.UNKNOWN_SERVER_ERROR, -1))
    return out


async def _leaders(
    lookup: TransactionsAdmin, partitions: list[TopicPartitionKey]
) -> dict[TopicPartitionKey, int | ErrorCode]:
    """Each partition's leader, or the error that stands for it (a missing topic or partition:
    UNKNOWN_TOPIC_OR_PARTITION; no leader: LEADER_NOT_AVAILABLE)."""
    metadata = await lookup.cluster.metadata(sorted({tp.topic for tp in partitions}))
    out: dict[TopicPartitionKey, int | ErrorCode] = {}
    for tp in partitions:
        topic = metadata.topics.get(tp.topic)
        if topic is None or topic.error is not ErrorCode.NONE:
            out[tp] = topic.error if topic is not None else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            continue
        info = next((p for p in topic.partitions if p.partition == tp.partition), None)
        if info is None:
            out[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        else:
            out[tp] = info.leader if info.leader >= 0 else ErrorCode.LEADER_NOT_AVAILABLE
    return out


def report_lines(results: Mapping[TopicPartitionKey, tuple[ErrorCode, int]]) -> list[str]:
    lines = []
    for tp, (code, low_watermark) in results.items():
        if code is ErrorCode.NONE:
            lines.append(f"partition: {tp}\tlow_watermark: {low_watermark}")
        else:
            lines.append(f"partition: {tp}\terror: {code.name}: {code.description}")
    return lines


async def delete_records_command(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    try:
        with open(args.offset_json_file, encoding="utf-8") as f:
            offsets = parse_offset_json(f.read())
    except OSError as exc:
        err.write(f"Cannot read the offset JSON file {args.offset_json_file}: {exc.strerror or exc}\n")
        return 1
    except DeleteRecordsCommandError as exc:
        err.write(f"{exc}\n")
        return 1
    cluster = ClusterConnections(
        args.bootstrap_server, client_id="kipling-delete-records", security=command_security(args)
    )
    try:
        out.write("Executing records delete operation\n")
        results = await delete_records(cluster, offsets, timeout_ms=args.timeout_ms)
        out.write("Records delete operation completed:\n")
        for line in report_lines(results):
            out.write(f"{line}\n")
        return 0 if all(code is ErrorCode.NONE for code, _ in results.values()) else 1
    except ClientError as exc:
        err.write(f"Delete records failed: {error_text(exc)}\n")
        return 1
    finally:
        out.flush()
        await cluster.close()


DESCRIPTION = """\
Delete the records of partitions below the given offsets, as Kafka's kafka-delete-records.sh does.
The offset JSON file looks like
  {"partitions": [{"topic": "foo", "partition": 1, "offset": 1}], "version": 1}
and an offset of -1 deletes every record below the partition's high watermark."""


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "delete-records",
        help="delete records below an offset (like kafka-delete-records.sh)",
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
        "--offset-json-file",
        required=True,
        metavar="FILE",
        help="the JSON file with the offset per partition",
    )
    p.add_argument(
        "--timeout-ms",
        type=int,
        default=DEFAULT_TIMEOUT_MS,
        help="how long the leader waits for the followers to delete too (default 30000)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    configure_tool_logging()
    return run_async(delete_records_command(args, sys.stdout, sys.stderr))


__all__ = [
    "delete_records",
    "delete_records_at",
    "delete_records_command",
    "parse_offset_json",
    "register",
    "report_lines",
    "run",
]
