"""message.timestamp.after.max.ms and message.timestamp.before.max.ms on the leader's produce path, as
Kafka's LogValidator applies them (KIP-937): a CreateTime record too far ahead of or behind the
broker's clock makes the whole batch INVALID_TIMESTAMP, with one record error per refused record."""

from __future__ import annotations

import pathlib

import pytest

from broker.produce.validation import INVALID_TIMESTAMP_MESSAGE, RecordError, RecordValidationError
from broker.replication.partition import Partition
from protocol.error_codes import ErrorCode, KafkaError
from protocol.records import CompressionType, Record, TimestampType, build_batch, iter_records, rewrite_crc
from storage.clock import FakeClock
from storage.config import LONG_MAX, LogConfig
from tests.broker.test_partition import NOW, consumer_read, open_partition

HOUR = 3_600_000
NO_TIMESTAMP = -1
LOWEST = NOW - LONG_MAX
"""Kafka's lower bound with the default before.max.ms (Long.MAX): now - Long.MAX."""


def topic_partition(directory: pathlib.Path, **config: object) -> Partition:
    return open_partition(directory, FakeClock(NOW), config=LogConfig(**config))  # type: ignore[arg-type]


def stamped(*timestamps: int, **fields: object) -> bytes:
    records = [Record(b"value-%d" % i, key=b"k", timestamp=ts) for i, ts in enumerate(timestamps)]
    return build_batch(records, **fields)  # type: ignore[arg-type]


def append(partition: Partition, data: bytes, now_ms: int = NOW) -> object:
    return partition.append_records(data, required_acks=1, now_ms=now_ms)


def refusal(partition: Partition, data: bytes, now_ms: int = NOW) -> KafkaError:
    end = partition.log_end_offset
    with pytest.raises(KafkaError) as caught:
        append(partition, data, now_ms)
    assert partition.log_end_offset == end  # nothing of the batch was appended
    return caught.value


def out_of_range(index: int, timestamp: int, offset: int, low: int, high: int) -> RecordError:
    return RecordError(
        index,
        f"Timestamp {timestamp} of message with offset {offset} is out of range. "
        f"The timestamp should be within [{low}, {high}]",
    )


def test_a_record_two_hours_ahead_is_refused_by_default(tmp_path: pathlib.Path) -> None:
    partition = topic_partition(tmp_path / "t-0")
    error = refusal(partition, stamped(NOW, NOW + 2 * HOUR, NOW + 1))
    assert isinstance(error, RecordValidationError)
    assert (error.code, error.message) == (ErrorCode.INVALID_TIMESTAMP, INVALID_TIMESTAMP_MESSAGE)
    assert int(error.code) == 32
    assert error.record_errors == (out_of_range(1, NOW + 2 * HOUR, 1, LOWEST, NOW + HOUR),)


@pytest.mark.parametrize("ahead", [30 * 60_000, HOUR])
def test_a_record_up_to_an_hour_ahead_is_accepted(tmp_path: pathlib.Path, ahead: int) -> None:
    partition = topic_partition(tmp_path / "t-0")
    assert append(partition, stamped(NOW - 5, NOW + ahead)).base_offset == 0  # type: ignore[attr-defined]
    assert partition.log_end_offset == 2


def test_the_clock_decides(tmp_path: pathlib.Path) -> None:
    """The bound is the produce path's now, not the records' own or the batch's base timestamp."""
    partition = topic_partition(tmp_path / "t-0")
    future = stamped(NOW + 2 * HOUR)
    assert refusal(partition, future).code == ErrorCode.INVALID_TIMESTAMP
    append(partition, future, now_ms=NOW + HOUR + 1)
    assert partition.log_end_offset == 1


def test_a_topic_override_of_after_max_ms(tmp_path: pathlib.Path) -> None:
    strict = topic_partition(tmp_path / "strict-0", message_timestamp_after_max_ms=1000)
    error = refusal(strict, stamped(NOW + 1001))
    assert error.record_errors == (out_of_range(0, NOW + 1001, 0, LOWEST, NOW + 1000),)  # type: ignore[attr-defined]
    append(strict, stamped(NOW + 1000))  # exactly at the bound: accepted, as in Kafka
    loose = topic_partition(tmp_path / "loose-0", message_timestamp_after_max_ms=LONG_MAX)
    append(loose, stamped(NOW + 1000 * 24 * HOUR))
    assert loose.log_end_offset == 1


def test_before_max_ms_refuses_old_records(tmp_path: pathlib.Path) -> None:
    partition = topic_partition(tmp_path / "t-0", message_timestamp_before_max_ms=HOUR)
    sent = stamped(NOW, NOW - 2 * HOUR, NOW - HOUR, NOW - HOUR - 1, base_offset=0)
    error = refusal(partition, sent)
    assert error.code == ErrorCode.INVALID_TIMESTAMP
    assert error.record_errors == (  # type: ignore[attr-defined]
        out_of_range(1, NOW - 2 * HOUR, 1, NOW - HOUR, NOW + HOUR),
        out_of_range(3, NOW - HOUR - 1, 3, NOW - HOUR, NOW + HOUR),
    )
    append(partition, stamped(NOW - HOUR, NOW + HOUR))  # both bounds are inclusive
    assert partition.log_end_offset == 2


