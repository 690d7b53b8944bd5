"""Classic-protocol consumers in a consumer group (KIP-848's online migration, Kafka 4.0's
``classicGroup*ToConsumerGroup``), on simulated time: the server-side assignor decides, JoinGroup
answers the member epoch as generation, SyncGroup the member's partitions, Heartbeat
REBALANCE_IN_PROGRESS while the member must rejoin, LeaveGroup removes it."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from coordinator.group import OffsetCommitRequest, PartitionCommit
from coordinator.group.consumer.member import MemberState
from coordinator.group.requests import JoinProtocol, MemberIdentity
from protocol.consumer_protocol import (
    Assignment,
    Subscription,
    TopicPartitions,
    decode_assignment,
    encode_assignment,
    encode_subscription,
)
from protocol.error_codes import ErrorCode
from tests.coordinator.group.consumer_helpers import Consumer, ConsumerHarness
from tests.coordinator.group.helpers import config

pytestmark = pytest.mark.timeout(30)

SESSION_MS = 10_000
REBALANCE_MS = 30_000


@pytest.fixture
def h() -> ConsumerHarness:
    harness = ConsumerHarness(config())
    harness.topics.create("t", 4)
    return harness


@dataclass
class ClassicConsumer:
    """A cooperative classic consumer: JoinGroup (two steps), SyncGroup, Heartbeat; on
    REBALANCE_IN_PROGRESS it rejoins with what it still owns, having dropped what SyncGroup no
    longer gives it."""

    harness: ConsumerHarness
    topics: tuple[str, ...] = ("t",)
    member_id: str = ""
    generation: int = -1
    owned: dict[str, set[int]] = field(default_factory=dict)

    def _protocols(self) -> tuple[JoinProtocol, ...]:
        owned = tuple(TopicPartitions(t, tuple(sorted(p))) for t, p in sorted(self.owned.items()) if p)
        metadata = encode_subscription(Subscription(self.topics, owned_partitions=owned))
        return (JoinProtocol("cooperative-sticky", metadata), JoinProtocol("range", metadata))

    def join(self) -> ErrorCode:
        h = self.harness
        protocols = self._protocols()
        result = h.join(
            "group", self.member_id, protocols=protocols, session_ms=SESSION_MS, rebalance_ms=REBALANCE_MS
        ).value
        if result.error is ErrorCode.MEMBER_ID_REQUIRED:
            self.member_id = result.member_id
            result = h.join(
                "group", self.member_id, protocols=protocols, session_ms=SESSION_MS, rebalance_ms=REBALANCE_MS
            ).value
        if result.error is not ErrorCode.NONE:
            return result.error
        assert result.protocol_type == "consumer" and result.protocol_name == "cooperative-sticky"
        self.generation = result.generation_id
        return self.sync()

    def sync(self) -> ErrorCode:
        result = self.harness.sync(
            "group",
            self.member_id,
            self.generation,
            protocol_type="consumer",
            protocol_name="cooperative-sticky",
        ).value
        if result.error is ErrorCode.NONE:
            assignment = decode_assignment(result.assignment)
            self.owned = {tp.topic: set(tp.partitions) for tp in assignment.partitions}
        return result.error

    def heartbeat(self) -> ErrorCode:
        error = self.harness.heartbeat("group", self.member_id, self.generation)
        if error is ErrorCode.REBALANCE_IN_PROGRESS:
            return self.join()
        return error

    @property
    def partitions(self) -> set[int]:
        return set(self.owned.get("t", set()))


def _partitions(c: Consumer) -> set[int]:
    return {p for _, p in c.partitions}


def settle(modern: list[Consumer], classic: list[ClassicConsumer], rounds: int = 8) -> None:
    for _ in range(rounds):
        for m in modern:
            m.heartbeat()
        for c in classic:
            c.heartbeat()


def test_a_classic_consumer_joins_a_consumer_group_and_shares_the_partitions(h: ConsumerHarness) -> None:
    a = Consumer(h, "a", ("t",))
    a.heartbeat()
    assert _partitions(a) == {0, 1, 2, 3}
    c = ClassicConsumer(h)
    assert c.join() is ErrorCode.NONE
    assert c.member_id.startswith("generated-")
    settle([a], [c])
    assert _partitions(a) | c.partitions == {0, 1, 2, 3}
    assert not _partitions(a) & c.partitions
    assert len(c.partitions) == 2
    group = h.coordinator.consumer_group("group")
    assert group is not None and h.coordinator.group("group") is None
    member = group.member(c.member_id)
    assert member is not None and member.uses_classic_protocol and member.state is MemberState.STABLE
    assert member.classic_member_metadata is not None
    assert member.classic_member_metadata.session_timeout_ms == SESSION_MS
    # A classic member commits with its generation (the member epoch).
    answers: list[dict[tuple[str, int], ErrorCode]] = []
    partition = min(c.partitions)
    commit = OffsetCommitRequest("group", (PartitionCommit("t", partition, 5),), c.member_id, c.generation)
    h.coordinator.commit_offsets(commit, answers.append)
    stale = OffsetCommitRequest("group", (PartitionCommit("t", partition, 6),), c.member_id, c.generation - 1)
    h.coordinator.commit_offsets(stale, answers.append)
    assert answers == [{("t", partition): ErrorCode.NONE}, {("t", partition): ErrorCode.ILLEGAL_GENERATION}]


def test_a_revocation_makes_the_classic_heartbeat_ask_for_a_rejoin(h: ConsumerHarness) -> None:
    c = ClassicConsumer(h)
    a = Consumer(h, "a", ("t",))
    a.heartbeat()
    assert c.join() is ErrorCode.NONE
    settle([a], [c])
    before = set(c.partitions)
    b = Consumer(h, "b", ("t",))
    b.heartbeat()  # the group epoch moves on: the classic member must rejoin
    assert h.heartbeat("group", c.member_id, c.generation) is ErrorCode.REBALANCE_IN_PROGRESS
    settle([a, b], [c])
    owners = [_partitions(a), _partitions(b), c.partitions]
    assert set().union(*owners) == {0, 1, 2, 3}
    assert sum(len(o) for o in owners) == 4
    assert c.partitions < before  # it gave some up, one rejoin at a time


def test_a_classic_sync_after_a_new_epoch_is_told_to_rejoin(h: ConsumerHarness) -> None:
    a = Consumer(h, "a", ("t",))
    a.heartbeat()
    c = ClassicConsumer(h)
    assert c.join() is ErrorCode.NONE
    Consumer(h, "b", ("t",)).heartbeat()
    assert c.sync() is ErrorCode.REBALANCE_IN_PROGRESS
    assert h.heartbeat("group", c.member_id, c.generation + 5) is ErrorCode.ILLEGAL_GENERATION
    assert h.heartbeat("group", "a", 1) is ErrorCode.UNKNOWN_MEMBER_ID  # not a classic member


def test_incompatible_protocols_are_refused(h: ConsumerHarness) -> None:
    Consumer(h, "a", ("t",)).heartbeat()
    c = ClassicConsumer(h)
    assert c.join() is ErrorCode.NONE
    refused = h.join("group", "", protocol_type="connect")
    assert refused.value.error is ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    other = h.join("group", "")  # offers only "range"... which c offers too
    assert other.value.error is ErrorCode.MEMBER_ID_REQUIRED
    from tests.coordinator.group.helpers import consumer_protocols

    roundrobin = h.join("group", "", protocols=consumer_protocols("t", names=("roundrobin",)))
    assert roundrobin.value.error is ErrorCode.INCONSISTENT_GROUP_PROTOCOL


def test_a_full_group_refuses_a_classic_member(h: ConsumerHarness) -> None:
    h = ConsumerHarness(config(group_consumer_max_size=1))
    h.topics.create("t", 1)
    Consumer(h, "a", ("t",)).heartbeat()
    assert ClassicConsumer(h).join() is ErrorCode.GROUP_MAX_SIZE_REACHED


def test_a_classic_member_leaves_and_its_partitions_go_to_the_others(h: ConsumerHarness) -> None:
    a = Consumer(h, "a", ("t",))
    a.heartbeat()
    c = ClassicConsumer(h)
    assert c.join() is ErrorCode.NONE
    settle([a], [c])
    left = h.coordinator.leave_group("group", [MemberIdentity(c.member_id), MemberIdentity("a")])
    assert [m.error for m in left.members] == [ErrorCode.NONE, ErrorCode.UNKNOWN_MEMBER_ID]
    settle([a], [])
    assert _partitions(a) == {0, 1, 2, 3}
    group = h.coordinator.consumer_group("group")
    assert group is not None and group.member(c.member_id) is None


def test_a_silent_classic_member_is_fenced_after_its_own_session_timeout(h: ConsumerHarness) -> None:
    a = Consumer(h, "a", ("t",))
    a.heartbeat()
    c = ClassicConsumer(h)
    assert c.join() is ErrorCode.NONE
    settle([a], [c])
    for _ in range(3):
        h.advance(SESSION_MS // 2)
        a.heartbeat()
    group = h.coordinator.consumer_group("group")
    assert group is not None and group.member(c.member_id) is None
    settle([a], [])
    assert _partitions(a) == {0, 1, 2, 3}


def test_a_classic_member_that_does_not_sync_is_fenced_after_its_rebalance_timeout(
    h: ConsumerHarness,
) -> None:
    a = Consumer(h, "a", ("t",))
    a.heartbeat()
    c = ClassicConsumer(h)
    first = h.join(
        "group", "", protocols=c._protocols(), session_ms=REBALANCE_MS * 2, rebalance_ms=REBALANCE_MS
    )
    joined = h.join(
        "group",
        first.value.member_id,
        protocols=c._protocols(),
        session_ms=REBALANCE_MS * 2,
        rebalance_ms=REBALANCE_MS,
    )
    assert joined.value.error is ErrorCode.NONE
    for _ in range(4):
        h.advance(REBALANCE_MS // 3)
        a.heartbeat()
    group = h.coordinator.consumer_group("group")
    assert group is not None and group.member(joined.value.member_id) is None


def test_classic_members_survive_a_reload(h: ConsumerHarness) -> None:
    a = Consumer(h, "a", ("t",))
    a.heartbeat()
    c = ClassicConsumer(h)
    assert c.join() is ErrorCode.NONE
    settle([a], [c])
    h.reload()
    group = h.coordinator.consumer_group("group")
    assert group is not None
    member = group.member(c.member_id)
    assert member is not None and member.uses_classic_protocol
    assert c.heartbeat() is ErrorCode.NONE
    assert c.partitions and not c.partitions & _partitions(a)


# -- the online downgrade -----------------------------------------------------------------------------


def _mixed_group(h: ConsumerHarness) -> tuple[Consumer, ClassicConsumer]:
    a = Consumer(h, "a", ("t",))
    a.heartbeat()
    c = ClassicConsumer(h)
    assert c.join() is ErrorCode.NONE
    settle([a], [c])
    return a, c


def test_the_last_kip848_member_leaving_downgrades_the_group_to_classic(h: ConsumerHarness) -> None:
    a, c = _mixed_group(h)
    h.commit(member_id=c.member_id, generation=c.generation, offsets={("t", min(c.partitions)): 4})
    epoch = h.coordinator.consumer_group("group").group_epoch  # type: ignore[union-attr]
    assert a.leave().error is ErrorCode.NONE
    assert h.coordinator.consumer_group("group") is None
    classic = h.coordinator.group("group")
    assert classic is not None and classic.state.value == "PreparingRebalance"
    assert classic.generation_id == epoch and classic.member_ids == [c.member_id]
    assert classic.protocol_name == "cooperative-sticky"
    assert (
        h.coordinator.fetch_offsets("group", [("t", min(c.partitions))])
        .partitions[("t", min(c.partitions))]
        .offset
        == 4
    )
    # The classic member hears of the rebalance and rejoins the classic group, as its leader.
    assert h.heartbeat("group", c.member_id, c.generation) is ErrorCode.REBALANCE_IN_PROGRESS
    joined = h.join(
        "group", c.member_id, protocols=c._protocols(), session_ms=SESSION_MS, rebalance_ms=REBALANCE_MS
    )
    h.settle()
    assert joined.value.error is ErrorCode.NONE and joined.value.leader_id == c.member_id
    assert joined.value.generation_id == epoch + 1
    # The log holds the classic group, not the consumer group.
    h.reload()
    assert h.coordinator.consumer_group("group") is None
    assert h.coordinator.group("group") is not None


def test_a_fenced_kip848_member_downgrades_the_group_too(h: ConsumerHarness) -> None:
    _a, c = _mixed_group(h)
    for _ in range(12):
        h.advance(SESSION_MS // 2)
        assert c.harness.heartbeat("group", c.member_id, c.generation) in (
            ErrorCode.NONE,
            ErrorCode.REBALANCE_IN_PROGRESS,
        )
        if h.coordinator.group("group") is not None:
            break
    assert h.coordinator.consumer_group("group") is None
    assert h.coordinator.group("group") is not None


def test_no_downgrade_under_the_upgrade_or_disabled_policy(h: ConsumerHarness) -> None:
    for policy in ("upgrade", "disabled"):
        h = ConsumerHarness(config(group_consumer_migration_policy=policy))
        h.topics.create("t", 4)
        a, c = _mixed_group(h)
        a.leave()
        group = h.coordinator.consumer_group("group")
        assert group is not None and list(group.members) == [c.member_id]
        assert c.heartbeat() is ErrorCode.NONE
        settle([], [c])
        assert c.partitions == {0, 1, 2, 3}


def test_no_downgrade_while_another_kip848_member_remains(h: ConsumerHarness) -> None:
    a, _c = _mixed_group(h)
    b = Consumer(h, "b", ("t",))
    b.heartbeat()
    a.leave()
    assert h.coordinator.consumer_group("group") is not None
    b.leave()
    assert h.coordinator.consumer_group("group") is None and h.coordinator.group("group") is not None


def test_no_downgrade_when_the_classic_members_exceed_group_max_size(h: ConsumerHarness) -> None:
    h = ConsumerHarness(config(group_max_size=1))
    h.topics.create("t", 4)
    a, _c = _mixed_group(h)
    d = ClassicConsumer(h)
    assert d.join() is ErrorCode.NONE
    a.leave()
    assert h.coordinator.consumer_group("group") is not None


# -- the online upgrade -------------------------------------------------------------------------------


def _classic_group(h: ConsumerHarness, count: int = 2) -> list[ClassicConsumer]:
    """A Stable classic group whose leader gives each member two partitions of t."""
    members = [ClassicConsumer(h) for _ in range(count)]
    joins = []
    for c in members:
        first = h.join(
            "group", "", protocols=c._protocols(), session_ms=SESSION_MS, rebalance_ms=REBALANCE_MS
        )
        c.member_id = first.value.member_id
    for c in members:
        joins.append(
            h.join(
                "group",
                c.member_id,
                protocols=c._protocols(),
                session_ms=SESSION_MS,
                rebalance_ms=REBALANCE_MS,
            )
        )
    h.settle()
    generation = joins[0].value.generation_id
    assignments = {
        c.member_id: encode_assignment(Assignment((TopicPartitions("t", (2 * i, 2 * i + 1)),)))
        for i, c in enumerate(members)
    }
    leader = joins[0].value.leader_id
    syncs = {}
    for c in members:
        c.generation = generation
        syncs[c.member_id] = h.sync(
            "group", c.member_id, generation, assignments if c.member_id == leader else None
        )
    for c in members:
        result = syncs[c.member_id].value
        assert result.error is ErrorCode.NONE
        c.owned = {tp.topic: set(tp.partitions) for tp in decode_assignment(result.assignment).partitions}
    return members


def test_a_kip848_member_upgrades_a_classic_group_keeping_its_members(h: ConsumerHarness) -> None:
    c1, c2 = _classic_group(h)
    generation = c1.generation
    a = Consumer(h, "a", ("t",))
    assert a.heartbeat().error is ErrorCode.NONE
    assert h.coordinator.group("group") is None
    group = h.coordinator.consumer_group("group")
    assert group is not None and set(group.members) == {c1.member_id, c2.member_id, "a"}
    member = group.member(c1.member_id)
    assert member is not None and member.uses_classic_protocol
    assert member.classic_member_metadata is not None
    assert member.classic_member_metadata.session_timeout_ms == SESSION_MS
    assert group.group_epoch == generation + 1
    # The classic members keep consuming what they had, are told to rejoin, and give some up.
    assert c1.heartbeat() is ErrorCode.NONE  # rejoined through REBALANCE_IN_PROGRESS
    settle([a], [c1, c2], rounds=10)
    owners = [_partitions(a), c1.partitions, c2.partitions]
    assert set().union(*owners) == {0, 1, 2, 3} and sum(map(len, owners)) == 4
    assert _partitions(a)
    # The log rebuilds the converted group.
    h.reload()
    assert h.coordinator.group("group") is None
    reloaded = h.coordinator.consumer_group("group")
    assert reloaded is not None and set(reloaded.members) == {c1.member_id, c2.member_id, "a"}


def test_no_upgrade_under_the_downgrade_or_disabled_policy(h: ConsumerHarness) -> None:
    for policy in ("downgrade", "disabled"):
        h = ConsumerHarness(config(group_consumer_migration_policy=policy))
        h.topics.create("t", 4)
        _classic_group(h)
        refused = Consumer(h, "a", ("t",)).heartbeat()
        assert refused.error is ErrorCode.GROUP_ID_NOT_FOUND
        assert h.coordinator.group("group") is not None


def test_no_upgrade_of_a_group_larger_than_group_consumer_max_size(h: ConsumerHarness) -> None:
    h = ConsumerHarness(config(group_consumer_max_size=1))
    h.topics.create("t", 4)
    _classic_group(h)
    assert Consumer(h, "a", ("t",)).heartbeat().error is ErrorCode.GROUP_ID_NOT_FOUND
    assert h.coordinator.group("group") is not None


def test_no_upgrade_of_a_group_of_another_protocol_type(h: ConsumerHarness) -> None:
    first = h.join("group", "", protocol_type="connect")
    h.join("group", first.value.member_id, protocol_type="connect")
    h.settle()
    assert Consumer(h, "a", ("t",)).heartbeat().error is ErrorCode.GROUP_ID_NOT_FOUND


def test_consumer_group_describe_tells_classic_members_apart(h: ConsumerHarness) -> None:
    _a, c = _mixed_group(h)
    described = h.coordinator.consumer_group_describe(["group"])[0]
    kinds = {m.member_id: m.uses_classic_protocol for m in described.members}
    assert kinds == {"a": False, c.member_id: True}


def test_a_member_switching_to_consumer_group_heartbeat_is_no_longer_classic(h: ConsumerHarness) -> None:
    """Kafka clears the ClassicMemberMetadata of a member that heartbeats with the consumer protocol."""
    _a, c = _mixed_group(h)
    switched = Consumer(h, c.member_id, ("t",))
    assert switched.heartbeat().error is ErrorCode.NONE
    group = h.coordinator.consumer_group("group")
    assert group is not None
    member = group.member(c.member_id)
    assert member is not None and not member.uses_classic_protocol
    assert h.heartbeat("group", c.member_id, member.member_epoch) is ErrorCode.UNKNOWN_MEMBER_ID
