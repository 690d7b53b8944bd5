"""Timing settings of the quorum, with Kafka's defaults declared once.

The five ``controller.quorum.*`` keys' defaults live in :mod:`server_common.config.quorum` (the
configuration may not import ``metadata``) and are re-exported here; the settings that are no keys
(the long poll, the entries per fetch, the check-quorum factor) are declared below.
:meth:`RaftConfig.from_broker_config` reads the keys from a :class:`BrokerConfig`; tests build a
:class:`RaftConfig` directly to shrink them without touching the constants.
"""

from __future__ import annotations

from dataclasses import dataclass

from server_common.config import BrokerConfig
from server_common.config.quorum import (
    QUORUM_ELECTION_BACKOFF_MAX_MS,
    QUORUM_ELECTION_TIMEOUT_MS,
    QUORUM_FETCH_TIMEOUT_MS,
    QUORUM_REQUEST_TIMEOUT_MS,
    QUORUM_RETRY_BACKOFF_MS,
)

__all__ = [
    "CHECK_QUORUM_FACTOR",
    "QUORUM_ELECTION_BACKOFF_MAX_MS",
    "QUORUM_ELECTION_TIMEOUT_MS",
    "QUORUM_FETCH_MAX_ENTRIES",
    "QUORUM_FETCH_MAX_WAIT_MS",
    "QUORUM_FETCH_TIMEOUT_MS",
    "QUORUM_REQUEST_TIMEOUT_MS",
    "QUORUM_RETRY_BACKOFF_MS",
    "RaftConfig",
]

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

    @classmethod
    def from_broker_config(cls, config: BrokerConfig) -> RaftConfig:
        """The settings of ``config``'s ``controller.quorum.*`` keys; the others keep their defaults."""
        return cls(
            election_timeout_ms=config.controller_quorum_election_timeout_ms,
            fetch_timeout_ms=config.controller_quorum_fetch_timeout_ms,
            election_backoff_max_ms=config.controller_quorum_election_backoff_max_ms,
            request_timeout_ms=config.controller_quorum_request_timeout_ms,
            retry_backoff_ms=config.controller_quorum_retry_backoff_ms,
        )

    @property
    def check_quorum_timeout_ms(self) -> int:
        return int(self.fetch_timeout_ms * CHECK_QUORUM_FACTOR)
