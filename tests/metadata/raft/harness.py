"""A fake network of RaftNodes on one fake clock: messages are queued and delivered when the test says.

Nodes, logs and stores are kept apart so a test can restart a node: its log and quorum-state store
survive, its volatile state (timers, HW, leader tracking) does not.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable

from metadata.raft.config import RaftConfig
from metadata.raft.log import InMemoryRaftLog
from metadata.raft.messages import RaftMessage
from metadata.raft.quorum import RaftNode
from metadata.raft.state import Kind
from metadata.raft.store import InMemoryQuorumStateStore
from storage.clock import FakeClock


class Cluster:
    def __init__(self, voters: int, seed: int = 0, config: RaftConfig | None = None) -> None:
        self.clock = FakeClock(0)
        self.config = config or RaftConfig()
        self.rng = random.Random(seed)
        self.voter_ids = frozenset(range(1, voters + 1))
        self.logs = {i: InMemoryRaftLog() for i in self.voter_ids}
        self.stores = {i: InMemoryQuorumStateStore() for i in self.voter_ids}
        self.nodes: dict[int, RaftNode] = {}
        for i in sorted(self.voter_ids):
            self.restart(i)
        self.in_flight: list[RaftMessage] = []
        self.isolated: set[int] = set()
        self.leaders_by_epoch: dict[int, set[int]] = {}

    def restart(self, node_id: int) -> None:
        self.nodes[node_id] = RaftNode(
            node_id,
            self.voter_ids,
            self.logs[node_id],
            self.stores[node_id],
            self.clock,
            random.Random(self.rng.random()),
            self.config,
        )

    def send(self, messages: Iterable[RaftMessage]) -> None:
        for message in messages:
            if message.source not in self.isolated and message.destination not in self.isolated:
                self.in_flight.append(message)

    def deliver(self, message: RaftMessage) -> None:
        if message.destination in self.isolated or message.source in self.isolated:
            return
        self.send(self.nodes[message.destination].handle(message))
        self.record_leaders()

    def deliver_all(
        self, where: Callable[[RaftMessage], bool] = lambda _: True, limit: int = 100_000
    ) -> None:
        for _ in range(limit):
            chosen = next((m for m in self.in_flight if where(m)), None)
            if chosen is None:
                return
            self.in_flight.remove(chosen)
            self.deliver(chosen)
        raise AssertionError("messages kept flowing without time passing")

    def poll_all(self) -> None:
        for node in self.nodes.values():
            self.send(node.poll().messages)
        self.record_leaders()

    def run(self, ms: int, step_ms: int = 10) -> None:
        for _ in range(ms // step_ms):
            self.clock.advance(step_ms)
            self.poll_all()
            self.deliver_all()

    def record_leaders(self) -> None:
        for node in self.nodes.values():
            if node.is_leader:
                self.leaders_by_epoch.setdefault(node.epoch, set()).add(node.node_id)

    def leaders(self) -> list[RaftNode]:
        return [node for node in self.nodes.values() if node.is_leader]

    def the_leader(self) -> RaftNode:
        leaders = self.leaders()
        assert len(leaders) == 1, [(n.node_id, n.epoch) for n in leaders]
        return leaders[0]

    def kinds(self) -> dict[int, Kind]:
        return {i: node.state.kind for i, node in self.nodes.items()}
