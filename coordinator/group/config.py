"""The group coordinator's settings, with Kafka's key names and defaults.

A small frozen dataclass handed to the coordinator (never a global). Field names follow the broker
configuration's attribute style; :data:`KAFKA_KEYS` maps each to its Kafka key, and
:meth:`GroupCoordinatorConfig.from_kafka_keys` builds one from values under those keys.

The ``group.consumer.*`` keys are those of consumer-protocol groups (KIP-848), with Kafka 4.0's
defaults and checks. ``group.consumer.migration.policy`` governs the online conversions of groups
with members (:mod:`~coordinator.group.migration`): the upgrade of a classic group a KIP-848
member joins (``upgrade``, ``bidirectional``) and the downgrade of a consumer group whose last
KIP-848 member leaves (``downgrade``, ``bidirectional``). Empty groups convert either way whatever
the policy, and classic consumers may join a consumer group with members whatever the policy, as
in Kafka.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

INT32_MAX = 2**31 - 1


@dataclass(frozen=True, slots=True)
class GroupCoordinatorConfig:
    """What the classic group coordinator reads from the broker configuration."""

    group_min_session_timeout_ms: int = 6000
    group_max_session_timeout_ms: int = 1_800_000
    group_initial_rebalance_delay_ms: int = 3000
    group_max_size: int = INT32_MAX
    """Kafka's default is Integer.MAX_VALUE: unbounded in practice."""
    offsets_retention_minutes: int = 10080
    offset_metadata_max_bytes: int = 4096
    offsets_topic_num_partitions: int = 50
    offsets_retention_check_interval_ms: int = 600_000
    """How often the owner should call ``expire_offsets`` (Kafka schedules it at this interval)."""
    group_coordinator_rebalance_protocols: tuple[str, ...] = ("classic", "consumer")
    """Without "consumer", ConsumerGroupHeartbeat and ConsumerGroupDescribe are not served."""
    group_consumer_session_timeout_ms: int = 45_000
    group_consumer_min_session_timeout_ms: int = 45_000
    group_consumer_max_session_timeout_ms: int = 60_000
    group_consumer_heartbeat_interval_ms: int = 5_000
    group_consumer_min_heartbeat_interval_ms: int = 5_000
    group_consumer_max_heartbeat_interval_ms: int = 15_000
    group_consumer_max_size: int = INT32_MAX
    group_consumer_assignors: tuple[str, ...] = ("uniform", "range")
    """The server-side assignors, by name or Kafka class name; the first is the default."""
    group_consumer_migration_policy: str = "bidirectional"

    def __post_init__(self) -> None:
        """Kafka's validators: sizes and counts at least 1, timeouts and delays not negative."""
        for name in ("group_max_size", "offsets_retention_minutes", "offsets_topic_num_partitions"):
            if getattr(self, name) < 1:
                raise ValueError(f"{KAFKA_KEYS[name]} must be at least 1, got {getattr(self, name)}")
        for name in ("group_min_session_timeout_ms", "group_initial_rebalance_delay_ms"):
            if getattr(self, name) < 0:
                raise ValueError(f"{KAFKA_KEYS[name]} must not be negative, got {getattr(self, name)}")
        if self.group_min_session_timeout_ms > self.group_max_session_timeout_ms:
            raise ValueError("group.min.session.timeout.ms must be at most group.max.session.timeout.ms")
        self._check_consumer_groups()

    def _check_consumer_groups(self) -> None:
        """Kafka 4.0's GroupCoordinatorConfig requirements on the group.consumer.* keys."""
        for name in (
            "group_consumer_session_timeout_ms",
            "group_consumer_min_session_timeout_ms",
            "group_consumer_max_session_timeout_ms",
            "group_consumer_heartbeat_interval_ms",
            "group_consumer_min_heartbeat_interval_ms",
            "group_consumer_max_heartbeat_interval_ms",
            "group_consumer_max_size",
        ):
            if getattr(self, name) < 1:
                raise ValueError(f"{KAFKA_KEYS[name]} must be at least 1, got {getattr(self, name)}")
        session, heartbeat = self.group_consumer_session_timeout_ms, self.group_consumer_heartbeat_interval_ms
        if (
            not self.group_consumer_min_session_timeout_ms
            <= session
            <= self.group_consumer_max_session_timeout_ms
        ):
            raise ValueError(
                "group.consumer.session.timeout.ms must be between group.consumer.min.session.timeout.ms "
                "and group.consumer.max.session.timeout.ms"
            )
        if not (
            self.group_consumer_min_heartbeat_interval_ms
            <= heartbeat
            <= self.group_consumer_max_heartbeat_interval_ms
        ):
            raise ValueError(
                "group.consumer.heartbeat.interval.ms must be between "
                "group.consumer.min.heartbeat.interval.ms and group.consumer.max.heartbeat.interval.ms"
            )
        if heartbeat >= session:
            raise ValueError(
                "group.consumer.heartbeat.interval.ms must be less than group.consumer.session.timeout.ms"
            )
        protocols = self.group_coordinator_rebalance_protocols
        if "classic" not in protocols or not set(protocols) <= {"classic", "consumer"}:
            raise ValueError(
                "group.coordinator.rebalance.protocols must list classic, and may list consumer, "
                f"got {','.join(protocols)}"
            )
        if not self.group_consumer_assignors:
            raise ValueError("group.consumer.assignors must name at least one assignor")
        if self.group_consumer_migration_policy.lower() not in MIGRATION_POLICIES:
            raise ValueError(
                f"group.consumer.migration.policy must be one of {', '.join(MIGRATION_POLICIES)}, "
                f"got {self.group_consumer_migration_policy}"
            )

    @property
    def consumer_protocol_enabled(self) -> bool:
        return "consumer" in self.group_coordinator_rebalance_protocols

    @property
    def offsets_retention_ms(self) -> int:
        return self.offsets_retention_minutes * 60_000

    @classmethod
    def from_kafka_keys(cls, values: Mapping[str, object]) -> GroupCoordinatorConfig:
        """Build from values keyed by Kafka's names; keys left out keep Kafka's defaults."""
        by_key = {key: name for name, key in KAFKA_KEYS.items()}
        unknown = set(values) - set(by_key)
        if unknown:
            raise ValueError(f"not group coordinator keys: {sorted(unknown)}")
        typed: dict[str, Any] = {by_key[key]: _typed(by_key[key], value) for key, value in values.items()}
        return cls(**typed)


MIGRATION_POLICIES = ("bidirectional", "upgrade", "downgrade", "disabled")
_LIST_FIELDS = frozenset({"group_coordinator_rebalance_protocols", "group_consumer_assignors"})


def _typed(name: str, value: object) -> object:
    """A list from a comma-separated string or a sequence, the migration policy as is, else an int."""
    if name in _LIST_FIELDS:
        items = value.split(",") if isinstance(value, str) else list(value)  # type: ignore[call-overload]
        return tuple(str(item).strip() for item in items if str(item).strip())
    if name == "group_consumer_migration_policy":
        return str(value)
    return int(str(value))


KAFKA_KEYS: Mapping[str, str] = {f.name: f.name.replace("_", ".") for f in fields(GroupCoordinatorConfig)}
"""Field name → Kafka key ("group_max_size" → "group.max.size")."""
