"""Timing settings of the quorum, with Kafka's defaults declared once.

A later change reads them from BrokerConfig; until then :class:`RaftConfig` carries them so tests can
shrink them without touching the constants.
"""

from __future__ import annotations

from dataclasses import dataclass

QUORUM_ELECTION_TIMEOUT_MS = 1000
"""``controller.quorum.election.timeout.ms``: the base T of the randomized election timeout [T, 2T)."""

QUORUM_FETCH_TIMEOUT_MS = 2000
"""``controller.quorum.fetch.timeout.ms``: a follower that has not fetched successfully from the leader
for this long becomes Prospective; a leader that no majority fetched from for 1.5 times this resigns."""

QUORUM_ELECTION_BACKOFF_MAX_MS = 1000
"""``controller.quorum.election.backoff.max.ms``: the longest wait after a lost election."""

QUORUM_REQUEST_TIMEOUT_MS = 2000
"""``controller.quorum.request.timeout.ms``: an unanswered request (fetch, BeginQuorumEpoch) is resent."""

QUORUM_RETRY_BACKOFF_MS = 20
"""``controller.quorum.retry.backoff.ms``: the unit of the exponential election backoff."""

QUORUM_FETCH_MAX_WAIT_MS = 500
"""Kafka's leader parks an empty fetch up to this long (``replica.fetch.wait.max.ms``'s role); without a
long poll here, a follower paces its empty fetches by it instead."""

QUORUM_FETCH_MAX_ENTRIES = 100
"""How many entries one fetch response carries at most (a stand-in for ``fetch.max.bytes``)."""

CHECK_QUORUM_FACTOR = 1.5
"""Kafka's leader resigns once no majority fetched within 1.5 times the fetch timeout (check quorum)."""


@dataclass(frozen=True)
class RaftConfig:
    """The timing settings one :class:`~metadata.raft.quorum.RaftNode` runs with."""

    election_timeout_ms: int = QUORUM_ELECTION_TIMEOUT_MS
    fetch_timeout_ms: int = QUORUM_FETCH_TIMEOUT_MS
    election_backoff_max_ms: int = QUORUM_ELECTION_BACKOFF_MAX_MS
    request_timeout_ms: int = QUORUM_REQUEST_TIMEOUT_MS
    retry_backoff_ms: int = QUORUM_RETRY_BACKOFF_MS
    fetch_max_wait_ms: int = QUORUM_FETCH_MAX_WAIT_MS
    fetch_max_entries: int = QUORUM_FETCH_MAX_ENTRIES
    empty_fetch_backoff_ms: int = QUORUM_FETCH_MAX_WAIT_MS
    """How long a follower waits after an empty fetch response before fetching again. Over the
    network the leader long-polls (parks an empty fetch up to ``fetch_max_wait_ms``), so the driver
    sets 0; the simulated network answers at once and paces by it."""

    @property
    def check_quorum_timeout_ms(self) -> int:
        return int(self.fetch_timeout_ms * CHECK_QUORUM_FACTOR)
