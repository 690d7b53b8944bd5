"""The cluster's topic metadata on a single node: topics, their ids, partitions, leaders and overrides.

This is the part of a KRaft controller's metadata that a one-broker cluster needs, kept as one JSON
file written atomically (temp file, fsync, rename, directory fsync) so that a crash leaves either the
old or the new metadata, never a torn one. Every change is persisted BEFORE the in-memory state moves
and before any listener hears of it: a client is only told "created" or "deleted" once that outcome
survives a restart, and a listener (the ReplicaManager creating or deleting partition logs) never acts
on a change that a crash could undo. Issue 4 replaces the storage with a controller's metadata log;
this API stays.

Validation follows Kafka's controller (ReplicationControlManager): the same checks, in the same order,
with the same error codes and messages, so admin tools print what they print against Kafka. The rules
live in :mod:`metadata.controller.topic_rules`, shared with the cluster controller; here the only
registered (and usable) broker is this node.
"""

from __future__ import annotations

import dataclasses
import json
import pathlib
import uuid
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any, Protocol

import structlog

from metadata.controller import topic_rules
from metadata.controller.topic_rules import (
    MAX_PARTITIONS_PER_REQUEST as MAX_PARTITIONS_PER_REQUEST,
)
from metadata.controller.topic_rules import ZERO_UUID as ZERO_UUID
from metadata.controller.topic_rules import ConfigValidator as ConfigValidator
from metadata.controller.topic_rules import ManualAssignment as ManualAssignment
from metadata.controller.topic_rules import NewPartition
from metadata.topics import (
    INITIAL_LEADER_EPOCH,
    INITIAL_PARTITION_EPOCH,
    PartitionState,
    TopicState,
)
from protocol.error_codes import ErrorCode, KafkaError
from server_common.config import validate_topic_configs
from storage.checkpoint import write_atomically

METADATA_FILE_NAME = "__kipling_metadata.json"
"""The file, in the first log dir, that holds the topic metadata."""
FORMAT_VERSION = 1

_log = structlog.get_logger("kipling.topics")


class TopicMetadataError(Exception):
    """The metadata file cannot be trusted (unreadable, malformed, or written by another node).

    The broker must not start on it: serving from wrong metadata would hand out wrong leaders and
    could delete or overwrite logs.
    """


class TopicListener(Protocol):
    """Told about each change once it is persisted (the ReplicaManager creates/deletes logs here)."""

    def on_topic_created(self, topic: TopicState) -> None: ...

    def on_topic_deleted(self, topic: TopicState) -> None: ...

    def on_partitions_created(self, topic: TopicState, partitions: list[PartitionState]) -> None: ...


