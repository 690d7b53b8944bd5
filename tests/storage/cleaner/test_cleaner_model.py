"""Model test: random keyed writes, tombstones, transactions, rolls and cleanings at random times.

After every cleaning: the log is a subsequence of what it was, in order; nothing in or above the
first uncleanable segment changed; no aborted record below the cleaned end offset remains; every
key's latest value remains at its offset; a key's latest tombstone remains until its batch's delete
horizon passed and goes in the first cleaning after that; values superseded in the offset map's range
are gone; the batch with each active producer's last data offset remains; the log reopens the same.
"""

from __future__ import annotations

import pathlib
import tempfile

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from protocol.records.compression import CompressionType
from storage.cleaner import LastRecord, OffsetMap, clean_log
from tests.storage.cleaner.helpers import BASE_TIME, Entry, Writer, open_log, read_batches, read_records

RETENTION = 1_000
KEYS = [b"a", b"b", b"c", b"d", None]

value = st.one_of(st.none(), st.binary(min_size=1, max_size=3))
record = st.tuples(st.sampled_from(KEYS), value)
op = st.one_of(
    st.tuples(st.just("put"), st.lists(record, min_size=1, max_size=3), st.sampled_from([0, 1])),
    st.tuples(st.just("txn"), st.sampled_from([1, 2]), st.lists(record, min_size=1, max_size=2)),
    st.tuples(st.just("end"), st.sampled_from([1, 2]), st.booleans()),
    st.tuples(st.just("roll")),
    st.tuples(st.just("roll")),
    st.tuples(st.just("clean"), st.integers(0, 2 * RETENTION), st.integers(1, 6), st.booleans()),
)


def latest_by_key(entries: list[Entry], below: int) -> dict[bytes, Entry]:
    latest: dict[bytes, Entry] = {}
    for e in entries:
        if e.offset < below and not e.control and not e.aborted and e.key is not None:
            latest[e.key] = e
    return latest


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(op, min_size=10, max_size=40))
def test_cleaning_model(ops: list[tuple[object, ...]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        log = open_log(pathlib.Path(tmp))
        w = Writer(log)
        now = BASE_TIME
        first_dirty = 0
        for item in ops:
            kind = item[0]
            if kind == "put":
                codec = CompressionType.GZIP if item[2] else CompressionType.NONE
                w.put(list(item[1]), codec=codec)  # type: ignore[call-overload]
            elif kind == "txn":
                w.put(list(item[2]), producer_id=item[1])  # type: ignore[call-overload, arg-type]
            elif kind == "end":
                if item[1] in w.open_txns:
                    w.end_txn(item[1], commit=bool(item[2]))
            elif kind == "roll":
                log.roll()
            else:
                if item[3]:
                    log.roll()
                now += item[1]  # type: ignore[operator]
                first_dirty = check_clean(w, now, first_dirty, item[2])  # type: ignore[arg-type]
        expected = read_records(log)
        end = log.log_end_offset
        log.close()
        reopened = open_log(pathlib.Path(tmp))
        assert read_records(reopened) == expected and reopened.log_end_offset == end
        reopened.close()


def check_clean(w: Writer, now: int, first_dirty: int, map_entries: int) -> int:
    log = w.log
    before = read_records(log)
    before_batches = read_batches(log)
    segments = log.segments()
    bound = min(w.last_stable_offset, segments[-1].base_offset)
    upper = max(s.base_offset for s in segments if s.base_offset <= bound)
    untouched = [s for s in segments if s.base_offset >= upper]
    untouched_bytes = [s.log_path.read_bytes() for s in untouched]
    producers = {pid: LastRecord(offset, 0) for pid, offset in w.last_data_offset.items()}
    result = clean_log(
        log,
        first_dirty_offset=first_dirty,
        first_uncleanable_offset=w.last_stable_offset,
        now_ms=now,
        delete_retention_ms=RETENTION,
        offset_map=OffsetMap(memory=24 * map_entries, load_factor=1.0),
        active_producers=producers,
    )
    after = read_records(log)
    end = result.end_offset
    # a subsequence, in order, offsets unchanged
    assert set(after) <= set(before)
    assert [r[0] for r in after] == sorted({r[0] for r in after})
    # nothing at or above the first uncleanable segment changed
    assert log.segments()[-len(untouched) :] == untouched
    assert [s.log_path.read_bytes() for s in untouched] == untouched_bytes
    assert end <= max(upper, first_dirty)
    kept = {r[0]: r for r in after if not r[3]}
    by_offset = {e.offset: e for e in w.entries}
    # no aborted data below the cleaned end
    assert not [o for o in kept if o < end and by_offset[o].aborted]
    # latest values stay; latest tombstones stay until their horizon passed, then go
    horizon_before: dict[int, int | None] = {}
    for header, records in before_batches:
        for r in records:
            horizon_before[r.offset] = header.base_timestamp if header.has_delete_horizon else None
    for entry in latest_by_key(w.entries, end).values():
        was_there = any(r[0] == entry.offset for r in before)
        if entry.value is not None:
            assert entry.offset in kept, entry
        elif was_there:
            horizon = horizon_before[entry.offset]
            if horizon is None or now < horizon:
                assert entry.offset in kept, entry
            elif result.segments_replaced:  # the round ran, so it cleaned every segment below end
                assert entry.offset not in kept, entry
    # values superseded inside the map's range are gone
    in_map = latest_by_key([e for e in w.entries if e.offset >= first_dirty], end)
    for o in kept:
        e = by_offset[o]
        if o < end and e.key is not None and e.key in in_map:
            assert in_map[e.key].offset <= o, (e, in_map[e.key])
    # the batch holding each active producer's last data offset is still there
    last_offsets = {h.last_offset for h, _ in read_batches(log)}
    for offset in w.last_data_offset.values():
        assert offset in last_offsets
    assert log.log_end_offset == w.log.log_end_offset
    return max(end, first_dirty)
