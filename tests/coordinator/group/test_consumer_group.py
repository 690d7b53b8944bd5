"""Consumer-protocol groups (KIP-848) in the coordinator: joining, incremental reconciliation,
leaving, fencing on session and rebalance timeouts, static members, errors as Kafka answers them,
reload from the log, offsets and the classic protocol's refusals. Simulated time throughout."""

from __future__ import annotations

import uuid
from dataclasses import replace
from typing import Any

import pytest

from coordinator.group.consumer.member import MemberState
from protocol.error_codes import ErrorCode
from tests.coordinator.group.consumer_helpers import REBALANCE_TIMEOUT_MS, Consumer, ConsumerHarness
from tests.coordinator.group.helpers import config

SESSION_MS = 45_000


@pytest.fixture
def h() -> ConsumerHarness:
    harness = ConsumerHarness()
    harness.topics.create("t", 6)
    return harness


def consumer(h: ConsumerHarness, name: str, *topics: str, **kwargs: object) -> Consumer:
    return Consumer(h, name, topics or ("t",), **kwargs)  # type: ignore[arg-type]


def all_partitions(h: ConsumerHarness, topic: str = "t") -> set[tuple[uuid.UUID, int]]:
    state = h.topics.by_name[topic]
    return {(state.topic_id, p) for p in state.partitions}


def settle(*consumers: Consumer, rounds: int = 6) -> None:
    for _ in range(rounds):
        for c in consumers:
            c.heartbeat()


# -- joining and reconciling --------------------------------------------------------------------------


def test_first_member_gets_every_partition_at_epoch_1(h: ConsumerHarness) -> None:
    a = consumer(h, "a")
    result = a.heartbeat()
    assert result.error is ErrorCode.NONE
    assert (result.member_id, result.member_epoch, result.heartbeat_interval_ms) == ("a", 1, 5000)
    assert a.partitions == all_partitions(h)
    group = h.coordinator.consumer_group("group")
    assert group is not None
    assert (group.group_epoch, group.assignment_epoch, group.state.value) == (1, 1, "Stable")


def test_v0_member_without_id_is_given_one_and_v1_must_bring_its_own(h: ConsumerHarness) -> None:
    request = consumer(h, "").request()
    v0 = h.cg_heartbeat(replace(request, api_version=0)).value
    assert (v0.error, v0.member_id) == (ErrorCode.NONE, "generated-1")
    v1 = h.cg_heartbeat(request).value
    assert (v1.error, v1.error_message) == (ErrorCode.INVALID_REQUEST, "MemberId can't be empty.")


def test_a_second_member_waits_until_the_first_revokes(h: ConsumerHarness) -> None:
    a, b = consumer(h, "a"), consumer(h, "b")
    a.heartbeat()
    joined = b.heartbeat()
    # b is at the new epoch but every partition it is meant to get is still a's.
    assert (joined.member_epoch, joined.assignment) == (2, {})
    group = h.coordinator.consumer_group("group")
    assert group is not None and group.member("b").state is MemberState.UNRELEASED_PARTITIONS  # type: ignore[union-attr]
    # a is told to give up half, and stays at epoch 1 until it does.
    revoke = a.heartbeat(full=False)
    assert revoke.member_epoch == 1 and len(a.partitions) == 3
    assert group.member("a").state is MemberState.UNREVOKED_PARTITIONS  # type: ignore[union-attr]
    assert not b.heartbeat().assignment  # still unreleased: a has not reported the revocation
    # a heartbeats without the revoked partitions: it moves to epoch 2; b then gets them.
    assert a.heartbeat().member_epoch == 2
    b.heartbeat()
    assert len(b.partitions) == 3 and not (a.partitions & b.partitions)
    assert a.partitions | b.partitions == all_partitions(h)
    assert group.state.value == "Stable"


def test_leaving_gives_the_partitions_to_the_others(h: ConsumerHarness) -> None:
    a, b, c = consumer(h, "a"), consumer(h, "b"), consumer(h, "c")
    settle(a, b, c)
    assert sorted(len(x.partitions) for x in (a, b, c)) == [2, 2, 2]
    left = c.leave()
    assert (left.error, left.member_id, left.member_epoch) == (ErrorCode.NONE, "c", -1)
    settle(a, b)
    assert a.partitions | b.partitions == all_partitions(h)
    assert len(a.partitions) == len(b.partitions) == 3
    assert h.coordinator.consumer_group("group").num_members == 2  # type: ignore[union-attr]


