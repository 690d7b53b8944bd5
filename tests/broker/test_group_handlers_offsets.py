"""OffsetCommit, OffsetFetch and OffsetDelete handlers over a real coordinator, through the codecs of
every version."""

from __future__ import annotations

import asyncio

import pytest

from protocol.sentinels import UNKNOWN_OFFSET
from tests.broker.group_handlers_support import (
    NONE,
    E,
    Env,
    commit_body,
    committed,
    fetch_body,
    fetched,
    offset_delete_answer,
    offset_delete_body,
    sync_body,
)

OFFSETS = {("orders", 0): 10, ("orders", 1): 20, ("audit", 0): 5}
START_MS = 1_000_000  # the Harness' simulated start time
DAY_MS = 86_400_000


# -- OffsetCommit -----------------------------------------------------------------------------------


@pytest.mark.parametrize("version", range(2, 10))
async def test_a_commit_without_group_management_creates_an_empty_group(version: int) -> None:
    env = Env()
    answer = await env.call(env.offset_commit, version, commit_body("manual", OFFSETS))
    assert committed(answer) == dict.fromkeys(OFFSETS, NONE)
    assert [t.name for t in answer.topics] == ["orders", "audit"]
    stored = env.coordinator.group("manual").offsets.get(("orders", 1))
    assert stored is not None
    assert (stored.offset, stored.metadata) == (20, "meta")
    assert stored.leader_epoch == (5 if version >= 6 else -1)


@pytest.mark.parametrize("version", range(2, 10))
async def test_retention_time_counts_only_in_v2_to_v4(version: int) -> None:
    env = Env()
    await env.call(env.offset_commit, version, commit_body("g", {("t", 0): 1}, retention_ms=DAY_MS))
    stored = env.coordinator.group("g").offsets.get(("t", 0))
    assert stored is not None
    assert stored.expire_timestamp == (START_MS + DAY_MS if version <= 4 else None)


async def test_null_metadata_is_stored_as_empty() -> None:
    env = Env()
    await env.call(env.offset_commit, 8, commit_body("g", {("t", 0): 1}, metadata=None))
    answer = await env.call(env.offset_fetch, 8, fetch_body(8, {"g": [("t", 0)]}))
    assert fetched(answer, 8, "g") == (NONE, {("t", 0): (1, 5, "", NONE)})


async def test_commit_errors_are_per_partition() -> None:
    env = Env()
    joined = await env.join_member(5)
    member = joined.member_id
    stale = await env.call(
        env.offset_commit, 9, commit_body("group", OFFSETS, member_id=member, generation=0)
    )
    assert committed(stale) == dict.fromkeys(OFFSETS, int(E.ILLEGAL_GENERATION))
    waiting = await env.call(
        env.offset_commit, 2, commit_body("group", OFFSETS, member_id=member, generation=1)
    )
    assert committed(waiting) == dict.fromkeys(OFFSETS, int(E.REBALANCE_IN_PROGRESS))  # CompletingRebalance
    await env.call(env.sync_group, 5, sync_body("group", member, 1, {member: b""}))
    ok = await env.call(env.offset_commit, 9, commit_body("group", OFFSETS, member_id=member, generation=1))
    assert committed(ok) == dict.fromkeys(OFFSETS, NONE)
    too_long = await env.call(env.offset_commit, 9, commit_body("manual", {("t", 0): 1}, metadata="x" * 5000))
    assert committed(too_long) == {("t", 0): int(E.OFFSET_METADATA_TOO_LARGE)}


async def test_commit_to_a_group_of_another_coordinator() -> None:
    env = Env(num_partitions=4, load=False)
    elsewhere = env.own_only("group")
    answer = await env.call(env.offset_commit, 9, commit_body(elsewhere, OFFSETS))
    assert committed(answer) == dict.fromkeys(OFFSETS, int(E.NOT_COORDINATOR))


async def test_partitions_the_cluster_does_not_have_are_refused_before_the_coordinator() -> None:
    """Kafka answers UNKNOWN_TOPIC_OR_PARTITION for an unknown topic or partition and commits the rest."""
    known = {("orders", 0), ("orders", 1)}
    env = Env(partition_exists=lambda topic, partition: (topic, partition) in known)
    offsets = {("orders", 0): 1, ("orders", 9): 2, ("ghost", 0): 3, ("orders", 1): 4}
    answer = await env.call(env.offset_commit, 9, commit_body("g", offsets))
    assert committed(answer) == {
        ("orders", 0): NONE,
        ("orders", 9): int(E.UNKNOWN_TOPIC_OR_PARTITION),
        ("ghost", 0): int(E.UNKNOWN_TOPIC_OR_PARTITION),
        ("orders", 1): NONE,
    }
    assert set(env.coordinator.group("g").offsets.committed) == known
    nothing = await env.call(env.offset_commit, 2, commit_body("h", {("ghost", 0): 1}))
    assert committed(nothing) == {("ghost", 0): int(E.UNKNOWN_TOPIC_OR_PARTITION)}
    assert env.coordinator.group("h") is None  # the coordinator was not asked


