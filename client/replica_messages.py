"""What a broker and its follower processes say to each other over :mod:`client.replica_ipc`.

Requests, broker → follower (each gets one reply):

* ``configure`` — :class:`FollowerSettings`, always the first message; reply ``{}``.
* ``set_broker_epoch`` — ``{"epoch": n}`` (sent in every Fetch as the replica's broker epoch).
* ``add_partitions`` — ``{"partitions": [PartitionAssignment...]}``: open each handed-over log and
  follow it; a partition already followed moves to its new leader / epoch. Reply
  ``{"added": [[topic, partition]...], "failed": [{"topic", "partition", "reason"}...]}``.
* ``remove_partitions`` — ``{"partitions": [[topic, partition]...]}``: stop fetching, flush and close
  the logs; reply ``{"handovers": [LogHandover JSON...]}`` (partitions it did not have are left out).
* ``metrics_snapshot`` — ``{}``; reply ``{"partitions": [...], "fetchers": [...]}`` (diagnostics).
* ``shutdown`` — ``{}``: stop everything, close every log, reply ``{"handovers": [...]}``, exit 0.

Events, follower → broker (never answered):

* ``offsets`` — ``{"partitions": [PartitionOffsets...]}``, every few seconds for the partitions whose
  offsets moved, and for all of them at shutdown: the broker writes them into its checkpoints.
* ``partition_failed`` — ``{"topic", "partition", "reason"}``: the fetcher gave the partition up.
* ``read_offsets`` — ``{"partitions": [ReadOffsets rows...]}``: what the broker may serve consumers
  from the followed logs (KIP-392), sent when partitions are added, after every fetch round,
  retention pass and cleaned segment installed, for the partitions whose high watermark, last stable
  offset, log start offset, log end offset, active segment or segment generation changed
  (follower/read_offsets.py).

Requests, follower → broker (the broker answers each):

* ``fence_reads`` — ``{"topic", "partition", "offset"}``: the follower is about to truncate its log
  to ``offset``, below the high watermark it announced; the broker stops reading at ``offset``
  before it answers ``{}``, and only then does the follower truncate.

The log handover and log config inside these objects are storage's (``storage.handover.LogHandover``
as JSON, ``storage.config.LogConfig`` as topic properties); this module keeps them as plain JSON
because ``client`` may not import ``storage``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any

CONFIGURE = "configure"
SET_BROKER_EPOCH = "set_broker_epoch"
ADD_PARTITIONS = "add_partitions"
REMOVE_PARTITIONS = "remove_partitions"
METRICS_SNAPSHOT = "metrics_snapshot"
UPDATE_LOG_CONFIGS = "update_log_configs"
UPDATE_REPLICATION_QUOTA = "update_replication_quota"
"""The follower replication quota: ``{"rate": bytes/s, "throttled": {topic: "*" | [partitions]}}``."""
"""A dynamic config change: ``{"partitions": [{"topic", "partition", "log_config"}]}``, where
``log_config`` is the partition's whole new LogConfig as topic properties."""
SHUTDOWN = "shutdown"
OFFSETS = "offsets"
PARTITION_FAILED = "partition_failed"
READ_OFFSETS = "read_offsets"
FENCE_READS = "fence_reads"


def fetcher_client_id(fetcher_id: int, source_broker_id: int) -> str:
    """Kafka's fetcher thread name (``ReplicaFetcherThread-<fetcherId>-<sourceBrokerId>``).

    The follower uses it as its fetchers' client id and metrics label; the broker needs it to tell
    which fetcher's metrics describe a partition.
    """
    return f"ReplicaFetcherThread-{fetcher_id}-{source_broker_id}"


@dataclass(frozen=True, slots=True)
class FollowerSettings:
    """The broker settings a follower process runs with (Kafka's replica.* keys, and log defaults).

    ``client_id`` is the client id of the fetchers' connections; None uses each fetcher's name
    (``ReplicaFetcherThread-<fetcherId>-<sourceBrokerId>``), as Kafka does.
    """

    replica_fetch_wait_max_ms: int = 500
    replica_fetch_min_bytes: int = 1
    replica_fetch_max_bytes: int = 1048576
    replica_fetch_response_max_bytes: int = 10485760
    replica_fetch_backoff_ms: int = 1000
    replica_socket_timeout_ms: int = 30000
    client_id: str | None = None
    broker_epoch: int = -1
    log_config: dict[str, str] = field(default_factory=dict)
    """Default topic properties (``LogConfig.to_properties()``) for logs added without their own."""
    offsets_report_interval_ms: int = 2000
    """How often the follower reports moved offsets (below the HW checkpoint interval, 5 s)."""
    flush_check_interval_ms: int = 1000
    """How often idle logs are checked for a due ``flush.ms``."""
    log_retention_check_interval_ms: int = 300000
    producer_id_expiration_ms: int = 86_400_000
    """``producer.id.expiration.ms``: idle producers leave the state (and the snapshots) after this."""
    log_open_files_max: int = 0
    """``kipling.log.open.files.max``: the follower process sizes its file pool with it."""
    log_cleaner: dict[str, Any] = field(default_factory=dict)
    """The log cleaner's settings for the logs this process follows (empty: no cleaning):
    ``log_dirs``, ``backoff_ms`` and :class:`~client.cleaner_messages.CleanerSettings`' fields."""
    security: dict[str, Any] = field(default_factory=dict, repr=False)
    """How the fetchers connect to leaders: the broker's inter-broker TLS settings and SASL login
    (:meth:`client.security.ClientSecurityConfig.to_json`; empty: PLAINTEXT). It holds secrets,
    so it travels only in this ``configure`` message over the process's private IPC socketpair,
    never on its command line or in its environment, and is left out of ``repr``."""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> FollowerSettings:
        """Unknown keys are ignored, so a newer broker can talk to an older follower."""
        known = {f.name for f in fields(cls)}
        values = {key: value for key, value in data.items() if key in known}
        if "log_config" in values:
            values["log_config"] = {str(k): str(v) for k, v in dict(values["log_config"]).items()}
        return cls(**values)


