"""The records of ``__transaction_state``, byte for byte as Kafka's transaction coordinator writes them.

Each record's key names a transactional id; its value is that id's whole transaction state (a null
value is a tombstone: the id expired). Key and value each start with an int16 version, then the body
(Kafka's ``MessageUtil.toVersionPrefixedBytes``)::

    key    version 0   TransactionLogKey     transactional_id
    value  version 0   TransactionLogValue   producer_id, producer_epoch, transaction_timeout_ms,
                                             transaction_status, transaction_partitions (null when
                                             Empty), last update and start timestamps
    value  version 1   the same, flexible (compact strings and arrays, tagged fields), with three
                       tagged fields: previous_producer_id (tag 0), next_producer_id (tag 1) and
                       client_transaction_version (tag 2)

Kafka writes value version 0 while the cluster's ``transaction.version`` feature is 0 and version 1
from feature level 1 on (:func:`value_version_for`). A tagged field is written only when it differs
from its default (-1, -1 and 0), as Kafka's generated writers do. Readers accept both versions.

A key of any other version is returned as :class:`UnknownTransactionLogKey`, which the loader skips
(Kafka's ``UnknownKey``: the left-over of an aborted upgrade); a value of an unknown version is a
:class:`~protocol.errors.DecodeError`, as it is fatal to Kafka's loader. Like Kafka's reader, decoding
ignores bytes after a body.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from io import BytesIO
from typing import NamedTuple

from protocol.errors import DecodeError
from protocol.schema import Field, MessageSpec
from protocol.versioned import encode_versioned, read_version

TRANSACTION_LOG_KEY_VERSION = 0
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1

TRANSACTION_LOG_KEY_SPEC = MessageSpec(
    0,
    "TransactionLogKey",
    "coordinator-key",
    "0",
    "none",
    (Field("transactional_id", "string", "0"),),
)
TRANSACTION_LOG_VALUE_SPEC = MessageSpec(
    0,
    "TransactionLogValue",
    "coordinator-value",
    "0-1",
    "1+",
    (
        Field("producer_id", "int64", "0+"),
        Field("previous_producer_id", "int64", "1+", tagged_versions="1+", tag=0, default=NO_PRODUCER_ID),
        Field("next_producer_id", "int64", "1+", tagged_versions="1+", tag=1, default=NO_PRODUCER_ID),
        Field("producer_epoch", "int16", "0+"),
        Field("transaction_timeout_ms", "int32", "0+"),
        Field("transaction_status", "int8", "0+"),
        Field(
            "transaction_partitions",
            "[]PartitionsSchema",
            "0+",
            nullable_versions="0+",
            fields=(
                Field("topic", "string", "0+"),
                Field("partition_ids", "[]int32", "0+"),
            ),
        ),
        Field("transaction_last_update_timestamp_ms", "int64", "0+"),
        Field("transaction_start_timestamp_ms", "int64", "0+"),
        Field("client_transaction_version", "int16", "1+", tagged_versions="1+", tag=2, default=0),
    ),
)


def value_version_for(transaction_version_level: int) -> int:
    """The value version Kafka writes at a ``transaction.version`` feature level: 0 below level 1
    (the highest non-flexible version), 1 from level 1 on."""
    return 0 if transaction_version_level < 1 else 1


class TransactionLogKey(NamedTuple):
    transactional_id: str


class UnknownTransactionLogKey(NamedTuple):
    """A key whose version this reader does not know: skipped on load."""

    version: int


@dataclass(frozen=True, slots=True)
class TransactionLogValue:
    """One transactional id's state as stored. ``partitions`` is None for a transaction in state
    Empty (Kafka stores a null array then) and maps each topic to its partitions otherwise, in the
    order the record lists them."""

    producer_id: int
    producer_epoch: int
    transaction_timeout_ms: int
    transaction_status: int
    partitions: tuple[tuple[str, tuple[int, ...]], ...] | None
    last_update_timestamp_ms: int
    start_timestamp_ms: int
    previous_producer_id: int = NO_PRODUCER_ID
    next_producer_id: int = NO_PRODUCER_ID
    client_transaction_version: int = 0

    def topic_partitions(self) -> frozenset[tuple[str, int]]:
        """The partitions as (topic, partition) pairs; none for a null array."""
        if self.partitions is None:
            return frozenset()
        return frozenset((topic, p) for topic, ids in self.partitions for p in ids)


def group_partitions(partitions: Iterable[tuple[str, int]]) -> tuple[tuple[str, tuple[int, ...]], ...]:
    """(topic, partition) pairs as the record lists them: one entry per topic, topics and partition
    ids sorted (Kafka's order is a hash map's; any order reads back the same)."""
    by_topic: dict[str, set[int]] = {}
    for topic, partition in partitions:
        by_topic.setdefault(topic, set()).add(partition)
    return tuple((topic, tuple(sorted(by_topic[topic]))) for topic in sorted(by_topic))


def encode_key(transactional_id: str) -> bytes:
    return encode_versioned(
        TRANSACTION_LOG_KEY_SPEC, TRANSACTION_LOG_KEY_VERSION, {"transactional_id": transactional_id}
    )


def decode_key(key: bytes | bytearray | memoryview) -> TransactionLogKey | UnknownTransactionLogKey:
    io = BytesIO(key)
    version = read_version(io, "transaction log key")
    if version not in TRANSACTION_LOG_KEY_SPEC.versions:
        return UnknownTransactionLogKey(version)
    return TransactionLogKey(TRANSACTION_LOG_KEY_SPEC.codec(version).read(io).transactional_id)


def encode_value(value: TransactionLogValue, version: int = 1) -> bytes:
    """``value`` as ``version``; version 0 cannot hold the tagged fields, which are dropped (as
    Kafka drops them when it writes version 0)."""
    partitions = None
    if value.partitions is not None:
        partitions = [{"topic": topic, "partition_ids": list(ids)} for topic, ids in value.partitions]
    data = {
        "producer_id": value.producer_id,
        "previous_producer_id": value.previous_producer_id,
        "next_producer_id": value.next_producer_id,
        "producer_epoch": value.producer_epoch,
        "transaction_timeout_ms": value.transaction_timeout_ms,
        "transaction_status": value.transaction_status,
        "transaction_partitions": partitions,
        "transaction_last_update_timestamp_ms": value.last_update_timestamp_ms,
        "transaction_start_timestamp_ms": value.start_timestamp_ms,
        "client_transaction_version": value.client_transaction_version,
    }
    return encode_versioned(TRANSACTION_LOG_VALUE_SPEC, version, data)


def decode_value(value: bytes | bytearray | memoryview | None) -> TransactionLogValue | None:
    """The state a value holds; None for a tombstone. DecodeError on an unknown version or a
    truncated body."""
    if value is None:
        return None
    io = BytesIO(value)
    version = read_version(io, "transaction log value")
    if version not in TRANSACTION_LOG_VALUE_SPEC.versions:
        raise DecodeError(
            f"unknown TransactionLogValue version {version} "
            f"(valid {TRANSACTION_LOG_VALUE_SPEC.valid_versions})"
        )
    data = TRANSACTION_LOG_VALUE_SPEC.codec(version).read(io)
    raw = data.transaction_partitions
    partitions = (
        None if raw is None else tuple((p.topic, tuple(int(i) for i in p.partition_ids)) for p in raw)
    )
    return TransactionLogValue(
        producer_id=data.producer_id,
        producer_epoch=data.producer_epoch,
        transaction_timeout_ms=data.transaction_timeout_ms,
        transaction_status=data.transaction_status,
        partitions=partitions,
        last_update_timestamp_ms=data.transaction_last_update_timestamp_ms,
        start_timestamp_ms=data.transaction_start_timestamp_ms,
        previous_producer_id=data.previous_producer_id,
        next_producer_id=data.next_producer_id,
        client_transaction_version=data.client_transaction_version,
    )


__all__ = [
    "NO_PRODUCER_EPOCH",
    "NO_PRODUCER_ID",
    "TRANSACTION_LOG_KEY_SPEC",
    "TRANSACTION_LOG_KEY_VERSION",
    "TRANSACTION_LOG_VALUE_SPEC",
    "TransactionLogKey",
    "TransactionLogValue",
    "UnknownTransactionLogKey",
    "decode_key",
    "decode_value",
    "encode_key",
    "encode_value",
    "group_partitions",
    "value_version_for",
]
