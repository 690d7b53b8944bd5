"""Partition: leader appends (validation, idempotence, HW), reads, offsets by time and by epoch,
producer state across rolls and restarts, and what parked fetches ask of it."""

from __future__ import annotations

import pathlib
import struct
import uuid

import pytest

from broker.replication.partition import (
    NOT_FOUND,
    Partition,
    PartitionRead,
)
from protocol.error_codes import ErrorCode, KafkaError
from protocol.records import Record, build_batch, rewrite_crc
from protocol.records.batch import CURRENT_MAGIC
from protocol.sentinels import NO_LEADER_EPOCH, IsolationLevel
from storage.clock import FakeClock
from storage.config import LogConfig
from storage.errors import LogDirFullError
from storage.log import PartitionLog
from storage.producer_recovery import iter_log_headers
from storage.producer_snapshot import list_snapshot_offsets

NODE = 1
NOW = 1_700_000_000_000
TOPIC_ID = uuid.UUID(int=7)


def batch(
    n: int = 1,
    *,
    timestamp: int = NOW,
    value: bytes = b"v",
    producer_id: int = -1,
    epoch: int = -1,
    sequence: int = -1,
    transactional: bool = False,
    control: bool = False,
) -> bytes:
    records = [Record(value=value, key=b"k%d" % i, timestamp=timestamp + i) for i in range(n)]
    return build_batch(
        records,
        producer_id=producer_id,
        producer_epoch=epoch,
        base_sequence=sequence,
        is_transactional=transactional,
        is_control=control,
    )


def open_partition(
    directory: pathlib.Path,
    clock: FakeClock,
    *,
    config: LogConfig | None = None,
    leader_epoch: int = 0,
    replicas: list[int] | None = None,
    isr: list[int] | None = None,
    min_isr: int = 1,
) -> Partition:
    log = PartitionLog.open(directory, config or LogConfig(), clock, topic_id=TOPIC_ID)
    return Partition.open(
        log,
        node_id=NODE,
        topic_id=TOPIC_ID,
        leader_epoch=leader_epoch,
        partition_epoch=0,
        replicas=replicas or [NODE],
        isr=isr or [NODE],
        min_insync_replicas=min_isr,
        clock=clock,
    )


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(NOW)


@pytest.fixture
def partition(tmp_path: pathlib.Path, clock: FakeClock) -> Partition:
    return open_partition(tmp_path / "orders-0", clock)


def append(partition: Partition, data: bytes, acks: int = 1) -> object:
    return partition.append_records(data, required_acks=acks, now_ms=NOW)


def error_of(partition: Partition, data: bytes | None, acks: int = 1) -> ErrorCode:
    with pytest.raises(KafkaError) as caught:
        partition.append_records(data, required_acks=acks, now_ms=NOW)
    return caught.value.code


def consumer_read(
    partition: Partition, offset: int, max_bytes: int = 1 << 20, **kwargs: object
) -> PartitionRead:
    params: dict[str, object] = {
        "isolation_level": IsolationLevel.READ_UNCOMMITTED,
        "is_follower": False,
        "min_one_batch": True,
        "current_leader_epoch": NO_LEADER_EPOCH,
        "last_fetched_epoch": NO_LEADER_EPOCH,
    }
    params.update(kwargs)
    return partition.read(offset, max_bytes, **params)  # type: ignore[arg-type]


# -- appends -----------------------------------------------------------------------------------------


def test_append_assigns_offsets_and_moves_hw_to_leo(partition: Partition) -> None:
    first = append(partition, batch(3))
    second = append(partition, batch(2))
    assert (first.base_offset, first.last_offset, first.num_records) == (0, 2, 3)
    assert (second.base_offset, second.last_offset) == (3, 4)
    assert second.log_append_time_ms == -1
    assert second.log_start_offset == 0
    assert not second.duplicate
    assert partition.log_end_offset == partition.high_watermark == partition.last_stable_offset == 5


def test_log_append_time_topic_reports_the_broker_time(tmp_path: pathlib.Path, clock: FakeClock) -> None:
    partition = open_partition(
        tmp_path / "t-0", clock, config=LogConfig(message_timestamp_type="LogAppendTime")
    )
    result = append(partition, batch(2, timestamp=5))
    assert result.log_append_time_ms == NOW