@dataclass(frozen=True, slots=True)
class PartitionAssignment:
    """One entry of ``add_partitions``: the log handed over and the leader to follow."""

    handover: dict[str, Any]
    """``storage.handover.LogHandover.to_json()``."""
    log_config: dict[str, str]
    """The partition's ``LogConfig.to_properties()`` (empty: the configured defaults)."""
    leader_id: int
    leader_host: str
    leader_port: int
    leader_epoch: int
    partition_epoch: int
    first_dirty_offset: int | None = None
    """The log's first dirty offset in the broker's ``cleaner-offset-checkpoint`` (None: none), so
    that a (re)started follower process does not clean the log from its start again."""

    @property
    def topic_partition(self) -> tuple[str, int]:
        return str(self.handover["topic"]), int(self.handover["partition"])

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> PartitionAssignment:
        return cls(
            handover=dict(data["handover"]),
            log_config={str(k): str(v) for k, v in dict(data.get("log_config") or {}).items()},
            leader_id=int(data["leader_id"]),
            leader_host=str(data["leader_host"]),
            leader_port=int(data["leader_port"]),
            leader_epoch=int(data["leader_epoch"]),
            partition_epoch=int(data["partition_epoch"]),
            first_dirty_offset=_optional_int(data.get("first_dirty_offset")),
        )


@dataclass(frozen=True, slots=True)
class PartitionOffsets:
    """One entry of an ``offsets`` event: what the broker checkpoints for a log it does not own."""

    topic: str
    partition: int
    high_watermark: int
    recovery_point: int
    log_start_offset: int
    log_end_offset: int
    first_dirty_offset: int | None = None
    """The follower process's cleaner's first dirty offset of the log (None: not compacted, or not
    cleaned yet): the broker writes it into the log dir's ``cleaner-offset-checkpoint``."""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> PartitionOffsets:
        return cls(
            topic=str(data["topic"]),
            partition=int(data["partition"]),
            high_watermark=int(data["high_watermark"]),
            recovery_point=int(data["recovery_point"]),
            log_start_offset=int(data["log_start_offset"]),
            log_end_offset=int(data["log_end_offset"]),
            first_dirty_offset=_optional_int(data.get("first_dirty_offset")),
        )


@dataclass(frozen=True, slots=True)
class ReadOffsets:
    """One entry of a ``read_offsets`` event: a followed log's readable range, as its owner has it.

    Travels as a JSON array (``to_row``), as one event may list many partitions after each round.
    """

    topic: str
    partition: int
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    log_end_offset: int
    active_segment_base: int
    """Base offset of the log's active segment: a change means a segment was added (a roll)."""
    segment_generation: int = 0
    """Changes whenever the follower removed, replaced or cut segment files (retention, the cleaner,
    a truncation; not a roll or an append), and never comes back to an earlier value of the same
    partition while the machine runs (a reopened log counts afresh, from a later value): the broker
    then drops the files it holds of the log."""

    def to_row(self) -> list[Any]:
        return [
            self.topic,
            self.partition,
            self.high_watermark,
            self.last_stable_offset,
            self.log_start_offset,
            self.log_end_offset,
            self.active_segment_base,
            self.segment_generation,
        ]

    @classmethod
    def from_row(cls, row: Any) -> ReadOffsets:
        topic, partition, high_watermark, last_stable_offset, log_start, log_end, segment_base, generation = (
            row
        )
        return cls(
            str(topic),
            int(partition),
            int(high_watermark),
            int(last_stable_offset),
            int(log_start),
            int(log_end),
            int(segment_base),
            int(generation),
        )

    def fenced(self, offset: int) -> ReadOffsets:
        """These offsets once the log is cut at ``offset`` (nothing at or above it is readable)."""
        return ReadOffsets(
            self.topic,
            self.partition,
            min(self.high_watermark, offset),
            min(self.last_stable_offset, offset),
            min(self.log_start_offset, offset),
            min(self.log_end_offset, offset),
            self.active_segment_base,
            self.segment_generation,
        )


def _optional_int(value: Any) -> int | None:
    """An optional field: absent or null from an older peer."""
    return None if value is None else int(value)


__all__ = [
    "ADD_PARTITIONS",
    "CONFIGURE",
    "FENCE_READS",
    "METRICS_SNAPSHOT",
    "OFFSETS",
    "PARTITION_FAILED",
    "READ_OFFSETS",
    "REMOVE_PARTITIONS",
    "SET_BROKER_EPOCH",
    "SHUTDOWN",
    "UPDATE_LOG_CONFIGS",
    "UPDATE_REPLICATION_QUOTA",
    "FollowerSettings",
    "PartitionAssignment",
    "PartitionOffsets",
    "ReadOffsets",
    "fetcher_client_id",
]
