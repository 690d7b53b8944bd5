"""The quorum's messages as plain values, independent of the wire codec.

Each names its ``source`` and ``destination`` node so a node can answer without knowing about
connections; :mod:`metadata.raft.wire` maps them to Kafka's Vote, BeginQuorumEpoch and
EndQuorumEpoch, and broker/quorum/ sends them (Fetch through the brokers' metadata Fetch).
Epochs here are the sender's view, so any message can carry the news of a higher epoch (on which
Raft steps down).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from metadata.raft.log import Entry


class RaftError(enum.Enum):
    """The error codes a quorum response carries (Kafka's names)."""

    NONE = "NONE"
    FENCED_LEADER_EPOCH = "FENCED_LEADER_EPOCH"
    """The request's epoch is older than the receiver's: the response names the current leader."""
    NOT_LEADER_OR_FOLLOWER = "NOT_LEADER_OR_FOLLOWER"
    """A fetch reached a node that does not lead the epoch: the response names the leader if known."""
    INCONSISTENT_VOTER_SET = "INCONSISTENT_VOTER_SET"
    """A vote request from a node outside the voter set."""
    SNAPSHOT_NOT_FOUND = "SNAPSHOT_NOT_FOUND"
    """FetchSnapshot for a snapshot the leader no longer has (a newer one replaced it)."""
    POSITION_OUT_OF_RANGE = "POSITION_OUT_OF_RANGE"
    """FetchSnapshot at a byte position outside the snapshot."""


@dataclass(frozen=True)
class VoteRequest:
    """Vote (KIP-595) or, with ``pre_vote``, a pre-vote (KIP-996) for ``candidate_epoch``.

    A pre-vote names the epoch the sender would bump to (its epoch + 1) but changes no one's epoch.
    """

    source: int
    destination: int
    candidate_epoch: int
    last_epoch: int
    end_offset: int
    pre_vote: bool


@dataclass(frozen=True)
class VoteResponse:
    source: int
    destination: int
    epoch: int
    leader_id: int | None
    granted: bool
    pre_vote: bool
    error: RaftError = RaftError.NONE


@dataclass(frozen=True)
class BeginQuorumEpochRequest:
    """A new leader announces itself to the voters (they need not wait for a fetch timeout)."""

    source: int
    destination: int
    epoch: int
    leader_id: int


@dataclass(frozen=True)
class BeginQuorumEpochResponse:
    source: int
    destination: int
    epoch: int
    leader_id: int | None
    error: RaftError = RaftError.NONE


@dataclass(frozen=True)
class EndQuorumEpochRequest:
    """A resigning leader hands over: ``preferred_successors`` (best first) skip their election backoff."""

    source: int
    destination: int
    epoch: int
    leader_id: int
    preferred_successors: tuple[int, ...]


@dataclass(frozen=True)
class EndQuorumEpochResponse:
    source: int
    destination: int
    epoch: int
    leader_id: int | None
    error: RaftError = RaftError.NONE


@dataclass(frozen=True)
class FetchRequest:
    """Pull replication: ``fetch_offset`` is the fetcher's log end, ``last_fetched_epoch`` its last epoch."""

    source: int
    destination: int
    epoch: int
    fetch_offset: int
    last_fetched_epoch: int


@dataclass(frozen=True)
class DivergingEpoch:
    """The fetcher's log is not a prefix of the leader's: on the leader, ``epoch`` ends at ``end_offset``."""

    epoch: int
    end_offset: int


@dataclass(frozen=True)
class FetchResponse:
    """Entries from ``fetch_offset`` (echoed, to match the request), or a diverging epoch, and the HW."""

    source: int
    destination: int
    epoch: int
    leader_id: int | None
    fetch_offset: int
    high_watermark: int
    entries: tuple[Entry, ...] = ()
    diverging_epoch: DivergingEpoch | None = None
    error: RaftError = RaftError.NONE
    snapshot_id: tuple[int, int] | None = None
    """(end offset, epoch) of the snapshot to fetch instead: the fetch offset is below the log start."""
    log_start_offset: int = 0
    """The leader's log start: a follower cleans its own log no further (every voter keeps it)."""


@dataclass(frozen=True)
class FetchSnapshotRequest:
    """KIP-630: ``position`` onwards of the leader's snapshot ``snapshot_id`` (end offset, epoch)."""

    source: int
    destination: int
    epoch: int
    snapshot_id: tuple[int, int]
    position: int


@dataclass(frozen=True)
class FetchSnapshotResponse:
    """A chunk of the snapshot from ``position``; ``size`` is the whole snapshot's."""

    source: int
    destination: int
    epoch: int
    leader_id: int | None
    snapshot_id: tuple[int, int]
    size: int
    position: int
    data: bytes
    error: RaftError = RaftError.NONE


RaftMessage = (
    VoteRequest
    | VoteResponse
    | BeginQuorumEpochRequest
    | BeginQuorumEpochResponse
    | EndQuorumEpochRequest
    | EndQuorumEpochResponse
    | FetchRequest
    | FetchResponse
    | FetchSnapshotRequest
    | FetchSnapshotResponse
)