def test_range_assignor_on_request(h: ConsumerHarness) -> None:
    h.topics.create("u", 2)
    a = consumer(h, "a", "t", "u", server_assignor="range")
    b = consumer(h, "b", "t", "u", server_assignor="range")
    settle(a, b)
    t, u = h.topics.by_name["t"].topic_id, h.topics.by_name["u"].topic_id
    assert a.owned == {t: frozenset({0, 1, 2}), u: frozenset({0})}
    assert b.owned == {t: frozenset({3, 4, 5}), u: frozenset({1})}
    described = h.coordinator.consumer_group_describe(["group"])[0]
    assert described.assignor_name == "range"


def test_new_partitions_bump_the_group_epoch(h: ConsumerHarness) -> None:
    a = consumer(h, "a")
    a.heartbeat()
    h.topics.add_partitions("t", 8)
    result = a.heartbeat()
    assert result.member_epoch == 2
    assert a.partitions == all_partitions(h)


def test_subscribing_to_a_topic_that_does_not_exist_yet(h: ConsumerHarness) -> None:
    a = consumer(h, "a", "later")
    assert a.heartbeat().assignment == {}
    h.topics.create("later", 2)
    a.heartbeat()
    assert a.partitions == all_partitions(h, "later")


# -- errors ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"group_id": ""}, "GroupId can't be empty."),
        ({"instance_id": ""}, "InstanceId can't be empty."),
        ({"rack_id": ""}, "RackId can't be empty."),
        ({"rebalance_timeout_ms": -1}, "RebalanceTimeoutMs must be provided in first request."),
        ({"topic_partitions": None}, "TopicPartitions must be empty when (re-)joining."),
        (
            {"subscribed_topic_names": None, "subscribed_topic_regex": None},
            "Either SubscribedTopicNames or SubscribedTopicRegex must be",
        ),
        ({"member_epoch": -3}, "MemberEpoch is invalid."),
    ],
)
def test_invalid_requests(h: ConsumerHarness, change: dict[str, Any], message: str) -> None:
    request = replace(consumer(h, "a").request(), **change)
    result = h.cg_heartbeat(request).value
    assert result.error is ErrorCode.INVALID_REQUEST
    assert result.error_message is not None and result.error_message.startswith(message)
    assert (result.member_id, result.member_epoch, result.heartbeat_interval_ms) == (None, 0, 0)


def test_unknown_assignor(h: ConsumerHarness) -> None:
    result = consumer(h, "a", server_assignor="sticky").heartbeat()
    assert result.error is ErrorCode.UNSUPPORTED_ASSIGNOR
    assert (
        result.error_message == "ServerAssignor sticky is not supported. Supported assignors: uniform, range."
    )


def test_fenced_and_unknown_members(h: ConsumerHarness) -> None:
    a = consumer(h, "a")
    a.heartbeat()
    ahead = h.cg_heartbeat(a.request(5)).value
    assert ahead.error is ErrorCode.FENCED_MEMBER_EPOCH
    unknown = h.cg_heartbeat(consumer(h, "nobody").request(3)).value
    assert unknown.error is ErrorCode.UNKNOWN_MEMBER_ID
    missing = h.cg_heartbeat(consumer(h, "x", group_id="elsewhere").request(3)).value
    assert missing.error is ErrorCode.GROUP_ID_NOT_FOUND


def test_previous_epoch_is_accepted_when_its_partitions_are_a_subset(h: ConsumerHarness) -> None:
    """The answer that bumped the epoch may have been lost: the member retries with the old one."""
    a, b = consumer(h, "a"), consumer(h, "b")
    a.heartbeat()
    b.heartbeat()
    a.heartbeat()  # told to revoke, stays at epoch 1
    a.heartbeat()  # revoked: epoch 2 (the answer is "lost" below)
    lost = h.cg_heartbeat(a.request(1)).value
    assert (lost.error, lost.member_epoch) == (ErrorCode.NONE, 2)


def test_a_fenced_member_rejoins_with_epoch_0_and_its_member_id(h: ConsumerHarness) -> None:
    a = consumer(h, "a")
    a.heartbeat()
    a.heartbeat()
    assert h.cg_heartbeat(a.request(7)).value.error is ErrorCode.FENCED_MEMBER_EPOCH
    rejoin = h.cg_heartbeat(a.request(0)).value
    assert (rejoin.error, rejoin.member_id, rejoin.member_epoch) == (ErrorCode.NONE, "a", 1)
    assert rejoin.assignment is not None and sum(len(p) for p in rejoin.assignment.values()) == 6


