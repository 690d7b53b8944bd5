"""Sentinel values of the Kafka protocol, declared once: every package imports them from here.

- :data:`ZERO_UUID` is Kafka's ``Uuid.ZERO_UUID``: no topic id (Fetch v12 and older, Metadata and
  DeleteTopics by name, a record that must carry an id and does not).
- :data:`NO_LEADER_EPOCH` is Kafka's ``RecordBatch.NO_PARTITION_LEADER_EPOCH``: a leader epoch that
  is absent or unknown. Requests send it for "no CurrentLeaderEpoch / LastFetchedEpoch" (the
  receiver then skips the check), committed offsets carry it when the committer knew no epoch,
  OffsetForLeaderEpoch and ListOffsets answer it for "undefined" (``EpochEndOffset.UNDEFINED_EPOCH``),
  and a record batch carries it until a leader stamps it.
- :class:`IsolationLevel` is the Fetch / ListOffsets IsolationLevel byte.
"""

from __future__ import annotations

import uuid
from enum import IntEnum

__all__ = ["NO_LEADER_EPOCH", "ZERO_UUID", "IsolationLevel"]

ZERO_UUID = uuid.UUID(int=0)
"""Kafka's ``Uuid.ZERO_UUID``: no topic id."""

NO_LEADER_EPOCH = -1
"""An absent or unknown leader epoch (Kafka's ``RecordBatch.NO_PARTITION_LEADER_EPOCH``)."""


class IsolationLevel(IntEnum):
    """The IsolationLevel of Fetch (v4+) and ListOffsets (v2+) requests.

    READ_UNCOMMITTED readers see up to the high watermark, READ_COMMITTED ones up to the last stable
    offset (followers, which send no isolation level of their own, read up to the log end offset).
    """

    READ_UNCOMMITTED = 0
    READ_COMMITTED = 1
