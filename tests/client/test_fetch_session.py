"""The client side of KIP-227 (kafka-behaviour.md §3.9), and the O(changed) incremental build."""

from __future__ import annotations

import sys
import uuid
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

import pytest

from client import fetch_session
from client.fetch_session import (
    FINAL_EPOCH,
    INITIAL,
    INITIAL_EPOCH,
    MAX_EPOCH,
    FetchMetadata,
    FetchRequestData,
    FetchSessionHandler,
    PartitionData,
    TopicIdPartition,
    TopicPartition,
    fetch_request_body,
    next_epoch,
)
from protocol.data import MessageData
from protocol.error_codes import ErrorCode
from protocol.messages.fetch import FETCH_REQUEST, FETCH_RESPONSE
from protocol.sentinels import ZERO_UUID

T = TypeVar("T")

FOO0 = TopicPartition("foo", 0)
FOO1 = TopicPartition("foo", 1)
BAR0 = TopicPartition("bar", 0)
FOO_ID = uuid.UUID(int=0xF00)
BAR_ID = uuid.UUID(int=0xBA4)
SESSION = 123


def data(offset: int, max_bytes: int = 100, **kw: Any) -> PartitionData:
    return PartitionData(offset, max_bytes, **kw)


def response(
    partitions: Iterable[TopicPartition] = (),
    *,
    session_id: int = 0,
    error: int = 0,
    throttle_ms: int = 0,
    version: int = 12,
    topic_ids: dict[str, uuid.UUID] | None = None,
) -> MessageData:
    """A Fetch response as the codec decodes it (encoded then decoded, so field names are the schema's)."""
    topics: list[dict[str, Any]] = []
    for tp in partitions:
        if not topics or topics[-1]["topic"] != tp.topic:
            topic_id = (topic_ids or {}).get(tp.topic, ZERO_UUID)
            topics.append({"topic": tp.topic, "topic_id": topic_id, "partitions": []})
        topics[-1]["partitions"].append({"partition_index": tp.partition, "high_watermark": 10})
    body = {
        "throttle_time_ms": throttle_ms,
        "error_code": error,
        "session_id": session_id,
        "responses": topics,
    }
    codec = FETCH_RESPONSE.codec(version)
    return codec.decode(codec.encode(body))


def start_session(
    partitions: dict[TopicPartition, PartitionData], session_id: int = SESSION
) -> FetchSessionHandler:
    """A handler whose first (full) request created session ``session_id``; next is (id, 1)."""
    handler = FetchSessionHandler()
    builder = handler.new_builder()
    for tp, d in partitions.items():
        builder.add(tp, d)
    sent = builder.build()
    assert sent.is_full
    assert handler.handle_response(response(sent.to_send, session_id=session_id))
    assert handler.next_metadata == FetchMetadata(session_id, 1)
    return handler


# -- metadata and epochs --------------------------------------------------------------------------


def test_next_epoch_increments_wraps_past_zero_and_keeps_negative_final() -> None:
    assert next_epoch(0) == 1
    assert next_epoch(41) == 42
    assert next_epoch(MAX_EPOCH) == 1
    assert next_epoch(-1) == FINAL_EPOCH
    assert next_epoch(-7) == FINAL_EPOCH


def test_full_means_epoch_zero_or_minus_one() -> None:
    assert FetchMetadata(0, INITIAL_EPOCH).is_full
    assert FetchMetadata(5, FINAL_EPOCH).is_full
    assert not FetchMetadata(5, 1).is_full
    assert not FetchMetadata(5, -2).is_full
    assert FetchMetadata(5, 9).next_close_existing() == (5, 0)
    assert FetchMetadata(5, MAX_EPOCH).next_incremental() == (5, 1)
    assert FetchMetadata.new_incremental(5) == (5, 1)


# -- building -------------------------------------------------------------------------------------


def test_first_request_is_full_with_every_partition_in_add_order() -> None:
    handler = FetchSessionHandler()
    assert handler.next_metadata == INITIAL
    sent = handler.new_builder().add(FOO1, data(1)).add(FOO0, data(0)).build()
    assert sent.metadata == (0, 0)
    assert sent.is_full
    assert list(sent.to_send) == [FOO1, FOO0]
    assert sent.to_forget == [] and sent.to_replace == []
    assert list(handler.session_partitions) == [FOO1, FOO0]


def test_full_response_with_session_id_starts_incremental_epoch_one() -> None:
    handler = start_session({FOO0: data(0)}, session_id=77)
    assert handler.next_metadata == (77, 1)