@pytest.mark.parametrize("codec", [CompressionType.NONE, CompressionType.GZIP, CompressionType.ZSTD])
def test_before_max_ms_looks_at_every_record_whatever_the_codec(
    tmp_path: pathlib.Path, codec: CompressionType
) -> None:
    """The oldest record need not be the first: deltas from the base timestamp may be negative."""
    partition = topic_partition(tmp_path / "t-0", message_timestamp_before_max_ms=60_000)
    timestamps = [NOW - 1000 * (i % 7) for i in range(50)]
    timestamps[37] = NOW - 61_000
    error = refusal(partition, stamped(*timestamps, compression=codec))
    assert [e.batch_index for e in error.record_errors] == [37]  # type: ignore[attr-defined]
    timestamps[37] = NOW - 60_000
    append(partition, stamped(*timestamps, compression=codec))
    assert partition.log_end_offset == 50


def test_the_default_before_max_ms_accepts_a_record_from_1970(tmp_path: pathlib.Path) -> None:
    partition = topic_partition(tmp_path / "t-0")
    append(partition, stamped(0, 1, NOW))
    read = consumer_read(partition, 0)
    assert read.slice is not None
    assert [r.timestamp for r in iter_records(read.slice.read_bytes())] == [0, 1, NOW]


def test_records_without_a_timestamp_are_not_checked(tmp_path: pathlib.Path) -> None:
    """Kafka skips a record whose timestamp is -1 (RecordBatch.NO_TIMESTAMP), under both bounds."""
    partition = topic_partition(
        tmp_path / "t-0", message_timestamp_before_max_ms=0, message_timestamp_after_max_ms=0
    )
    append(partition, stamped(NO_TIMESTAMP, NO_TIMESTAMP))
    append(partition, stamped(NO_TIMESTAMP, NOW, NO_TIMESTAMP))
    assert partition.log_end_offset == 5
    error = refusal(partition, stamped(NO_TIMESTAMP, NOW - 1))
    assert error.record_errors == (out_of_range(1, NOW - 1, 1, NOW, NOW),)  # type: ignore[attr-defined]


def test_log_append_time_topics_skip_the_check(tmp_path: pathlib.Path) -> None:
    partition = topic_partition(
        tmp_path / "t-0", message_timestamp_type="LogAppendTime", message_timestamp_before_max_ms=0
    )
    result = append(partition, stamped(NOW + 2 * HOUR, 0))
    assert result.log_append_time_ms == NOW  # type: ignore[attr-defined]
    assert partition.log_end_offset == 2


def test_a_producer_may_not_set_log_append_time(tmp_path: pathlib.Path) -> None:
    """Kafka refuses such a batch on a LogAppendTime topic; on a CreateTime topic its records all carry
    its MaxTimestamp, which is checked like any other timestamp."""
    lat = TimestampType.LOG_APPEND_TIME
    partition = topic_partition(tmp_path / "lat-0", message_timestamp_type="LogAppendTime")
    error = refusal(partition, stamped(NOW, NOW, timestamp_type=lat))
    assert error.code == ErrorCode.INVALID_TIMESTAMP
    assert [e.batch_index for e in error.record_errors] == [0, 1]  # type: ignore[attr-defined]
    assert error.record_errors[0].message == (  # type: ignore[attr-defined]
        f"Invalid timestamp type in message DefaultRecord(offset=0, timestamp={NOW}, key=1 bytes, "
        "value=7 bytes). Producer should not set timestamp type to LogAppendTime."
    )
    create_time = topic_partition(tmp_path / "ct-0")
    append(create_time, stamped(NOW, timestamp_type=lat))
    error = refusal(create_time, stamped(NOW - 5, NOW + 2 * HOUR, timestamp_type=lat))
    assert [e.batch_index for e in error.record_errors] == [0, 1]  # type: ignore[attr-defined]


def test_a_corrupt_batch_stays_corrupt(tmp_path: pathlib.Path) -> None:
    partition = topic_partition(tmp_path / "t-0")
    sent = bytearray(stamped(NOW + 2 * HOUR))
    sent[-1] ^= 0xFF
    assert refusal(partition, bytes(sent)).code == ErrorCode.CORRUPT_MESSAGE


def test_a_max_timestamp_beyond_its_records_is_refused(tmp_path: pathlib.Path) -> None:
    """The header's MaxTimestamp decides the after bound: one no record reaches is still refused."""
    partition = topic_partition(tmp_path / "t-0")
    sent = bytearray(stamped(NOW))
    sent[35:43] = (NOW + 2 * HOUR).to_bytes(8, "big", signed=True)
    rewrite_crc(sent, 0)
    error = refusal(partition, bytes(sent))
    assert error.code == ErrorCode.INVALID_TIMESTAMP
    assert f"MaxTimestamp {NOW + 2 * HOUR}" in error.message


def test_the_check_comes_before_duplicate_detection(tmp_path: pathlib.Path) -> None:
    """As in Kafka, where LogValidator runs before the producer state: a retry that is now out of
    bounds is refused, not answered as a duplicate."""
    partition = topic_partition(tmp_path / "t-0", message_timestamp_before_max_ms=HOUR)
    sent = stamped(NOW, producer_id=7, producer_epoch=0, base_sequence=0)
    append(partition, sent)
    assert append(partition, sent).duplicate  # type: ignore[attr-defined]
    assert refusal(partition, sent, now_ms=NOW + HOUR + 1).code == ErrorCode.INVALID_TIMESTAMP
