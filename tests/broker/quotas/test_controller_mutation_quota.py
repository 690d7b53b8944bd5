"""controller_mutation_rate (KIP-599) on a fake clock: Kafka's token bucket, strict and permissive
quotas, and a forwarding broker's admission of CreateTopics / CreatePartitions / DeleteTopics."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from broker.handlers.base import RequestContext
from broker.handlers.create_partitions import CreatePartitionsHandler
from broker.handlers.create_topics import CreateTopicsHandler
from broker.handlers.delete_topics import DeleteTopicsHandler
from broker.quotas.controller_mutation import (
    THROTTLING_QUOTA_EXCEEDED_MESSAGE,
    ControllerMutationQuotaManager,
    PartitionMutationQuotas,
    TokenBucket,
)
from broker.quotas.throttle import ChannelThrottles
from metadata.image import QuotaEntity
from metadata.topics import TopicState
from protocol.api_keys import ApiKey
from protocol.data import MessageData
from protocol.error_codes import ErrorCode

pytestmark = [pytest.mark.timeout(30)]

APP: QuotaEntity = (("client-id", "app"),)


def manager(rate: float | None, now: list[int]) -> ControllerMutationQuotaManager:
    table: dict[QuotaEntity, dict[str, float]] = {}
    if rate is not None:
        table[APP] = {"controller_mutation_rate": rate}
    return ControllerMutationQuotaManager(
        lambda entity: table.get(entity, {}),
        any_quota=lambda: bool(table),
        samples=2,
        window_s=1,
        clock_ms=lambda: now[0],
    )


def test_the_token_bucket_refills_at_the_quota_up_to_its_burst() -> None:
    bucket = TokenBucket(burst=20.0, now_ms=0)
    bucket.record(25, quota=10.0, burst=20.0, now_ms=0)
    assert bucket.measure(10.0, 20.0, 0) == pytest.approx(-5.0)
    assert bucket.measure(10.0, 20.0, 500) == pytest.approx(0.0)
    assert bucket.measure(10.0, 20.0, 60_000) == pytest.approx(20.0)  # never above the burst


def test_strict_accepts_into_debt_then_refuses_with_the_time_back_to_zero() -> None:
    now = [0]
    quota = manager(10.0, now).quota_for("app", ApiKey.CREATE_TOPICS, 6)
    assert quota is not None and quota.strict
    # burst: 10/s x 2 windows x 1 s = 20 tokens
    assert quota.try_record(15) and quota.throttle_ms() == 0
    assert quota.try_record(15)  # 5 left: accepted, 10 in debt, not throttled (KIP-599)
    assert quota.throttle_ms() == 0
    assert not quota.try_record(1)  # in debt: refused, 10 tokens at 10/s is one second
    assert quota.throttle_ms() == 1000
    now[0] = 400
    assert quota.throttle_ms() == 600  # the time since it was decided is deducted
    now[0] = 1000
    assert quota.try_record(1)


def test_permissive_accepts_everything_and_throttles_the_debt() -> None:
    now = [0]
    quota = manager(10.0, now).quota_for("app", ApiKey.CREATE_TOPICS, 5)
    assert quota is not None and not quota.strict
    assert quota.try_record(50)
    assert quota.throttle_ms() == 3000  # 30 in debt at 10/s
    assert manager(10.0, now).quota_for("other", ApiKey.CREATE_TOPICS, 6) is None


def ctx(api_key: int, version: int) -> RequestContext:
    return RequestContext(api_key, version, 1, "app", "peer", 9, 0)


class Image:
    def __init__(self, topics: dict[str, int]) -> None:
        self.topics = {
            name: TopicState(name, uuid.uuid4(), dict.fromkeys(range(count)))
            for name, count in topics.items()
        }

    def get(self, name: str) -> TopicState | None:
        return self.topics.get(name)

    def get_by_id(self, topic_id: uuid.UUID) -> TopicState | None:
        return next((t for t in self.topics.values() if t.topic_id == topic_id), None)


def create(name: str, partitions: int) -> MessageData:
    return MessageData(
        {
            "name": name,
            "num_partitions": partitions,
            "replication_factor": 1,
            "assignments": [],
            "configs": [],
        }
    )


def mutations(rate: float, now: list[int], heard: list[Any]) -> PartitionMutationQuotas:
    return PartitionMutationQuotas(
        manager(rate, now), ChannelThrottles(), default_partitions=3, on_throttle=lambda *a: heard.append(a)
    )


def test_a_create_topics_burst_over_the_rate_is_refused_per_topic_for_strict_versions() -> None:
    now = [0]
    heard: list[Any] = []
    quotas = mutations(5.0, now, heard)  # 10 tokens
    image: Any = Image({"exists": 50})
    request = MessageData(
        {
            "topics": [create("a", 8), create("exists", 100), create("b", 4), create("c", -1)],
            "timeout_ms": 1000,
            "validate_only": False,
        }
    )
    c = ctx(ApiKey.CREATE_TOPICS, 7)
    admission = quotas.admit(c, request, image, CreateTopicsHandler.error_body)
    assert admission is not None
    # a (8) leaves 2; exists costs nothing; b (4) goes 2 into debt; c is refused
    assert [t.name for t in admission.forwarded.topics] == ["a", "exists", "b"]
    controller = MessageData(
        {
            "throttle_time_ms": 0,
            "topics": [
                MessageData({"name": "a", "error_code": 0, "error_message": None}),
                MessageData({"name": "exists", "error_code": 36, "error_message": "exists"}),
                MessageData({"name": "b", "error_code": 0, "error_message": None}),
            ],
        }
    )
    body = quotas.respond(admission, controller)
    by_name = {t["name"]: t for t in body["topics"]}
    assert by_name["c"]["error_code"] == ErrorCode.THROTTLING_QUOTA_EXCEEDED
    assert by_name["c"]["error_message"] == THROTTLING_QUOTA_EXCEEDED_MESSAGE
    assert by_name["a"]["error_code"] == 0
    assert body["throttle_time_ms"] == 400  # 2 in debt at 5/s
    assert heard == [("ControllerMutation", "ANONYMOUS", "app", 400)]


def test_old_versions_are_accepted_and_throttled_and_validate_only_is_not_counted() -> None:
    now = [0]
    quotas = mutations(5.0, now, [])
    image: Any = Image({})
    request = MessageData({"topics": [create("a", 30)], "timeout_ms": 1000, "validate_only": True})
    assert quotas.admit(ctx(ApiKey.CREATE_TOPICS, 5), request, image, CreateTopicsHandler.error_body) is None
    request["validate_only"] = False
    admission = quotas.admit(ctx(ApiKey.CREATE_TOPICS, 5), request, image, CreateTopicsHandler.error_body)
    assert admission is not None and admission.rejected is None
    body = quotas.respond(admission, MessageData({"throttle_time_ms": 0, "topics": []}))
    assert body["throttle_time_ms"] == 4000  # 20 in debt at 5/s


def test_a_topic_the_controller_refuses_gives_its_mutations_back() -> None:
    now = [0]
    quotas = mutations(5.0, now, [])
    image: Any = Image({})
    c = ctx(ApiKey.CREATE_TOPICS, 7)
    request = MessageData({"topics": [create("bad", 10)], "timeout_ms": 1000, "validate_only": False})
    admission = quotas.admit(c, request, image, CreateTopicsHandler.error_body)
    assert admission is not None
    refused = MessageData({"name": "bad", "error_code": 37, "error_message": "no"})
    quotas.respond(admission, MessageData({"throttle_time_ms": 0, "topics": [refused]}))
    again = quotas.admit(c, request, image, CreateTopicsHandler.error_body)
    assert again is not None and again.rejected is None  # the bucket is full again


def test_create_partitions_counts_the_partitions_added_and_delete_topics_those_deleted() -> None:
    now = [0]
    quotas = mutations(5.0, now, [])
    image: Any = Image({"grow": 2, "old": 9, "older": 3})
    grow = MessageData(
        {
            "topics": [MessageData({"name": "grow", "count": 10, "assignments": None})],
            "timeout_ms": 1000,
            "validate_only": False,
        }
    )
    added = quotas.admit(ctx(ApiKey.CREATE_PARTITIONS, 3), grow, image, CreatePartitionsHandler.error_body)
    assert added is not None and added.permits == {"grow": 8}
    older_id = image.topics["older"].topic_id
    delete = MessageData(
        {
            "topics": [
                MessageData({"name": "old", "topic_id": uuid.UUID(int=0)}),
                MessageData({"name": None, "topic_id": older_id}),
            ],
            "timeout_ms": 1000,
        }
    )
    c = ctx(ApiKey.DELETE_TOPICS, 6)
    deleted = quotas.admit(c, delete, image, DeleteTopicsHandler.error_body)
    assert deleted is not None
    # 2 tokens left: old (9) is accepted into debt, older is refused
    assert deleted.permits == {"old": 9}
    gone = MessageData({"name": "old", "topic_id": uuid.UUID(int=1), "error_code": 0, "error_message": None})
    body = quotas.respond(deleted, MessageData({"throttle_time_ms": 0, "responses": [gone]}))
    [_, refused] = body["responses"]
    assert refused["topic_id"] == older_id
    assert refused["error_code"] == ErrorCode.THROTTLING_QUOTA_EXCEEDED
    assert body["throttle_time_ms"] > 0