def test_full_response_without_session_id_stays_full() -> None:
    handler = FetchSessionHandler()
    sent = handler.new_builder().add(FOO0, data(0)).build()
    assert handler.handle_response(response(sent.to_send, session_id=0))
    assert handler.next_metadata == INITIAL
    assert handler.new_builder().add(FOO0, data(0)).build().is_full


def test_incremental_builder_sends_new_then_altered_and_implies_the_rest() -> None:
    """Kafka's testIncrementals: bar0 (new) first, then foo1 (altered); foo0 unchanged is implied."""
    handler = start_session({FOO0: data(0), FOO1: data(10)})
    sent = handler.new_builder().add(FOO0, data(0)).add(FOO1, data(11)).add(BAR0, data(20)).build()
    assert sent.metadata == (SESSION, 1)
    assert list(sent.to_send.items()) == [(BAR0, data(20)), (FOO1, data(11))]
    assert sent.to_forget == []
    assert list(handler.session_partitions) == [FOO0, FOO1, BAR0]
    assert handler.handle_response(response([FOO1], session_id=SESSION))
    assert handler.next_metadata == (SESSION, 2)

    sent = handler.new_builder().add(FOO1, data(11)).add(BAR0, data(20)).build()
    assert sent.metadata == (SESSION, 2)
    assert sent.to_send == {}
    assert sent.to_forget == [TopicIdPartition(ZERO_UUID, "foo", 0)]
    assert list(handler.session_partitions) == [FOO1, BAR0]


@pytest.mark.parametrize(
    "field", ["fetch_offset", "max_bytes", "log_start_offset", "current_leader_epoch", "last_fetched_epoch"]
)
def test_any_changed_field_makes_a_partition_altered(field: str) -> None:
    handler = start_session({FOO0: data(0)})
    changed = data(0)._replace(**{field: 99})
    handler.mark_changed(FOO0, changed)
    assert handler.build().to_send == {FOO0: changed}


def test_marked_changes_give_the_same_request_as_the_builder() -> None:
    handler = start_session({FOO0: data(0), FOO1: data(10)})
    handler.mark_changed(FOO1, data(11))
    handler.mark_changed(BAR0, data(20))
    handler.mark_changed(FOO0, data(0))  # unchanged: implied
    assert handler.pending_changes == 3
    sent = handler.build()
    assert sent.metadata == (SESSION, 1)
    assert list(sent.to_send.items()) == [(BAR0, data(20)), (FOO1, data(11))]
    assert handler.pending_changes == 0
    assert handler.handle_response(response([FOO1, BAR0], session_id=SESSION))

    handler.remove(FOO0)
    sent = handler.build()
    assert sent.metadata == (SESSION, 2)
    assert sent.to_send == {}
    assert sent.to_forget == [TopicIdPartition(ZERO_UUID, "foo", 0)]
    assert dict(handler.session_partitions) == {FOO1: data(11), BAR0: data(20)}


def test_remove_then_mark_in_one_round_keeps_the_partition() -> None:
    handler = start_session({FOO0: data(0)})
    handler.remove(FOO0)
    handler.mark_changed(FOO0, data(5))
    sent = handler.build()
    assert sent.to_send == {FOO0: data(5)}
    assert sent.to_forget == []


def test_adding_then_removing_an_unknown_partition_sends_nothing() -> None:
    handler = start_session({FOO0: data(0)})
    handler.mark_changed(BAR0, data(1))
    handler.remove(BAR0)
    handler.remove(FOO1)  # never in the session
    sent = handler.build()
    assert sent.to_send == {} and sent.to_forget == []
    assert list(handler.session_partitions) == [FOO0]


def test_full_request_after_an_error_carries_every_partition_with_pending_changes() -> None:
    handler = start_session({FOO0: data(0), FOO1: data(10)})
    handler.mark_changed(FOO1, data(15))
    handler.mark_changed(BAR0, data(1))
    handler.remove(FOO0)
    handler.handle_error()
    assert handler.next_metadata == (SESSION, INITIAL_EPOCH)
    sent = handler.build()
    assert sent.is_full and sent.metadata == (SESSION, 0)
    assert sent.to_send == {FOO1: data(15), BAR0: data(1)}
    assert sent.to_forget == []


def test_builder_supersedes_marked_changes() -> None:
    handler = start_session({FOO0: data(0)})
    handler.mark_changed(BAR0, data(1))
    sent = handler.new_builder().add(FOO0, data(0)).build()
    assert sent.to_send == {} and sent.to_forget == []
    assert handler.pending_changes == 0


# -- topic ids ------------------------------------------------------------------------------------