def test_listeners_hear_each_append_once(partition: Partition) -> None:
    seen: list[tuple[int, int]] = []
    partition.add_listener(lambda p: seen.append((p.log_end_offset, p.high_watermark)))
    append(partition, batch(2))
    append(partition, batch(1))
    assert seen == [(2, 2), (3, 3)]


def test_failing_listener_does_not_fail_the_append(partition: Partition) -> None:
    def boom(_: Partition) -> None:
        raise RuntimeError("listener bug")

    partition.add_listener(boom)
    assert append(partition, batch()).base_offset == 0


def test_leader_epoch_is_stamped_and_cached(tmp_path: pathlib.Path, clock: FakeClock) -> None:
    partition = open_partition(tmp_path / "t-0", clock, leader_epoch=4)
    assert partition.log.leader_epoch_cache.entries() == [(4, 0)]  # assigned before any data
    append(partition, batch())
    header = next(iter_log_headers(partition.log, 0))
    assert header.partition_leader_epoch == 4


# -- idempotence -------------------------------------------------------------------------------------


def test_retried_batch_is_answered_with_its_first_offsets(partition: Partition) -> None:
    append(partition, batch(1))
    data = batch(3, producer_id=42, epoch=0, sequence=0)
    first = append(partition, data)
    again = append(partition, data)
    assert (again.base_offset, again.last_offset, again.duplicate) == (first.base_offset, 3, True)
    assert partition.log_end_offset == 4  # written once


def test_sequence_gap_is_out_of_order(partition: Partition) -> None:
    append(partition, batch(2, producer_id=42, epoch=0, sequence=0))
    assert (
        error_of(partition, batch(1, producer_id=42, epoch=0, sequence=5))
        is ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    )
    assert append(partition, batch(1, producer_id=42, epoch=0, sequence=2)).base_offset == 2
    assert partition.log_end_offset == 3


