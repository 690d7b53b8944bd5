"""GroupMetadata, MemberMetadata, states, subscriptions and configuration on their own."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from coordinator.group import GroupCoordinatorConfig, GroupState, JoinGroupResult, JoinProtocol
from coordinator.group.config import KAFKA_KEYS
from coordinator.group.group import GroupMetadata
from coordinator.group.member import MemberMetadata
from coordinator.group.offsets import CommitRecord, GroupOffsets, OffsetAndMetadata
from coordinator.group.subscriptions import encode_subscription, subscribed_topics, union_of_subscriptions
from protocol.error_codes import ErrorCode
from protocol.errors import DecodeError
from storage.clock import FakeClock

S = GroupState


def member(
    member_id: str, *protocols: str, instance: str | None = None, metadata: bytes = b""
) -> MemberMetadata:
    return MemberMetadata(
        member_id=member_id,
        group_instance_id=instance,
        client_id="c",
        client_host="/h",
        rebalance_timeout_ms=1000,
        session_timeout_ms=500,
        protocol_type="consumer",
        supported_protocols=tuple(JoinProtocol(p, metadata) for p in protocols or ("range",)),
    )


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(5000)


# -- states ---------------------------------------------------------------------------------------

ALLOWED = {
    (S.EMPTY, S.PREPARING_REBALANCE),
    (S.STABLE, S.PREPARING_REBALANCE),
    (S.COMPLETING_REBALANCE, S.PREPARING_REBALANCE),
    (S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE),
    (S.PREPARING_REBALANCE, S.EMPTY),
    (S.COMPLETING_REBALANCE, S.STABLE),
    *((state, S.DEAD) for state in S),
}


@pytest.mark.parametrize("start", list(S))
@pytest.mark.parametrize("target", list(S))
def test_transitions_are_kafkas(clock: FakeClock, start: GroupState, target: GroupState) -> None:
    group = GroupMetadata("g", start, clock)
    clock.advance(10)
    if (start, target) in ALLOWED:
        group.transition_to(target)
        assert group.state is target and group.current_state_timestamp == 5010
    else:
        with pytest.raises(RuntimeError):
            group.transition_to(target)
        assert group.state is start and group.current_state_timestamp == 5000


def test_state_names_are_kafkas() -> None:
    assert [s.value for s in S] == ["Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead"]


# -- membership -----------------------------------------------------------------------------------


def test_first_member_sets_protocol_type_and_leads(clock: FakeClock) -> None:
    group = GroupMetadata("g", S.EMPTY, clock)
    group.add(member("a"))
    group.add(member("b"))
    assert group.protocol_type == "consumer" and group.leader_id == "a"
    group.remove("a")
    assert group.leader_id == "b"
    group.remove("b")
    assert group.leader_id is None and group.size == 0


def test_counts_members_awaiting_join(clock: FakeClock) -> None:
    group = GroupMetadata("g", S.EMPTY, clock)
    answers: list[JoinGroupResult] = []
    group.add(member("a"), answers.append)
    group.add(member("b"))
    assert group.num_awaiting_join == 1 and not group.has_all_members_joined
    group.update_member(group.get("b"), (JoinProtocol("range", b""),), 1, 1, answers.append)
    assert group.has_all_members_joined
    group.add_pending_member("p")
    assert not group.has_all_members_joined
    group.maybe_invoke_join_callback(group.get("a"), JoinGroupResult.failure("a", ErrorCode.NONE))
    group.maybe_invoke_join_callback(group.get("a"), JoinGroupResult.failure("a", ErrorCode.NONE))
    assert len(answers) == 1 and group.num_awaiting_join == 1


def test_a_failing_callback_does_not_corrupt_the_group(clock: FakeClock) -> None:
    group = GroupMetadata("g", S.EMPTY, clock)

    def broken(_: JoinGroupResult) -> None:
        raise RuntimeError("boom")

    group.add(member("a"), broken)
    group.maybe_invoke_join_callback(group.get("a"), JoinGroupResult.failure("a", ErrorCode.NONE))
    assert group.num_awaiting_join == 0 and not group.get("a").is_awaiting_join


def test_static_members_are_tracked_and_replaced(clock: FakeClock) -> None:
    group = GroupMetadata("g", S.EMPTY, clock)
    fenced: list[JoinGroupResult] = []
    group.add(member("a-1", instance="a"), fenced.append)
    group.add_pending_sync_member("a-1")
    replaced = group.replace_static_member("a", "a-1", "a-2")
    assert replaced.member_id == "a-2" and group.leader_id == "a-2"
    assert group.static_members == {"a": "a-2"} and group.pending_sync_member_ids == ["a-2"]
    assert fenced == [JoinGroupResult.failure("a-1", ErrorCode.FENCED_INSTANCE_ID)]
    with pytest.raises(RuntimeError):
        group.add(member("a-3", instance="a"))
    group.remove("a-2")
    assert group.static_members == {}


def test_a_new_leader_is_elected_among_rejoined_members(clock: FakeClock) -> None:
    group = GroupMetadata("g", S.EMPTY, clock)
    group.add(member("a"))
    group.add(member("b"))
    assert not group.maybe_elect_new_joined_leader()  # nobody rejoined
    group.update_member(group.get("b"), group.get("b").supported_protocols, 1, 1, lambda result: None)
    assert group.maybe_elect_new_joined_leader() and group.leader_id == "b"


# -- protocols ------------------------------------------------------------------------------------


def test_protocol_support_and_vote(clock: FakeClock) -> None:
    group = GroupMetadata("g", S.EMPTY, clock)
    assert group.supports_protocols("consumer", ["anything"])
    assert not group.supports_protocols("", ["range"]) and not group.supports_protocols("consumer", [])
    group.add(member("a", "sticky", "range", "roundrobin"))
    group.add(member("b", "roundrobin", "range"))
    group.add(member("c", "range", "roundrobin"))
    group.transition_to(S.PREPARING_REBALANCE)
    assert group.supports_protocols("consumer", ["roundrobin"])
    assert not group.supports_protocols("consumer", ["sticky"])
    assert not group.supports_protocols("connect", ["range"])
    # candidates: range, roundrobin; first choices: a→range, b→roundrobin, c→range
    assert group.select_protocol() == "range"


def test_a_tied_vote_goes_to_the_protocol_voted_first(clock: FakeClock) -> None:
    group = GroupMetadata("g", S.EMPTY, clock)
    group.add(member("a", "roundrobin", "range"))
    group.add(member("b", "range", "roundrobin"))
    assert group.select_protocol() == "roundrobin"


def test_next_generation(clock: FakeClock) -> None:
    group = GroupMetadata("g", S.EMPTY, clock)
    group.add(member("a", metadata=encode_subscription(["t1", "t2"])))
    group.add(member("b", metadata=encode_subscription(["t3"])))
    group.transition_to(S.PREPARING_REBALANCE)
    group.init_next_generation()
    assert (group.state, group.generation_id, group.protocol_name) == (S.COMPLETING_REBALANCE, 1, "range")
    assert group.subscribed_topics == {"t1", "t2", "t3"}
    assert group.is_subscribed_to_topic("t1") and not group.is_subscribed_to_topic("t9")
    group.transition_to(S.PREPARING_REBALANCE)
    group.remove("a")
    group.remove("b")
    group.init_next_generation()
    assert (group.state, group.generation_id, group.protocol_name) == (S.EMPTY, 2, None)
    assert group.subscribed_topics == frozenset()


def test_unparsable_subscriptions_make_topics_unknown(clock: FakeClock) -> None:
    group = GroupMetadata("g", S.EMPTY, clock)
    group.add(member("a", metadata=b"\x00"))
    group.transition_to(S.PREPARING_REBALANCE)
    group.init_next_generation()
    assert group.subscribed_topics is None and group.is_subscribed_to_topic("anything")


def test_describe_hides_metadata_unless_stable(clock: FakeClock) -> None:
    group = GroupMetadata("g", S.EMPTY, clock)
    group.add(member("a", metadata=b"meta"))
    group.transition_to(S.PREPARING_REBALANCE)
    assert group.describe().members[0].metadata == b""
    group.init_next_generation()
    group.transition_to(S.STABLE)
    described = group.describe()
    assert described.protocol == "range" and described.members[0].metadata == b"meta"


# -- members --------------------------------------------------------------------------------------


def test_heartbeat_satisfaction_rules() -> None:
    m = member("a")
    assert not m.has_satisfied_heartbeat()
    m.awaiting_join = lambda result: None
    assert m.has_satisfied_heartbeat()  # parked in a rebalance: alive
    m.is_new = True
    assert not m.has_satisfied_heartbeat()  # a new member must still prove it
    m.heartbeat_satisfied = True
    assert m.has_satisfied_heartbeat()


def test_member_protocol_helpers() -> None:
    m = member("a", "range", "sticky", metadata=b"x")
    assert m.matches((JoinProtocol("range", b"x"), JoinProtocol("sticky", b"x")))
    assert not m.matches((JoinProtocol("sticky", b"x"), JoinProtocol("range", b"x")))
    assert m.vote({"sticky"}) == "sticky"
    with pytest.raises(ValueError):
        m.vote({"other"})
    with pytest.raises(ValueError):
        m.metadata("other")


# -- offsets --------------------------------------------------------------------------------------


def oam(offset: int, commit_ts: int = 0, expire: int | None = None) -> OffsetAndMetadata:
    return OffsetAndMetadata(offset, -1, "", commit_ts, expire)


def test_commits_become_visible_in_log_order() -> None:
    offsets = GroupOffsets()
    offsets.prepare({("t", 0): oam(1)})
    offsets.prepare({("t", 0): oam(2)})
    offsets.on_appended(("t", 0), CommitRecord(20, oam(2)))
    offsets.on_appended(("t", 0), CommitRecord(10, oam(1)))  # an older record answered late
    assert offsets.get(("t", 0)) == oam(2) and not offsets.pending


def test_a_commit_for_a_partition_removed_meanwhile_is_dropped() -> None:
    offsets = GroupOffsets()
    offsets.prepare({("t", 0): oam(1)})
    assert offsets.remove([("t", 0)]) == {("t", 0): oam(1)}
    offsets.on_appended(("t", 0), CommitRecord(1, oam(1)))
    assert offsets.get(("t", 0)) is None


def test_expiry_selection() -> None:
    offsets = GroupOffsets()
    offsets.initialize(
        {
            ("a", 0): CommitRecord(0, oam(1, commit_ts=0)),
            ("b", 0): CommitRecord(1, oam(1, commit_ts=50)),
            ("c", 0): CommitRecord(2, oam(1, commit_ts=0, expire=200)),
            ("d", 0): CommitRecord(3, oam(1, commit_ts=0)),
        }
    )
    offsets.prepare({("d", 0): oam(2)})
    by_commit = offsets.expired(100, 100, lambda o: o.commit_timestamp, frozenset({"x"}))
    assert by_commit == [("a", 0)]
    assert offsets.expired(200, 100, lambda o: o.commit_timestamp, frozenset({"a"})) == [("b", 0), ("c", 0)]


def test_remove_expired_offsets_of_an_empty_group_counts_from_when_it_became_empty(clock: FakeClock) -> None:
    group = GroupMetadata("g", S.EMPTY, clock)
    group.protocol_type = "consumer"
    group.offsets.initialize({("t", 0): CommitRecord(0, oam(1, commit_ts=0))})
    assert group.remove_expired_offsets(5000 + 99, 100) == {}
    assert group.remove_expired_offsets(5000 + 100, 100) == {("t", 0): oam(1)}


def test_a_non_consumer_group_with_members_keeps_its_offsets(clock: FakeClock) -> None:
    group = GroupMetadata("g", S.EMPTY, clock)
    group.add(MemberMetadata("a", None, "c", "h", 1, 1, "connect", (JoinProtocol("p", b""),)))
    group.transition_to(S.PREPARING_REBALANCE)
    group.offsets.initialize({("t", 0): CommitRecord(0, oam(1))})
    assert group.remove_expired_offsets(10**12, 1) == {}


# -- subscriptions --------------------------------------------------------------------------------


@given(st.lists(st.text(max_size=8), max_size=5), st.none() | st.binary(max_size=8), st.integers(0, 3))
def test_subscriptions_round_trip(topics: list[str], user_data: bytes | None, version: int) -> None:
    encoded = encode_subscription(topics, user_data, version)
    assert subscribed_topics(encoded + b"later versions' fields") == frozenset(topics)


def test_broken_subscriptions() -> None:
    with pytest.raises(DecodeError):
        subscribed_topics(encode_subscription(["t"])[:-2])
    with pytest.raises(DecodeError):
        subscribed_topics(b"\xff\xff" + encode_subscription(["t"])[2:])
    assert union_of_subscriptions([encode_subscription(["a"]), b""]) is None
    assert union_of_subscriptions([encode_subscription(["a"]), encode_subscription(["b"])]) == {"a", "b"}


# -- configuration --------------------------------------------------------------------------------


def test_config_has_kafkas_defaults_and_names() -> None:
    defaults = GroupCoordinatorConfig()
    assert defaults.group_min_session_timeout_ms == 6000
    assert defaults.group_max_session_timeout_ms == 1_800_000
    assert defaults.group_initial_rebalance_delay_ms == 3000
    assert defaults.group_max_size == 2**31 - 1
    assert defaults.offsets_retention_ms == 10080 * 60_000
    assert defaults.offset_metadata_max_bytes == 4096
    assert defaults.offsets_topic_num_partitions == 50
    assert KAFKA_KEYS["offset_metadata_max_bytes"] == "offset.metadata.max.bytes"
    built = GroupCoordinatorConfig.from_kafka_keys({"group.max.size": "10", "offsets.retention.minutes": 1})
    assert built.group_max_size == 10 and built.offsets_retention_minutes == 1


@pytest.mark.parametrize(
    "overrides",
    [
        {"group_max_size": 0},
        {"offsets_topic_num_partitions": 0},
        {"group_min_session_timeout_ms": 10, "group_max_session_timeout_ms": 5},
        {"group_initial_rebalance_delay_ms": -1},
    ],
)
def test_config_refuses_values_kafka_refuses(overrides: dict[str, int]) -> None:
    with pytest.raises(ValueError):
        GroupCoordinatorConfig(**overrides)


def test_config_refuses_unknown_keys() -> None:
    with pytest.raises(ValueError):
        GroupCoordinatorConfig.from_kafka_keys({"group.max.sizes": 1})
