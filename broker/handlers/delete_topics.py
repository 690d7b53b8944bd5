"""DeleteTopics (20): delete topics by name (v1-5) or by name or topic id (v6), as Kafka's controller.

With delete.topic.enable=false every topic gets TOPIC_DELETION_DISABLED (v3+) or INVALID_REQUEST
(v1-2, which predate that code). An entry with neither a name nor an id, or with both, a name or id
given twice, or a name whose id is also given, is an INVALID_REQUEST with Kafka's message and is not
deleted. An unknown name is UNKNOWN_TOPIC_OR_PARTITION, an unknown id UNKNOWN_TOPIC_ID.

Served on the controller listener: the deletion is in the metadata log before the answer; every
broker deletes the partition logs as it replays it, and a broker forwarding the request answers once
its own metadata no longer shows the topic (broker/handlers/forwarding.py).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from broker.handlers.base import Handler, RequestContext
from metadata.controller.admin import TopicAdmin
from protocol.api_keys import ApiKey
from protocol.data import MessageData
from protocol.error_codes import ErrorCode, KafkaError
from protocol.sentinels import ZERO_UUID

FIRST_VERSION_WITH_DELETION_DISABLED = 3


@dataclass
class _Targets:
    """What the request asks to delete, after Kafka's duplicate and consistency checks."""

    names: dict[str, None] = field(default_factory=dict)
    ids: dict[uuid.UUID, None] = field(default_factory=dict)
    duplicate_names: dict[str, None] = field(default_factory=dict)
    duplicate_ids: dict[uuid.UUID, None] = field(default_factory=dict)
    results: list[dict[str, Any]] = field(default_factory=list)

    def add_name(self, name: str) -> None:
        if name in self.duplicate_names or name in self.names:
            self.names.pop(name, None)
            self.duplicate_names[name] = None
        else:
            self.names[name] = None

    def add_id(self, topic_id: uuid.UUID) -> None:
        if topic_id in self.duplicate_ids or topic_id in self.ids:
            self.ids.pop(topic_id, None)
            self.duplicate_ids[topic_id] = None
        else:
            self.ids[topic_id] = None


class DeleteTopicsHandler(Handler):
    api_key = ApiKey.DELETE_TOPICS
    min_version = 1
    max_version = 6

    def __init__(self, topics: TopicAdmin, delete_topic_enable: bool) -> None:
        self._topics = topics
        self._delete_topic_enable = delete_topic_enable

    async def handle(self, ctx: RequestContext, request: MessageData) -> Any:
        if not self._delete_topic_enable:
            if ctx.api_version < FIRST_VERSION_WITH_DELETION_DISABLED:
                return self._error_body(
                    ctx, request, ErrorCode.INVALID_REQUEST, "Topic deletion is disabled."
                )
            return self._error_body(ctx, request, ErrorCode.TOPIC_DELETION_DISABLED, None)
        targets = _targets(ctx.api_version, request)
        results = targets.results
        results += [
            _result(name, ZERO_UUID, ErrorCode.INVALID_REQUEST, "Duplicate topic name.")
            for name in targets.duplicate_names
        ]
        results += [
            _result(None, i, ErrorCode.INVALID_REQUEST, "Duplicate topic id.") for i in targets.duplicate_ids
        ]
        for name, topic_id in self._resolve(targets):
            results.append(self._delete(name, topic_id))
        return {"throttle_time_ms": 0, "responses": results}

    def error_response(self, ctx: RequestContext, request: MessageData | None, code: ErrorCode) -> Any:
        return self.error_body(ctx, request, code)

    @staticmethod
    def error_body(ctx: RequestContext, request: MessageData | None, code: ErrorCode) -> Any:
        """Every topic of the request carries ``code`` (DeleteTopics has no top-level error)."""
        return DeleteTopicsHandler._error_body(ctx, request, code, None)

    @staticmethod
    def _error_body(
        ctx: RequestContext, request: MessageData | None, code: ErrorCode, message: str | None
    ) -> dict[str, Any]:
        if request is None:
            entries: list[tuple[str | None, uuid.UUID]] = []
        elif ctx.api_version >= 6:
            entries = [(t.name, t.topic_id) for t in request.topics]
        else:
            entries = [(name, ZERO_UUID) for name in request.topic_names]
        return {"throttle_time_ms": 0, "responses": [_result(n, i, code, message) for n, i in entries]}

    def _resolve(self, targets: _Targets) -> list[tuple[str, uuid.UUID]]:
        """(name, id) of each deletable topic; unknown and conflicting entries become results."""
        to_delete: dict[uuid.UUID, str] = {}
        for topic_id in targets.ids:
            topic = self._topics.get_by_id(topic_id)
            if topic is None:
                targets.results.append(_result(None, topic_id, ErrorCode.UNKNOWN_TOPIC_ID, None))
            else:
                to_delete[topic_id] = topic.name
        conflicting: set[uuid.UUID] = set()
        for name in targets.names:
            topic = self._topics.get(name)
            if topic is None:
                targets.results.append(_result(name, ZERO_UUID, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None))
            elif (
                topic.topic_id in to_delete
                or topic.topic_id in targets.duplicate_ids
                or topic.topic_id in conflicting
            ):
                to_delete.pop(topic.topic_id, None)
                conflicting.add(topic.topic_id)
                targets.results.append(
                    _result(
                        name,
                        topic.topic_id,
                        ErrorCode.INVALID_REQUEST,
                        "The provided topic name maps to an ID that was already supplied.",
                    )
                )
            else:
                to_delete[topic.topic_id] = name
        return [(name, topic_id) for topic_id, name in to_delete.items()]

    def _delete(self, name: str, topic_id: uuid.UUID) -> dict[str, Any]:
        try:
            self._topics.delete_topic(name)
        except KafkaError as exc:
            return _result(name, topic_id, exc.code, exc.message)
        return _result(name, topic_id, ErrorCode.NONE, None)


def _targets(version: int, request: MessageData) -> _Targets:
    targets = _Targets()
    if version < 6:
        for name in request.topic_names:
            targets.add_name(name)
        return targets
    for topic in request.topics:
        if topic.name is None and topic.topic_id == ZERO_UUID:
            targets.results.append(
                _result(
                    None, ZERO_UUID, ErrorCode.INVALID_REQUEST, "Neither topic name nor id were specified."
                )
            )
        elif topic.name is None:
            targets.add_id(topic.topic_id)
        elif topic.topic_id != ZERO_UUID:
            targets.results.append(
                _result(
                    topic.name,
                    topic.topic_id,
                    ErrorCode.INVALID_REQUEST,
                    "You may not specify both topic name and topic id.",
                )
            )
        else:
            targets.add_name(topic.name)
    return targets


def _result(name: str | None, topic_id: uuid.UUID, code: ErrorCode, message: str | None) -> dict[str, Any]:
    return {"name": name, "topic_id": topic_id, "error_code": int(code), "error_message": message}
