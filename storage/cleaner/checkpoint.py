"""``cleaner-offset-checkpoint``: per log dir, the first dirty offset of each compacted partition.

Kafka's format (version 0, an entry count, then "topic partition offset" lines), written atomically
by the shared checkpoint helpers.
"""

from __future__ import annotations

import pathlib
from collections.abc import Mapping

from storage.checkpoint import OffsetCheckpointFile

CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"


class CleanerOffsetCheckpoint:
    """Read and update the cleaner checkpoint of one log directory."""

    def __init__(self, log_dir: pathlib.Path) -> None:
        self._file = OffsetCheckpointFile(pathlib.Path(log_dir) / CLEANER_OFFSET_CHECKPOINT)

    @property
    def path(self) -> pathlib.Path:
        return self._file.path

    def read(self) -> dict[tuple[str, int], int]:
        return self._file.read()

    def get(self, topic_partition: tuple[str, int]) -> int | None:
        return self.read().get(topic_partition)

    def write(self, offsets: Mapping[tuple[str, int], int]) -> None:
        self._file.write(offsets)

    def update(self, topic: str, partition: int, offset: int) -> None:
        """Set one partition's first dirty offset, keep the others (LogCleanerManager.updateCheckpoints)."""
        offsets = self.read()
        offsets[(topic, partition)] = offset
        self.write(offsets)

    def remove(self, topic: str, partition: int) -> None:
        offsets = self.read()
        if offsets.pop((topic, partition), None) is not None:
            self.write(offsets)
