"""Where a node keeps its :class:`ElectionState` across restarts (Kafka's ``quorum-state`` file).

Raft's safety rests on it: a node must never vote twice in an epoch nor forget an epoch it has seen,
so the node writes here, durably, before it answers or sends anything that depends on the change.
"""

from __future__ import annotations

import json
import pathlib
from typing import Any, Protocol

from metadata.raft.state import ElectionState
from storage.checkpoint import write_atomically

QUORUM_STATE_FILE = "quorum-state"
DATA_VERSION = 0
_NONE = -1
"""Kafka writes an absent leader or vote as -1."""


class QuorumStateStore(Protocol):
    def read(self) -> ElectionState | None:
        """The last written state, or None if there is none yet."""
        ...

    def write(self, state: ElectionState) -> None:
        """Replace the state; durable when it returns."""
        ...


class InMemoryQuorumStateStore:
    """For tests: survives a simulated restart because the test keeps the object."""

    def __init__(self) -> None:
        self._state: ElectionState | None = None
        self.writes = 0

    def read(self) -> ElectionState | None:
        return self._state

    def write(self, state: ElectionState) -> None:
        self._state = state
        self.writes += 1


class FileQuorumStateStore:
    """JSON in ``<dir>/quorum-state``, replaced atomically (temp file, fsync, rename, fsync dir).

    The field names follow Kafka's file (``leaderEpoch``, ``leaderId``, ``votedId``, ``currentVoters``,
    ``data_version``) so an operator reading it recognises it.
    """

    def __init__(self, directory: pathlib.Path, voters: frozenset[int]) -> None:
        self.path = directory / QUORUM_STATE_FILE
        self._voters = voters

    def read(self) -> ElectionState | None:
        if not self.path.exists():
            return None
        data: dict[str, Any] = json.loads(self.path.read_text(encoding="utf-8"))
        if data.get("data_version") != DATA_VERSION:
            raise ValueError(f"{self.path}: unsupported data_version {data.get('data_version')!r}")
        leader = int(data["leaderId"])
        voted = int(data["votedId"])
        return ElectionState(
            epoch=int(data["leaderEpoch"]),
            voted_id=None if voted == _NONE else voted,
            leader_id=None if leader == _NONE else leader,
        )

    def write(self, state: ElectionState) -> None:
        data = {
            "leaderId": _NONE if state.leader_id is None else state.leader_id,
            "leaderEpoch": state.epoch,
            "votedId": _NONE if state.voted_id is None else state.voted_id,
            "currentVoters": [{"voterId": voter} for voter in sorted(self._voters)],
            "data_version": DATA_VERSION,
        }
        write_atomically(self.path, json.dumps(data, sort_keys=True) + "\n")
