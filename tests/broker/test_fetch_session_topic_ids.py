"""Topic ids inside sessions (kafka-behaviour.md 3.7; FetchSessionTest's topic-id cases)."""

from __future__ import annotations

import uuid

import pytest

from broker.fetch_session import FetchSession, PartitionFetchResult, SessionlessFetchContext
from protocol.error_codes import ErrorCode
from tests.broker.fetch_session_helpers import (
    BAR_ID,
    FOO_ID,
    Harness,
    World,
    keys_of,
    make_harness,
    params,
    tid,
    tp,
)

NAMES = {FOO_ID: "foo", BAR_ID: "bar"}


def _session(h: Harness, response_session_id: int) -> FetchSession:
    session = h.cache.get(response_session_id)
    assert session is not None
    return session


@pytest.mark.parametrize(("created_with", "then"), [(13, 12), (12, 13), (17, 7)])
def test_switching_topic_id_usage_inside_a_session_is_106(created_with: int, then: int) -> None:
    """testIncrementalFetchSessionWithIdsWhenSessionDoesNotUseIds and the reverse."""
    h = make_harness()
    key = tid(FOO_ID, "foo", 0) if created_with >= 13 else tp("foo", 0)
    response = h.respond(h.context(0, 0, [(key, params(0))], version=created_with, names=NAMES))
    session = _session(h, response.session_id)
    assert session.uses_topic_ids is (created_with >= 13)
    context = h.context(session.id, 1, version=then, names=NAMES)
    assert context.error_code == ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR
    assert h.respond(context).session_id == 0 and session.epoch == 1 and h.cache.size == 1


def test_old_request_versions_ignore_ids() -> None:
    """testFetchSessionWithUnknownIdOldRequestVersion: v12 keys have names and no ids, no errors."""
    h = make_harness()
    world = World(h.cache)
    world.add(tp("foo", 0))
    response = h.respond(h.context(0, 0, [(tp("foo", 0), params(0))], version=12, names={}), world.reader())
    assert [r.error_code for _, r in response.partitions] == [0]


def test_unknown_ids_stay_in_the_session_with_no_name_and_are_resolved_later() -> None:
    """testFetchSessionWithUnknownId and testResolveUnknownPartitions."""
    h = make_harness()
    world = World(h.cache)
    foo0, bar0 = tid(FOO_ID, "foo", 0), tid(BAR_ID, "bar", 0)
    world.add(foo0, high_watermark=0)
    world.add(bar0, high_watermark=0)
    data = [(tid(FOO_ID, None, 0), params(0)), (tid(BAR_ID, None, 0), params(0))]
    response = h.respond(h.context(0, 0, data, version=13, names={}), world.reader())
    assert [(k.topic_name, r.error_code) for k, r in response.partitions] == [(None, 100), (None, 100)]
    session = _session(h, response.session_id)
    assert [c.key.topic_name for c in session.partitions_in_order()] == [None, None]

    known = {FOO_ID: "foo"}
    response = h.respond(h.context(session.id, 1, version=13, names=known), world.reader())
    assert [(k.topic_name, r.error_code) for k, r in response.partitions] == [("foo", 0), (None, 100)]

    response = h.respond(h.context(session.id, 2, version=13, names=NAMES), world.reader())
    assert [(k.topic_name, r.error_code) for k, r in response.partitions] == [("bar", 0)]

    response = h.respond(h.context(session.id, 3, version=13, names={}), world.reader())
    assert response.partitions == [] and [c.key.topic_name for c in session.partitions_in_order()] == [
        "foo",
        "bar",
    ]


@pytest.mark.parametrize("resolved_in_session", [True, False])
@pytest.mark.parametrize("named_in_forget", [True, False])
def test_forgetting_works_by_id_whether_or_not_names_are_resolved(
    resolved_in_session: bool, named_in_forget: bool
) -> None:
    """testToForgetPartitions: four combinations; forgetting the last partition goes sessionless."""
    h = make_harness()
    names = NAMES if resolved_in_session else {}
    data = [(tid(FOO_ID, None, 0), params(0)), (tid(FOO_ID, None, 1), params(0))]
    session = _session(h, h.respond(h.context(0, 0, data, version=13, names=names)).session_id)
    forget_name = "foo" if named_in_forget else None
    h.context(session.id, 1, [], [tid(FOO_ID, forget_name, 0)], version=13, names=names)
    assert [c.key.partition for c in session.partitions_in_order()] == [1]
    last = h.context(session.id, 2, [], [tid(FOO_ID, forget_name, 1)], version=13, names=names)
    assert isinstance(last, SessionlessFetchContext) and h.cache.size == 0


def test_incremental_fetch_session_with_ids() -> None:
    """testIncrementalFetchSession, topic-id flavour."""
    h = make_harness()
    world = World(h.cache)
    foo0, foo1, bar0 = tid(FOO_ID, "foo", 0), tid(FOO_ID, "foo", 1), tid(BAR_ID, "bar", 0)
    for key in (foo0, foo1, bar0):
        world.add(key)
    data = [(foo0, params(0)), (foo1, params(10))]
    session = _session(
        h, h.respond(h.context(0, 0, data, version=13, names=NAMES), world.reader()).session_id
    )
    context = h.context(session.id, 1, [(tid(BAR_ID, None, 0), params(10))], [foo0], version=13, names=NAMES)
    assert [k for k, _ in context.partitions_to_read()] == [bar0]
    assert [k.topic_name for k, _ in context.partitions_to_read()] == ["bar"]
    assert keys_of(h.respond(context, world.reader())) == [bar0]


def test_a_recreated_topic_is_replaced_by_id_and_the_old_one_forgotten() -> None:
    h = make_harness()
    old_id, new_id = uuid.UUID(int=1), uuid.UUID(int=2)
    session = _session(
        h, h.respond(h.context(0, 0, [(tid(old_id, "foo", 0), params(5))], version=13)).session_id
    )
    h.context(session.id, 1, [(tid(new_id, "foo", 0), params(0))], [tid(old_id, "foo", 0)], version=13)
    assert [c.key.topic_id for c in session.partitions_in_order()] == [new_id]
    assert h.cache.sessions_watching(tid(old_id, "foo", 0)) == 0


def test_inconsistent_topic_id_is_a_partition_error_and_the_session_stays() -> None:
    """testFetchSessionUpdateTopicIdsBrokerSide: the handler reports 103 per partition."""
    h = make_harness()
    key = tid(FOO_ID, "foo", 0)
    session = _session(h, h.respond(h.context(0, 0, [(key, params(0))], version=13)).session_id)
    context = h.context(session.id, 1, [(key, params(0))], version=13)
    response = context.update_and_generate_response(
        {key: PartitionFetchResult(error_code=ErrorCode.INCONSISTENT_TOPIC_ID)}
    )
    assert response.error_code == 0 and [r.error_code for _, r in response.partitions] == [103]
    assert h.cache.get(session.id) is session
