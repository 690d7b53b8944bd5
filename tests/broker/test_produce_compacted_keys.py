"""Keyless records on a compacted topic, as Kafka's LogValidator.validateKey refuses them: the whole
batch is INVALID_RECORD, with one record error per keyless record and Kafka's partition message; the
other partitions of the request are appended. Found by librdkafka's test 0011 (produce_batch)."""

from __future__ import annotations

import pathlib

import pytest

from broker.produce.validation import (
    INVALID_TIMESTAMP_MESSAGE,
    NO_KEY_MESSAGE,
    RecordError,
    RecordValidationError,
    invalid_record_message,
)
from broker.replication.partition import Partition
from protocol.error_codes import ErrorCode, KafkaError
from protocol.records import CompressionType, Record, build_batch, iter_records
from storage.clock import FakeClock
from storage.config import LogConfig
from tests.broker.local_topics import LocalTopics
from tests.broker.test_handlers_produce import NONE, call, partition_results, produce_body, produce_env
from tests.broker.test_partition import NOW, consumer_read, open_partition

HOUR = 3_600_000
NO_KEY = f"{NO_KEY_MESSAGE} t-0"


def compacted(directory: pathlib.Path, policy: tuple[str, ...] = ("compact",), **config: object) -> Partition:
    log_config = LogConfig(cleanup_policy=policy, **config)  # type: ignore[arg-type]
    return open_partition(directory, FakeClock(NOW), config=log_config)


def batch(*keys: bytes | None, compression: CompressionType = CompressionType.NONE) -> bytes:
    records = [Record(b"value-%d" % i, key=key, timestamp=NOW) for i, key in enumerate(keys)]
    return build_batch(records, compression=compression)


def refusal(partition: Partition, data: bytes) -> KafkaError:
    end = partition.log_end_offset
    with pytest.raises(KafkaError) as caught:
        partition.append_records(data, required_acks=1, now_ms=NOW)
    assert partition.log_end_offset == end  # nothing of the batch was appended
    return caught.value


@pytest.mark.parametrize("codec", [CompressionType.NONE, CompressionType.LZ4, CompressionType.ZSTD])
def test_a_keyless_record_refuses_the_batch(tmp_path: pathlib.Path, codec: CompressionType) -> None:
    partition = compacted(tmp_path / "t-0")
    error = refusal(partition, batch(b"a", None, b"c", None, compression=codec))
    assert isinstance(error, RecordValidationError)
    assert error.code == ErrorCode.INVALID_RECORD and int(error.code) == 87
    assert error.record_errors == (RecordError(1, NO_KEY), RecordError(3, NO_KEY))
    assert error.message == (
        "One or more records have been rejected due to 2 record errors in total, and only showing the "
        f"first three errors at most: [RecordError(batchIndex=1, message='{NO_KEY}'), "
        f"RecordError(batchIndex=3, message='{NO_KEY}')]"
    )


def test_the_message_shows_three_errors_of_many(tmp_path: pathlib.Path) -> None:
    partition = compacted(tmp_path / "t-0")
    error = refusal(partition, batch(*[None] * 5))
    assert [e.batch_index for e in error.record_errors] == [0, 1, 2, 3, 4]  # type: ignore[attr-defined]
    assert error.message.startswith("One or more records have been rejected due to 5 record errors")
    assert error.message.count("RecordError(") == 3


def test_keyed_records_and_empty_keys_are_accepted(tmp_path: pathlib.Path) -> None:
    """Only a null key is refused: an empty key is a key (Kafka's Record.hasKey)."""
    partition = compacted(tmp_path / "t-0", ("compact", "delete"))
    partition.append_records(batch(b"a", b"", b"c"), required_acks=1, now_ms=NOW)
    read = consumer_read(partition, 0)
    assert read.slice is not None
    assert [r.key for r in iter_records(read.slice.read_bytes())] == [b"a", b"", b"c"]


def test_compact_delete_refuses_keyless_records_too(tmp_path: pathlib.Path) -> None:
    partition = compacted(tmp_path / "t-0", ("delete", "compact"))
    assert refusal(partition, batch(None)).code == ErrorCode.INVALID_RECORD


def test_a_delete_topic_accepts_keyless_records(tmp_path: pathlib.Path) -> None:
    partition = compacted(tmp_path / "t-0", ("delete",))
    partition.append_records(batch(None, None), required_acks=1, now_ms=NOW)
    assert partition.log_end_offset == 2


def test_a_keyless_record_is_not_also_checked_for_its_timestamp(tmp_path: pathlib.Path) -> None:
    """Kafka's validateRecord: the key error is the record's error; any timestamp error in the batch
    makes the batch INVALID_TIMESTAMP, listing every record error."""
    partition = compacted(tmp_path / "t-0")
    late = NOW + 2 * HOUR
    records = [Record(b"v", key=None, timestamp=late), Record(b"v", key=b"k", timestamp=late)]
    error = refusal(partition, build_batch(records))
    assert (error.code, error.message) == (ErrorCode.INVALID_TIMESTAMP, INVALID_TIMESTAMP_MESSAGE)
    assert [e.batch_index for e in error.record_errors] == [0, 1]  # type: ignore[attr-defined]
    assert error.record_errors[0].message == NO_KEY  # type: ignore[attr-defined]
    assert error.record_errors[1].message.startswith(f"Timestamp {late} of message")  # type: ignore[attr-defined]


def test_a_corrupt_batch_stays_corrupt(tmp_path: pathlib.Path) -> None:
    partition = compacted(tmp_path / "t-0")
    sent = bytearray(batch(None))
    sent[-1] ^= 0xFF
    assert refusal(partition, bytes(sent)).code == ErrorCode.CORRUPT_MESSAGE


def test_invalid_record_message_with_a_null_message() -> None:
    message = invalid_record_message([RecordError(0, None)])
    assert message.endswith("[RecordError(batchIndex=0, message=null)]")


@pytest.mark.parametrize("version", [3, 8, 11])
async def test_produce_answers_record_errors(tmp_path: pathlib.Path, version: int) -> None:
    """The refused partition answers INVALID_RECORD (with record_errors and the message from v8);
    the request's other partitions, of the same topic or not, are appended."""
    topics = LocalTopics(1)
    topics.create_topic("orders", 1, 1, {})
    topics.create_topic("table", 2, 1, {"cleanup.policy": "compact"})
    env = produce_env(tmp_path, topics)
    body = produce_body(
        [
            ("table", 0, batch(b"k", None)),
            ("table", 1, batch(b"k")),
            ("orders", 0, batch(None)),
            ("table", 9, batch(b"k")),
        ]
    )
    results = partition_results(await call(env.handler, version, body))
    refused = results[("table", 0)]
    assert (refused.error_code, refused.base_offset) == (ErrorCode.INVALID_RECORD, -1)
    assert results[("table", 1)].error_code == NONE and results[("orders", 0)].error_code == NONE
    unknown = results[("table", 9)]
    assert (unknown.error_code, unknown.log_start_offset) == (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1)
    assert env.replicas.get_partition("table", 0).log_end_offset == 0  # type: ignore[union-attr]
    assert env.replicas.get_partition("table", 1).log_end_offset == 1  # type: ignore[union-attr]
    if version >= 5:
        # Kafka's ReplicaManager answers a RecordValidationException with the partition's log start
        # offset; an unknown partition with -1
        assert refused.log_start_offset == 0
    if version >= 8:
        message = f"{NO_KEY_MESSAGE} table-0"
        assert [(e.batch_index, e.batch_index_error_message) for e in refused.record_errors] == [(1, message)]
        assert refused.error_message == invalid_record_message([RecordError(1, message)])
