"""Keys, epochs and the inclusion rules of one cached partition (kafka-behaviour.md 3.1, 3.4, 3.7)."""

from __future__ import annotations

import uuid

import pytest

from broker.fetch_session import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    CachedPartition,
    PartitionFetchResult,
    TopicPartitionKey,
    next_epoch,
)
from broker.fetch_session.session import MAX_EPOCH, is_full_request
from protocol.error_codes import ErrorCode
from protocol.sentinels import ZERO_UUID
from tests.broker.fetch_session_helpers import BAR_ID, FOO_ID, params, result, tid, tp

# -- epochs (3.1) ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("epoch", "expected"),
    [(0, 1), (1, 2), (41, 42), (MAX_EPOCH, 1), (MAX_EPOCH - 1, MAX_EPOCH), (-1, -1), (-2, -1), (-99, -1)],
)
def test_next_epoch_increments_wraps_past_zero_and_collapses_negatives(epoch: int, expected: int) -> None:
    assert next_epoch(epoch) == expected


def test_a_new_session_starts_at_epoch_one() -> None:
    assert next_epoch(INITIAL_EPOCH) == 1


@pytest.mark.parametrize(
    ("epoch", "full"), [(0, True), (-1, True), (1, False), (-2, False), (MAX_EPOCH, False)]
)
def test_only_epochs_zero_and_minus_one_are_full(epoch: int, full: bool) -> None:
    assert is_full_request(epoch) is full
    assert FINAL_EPOCH == -1 and INITIAL_EPOCH == 0


# -- key equality (testCachedPartitionEqualsAndHashCode, testMaybeResolveUnknownName) ---------------


def test_keys_with_an_id_compare_by_id_and_ignore_the_name() -> None:
    with_name = tid(FOO_ID, "foo", 0)
    without_name = tid(FOO_ID, None, 0)
    other_name = tid(FOO_ID, "renamed", 0)
    assert with_name == without_name == other_name
    assert hash(with_name) == hash(without_name) == hash(other_name)
    assert with_name != tid(BAR_ID, "foo", 0)
    assert with_name != tid(FOO_ID, "foo", 1)


def test_keys_without_an_id_compare_by_name() -> None:
    assert tp("foo", 0) == tp("foo", 0) and hash(tp("foo", 0)) == hash(tp("foo", 0))
    assert tp("foo", 0) != tp("other", 0)
    assert tp("foo", 0) != tp("foo", 1)


def test_a_key_with_an_id_never_equals_one_without() -> None:
    assert tid(FOO_ID, "foo", 0) != tp("foo", 0)
    assert tp("foo", 0) != tid(FOO_ID, "foo", 0)
    assert {tid(FOO_ID, "foo", 0): 1}.get(tp("foo", 0)) is None


def test_keys_are_usable_as_dict_keys_across_name_resolution() -> None:
    cache = {tid(FOO_ID, None, 3): "cached"}
    assert cache[tid(FOO_ID, "foo", 3)] == "cached"


def test_only_missing_names_are_resolved_and_only_when_known() -> None:
    names = {FOO_ID: "foo"}
    assert tid(FOO_ID, None, 0).resolved(names.get).topic_name == "foo"
    assert tid(BAR_ID, None, 0).resolved(names.get).topic_name is None
    assert tid(FOO_ID, "kept", 0).resolved(names.get).topic_name == "kept"
    assert tp("bar", 0).resolved(names.get) == tp("bar", 0)


def test_a_resolved_name_stays_when_metadata_forgets_it() -> None:
    cached = CachedPartition(tid(FOO_ID, None, 0), params(0), seq=0)
    known: dict[uuid.UUID, str] = {FOO_ID: "foo"}
    cached.maybe_resolve_name(known.get)
    cached.maybe_resolve_name(lambda _id: None)
    assert cached.key.topic_name == "foo"


def test_key_str_names_unknown_topics_by_id() -> None:
    assert str(tp("foo", 2)) == "foo-2"
    assert str(tid(FOO_ID, None, 2)) == f"<unknown {FOO_ID}>-2"
    assert TopicPartitionKey(ZERO_UUID, None, 0).watch_key == (None, 0)
    assert tid(uuid.UUID(int=5), "x", 1).watch_key == (uuid.UUID(int=5), 1)


# -- inclusion rules 1-6 and non-rules (3.4) ---------------------------------------------------------


def _steady() -> CachedPartition:
    """A partition whose cached baseline matches ``result()``: HW 10, log start 0."""
    return CachedPartition(tp("foo", 0), params(10), seq=0, high_watermark=10, log_start_offset=0)


@pytest.mark.parametrize(
    ("name", "news"),
    [
        ("1 records", result(records=5)),
        ("2 high watermark", result(hw=11)),
        ("3 log start offset", result(log_start=3)),
        ("4 preferred read replica", result(preferred_read_replica=2)),
        ("5 error", result(error_code=ErrorCode.NOT_LEADER_OR_FOLLOWER)),
        ("6 diverging epoch", result(diverging_epoch=0)),
    ],
)
def test_each_inclusion_rule_alone_includes_the_partition(name: str, news: PartitionFetchResult) -> None:
    assert _steady().must_respond(news, update=True), name


@pytest.mark.parametrize(
    ("name", "quiet"),
    [
        ("nothing", result()),
        (
            "last stable offset only",
            PartitionFetchResult(high_watermark=10, last_stable_offset=3, log_start_offset=0),
        ),
        ("payload only (aborted txns, current leader)", result(payload={"current_leader": (1, 7)})),
        ("budget skip alone", result(skipped_for_budget=True)),
        ("no diverging epoch", result(diverging_epoch=-1)),
    ],
)
def test_non_rules_do_not_include_the_partition(name: str, quiet: PartitionFetchResult) -> None:
    assert not _steady().must_respond(quiet, update=True), name


def test_rules_two_and_three_refresh_the_baseline_only_when_updating() -> None:
    cached = _steady()
    assert cached.must_respond(result(hw=12, log_start=4), update=False)
    assert (cached.high_watermark, cached.log_start_offset) == (10, 0)
    assert cached.must_respond(result(hw=12, log_start=4), update=True)
    assert (cached.high_watermark, cached.log_start_offset) == (12, 4)
    assert not cached.must_respond(result(hw=12, log_start=4), update=True)


def test_an_error_resets_the_cached_high_watermark_so_recovery_is_reported() -> None:
    cached = _steady()
    assert cached.must_respond(result(error_code=ErrorCode.NOT_LEADER_OR_FOLLOWER), update=True)
    assert cached.high_watermark == -1
    assert cached.must_respond(result(), update=True)  # error cleared: HW 10 != -1
    assert not cached.must_respond(result(), update=True)


def test_a_fresh_partition_is_included_unless_the_read_really_gives_minus_one() -> None:
    fresh = CachedPartition(tp("foo", 0), params(0), seq=0)
    assert fresh.must_respond(result(hw=0), update=False)
    assert not fresh.must_respond(PartitionFetchResult(high_watermark=-1, log_start_offset=-1), update=False)


def test_sticky_news_and_budget_skips_make_a_read_worth_repeating() -> None:
    assert result(records=1).would_report_again()
    assert result(skipped_for_budget=True).would_report_again()
    assert result(error_code=ErrorCode.UNKNOWN_TOPIC_ID).would_report_again()
    assert not result(hw=99, log_start=5).would_report_again()
