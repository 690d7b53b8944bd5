"""The transaction coordinator's settings, with Kafka's key names and defaults (one place for them)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields


@dataclass(frozen=True, slots=True)
class TransactionConfig:
    """What the transaction coordinator reads from the broker configuration."""

    transaction_max_timeout_ms: int = 900_000
    """The longest transaction timeout a producer may ask for (INVALID_TRANSACTION_TIMEOUT above)."""
    transactional_id_expiration_ms: int = 604_800_000
    """An idle transactional id (no transaction open) is forgotten after this long (7 days)."""
    transaction_abort_timed_out_transaction_cleanup_interval_ms: int = 10_000
    """How often the owner should call ``abort_timed_out_transactions``."""
    transaction_remove_expired_transaction_cleanup_interval_ms: int = 3_600_000
    """How often the owner should call ``expire_transactional_ids``."""
    transaction_state_log_num_partitions: int = 50
    """Partitions of ``__transaction_state`` when it is created."""
    transaction_version_level: int = 2
    """The finalized ``transaction.version`` feature level (Kafka 4.x formats new clusters at 2). It
    decides the value version written (0 at level 0, else 1) and the transaction version used for
    the aborts the coordinator starts itself (fences and timeouts)."""

    def __post_init__(self) -> None:
        for name in (
            "transaction_max_timeout_ms",
            "transactional_id_expiration_ms",
            "transaction_abort_timed_out_transaction_cleanup_interval_ms",
            "transaction_remove_expired_transaction_cleanup_interval_ms",
            "transaction_state_log_num_partitions",
        ):
            if getattr(self, name) < 1:
                raise ValueError(f"{KAFKA_KEYS[name]} must be at least 1, got {getattr(self, name)}")
        if not 0 <= self.transaction_version_level <= 2:
            raise ValueError(f"transaction.version must be 0, 1 or 2, got {self.transaction_version_level}")

    @classmethod
    def from_kafka_keys(cls, values: Mapping[str, object]) -> TransactionConfig:
        """Build from values keyed by Kafka's names; keys left out keep Kafka's defaults."""
        by_key = {key: name for name, key in KAFKA_KEYS.items()}
        unknown = set(values) - set(by_key)
        if unknown:
            raise ValueError(f"not transaction coordinator keys: {sorted(unknown)}")
        return cls(**{by_key[key]: int(str(value)) for key, value in values.items()})


KAFKA_KEYS: Mapping[str, str] = {f.name: f.name.replace("_", ".") for f in fields(TransactionConfig)}
"""Field name → Kafka key ("transaction_max_timeout_ms" → "transaction.max.timeout.ms")."""
