"""Per-partition log configuration: Kafka's topic-level keys, their defaults and their bounds.

The broker resolves topic overrides against its ``log.*`` defaults and hands a :class:`LogConfig` to
each :class:`~storage.log.PartitionLog`; the log never reads server properties itself. Field names
are Kafka's keys with dots turned into underscores (``segment.index.bytes`` is ``max_index_size``,
as Kafka's ``LogConfig.maxIndexSize``). The compression and timestamp-bound keys are carried for the
leader's produce path, which recompresses a batch whose codec differs from ``compression.type`` and
refuses CreateTime records outside ``message.timestamp.{before,after}.max.ms`` before the append;
the log itself stores batches as it is given them.

``cleanup.policy`` decides what removes records: ``delete`` lets retention drop whole old segments
(time and size), ``compact`` lets the log cleaner keep only the latest record of each key. A log
whose policy lacks ``delete`` has no time or size retention at all (Kafka's ``LogConfig.delete``),
and only DeleteRecords could move its start, which the leader refuses for it (POLICY_VIOLATION).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from typing import Any

from protocol.records.compression import (
    GZIP_DEFAULT_LEVEL,
    GZIP_MAX_LEVEL,
    GZIP_MIN_LEVEL,
    LZ4_DEFAULT_LEVEL,
    LZ4_MAX_LEVEL,
    LZ4_MIN_LEVEL,
    ZSTD_DEFAULT_LEVEL,
    ZSTD_MAX_LEVEL,
    ZSTD_MIN_LEVEL,
)

LONG_MAX = 9223372036854775807
INT_MAX = 2147483647
CREATE_TIME = "CreateTime"
LOG_APPEND_TIME = "LogAppendTime"
TIMESTAMP_TYPES = (CREATE_TIME, LOG_APPEND_TIME)
MIN_SEGMENT_BYTES = 14
"""Kafka's lower bound for segment.bytes (LegacyRecord.RECORD_OVERHEAD_V0)."""
MIN_INDEX_BYTES = 4
COMPRESSION_PRODUCER = "producer"
COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", COMPRESSION_PRODUCER)
"""Kafka's ``BrokerCompressionType`` names: the codecs, plus ``producer`` (keep the producer's)."""
CLEANUP_DELETE = "delete"
CLEANUP_COMPACT = "compact"
CLEANUP_POLICIES = (CLEANUP_COMPACT, CLEANUP_DELETE)

_PROPERTY_TO_FIELD = {
    "segment.bytes": "segment_bytes",
    "segment.ms": "segment_ms",
    "segment.jitter.ms": "segment_jitter_ms",
    "index.interval.bytes": "index_interval_bytes",
    "segment.index.bytes": "max_index_size",
    "retention.ms": "retention_ms",
    "retention.bytes": "retention_bytes",
    "flush.messages": "flush_messages",
    "flush.ms": "flush_ms",
    "max.message.bytes": "max_message_bytes",
    "message.timestamp.type": "message_timestamp_type",
    "message.timestamp.before.max.ms": "message_timestamp_before_max_ms",
    "message.timestamp.after.max.ms": "message_timestamp_after_max_ms",
    "file.delete.delay.ms": "file_delete_delay_ms",
    "compression.type": "compression_type",
    "compression.gzip.level": "compression_gzip_level",
    "compression.lz4.level": "compression_lz4_level",
    "compression.zstd.level": "compression_zstd_level",
    "cleanup.policy": "cleanup_policy",
    "min.cleanable.dirty.ratio": "min_cleanable_dirty_ratio",
    "min.compaction.lag.ms": "min_compaction_lag_ms",
    "max.compaction.lag.ms": "max_compaction_lag_ms",
    "delete.retention.ms": "delete_retention_ms",
}
_STRING_FIELDS = frozenset({"message_timestamp_type", "compression_type"})
_LIST_FIELDS = frozenset({"cleanup_policy"})
_FLOAT_FIELDS = frozenset({"min_cleanable_dirty_ratio"})
_FIELD_TO_PROPERTY = {field: key for key, field in _PROPERTY_TO_FIELD.items()}

# (lowest allowed value, highest allowed value) per integer field, as in Kafka's ConfigDef.
_INT_BOUNDS: dict[str, tuple[int, int]] = {
    "segment_bytes": (MIN_SEGMENT_BYTES, INT_MAX),
    "segment_ms": (1, LONG_MAX),
    "segment_jitter_ms": (0, LONG_MAX),
    "index_interval_bytes": (0, INT_MAX),
    "max_index_size": (MIN_INDEX_BYTES, INT_MAX),
    "retention_ms": (-1, LONG_MAX),
    "retention_bytes": (-(2**63), LONG_MAX),
    "flush_messages": (1, LONG_MAX),
    "flush_ms": (0, LONG_MAX),
    "max_message_bytes": (0, INT_MAX),
    "file_delete_delay_ms": (0, LONG_MAX),
    "message_timestamp_before_max_ms": (0, LONG_MAX),
    "message_timestamp_after_max_ms": (0, LONG_MAX),
    "compression_gzip_level": (GZIP_DEFAULT_LEVEL, GZIP_MAX_LEVEL),
    "compression_lz4_level": (LZ4_MIN_LEVEL, LZ4_MAX_LEVEL),
    "compression_zstd_level": (ZSTD_MIN_LEVEL, ZSTD_MAX_LEVEL),
    "min_compaction_lag_ms": (0, LONG_MAX),
    "max_compaction_lag_ms": (1, LONG_MAX),
    "delete_retention_ms": (0, LONG_MAX),
}