def test_topic_ids_usable_only_when_every_partition_has_one() -> None:
    handler = FetchSessionHandler()
    sent = (
        handler.new_builder().add(FOO0, data(0, topic_id=FOO_ID)).add(BAR0, data(0, topic_id=BAR_ID)).build()
    )
    assert sent.can_use_topic_ids
    handler = FetchSessionHandler()
    sent = handler.new_builder().add(FOO0, data(0, topic_id=FOO_ID)).add(BAR0, data(0)).build()
    assert not sent.can_use_topic_ids


def test_forgetting_a_partition_without_topic_id_forbids_topic_ids_for_that_request() -> None:
    handler = start_session({FOO0: data(0, topic_id=FOO_ID), BAR0: data(0)})
    handler.remove(BAR0)
    sent = handler.build()
    assert not sent.can_use_topic_ids
    assert handler.handle_response(response([], session_id=SESSION))
    handler.mark_changed(FOO0, data(1, topic_id=FOO_ID))
    assert handler.build().can_use_topic_ids


def test_changed_topic_id_replaces_the_partition() -> None:
    new_id = uuid.UUID(int=0xF01)
    handler = start_session({FOO0: data(0, topic_id=FOO_ID), FOO1: data(0, topic_id=FOO_ID)})
    handler.mark_changed(FOO0, data(0, topic_id=new_id))
    sent = handler.build()
    assert sent.to_send == {FOO0: data(0, topic_id=new_id)}
    assert sent.to_replace == [TopicIdPartition(FOO_ID, "foo", 0)]
    assert sent.to_forget == []
    assert handler.topic_name(new_id) == "foo" and handler.topic_name(FOO_ID) == "foo"

    v13 = fetch_request_body(sent, 13, max_wait_ms=0, min_bytes=1)
    assert v13["forgotten_topics_data"] == [{"topic": "foo", "topic_id": FOO_ID, "partitions": [0]}]
    assert v13["topics"][0]["topic_id"] == new_id
    v12 = fetch_request_body(sent, 12, max_wait_ms=0, min_bytes=1)
    assert v12["forgotten_topics_data"] == []  # the broker adds before it removes (§3.2)


def test_an_id_gained_from_zero_is_an_alteration_not_a_replacement() -> None:
    handler = start_session({FOO0: data(0)})
    handler.mark_changed(FOO0, data(0, topic_id=FOO_ID))
    sent = handler.build()
    assert sent.to_send == {FOO0: data(0, topic_id=FOO_ID)} and sent.to_replace == []
    assert sent.can_use_topic_ids


# -- handle_response: every rule of §3.9 ----------------------------------------------------------


def incremental_handler() -> FetchSessionHandler:
    handler = start_session({FOO0: data(0), FOO1: data(0)})
    handler.build()
    return handler


def test_session_not_found_resets_to_initial() -> None:
    handler = incremental_handler()
    assert not handler.handle_response(response(error=ErrorCode.FETCH_SESSION_ID_NOT_FOUND))
    assert handler.next_metadata == INITIAL


@pytest.mark.parametrize(
    "code",
    [
        ErrorCode.INVALID_FETCH_SESSION_EPOCH,
        ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR,
        ErrorCode.UNKNOWN_SERVER_ERROR,
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
    ],
)
def test_other_top_level_errors_close_and_recreate(code: ErrorCode) -> None:
    handler = incremental_handler()
    assert not handler.handle_response(response(session_id=0, error=code))
    assert handler.next_metadata == (SESSION, 0)
    assert handler.build().to_send == {FOO0: data(0), FOO1: data(0)}


def test_top_level_error_on_a_full_request_too() -> None:
    handler = FetchSessionHandler()
    handler.new_builder().add(FOO0, data(0)).build()
    assert not handler.handle_response(response(error=ErrorCode.INVALID_FETCH_SESSION_EPOCH))
    assert handler.next_metadata == INITIAL  # (0, 0).next_close_existing()


def test_throttled_empty_full_response_retries_full() -> None:
    handler = FetchSessionHandler()
    handler.new_builder().add(FOO0, data(0)).build()
    assert not handler.handle_response(response([], session_id=0, throttle_ms=100))
    assert handler.next_metadata == INITIAL


def test_throttled_empty_incremental_response_is_a_normal_round() -> None:
    """§3.5: the broker bumped the epoch and kept the session; the client goes on with epoch+1."""
    handler = incremental_handler()
    assert handler.handle_response(response([], session_id=SESSION, throttle_ms=100))
    assert handler.next_metadata == (SESSION, 2)


def test_empty_full_response_of_an_empty_request_is_valid() -> None:
    handler = FetchSessionHandler()
    assert handler.build().to_send == {}
    assert handler.handle_response(response([], session_id=9))
    assert handler.next_metadata == (9, 1)


