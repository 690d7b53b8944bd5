"""Metadata kept by kipling's first single-node releases, turned into metadata records.

Before a single node became a KRaft cluster of one, it kept its topics in a JSON file in its first
log directory (``__kipling_metadata.json``: each topic's id, partitions with their leader, ISR and
epochs, and config overrides) and the end of its last producer id block in
``__kipling_producer_id_block``. On the first start of a node whose metadata log is still empty, the
controller writes what those files say as the first batch of the log (:func:`legacy_records`), so
that every topic keeps its id, partitions, configs and data, and no producer id is handed out twice.
The files are then renamed aside (:func:`set_aside`), never deleted: a downgrade can rename them back.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from metadata.records import (
    ConfigRecord,
    ConfigResourceType,
    MetadataRecord,
    PartitionRecord,
    ProducerIdsRecord,
    TopicRecord,
)
from metadata.topics import PartitionState, TopicState
from storage.checkpoint import fsync_directory

LEGACY_TOPICS_FILE = "__kipling_metadata.json"
LEGACY_PRODUCER_ID_FILE = "__kipling_producer_id_block"
LEGACY_FORMAT_VERSION = 1
IMPORTED_SUFFIX = ".imported"
NO_BROKER_EPOCH = -1


class LegacyMetadataError(Exception):
    """A legacy metadata file that cannot be trusted: the node must not start on a guess."""


@dataclass(frozen=True)
class LegacyMetadata:
    """What a legacy log directory holds, and the files it came from."""

    topics: list[TopicState]
    next_producer_id: int | None
    files: list[Path]


def read_legacy_metadata(log_dir: Path, node_id: int) -> LegacyMetadata | None:
    """The legacy metadata of ``log_dir``, or None if it has none."""
    topics_file = log_dir / LEGACY_TOPICS_FILE
    producer_file = log_dir / LEGACY_PRODUCER_ID_FILE
    files = [path for path in (topics_file, producer_file) if path.exists()]
    if not files:
        return None
    topics = _read_topics(topics_file, node_id) if topics_file.exists() else []
    next_id = _read_next_producer_id(producer_file) if producer_file.exists() else None
    return LegacyMetadata(topics, next_id, files)


def legacy_records(legacy: LegacyMetadata, node_id: int) -> list[MetadataRecord]:
    """The records that recreate ``legacy`` exactly: ids, assignments, epochs and overrides kept."""
    records: list[MetadataRecord] = []
    for topic in sorted(legacy.topics, key=lambda t: t.name):
        records.append(TopicRecord(topic.name, topic.topic_id))
        records.extend(
            ConfigRecord(ConfigResourceType.TOPIC, topic.name, key, value)
            for key, value in sorted(topic.configs.items())
        )
        records.extend(
            PartitionRecord(
                partition_id=p.partition,
                topic_id=topic.topic_id,
                replicas=tuple(p.replicas),
                isr=tuple(p.isr),
                leader=p.leader_id,
                leader_epoch=p.leader_epoch,
                partition_epoch=p.partition_epoch,
            )
            for p in topic.sorted_partitions()
        )
    if legacy.next_producer_id:
        records.append(ProducerIdsRecord(node_id, NO_BROKER_EPOCH, legacy.next_producer_id))
    return records


def set_aside(legacy: LegacyMetadata) -> list[Path]:
    """Rename the imported files to ``<name>.imported``; returns the new paths."""
    moved = []
    for path in legacy.files:
        target = path.with_name(path.name + IMPORTED_SUFFIX)
        path.replace(target)
        moved.append(target)
    fsync_directory(legacy.files[0].parent)  # the renames survive a crash
    return moved


def _read_topics(path: Path, node_id: int) -> list[TopicState]:
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
        version, written_by = document["version"], document["node_id"]
        topics = [_topic(raw) for raw in document["topics"]]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise LegacyMetadataError(f"{path}: unreadable topic metadata: {exc}") from exc
    if version != LEGACY_FORMAT_VERSION:
        raise LegacyMetadataError(f"{path}: unknown format version {version!r}")
    if written_by != node_id:
        raise LegacyMetadataError(
            f"{path} was written by node {written_by}, but this is node {node_id}: "
            "node.id must not change while its log directories are kept"
        )
    names = {t.name for t in topics}
    ids = {t.topic_id for t in topics}
    if len(names) != len(topics) or len(ids) != len(topics) or any(i.int == 0 for i in ids):
        raise LegacyMetadataError(f"{path}: duplicate or zero topic names/ids")
    return topics


def _topic(raw: Mapping[str, Any]) -> TopicState:
    """One topic of the file, as the earlier release wrote it."""
    partitions = [
        PartitionState(
            partition=int(p["partition"]),
            leader_id=int(p["leader_id"]),
            leader_epoch=int(p["leader_epoch"]),
            partition_epoch=int(p["partition_epoch"]),
            replicas=[int(r) for r in p["replicas"]],
            isr=[int(r) for r in p["isr"]],
        )
        for p in raw["partitions"]
    ]
    return TopicState(
        name=str(raw["name"]),
        topic_id=uuid.UUID(raw["topic_id"]),
        partitions={p.partition: p for p in partitions},
        configs={str(k): str(v) for k, v in raw.get("configs", {}).items()},
    )


def _read_next_producer_id(path: Path) -> int:
    """The first id of the next block: two lines, ``version: 0`` and ``next_block_start: <id>``."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise LegacyMetadataError(f"{path}: {exc}") from exc
    name, _, value = lines[1].partition(":") if len(lines) == 2 else ("", "", "")
    if lines[:1] != ["version: 0"] or name.strip() != "next_block_start" or not value.strip().isdigit():
        raise LegacyMetadataError(f"{path}: not a producer id block file (version 0)")
    return int(value.strip())
