"""Random lives of groups: whatever clients do, the log rebuilds the state the coordinator holds.

A hypothesis state machine drives a few consumers (dynamic and static, in two groups, plus a manual
committer) through joins, syncs, heartbeats, commits, leaves and restarts, with time passing,
offsets expiring, groups being deleted and the coordinator moving away and back. Checked throughout:

* every request is answered exactly once (at most once at any time; by the end, once every timer
  had its chance, all of them), and every record in the log decodes;
* whenever every group is settled (Stable or Empty), a brand-new coordinator loading the log holds
  the same durable state as the live one (:func:`tests.coordinator.group.test_load.durable_view`);
* moving a settled partition away and back (unload, load) gives back the same state, and clients
  carry on against it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from coordinator.group import GroupState, JoinGroupResult, MemberIdentity, SyncGroupResult
from coordinator.group.rebalance import NEW_MEMBER_JOIN_TIMEOUT_MS
from protocol import consumer_offsets as co
from protocol.error_codes import ErrorCode
from tests.coordinator.group.helpers import Harness, Reply, config, consumer_protocols
from tests.coordinator.group.test_load import durable_view, reloaded

E = ErrorCode
SETTLED = (GroupState.STABLE, GroupState.EMPTY)
RESET_ERRORS = {E.UNKNOWN_MEMBER_ID, E.FENCED_INSTANCE_ID, E.ILLEGAL_GENERATION, E.NOT_COORDINATOR}


@dataclass
class Client:
    name: str
    group_id: str
    instance_id: str | None = None
    member_id: str = ""
    generation: int = -1
    last_join: JoinGroupResult | None = None
    join_reply: Reply[JoinGroupResult] | None = None
    sync_reply: Reply[SyncGroupResult] | None = None
    replies: list[Reply] = field(default_factory=list)

    def reset(self) -> None:
        self.member_id, self.generation, self.last_join = "", -1, None


CLIENTS = [
    ("d0", "g1", None),
    ("d1", "g1", None),
    ("s0", "g1", "static-0"),
    ("s1", "g1", "static-1"),
    ("d2", "g2", None),
    ("s2", "g2", "static-2"),
]
client_names = st.sampled_from([name for name, _, _ in CLIENTS])
topics = st.sampled_from([("a",), ("a", "b"), ("b",)])


class GroupLives(RuleBasedStateMachine):
    defer_log = False

    def __init__(self) -> None:
        super().__init__()
        cfg = config(offsets_topic_num_partitions=2, offsets_retention_minutes=1)
        self.h = Harness(cfg, defer_log=self.defer_log)
        self.clients = {name: Client(name, group, instance) for name, group, instance in CLIENTS}
        self.manual = Client("manual", "manual")
        self.writes_failed = False

    # -- absorbing answers --------------------------------------------------------------------------

    def _absorb(self) -> None:
        for client in self.clients.values():
            self._absorb_join(client)
            if client.sync_reply is not None and client.sync_reply.done:
                if client.sync_reply.value.error in RESET_ERRORS:
                    client.reset()
                client.sync_reply = None

    @staticmethod
    def _absorb_join(client: Client) -> None:
        reply = client.join_reply
        if reply is None or not reply.done:
            return
        result = reply.value
        client.join_reply = None
        if result.error is E.NONE:
            client.member_id, client.generation, client.last_join = (
                result.member_id,
                result.generation_id,
                result,
            )
        elif result.error is E.MEMBER_ID_REQUIRED:
            client.member_id = result.member_id
        elif result.error in RESET_ERRORS:
            client.reset()

    def _track(self, client: Client, reply: Reply) -> Reply:
        client.replies.append(reply)
        return reply

    # -- client actions -----------------------------------------------------------------------------

    @rule(name=client_names, subscribed=topics, restart=st.booleans())
    def join(self, name: str, subscribed: tuple[str, ...], restart: bool) -> None:
        client = self.clients[name]
        if client.join_reply is not None:
            return
        if restart:
            client.reset()
        client.join_reply = self._track(
            client,
            self.h.join(
                client.group_id,
                client.member_id,
                instance_id=client.instance_id,
                protocols=consumer_protocols(*subscribed),
                client_id=name,
            ),
        )
        self._absorb()

    @rule(name=client_names)
    def sync(self, name: str) -> None:
        client = self.clients[name]
        if client.sync_reply is not None or client.last_join is None:
            return
        result = client.last_join
        assignment = {m.member_id: f"{m.member_id}@{result.generation_id}".encode() for m in result.members}
        client.sync_reply = self._track(
            client,
            self.h.sync(
                client.group_id,
                client.member_id,
                client.generation,
                assignment,
                instance_id=client.instance_id,
            ),
        )
        self._absorb()

    @rule(name=client_names)
    def heartbeat(self, name: str) -> None:
        client = self.clients[name]
        if (
            client.member_id
            and self.h.heartbeat(client.group_id, client.member_id, client.generation, client.instance_id)
            in RESET_ERRORS
        ):
            client.reset()

    @rule(name=client_names, offset=st.integers(0, 1000), topic=st.sampled_from(["a", "b", "c"]))
    def commit(self, name: str, offset: int, topic: str) -> None:
        client = self.clients[name]
        self._track(
            client,
            self.h.commit(
                client.group_id,
                {(topic, 0): offset},
                member_id=client.member_id,
                generation=client.generation,
                instance_id=client.instance_id,
            ),
        )

    @rule(offset=st.integers(0, 1000))
    def manual_commit(self, offset: int) -> None:
        reply = self._track(self.manual, self.h.commit("manual", {("a", 1): offset}))
        if not self.defer_log:
            assert reply.value == {("a", 1): E.NONE}

    @rule(name=client_names)
    def leave(self, name: str) -> None:
        client = self.clients[name]
        if client.member_id:
            self.h.coordinator.leave_group(
                client.group_id, [MemberIdentity(client.member_id, client.instance_id)]
            )
            client.reset()
            self._absorb()

    @rule(group_id=st.sampled_from(["g1", "g2"]))
    def cooperate(self, group_id: str) -> None:
        """The clients of a group behave: those told MEMBER_ID_REQUIRED or REBALANCE_IN_PROGRESS
        rejoin, the join phase runs out, the leader assigns and everyone syncs. Random rules alone
        rarely get a group to Stable."""
        members = [c for c in self.clients.values() if c.group_id == group_id]
        group = self.h.coordinator.group(group_id)
        for client in members:
            in_rebalance = group is not None and group.is_in(GroupState.PREPARING_REBALANCE)
            if client.join_reply is None and (client.generation == -1 or in_rebalance):
                client.join_reply = self._track(
                    client,
                    self.h.join(
                        group_id, client.member_id, instance_id=client.instance_id, client_id=client.name
                    ),
                )
                self._absorb()
        self.h.settle()
        self._absorb()
        leaders_first = sorted(
            members, key=lambda c: c.last_join is None or c.last_join.leader_id != c.member_id
        )
        for client in leaders_first:
            self.sync(client.name)

    # -- the world ----------------------------------------------------------------------------------

    @rule(ms=st.sampled_from([0, 1000, 5000, 11_000, 31_000, 61_000, 301_000]))
    def advance(self, ms: int) -> None:
        self.h.advance(ms)
        self._absorb()

    @rule()
    def expire_offsets(self) -> None:
        self.h.coordinator.expire_offsets()

    @rule(group_id=st.sampled_from(["g1", "g2", "manual"]))
    def delete_group(self, group_id: str) -> None:
        self.h.coordinator.delete_groups([group_id], lambda errors: None)

    @precondition(lambda self: self._settled())
    @rule(partition=st.sampled_from([0, 1]))
    def move_away_and_back(self, partition: int) -> None:
        before = durable_view(self.h.coordinator.groups())
        self.h.coordinator.unload_partition(partition)
        self._absorb()
        self.h.coordinator.load_partition(partition, self.h.log.records(partition))
        assert durable_view(self.h.coordinator.groups()) == before

    # -- checks -------------------------------------------------------------------------------------

    def _settled(self) -> bool:
        """Every group Stable or Empty, and the log holds everything the live state has."""
        if self.writes_failed or self.h.log.deferred:
            return False
        return all(group.state in SETTLED for group in self.h.coordinator.groups())

    @invariant()
    def answered_at_most_once(self) -> None:
        for client in [*self.clients.values(), self.manual]:
            assert all(len(reply.answers) <= 1 for reply in client.replies)

    @invariant()
    def log_decodes(self) -> None:
        for partition in (0, 1):
            for record in self.h.log.records(partition):
                key = co.decode_key(record.key)
                assert not isinstance(key, co.UnknownKey)
                if record.value is not None and isinstance(key, co.OffsetCommitKey):
                    co.decode_offset_commit_value(record.value)

    @invariant()
    def log_rebuilds_the_settled_state(self) -> None:
        if self._settled():
            assert reloaded(self.h) == durable_view(self.h.coordinator.groups())

    def teardown(self) -> None:
        """Nothing waits forever: once every timer had its chance, every request was answered."""
        for _ in range(3):
            self.h.log.complete_all()
            self.h.advance(NEW_MEMBER_JOIN_TIMEOUT_MS)
        for client in [*self.clients.values(), self.manual]:
            assert all(reply.done for reply in client.replies), client


class GroupLivesWithSlowWrites(GroupLives):
    """The same lives with writes in flight while requests go on, some of which fail."""

    defer_log = True

    @rule(
        count=st.integers(1, 3),
        error=st.sampled_from(
            [None, None, E.NOT_LEADER_OR_FOLLOWER, E.REQUEST_TIMED_OUT, E.NOT_ENOUGH_REPLICAS]
        ),
    )
    def complete_writes(self, count: int, error: ErrorCode | None) -> None:
        for _ in range(min(count, len(self.h.log.deferred))):
            self.writes_failed |= error is not None
            self.h.log.complete_next(error)
        self._absorb()


TestGroupLives = GroupLives.TestCase
TestGroupLives.settings = settings(
    max_examples=60, stateful_step_count=40, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)

TestGroupLivesWithSlowWrites = GroupLivesWithSlowWrites.TestCase
TestGroupLivesWithSlowWrites.settings = TestGroupLives.settings