async def test_a_topic_named_twice_is_answered_once() -> None:
    env = Env()
    body = commit_body("g", {("t", 0): 1})
    body["topics"].append(
        {"name": "t", "partitions": [dict(body["topics"][0]["partitions"][0], partition_index=1)]}
    )
    answer = await env.call(env.offset_commit, 9, body)
    assert [(t.name, [p.partition_index for p in t.partitions]) for t in answer.topics] == [("t", [0, 1])]


async def test_an_empty_commit_answers_no_topics() -> None:
    env = Env()
    answer = await env.call(env.offset_commit, 9, commit_body("g", {}))
    assert answer.topics == []


# -- OffsetFetch ------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", range(1, 10))
async def test_fetch_committed_and_missing_offsets(version: int) -> None:
    env = Env()
    await env.call(env.offset_commit, 9, commit_body("group", OFFSETS))
    wanted = [*OFFSETS, ("orders", 7)]
    answer = await env.call(env.offset_fetch, version, fetch_body(version, {"group": wanted}))
    epoch = 5 if version >= 5 else -1
    assert fetched(answer, version) == (
        NONE,
        {
            **{tp: (offset, epoch, "meta", NONE) for tp, offset in OFFSETS.items()},
            ("orders", 7): (UNKNOWN_OFFSET, -1, "", NONE),
        },
    )
    assert [t.name for t in (answer.groups[0].topics if version >= 8 else answer.topics)] == [
        "orders",
        "audit",
    ]


@pytest.mark.parametrize("version", range(2, 10))
async def test_null_topics_fetch_every_committed_partition_from_v2(version: int) -> None:
    env = Env()
    await env.call(env.offset_commit, 9, commit_body("group", OFFSETS))
    answer = await env.call(env.offset_fetch, version, fetch_body(version, {"group": None}))
    error, partitions = fetched(answer, version)
    assert error == NONE and {tp: p[0] for tp, p in partitions.items()} == OFFSETS


async def test_v1_puts_a_group_error_on_every_requested_partition() -> None:
    env = Env(num_partitions=4, load=False)
    elsewhere = env.own_only("group")
    answer = await env.call(env.offset_fetch, 1, fetch_body(1, {elsewhere: list(OFFSETS)}))
    assert fetched(answer, 1) == (
        NONE,  # v1 has no top-level error
        {tp: (UNKNOWN_OFFSET, -1, "", int(E.NOT_COORDINATOR)) for tp in OFFSETS},
    )


@pytest.mark.parametrize("version", range(2, 8))
async def test_v2_to_v7_answer_a_group_error_at_the_top(version: int) -> None:
    env = Env(num_partitions=4, load=False)
    elsewhere = env.own_only("group")
    answer = await env.call(env.offset_fetch, version, fetch_body(version, {elsewhere: list(OFFSETS)}))
    assert fetched(answer, version) == (int(E.NOT_COORDINATOR), {})


@pytest.mark.parametrize("version", [8, 9])
async def test_v8_answers_each_group_with_its_own_error(version: int) -> None:
    env = Env(num_partitions=4, load=False)
    elsewhere = env.own_only("group")
    await env.call(env.offset_commit, 9, commit_body("group", OFFSETS))
    fresh = env.same_partition("group")
    body = fetch_body(version, {"group": [("orders", 0)], elsewhere: None, fresh: None})
    answer = await env.call(env.offset_fetch, version, body)
    assert [g.group_id for g in answer.groups] == ["group", elsewhere, fresh]
    assert fetched(answer, version, "group") == (NONE, {("orders", 0): (10, 5, "meta", NONE)})
    assert fetched(answer, version, elsewhere) == (int(E.NOT_COORDINATOR), {})
    assert fetched(answer, version, fresh) == (NONE, {})


async def test_fetch_while_the_partition_loads() -> None:
    env = Env(load=False)
    env.coordinator.begin_loading(0)
    answer = await env.call(env.offset_fetch, 7, fetch_body(7, {"group": [("t", 0)]}))
    assert fetched(answer, 7) == (int(E.COORDINATOR_LOAD_IN_PROGRESS), {})