@dataclass(frozen=True)
class LogConfig:
    """Topic-level log settings with Kafka's defaults; validated on construction."""

    segment_bytes: int = 1073741824
    segment_ms: int = 604800000
    segment_jitter_ms: int = 0
    index_interval_bytes: int = 4096
    max_index_size: int = 10485760
    retention_ms: int = 604800000
    retention_bytes: int = -1
    flush_messages: int = LONG_MAX
    flush_ms: int = LONG_MAX
    max_message_bytes: int = 1048588
    message_timestamp_type: str = CREATE_TIME
    message_timestamp_before_max_ms: int = LONG_MAX
    message_timestamp_after_max_ms: int = 3600000
    file_delete_delay_ms: int = 60000
    compression_type: str = COMPRESSION_PRODUCER
    compression_gzip_level: int = GZIP_DEFAULT_LEVEL
    compression_lz4_level: int = LZ4_DEFAULT_LEVEL
    compression_zstd_level: int = ZSTD_DEFAULT_LEVEL
    cleanup_policy: tuple[str, ...] = (CLEANUP_DELETE,)
    min_cleanable_dirty_ratio: float = 0.5
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX
    delete_retention_ms: int = 86400000

    def __post_init__(self) -> None:
        for name, (low, high) in _INT_BOUNDS.items():
            _check_int(name, getattr(self, name), low, high)
        if self.message_timestamp_type not in TIMESTAMP_TYPES:
            raise ValueError(
                f"message.timestamp.type must be one of {', '.join(TIMESTAMP_TYPES)}, "
                f"got {self.message_timestamp_type!r}"
            )
        if self.compression_type not in COMPRESSION_TYPES:
            raise ValueError(
                f"compression.type must be one of {', '.join(COMPRESSION_TYPES)}, "
                f"got {self.compression_type!r}"
            )
        policy = self.cleanup_policy
        if len(set(policy)) != len(policy) or not set(policy) <= set(CLEANUP_POLICIES):
            raise ValueError(
                f"cleanup.policy must be distinct items from {', '.join(CLEANUP_POLICIES)}, "
                f"got {','.join(policy)!r}"
            )
        ratio = self.min_cleanable_dirty_ratio
        if isinstance(ratio, bool) or not isinstance(ratio, int | float) or not 0 <= ratio <= 1:
            raise ValueError(f"min.cleanable.dirty.ratio must be in [0, 1], got {ratio!r}")
        if self.compression_gzip_level == 0:
            raise ValueError(
                f"compression.gzip.level must be {GZIP_DEFAULT_LEVEL} or in [{GZIP_MIN_LEVEL}, "
                f"{GZIP_MAX_LEVEL}], got 0"
            )

    @property
    def log_append_time(self) -> bool:
        """True when the broker, not the producer, sets record timestamps."""
        return self.message_timestamp_type == LOG_APPEND_TIME

    @property
    def compact(self) -> bool:
        """The log cleaner compacts this log (Kafka's ``LogConfig.compact``)."""
        return CLEANUP_COMPACT in self.cleanup_policy

    @property
    def delete(self) -> bool:
        """Retention (time, size) and DeleteRecords may remove this log's records (``LogConfig.delete``)."""
        return CLEANUP_DELETE in self.cleanup_policy

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> LogConfig:
        """Build from Kafka topic properties; unknown keys are ignored (they belong to other layers)."""
        values: dict[str, Any] = {}
        for key, raw in props.items():
            name = _PROPERTY_TO_FIELD.get(key)
            if name is None:
                continue
            parse: Callable[[str, str], Any] = _parse_int
            if name in _STRING_FIELDS:
                parse = _parse_str
            elif name in _LIST_FIELDS:
                parse = _parse_list
            elif name in _FLOAT_FIELDS:
                parse = _parse_float
            values[name] = parse(key, raw)
        return cls(**values)

    def to_properties(self) -> dict[str, str]:
        """The inverse of :meth:`from_properties` (for DescribeConfigs and tests)."""
        return {_FIELD_TO_PROPERTY[f.name]: _format(getattr(self, f.name)) for f in fields(self)}


def _format(value: object) -> str:
    if isinstance(value, tuple):
        return ",".join(value)
    return str(value)


def _parse_int(key: str, raw: str) -> int:
    try:
        return int(str(raw).strip())
    except ValueError:
        raise ValueError(f"{key} must be an integer, got {raw!r}") from None


def _parse_str(key: str, raw: str) -> str:
    return str(raw).strip()


def _parse_list(key: str, raw: str) -> tuple[str, ...]:
    return tuple(item.strip() for item in str(raw).split(",") if item.strip())


def _parse_float(key: str, raw: str) -> float:
    try:
        return float(str(raw).strip().rstrip("dDfF"))
    except ValueError:
        raise ValueError(f"{key} must be a number, got {raw!r}") from None


def _check_int(name: str, value: object, low: int, high: int) -> None:
    key = _FIELD_TO_PROPERTY[name]
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError(f"{key} must be an integer, got {value!r}")
    if not low <= value <= high:
        raise ValueError(f"{key} must be in [{low}, {high}], got {value}")
