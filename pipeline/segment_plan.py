"""Plan an offline read of a broker's log directories (the ``kipling-segments`` format). Pure, no Spark.

``kipling-segments`` reads the partition directories a broker keeps under ``log.dirs`` straight from
disk, for backfills and forensics, without any broker running (or beside a running one, without
disturbing it). It is meant to be a drop-in for the same queries as ``kipling``: the same topic
selection options (``subscribe``, ``subscribePattern``, ``assign``), the same ``startingOffsets`` /
``endingOffsets`` JSON, ``includeHeaders``, ``failOnDataLoss``, and the same output schema. What a
Kafka consumer would see is the default:

* *earliest* is the partition's log start offset: the first segment's base offset, or the
  ``log-start-offset-checkpoint`` entry when records were deleted inside a segment (DeleteRecords);
* *latest* is the high watermark, read from the log dir's ``replication-offset-checkpoint`` and
  clamped to the log end offset as the broker clamps it when it loads the log. Records at or above it
  (not yet replicated to the ISR, or written after the broker last checkpointed) are not returned.
  ``includeUncommitted=true`` makes *latest* the log end offset instead: everything in the segments.
  The broker checkpoints high watermarks every ``replica.high.watermark.checkpoint.interval.ms``
  (5 s by default), so reading a live broker's directory shows its committed data with that delay.

Planning makes one task per segment file that holds offsets of the range: the segments of a partition
are known from their file names (``<20-digit base offset>.log``), segment ``i`` holds the offsets from
its base offset up to the next segment's, so choosing them needs no file to be read. The only file
read while planning is the newest segment's tail (from its last index entry) to find the log end offset.

Directories that are not live partitions are ignored: those being deleted (``<dir>.<uuid>-delete``),
set aside as strays (``-stray``) or being moved to another log dir (``-future``), exactly as the
broker's own loader ignores them (storage/log_manager.py).
"""

from __future__ import annotations

import json
import os
import pathlib
from bisect import bisect_right
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import structlog

from client.fetch_session import TopicPartition
from pipeline.errors import KiplingOptionError
from pipeline.offsets import DataLossReporter, OffsetRange, PartitionOffsets, plan_batch
from pipeline.options import (
    ENDING_OFFSETS,
    ENDING_OFFSETS_BY_TIMESTAMP,
    ENDING_TIMESTAMP,
    FAIL_ON_DATA_LOSS,
    INCLUDE_HEADERS,
    READ_KEYS,
    STARTING_OFFSETS,
    STARTING_OFFSETS_BY_TIMESTAMP,
    STARTING_TIMESTAMP,
    STRATEGY_KEYS,
    Assign,
    Earliest,
    Latest,
    OffsetSpec,
    SpecificOffsets,
    Subscribe,
    SubscribePattern,
    Subscription,
    lower_keys,
    parse_bool,
    parse_offset_spec,
    parse_subscription,
)
from pipeline.segment_files import SegmentTask, log_end_offset, log_file_name
from protocol.sentinels import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP
from storage.checkpoint import (
    LOG_START_OFFSET_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    OffsetCheckpointFile,
)
from storage.log_manager import DELETE_DIR_SUFFIX, STRAY_DIR_SUFFIX, parse_partition_dir_name
from storage.segment import LOG_SUFFIX, parse_base_offset

FORMAT = "kipling-segments"

_log = structlog.get_logger("kipling.pipeline.segment_plan")

FUTURE_DIR_SUFFIX = "-future"
"""Kafka's suffix for a replica being copied to another log dir (``ALTER_REPLICA_LOG_DIRS``)."""
IGNORED_DIR_SUFFIXES = (DELETE_DIR_SUFFIX, STRAY_DIR_SUFFIX, FUTURE_DIR_SUFFIX)

INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__cluster_metadata"})
"""Never matched by ``subscribePattern``, as Kafka's pattern subscriptions skip internal topics."""

# -- option keys (lower case, as Spark hands them over) ---------------------------------------------

