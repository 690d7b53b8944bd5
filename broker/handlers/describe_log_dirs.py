"""DescribeLogDirs (key 35, v1-v5): this broker's log directories and the partitions held in each.

Kafka's ``handleDescribeLogDirsRequest`` and ``ReplicaManager.describeLogDirs``:

* one result per directory of ``log.dirs`` (duplicates once; a separate ``metadata.log.dir`` is not
  one of them), named by its absolute path, in the order configured;
* a directory that cannot be read (gone, not a directory, an I/O error while listing it or asking
  its file system for its sizes) answers KAFKA_STORAGE_ERROR and nothing else, as Kafka answers for
  an offline log dir;
* otherwise every partition with a log there, led or followed, that the request asks about (topics
  null: all of them; else the listed partitions of the listed topics, unknown ones skipped), grouped
  by topic, a topic with no such partition left out. ``partition_size`` is the bytes of the log's
  segments (its ``.log`` files), ``offset_lag`` 0 and ``is_future_key`` false: Kafka's lag of a
  current log is max(HW - LEO, 0), never above 0, and kipling has no future logs (no
  AlterReplicaLogDirs). The metadata log ``__cluster_metadata-0`` is not listed (Kafka's Raft
  layer owns it, not its LogManager);
* v4 adds the volume's ``total_bytes`` and ``usable_bytes`` (``statvfs``: blocks, and blocks
  available to an unprivileged user, times the fragment size; Java's ``getTotalSpace`` and
  ``getUsableSpace``), v5 ``is_cordoned``, always false (kipling has no ``cordoned.log.dirs``).

There are no ACLs, so no CLUSTER_AUTHORIZATION_FAILED: the top-level error (v3+) is NONE.

**Sizes of followed partitions.** A followed partition's log belongs to a follower process; the
broker's LogManager keeps only an external entry for it (its log dir and offsets), and opening its
segments here would break the rule that one process owns a log's files. The broker therefore reads
the sizes from the directory listing: ``os.scandir`` of the partition directory and ``stat`` of each
``<offset>.log`` file, read-only, no file opened. Segments are written unbuffered and never
preallocated, so a ``.log`` file's size is its segment's size, as the owner sees it (segments
pending deletion, ``.deleted``, and a cleaner's ``.cleaned``/``.swap`` files are not counted, as
they are not segments of the log). Asking the follower processes over IPC would add a round trip
per process and a new message for a figure the file system already holds. A log the broker has
open reports its segments' sizes from memory. The listing and ``statvfs`` run on a worker thread,
so a slow disk does not stall the event loop.
"""

from __future__ import annotations

import asyncio
import os
import pathlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import structlog

from broker.handlers.authorization import ALLOW_EVERYTHING, cluster_allowed
from broker.handlers.base import Handler, RequestContext
from metadata.authorizer.standard import Authorizer
from metadata.log_topic import METADATA_TOPIC
from protocol.acl_types import AclOperation
from protocol.api_keys import ApiKey
from protocol.data import MessageData
from protocol.error_codes import ErrorCode, KafkaError
from storage.log import PartitionLog
from storage.log_manager import TopicPartition, partition_dir_name
from storage.segment import LOG_SUFFIX

_log = structlog.get_logger(__name__)

CURRENT_LOG_OFFSET_LAG = 0
"""Kafka's lag of a current (not future) log: max(HW - LEO, 0), which is 0."""


class HeldLogs(Protocol):
    """What the handler reads of the LogManager."""

    def held_logs(self) -> list[tuple[TopicPartition, pathlib.Path, PartitionLog | None]]: ...


@dataclass(frozen=True, slots=True)
class _Held:
    """A partition to report: its directory, and its size when the broker knows it (an open log)."""

    key: TopicPartition
    directory: pathlib.Path
    size: int | None


@dataclass(frozen=True, slots=True)
class LogDirInfo:
    """One log dir's answer, before encoding."""

    path: str
    error: ErrorCode
    sizes: dict[TopicPartition, int]
    total_bytes: int = -1
    usable_bytes: int = -1


