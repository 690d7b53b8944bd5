"""Raft's safety properties under arbitrary delivery, loss, duplication, delay and crashes.

A hypothesis state machine drives 3 to 5 nodes on the fake network of ``harness.Cluster``; after every
step it checks: at most one leader per epoch ever; an entry below any node's high watermark never
changes or disappears on a node that has it; and two logs holding an entry at the same offset and
epoch hold the same entry (log matching, which with the epoch tags makes their prefixes equal too).
"""

from __future__ import annotations

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from metadata.raft.log import Entry, InMemoryRaftLog
from tests.metadata.raft.harness import Cluster


class RaftSafety(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.cluster = Cluster(3)
        self.committed: dict[int, Entry] = {}
        self.held: dict[int, int] = {}
        """Per node: how many committed entries its log held; it must never hold fewer."""
        self.appended = 0

    @initialize(voters=st.integers(3, 5), seed=st.integers(0, 2**16))
    def start(self, voters: int, seed: int) -> None:
        self.cluster = Cluster(voters, seed)

    @rule(ms=st.sampled_from([1, 10, 100, 500, 1000, 2500]))
    def advance_clock(self, ms: int) -> None:
        self.cluster.clock.advance(ms)
        self.cluster.poll_all()

    @rule(ms=st.sampled_from([200, 1000, 3000]))
    def run_healthy(self, ms: int) -> None:
        """A stretch of reliable, instant delivery, so that elections and replication make progress."""
        self.cluster.run(ms, step_ms=50)

    @rule(data=st.data())
    def deliver_one(self, data: st.DataObject) -> None:
        if self.cluster.in_flight:
            index = data.draw(st.integers(0, len(self.cluster.in_flight) - 1))
            self.cluster.deliver(self.cluster.in_flight.pop(index))

    @rule()
    def deliver_everything(self) -> None:
        self.cluster.deliver_all()

    @rule(data=st.data())
    def drop_one(self, data: st.DataObject) -> None:
        if self.cluster.in_flight:
            self.cluster.in_flight.pop(data.draw(st.integers(0, len(self.cluster.in_flight) - 1)))

    @rule(data=st.data())
    def duplicate_one(self, data: st.DataObject) -> None:
        if self.cluster.in_flight:
            index = data.draw(st.integers(0, len(self.cluster.in_flight) - 1))
            self.cluster.in_flight.append(self.cluster.in_flight[index])

    @rule(data=st.data())
    def crash_and_restart(self, data: st.DataObject) -> None:
        node_id = data.draw(st.sampled_from(sorted(self.cluster.nodes)))
        self.cluster.restart(node_id)

    @rule(count=st.integers(1, 3))
    def leader_appends(self, count: int) -> None:
        for leader in self.cluster.leaders():
            payloads = [f"entry-{self.appended + i}".encode() for i in range(count)]
            self.appended += count
            leader.append(payloads)

    @invariant()
    def at_most_one_leader_per_epoch(self) -> None:
        self.cluster.record_leaders()
        for epoch, leaders in self.cluster.leaders_by_epoch.items():
            assert len(leaders) == 1, f"epoch {epoch} had leaders {sorted(leaders)}"

    @invariant()
    def committed_entries_never_change(self) -> None:
        for node in self.cluster.nodes.values():
            assert isinstance(node.log, InMemoryRaftLog)
            entries = node.log.entries()
            assert node.high_watermark <= len(entries)
            for entry in entries[: node.high_watermark]:
                known = self.committed.setdefault(entry.offset, entry)
                assert known == entry, f"node {node.node_id} changed committed {known} to {entry}"
        for node in self.cluster.nodes.values():
            assert isinstance(node.log, InMemoryRaftLog)
            entries = node.log.entries()
            for offset, entry in self.committed.items():
                if offset < len(entries):
                    assert entries[offset] == entry, f"node {node.node_id} lost committed {entry}"
            held = sum(1 for offset in self.committed if offset < len(entries))
            assert held >= self.held.get(node.node_id, 0), f"node {node.node_id} truncated committed entries"
            self.held[node.node_id] = held

    @invariant()
    def log_matching(self) -> None:
        seen: dict[tuple[int, int], Entry] = {}
        for node in self.cluster.nodes.values():
            assert isinstance(node.log, InMemoryRaftLog)
            for entry in node.log.entries():
                assert seen.setdefault((entry.offset, entry.epoch), entry) == entry


RaftSafety.TestCase.settings = settings(
    max_examples=100,
    stateful_step_count=50,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
test_raft_safety = RaftSafety.TestCase