PATH = "path"
PATHS = "paths"
"""What Spark sets for ``load([dir1, dir2])``: a JSON array of paths."""
INCLUDE_UNCOMMITTED = "includeuncommitted"
SEGMENT_KEYS = frozenset(
    {PATH, PATHS, *STRATEGY_KEYS, STARTING_OFFSETS, ENDING_OFFSETS, INCLUDE_HEADERS}
    | {INCLUDE_UNCOMMITTED, FAIL_ON_DATA_LOSS}
)
OPTION_NAMES = (
    "path, subscribe, subscribePattern, assign, startingOffsets, endingOffsets, includeHeaders, "
    "includeUncommitted, failOnDataLoss"
)
_TIMESTAMP_KEYS = frozenset(
    {STARTING_TIMESTAMP, ENDING_TIMESTAMP, STARTING_OFFSETS_BY_TIMESTAMP, ENDING_OFFSETS_BY_TIMESTAMP}
)


@dataclass(frozen=True, slots=True)
class SegmentReadOptions:
    """The parsed options of a ``kipling-segments`` read."""

    log_dirs: tuple[str, ...]
    """Absolute paths: the tasks open files by these names, possibly in another process."""
    subscription: Subscription
    starting: OffsetSpec
    ending: OffsetSpec
    include_headers: bool = False
    include_uncommitted: bool = False
    fail_on_data_loss: bool = True


# -- options ---------------------------------------------------------------------------------------


def parse_segment_options(options: Mapping[str, str]) -> SegmentReadOptions:
    """Validate and parse the options; raises :class:`KiplingOptionError` with what to do instead."""
    params = lower_keys(options)
    _check_keys(params)
    log_dirs = parse_log_dirs(params)
    given = [key for key in STRATEGY_KEYS if key in params]
    if len(given) != 1:
        raise KiplingOptionError(
            f"{'Only one' if given else 'One'} of the options subscribe, subscribePattern, assign must be "
            f"specified for the {FORMAT} source (given: {', '.join(given) or 'none'})"
        )
    starting = parse_offset_spec(
        params, STARTING_TIMESTAMP, STARTING_OFFSETS_BY_TIMESTAMP, STARTING_OFFSETS, Earliest()
    )
    ending = parse_offset_spec(
        params, ENDING_TIMESTAMP, ENDING_OFFSETS_BY_TIMESTAMP, ENDING_OFFSETS, Latest()
    )
    _check_offsets(starting, ending)
    return SegmentReadOptions(
        log_dirs=log_dirs,
        subscription=parse_subscription(params),
        starting=starting,
        ending=ending,
        include_headers=parse_bool(params, INCLUDE_HEADERS, False),
        include_uncommitted=parse_bool(params, INCLUDE_UNCOMMITTED, False),
        fail_on_data_loss=parse_bool(params, FAIL_ON_DATA_LOSS, True),
    )


def parse_log_dirs(params: Mapping[str, str]) -> tuple[str, ...]:
    """``path`` (comma-separated, as ``log.dirs``) and/or ``paths`` (JSON array): existing log dirs."""
    raw: list[str] = []
    if PATH in params:
        raw.extend(params[PATH].split(","))
    if PATHS in params:
        try:
            listed = json.loads(params[PATHS])
        except json.JSONDecodeError:
            listed = None
        if not isinstance(listed, list) or not all(isinstance(p, str) for p in listed):
            raise KiplingOptionError(f"Option 'paths' must be a JSON array of strings, got {params[PATHS]}")
        raw.extend(listed)
    dirs = [os.path.abspath(p.strip()) for p in raw if p.strip()]
    if not dirs:
        raise KiplingOptionError(
            f"The {FORMAT} source needs a path: the broker's log directory (what log.dirs names; several "
            "comma-separated), e.g. spark.read.format('kipling-segments').load('/var/lib/kipling/logs')"
        )
    for directory in dirs:
        if not os.path.isdir(directory):
            raise KiplingOptionError(f"Log directory {directory} does not exist or is not a directory")
        if list_segments(directory):
            raise KiplingOptionError(
                f"{directory} holds segment files: it is a partition directory. Give its log directory "
                f"({os.path.dirname(directory)}) and select the partition with assign"
            )
    return tuple(dict.fromkeys(dirs))


