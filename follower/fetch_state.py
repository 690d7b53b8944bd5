"""The state a fetcher keeps per partition: Kafka's PartitionFetchState (kafka-behaviour.md 5.2).

A partition is either TRUNCATING (its log may have diverged from the leader's, so it must find the
divergence point before fetching) or FETCHING. Independently of that it may be *delayed* until a
deadline after an error, which keeps it out of truncation and fetch requests without forgetting
where it was: when the deadline passes it resumes in the same state. States are immutable values;
the fetcher replaces them, which makes "did this partition change since the last request" a cheap
comparison.
"""

from __future__ import annotations

import enum
import time
import uuid
from dataclasses import dataclass, replace
from typing import NewType

from protocol import sentinels

TopicPartition = tuple[str, int]
"""(topic, partition), as storage.log_manager names it."""
Offset = NewType("Offset", int)
LeaderEpoch = NewType("LeaderEpoch", int)

UNDEFINED_EPOCH = LeaderEpoch(sentinels.NO_LEADER_EPOCH)
"""No epoch (Kafka's EpochEndOffset.UNDEFINED_EPOCH), as on the wire."""
UNDEFINED_EPOCH_OFFSET = Offset(sentinels.UNDEFINED_EPOCH_OFFSET)
"""No end offset (Kafka's EpochEndOffset.UNDEFINED_EPOCH_OFFSET), as on the wire."""


class ReplicaState(enum.Enum):
    """Kafka's ReplicaState: whether a partition must truncate before it may fetch."""

    TRUNCATING = "truncating"
    FETCHING = "fetching"


class MonotonicClock:
    """Milliseconds of the monotonic clock: backoff deadlines must not jump with the wall clock.

    It has the ``time_ms`` method of storage.clock.Clock, so tests pass a FakeClock instead.
    """

    def time_ms(self) -> int:
        return time.monotonic_ns() // 1_000_000


@dataclass(frozen=True, slots=True)
class InitialFetchState:
    """What the owner of a partition hands a fetcher when the broker starts following it.

    ``init_offset`` comes from the local log (see replica_log.initial_fetch_offset): the follower
    process owns its logs, so unlike Kafka it never needs to ask the leader for a starting offset.
    """

    init_offset: Offset
    current_leader_epoch: LeaderEpoch
    topic_id: uuid.UUID | None = None


@dataclass(frozen=True, slots=True)
class PartitionFetchState:
    """Where a partition's fetching stands (Kafka's PartitionFetchState).

    ``lag`` is the leader's high watermark minus the fetch offset as of the last response (None
    before the first one). ``last_fetched_epoch`` is the epoch of the last local batch, sent with
    every fetch so the leader can answer with a diverging epoch (KIP-320/KIP-595, fetch v12+).
    ``delayed_until_ms`` is a deadline of the fetcher's clock, or None.
    """

    fetch_offset: Offset
    current_leader_epoch: LeaderEpoch
    state: ReplicaState
    lag: int | None = None
    last_fetched_epoch: LeaderEpoch | None = None
    delayed_until_ms: int | None = None
    topic_id: uuid.UUID | None = None

    def is_delayed(self, now_ms: int) -> bool:
        return self.delayed_until_ms is not None and now_ms < self.delayed_until_ms

    def is_ready_for_fetch(self, now_ms: int) -> bool:
        """Fetching and not delayed: the partition goes into the next fetch request."""
        return self.state is ReplicaState.FETCHING and not self.is_delayed(now_ms)

    def is_truncating(self, now_ms: int) -> bool:
        """Truncating and not delayed: the partition takes part in the next truncation round."""
        return self.state is ReplicaState.TRUNCATING and not self.is_delayed(now_ms)

    @property
    def is_in_sync(self) -> bool:
        """Caught up with the leader's high watermark as of the last response."""
        return self.lag is not None and self.lag <= 0

    def delayed(self, until_ms: int) -> PartitionFetchState:
        """This state, held back until ``until_ms``."""
        return replace(self, delayed_until_ms=until_ms)

    def undelayed(self) -> PartitionFetchState:
        return replace(self, delayed_until_ms=None)


def _state(
    replica_state: ReplicaState,
    fetch_offset: int,
    current_leader_epoch: int,
    lag: int | None,
    last_fetched_epoch: int | None,
    topic_id: uuid.UUID | None,
) -> PartitionFetchState:
    return PartitionFetchState(
        Offset(fetch_offset),
        LeaderEpoch(current_leader_epoch),
        replica_state,
        lag=lag,
        last_fetched_epoch=None if last_fetched_epoch is None else LeaderEpoch(last_fetched_epoch),
        topic_id=topic_id,
    )


def fetching(
    fetch_offset: int,
    current_leader_epoch: int,
    *,
    lag: int | None = None,
    last_fetched_epoch: int | None = None,
    topic_id: uuid.UUID | None = None,
) -> PartitionFetchState:
    """A FETCHING state (shorthand used by the fetcher and tests)."""
    return _state(
        ReplicaState.FETCHING, fetch_offset, current_leader_epoch, lag, last_fetched_epoch, topic_id
    )


def truncating(
    fetch_offset: int,
    current_leader_epoch: int,
    *,
    lag: int | None = None,
    last_fetched_epoch: int | None = None,
    topic_id: uuid.UUID | None = None,
) -> PartitionFetchState:
    """A TRUNCATING state whose ``fetch_offset`` is the fallback truncation point (the HW)."""
    return _state(
        ReplicaState.TRUNCATING, fetch_offset, current_leader_epoch, lag, last_fetched_epoch, topic_id
    )
