"""The offset map stays within log.cleaner.dedupe.buffer.size (Kafka's SkimpyOffsetMap holds
``memory / 24`` slots in a buffer of that size; a Python dict of digests cost over 5 times as much)."""

from __future__ import annotations

import tracemalloc

import pytest

from storage.cleaner.offset_map import ENTRY_SIZE, OffsetMap

pytestmark = pytest.mark.timeout(60)


def test_a_full_map_uses_no_more_than_its_configured_memory() -> None:
    memory = ENTRY_SIZE * 50_000
    tracemalloc.start()
    try:
        offset_map = OffsetMap(memory, 0.9)
        offset = 1_000_000
        while not offset_map.full:
            offset_map.put(b"key-%d" % offset, offset)
            offset += 1
        used, _peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert offset_map.slots == 50_000 and len(offset_map) == 45_000
    assert used <= memory * 1.05, f"{used} bytes for a {memory}-byte offset map"


def test_puts_gets_overwrites_and_clear() -> None:
    offset_map = OffsetMap(ENTRY_SIZE * 1_000, 0.9)
    keys = offset_map.max_entries
    assert offset_map.slots == 1_000 and keys == 900  # Kafka's memory / 24 slots
    for i in range(keys):
        offset_map.put(b"k%d" % i, i)
    assert offset_map.full and len(offset_map) == keys and offset_map.latest_offset == keys - 1
    assert all(offset_map.get(b"k%d" % i) == i for i in range(keys))
    assert offset_map.get(b"absent") == -1
    offset_map.put(b"k7", 5_000)  # an existing key: no new entry
    assert offset_map.get(b"k7") == 5_000 and len(offset_map) == keys
    assert offset_map.utilization == pytest.approx(0.9, abs=0.001)
    offset_map.clear()
    assert len(offset_map) == 0 and offset_map.latest_offset == -1 and offset_map.get(b"k7") == -1
    offset_map.put(b"k7", 1)
    assert offset_map.get(b"k7") == 1


@pytest.mark.parametrize("slots", [1, 2, 7, 64, 1_000])
def test_every_slot_can_be_used(slots: int) -> None:
    offset_map = OffsetMap(ENTRY_SIZE * slots, 1.0)
    usable = offset_map.slots
    for i in range(usable):
        offset_map.put(b"key%d" % i, i)
    assert len(offset_map) == usable
    assert [offset_map.get(b"key%d" % i) for i in range(usable)] == list(range(usable))
    assert offset_map.get(b"other") == -1