def _check_keys(params: Mapping[str, str]) -> None:
    for key in params:
        if key in SEGMENT_KEYS:
            continue
        if key in _TIMESTAMP_KEYS:
            raise KiplingOptionError(
                f"Option '{key}' is not supported by the {FORMAT} source: use startingOffsets/endingOffsets "
                "(offsets by timestamp need a broker; read them with the kipling format)"
            )
        if key in READ_KEYS or key.startswith("kafka."):
            raise KiplingOptionError(
                f"Option '{key}' of the kipling format does not apply to {FORMAT}, which reads segment "
                f"files and talks to no broker; its options are: {OPTION_NAMES}"
            )
        raise KiplingOptionError(
            f"Unknown option '{key}' for the {FORMAT} format; known options: {OPTION_NAMES}"
        )


def _check_offsets(starting: OffsetSpec, ending: OffsetSpec) -> None:
    """The batch rules of Spark's Kafka source: start never at latest, end never at earliest."""
    if isinstance(starting, Latest):
        raise KiplingOptionError(f"startingOffsets can't be latest for {FORMAT} (it reads a batch)")
    if isinstance(ending, Earliest):
        raise KiplingOptionError(f"endingOffsets can't be earliest for {FORMAT} (it reads a batch)")
    if isinstance(starting, SpecificOffsets):
        for tp, offset in starting.offsets.items():
            if offset == LATEST_TIMESTAMP:
                raise KiplingOptionError(f"startingOffsets for {_name(tp)} can't be latest (-1) for {FORMAT}")
    if isinstance(ending, SpecificOffsets):
        for tp, offset in ending.offsets.items():
            if offset == EARLIEST_TIMESTAMP:
                raise KiplingOptionError(f"endingOffsets for {_name(tp)} can't be earliest (-2) for {FORMAT}")


# -- what is on disk -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PartitionDir:
    """One ``<topic>-<partition>`` directory and the base offsets of its segment files, sorted."""

    topic: str
    partition: int
    log_dir: str
    path: str
    segments: tuple[int, ...]

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)

    def log_path(self, base_offset: int) -> str:
        return os.path.join(self.path, log_file_name(base_offset))


def list_segments(directory: str) -> tuple[int, ...]:
    """Base offsets of the ``<20 digits>.log`` files in ``directory`` (not ``.log.deleted`` and the like)."""
    bases = []
    for name in os.listdir(directory):
        if name.endswith(LOG_SUFFIX):
            base = parse_base_offset(name)
            if base is not None and name == log_file_name(base):
                bases.append(base)
    return tuple(sorted(bases))


def scan_log_dirs(log_dirs: Sequence[str]) -> dict[TopicPartition, PartitionDir]:
    """Every live partition directory of ``log_dirs``; a partition in two of them is an error."""
    found: dict[TopicPartition, PartitionDir] = {}
    for log_dir in log_dirs:
        for entry in sorted(os.scandir(log_dir), key=lambda e: e.name):
            if not entry.is_dir():
                continue
            if entry.name.endswith(IGNORED_DIR_SUFFIXES):
                _log.debug("ignoring a partition directory that is not live", directory=entry.path)
                continue
            key = parse_partition_dir_name(entry.name)
            if key is None:
                continue
            tp = TopicPartition(*key)
            if tp in found:
                raise KiplingOptionError(
                    f"Partition {_name(tp)} is in both {found[tp].log_dir} and {log_dir}: give the log "
                    "directories of one broker"
                )
            found[tp] = PartitionDir(tp.topic, tp.partition, log_dir, entry.path, list_segments(entry.path))
    return found


def select_partitions(
    subscription: Subscription, on_disk: Mapping[TopicPartition, PartitionDir], log_dirs: Sequence[str]
) -> list[TopicPartition]:
    """The subscription's partitions among those on disk, sorted; a named one that is absent is an error.

    A log dir holds only the replicas its broker hosts, so ``subscribe`` reads the partitions of the
    topic found there, which may be a subset of the topic's.
    """
    where = ", ".join(log_dirs)
    if isinstance(subscription, SubscribePattern):
        return sorted(
            tp for tp in on_disk if tp.topic not in INTERNAL_TOPICS and subscription.matches(tp.topic)
        )
    if isinstance(subscription, Subscribe):
        topics = {tp.topic for tp in on_disk}
        for topic in subscription.topics:
            if topic not in topics:
                raise KiplingOptionError(f"Topic '{topic}' does not exist in the log directories {where}")
        wanted = set(subscription.topics)
        return sorted(tp for tp in on_disk if tp.topic in wanted)
    assert isinstance(subscription, Assign)
    absent = [tp for tp in subscription.partitions if tp not in on_disk]
    if absent:
        raise KiplingOptionError(
            f"Assigned partitions do not exist in the log directories {where}: "
            + ", ".join(_name(tp) for tp in absent)
        )
    return sorted(subscription.partitions)


