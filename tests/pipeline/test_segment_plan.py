"""``kipling-segments`` without Spark: options, log-dir scanning, segment planning and the file reader.

Log directories are written by storage's own :class:`~storage.log.PartitionLog` (a leader's appends,
rolls and sparse indexes), with checkpoint files written by storage's checkpoint code, so the reader
is checked against the broker's real on-disk format. The log stays open while it is read where that
matters: that is the live-broker situation, with a preallocated active index.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from client.fetch_session import TopicPartition
from pipeline.errors import KiplingDataLossError, KiplingOptionError
from pipeline.options import Assign, Earliest, Latest, SpecificOffsets, Subscribe, SubscribePattern
from pipeline.segment_files import (
    SegmentCorruptError,
    SegmentTask,
    iter_task_records,
    log_end_offset,
    read_segment_batches,
    start_position,
)
from pipeline.segment_plan import (
    parse_segment_options,
    plan_segment_tasks,
    scan_log_dirs,
    split_by_segment,
)
from protocol.records import CompressionType, DecodedRecord, Record, build_batch
from storage.checkpoint import LOG_START_OFFSET_CHECKPOINT, REPLICATION_OFFSET_CHECKPOINT
from storage.log import PartitionLog
from tests.pipeline.helpers import Written, append_records, open_partition_log, write_offsets_checkpoint

TOPIC = "events"


def rows(records: list[DecodedRecord]) -> list[tuple[int, bytes | None, bytes | None, tuple, int]]:  # type: ignore[type-arg]
    return [(r.offset, r.key, r.value, tuple(r.headers), r.timestamp) for r in records]


def expected(written: list[Written], start: int = 0, end: int = 2**63) -> list[tuple]:  # type: ignore[type-arg]
    return [(w.offset, w.key, w.value, w.headers, w.timestamp_ms) for w in written if start <= w.offset < end]


def read_all(tasks: list[SegmentTask]) -> list[DecodedRecord]:
    return [record for task in tasks for record in iter_task_records(task)]


def plan(log_dir: Path, **options: str) -> list[SegmentTask]:
    return plan_segment_tasks(parse_segment_options({"path": str(log_dir), **options}))


@pytest.fixture
def live_log(tmp_path: Path) -> Iterator[tuple[Path, PartitionLog, list[Written]]]:
    """An open log of 8 segments, compressed batches each followed by a control batch; HW at 150."""
    log = open_partition_log(tmp_path, TOPIC, 0, segment_bytes=1500)
    written = append_records(
        log, 200, per_batch=7, compression=CompressionType.ZSTD, control_after_each_batch=True
    )
    write_offsets_checkpoint(tmp_path, REPLICATION_OFFSET_CHECKPOINT, {(TOPIC, 0): 150})
    yield tmp_path, log, written
    log.close()


# -- segment planning ------------------------------------------------------------------------------


def test_split_by_segment_gives_each_segment_its_part_of_the_range() -> None:
    bases = [0, 100, 250]
    assert split_by_segment(0, 400, bases) == [(0, 0, 100), (100, 100, 250), (250, 250, 400)]
    assert split_by_segment(120, 130, bases) == [(100, 120, 130)]
    assert split_by_segment(99, 101, bases) == [(0, 99, 100), (100, 100, 101)]
    assert split_by_segment(250, 251, bases) == [(250, 250, 251)]
    assert split_by_segment(100, 250, bases) == [(100, 100, 250)]  # a range ending at a base: one segment
    assert split_by_segment(300, 300, bases) == []
    assert split_by_segment(0, 10, []) == []
    assert split_by_segment(0, 50, [10, 20]) == [(10, 10, 20), (20, 20, 50)]  # below the first base: none


def test_plan_makes_one_task_per_segment_below_the_high_watermark(
    live_log: tuple[Path, PartitionLog, list[Written]],
) -> None:
    log_dir, log, _ = live_log
    bases = [s.base_offset for s in log.segments()]
    assert len(bases) >= 5 and bases[-1] > 150
    tasks = plan(log_dir, subscribe=TOPIC)
    assert [(t.base_offset, t.start, t.end) for t in tasks] == [
        (b, b, min(n, 150)) for b, n in zip(bases, [*bases[1:], 10**9], strict=True) if b < 150
    ]
    assert all(t.log_path == str(log_dir / f"{TOPIC}-0" / f"{t.base_offset:020d}.log") for t in tasks)
    assert [t.last_segment for t in tasks] == [False] * len(tasks)


def test_plan_with_starting_and_ending_offsets_covers_only_the_needed_segments(
    live_log: tuple[Path, PartitionLog, list[Written]],
) -> None:
    log_dir, log, written = live_log
    third, fourth = (s.base_offset for s in log.segments()[2:4])
    start, end = third + 5, fourth + 3  # from inside the third segment to inside the fourth
    tasks = plan(
        log_dir,
        assign=f'{{"{TOPIC}":[0]}}',
        startingOffsets=f'{{"{TOPIC}":{{"0":{start}}}}}',
        endingOffsets=f'{{"{TOPIC}":{{"0":{end}}}}}',
    )
    assert [(t.base_offset, t.start, t.end) for t in tasks] == [(third, start, fourth), (fourth, fourth, end)]
    assert rows(read_all(tasks)) == expected(written, start, end)


def test_include_uncommitted_reads_up_to_the_log_end_offset(
    live_log: tuple[Path, PartitionLog, list[Written]],
) -> None:
    log_dir, log, written = live_log
    committed = read_all(plan(log_dir, subscribe=TOPIC))
    everything = read_all(plan(log_dir, subscribe=TOPIC, includeUncommitted="true"))
    assert rows(committed) == expected(written, 0, 150)
    assert rows(everything) == expected(written)
    tasks = plan(log_dir, subscribe=TOPIC, includeUncommitted="true")
    assert tasks[-1].end == log.log_end_offset and tasks[-1].last_segment


def test_high_watermark_is_clamped_and_a_missing_entry_or_file_is_handled(tmp_path: Path) -> None:
    log = open_partition_log(tmp_path, TOPIC, 0)
    written = append_records(log, 30)
    other = open_partition_log(tmp_path, TOPIC, 1)
    append_records(other, 5)
    with pytest.raises(KiplingOptionError, match="replication-offset-checkpoint does not exist"):
        plan(tmp_path, subscribe=TOPIC)
    everything = plan(tmp_path, subscribe=TOPIC, includeUncommitted="true")
    assert rows(read_all([t for t in everything if t.partition == 0])) == expected(written)
    assert len(read_all([t for t in everything if t.partition == 1])) == 5
    # A checkpointed HW past the log end (stale file) is clamped; a partition without an entry has none.
    write_offsets_checkpoint(tmp_path, REPLICATION_OFFSET_CHECKPOINT, {(TOPIC, 0): 10_000})
    tasks = plan(tmp_path, subscribe=TOPIC)
    assert {t.partition for t in tasks} == {0}
    assert rows(read_all(tasks)) == expected(written)
    log.close()
    other.close()


def test_earliest_honours_the_log_start_offset_checkpoint(
    live_log: tuple[Path, PartitionLog, list[Written]],
) -> None:
    log_dir, _, written = live_log
    second = live_log[1].segments()[1].base_offset
    write_offsets_checkpoint(log_dir, LOG_START_OFFSET_CHECKPOINT, {(TOPIC, 0): second + 3})
    tasks = plan(log_dir, subscribe=TOPIC)
    assert tasks[0].base_offset == second and tasks[0].start == second + 3
    assert rows(read_all(tasks)) == expected(written, second + 3, 150)


def test_offsets_outside_the_log_are_data_loss_unless_failondataloss_is_false(
    live_log: tuple[Path, PartitionLog, list[Written]],
) -> None:
    log_dir, _, written = live_log
    write_offsets_checkpoint(log_dir, LOG_START_OFFSET_CHECKPOINT, {(TOPIC, 0): 40})
    starting = f'{{"{TOPIC}":{{"0":10}}}}'
    with pytest.raises(KiplingDataLossError, match=r"offset \[10, 40\)"):
        plan(log_dir, subscribe=TOPIC, startingOffsets=starting)
    ending = f'{{"{TOPIC}":{{"0":180}}}}'
    with pytest.raises(KiplingDataLossError, match=r"offset \[150, 180\)"):
        plan(log_dir, subscribe=TOPIC, endingOffsets=ending)
    lenient = {"failOnDataLoss": "false"}
    tasks = plan(log_dir, subscribe=TOPIC, startingOffsets=starting, endingOffsets=ending, **lenient)
    assert rows(read_all(tasks)) == expected(written, 40, 150)
    with pytest.raises(KiplingOptionError, match="greater than the resolved ending offset"):
        plan(log_dir, subscribe=TOPIC, startingOffsets=f'{{"{TOPIC}":{{"0":160}}}}')


def test_subscription_errors_and_pattern_selection(tmp_path: Path) -> None:
    logs = [open_partition_log(tmp_path, topic, p) for topic, p in [("a.x", 0), ("a.x", 1), ("b", 0)]]
    logs.append(open_partition_log(tmp_path, "__consumer_offsets", 0))
    for log in logs:
        append_records(log, 3)
    write_offsets_checkpoint(tmp_path, REPLICATION_OFFSET_CHECKPOINT, {})
    options = {"includeUncommitted": "true"}
    assert {(t.topic, t.partition) for t in plan(tmp_path, subscribePattern="a.*|_.*", **options)} == {
        ("a.x", 0),
        ("a.x", 1),
    }
    assert {t.topic for t in plan(tmp_path, subscribe="b,a.x", **options)} == {"a.x", "b"}
    with pytest.raises(KiplingOptionError, match="Topic 'nope' does not exist in the log directories"):
        plan(tmp_path, subscribe="b,nope", **options)
    with pytest.raises(KiplingOptionError, match=r"Assigned partitions do not exist.*: b-3"):
        plan(tmp_path, assign='{"b":[0,3]}', **options)
    with pytest.raises(KiplingOptionError, match="you must specify all TopicPartitions"):
        plan(tmp_path, subscribe="a.x", startingOffsets='{"a.x":{"0":0}}', **options)
    for log in logs:
        log.close()


# -- scanning log dirs -----------------------------------------------------------------------------


def test_deleted_stray_and_future_directories_and_deleted_segments_are_ignored(tmp_path: Path) -> None:
    log = open_partition_log(tmp_path, TOPIC, 0, segment_bytes=1500)
    append_records(log, 40)
    log.close()
    live = tmp_path / f"{TOPIC}-0"
    for suffix in ("-delete", "-stray", "-future"):
        shutil.copytree(live, tmp_path / f"{TOPIC}-0.{'ab' * 16}{suffix}")
    shutil.copytree(live, tmp_path / f"{TOPIC}-1.{'cd' * 16}-stray")  # a partition only left as a stray
    (tmp_path / "not-a-partition").mkdir()
    segments = sorted(p.name for p in live.glob("*.log"))
    os.rename(live / segments[0], live / (segments[0] + ".deleted"))  # retention's rename
    found = scan_log_dirs([str(tmp_path)])
    assert list(found) == [TopicPartition(TOPIC, 0)]
    assert found[TopicPartition(TOPIC, 0)].segments == tuple(int(name[:20]) for name in segments[1:])


def test_a_partition_in_two_log_dirs_is_an_error(tmp_path: Path) -> None:
    for name in ("d1", "d2"):
        log = open_partition_log(tmp_path / name, TOPIC, 0)
        log.close()
    with pytest.raises(KiplingOptionError, match=f"Partition {TOPIC}-0 is in both"):
        scan_log_dirs([str(tmp_path / "d1"), str(tmp_path / "d2")])


# -- options ---------------------------------------------------------------------------------------


def test_options_are_parsed_case_insensitively_with_several_log_dirs(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    parsed = parse_segment_options(
        {
            "path": f"{tmp_path / 'a'}, {tmp_path / 'b'}",
            "SUBSCRIBE": "t1,t2",
            "includeheaders": "TRUE",
            "includeUncommitted": "true",
            "failOnDataLoss": "false",
            "endingOffsets": '{"t1":{"0":5,"1":-1}}',
        }
    )
    assert parsed.log_dirs == (str(tmp_path / "a"), str(tmp_path / "b"))
    assert parsed.subscription == Subscribe(("t1", "t2"))
    assert parsed.starting == Earliest()
    assert parsed.ending == SpecificOffsets({TopicPartition("t1", 0): 5, TopicPartition("t1", 1): -1})
    assert parsed.include_headers and parsed.include_uncommitted and not parsed.fail_on_data_loss
    from_load_list = parse_segment_options({"paths": f'["{tmp_path / "a"}"]', "assign": '{"t":[2]}'})
    assert from_load_list.log_dirs == (str(tmp_path / "a"),)
    assert from_load_list.subscription == Assign((TopicPartition("t", 2),))
    assert from_load_list.ending == Latest() and not from_load_list.include_headers
    pattern = parse_segment_options({"path": str(tmp_path / "a"), "subscribePattern": "t.*"})
    assert pattern.subscription == SubscribePattern("t.*")


BASE = {"path": "{dir}", "subscribe": "t"}


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"subscribe": "t"}, "needs a path: the broker's log directory"),
        ({**BASE, "path": " , "}, "needs a path"),
        ({**BASE, "path": "{missing}"}, "does not exist or is not a directory"),
        ({**BASE, "path": "{partition}"}, "it is a partition directory"),
        ({"path": "{dir}"}, "One of the options subscribe, subscribePattern, assign must be specified"),
        ({**BASE, "assign": '{"t":[0]}'}, "Only one of the options"),
        ({**BASE, "colour": "red"}, "Unknown option 'colour'.*known options: path"),
        ({**BASE, "kafka.bootstrap.servers": "h:1"}, "does not apply to kipling-segments"),
        ({**BASE, "maxOffsetsPerTrigger": "5"}, "does not apply to kipling-segments"),
        ({**BASE, "startingTimestamp": "5"}, "use startingOffsets/endingOffsets"),
        ({**BASE, "startingOffsets": "latest"}, "startingOffsets can't be latest"),
        ({**BASE, "endingOffsets": "earliest"}, "endingOffsets can't be earliest"),
        ({**BASE, "startingOffsets": '{"t":{"0":-1}}'}, r"t-0 can't be latest \(-1\)"),
        ({**BASE, "includeUncommitted": "yes"}, "must be 'true' or 'false'"),
        ({**BASE, "paths": "/x"}, "must be a JSON array of strings"),
        ({**BASE, "subscribe": ""}, "No topics to subscribe to"),
    ],
)
def test_option_errors_say_what_is_wrong(tmp_path: Path, options: dict[str, str], message: str) -> None:
    partition = tmp_path / f"{TOPIC}-0"
    open_partition_log(tmp_path, TOPIC, 0).close()
    places = {"{missing}": str(tmp_path / "missing"), "{partition}": str(partition), "{dir}": str(tmp_path)}
    resolved = {key: places.get(value, value) for key, value in options.items()}
    with pytest.raises(KiplingOptionError, match=message):
        parse_segment_options(resolved)


# -- reading segment files -------------------------------------------------------------------------


def test_reading_starts_from_the_offset_index_and_mid_batch(
    live_log: tuple[Path, PartitionLog, list[Written]],
) -> None:
    _, log, written = live_log
    segment = log.segments()[3]
    path = str(segment.log_path)
    fd = os.open(path, os.O_RDONLY)
    try:
        position = start_position(fd, path, segment.base_offset, segment.base_offset + 20)
    finally:
        os.close(fd)
    assert position > 0, "the sparse index should let the scan skip the segment's first batches"
    start = segment.base_offset + 20
    task = SegmentTask(TOPIC, 0, path, segment.base_offset, start, start + 5, last_segment=False)
    assert rows(list(iter_task_records(task))) == expected(written, start, start + 5)


def test_a_stale_index_only_costs_a_scan_from_the_start(
    live_log: tuple[Path, PartitionLog, list[Written]],
) -> None:
    _, log, written = live_log
    segment = log.segments()[2]
    segment.offset_index.flush()
    index = Path(str(segment.log_path).removesuffix(".log") + ".index")
    data = bytearray(index.read_bytes())
    assert len(data) >= 16, "the segment should have index entries"
    for entry in range(0, len(data), 8):
        data[entry + 4 : entry + 8] = (3).to_bytes(4, "big")  # every entry points into the first batch
    index.write_bytes(bytes(data))
    path = str(segment.log_path)
    start, end = segment.base_offset + 25, log.segments()[3].base_offset
    fd = os.open(path, os.O_RDONLY)
    try:
        assert start_position(fd, path, segment.base_offset, start) == 0
    finally:
        os.close(fd)
    task = SegmentTask(TOPIC, 0, path, segment.base_offset, start, end, False)
    assert rows(list(iter_task_records(task))) == expected(written, start, end)


def test_a_torn_tail_on_the_active_segment_is_the_end_of_the_data(tmp_path: Path) -> None:
    log = open_partition_log(tmp_path, TOPIC, 0, segment_bytes=10**6)
    written = append_records(log, 30, compression=CompressionType.GZIP)
    active = log.active_segment.log_path
    next_batch = build_batch([Record(value=b"late", timestamp=1)], base_offset=log.log_end_offset)
    with open(active, "ab") as out:  # half a batch, as a reader sees one being written
        out.write(next_batch[: len(next_batch) // 2])
    assert log_end_offset(str(active), 0) == 30
    task = SegmentTask(TOPIC, 0, str(active), 0, 0, 30, last_segment=True)
    assert rows(list(iter_task_records(task))) == expected(written)
    with open(active, "ab") as out:
        out.write(bytes(4096))  # and zeros after it, as a crash can leave them
    assert rows(list(iter_task_records(task))) == expected(written)
    log.close()


def test_a_torn_tail_on_an_inactive_segment_is_corruption(tmp_path: Path) -> None:
    log = open_partition_log(tmp_path, TOPIC, 0, segment_bytes=1500)
    written = append_records(log, 60)
    log.close()
    first = log.segments()[0]
    next_base = log.segments()[1].base_offset
    path = Path(first.log_path)
    data = path.read_bytes()
    path.write_bytes(data[:-10])  # its last batch lost its end: a crash before the data reached the disk
    task = SegmentTask(TOPIC, 0, str(path), 0, 0, next_base, last_segment=False)
    with pytest.raises(SegmentCorruptError, match=r"an incomplete batch .* in an inactive segment"):
        list(iter_task_records(task))
    lenient = replace(task, fail_on_data_loss=False)
    got = rows(list(iter_task_records(lenient)))
    assert got and got == expected(written, 0, got[-1][0] + 1) and got[-1][0] < next_base - 1


def test_a_segment_truncated_after_planning_is_data_loss(tmp_path: Path) -> None:
    log = open_partition_log(tmp_path, TOPIC, 0, segment_bytes=10**6)
    written = append_records(log, 30)
    task = SegmentTask(TOPIC, 0, str(log.active_segment.log_path), 0, 0, 30, last_segment=True)
    log.truncate_to(20)
    with pytest.raises(KiplingDataLossError, match="the log ends at 20 now"):
        list(iter_task_records(task))
    lenient = SegmentTask(TOPIC, 0, task.log_path, 0, 0, 30, last_segment=True, fail_on_data_loss=False)
    assert rows(list(iter_task_records(lenient))) == expected(written, 0, 20)
    log.close()


def test_corruption_fails_the_read_or_is_skipped_with_failondataloss_false(tmp_path: Path) -> None:
    log = open_partition_log(tmp_path, TOPIC, 0, segment_bytes=10**6)
    written = append_records(log, 30, per_batch=10)
    log.close()
    path = tmp_path / f"{TOPIC}-0" / f"{0:020d}.log"
    data = bytearray(path.read_bytes())
    second_batch = int.from_bytes(data[8:12], "big") + 12
    data[second_batch + 70] ^= 0xFF  # a record byte of the second batch: its CRC no longer holds
    path.write_bytes(bytes(data))
    task = SegmentTask(TOPIC, 0, str(path), 0, 0, 30, last_segment=True)
    with pytest.raises(
        SegmentCorruptError, match=r"fails its CRC32C.*from offset 10 to 30 in this segment cannot be read"
    ):
        list(iter_task_records(task))
    lenient = SegmentTask(TOPIC, 0, str(path), 0, 0, 30, last_segment=True, fail_on_data_loss=False)
    assert rows(list(iter_task_records(lenient))) == expected(written, 0, 10)


def test_a_segment_deleted_by_retention_after_planning(tmp_path: Path) -> None:
    log = open_partition_log(tmp_path, TOPIC, 0, segment_bytes=1500)
    written = append_records(log, 40)
    log.close()
    tasks = plan(tmp_path, subscribe=TOPIC, includeUncommitted="true")
    first = Path(tasks[0].log_path)
    os.rename(first, str(first) + ".deleted")  # renamed, not yet removed: still readable
    assert rows(read_all(tasks)) == expected(written)
    os.unlink(str(first) + ".deleted")
    with pytest.raises(KiplingDataLossError, match="the segment file was deleted after the read was planned"):
        read_all(tasks)
    lenient = [replace(t, fail_on_data_loss=False) for t in tasks]
    assert rows(read_all(lenient)) == expected(written, tasks[1].start)


def test_arrow_batches_have_the_source_schema(live_log: tuple[Path, PartitionLog, list[Written]]) -> None:
    from pipeline.arrow import source_arrow_schema

    log_dir, _, written = live_log
    tasks = plan(log_dir, subscribe=TOPIC, includeHeaders="true")
    batches = [b for t in tasks for b in read_segment_batches(t, max_rows_per_batch=8)]
    assert all(b.schema == source_arrow_schema(True) and b.num_rows <= 8 for b in batches)
    got = [row for b in batches for row in b.to_pylist()]
    assert [r["offset"] for r in got] == [w.offset for w in written if w.offset < 150]
    assert got[0]["headers"] == [{"key": "idx", "value": b"0"}, {"key": "empty", "value": None}]
    assert {r["topic"] for r in got} == {TOPIC}
