"""Follower sessions: the replica id they keep, and the end of idle stretches the cache reports so
that the leader credits a follower with the fetches of the partitions it did not read (DESIGN
"Follower liveness without touching idle partitions")."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from broker.fetch_session import (
    CachedPartition,
    FetchContext,
    FetchSession,
    PartitionFetchParams,
    TopicPartitionKey,
)
from tests.broker.fetch_session_helpers import Harness, make_harness, params, result, tp

FOLLOWER = 2
T0 = 1_000


class Credits:
    """Records every idle stretch the cache reports: (replica id, last used, cached offset, key)."""

    def __init__(self) -> None:
        self.seen: list[tuple[int, int, int, str]] = []

    def __call__(self, session: FetchSession, cached: CachedPartition) -> None:
        self.seen.append(
            (session.replica_id, session.last_used_ms, cached.params.fetch_offset, str(cached.key))
        )


@pytest.fixture
def h() -> Harness:
    return make_harness(start_ms=T0)


@pytest.fixture
def credits(h: Harness) -> Credits:
    listener = Credits()
    h.cache.follower_idle_listener = listener
    return listener


def context(
    h: Harness,
    session_id: int,
    epoch: int,
    data: Sequence[tuple[TopicPartitionKey, PartitionFetchParams]] = (),
    forget: Sequence[TopicPartitionKey] = (),
    *,
    replica_id: int = FOLLOWER,
) -> FetchContext:
    return h.manager.new_context(
        version=12,
        session_id=session_id,
        session_epoch=epoch,
        fetch_data=list(data),
        to_forget=list(forget),
        is_follower=replica_id >= 0,
        resolve_topic_name=lambda _: None,
        replica_id=replica_id,
    )


def open_session(
    h: Harness, keys: Sequence[TopicPartitionKey], *, replica_id: int = FOLLOWER
) -> FetchSession:
    """A full fetch at offset 10 = the HW (the leader's LEO for a follower): every partition clean."""
    parts = h.respond(context(h, 0, 0, [(k, params(10)) for k in keys], replica_id=replica_id))
    session = h.cache.get(parts.session_id)
    assert session is not None and session.dirty == set()
    return session


def test_a_follower_session_keeps_the_replica_id_a_consumer_session_none(h: Harness) -> None:
    assert open_session(h, [tp("t", 0)]).replica_id == FOLLOWER
    consumer = open_session(h, [tp("t", 0)], replica_id=-1)
    assert (consumer.replica_id, consumer.privileged) == (-1, False)


def test_a_change_ends_the_idle_stretch_once_at_the_last_use(h: Harness, credits: Credits) -> None:
    session = open_session(h, [tp("t", 0), tp("t", 1)])
    h.clock.advance(500)
    h.respond(context(h, session.id, 1))  # an incremental fetch touching nothing: last used T0+500
    h.clock.advance(700)
    h.cache.on_partition_changed(tp("t", 1))
    h.cache.on_partition_changed(tp("t", 1))  # already dirty: nothing more to credit
    assert credits.seen == [(FOLLOWER, T0 + 500, 10, "t-1")]
    assert session.dirty == {session.get(tp("t", 1))}


def test_consumer_sessions_and_dirty_partitions_report_nothing(h: Harness, credits: Credits) -> None:
    open_session(h, [tp("t", 0)], replica_id=-1)
    follower = open_session(h, [tp("t", 0)])
    follower.mark_dirty(follower.get(tp("t", 0)))  # type: ignore[arg-type]
    h.cache.on_partition_changed(tp("t", 0))
    assert credits.seen == []


def test_resending_or_forgetting_an_idle_partition_ends_its_stretch_with_the_old_offset(
    h: Harness, credits: Credits
) -> None:
    session = open_session(h, [tp("t", 0), tp("t", 1), tp("t", 2)])
    h.clock.advance(300)
    h.respond(context(h, session.id, 1, [(tp("t", 0), params(7))], [tp("t", 1)]))
    assert credits.seen == [(FOLLOWER, T0, 10, "t-0"), (FOLLOWER, T0, 10, "t-1")]
    assert session.get(tp("t", 0)).params.fetch_offset == 7  # type: ignore[union-attr]
    assert session.get(tp("t", 1)) is None


def test_a_removed_session_ends_every_idle_stretch(h: Harness, credits: Credits) -> None:
    session = open_session(h, [tp("t", 0), tp("t", 1)])
    session.mark_dirty(session.get(tp("t", 0)))  # type: ignore[arg-type]
    h.respond(context(h, session.id, -1, [(tp("t", 0), params(10))]))  # the follower closes it
    assert h.cache.get(session.id) is None
    assert credits.seen == [(FOLLOWER, T0, 10, "t-1")]


def test_a_listener_that_changes_the_partition_again_is_not_called_twice(h: Harness) -> None:
    session = open_session(h, [tp("t", 0)])
    seen: list[str] = []

    def credit(_: FetchSession, cached: CachedPartition) -> None:
        seen.append(str(cached.key))
        h.cache.on_partition_changed(cached.key)  # e.g. the credit moved the high watermark

    h.cache.follower_idle_listener = credit
    h.cache.on_partition_changed(tp("t", 0))
    assert seen == ["t-0"] and session.dirty == {session.get(tp("t", 0))}


def test_a_partition_with_something_to_report_starts_dirty_and_is_not_idle(
    h: Harness, credits: Credits
) -> None:
    parts = h.respond(context(h, 0, 0, [(tp("t", 0), params(4))]), lambda key, fetch: result(records=6))
    session = h.cache.get(parts.session_id)
    assert session is not None and len(session.dirty) == 1
    h.cache.on_partition_changed(tp("t", 0))
    assert credits.seen == []
