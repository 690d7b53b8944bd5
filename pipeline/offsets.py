"""Offset-range planning: resolve where to start and stop, split ranges into tasks, rate-limit triggers.

Pure: the broker is reached only through an :class:`OffsetLookup` (the real one is
:class:`pipeline.cluster.BrokerSession`), so every rule here is unit-tested with a fake. The rules are
those of Spark's Kafka source, kept so that a job behaves the same after switching format names:

* ``resolve`` follows ``KafkaOffsetReaderAdmin``: specific offsets and per-partition timestamps must name
  every partition of the subscription; -2/-1 inside them mean earliest/latest; a starting timestamp that
  matches no record is an error or "latest" (``startingOffsetsByTimestampStrategy``), an ending one is
  "latest".
* ``split_ranges`` follows ``KafkaOffsetRangeCalculator``: ranges are first cut to at most
  ``maxRecordsPerPartition`` offsets, then, if there are fewer than ``minPartitions``, large ranges are
  split in proportion to their size (small ones are left whole).
* ``rate_limit`` follows ``KafkaMicroBatchStream.rateLimit``: ``maxOffsetsPerTrigger`` is shared among
  partitions in proportion to their backlog, rounding down, except that a partition whose share is
  below one offset gets one (no partition starves).
* ``plan_stream_ranges`` follows ``getOffsetRangesFromResolvedOffsets``: new partitions start at their
  earliest offset (data loss if that is not 0), vanished partitions and offsets that went backwards are
  data loss.

Streaming offsets are stored in Spark's checkpoint as JSON in the Kafka source's own format,
``{"topic": {"0": 23, "1": 5}}``, with keys in a fixed order (the runner compares offsets as JSON text).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import structlog

from client.fetch_session import TopicPartition
from pipeline.errors import (
    INSTRUCTION_FOR_FAIL_ON_DATA_LOSS_FALSE,
    KiplingDataLossError,
    KiplingOptionError,
)
from pipeline.options import (
    Earliest,
    GlobalTimestamp,
    Latest,
    NoMatchStrategy,
    OffsetSpec,
    SpecificOffsets,
    SpecificTimestamps,
)
from protocol.sentinels import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, UNKNOWN_OFFSET

_log = structlog.get_logger("kipling.pipeline.offsets")

PartitionOffsets = dict[TopicPartition, int]
OffsetsJson = dict[str, dict[str, int]]


@dataclass(frozen=True, slots=True)
class OffsetRange:
    """The offsets [start, end) of one topic partition: what one Spark task reads."""

    topic: str
    partition: int
    start: int
    end: int

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)

    @property
    def size(self) -> int:
        """Offsets in the range; records may be fewer (control records, compaction)."""
        return self.end - self.start


class OffsetLookup(Protocol):
    """What planning needs from the cluster (answers for partitions that exist)."""

    def earliest(self, partitions: Iterable[TopicPartition]) -> PartitionOffsets: ...

    def latest(self, partitions: Iterable[TopicPartition]) -> PartitionOffsets: ...

    def offsets_for_times(self, timestamps: Mapping[TopicPartition, int]) -> PartitionOffsets:
        """The first offset with a timestamp at or after each one, ``UNKNOWN_OFFSET`` when none."""
        ...


class DataLossReporter:
    """``failOnDataLoss``: raise :class:`KiplingDataLossError`, or log a warning and go on."""

    def __init__(self, fail: bool) -> None:
        self.fail = fail

    def __call__(self, message: str) -> None:
        if self.fail:
            raise KiplingDataLossError(message)
        _log.warning("data loss", detail=message, instruction=INSTRUCTION_FOR_FAIL_ON_DATA_LOSS_FALSE)


# -- resolving -------------------------------------------------------------------------------------


def resolve(
    spec: OffsetSpec, partitions: Sequence[TopicPartition], lookup: OffsetLookup, *, starting: bool
) -> PartitionOffsets:
    """Concrete offsets of ``partitions`` (the subscription's, now) for a starting or ending ``spec``."""
    if isinstance(spec, Earliest):
        return _complete(lookup.earliest(partitions), partitions, "earliest")
    if isinstance(spec, Latest):
        return _complete(lookup.latest(partitions), partitions, "latest")
    if isinstance(spec, SpecificOffsets):
        _same_partitions(
            spec.offsets,
            partitions,
            "If startingOffsets/endingOffsets contains specific offsets, you must specify all "
            "TopicPartitions. Use -1 for latest, -2 for earliest.",
        )
        return _resolve_sentinels(spec.offsets, lookup)
    if isinstance(spec, SpecificTimestamps):
        _same_partitions(
            spec.timestamps,
            partitions,
            "If starting/endingOffsetsByTimestamp contains specific offsets, you must specify all topics.",
        )
        return _resolve_timestamps(dict(spec.timestamps), spec.strategy, lookup, starting)
    if isinstance(spec, GlobalTimestamp):
        return _resolve_timestamps(dict.fromkeys(partitions, spec.timestamp), spec.strategy, lookup, starting)
    raise TypeError(f"unknown offset spec {spec!r}")


def _resolve_sentinels(offsets: Mapping[TopicPartition, int], lookup: OffsetLookup) -> PartitionOffsets:
    earliest = [tp for tp, offset in offsets.items() if offset == EARLIEST_TIMESTAMP]
    latest = [tp for tp, offset in offsets.items() if offset == LATEST_TIMESTAMP]
    resolved = {**_complete(lookup.earliest(earliest), earliest, "earliest")}
    resolved.update(_complete(lookup.latest(latest), latest, "latest"))
    return {tp: resolved.get(tp, offset) for tp, offset in offsets.items()}


def _resolve_timestamps(
    timestamps: dict[TopicPartition, int], strategy: NoMatchStrategy, lookup: OffsetLookup, starting: bool
) -> PartitionOffsets:
    found = _complete(lookup.offsets_for_times(timestamps), timestamps, "offset for timestamp")
    unmatched = [tp for tp, offset in found.items() if offset == UNKNOWN_OFFSET]
    if unmatched and starting and strategy is NoMatchStrategy.ERROR:
        tp = unmatched[0]
        raise KiplingOptionError(
            f"No offset matched from request of topic-partition {tp.topic}-{tp.partition} and timestamp "
            f"{timestamps[tp]}."
        )
    latest = _complete(lookup.latest(unmatched), unmatched, "latest") if unmatched else {}
    return {tp: latest.get(tp, offset) for tp, offset in found.items()}


def _same_partitions(
    given: Mapping[TopicPartition, int], partitions: Sequence[TopicPartition], why: str
) -> None:
    if set(given) != set(partitions):
        raise KiplingOptionError(f"{why}\nSpecified: {_names(given)} Assigned: {_names(partitions)}")


def _complete(
    found: Mapping[TopicPartition, int], wanted: Iterable[TopicPartition], what: str
) -> PartitionOffsets:
    out: PartitionOffsets = {}
    for tp in wanted:
        if tp not in found:
            raise KiplingOptionError(f"The broker returned no {what} offset for {tp.topic}-{tp.partition}")
        out[tp] = found[tp]
    return out


# -- batch -----------------------------------------------------------------------------------------


def plan_batch(
    partitions: Sequence[TopicPartition],
    starting: OffsetSpec,
    ending: OffsetSpec,
    lookup: OffsetLookup,
) -> list[OffsetRange]:
    """One range per partition from the resolved starting to the resolved ending offsets."""
    start = resolve(starting, partitions, lookup, starting=True)
    end = resolve(ending, partitions, lookup, starting=False)
    ranges = []
    for tp in partitions:
        if start[tp] > end[tp]:
            raise KiplingOptionError(
                f"The resolved starting offset {start[tp]} of {tp.topic}-{tp.partition} is greater than the "
                f"resolved ending offset {end[tp]}"
            )
        ranges.append(OffsetRange(tp.topic, tp.partition, start[tp], end[tp]))
    return ranges


# -- streaming -------------------------------------------------------------------------------------


def offsets_to_json(offsets: Mapping[TopicPartition, int]) -> OffsetsJson:
    """Spark's Kafka offset JSON, topics sorted by name and partitions by number."""
    out: OffsetsJson = {}
    for tp in sorted(offsets):
        out.setdefault(tp.topic, {})[str(tp.partition)] = int(offsets[tp])
    return out


def offsets_from_json(data: Mapping[str, Any]) -> PartitionOffsets:
    """Read offsets back from a checkpoint (keys are strings after the JSON round trip)."""
    out: PartitionOffsets = {}
    if not isinstance(data, Mapping):
        raise ValueError(f"kipling offsets must be a JSON object, got {data!r}")
    for topic, partitions in data.items():
        if not isinstance(partitions, Mapping):
            raise ValueError(f"kipling offsets for topic {topic!r} must be a JSON object, got {partitions!r}")
        for partition, offset in partitions.items():
            out[TopicPartition(topic, int(partition))] = int(offset)
    return out


def rate_limit(
    limit: int,
    start: Mapping[TopicPartition, int],
    until: Mapping[TopicPartition, int],
    earliest_new: Mapping[TopicPartition, int],
) -> PartitionOffsets:
    """Cap the offsets read in one trigger at about ``limit`` (Spark's proportional rule).

    ``earliest_new`` gives the start of partitions that are in ``until`` but not in ``start``.
    """
    sizes: dict[TopicPartition, int] = {}
    for tp, end in until.items():
        begin = start.get(tp, earliest_new.get(tp))
        if begin is not None and end - begin > 0:
            sizes[tp] = end - begin
    total = float(sum(sizes.values()))
    if total < 1:
        return dict(until)
    out: PartitionOffsets = {}
    for tp, end in until.items():
        size = sizes.get(tp)
        if size is None:
            out[tp] = end
            continue
        begin = start[tp] if tp in start else earliest_new[tp]
        prorate = limit * (size / total)
        share = math.ceil(prorate) if prorate < 1 else math.floor(prorate)
        out[tp] = min(end, begin + share)
    return out


def plan_stream_ranges(
    start: Mapping[TopicPartition, int],
    end: Mapping[TopicPartition, int],
    earliest_new: Mapping[TopicPartition, int],
    report_data_loss: Callable[[str], None],
) -> list[OffsetRange]:
    """The ranges of one micro-batch between two checkpointed offsets.

    ``earliest_new`` holds the current earliest offset of the partitions in ``end`` that ``start`` lacks
    (a partition missing from it was deleted again before this batch could be planned).
    """
    new_partitions = [tp for tp in end if tp not in start]
    missing = [tp for tp in new_partitions if tp not in earliest_new]
    if missing:
        report_data_loss(f"Cannot find earliest offsets of {_names(missing)}. Some data may have been missed")
    for tp in new_partitions:
        offset = earliest_new.get(tp)
        if offset is not None and offset != 0:
            report_data_loss(
                f"Added partition {tp.topic}-{tp.partition} starts from {offset} instead of 0. "
                "Some data may have been missed"
            )
    deleted = [tp for tp in start if tp not in end]
    if deleted:
        report_data_loss(f"{_names(deleted)} are gone. Some data may have been missed.")
    ranges: list[OffsetRange] = []
    for tp in sorted(end):
        begin = start.get(tp, earliest_new.get(tp))
        if begin is None:
            continue
        until = end[tp]
        if until < begin:
            report_data_loss(
                f"Partition {tp.topic}-{tp.partition}'s offset was changed from {begin} to {until}, "
                "some data may have been missed"
            )
        if until > begin:
            ranges.append(OffsetRange(tp.topic, tp.partition, begin, until))
    return ranges


# -- splitting into tasks --------------------------------------------------------------------------


def split_ranges(
    ranges: Sequence[OffsetRange], min_partitions: int | None, max_records_per_partition: int | None
) -> list[OffsetRange]:
    """Drop empty ranges and split the rest into Spark tasks (``KafkaOffsetRangeCalculator``)."""
    offset_ranges = [r for r in ranges if r.size > 0]
    if max_records_per_partition is not None:
        offset_ranges = [
            part for r in offset_ranges for part in _divide(r, math.ceil(r.size / max_records_per_partition))
        ]
    if min_partitions is None or len(offset_ranges) >= min_partitions:
        return offset_ranges
    total = sum(r.size for r in offset_ranges)
    unsplit = {id(r) for r in offset_ranges if _part_count(r.size, total, min_partitions) == 1}
    unsplit_total = sum(r.size for r in offset_ranges if id(r) in unsplit)
    split_total = total - unsplit_total
    split_min_partitions = max(min_partitions - len(unsplit), 1)
    out: list[OffsetRange] = []
    for r in offset_ranges:
        parts = 1 if id(r) in unsplit else _part_count(r.size, split_total, split_min_partitions)
        out.extend(_divide(r, parts))
    return out


def _divide(r: OffsetRange, parts: int) -> list[OffsetRange]:
    """``parts`` near-equal pieces; the last ones take the rounding remainder (Spark's integer split)."""
    remaining = r.size
    start = r.start
    out = []
    for part in range(parts):
        this = remaining // (parts - part)
        remaining -= this
        end = min(start + this, r.end)
        if end > start:
            out.append(OffsetRange(r.topic, r.partition, start, end))
        start = end
    return out


def _part_count(size: int, total: int, min_parts: int) -> int:
    """``max(Math.round(size / total * minParts), 1)``; Java rounds halves up, Python's round does not."""
    return max(math.floor(size / total * min_parts + 0.5), 1)


def _names(partitions: Iterable[TopicPartition]) -> str:
    return "[" + ", ".join(f"{tp.topic}-{tp.partition}" for tp in sorted(partitions)) + "]"


__all__ = [
    "DataLossReporter",
    "OffsetLookup",
    "OffsetRange",
    "OffsetsJson",
    "PartitionOffsets",
    "offsets_from_json",
    "offsets_to_json",
    "plan_batch",
    "plan_stream_ranges",
    "rate_limit",
    "resolve",
    "split_ranges",
]
