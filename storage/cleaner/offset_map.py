"""The cleaner's offset map: key hash -> latest offset, bounded like Kafka's SkimpyOffsetMap.

``log.cleaner.dedupe.buffer.size`` bytes buy ``size // (16 + 8)`` slots (an MD5 digest and an
offset each); the map accepts keys until ``slots * load_factor`` distinct keys are held
(``log.cleaner.io.buffer.load.factor``, 0.9). Once it is full the dirty range is only cleaned up
to :attr:`latest_offset` (Kafka's ``Cleaner.buildOffsetMap``); the rest waits for the next round.
Two keys with the same digest share an entry, as in Kafka.
"""

from __future__ import annotations

import hashlib

HASH_SIZE = 16
ENTRY_SIZE = HASH_SIZE + 8
DEFAULT_DEDUPE_BUFFER_SIZE = 128 * 1024 * 1024
DEFAULT_LOAD_FACTOR = 0.9


class OffsetMap:
    """Digest of a key -> the largest offset seen for it, with a fixed capacity."""

    def __init__(
        self, memory: int = DEFAULT_DEDUPE_BUFFER_SIZE, load_factor: float = DEFAULT_LOAD_FACTOR
    ) -> None:
        self.slots = memory // ENTRY_SIZE
        self.max_entries = int(self.slots * load_factor)
        if self.max_entries < 1:
            raise ValueError(
                f"an offset map of {memory} bytes at load factor {load_factor} holds no key; "
                "cleaning could never make progress"
            )
        self._entries: dict[bytes, int] = {}
        self.latest_offset = -1

    @staticmethod
    def digest(key: bytes) -> bytes:
        return hashlib.md5(key, usedforsecurity=False).digest()

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def full(self) -> bool:
        return len(self._entries) >= self.max_entries

    def put(self, key: bytes, offset: int) -> None:
        """Remember ``offset`` for ``key`` (the caller checks :attr:`full` first)."""
        self._entries[self.digest(key)] = offset
        self.latest_offset = offset

    def get(self, key: bytes) -> int:
        """The offset remembered for ``key``, -1 when none."""
        return self._entries.get(self.digest(key), -1)

    def update_latest_offset(self, offset: int) -> None:
        self.latest_offset = offset

    def clear(self) -> None:
        self._entries.clear()
        self.latest_offset = -1

    @property
    def utilization(self) -> float:
        return len(self._entries) / self.slots