class DescribeLogDirsHandler(Handler):
    api_key = ApiKey.DESCRIBE_LOG_DIRS
    min_version = 1
    max_version = 5

    def __init__(
        self, log_dirs: Sequence[pathlib.Path], logs: HeldLogs, authorizer: Authorizer = ALLOW_EVERYTHING
    ) -> None:
        """With an authorizer the requester needs DESCRIBE on the cluster (else the top-level
        CLUSTER_AUTHORIZATION_FAILED and no results), as in Kafka."""
        self._log_dirs = list(dict.fromkeys(os.path.abspath(d) for d in log_dirs))
        self._logs = logs
        self._authorizer = authorizer

    async def handle(self, ctx: RequestContext, request: MessageData) -> Any:
        if self._authorizer.enabled and not cluster_allowed(self._authorizer, ctx, AclOperation.DESCRIBE):
            raise KafkaError(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
        wanted = _wanted(request.topics)
        held: dict[str, list[_Held]] = {d: [] for d in self._log_dirs}
        for key, log_dir, log in self._logs.held_logs():
            if key[0] == METADATA_TOPIC or (wanted is not None and key not in wanted):
                continue
            entries = held.get(os.path.abspath(log_dir))
            if entries is not None:
                size = log.size_in_bytes if log is not None else None
                entries.append(_Held(key, log_dir / partition_dir_name(*key), size))
        infos = await asyncio.to_thread(describe_dirs, held)
        return {
            "throttle_time_ms": 0,
            "error_code": int(ErrorCode.NONE),
            "results": [_result(i) for i in infos],
        }

    def error_response(self, ctx: RequestContext, request: MessageData | None, code: ErrorCode) -> Any:
        return {"throttle_time_ms": 0, "error_code": int(code), "results": []}


def _wanted(topics: Iterable[MessageData] | None) -> set[TopicPartition] | None:
    if topics is None:
        return None
    return {(t.topic, index) for t in topics for index in t.partitions}


def describe_dirs(held: dict[str, list[_Held]]) -> list[LogDirInfo]:
    """Each log dir's sizes (run on a worker thread: it only reads the file system)."""
    return [describe_dir(path, entries) for path, entries in held.items()]


def describe_dir(path: str, entries: Sequence[_Held]) -> LogDirInfo:
    try:
        with os.scandir(path):  # opened, not read: gone or not a directory raises here
            pass
        stats = os.statvfs(path)
        sizes: dict[TopicPartition, int] = {}
        for entry in entries:
            size = entry.size if entry.size is not None else segments_size(entry.directory)
            if size is not None:
                sizes[entry.key] = size
    except OSError as exc:
        _log.warning("unable to describe log dir", log_dir=path, error=str(exc))
        return LogDirInfo(path, ErrorCode.KAFKA_STORAGE_ERROR, {})
    return LogDirInfo(
        path, ErrorCode.NONE, sizes, stats.f_blocks * stats.f_frsize, stats.f_bavail * stats.f_frsize
    )


def segments_size(directory: pathlib.Path) -> int | None:
    """The bytes of the ``.log`` segment files in a partition directory, from its listing; None when
    the directory is gone (the partition was deleted meanwhile). Other errors propagate."""
    total = 0
    try:
        with os.scandir(directory) as listing:
            for entry in listing:
                if entry.name.endswith(LOG_SUFFIX) and entry.is_file(follow_symlinks=False):
                    try:
                        total += entry.stat(follow_symlinks=False).st_size
                    except FileNotFoundError:
                        continue  # a segment deleted by retention between listing and stat
    except FileNotFoundError:
        return None
    return total


def _result(info: LogDirInfo) -> dict[str, Any]:
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for (topic, index), size in sorted(info.sizes.items()):
        by_topic.setdefault(topic, []).append(
            {
                "partition_index": index,
                "partition_size": size,
                "offset_lag": CURRENT_LOG_OFFSET_LAG,
                "is_future_key": False,
            }
        )
    return {
        "error_code": int(info.error),
        "log_dir": info.path,
        "topics": [{"name": name, "partitions": partitions} for name, partitions in by_topic.items()],
        "total_bytes": info.total_bytes,
        "usable_bytes": info.usable_bytes,
        "is_cordoned": False,
    }