def test_group_max_size() -> None:
    h = ConsumerHarness(config(group_consumer_max_size=2))
    h.topics.create("t", 1)
    consumer(h, "a").heartbeat()
    consumer(h, "b").heartbeat()
    full = consumer(h, "c").heartbeat()
    assert full.error is ErrorCode.GROUP_MAX_SIZE_REACHED
    assert full.error_message == "The consumer group has reached its maximum capacity of 2 members."


def test_not_coordinator_and_inactive() -> None:
    h = ConsumerHarness(load=False)
    assert consumer(h, "a").heartbeat().error is ErrorCode.NOT_COORDINATOR
    h.coordinator.begin_loading(0)
    assert consumer(h, "a").heartbeat().error is ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    h.coordinator.shutdown()
    assert consumer(h, "a").heartbeat().error is ErrorCode.COORDINATOR_NOT_AVAILABLE


# -- timeouts --------------------------------------------------------------------------------------


def test_a_member_that_stops_heartbeating_is_fenced_after_its_session(h: ConsumerHarness) -> None:
    a, b = consumer(h, "a"), consumer(h, "b")
    settle(a, b)
    group = h.coordinator.consumer_group("group")
    assert group is not None
    epoch = group.group_epoch
    for _ in range(8):  # a keeps heartbeating every 5 s; b went silent
        h.advance(5_000)
        a.heartbeat()
    assert group.has_member("a") and group.has_member("b")
    h.advance(SESSION_MS - 40_000)
    assert not group.has_member("b")
    assert group.group_epoch == epoch + 1
    a.heartbeat()
    assert a.partitions == all_partitions(h)
    assert b.heartbeat(full=False).error is ErrorCode.UNKNOWN_MEMBER_ID