@pytest.mark.parametrize(
    "partitions",
    [
        pytest.param([FOO0], id="omitted"),
        pytest.param([FOO0, FOO1, BAR0], id="extra"),
        pytest.param([BAR0, FOO0], id="omitted-and-extra"),
    ],
)
def test_invalid_full_response_resets_to_initial(partitions: list[TopicPartition]) -> None:
    handler = FetchSessionHandler()
    handler.new_builder().add(FOO0, data(0)).add(FOO1, data(0)).build()
    assert not handler.handle_response(response(partitions, session_id=SESSION))
    assert handler.next_metadata == INITIAL


def test_full_response_with_partitions_in_another_order_is_valid() -> None:
    handler = FetchSessionHandler()
    handler.new_builder().add(FOO0, data(0)).add(FOO1, data(0)).build()
    assert handler.handle_response(response([FOO1, FOO0], session_id=SESSION))


def test_full_response_with_an_unknown_topic_id_is_invalid() -> None:
    handler = FetchSessionHandler()
    handler.new_builder().add(FOO0, data(0, topic_id=FOO_ID)).build()
    stranger = uuid.UUID(int=0xDEAD)
    bad = response([FOO0], session_id=SESSION, version=13, topic_ids={"foo": stranger})
    assert not handler.handle_response(bad, 13)
    assert handler.next_metadata == INITIAL


def test_v13_full_response_resolves_topic_ids_through_the_session() -> None:
    handler = FetchSessionHandler()
    handler.new_builder().add(FOO0, data(0, topic_id=FOO_ID)).add(BAR0, data(0, topic_id=BAR_ID)).build()
    ok = response([FOO0, BAR0], session_id=SESSION, version=13, topic_ids={"foo": FOO_ID, "bar": BAR_ID})
    assert [tp for tp, _ in handler.response_partitions(ok, 13)] == [FOO0, BAR0]
    assert [tp for tp, _ in handler.response_partitions(ok)] == [FOO0, BAR0]  # version inferred
    assert handler.handle_response(ok, 13)
    assert handler.next_metadata == (SESSION, 1)


def test_incremental_response_with_a_partition_outside_the_session_is_invalid() -> None:
    handler = incremental_handler()
    assert not handler.handle_response(response([FOO0, BAR0], session_id=SESSION))
    assert handler.next_metadata == (SESSION, 0)


def test_incremental_response_with_an_unknown_topic_id_is_invalid() -> None:
    handler = start_session({FOO0: data(0, topic_id=FOO_ID)})
    handler.build()
    bad = response([BAR0], session_id=SESSION, version=13, topic_ids={"bar": BAR_ID})
    assert not handler.handle_response(bad, 13)
    assert handler.next_metadata == (SESSION, 0)


def test_incremental_response_may_hold_any_subset_of_the_session() -> None:
    handler = incremental_handler()
    assert handler.handle_response(response([FOO1], session_id=SESSION))
    assert handler.next_metadata == (SESSION, 2)


def test_incremental_response_without_session_id_means_the_broker_closed_it() -> None:
    handler = incremental_handler()
    assert handler.handle_response(response([FOO0], session_id=0))
    assert handler.next_metadata == INITIAL


def test_epoch_rises_by_one_per_successful_round() -> None:
    handler = start_session({FOO0: data(0)})
    for epoch in range(1, 6):
        sent = handler.build()
        assert sent.metadata == (SESSION, epoch)
        assert handler.handle_response(response([], session_id=SESSION))
    assert handler.next_metadata == (SESSION, 6)


def test_send_error_closes_and_recreates() -> None:
    handler = incremental_handler()
    handler.handle_error()
    assert handler.next_metadata == (SESSION, 0)
    fresh = FetchSessionHandler()
    fresh.handle_error()
    assert fresh.next_metadata == INITIAL


def test_close_asks_for_the_final_epoch() -> None:
    handler = incremental_handler()
    assert handler.close() == (SESSION, FINAL_EPOCH)
    sent = handler.build()
    assert sent.is_full and sent.metadata == (SESSION, -1)


# -- request body ---------------------------------------------------------------------------------


