"""recompress_batch: a v2 batch rewritten with another codec keeps its records and header fields."""

from __future__ import annotations

import gzip
import itertools

import pytest

from protocol.errors import CorruptRecordError
from protocol.records import CompressionType, Record, build_batch, iter_records, read_header, verify_batch
from protocol.records.builder import encode_record
from protocol.records.compression import compress, decompress
from protocol.records.recompress import InnerOffsetError, recompress_batch

HEADER_SIZE = 61
RECORDS = [
    Record(
        b"value-%d" % i * (i + 1),
        key=None if i == 3 else b"key-%d" % i,
        headers=[("h", b"%d" % i)],
        timestamp=1000 + i,
    )
    for i in range(20)
]


def produced(codec: CompressionType, **fields: object) -> bytes:
    return build_batch(
        RECORDS,
        compression=codec,
        producer_id=42,
        producer_epoch=3,
        base_sequence=100,
        partition_leader_epoch=5,
        base_offset=7,
        **fields,  # type: ignore[arg-type]
    )


def decoded(batch: bytes) -> list[tuple[object, ...]]:
    return [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in iter_records(batch)]


def unchanged_fields(batch: bytes) -> tuple[object, ...]:
    header = read_header(batch)
    return header._replace(batch_length=0, crc=0, attributes=header.attributes & ~0x07)


@pytest.mark.parametrize(("source", "target"), list(itertools.product(CompressionType, CompressionType)))
def test_every_codec_pair_keeps_records_and_header_fields(
    source: CompressionType, target: CompressionType
) -> None:
    original = produced(source, is_transactional=True)
    rewritten = recompress_batch(original, target)
    header = verify_batch(rewritten)  # the CRC is recomputed
    assert header.compression == target
    assert header.size == len(rewritten)
    assert unchanged_fields(rewritten) == unchanged_fields(original)
    assert header.is_transactional and (header.producer_id, header.producer_epoch, header.base_sequence) == (
        42,
        3,
        100,
    )
    assert decoded(rewritten) == decoded(original)


def test_the_uncompressed_record_stream_is_kept_byte_for_byte() -> None:
    original = produced(CompressionType.NONE)
    rewritten = recompress_batch(original, CompressionType.ZSTD)
    stream = decompress(CompressionType.ZSTD, rewritten[HEADER_SIZE:], 1 << 20)
    assert stream == original[HEADER_SIZE:]
    assert recompress_batch(rewritten, CompressionType.NONE) == original


def test_levels_are_passed_to_the_codec() -> None:
    original = produced(CompressionType.NONE)
    stream = original[HEADER_SIZE:]
    for codec, level in ((CompressionType.GZIP, 1), (CompressionType.ZSTD, 19), (CompressionType.LZ4, 12)):
        rewritten = recompress_batch(original, codec, level=level)
        assert rewritten[HEADER_SIZE:] == compress(codec, stream, level)
    fast = recompress_batch(original, CompressionType.GZIP, level=1)[HEADER_SIZE:]
    default = recompress_batch(original, CompressionType.GZIP, level=-1)[HEADER_SIZE:]
    assert fast == gzip.compress(stream, compresslevel=1, mtime=0)
    assert default == gzip.compress(stream, compresslevel=6, mtime=0)


def test_log_append_time_batch_keeps_its_timestamp_type() -> None:
    original = produced(CompressionType.SNAPPY, timestamp_type=1)
    rewritten = recompress_batch(original, CompressionType.LZ4)
    assert read_header(rewritten).is_log_append_time
    assert decoded(rewritten) == decoded(original)


def test_bytes_after_the_batch_are_ignored() -> None:
    original = produced(CompressionType.GZIP)
    assert recompress_batch(original + b"trailing", CompressionType.ZSTD) == recompress_batch(
        original, CompressionType.ZSTD
    )


def test_a_bad_crc_is_never_re_signed() -> None:
    original = bytearray(produced(CompressionType.GZIP))
    original[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError, match="CRC"):
        recompress_batch(original, CompressionType.ZSTD)


def test_malformed_compressed_data_is_corrupt() -> None:
    original = build_batch(
        RECORDS[:2], compression=CompressionType.GZIP, compress=lambda _: b"not gzip at all"
    )
    with pytest.raises(CorruptRecordError):
        recompress_batch(original, CompressionType.ZSTD)


def test_a_record_count_that_does_not_match_the_stream_is_corrupt() -> None:
    payload = encode_record(RECORDS[0], 0, 1000)  # one record where the header declares two
    original = build_batch(
        RECORDS[:2], compression=CompressionType.GZIP, compress=lambda _: gzip.compress(payload)
    )
    with pytest.raises(CorruptRecordError) as caught:
        recompress_batch(original, CompressionType.ZSTD)
    assert not isinstance(caught.value, InnerOffsetError)


def test_offset_deltas_must_run_from_zero() -> None:
    payload = encode_record(RECORDS[0], 0, 1000) + encode_record(RECORDS[1], 5, 1000)
    original = build_batch(
        RECORDS[:2], compression=CompressionType.GZIP, compress=lambda _: gzip.compress(payload)
    )
    with pytest.raises(InnerOffsetError, match="offset delta 5"):
        recompress_batch(original, CompressionType.ZSTD)
