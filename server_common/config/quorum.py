"""Kafka's defaults of the metadata quorum's timing keys (``controller.quorum.*``), declared once.

:data:`~server_common.config.definitions.DEFINITIONS` declares the keys with these defaults, and
:class:`metadata.raft.config.RaftConfig` takes them as its field defaults: they live here because the
configuration may not import ``metadata`` (tests/test_architecture.py), while ``metadata`` may import
the configuration.
"""

from __future__ import annotations

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
