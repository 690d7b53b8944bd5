"""compression.type on the leader's produce path: batches in another codec are recompressed before the
append, batches in the topic's codec (and every batch with ``producer``) are stored as they came."""

from __future__ import annotations

import gzip
import pathlib

import pytest

from broker.replication.partition import Partition
from protocol.error_codes import ErrorCode, KafkaError
from protocol.records import CompressionType, Record, build_batch, iter_batches, iter_records, read_header
from protocol.records.builder import encode_record
from storage.clock import FakeClock
from storage.config import LogConfig
from tests.broker.test_partition import NOW, consumer_read, open_partition

HEADER_SIZE = 61


def records(n: int, start: int = 0) -> list[Record]:
    return [
        Record(
            b"value %d " % i * 20, key=b"key-%d" % i, headers=[("trace", b"%d" % i)], timestamp=NOW - 1000 + i
        )
        for i in range(start, start + n)
    ]


def produced(codec: CompressionType, n: int = 10, **fields: object) -> bytes:
    return build_batch(records(n), compression=codec, **fields)  # type: ignore[arg-type]


def topic_partition(directory: pathlib.Path, **config: object) -> Partition:
    return open_partition(directory, FakeClock(NOW), config=LogConfig(**config))  # type: ignore[arg-type]


def append(partition: Partition, data: bytes) -> object:
    return partition.append_records(data, required_acks=-1, now_ms=NOW)


def stored_batches(partition: Partition) -> list[bytes]:
    read = consumer_read(partition, 0)
    assert read.slice is not None
    data = read.slice.read_bytes()
    return [data[pos : pos + header.size] for pos, header in iter_batches(data)]


def decoded(batch: bytes) -> list[tuple[object, ...]]:
    return [
        (r.offset - read_header(batch).base_offset, r.timestamp, r.key, r.value, r.headers)
        for r in iter_records(batch)
    ]


def test_gzip_batch_is_stored_as_zstd_on_a_zstd_topic(tmp_path: pathlib.Path) -> None:
    partition = topic_partition(tmp_path / "t-0", compression_type="zstd")
    sent = produced(CompressionType.GZIP, producer_id=9, producer_epoch=0, base_sequence=0)
    result = append(partition, sent)
    assert (result.base_offset, result.last_offset) == (0, 9)
    (stored,) = stored_batches(partition)
    header, original = read_header(stored), read_header(sent)
    assert header.compression == CompressionType.ZSTD
    assert decoded(stored) == decoded(sent)
    kept = (
        "base_timestamp",
        "max_timestamp",
        "producer_id",
        "producer_epoch",
        "base_sequence",
        "records_count",
    )
    assert [getattr(header, f) for f in kept] == [getattr(original, f) for f in kept]
    # The producer state saw the batch: the next sequence is accepted, a retry is a duplicate.
    retry = append(partition, sent)
    assert retry.duplicate and (retry.base_offset, retry.last_offset) == (0, 9)
    following = build_batch(
        records(5, 10), compression=CompressionType.GZIP, producer_id=9, producer_epoch=0, base_sequence=10
    )
    assert append(partition, following).base_offset == 10
    assert [read_header(b).compression for b in stored_batches(partition)] == [CompressionType.ZSTD] * 2


def test_producer_keeps_the_batch_as_sent(tmp_path: pathlib.Path) -> None:
    partition = topic_partition(tmp_path / "t-0")  # compression.type=producer, the default
    sent = produced(CompressionType.GZIP)
    append(partition, sent)
    (stored,) = stored_batches(partition)
    assert read_header(stored).compression == CompressionType.GZIP
    assert stored[HEADER_SIZE:] == sent[HEADER_SIZE:]
    assert read_header(stored).crc == read_header(sent).crc


def test_a_batch_already_in_the_topic_codec_is_not_touched(tmp_path: pathlib.Path) -> None:
    partition = topic_partition(tmp_path / "t-0", compression_type="zstd", compression_zstd_level=19)
    sent = produced(CompressionType.ZSTD)
    append(partition, sent)
    (stored,) = stored_batches(partition)
    assert stored[HEADER_SIZE:] == sent[HEADER_SIZE:]
    assert read_header(stored).crc == read_header(sent).crc


@pytest.mark.parametrize(
    ("topic_codec", "expected"),
    [
        ("uncompressed", CompressionType.NONE),
        ("gzip", CompressionType.GZIP),
        ("snappy", CompressionType.SNAPPY),
        ("lz4", CompressionType.LZ4),
    ],
)
def test_each_topic_codec(tmp_path: pathlib.Path, topic_codec: str, expected: CompressionType) -> None:
    partition = topic_partition(tmp_path / "t-0", compression_type=topic_codec)
    source = CompressionType.ZSTD if expected != CompressionType.ZSTD else CompressionType.GZIP
    sent = produced(source)
    append(partition, sent)
    (stored,) = stored_batches(partition)
    assert read_header(stored).compression == expected
    assert decoded(stored) == decoded(sent)


def test_log_append_time_topic_stamps_the_recompressed_batch(tmp_path: pathlib.Path) -> None:
    partition = topic_partition(
        tmp_path / "t-0", compression_type="lz4", message_timestamp_type="LogAppendTime"
    )
    result = append(partition, produced(CompressionType.GZIP))
    assert result.log_append_time_ms == NOW
    (stored,) = stored_batches(partition)
    header = read_header(stored)
    assert header.compression == CompressionType.LZ4 and header.is_log_append_time
    assert {r.timestamp for r in iter_records(stored)} == {NOW}


def error_of(partition: Partition, data: bytes) -> ErrorCode:
    with pytest.raises(KafkaError) as caught:
        append(partition, data)
    assert partition.log_end_offset == 0
    return caught.value.code


def test_a_corrupt_batch_is_not_recompressed(tmp_path: pathlib.Path) -> None:
    partition = topic_partition(tmp_path / "t-0", compression_type="zstd")
    sent = bytearray(produced(CompressionType.GZIP))
    sent[-1] ^= 0xFF
    assert error_of(partition, bytes(sent)) == ErrorCode.CORRUPT_MESSAGE


def test_records_with_wrong_offset_deltas_are_invalid(tmp_path: pathlib.Path) -> None:
    partition = topic_partition(tmp_path / "t-0", compression_type="zstd")
    two = records(2)
    payload = encode_record(two[0], 0, two[0].timestamp) + encode_record(two[1], 3, two[0].timestamp)
    sent = build_batch(two, compression=CompressionType.GZIP, compress=lambda _: gzip.compress(payload))
    assert error_of(partition, sent) == ErrorCode.INVALID_RECORD


def test_a_batch_too_large_once_recompressed_is_refused(tmp_path: pathlib.Path) -> None:
    sent = build_batch([Record(b"x" * 5000)], compression=CompressionType.GZIP)
    partition = topic_partition(tmp_path / "t-0", compression_type="uncompressed", max_message_bytes=2000)
    assert len(sent) < 2000
    assert error_of(partition, sent) == ErrorCode.MESSAGE_TOO_LARGE
