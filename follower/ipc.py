"""The follower process's end of the broker IPC: requests in, calls on the service, replies out.

The codec and the channel are shared with the broker (client/replica_ipc.py), the message shapes
are in client/replica_messages.py; this module only maps each request type to
:class:`~follower.service.FollowerService` and its result back to JSON. Until ``configure`` has
arrived every other request is refused: the service cannot open logs or connect to leaders without
the broker's settings.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from client.replica_ipc import JsonObject
from client.replica_messages import (
    ADD_PARTITIONS,
    CONFIGURE,
    METRICS_SNAPSHOT,
    REMOVE_PARTITIONS,
    SET_BROKER_EPOCH,
    SHUTDOWN,
    UPDATE_LOG_CONFIGS,
    UPDATE_REPLICATION_QUOTA,
    FollowerSettings,
    PartitionAssignment,
)
from follower.fetch_state import TopicPartition
from follower.service import FollowerService
from storage.handover import LogHandover


class UnknownRequestError(Exception):
    """The broker sent a request type this follower does not know."""


class FollowerRequestHandler:
    """Serves the broker's requests (one at a time, as the channel delivers them)."""

    def __init__(self, service: FollowerService) -> None:
        self._service = service
        self._handlers: dict[str, Callable[[JsonObject], Awaitable[JsonObject]]] = {
            CONFIGURE: self._configure,
            SET_BROKER_EPOCH: self._set_broker_epoch,
            ADD_PARTITIONS: self._add_partitions,
            REMOVE_PARTITIONS: self._remove_partitions,
            METRICS_SNAPSHOT: self._metrics_snapshot,
            UPDATE_LOG_CONFIGS: self._update_log_configs,
            UPDATE_REPLICATION_QUOTA: self._update_replication_quota,
            SHUTDOWN: self._shutdown,
        }
        self._configured = False

    async def __call__(self, message_type: str, body: JsonObject) -> JsonObject:
        handler = self._handlers.get(message_type)
        if handler is None:
            raise UnknownRequestError(f"unknown request type {message_type!r}")
        if not self._configured and message_type not in (CONFIGURE, SHUTDOWN):
            raise RuntimeError(f"{message_type} before configure")
        return await handler(body)

    async def _configure(self, body: JsonObject) -> JsonObject:
        self._service.configure(FollowerSettings.from_json(body))
        self._configured = True
        return {}

    async def _set_broker_epoch(self, body: JsonObject) -> JsonObject:
        self._service.set_broker_epoch(int(body["epoch"]))
        return {}

    async def _add_partitions(self, body: JsonObject) -> JsonObject:
        assignments = [PartitionAssignment.from_json(entry) for entry in body.get("partitions", [])]
        result = await self._service.add_partitions(assignments)
        return {
            "added": [list(tp) for tp in result.added],
            "failed": [
                {"topic": tp[0], "partition": tp[1], "reason": reason} for tp, reason in result.failed.items()
            ],
        }

    async def _remove_partitions(self, body: JsonObject) -> JsonObject:
        tps = [_topic_partition(entry) for entry in body.get("partitions", [])]
        return _handovers(await self._service.remove_partitions(tps))

    async def _update_log_configs(self, body: JsonObject) -> JsonObject:
        configs = {
            (str(entry["topic"]), int(entry["partition"])): {
                str(k): str(v) for k, v in dict(entry["log_config"]).items()
            }
            for entry in body.get("partitions", [])
        }
        updated = self._service.update_log_configs(configs)
        return {"updated": [list(tp) for tp in updated]}

    async def _update_replication_quota(self, body: JsonObject) -> JsonObject:
        throttled: dict[str, frozenset[int] | str] = {}
        for topic, partitions in dict(body.get("throttled", {})).items():
            throttled[str(topic)] = partitions if partitions == "*" else frozenset(int(p) for p in partitions)
        self._service.update_replication_quota(int(body["rate"]), throttled)
        return {}

    async def _metrics_snapshot(self, body: JsonObject) -> JsonObject:
        return self._service.snapshot()

    async def _shutdown(self, body: JsonObject) -> JsonObject:
        return _handovers(await self._service.shutdown())


def _topic_partition(entry: Any) -> TopicPartition:
    topic, partition = entry
    return str(topic), int(partition)


def _handovers(handovers: list[LogHandover]) -> JsonObject:
    return {"handovers": [handover.to_json() for handover in handovers]}


__all__ = ["FollowerRequestHandler", "UnknownRequestError"]