def test_a_member_that_does_not_revoke_is_fenced_after_its_rebalance_timeout(h: ConsumerHarness) -> None:
    a, b = consumer(h, "a"), consumer(h, "b")
    a.heartbeat()
    b.heartbeat()
    a.heartbeat()  # told to revoke
    group = h.coordinator.consumer_group("group")
    assert group is not None and group.member("a").state is MemberState.UNREVOKED_PARTITIONS  # type: ignore[union-attr]
    stubborn = dict(a.owned)
    for _ in range(REBALANCE_TIMEOUT_MS // 10_000 - 1):
        h.advance(10_000)
        a.owned = dict(stubborn)
        a.owned[h.topics.by_name["t"].topic_id] = frozenset(range(6))  # keeps consuming everything
        assert a.heartbeat().error is ErrorCode.NONE
        b.heartbeat()
    assert group.has_member("a")
    h.advance(10_000)
    assert not group.has_member("a")
    settle(b)
    assert b.partitions == all_partitions(h)


# -- static members ---------------------------------------------------------------------------------


def test_static_member_leaves_temporarily_and_a_new_instance_takes_over(h: ConsumerHarness) -> None:
    a, b = consumer(h, "a", instance_id="i-a"), consumer(h, "b")
    settle(a, b)
    kept = set(a.partitions)
    left = a.leave(-2)
    assert (left.error, left.member_id, left.member_epoch) == (ErrorCode.NONE, "a", -2)
    settle(b)
    assert not (b.partitions & kept)  # a's partitions stay reserved for its instance
    a2 = consumer(h, "a2", instance_id="i-a")
    a2.heartbeat()
    assert a2.partitions == kept
    group = h.coordinator.consumer_group("group")
    assert group is not None and not group.has_member("a") and group.static_member_id("i-a") == "a2"


def test_static_instance_in_use_and_fenced_instance(h: ConsumerHarness) -> None:
    a = consumer(h, "a", instance_id="i")
    a.heartbeat()
    twin = consumer(h, "twin", instance_id="i").heartbeat()
    assert twin.error is ErrorCode.UNRELEASED_INSTANCE_ID
    impostor = h.cg_heartbeat(consumer(h, "other", instance_id="i").request(1)).value
    assert impostor.error is ErrorCode.FENCED_INSTANCE_ID


def test_static_member_session_expires_after_a_temporary_leave(h: ConsumerHarness) -> None:
    a, b = consumer(h, "a", instance_id="i-a"), consumer(h, "b")
    settle(a, b)
    a.leave(-2)
    for _ in range(10):
        h.advance(5_000)
        b.heartbeat()
    settle(b)
    assert b.partitions == all_partitions(h)


# -- reload ---------------------------------------------------------------------------------------


def test_a_new_coordinator_loads_the_group_from_the_log(h: ConsumerHarness) -> None:
    a, b, c = consumer(h, "a"), consumer(h, "b", instance_id="i-b"), consumer(h, "c")
    settle(a, b)
    c.heartbeat()
    a.heartbeat()  # a is revoking when the coordinator moves
    before = h.coordinator.consumer_group("group")
    assert before is not None
    snapshot = _state(before)
    h.reload()
    after = h.coordinator.consumer_group("group")
    assert after is not None and after is not before
    assert _state(after) == snapshot
    settle(a, b, c)
    assert sorted(len(x.partitions) for x in (a, b, c)) == [2, 2, 2]
    assert a.partitions | b.partitions | c.partitions == all_partitions(h)


def _state(group: object) -> tuple[object, ...]:
    g = group  # a ConsumerGroup
    return (
        g.group_epoch,  # type: ignore[attr-defined]
        g.assignment_epoch,  # type: ignore[attr-defined]
        dict(g.members),  # type: ignore[attr-defined]
        dict(g.static_members),  # type: ignore[attr-defined]
        dict(g.target_assignment),  # type: ignore[attr-defined]
        dict(g.subscription_metadata),  # type: ignore[attr-defined]
        g.state,  # type: ignore[attr-defined]
    )


def test_loaded_members_get_a_new_session(h: ConsumerHarness) -> None:
    a = consumer(h, "a")
    a.heartbeat()
    h.reload()
    h.advance(SESSION_MS + 1)
    group = h.coordinator.consumer_group("group")
    assert group is not None and not group.has_member("a")


def test_a_failed_write_takes_the_change_back(h: ConsumerHarness) -> None:
    a = consumer(h, "a")
    a.heartbeat()
    group = h.coordinator.consumer_group("group")
    assert group is not None
    snapshot = _state(group)
    h.log.fail_with = ErrorCode.NOT_LEADER_OR_FOLLOWER
    failed = consumer(h, "b").heartbeat()
    assert failed.error is ErrorCode.NOT_COORDINATOR
    assert _state(group) == snapshot
    h.log.fail_with = ErrorCode.KAFKA_STORAGE_ERROR
    assert consumer(h, "x", group_id="new").heartbeat().error is ErrorCode.NOT_COORDINATOR
    assert h.coordinator.consumer_group("new") is None


# -- offsets, listing, describing, deleting --------------------------------------------------------


def test_offset_commits_carry_the_member_epoch(h: ConsumerHarness) -> None:
    a = consumer(h, "a")
    a.heartbeat()
    assert h.commit(member_id="a", generation=1, offsets={("t", 0): 5}).value == {("t", 0): ErrorCode.NONE}
    assert h.commit(member_id="a", generation=0).value == {("topic", 0): ErrorCode.STALE_MEMBER_EPOCH}
    assert h.commit(member_id="zz", generation=1).value == {("topic", 0): ErrorCode.UNKNOWN_MEMBER_ID}
    assert h.commit(generation=-1).value == {("topic", 0): ErrorCode.UNKNOWN_MEMBER_ID}
    fetched = h.coordinator.fetch_offsets("group", [("t", 0)], member_id="a", member_epoch=1)
    assert (fetched.error, fetched.partitions[("t", 0)].offset) == (ErrorCode.NONE, 5)
    stale = h.coordinator.fetch_offsets("group", [("t", 0)], member_id="a", member_epoch=0)
    assert stale.error is ErrorCode.STALE_MEMBER_EPOCH
    assert h.coordinator.fetch_offsets("group", [("t", 0)]).partitions[("t", 0)].offset == 5


def test_offsets_and_the_group_survive_a_reload(h: ConsumerHarness) -> None:
    a = consumer(h, "a")
    a.heartbeat()
    h.commit(member_id="a", generation=1, offsets={("t", 3): 9})
    h.reload()
    assert h.coordinator.fetch_offsets("group", [("t", 3)]).partitions[("t", 3)].offset == 9
    assert h.coordinator.consumer_group("group") is not None


def test_listing_and_describing(h: ConsumerHarness) -> None:
    settle(consumer(h, "a"))
    h.join_new("classic-group")
    listed = h.coordinator.list_groups()
    kinds = {(g.group_id, g.group_type, g.protocol_type) for g in listed.groups}
    assert ("group", "consumer", "consumer") in kinds and ("classic-group", "classic", "consumer") in kinds
    assert [g.group_id for g in h.coordinator.list_groups(types=["Consumer"]).groups] == ["group"]
    assert [g.group_id for g in h.coordinator.list_groups(states=["stable"]).groups] == ["group"]
    described = h.coordinator.consumer_group_describe(["group", "classic-group", ""])
    group, classic, empty = described
    assert (group.state, group.group_epoch, group.assignment_epoch, group.assignor_name) == (
        "Stable",
        1,
        1,
        "uniform",
    )
    [member] = group.members
    assert member.member_id == "a" and member.assignment == member.target_assignment
    assert member.assignment[0].topic_name == "t" and member.assignment[0].partitions == tuple(range(6))
    assert (classic.error, classic.error_message) == (
        ErrorCode.GROUP_ID_NOT_FOUND,
        "Group classic-group is not a consumer group.",
    )
    assert empty.error is ErrorCode.INVALID_GROUP_ID
    old = h.coordinator.describe_group("group", api_version=6)
    assert (old.error, old.error_message) == (
        ErrorCode.GROUP_ID_NOT_FOUND,
        "Group group is not a classic group.",
    )


def test_deleting_a_consumer_group(h: ConsumerHarness) -> None:
    a = consumer(h, "a")
    a.heartbeat()
    h.commit(member_id="a", generation=1, offsets={("t", 0): 1})
    answers: list[dict[str, ErrorCode]] = []
    h.coordinator.delete_groups(["group"], answers.append)
    assert answers == [{"group": ErrorCode.NON_EMPTY_GROUP}]
    a.leave()
    h.coordinator.delete_groups(["group"], answers.append)
    assert answers[-1] == {"group": ErrorCode.NONE}
    assert h.coordinator.consumer_group("group") is None
    h.reload()
    assert h.coordinator.consumer_group("group") is None
    assert h.coordinator.group("group") is None


def test_an_empty_group_without_offsets_expires(h: ConsumerHarness) -> None:
    a = consumer(h, "a")
    a.heartbeat()
    a.leave()
    h.coordinator.expire_offsets()
    assert h.coordinator.consumer_group("group") is None


def test_offsets_of_unsubscribed_topics_expire_after_retention(h: ConsumerHarness) -> None:
    a = consumer(h, "a")
    a.heartbeat()
    h.commit(member_id="a", generation=1, offsets={("t", 0): 1, ("gone", 0): 2})
    h.advance(h.config.offsets_retention_ms)
    for _ in range(3):
        a.heartbeat()
    assert h.coordinator.expire_offsets() == 1
    assert h.coordinator.fetch_offsets("group", [("t", 0)]).partitions[("t", 0)].offset == 1


# -- the classic protocol --------------------------------------------------------------------------


def test_a_classic_join_of_another_protocol_type_is_refused_while_the_consumer_group_has_members(
    h: ConsumerHarness,
) -> None:
    """A consumer-protocol JoinGroup becomes a classic member of the group
    (test_classic_members_of_consumer_groups); another protocol type is refused, as in Kafka."""
    a = consumer(h, "a")
    a.heartbeat()
    refused = h.join("group", "m", protocol_type="connect")
    assert refused.value.error is ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    assert h.heartbeat("group", "m", 1) is ErrorCode.UNKNOWN_MEMBER_ID
    a.leave()
    h.commit(offsets={("t", 1): 3})
    joined = h.join_new("group")
    h.settle()
    assert joined.value.error is ErrorCode.NONE
    assert h.coordinator.consumer_group("group") is None
    assert h.coordinator.fetch_offsets("group", [("t", 1)]).partitions[("t", 1)].offset == 3


def test_consumer_heartbeat_is_refused_by_a_classic_group_with_members(h: ConsumerHarness) -> None:
    """Under the ``disabled`` policy (the online upgrade of the default ``bidirectional`` is in
    test_classic_members_of_consumer_groups)."""
    h = ConsumerHarness(config(group_consumer_migration_policy="disabled"))
    h.topics.create("t", 6)
    h.stable_group(1)
    refused = consumer(h, "a").heartbeat()
    assert (refused.error, refused.error_message) == (
        ErrorCode.GROUP_ID_NOT_FOUND,
        "Group group is not a consumer group.",
    )


def test_an_empty_classic_group_becomes_a_consumer_group_with_its_offsets(h: ConsumerHarness) -> None:
    h.commit("simple", {("t", 2): 7})
    assert h.coordinator.group("simple") is not None
    a = consumer(h, "a", group_id="simple")
    assert a.heartbeat().error is ErrorCode.NONE
    assert h.coordinator.group("simple") is None
    assert h.coordinator.fetch_offsets("simple", [("t", 2)]).partitions[("t", 2)].offset == 7
    h.reload()
    assert h.coordinator.consumer_group("simple") is not None
    assert h.coordinator.fetch_offsets("simple", [("t", 2)]).partitions[("t", 2)].offset == 7


def test_transactional_offsets_of_a_consumer_group(h: ConsumerHarness) -> None:
    from coordinator.group import OffsetCommitRequest, PartitionCommit, TxnOffsetCommitRequest

    consumer(h, "a").heartbeat()
    answers: list[dict[tuple[str, int], ErrorCode]] = []
    commit = OffsetCommitRequest("group", (PartitionCommit("t", 4, 11),), "a", 1)
    h.coordinator.commit_txn_offsets(
        TxnOffsetCommitRequest(commit, producer_id=9, producer_epoch=0), answers.append
    )
    stale = OffsetCommitRequest("group", (PartitionCommit("t", 4, 12),), "a", 0)
    h.coordinator.commit_txn_offsets(
        TxnOffsetCommitRequest(stale, producer_id=9, producer_epoch=0), answers.append
    )
    assert answers == [{("t", 4): ErrorCode.NONE}, {("t", 4): ErrorCode.STALE_MEMBER_EPOCH}]
    h.log.append_marker(0, 9, commit=True)
    h.coordinator.on_transaction_completed(9, [0], commit=True)
    assert h.coordinator.fetch_offsets("group", [("t", 4)]).partitions[("t", 4)].offset == 11


# -- regular expressions ------------------------------------------------------------------------------


def test_a_regex_subscription_follows_the_topics_it_matches(h: ConsumerHarness) -> None:
    h.topics.create("orders-1", 2)
    h.topics.create("orders-2", 1)
    a = Consumer(h, "a", (), regex="orders-.*")
    result = a.heartbeat()
    assert result.error is ErrorCode.NONE
    assert a.partitions == all_partitions(h, "orders-1") | all_partitions(h, "orders-2")
    h.topics.create("orders-3", 1)
    assert a.heartbeat().member_epoch == 1  # resolved again only after the refresh interval
    h.advance(10_000)
    assert a.heartbeat().member_epoch == 2
    assert all_partitions(h, "orders-3") <= a.partitions
    described = h.coordinator.consumer_group_describe(["group"])[0]
    assert described.members[0].subscribed_topic_regex == "orders-.*"
    assert described.members[0].subscribed_topic_names == ()


def test_regex_and_names_share_a_group(h: ConsumerHarness) -> None:
    h.topics.create("orders-1", 2)
    a = Consumer(h, "a", (), regex="orders-[0-9]+")
    b = consumer(h, "b", "t", "orders-1")
    settle(a, b)
    orders = all_partitions(h, "orders-1")
    assert not (a.partitions & all_partitions(h))
    assert a.partitions | b.partitions == orders | all_partitions(h)
    assert a.partitions and a.partitions <= orders


def test_an_invalid_regex(h: ConsumerHarness) -> None:
    result = Consumer(h, "a", (), regex="orders-(").heartbeat()
    assert result.error is ErrorCode.INVALID_REGULAR_EXPRESSION
    assert result.error_message is not None and "orders-(" in result.error_message


def test_a_regex_group_is_reloaded(h: ConsumerHarness) -> None:
    h.topics.create("orders-1", 3)
    a = Consumer(h, "a", (), regex="orders-.*")
    a.heartbeat()
    h.reload()
    group = h.coordinator.consumer_group("group")
    assert group is not None and group.is_subscribed_to_topic("orders-1")
    assert a.heartbeat().member_epoch == 1
    assert a.partitions == all_partitions(h, "orders-1")