def test_request_body_groups_adjacent_partitions_of_a_topic_and_encodes() -> None:
    handler = start_session({FOO0: data(0), BAR0: data(0), FOO1: data(0)})
    handler.remove(BAR0)
    handler.remove(FOO1)
    handler.mark_changed(FOO0, data(3, log_start_offset=1, current_leader_epoch=2, last_fetched_epoch=1))
    handler.mark_changed(TopicPartition("baz", 0), data(0))
    sent = handler.build()
    body = fetch_request_body(sent, 12, max_wait_ms=500, min_bytes=1, replica_id=2, rack_id="r1")
    assert [t["topic"] for t in body["topics"]] == ["baz", "foo"]
    assert body["topics"][1]["partitions"][0] == {
        "partition": 0,
        "current_leader_epoch": 2,
        "fetch_offset": 3,
        "last_fetched_epoch": 1,
        "log_start_offset": 1,
        "partition_max_bytes": 100,
    }
    assert (body["session_id"], body["session_epoch"]) == (SESSION, 1)
    assert body["forgotten_topics_data"] == [
        {"topic": "bar", "topic_id": ZERO_UUID, "partitions": [0]},
        {"topic": "foo", "topic_id": ZERO_UUID, "partitions": [1]},
    ]
    decoded = FETCH_REQUEST.codec(12).decode(FETCH_REQUEST.codec(12).encode(body))
    assert decoded.replica_id == 2 and decoded.session_epoch == 1

    full = FetchSessionHandler()
    sent = full.new_builder().add(FOO0, data(0)).add(BAR0, data(0)).add(FOO1, data(0)).build()
    topics = fetch_request_body(sent, 12, max_wait_ms=0, min_bytes=1)["topics"]
    assert [(t["topic"], len(t["partitions"])) for t in topics] == [("foo", 1), ("bar", 1), ("foo", 1)]


def test_v13_body_needs_topic_ids() -> None:
    handler = FetchSessionHandler()
    sent = handler.new_builder().add(FOO0, data(0)).build()
    with pytest.raises(ValueError, match="topic ids"):
        fetch_request_body(sent, 13, max_wait_ms=0, min_bytes=1)
    handler = FetchSessionHandler()
    sent = handler.new_builder().add(FOO0, data(0, topic_id=FOO_ID)).build()
    body = fetch_request_body(sent, 15, max_wait_ms=0, min_bytes=1, replica_id=3, replica_epoch=7)
    decoded = FETCH_REQUEST.codec(15).decode(FETCH_REQUEST.codec(15).encode(body))
    assert decoded.topics[0].topic_id == FOO_ID
    assert decoded.replica_state == {"replica_id": 3, "replica_epoch": 7}


# -- cost: an incremental build is O(changed) -----------------------------------------------------


def count_lines(call: Callable[[], T]) -> tuple[T, int]:
    """Run ``call`` and count the source lines executed inside client/fetch_session.py: the work."""
    target = fetch_session.__file__
    executed = 0

    def local(frame: Any, event: str, arg: Any) -> Any:
        nonlocal executed
        if event == "line":
            executed += 1
        return local

    def tracer(frame: Any, event: str, arg: Any) -> Any:
        return local if frame.f_code.co_filename == target else None

    previous = sys.gettrace()
    sys.settrace(tracer)
    try:
        result = call()
    finally:
        sys.settrace(previous)
    return result, executed


def big_session(size: int) -> FetchSessionHandler:
    handler = FetchSessionHandler()
    for p in range(size):
        handler.mark_changed(TopicPartition("big", p), data(0))
    sent = handler.build()
    assert handler.handle_response(response(sent.to_send, session_id=SESSION))
    return handler


def mark_a_few(handler: FetchSessionHandler) -> None:
    handler.mark_changed(TopicPartition("big", 3), data(7))  # altered
    handler.mark_changed(TopicPartition("big", 4), data(0))  # unchanged: implied
    handler.mark_changed(TopicPartition("new", 0), data(0))  # added
    handler.remove(TopicPartition("big", 5))  # removed


def test_incremental_build_work_does_not_depend_on_session_size() -> None:
    costs = {}
    for size in (100, 20_000):
        handler = big_session(size)
        mark_a_few(handler)
        sent, costs[size] = count_lines(handler.build)
        assert isinstance(sent, FetchRequestData)
        assert list(sent.to_send) == [TopicPartition("new", 0), TopicPartition("big", 3)]
        assert sent.to_forget == [TopicIdPartition(ZERO_UUID, "big", 5)]
        assert len(handler.session_partitions) == size
    assert costs[100] == costs[20_000]
    assert costs[20_000] < 200


def test_the_line_counter_sees_o_n_work() -> None:
    """Guard against a vacuous cost test: Kafka's diffing builder does walk the whole session."""
    handler = big_session(5_000)
    builder = handler.new_builder()
    for p in range(5_000):
        builder.add(TopicPartition("big", p), data(7 if p == 3 else 0))
    sent, cost = count_lines(builder.build)
    assert list(sent.to_send) == [TopicPartition("big", 3)]
    assert cost > 5_000