@pytest.mark.parametrize("version", range(1, 10))
async def test_require_stable_counts_from_v7(version: int) -> None:
    """KIP-447: with a commit still being written, require_stable answers UNSTABLE_OFFSET_COMMIT;
    before v7 the flag does not exist and the last durable offset is answered."""
    env = Env(defer_log=True)
    first = env.start(env.offset_commit, 9, commit_body("group", {("t", 0): 1}))
    await env.finish_log(first)
    pending = env.start(env.offset_commit, 9, commit_body("group", {("t", 0): 2}))
    await asyncio.sleep(0)  # the commit reaches the coordinator; its record is not written yet
    body = fetch_body(version, {"group": [("t", 0)]}, require_stable=True)
    answer = await env.call(env.offset_fetch, version, body)
    partition = fetched(answer, version)[1][("t", 0)]
    if version >= 7:
        assert (partition[0], partition[3]) == (UNKNOWN_OFFSET, int(E.UNSTABLE_OFFSET_COMMIT))
    else:
        assert (partition[0], partition[3]) == (1, NONE)
    await env.finish_log(pending)


# -- OffsetDelete -----------------------------------------------------------------------------------


async def test_offset_delete_of_an_empty_group_answers_each_partition_once() -> None:
    env = Env()
    await env.call(env.offset_commit, 8, commit_body("manual", OFFSETS))
    body = offset_delete_body("manual", [("orders", 0), ("audit", 0), ("orders", 0), ("orders", 7)])
    answer = await env.call(env.offset_delete, 0, body)
    assert offset_delete_answer(answer) == (
        NONE,
        {("orders", 0): NONE, ("audit", 0): NONE, ("orders", 7): NONE},
    )
    assert [t.name for t in answer.topics] == ["orders", "audit"]
    left = await env.call(env.offset_fetch, 8, fetch_body(8, {"manual": None}))
    assert {tp: offset for tp, (offset, *_rest) in fetched(left, 8, "manual")[1].items()} == {
        ("orders", 1): 20
    }


async def test_offset_delete_refuses_partitions_the_cluster_does_not_have() -> None:
    known = {("orders", 0), ("orders", 1), ("audit", 0)}
    env = Env(partition_exists=lambda topic, partition: (topic, partition) in known)
    await env.call(env.offset_commit, 8, commit_body("manual", OFFSETS))
    body = offset_delete_body("manual", [("orders", 0), ("orders", 9), ("gone", 0)])
    answer = await env.call(env.offset_delete, 0, body)
    unknown = int(E.UNKNOWN_TOPIC_OR_PARTITION)
    assert offset_delete_answer(answer) == (
        NONE,
        {("orders", 0): NONE, ("orders", 9): unknown, ("gone", 0): unknown},
    )


async def test_offset_delete_group_errors_are_top_level_without_topics() -> None:
    """Even when no partition is left for the coordinator, the group is checked (as Kafka's
    KafkaApis hands the coordinator an empty request)."""
    env = Env(partition_exists=lambda topic, partition: False)
    missing = await env.call(env.offset_delete, 0, offset_delete_body("nobody", [("gone", 0)]))
    assert (missing.error_code, missing.topics) == (int(E.GROUP_ID_NOT_FOUND), [])
    invalid = await env.call(env.offset_delete, 0, offset_delete_body("", [("gone", 0)]))
    assert invalid.error_code == int(E.INVALID_GROUP_ID)


async def test_offset_delete_keeps_the_topics_a_consumer_group_subscribes_to() -> None:
    env = Env()
    joined = await env.join_member(5)
    member = joined.member_id
    await env.call(env.sync_group, 5, sync_body("group", member, 1, {member: b""}))
    await env.call(env.offset_commit, 9, commit_body("group", OFFSETS, member_id=member, generation=1))
    body = offset_delete_body("group", [("orders", 0), ("audit", 0)])
    answer = await env.call(env.offset_delete, 0, body)
    assert offset_delete_answer(answer) == (
        NONE,
        {("orders", 0): int(E.GROUP_SUBSCRIBED_TO_TOPIC), ("audit", 0): NONE},
    )


async def test_offset_delete_waits_for_the_tombstones() -> None:
    env = Env(defer_log=True)
    task = env.start(env.offset_commit, 8, commit_body("manual", {("t", 0): 1}))
    await env.finish_log(task)
    deleting = env.start(env.offset_delete, 0, offset_delete_body("manual", [("t", 0)]))
    await asyncio.sleep(0)
    assert not deleting.done()
    (answer,) = await env.finish_log(deleting)
    assert offset_delete_answer(answer) == (NONE, {("t", 0): NONE})
