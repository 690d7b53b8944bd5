"""The earlier single-node release's metadata files, read into metadata records (or refused)."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from metadata.image import MetadataImage
from metadata.legacy_import import (
    IMPORTED_SUFFIX,
    LEGACY_PRODUCER_ID_FILE,
    LEGACY_TOPICS_FILE,
    LegacyMetadataError,
    legacy_records,
    read_legacy_metadata,
    set_aside,
)

NODE = 1
ORDERS = uuid.UUID("6f1c1d2e-0000-4000-8000-000000000001")


def _partition(index: int, epoch: int = 0) -> dict[str, object]:
    return {
        "partition": index,
        "leader_id": NODE,
        "leader_epoch": epoch,
        "partition_epoch": 0,
        "replicas": [NODE],
        "isr": [NODE],
    }


def _write(
    log_dir: Path, *, node_id: int = NODE, version: int = 1, topics: list[object] | None = None
) -> None:
    document = {
        "version": version,
        "node_id": node_id,
        "topics": topics
        if topics is not None
        else [
            {
                "name": "orders",
                "topic_id": str(ORDERS),
                "configs": {"retention.ms": "1000"},
                "partitions": [_partition(1, epoch=3), _partition(0)],
            }
        ],
    }
    (log_dir / LEGACY_TOPICS_FILE).write_text(json.dumps(document))


def test_a_directory_without_legacy_files_has_nothing_to_import(tmp_path: Path) -> None:
    assert read_legacy_metadata(tmp_path, NODE) is None


def test_topics_and_the_next_producer_id_replay_into_the_same_metadata(tmp_path: Path) -> None:
    _write(tmp_path)
    (tmp_path / LEGACY_PRODUCER_ID_FILE).write_text("version: 0\nnext_block_start: 3000\n")
    legacy = read_legacy_metadata(tmp_path, NODE)
    assert legacy is not None
    image = MetadataImage()
    image.apply_batch(enumerate(legacy_records(legacy, NODE)), 0)
    topic = image.get("orders")
    assert topic is not None and topic.topic_id == ORDERS
    assert topic.configs == {"retention.ms": "1000"}
    assert sorted(topic.partitions) == [0, 1]
    assert topic.partitions[1].leader_epoch == 3  # epochs kept: the logs' epoch caches hold them
    assert image.next_producer_id == 3000


def test_imported_files_are_renamed_aside_not_deleted(tmp_path: Path) -> None:
    _write(tmp_path)
    legacy = read_legacy_metadata(tmp_path, NODE)
    assert legacy is not None
    moved = set_aside(legacy)
    assert moved == [tmp_path / (LEGACY_TOPICS_FILE + IMPORTED_SUFFIX)]
    assert read_legacy_metadata(tmp_path, NODE) is None


@pytest.mark.parametrize(
    ("kwargs", "problem"),
    [
        ({"node_id": 2}, "written by node 2, but this is node 1"),
        ({"version": 7}, "unknown format version 7"),
        ({"topics": [{"name": "x"}]}, "unreadable topic metadata"),
    ],
)
def test_an_untrustworthy_topic_file_is_refused(
    tmp_path: Path, kwargs: dict[str, object], problem: str
) -> None:
    _write(tmp_path, **kwargs)  # type: ignore[arg-type]
    with pytest.raises(LegacyMetadataError, match=problem):
        read_legacy_metadata(tmp_path, NODE)


def test_a_malformed_producer_id_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / LEGACY_PRODUCER_ID_FILE).write_text("next: lots\n")
    with pytest.raises(LegacyMetadataError, match="not a producer id block file"):
        read_legacy_metadata(tmp_path, NODE)


def test_duplicate_topic_ids_are_refused(tmp_path: Path) -> None:
    topic = {"name": "a", "topic_id": str(ORDERS), "configs": {}, "partitions": [_partition(0)]}
    _write(tmp_path, topics=[topic, {**topic, "name": "b"}])
    with pytest.raises(LegacyMetadataError, match="duplicate"):
        read_legacy_metadata(tmp_path, NODE)