@dataclass(frozen=True, slots=True)
class PartitionOffsetsOnDisk:
    """A partition's offsets as the broker would know them after loading its log dir."""

    directory: PartitionDir
    log_start_offset: int
    log_end_offset: int
    high_watermark: int


def partition_offsets(
    directory: PartitionDir, log_start_checkpoint: int | None, high_watermark_checkpoint: int | None
) -> PartitionOffsetsOnDisk:
    """Log start, log end and high watermark, clamped as :class:`~storage.log.PartitionLog` clamps them.

    A partition without a checkpointed high watermark (created after the broker last checkpointed)
    has nothing known to be committed: its high watermark is its log start offset, as after a restart.
    """
    segments = directory.segments
    if segments:
        end = log_end_offset(directory.log_path(segments[-1]), segments[-1])
        start = max(segments[0], log_start_checkpoint or 0)
    else:  # an empty directory: nothing to read, wherever it starts
        start = end = log_start_checkpoint or 0
    start = min(start, end)
    if high_watermark_checkpoint is None:
        high_watermark = start
    else:
        high_watermark = min(max(high_watermark_checkpoint, start), end)
    return PartitionOffsetsOnDisk(directory, start, end, high_watermark)


def load_offsets(
    partitions: Iterable[TopicPartition],
    on_disk: Mapping[TopicPartition, PartitionDir],
    include_uncommitted: bool,
) -> dict[TopicPartition, PartitionOffsetsOnDisk]:
    """Offsets of ``partitions`` from their log dirs' checkpoint files (each file read once)."""
    wanted = list(partitions)
    by_log_dir: dict[str, list[TopicPartition]] = {}
    for tp in wanted:
        by_log_dir.setdefault(on_disk[tp].log_dir, []).append(tp)
    out: dict[TopicPartition, PartitionOffsetsOnDisk] = {}
    for log_dir, tps in by_log_dir.items():
        starts = OffsetCheckpointFile(_path(log_dir, LOG_START_OFFSET_CHECKPOINT)).read()
        checkpoint = _path(log_dir, REPLICATION_OFFSET_CHECKPOINT)
        if not include_uncommitted and not checkpoint.exists():
            raise KiplingOptionError(
                f"{checkpoint} does not exist, so the high watermarks of the partitions in {log_dir} are "
                "unknown: set includeUncommitted=true to read all records in the segments"
            )
        high_watermarks = OffsetCheckpointFile(checkpoint).read()
        for tp in tps:
            hw = high_watermarks.get((tp.topic, tp.partition))
            if hw is None and not include_uncommitted:
                _log.warning(
                    "no high watermark checkpointed for a partition: none of its records is known to be "
                    "committed; includeUncommitted=true reads them",
                    topic=tp.topic,
                    partition=tp.partition,
                    checkpoint=str(checkpoint),
                )
            out[tp] = partition_offsets(on_disk[tp], starts.get((tp.topic, tp.partition)), hw)
    return out


class LogDirOffsets:
    """:class:`~pipeline.offsets.OffsetLookup` over the log dirs, so offsets resolve as for ``kipling``."""

    def __init__(
        self, offsets: Mapping[TopicPartition, PartitionOffsetsOnDisk], include_uncommitted: bool
    ) -> None:
        self._offsets = offsets
        self._include_uncommitted = include_uncommitted

    def earliest(self, partitions: Iterable[TopicPartition]) -> PartitionOffsets:
        return {tp: self._offsets[tp].log_start_offset for tp in partitions}

    def latest(self, partitions: Iterable[TopicPartition]) -> PartitionOffsets:
        if self._include_uncommitted:
            return {tp: self._offsets[tp].log_end_offset for tp in partitions}
        return {tp: self._offsets[tp].high_watermark for tp in partitions}

    def offsets_for_times(self, timestamps: Mapping[TopicPartition, int]) -> PartitionOffsets:
        raise KiplingOptionError(f"The {FORMAT} source does not resolve offsets by timestamp")


