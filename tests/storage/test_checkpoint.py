"""Checkpoint files: Kafka's text format, atomic replacement and strict reading."""

from __future__ import annotations

import os
import pathlib
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from storage import checkpoint as checkpoint_module
from storage.checkpoint import (
    LeaderEpochCheckpointFile,
    OffsetCheckpointFile,
    PartitionMetadataFile,
    topic_id_from_str,
    topic_id_to_str,
)
from storage.epoch import EpochEntry
from storage.errors import CheckpointError


def test_offset_checkpoint_text_format(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "recovery-point-offset-checkpoint"
    OffsetCheckpointFile(path).write({("b.topic-x", 1): 42, ("a", 0): 7})
    assert path.read_text() == "0\n2\na 0 7\nb.topic-x 1 42\n"
    assert not path.with_name(path.name + ".tmp").exists()


def test_offset_checkpoint_missing_and_empty_files_have_no_entries(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "replication-offset-checkpoint"
    assert OffsetCheckpointFile(path).read() == {}
    path.write_text("")
    assert OffsetCheckpointFile(path).read() == {}
    OffsetCheckpointFile(path).write({})
    assert path.read_text() == "0\n0\n"
    assert OffsetCheckpointFile(path).read() == {}


topics = st.text(alphabet="abcxyz.-_019", min_size=1, max_size=20)


@settings(max_examples=100, deadline=None)
@given(offsets=st.dictionaries(st.tuples(topics, st.integers(0, 1000)), st.integers(-1, 2**63 - 1)))
def test_offset_checkpoint_round_trip(tmp_path_factory: pytest.TempPathFactory, offsets: dict) -> None:
    path = tmp_path_factory.mktemp("cp") / "log-start-offset-checkpoint"
    checkpoint = OffsetCheckpointFile(path)
    checkpoint.write(offsets)
    assert checkpoint.read() == offsets
    assert OffsetCheckpointFile(path).read() == offsets


def test_leader_epoch_checkpoint_round_trip(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "leader-epoch-checkpoint"
    entries = [EpochEntry(0, 0), EpochEntry(3, 120), EpochEntry(7, 5000)]
    LeaderEpochCheckpointFile(path).write(entries)
    assert path.read_text() == "0\n3\n0 0\n3 120\n7 5000\n"
    assert LeaderEpochCheckpointFile(path).read() == entries
    LeaderEpochCheckpointFile(path).write(iter([]))
    assert LeaderEpochCheckpointFile(path).read() == []


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("1\n0\n", "version"),
        ("x\n0\n", "line 1"),
        ("0\n", "line 2"),
        ("0\n2\na 0 1\n", "expected 2 entries"),
        ("0\n1\na 0 1\nb 0 2\n", "expected 1 entries"),
        ("0\n1\na 0\n", "line 3"),
        ("0\n1\na zero 1\n", "line 3"),
        ("0\n1\na 0 1.5\n", "line 3"),
        ("0\n2\na 0 1\na -1 2\n", "line 4"),
        ("0\n2\na 0 1\n\n", "line 4"),
    ],
)
def test_malformed_offset_checkpoints_raise_with_file_and_line(
    tmp_path: pathlib.Path, text: str, message: str
) -> None:
    path = tmp_path / "recovery-point-offset-checkpoint"
    path.write_text(text)
    with pytest.raises(CheckpointError) as excinfo:
        OffsetCheckpointFile(path).read()
    assert str(path) in str(excinfo.value)
    assert message in str(excinfo.value)


@pytest.mark.parametrize("text", ["0\n1\n1\n", "0\n1\n1 2 3\n", "0\n1\n1 x\n", "2\n0\n"])
def test_malformed_leader_epoch_checkpoints_raise(tmp_path: pathlib.Path, text: str) -> None:
    path = tmp_path / "leader-epoch-checkpoint"
    path.write_text(text)
    with pytest.raises(CheckpointError, match="leader-epoch-checkpoint"):
        LeaderEpochCheckpointFile(path).read()


def test_topic_names_that_cannot_be_read_back_are_refused(tmp_path: pathlib.Path) -> None:
    with pytest.raises(ValueError):
        OffsetCheckpointFile(tmp_path / "cp").write({("bad topic", 0): 1})


def test_a_stale_tmp_file_is_never_read(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "replication-offset-checkpoint"
    checkpoint = OffsetCheckpointFile(path)
    checkpoint.write({("t", 0): 5})
    path.with_name(path.name + ".tmp").write_text("0\n1\nt 0 999\n")  # a crash mid-write
    assert checkpoint.read() == {("t", 0): 5}
    checkpoint.write({("t", 0): 6})
    assert checkpoint.read() == {("t", 0): 6}
    assert not path.with_name(path.name + ".tmp").exists()


def test_a_failed_write_leaves_the_previous_file_intact(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "recovery-point-offset-checkpoint"
    checkpoint = OffsetCheckpointFile(path)
    checkpoint.write({("t", 0): 5})

    def failing_fsync(fd: int) -> None:
        raise OSError("disk gone")

    monkeypatch.setattr(checkpoint_module.os, "fsync", failing_fsync)
    with pytest.raises(OSError):
        checkpoint.write({("t", 0): 6})
    monkeypatch.undo()
    assert checkpoint.read() == {("t", 0): 5}


def test_write_fsyncs_file_and_directory_and_renames(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[str] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        calls.append("fsync-dir" if os.path.isdir(f"/proc/self/fd/{fd}") else "fsync-file")
        real_fsync(fd)

    def replace(src: str, dst: str) -> None:
        calls.append("rename")
        real_replace(src, dst)

    monkeypatch.setattr(checkpoint_module.os, "fsync", fsync)
    monkeypatch.setattr(checkpoint_module.os, "replace", replace)
    OffsetCheckpointFile(tmp_path / "cp").write({("t", 0): 1})
    assert calls == ["fsync-file", "rename", "fsync-dir"]


def test_partition_metadata_round_trip_in_kafka_format(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "partition.metadata"
    topic_id = uuid.UUID("f1c2d3e4-0000-4abc-8def-0123456789ab")
    metadata = PartitionMetadataFile(path)
    assert metadata.read() is None
    metadata.write(topic_id)
    text = path.read_text()
    assert text == f"version: 0\ntopic_id: {topic_id_to_str(topic_id)}\n"
    assert len(topic_id_to_str(topic_id)) == 22 and "=" not in text
    assert PartitionMetadataFile(path).read() == topic_id


def test_topic_id_text_matches_kafka_uuid_to_string() -> None:
    # Kafka's Uuid.toString: URL-safe base64 of the most then least significant 64 bits, no padding.
    assert topic_id_to_str(uuid.UUID(int=0)) == "AAAAAAAAAAAAAAAAAAAAAA"
    assert topic_id_to_str(uuid.UUID(int=2**128 - 1)) == "_____________________w"
    assert topic_id_from_str("_____________________w") == uuid.UUID(int=2**128 - 1)


@pytest.mark.parametrize(
    "text",
    [
        "version: 1\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA\n",
        "topic_id: AAAAAAAAAAAAAAAAAAAAAA\n",
        "version: 0\n",
        "version: 0\ntopic_id: not!base64\n",
        "version: 0\ntopic_id: AAAA\n",
        "",
    ],
)
def test_malformed_partition_metadata_raises(tmp_path: pathlib.Path, text: str) -> None:
    path = tmp_path / "partition.metadata"
    path.write_text(text)
    with pytest.raises(CheckpointError, match=r"partition\.metadata"):
        PartitionMetadataFile(path).read()
