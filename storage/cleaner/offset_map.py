"""The cleaner's offset map: key hash -> latest offset, bounded like Kafka's SkimpyOffsetMap.

``log.cleaner.dedupe.buffer.size`` bytes buy ``size // (16 + 8)`` slots (an MD5 digest and an
offset each); the map accepts keys until ``slots * load_factor`` distinct keys are held
(``log.cleaner.io.buffer.load.factor``, 0.9). Once it is full the dirty range is only cleaned up
to :attr:`latest_offset` (Kafka's ``Cleaner.buildOffsetMap``); the rest waits for the next round.
Two keys with the same digest share an entry, as in Kafka.

The slots live in one preallocated ``bytearray`` of ``slots * 24`` bytes (Kafka's SkimpyOffsetMap;
probed by double hashing over the digest), so the map never uses more than the configured memory (a
``dict`` of digest -> offset costs over 5 times as much per key in Python, past the operator's
budget for log.cleaner.dedupe.buffer.size).
"""

from __future__ import annotations

import hashlib
import struct
from math import gcd

HASH_SIZE = 16
ENTRY_SIZE = HASH_SIZE + 8
DEFAULT_DEDUPE_BUFFER_SIZE = 128 * 1024 * 1024
DEFAULT_LOAD_FACTOR = 0.9
_EMPTY = bytes(ENTRY_SIZE)
_OFFSET = struct.Struct(">q")
_CLEAR_CHUNK = 1 << 20


class OffsetMap:
    """Digest of a key -> the largest offset seen for it, in a fixed buffer (open addressing).

    A slot of 24 zero bytes is empty (as in Kafka, a key whose digest is all zeros stored at offset
    0 would read as empty: the chance is 2^-128).
    """

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
        self._bytes = bytearray(self.slots * ENTRY_SIZE)
        self._size = 0
        self.latest_offset = -1

    @staticmethod
    def digest(key: bytes) -> bytes:
        return hashlib.md5(key, usedforsecurity=False).digest()

    def __len__(self) -> int:
        return self._size

    @property
    def full(self) -> bool:
        return self._size >= self.max_entries

    def _find(self, digest: bytes) -> tuple[int, bool]:
        """(position, whether it holds ``digest``): the digest's slot, else the first empty one.

        Double hashing over the digest's two halves; the step is made coprime with the slot count
        (Kafka's ``memory / 24``), so the probe visits every slot.
        """
        buf = self._bytes
        slots = self.slots
        slot = int.from_bytes(digest[:8], "big") % slots
        step = 1 + int.from_bytes(digest[8:], "big") % slots
        while gcd(step, slots) != 1:
            step += 1
        for _ in range(slots):
            pos = slot * ENTRY_SIZE
            entry = buf[pos : pos + ENTRY_SIZE]
            if entry[:HASH_SIZE] == digest:
                return pos, True
            if entry == _EMPTY:
                return pos, False
            slot = (slot + step) % slots
        return -1, False

    def put(self, key: bytes, offset: int) -> None:
        """Remember ``offset`` for ``key`` (the caller checks :attr:`full` first)."""
        digest = self.digest(key)
        pos, found = self._find(digest)
        if pos < 0:
            raise OverflowError("an offset map with no free slot cannot take a new key")
        if not found:
            self._bytes[pos : pos + HASH_SIZE] = digest
            self._size += 1
        _OFFSET.pack_into(self._bytes, pos + HASH_SIZE, offset)
        self.latest_offset = offset

    def get(self, key: bytes) -> int:
        """The offset remembered for ``key``, -1 when none."""
        pos, found = self._find(self.digest(key))
        if not found:
            return -1
        offset: int = _OFFSET.unpack_from(self._bytes, pos + HASH_SIZE)[0]
        return offset

    def update_latest_offset(self, offset: int) -> None:
        self.latest_offset = offset

    def clear(self) -> None:
        """Empty every slot in place (no second buffer of the map's size)."""
        if self._size:
            view = memoryview(self._bytes)
            chunk = bytes(min(_CLEAR_CHUNK, len(view)))
            for start in range(0, len(view), len(chunk)):
                end = min(start + len(chunk), len(view))
                view[start:end] = chunk[: end - start]
            view.release()
        self._size = 0
        self.latest_offset = -1

    @property
    def utilization(self) -> float:
        return self._size / self.slots