# -- planning --------------------------------------------------------------------------------------


def split_by_segment(start: int, end: int, bases: Sequence[int]) -> list[tuple[int, int, int]]:
    """(segment base offset, start, end) for each segment holding offsets of [start, end), in order.

    Segment ``i`` holds offsets [bases[i], bases[i + 1]); the last one everything from its base on.
    Offsets below the first base are in no segment (the caller clamps the range to the log start).
    """
    if start >= end or not bases:
        return []
    out = []
    for i in range(max(0, bisect_right(bases, start) - 1), len(bases)):
        base = bases[i]
        if base >= end:
            break
        upper = bases[i + 1] if i + 1 < len(bases) else end
        lo, hi = max(start, base), min(end, upper)
        if lo < hi:
            out.append((base, lo, hi))
    return out


def clamp_to_available(
    r: OffsetRange, available: PartitionOffsetsOnDisk, latest: int, report: DataLossReporter
) -> OffsetRange:
    """The part of ``r`` the log dir holds; asking for more is data loss, as with the ``kipling`` source."""
    start, end = r.start, r.end
    if start < available.log_start_offset:
        report(
            f"Could not read records in offset [{start}, {available.log_start_offset}) for topic partition "
            f"{_name(r.tp)}: the log in {available.directory.path} starts at {available.log_start_offset}"
        )
        start = available.log_start_offset
    if end > latest:
        report(
            f"Could not read records in offset [{latest}, {end}) for topic partition {_name(r.tp)}: the log "
            f"in {available.directory.path} ends at {latest}"
        )
        end = latest
    return OffsetRange(r.topic, r.partition, start, max(start, end))


def plan_segment_tasks(options: SegmentReadOptions) -> list[SegmentTask]:
    """One :class:`SegmentTask` per segment file holding offsets the read needs."""
    on_disk = scan_log_dirs(options.log_dirs)
    partitions = select_partitions(options.subscription, on_disk, options.log_dirs)
    offsets = load_offsets(partitions, on_disk, options.include_uncommitted)
    lookup = LogDirOffsets(offsets, options.include_uncommitted)
    latest = lookup.latest(partitions)
    report = DataLossReporter(options.fail_on_data_loss)
    tasks: list[SegmentTask] = []
    for requested in plan_batch(partitions, options.starting, options.ending, lookup):
        available = offsets[requested.tp]
        r = clamp_to_available(requested, available, latest[requested.tp], report)
        directory = available.directory
        last = directory.segments[-1] if directory.segments else None
        tasks.extend(
            SegmentTask(
                topic=r.topic,
                partition=r.partition,
                log_path=directory.log_path(base),
                base_offset=base,
                start=start,
                end=end,
                last_segment=base == last,
                include_headers=options.include_headers,
                fail_on_data_loss=options.fail_on_data_loss,
            )
            for base, start, end in split_by_segment(r.start, r.end, directory.segments)
        )
    _log.info(
        "segments planned",
        log_dirs=list(options.log_dirs),
        partitions=len(partitions),
        tasks=len(tasks),
        offsets=sum(t.size for t in tasks),
    )
    return tasks


def _path(log_dir: str, name: str) -> pathlib.Path:
    return pathlib.Path(log_dir) / name


def _name(tp: TopicPartition) -> str:
    return f"{tp.topic}-{tp.partition}"


__all__ = [
    "FORMAT",
    "INCLUDE_UNCOMMITTED",
    "LogDirOffsets",
    "PartitionDir",
    "PartitionOffsetsOnDisk",
    "SegmentReadOptions",
    "clamp_to_available",
    "list_segments",
    "load_offsets",
    "parse_segment_options",
    "partition_offsets",
    "plan_segment_tasks",
    "scan_log_dirs",
    "select_partitions",
    "split_by_segment",
]