def test_a_sequence_gap_left_by_a_full_disk_is_a_storage_error(
    partition: Partition, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The next pipelined batch after one the full disk refused hears KAFKA_STORAGE_ERROR, the
    reason for the gap, not OUT_OF_ORDER_SEQUENCE_NUMBER (which makes librdkafka bump its epoch
    and renumber, duplicating what other partitions had written). Once space returns the retries
    in order are appended."""
    append(partition, batch(2, producer_id=42, epoch=0, sequence=0))
    append_as_leader = partition.log.append_as_leader

    def full(*_: object) -> None:
        raise LogDirFullError(partition.log.directory)

    monkeypatch.setattr(partition.log, "append_as_leader", full)
    space = [False]
    monkeypatch.setattr(partition, "_has_space_for", lambda size: space[0])
    assert error_of(partition, batch(1, producer_id=42, epoch=0, sequence=2)) is ErrorCode.KAFKA_STORAGE_ERROR
    assert error_of(partition, batch(1, producer_id=42, epoch=0, sequence=3)) is ErrorCode.KAFKA_STORAGE_ERROR
    space[0] = True  # space returned, and the refused batch never came back: a real gap
    assert (
        error_of(partition, batch(1, producer_id=42, epoch=0, sequence=3))
        is ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    )
    monkeypatch.setattr(partition.log, "append_as_leader", append_as_leader)
    assert append(partition, batch(1, producer_id=42, epoch=0, sequence=2)).base_offset == 2
    assert append(partition, batch(1, producer_id=42, epoch=0, sequence=3)).base_offset == 3
    assert (
        error_of(partition, batch(1, producer_id=42, epoch=0, sequence=9))
        is ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    )


def test_older_producer_epoch_is_fenced(partition: Partition) -> None:
    append(partition, batch(1, producer_id=42, epoch=3, sequence=0))
    assert (
        error_of(partition, batch(1, producer_id=42, epoch=2, sequence=1)) is ErrorCode.INVALID_PRODUCER_EPOCH
    )
    assert append(partition, batch(1, producer_id=42, epoch=4, sequence=0)).base_offset == 1


def test_no_producer_id_skips_every_sequence_check(partition: Partition) -> None:
    data = batch(1, producer_id=-1, epoch=0, sequence=0)  # kafkajs and platformatic write these
    assert append(partition, data).base_offset == 0
    assert append(partition, data).base_offset == 1


def test_corrupt_retry_is_corrupt_not_duplicate(partition: Partition) -> None:
    data = batch(1, producer_id=42, epoch=0, sequence=0)
    append(partition, data)
    corrupt = bytearray(data)
    corrupt[-1] ^= 0xFF
    assert error_of(partition, bytes(corrupt)) is ErrorCode.CORRUPT_MESSAGE
    gap = bytearray(batch(1, producer_id=42, epoch=0, sequence=9))
    gap[-1] ^= 0xFF
    assert error_of(partition, bytes(gap)) is ErrorCode.CORRUPT_MESSAGE


# -- validation --------------------------------------------------------------------------------------


def recount(data: bytes, count: int) -> bytes:
    buf = bytearray(data)
    struct.pack_into(">i", buf, 57, count)
    rewrite_crc(buf, 0)
    return bytes(buf)


@pytest.mark.parametrize(
    ("data", "code"),
    [
        (b"", ErrorCode.INVALID_RECORD),
        (None, ErrorCode.INVALID_RECORD),
        (batch(1) + batch(1), ErrorCode.INVALID_RECORD),
        (batch(1) + b"\x00\x01", ErrorCode.CORRUPT_MESSAGE),
        (batch(2)[:-3], ErrorCode.CORRUPT_MESSAGE),
        (batch(1)[:30], ErrorCode.CORRUPT_MESSAGE),
        (recount(batch(2), 3), ErrorCode.INVALID_RECORD),
        (recount(batch(1), 0), ErrorCode.INVALID_RECORD),
        (batch(1, control=True), ErrorCode.INVALID_RECORD),
        (batch(1, producer_id=9, epoch=0, sequence=0, transactional=True), ErrorCode.INVALID_TXN_STATE),
    ],
    ids=[
        "empty",
        "null",
        "two-batches",
        "trailing-bytes",
        "torn",
        "short-header",
        "count",
        "zero",
        "control",
        "txn",
    ],
)
def test_invalid_batches_write_nothing(partition: Partition, data: bytes | None, code: ErrorCode) -> None:
    assert error_of(partition, data) is code
    assert partition.log_end_offset == 0


def test_bad_crc_is_corrupt_message(partition: Partition) -> None:
    data = bytearray(batch(2))
    data[-1] ^= 0xFF
    assert error_of(partition, bytes(data)) is ErrorCode.CORRUPT_MESSAGE
    assert partition.log_end_offset == 0


def test_legacy_magic_is_unsupported_version(partition: Partition) -> None:
    data = bytearray(batch(1))
    data[16] = CURRENT_MAGIC - 1
    assert error_of(partition, bytes(data)) is ErrorCode.UNSUPPORTED_VERSION


def test_batch_above_max_message_bytes(tmp_path: pathlib.Path, clock: FakeClock) -> None:
    partition = open_partition(tmp_path / "t-0", clock, config=LogConfig(max_message_bytes=200))
    assert error_of(partition, batch(1, value=b"x" * 300)) is ErrorCode.MESSAGE_TOO_LARGE
    assert append(partition, batch(1)).base_offset == 0


def test_batch_above_segment_size_is_record_list_too_large(tmp_path: pathlib.Path, clock: FakeClock) -> None:
    config = LogConfig(segment_bytes=200, max_message_bytes=10_000)
    partition = open_partition(tmp_path / "t-0", clock, config=config)
    assert error_of(partition, batch(1, value=b"x" * 300)) is ErrorCode.RECORD_LIST_TOO_LARGE


def test_acks_all_below_min_isr_appends_nothing(tmp_path: pathlib.Path, clock: FakeClock) -> None:
    partition = open_partition(tmp_path / "t-0", clock, replicas=[NODE, 2], isr=[NODE], min_isr=2)
    assert partition.min_insync_replicas == 2
    assert error_of(partition, batch(), acks=-1) is ErrorCode.NOT_ENOUGH_REPLICAS
    assert partition.log_end_offset == 0
    assert append(partition, batch(), acks=1).base_offset == 0


def test_min_isr_above_replication_factor_is_clamped(tmp_path: pathlib.Path, clock: FakeClock) -> None:
    partition = open_partition(tmp_path / "t-0", clock, min_isr=3)
    assert partition.min_insync_replicas == 1
    assert append(partition, batch(), acks=-1).required_offset == 1
    assert partition.high_watermark == 1


def test_hw_waits_for_other_isr_members(tmp_path: pathlib.Path, clock: FakeClock) -> None:
    partition = open_partition(tmp_path / "t-0", clock, replicas=[NODE, 2], isr=[NODE, 2])
    append(partition, batch(2))
    assert (partition.log_end_offset, partition.high_watermark) == (2, 0)


def test_not_leader_and_offline(partition: Partition) -> None:
    partition.is_offline = True
    assert error_of(partition, batch()) is ErrorCode.KAFKA_STORAGE_ERROR
    partition.is_offline = False
    partition.mark_removed()
    assert error_of(partition, batch()) is ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_write_failure_takes_the_partition_offline(
    partition: Partition, monkeypatch: pytest.MonkeyPatch
) -> None:
    def fail(*_: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(partition.log, "append_as_leader", fail)
    assert error_of(partition, batch()) is ErrorCode.KAFKA_STORAGE_ERROR
    assert partition.is_offline
    assert consumer_read(partition, 0).error_code is ErrorCode.KAFKA_STORAGE_ERROR


# -- reads -------------------------------------------------------------------------------------------


def test_read_bounds_and_errors(partition: Partition) -> None:
    append(partition, batch(2))
    append(partition, batch(3))
    whole = consumer_read(partition, 0)
    assert (whole.error_code, whole.high_watermark, whole.log_start_offset, whole.log_end_offset) == (
        ErrorCode.NONE,
        5,
        0,
        5,
    )
    assert whole.first_offset == 0 and whole.records_size == whole.slice.length > 0
    middle = consumer_read(partition, 3)  # batch granularity: starts at the batch holding 3
    assert middle.first_offset == 2
    at_end = consumer_read(partition, 5)
    assert (at_end.error_code, at_end.slice, at_end.records_size) == (ErrorCode.NONE, None, 0)
    beyond = consumer_read(partition, 6)
    assert beyond.error_code is ErrorCode.OFFSET_OUT_OF_RANGE
    assert (beyond.high_watermark, beyond.log_start_offset) == (-1, -1)


def test_consumers_stop_at_hw_followers_at_leo(tmp_path: pathlib.Path, clock: FakeClock) -> None:
    partition = open_partition(tmp_path / "t-0", clock, replicas=[NODE, 2], isr=[NODE, 2])
    append(partition, batch(2))
    for level in (IsolationLevel.READ_UNCOMMITTED, IsolationLevel.READ_COMMITTED):
        consumer = consumer_read(partition, 0, isolation_level=level)
        assert (consumer.error_code, consumer.slice, consumer.high_watermark) == (ErrorCode.NONE, None, 0)
    above_hw = consumer_read(partition, 1)
    assert (above_hw.error_code, above_hw.slice) == (ErrorCode.NONE, None)
    follower = consumer_read(partition, 0, is_follower=True)
    assert follower.slice is not None and follower.log_end_offset == 2


def test_min_one_batch(partition: Partition) -> None:
    append(partition, batch(1, value=b"x" * 500))
    assert consumer_read(partition, 0, max_bytes=10).records_size > 500
    assert consumer_read(partition, 0, max_bytes=10, min_one_batch=False).slice is None


def test_current_leader_epoch_checks(tmp_path: pathlib.Path, clock: FakeClock) -> None:
    partition = open_partition(tmp_path / "t-0", clock, leader_epoch=5)
    append(partition, batch())
    assert consumer_read(partition, 0, current_leader_epoch=4).error_code is ErrorCode.FENCED_LEADER_EPOCH
    assert consumer_read(partition, 0, current_leader_epoch=6).error_code is ErrorCode.UNKNOWN_LEADER_EPOCH
    assert consumer_read(partition, 0, current_leader_epoch=5).error_code is ErrorCode.NONE
    partition.mark_removed()
    assert consumer_read(partition, 0).error_code is ErrorCode.NOT_LEADER_OR_FOLLOWER


def epochs_partition(directory: pathlib.Path, clock: FakeClock) -> Partition:
    """Epoch 0 holds offsets 0-2, epoch 3 starts at 3 (offsets 3-4)."""
    first = open_partition(directory, clock, leader_epoch=0)
    append(first, batch(3))
    first.close()
    first.log.close()
    second = open_partition(directory, clock, leader_epoch=3)
    append(second, batch(2))
    return second


def test_diverging_epoch_for_a_follower(tmp_path: pathlib.Path, clock: FakeClock) -> None:
    partition = epochs_partition(tmp_path / "t-0", clock)
    # the follower wrote offsets 3.. in epoch 1, which this leader never had: truncate to 3
    read = consumer_read(partition, 4, is_follower=True, last_fetched_epoch=1)
    assert read.diverging_epoch == (0, 3)
    assert (read.error_code, read.slice, read.high_watermark) == (ErrorCode.NONE, None, 5)
    # in step: epoch 0 ended at 3 and the follower fetches from 3
    same = consumer_read(partition, 3, is_follower=True, last_fetched_epoch=0)
    assert same.diverging_epoch is None and same.slice is not None
    assert consumer_read(partition, 4, is_follower=True, last_fetched_epoch=9).error_code is (
        ErrorCode.OFFSET_OUT_OF_RANGE
    )


def test_end_offset_for_epoch(tmp_path: pathlib.Path, clock: FakeClock) -> None:
    partition = epochs_partition(tmp_path / "t-0", clock)
    assert partition.end_offset_for_epoch(0) == (0, 3)
    assert partition.end_offset_for_epoch(2) == (0, 3)
    assert partition.end_offset_for_epoch(3) == (3, 5)
    assert partition.end_offset_for_epoch(4) == (NO_LEADER_EPOCH, -1)
    assert partition.last_offset_for_leader_epoch(3, 0) == (0, 3)
    with pytest.raises(KafkaError) as fenced:
        partition.last_offset_for_leader_epoch(2, 0)
    assert fenced.value.code is ErrorCode.FENCED_LEADER_EPOCH
    with pytest.raises(KafkaError) as unknown:
        partition.last_offset_for_leader_epoch(4, 0)
    assert unknown.value.code is ErrorCode.UNKNOWN_LEADER_EPOCH


# -- what a parked fetch checks ----------------------------------------------------------------------


def test_bytes_available_and_segments(tmp_path: pathlib.Path, clock: FakeClock) -> None:
    data = batch(1, value=b"x" * 100)
    partition = open_partition(tmp_path / "t-0", clock, config=LogConfig(segment_bytes=len(data) * 3))
    for _ in range(3):
        append(partition, data)
    assert partition.bytes_available(0, 3) == 3 * len(data)
    assert partition.bytes_available(1, 3) == 2 * len(data)
    assert partition.bytes_available(1, 2) == len(data)
    assert partition.bytes_available(1, 3, max_bytes=10) == 10
    assert partition.bytes_available(3, 3) == 0
    append(partition, data)  # rolls: offset 3 starts a new segment
    assert partition.on_older_segment(2, 4)
    assert not partition.on_older_segment(3, 4)
    assert not partition.on_older_segment(0, 2)
    assert partition.bytes_available(3, 4) == len(data)
    assert partition.end_offset_for(IsolationLevel.READ_UNCOMMITTED, is_follower=False) == 4


# -- producer state across rolls and restarts --------------------------------------------------------


def test_producer_snapshot_at_each_roll(tmp_path: pathlib.Path, clock: FakeClock) -> None:
    data = batch(1, value=b"x" * 100, producer_id=7, epoch=0, sequence=0)
    size = len(data)
    partition = open_partition(tmp_path / "t-0", clock, config=LogConfig(segment_bytes=size * 2))
    for sequence in range(5):
        append(partition, batch(1, value=b"x" * 100, producer_id=7, epoch=0, sequence=sequence))
    assert [s.base_offset for s in partition.log.segments()] == [0, 2, 4]
    assert list_snapshot_offsets(partition.log.directory) == [2, 4]


def test_dedup_survives_a_clean_restart(tmp_path: pathlib.Path, clock: FakeClock) -> None:
    directory = tmp_path / "t-0"
    partition = open_partition(directory, clock)
    data = batch(2, producer_id=7, epoch=0, sequence=0)
    append(partition, data)
    partition.close()
    partition.log.close()
    assert list_snapshot_offsets(directory) == [2]
    reopened = open_partition(directory, clock)
    assert append(reopened, data).duplicate
    assert (
        error_of(reopened, batch(1, producer_id=7, epoch=0, sequence=5))
        is ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    )


def test_dedup_survives_a_crash_by_replaying_headers(tmp_path: pathlib.Path, clock: FakeClock) -> None:
    directory = tmp_path / "t-0"
    partition = open_partition(directory, clock)
    first = batch(2, producer_id=7, epoch=0, sequence=0)
    append(partition, batch(1))
    append(partition, first)
    append(partition, batch(1, producer_id=8, epoch=1, sequence=0))
    partition.log.close()  # no producer snapshot: as after a crash
    assert list_snapshot_offsets(directory) == []
    reopened = open_partition(directory, clock)
    again = append(reopened, first)
    assert (again.duplicate, again.base_offset) == (True, 1)
    assert append(reopened, batch(1, producer_id=8, epoch=1, sequence=1)).base_offset == 4


# -- offsets by timestamp ----------------------------------------------------------------------------


def test_offset_for_timestamp(partition: Partition) -> None:
    append(partition, batch(2, timestamp=NOW))  # offsets 0-1 at NOW, NOW+1
    append(partition, batch(2, timestamp=NOW + 100))  # offsets 2-3 at NOW+100, NOW+101

    def lookup(
        ts: int, isolation: IsolationLevel | None = IsolationLevel.READ_UNCOMMITTED
    ) -> tuple[int, int, int]:
        return tuple(partition.offset_for_timestamp(ts, isolation_level=isolation, current_leader_epoch=-1))

    assert lookup(-1) == (-1, 4, 0)
    assert lookup(-2) == (-1, 0, 0)
    assert lookup(-4) == (-1, 0, 0)
    assert lookup(-3) == (NOW + 101, 3, 0)
    assert lookup(-5) == tuple(NOT_FOUND)
    assert lookup(NOW + 1) == (NOW + 1, 1, 0)
    assert lookup(NOW + 50) == (NOW + 100, 2, 0)
    assert lookup(NOW + 500) == tuple(NOT_FOUND)


def test_offset_for_timestamp_stops_at_the_last_fetchable_offset(
    tmp_path: pathlib.Path, clock: FakeClock
) -> None:
    partition = open_partition(tmp_path / "t-0", clock, replicas=[NODE, 2], isr=[NODE, 2])
    append(partition, batch(2))  # HW stays 0

    def lookup(ts: int, isolation: int | None) -> tuple[int, int, int]:
        return tuple(partition.offset_for_timestamp(ts, isolation_level=isolation, current_leader_epoch=-1))

    assert lookup(-1, IsolationLevel.READ_UNCOMMITTED) == (-1, 0, 0)
    assert lookup(-1, IsolationLevel.READ_COMMITTED) == (-1, 0, 0)
    assert lookup(-1, None) == (-1, 2, 0)  # a follower or the debug replica id: up to the LEO
    assert lookup(NOW, IsolationLevel.READ_UNCOMMITTED) == tuple(NOT_FOUND)
    assert lookup(NOW, None) == (NOW, 0, 0)
    assert lookup(-2, IsolationLevel.READ_UNCOMMITTED) == (-1, 0, 0)  # earliest is never filtered


def test_offset_for_timestamp_checks_the_epoch(partition: Partition) -> None:
    with pytest.raises(KafkaError) as caught:
        partition.offset_for_timestamp(-1, isolation_level=0, current_leader_epoch=1)
    assert caught.value.code is ErrorCode.UNKNOWN_LEADER_EPOCH


# -- retention ---------------------------------------------------------------------------------------


def test_retention_moves_log_start_and_notifies(tmp_path: pathlib.Path, clock: FakeClock) -> None:
    data = batch(1, value=b"x" * 100, producer_id=7, epoch=0, sequence=0)
    config = LogConfig(segment_bytes=len(data), retention_bytes=len(data), file_delete_delay_ms=0)
    partition = open_partition(tmp_path / "t-0", clock, config=config)
    for sequence in range(3):
        append(partition, batch(1, value=b"x" * 100, producer_id=7, epoch=0, sequence=sequence))
    seen: list[int] = []
    partition.add_listener(lambda p: seen.append(p.log_start_offset))
    assert partition.log.delete_old_segments() > 0
    partition.after_retention()
    assert seen == [partition.log_start_offset] and partition.log_start_offset > 0
    assert all(o >= partition.log_start_offset for o in list_snapshot_offsets(partition.log.directory))
    assert consumer_read(partition, 0).error_code is ErrorCode.OFFSET_OUT_OF_RANGE
    partition.after_retention()
    assert len(seen) == 1  # nothing moved: nobody is told
