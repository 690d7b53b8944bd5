"""Sentinel values of the Kafka protocol, declared once: every package imports them from here.

- :data:`ZERO_UUID` is Kafka's ``Uuid.ZERO_UUID``: no topic id (Fetch v12 and older, Metadata and
  DeleteTopics by name, a record that must carry an id and does not).
- :data:`NO_LEADER_EPOCH` is Kafka's ``RecordBatch.NO_PARTITION_LEADER_EPOCH``: a leader epoch that
  is absent or unknown. Requests send it for "no CurrentLeaderEpoch / LastFetchedEpoch" (the
  receiver then skips the check), committed offsets carry it when the committer knew no epoch,
  OffsetForLeaderEpoch and ListOffsets answer it for "undefined" (``EpochEndOffset.UNDEFINED_EPOCH``),
  and a record batch carries it until a leader stamps it.
- :data:`NO_TIMESTAMP` is Kafka's ``RecordBatch.NO_TIMESTAMP``: no timestamp. A record or batch
  without one, the LogAppendTime of a Produce answer for a CreateTime topic or a failed partition,
  the timestamp of a ListOffsets answer for a sentinel or for "not found", the time index entry of an
  empty segment, a producer that has written nothing yet, and the expire / current-state timestamps
  of ``__consumer_offsets`` values that carry none (Kafka names that -1
  ``OffsetCommitRequest.DEFAULT_TIMESTAMP``).
- :data:`LATEST_TIMESTAMP`, :data:`EARLIEST_TIMESTAMP`, :data:`MAX_TIMESTAMP` (v7+),
  :data:`EARLIEST_LOCAL_TIMESTAMP` (v8+) and :data:`LATEST_TIERED_TIMESTAMP` (v9+) are the special
  timestamps of a ListOffsets request (Kafka's ``ListOffsetsRequest`` constants). LATEST_TIMESTAMP
  and NO_TIMESTAMP are both -1: the first is a question ("the latest offset"), the second an answer
  ("no timestamp").
- :data:`UNKNOWN_OFFSET` is an absent or unknown offset, Kafka's ``ListOffsetsResponse.UNKNOWN_OFFSET``
  (no record qualifies) and ``UnifiedLog.UNKNOWN_OFFSET``. Kafka has further names for the same -1:
  ``ProduceResponse.INVALID_OFFSET`` (the base offset and log start offset of a failed partition),
  ``OffsetFetchResponse.INVALID_OFFSET`` (no committed offset), ``FetchResponse.INVALID_HIGH_WATERMARK``
  / ``INVALID_LAST_STABLE_OFFSET`` / ``INVALID_LOG_START_OFFSET`` (a partition whose read failed) and
  ``FetchRequest.INVALID_LOG_START_OFFSET`` (a consumer's fetch). The broker also uses it for a
  follower's log end / start offset before its first fetch, and for an append that failed.
- :data:`UNDEFINED_EPOCH_OFFSET` is Kafka's ``EpochEndOffset.UNDEFINED_EPOCH_OFFSET``: the end offset
  of an epoch the leader epoch cache cannot place (OffsetForLeaderEpoch, Fetch's DivergingEpoch),
  paired with NO_LEADER_EPOCH as the epoch.
- :class:`IsolationLevel` is the Fetch / ListOffsets IsolationLevel byte.
"""

from __future__ import annotations

import uuid
from enum import IntEnum

__all__ = [
    "EARLIEST_LOCAL_TIMESTAMP",
    "EARLIEST_TIMESTAMP",
    "LATEST_TIERED_TIMESTAMP",
    "LATEST_TIMESTAMP",
    "MAX_TIMESTAMP",
    "NO_LEADER_EPOCH",
    "NO_TIMESTAMP",
    "UNDEFINED_EPOCH_OFFSET",
    "UNKNOWN_OFFSET",
    "ZERO_UUID",
    "IsolationLevel",
]

ZERO_UUID = uuid.UUID(int=0)
"""Kafka's ``Uuid.ZERO_UUID``: no topic id."""

NO_LEADER_EPOCH = -1
"""An absent or unknown leader epoch (Kafka's ``RecordBatch.NO_PARTITION_LEADER_EPOCH``)."""

NO_TIMESTAMP = -1
"""No timestamp (Kafka's ``RecordBatch.NO_TIMESTAMP``)."""

LATEST_TIMESTAMP = -1
"""ListOffsets: the offset of the next record (the high watermark, the last stable offset for
READ_COMMITTED, the log end offset for followers)."""
EARLIEST_TIMESTAMP = -2
"""ListOffsets: the log start offset."""
MAX_TIMESTAMP = -3
"""ListOffsets v7+: the record with the largest timestamp."""
EARLIEST_LOCAL_TIMESTAMP = -4
"""ListOffsets v8+: the local log start offset (the log start offset without tiered storage)."""
LATEST_TIERED_TIMESTAMP = -5
"""ListOffsets v9+: the last offset in tiered storage (none here: the answer is "not found")."""

UNKNOWN_OFFSET = -1
"""An absent or unknown offset (Kafka's ``ListOffsetsResponse.UNKNOWN_OFFSET``; see the module doc
for its other names)."""

UNDEFINED_EPOCH_OFFSET = -1
"""The end offset of an epoch the epoch cache cannot place (Kafka's
``EpochEndOffset.UNDEFINED_EPOCH_OFFSET``)."""


class IsolationLevel(IntEnum):
    """The IsolationLevel of Fetch (v4+) and ListOffsets (v2+) requests.

    READ_UNCOMMITTED readers see up to the high watermark, READ_COMMITTED ones up to the last stable
    offset (followers, which send no isolation level of their own, read up to the log end offset).
    """

    READ_UNCOMMITTED = 0
    READ_COMMITTED = 1