class TopicStore:
    """All topics of the cluster, persisted in ``path``; this node leads every partition.

    ``default_num_partitions`` and ``default_replication_factor`` are num.partitions and
    default.replication.factor (what -1 means in CreateTopics, and what auto-creation uses).
    ``config_validator`` checks and canonicalises topic-level overrides (raising ConfigError).
    """

    def __init__(
        self,
        path: pathlib.Path,
        node_id: int,
        *,
        default_num_partitions: int = 1,
        default_replication_factor: int = 1,
        config_validator: ConfigValidator = validate_topic_configs,
    ) -> None:
        self._path = pathlib.Path(path)
        self._node_id = node_id
        self.default_num_partitions = default_num_partitions
        self.default_replication_factor = default_replication_factor
        self._validate_configs = config_validator
        self._by_name: dict[str, TopicState] = {}
        self._by_id: dict[uuid.UUID, TopicState] = {}
        self._names = topic_rules.TopicNames()
        self._listeners: list[TopicListener] = []
        for topic in self._load():
            self._index(topic)
        _log.info("topic metadata loaded", path=str(self._path), topics=len(self._by_name))

    # -- queries ---------------------------------------------------------------------------------

    @property
    def node_id(self) -> int:
        return self._node_id

    @property
    def path(self) -> pathlib.Path:
        return self._path

    def broker_ids(self) -> list[int]:
        """The registered brokers: just this node until issue 4 brings a controller quorum."""
        return [self._node_id]

    def get(self, name: str) -> TopicState | None:
        return self._by_name.get(name)

    def get_by_id(self, topic_id: uuid.UUID) -> TopicState | None:
        return self._by_id.get(topic_id)

    def all(self) -> list[TopicState]:
        """Every topic, by name."""
        return [self._by_name[name] for name in sorted(self._by_name)]

    def subscribe(self, listener: TopicListener) -> None:
        self._listeners.append(listener)

    # -- changes ---------------------------------------------------------------------------------

    def create_topic(
        self,
        name: str,
        num_partitions: int,
        replication_factor: int,
        configs: Mapping[str, str | None],
        *,
        assignments: Sequence[ManualAssignment] = (),
        validate_only: bool = False,
    ) -> TopicState:
        """Create a topic (or, with ``validate_only``, only check that it could be created).

        -1 for the partition count or replication factor means the broker's default. A manual
        assignment needs both to be -1 and may name only registered brokers. Raises KafkaError with
        TOPIC_ALREADY_EXISTS, INVALID_TOPIC_EXCEPTION, INVALID_REQUEST, INVALID_CONFIG,
        INVALID_REPLICATION_FACTOR, INVALID_PARTITIONS, INVALID_REPLICA_ASSIGNMENT or POLICY_VIOLATION.
        """
        plan = topic_rules.plan_topic(
            name,
            num_partitions,
            replication_factor,
            configs,
            assignments=assignments,
            names=self._names,
            brokers=self._brokers(),
            defaults=topic_rules.TopicDefaults(self.default_num_partitions, self.default_replication_factor),
            config_validator=self._validate_configs,
        )
        topic_id = topic_rules.new_topic_id(self._by_id)
        topic = TopicState(name, topic_id, _new_partitions(plan.partitions), plan.configs)
        if validate_only:
            return topic
        self._persist([*self._by_name.values(), topic])
        self._index(topic)
        _log.info(
            "topic created",
            topic=name,
            topic_id=str(topic.topic_id),
            partitions=len(topic.partitions),
            replication_factor=topic.replication_factor,
            configs=plan.configs,
        )
        self._notify("on_topic_created", topic)
        return topic

    def delete_topic(self, name: str) -> TopicState:
        """Remove a topic; raises UNKNOWN_TOPIC_OR_PARTITION if there is none by that name."""
        topic = self._by_name.get(name)
        if topic is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        self._persist([t for t in self._by_name.values() if t.name != name])
        self._unindex(topic)
        _log.info("topic deleted", topic=name, topic_id=str(topic.topic_id))
        self._notify("on_topic_deleted", topic)
        return topic

    def create_partitions(
        self,
        name: str,
        total_count: int,
        *,
        assignments: Sequence[Sequence[int]] | None = None,
        validate_only: bool = False,
    ) -> list[PartitionState]:
        """Raise a topic's partition count to ``total_count``; returns the new partitions.

        Raises UNKNOWN_TOPIC_OR_PARTITION, INVALID_PARTITIONS (not an increase, Kafka's messages),
        INVALID_REPLICA_ASSIGNMENT or POLICY_VIOLATION.
        """
        topic = self._by_name.get(name)
        if topic is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        planned = topic_rules.plan_new_partitions(
            name,
            len(topic.partitions),
            topic.replication_factor,
            total_count,
            assignments=assignments,
            brokers=self._brokers(),
        )
        added = _new_partitions(planned)
        if validate_only:
            return list(added.values())
        grown = dataclasses.replace(topic, partitions={**topic.partitions, **added})
        self._persist([grown if t is topic else t for t in self._by_name.values()])
        topic.partitions.update(added)
        _log.info("partitions created", topic=name, count=total_count, added=len(added))
        self._notify("on_partitions_created", topic, list(added.values()))
        return list(added.values())

    def _brokers(self) -> topic_rules.ClusterBrokers:
        """Every registered broker is usable here: there is no fencing on a single node."""
        ids = self.broker_ids()
        return topic_rules.ClusterBrokers.of(ids, ids)

    # -- indexes, persistence, listeners ---------------------------------------------------------

    def _index(self, topic: TopicState) -> None:
        self._by_name[topic.name] = topic
        self._by_id[topic.topic_id] = topic
        self._names.add(topic.name)

    def _unindex(self, topic: TopicState) -> None:
        del self._by_name[topic.name]
        del self._by_id[topic.topic_id]
        self._names.discard(topic.name)

    def _persist(self, topics: Iterable[TopicState]) -> None:
        """Write the whole metadata file atomically; the in-memory state moves only afterwards."""
        document = {
            "version": FORMAT_VERSION,
            "node_id": self._node_id,
            "topics": [t.to_json() for t in sorted(topics, key=lambda t: t.name)],
        }
        try:
            write_atomically(self._path, json.dumps(document, indent=1, sort_keys=True) + "\n")
        except OSError as exc:
            _log.error("could not persist topic metadata", path=str(self._path), error=str(exc))
            raise KafkaError(
                ErrorCode.UNKNOWN_SERVER_ERROR, f"Could not persist topic metadata: {exc.strerror or exc}"
            ) from exc

    def _load(self) -> list[TopicState]:
        if not self._path.exists():
            return []
        try:
            document = json.loads(self._path.read_text(encoding="utf-8"))
            version, node_id = document["version"], document["node_id"]
            topics = [TopicState.from_json(raw) for raw in document["topics"]]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise TopicMetadataError(f"{self._path}: unreadable topic metadata: {exc}") from exc
        if version != FORMAT_VERSION:
            raise TopicMetadataError(f"{self._path}: unknown format version {version!r}")
        if node_id != self._node_id:
            raise TopicMetadataError(
                f"{self._path} was written by node {node_id}, but this is node {self._node_id}: "
                "node.id must not change while its log directories are kept"
            )
        _check_unique(topics, self._path)
        return topics

    def _notify(self, event: str, *args: Any) -> None:
        """Tell every listener; a failing listener is logged, never undoes the persisted change.

        As in Kafka, a committed metadata change stays committed when one broker fails to apply it
        locally (for example a log that cannot be created): that partition then reports errors.
        """
        for listener in list(self._listeners):
            try:
                getattr(listener, event)(*args)
            except Exception:
                _log.exception("topic listener failed", listener=type(listener).__name__, change=event)


def _new_partitions(planned: Sequence[NewPartition]) -> dict[int, PartitionState]:
    """The planned partitions at leader epoch 0 and partition epoch 0, by index."""
    return {
        p.index: PartitionState(
            partition=p.index,
            leader_id=p.leader,
            leader_epoch=INITIAL_LEADER_EPOCH,
            partition_epoch=INITIAL_PARTITION_EPOCH,
            replicas=list(p.replicas),
            isr=list(p.isr),
        )
        for p in planned
    }


def _check_unique(topics: Collection[TopicState], path: pathlib.Path) -> None:
    names = {t.name for t in topics}
    ids = {t.topic_id for t in topics}
    if len(names) != len(topics) or len(ids) != len(topics) or ZERO_UUID in ids:
        raise TopicMetadataError(f"{path}: duplicate or zero topic names/ids")
