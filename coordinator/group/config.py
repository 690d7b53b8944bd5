"""The group coordinator's settings, with Kafka's key names and defaults.

A small frozen dataclass handed to the coordinator (never a global). Field names follow the broker
configuration's attribute style; :data:`KAFKA_KEYS` maps each to its Kafka key, and
:meth:`GroupCoordinatorConfig.from_kafka_keys` builds one from values under those keys.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields

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
        return cls(**{by_key[key]: int(str(value)) for key, value in values.items()})


KAFKA_KEYS: Mapping[str, str] = {f.name: f.name.replace("_", ".") for f in fields(GroupCoordinatorConfig)}
"""Field name → Kafka key ("group_max_size" → "group.max.size")."""
