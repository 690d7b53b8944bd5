"""Record batch v2, example by example: header view, CRC, stamping, building, codecs, reader."""

from __future__ import annotations

import gzip
import struct
import zlib

import cramjam
import lz4.frame
import pytest
import zstandard
from kafka.record.default_records import DefaultRecordBatch
from kafka.record.legacy_records import LegacyRecordBatchBuilder

from protocol.errors import CorruptRecordError, EncodeError, ProtocolError, UnsupportedMagicError
from protocol.records import (
    HEADER_SIZE,
    CompressionType,
    ControlRecordType,
    Record,
    TimestampType,
    build_batch,
    build_end_txn_marker_batch,
    compress,
    decode_varint,
    decode_varlong,
    decompress,
    encode_varint,
    iter_all_records,
    iter_batches,
    iter_records,
    parse_control_record_key,
    parse_end_txn_marker,
    read_header,
    rewrite_crc,
    stamp_base_offset,
    stamp_log_append_time,
    stamp_partition_leader_epoch,
    validate_message_set,
    verify_batch,
)
from protocol.records.control import encode_control_record_key
from tests.protocol.records_support import raw_batch, raw_record, with_new_crc, zigzag

# A batch whose every header field has a distinct, recognisable value.
HAND_RECORDS = raw_record(0, 0, b"k0", b"v0", [(b"h", b"x")]) + raw_record(1, 7, None, b"", [(b"n", None)])
HAND_BATCH = raw_batch(
    HAND_RECORDS,
    count=2,
    base_offset=0x0102030405,
    leader_epoch=17,
    attributes=0x10,
    base_timestamp=1_700_000_000_000,
    max_timestamp=1_700_000_000_007,
    producer_id=4242,
    producer_epoch=3,
    base_sequence=99,
)


def _legacy_message_set(magic: int) -> bytes:
    builder = LegacyRecordBatchBuilder(magic=magic, compression_type=0, batch_size=1 << 16)
    builder.append(0, timestamp=1000 if magic else None, key=b"k", value=b"v")
    builder.append(1, timestamp=1001 if magic else None, key=None, value=b"w")
    return bytes(builder.build())


# ----------------------------------------------------------------------------------------- header view


def test_header_view_reads_every_field() -> None:
    header = read_header(HAND_BATCH)
    assert header.base_offset == 0x0102030405
    assert header.batch_length == len(HAND_BATCH) - 12
    assert header.partition_leader_epoch == 17
    assert header.magic == 2
    assert header.crc == struct.unpack_from(">I", HAND_BATCH, 17)[0]
    assert header.attributes == 0x10
    assert header.last_offset_delta == 1
    assert header.base_timestamp == 1_700_000_000_000
    assert header.max_timestamp == 1_700_000_000_007
    assert header.producer_id == 4242
    assert header.producer_epoch == 3
    assert header.base_sequence == 99
    assert header.records_count == 2


def test_header_view_derived_properties() -> None:
    header = read_header(HAND_BATCH)
    assert header.size == len(HAND_BATCH)
    assert header.last_offset == 0x0102030406
    assert header.next_offset == 0x0102030407
    assert header.compression == CompressionType.NONE
    assert header.is_transactional
    assert not header.is_control
    assert not header.is_log_append_time
    assert header.timestamp_type == TimestampType.CREATE_TIME
    assert not header.has_delete_horizon
    assert header.has_producer_id
    assert header.last_sequence == 100


@pytest.mark.parametrize(
    ("attributes", "codec", "log_append", "transactional", "control", "horizon"),
    [
        (0x01, 1, False, False, False, False),
        (0x04, 4, False, False, False, False),
        (0x0B, 3, True, False, False, False),
        (0x30, 0, False, True, True, False),
        (0x42, 2, False, False, False, True),
    ],
)
def test_attribute_bits(
    attributes: int, codec: int, log_append: bool, transactional: bool, control: bool, horizon: bool
) -> None:
    header = read_header(raw_batch(b"", count=0, attributes=attributes))
    assert header.compression == codec
    assert header.is_log_append_time is log_append
    assert header.is_transactional is transactional
    assert header.is_control is control
    assert header.has_delete_horizon is horizon


def test_last_sequence_wraps_and_tracks_absence() -> None:
    assert read_header(raw_batch(b"", count=3, base_sequence=2**31 - 2)).last_sequence == 0
    assert read_header(raw_batch(b"", count=3)).last_sequence == -1


def test_header_at_an_offset_inside_a_larger_buffer() -> None:
    buf = b"\xee" * 5 + HAND_BATCH
    assert read_header(buf, 5) == read_header(HAND_BATCH)
    assert verify_batch(buf, 5) == read_header(HAND_BATCH)


def test_builder_matches_the_hand_built_batch_byte_for_byte() -> None:
    built = build_batch(
        [
            Record(key=b"k0", value=b"v0", headers=[("h", b"x")], timestamp=1_700_000_000_000),
            Record(key=None, value=b"", headers=[("n", None)], timestamp=1_700_000_000_007),
        ],
        base_offset=0x0102030405,
        partition_leader_epoch=17,
        producer_id=4242,
        producer_epoch=3,
        base_sequence=99,
        is_transactional=True,
    )
    assert built == HAND_BATCH


@pytest.mark.parametrize("size", [0, 11, 16, 17, 60])
def test_short_header_is_corrupt(size: int) -> None:
    with pytest.raises(CorruptRecordError):
        read_header(HAND_BATCH[:size])


def test_impossible_header_values_are_corrupt() -> None:
    small = bytearray(HAND_BATCH)
    struct.pack_into(">i", small, 8, 48)
    with pytest.raises(CorruptRecordError, match="below the minimum"):
        read_header(small)
    with pytest.raises(CorruptRecordError, match="negative"):
        read_header(raw_batch(b"", count=-1, last_offset_delta=0))
    with pytest.raises(CorruptRecordError, match="negative"):
        read_header(raw_batch(b"", count=0, last_offset_delta=-1))


# ------------------------------------------------------------------------------------------------- CRC


def test_verify_batch_accepts_a_valid_batch() -> None:
    assert verify_batch(HAND_BATCH) == read_header(HAND_BATCH)


def test_any_flipped_bit_in_the_crc_range_is_detected() -> None:
    for position in range(21, len(HAND_BATCH)):
        for bit in (0x01, 0x80):
            damaged = bytearray(HAND_BATCH)
            damaged[position] ^= bit
            with pytest.raises(CorruptRecordError):  # the CRC, or a header sanity check first
                verify_batch(damaged)


def test_damaged_crc_field_is_detected() -> None:
    for position in range(17, 21):
        damaged = bytearray(HAND_BATCH)
        damaged[position] ^= 0xFF
        with pytest.raises(CorruptRecordError, match="CRC32C"):
            verify_batch(damaged)


def test_fields_before_the_crc_are_not_covered() -> None:
    """BaseOffset and PartitionLeaderEpoch are outside the CRC: that is what makes stamping free."""
    damaged = bytearray(HAND_BATCH)
    for position in (*range(8), *range(12, 16)):
        damaged[position] ^= 0x5A
    verify_batch(damaged)


def test_truncated_batch_fails_verification() -> None:
    with pytest.raises(CorruptRecordError, match="declares"):
        verify_batch(HAND_BATCH[:-1])


# -------------------------------------------------------------------------------------------- stamping


@pytest.mark.parametrize("as_view", [False, True])
def test_stamping_offset_and_epoch_keeps_the_crc(as_view: bool) -> None:
    buf = bytearray(b"\x00" * 3 + HAND_BATCH)
    target = memoryview(buf) if as_view else buf
    stamp_base_offset(target, 3, 123_456_789_012)
    stamp_partition_leader_epoch(target, 3, 41)
    header = verify_batch(buf, 3)
    assert header.base_offset == 123_456_789_012
    assert header.partition_leader_epoch == 41
    assert header.crc == read_header(HAND_BATCH).crc
    assert buf[3 + 21 :] == HAND_BATCH[21:]


def test_log_append_time_rewrite_sets_bit_max_timestamp_and_crc() -> None:
    buf = bytearray(HAND_BATCH)
    stamp_log_append_time(buf, 0, 1_800_000_000_000)
    header = verify_batch(buf)
    assert header.is_log_append_time
    assert header.timestamp_type == TimestampType.LOG_APPEND_TIME
    assert header.max_timestamp == 1_800_000_000_000
    assert header.attributes == 0x10 | 0x08
    assert header.base_timestamp == 1_700_000_000_000
    assert [r.timestamp for r in iter_records(bytes(buf))] == [1_800_000_000_000] * 2
    oracle = DefaultRecordBatch(bytes(buf))
    assert oracle.validate_crc()
    assert [(r.timestamp, r.timestamp_type) for r in oracle] == [(1_800_000_000_000, 1)] * 2


def test_log_append_time_rewrite_is_a_no_op_when_already_stamped() -> None:
    buf = bytearray(HAND_BATCH)
    stamp_log_append_time(buf, 0, 5)
    before = bytes(buf)
    view = memoryview(buf)
    stamp_log_append_time(view, 0, 5)
    assert bytes(buf) == before


def test_rewrite_crc_after_editing_a_covered_field() -> None:
    buf = bytearray(b"\xaa" * 4 + HAND_BATCH)
    struct.pack_into(">q", buf, 4 + 43, 777)  # ProducerId
    with pytest.raises(CorruptRecordError):
        verify_batch(buf, 4)
    rewrite_crc(buf, 4)
    assert verify_batch(buf, 4).producer_id == 777


# ---------------------------------------------------------------------------------------- iter_batches


def _three_batches() -> list[bytes]:
    return [
        build_batch([Record(b"a")], base_offset=0),
        build_batch([Record(b"b" * 100, b"k")] * 3, base_offset=1, compression=CompressionType.GZIP),
        build_batch([], base_offset=4),
    ]


def test_iter_batches_walks_a_concatenation() -> None:
    batches = _three_batches()
    buf = b"".join(batches)
    found = list(iter_batches(buf))
    positions = [0, len(batches[0]), len(batches[0]) + len(batches[1])]
    assert [pos for pos, _ in found] == positions
    assert [h.base_offset for _, h in found] == [0, 1, 4]
    assert list(iter_batches(buf, positions[1])) == found[1:]


def test_iter_batches_stops_quietly_at_a_partial_tail() -> None:
    batches = _three_batches()
    buf = b"".join(batches)
    ends = [len(batches[0]), len(batches[0]) + len(batches[1]), len(buf)]
    for cut in range(len(buf) + 1):
        complete = sum(1 for end in ends if end <= cut)
        assert len(list(iter_batches(buf[:cut]))) == complete, cut


def test_iter_batches_rejects_an_impossible_length() -> None:
    buf = bytearray(HAND_BATCH)
    struct.pack_into(">i", buf, 8, -5)
    with pytest.raises(CorruptRecordError):
        list(iter_batches(buf))
    with pytest.raises(CorruptRecordError):
        list(iter_batches(bytes(buf[:12])))


# -------------------------------------------------------------------------------- validate_message_set


def test_validate_message_set_returns_every_header() -> None:
    batches = _three_batches()
    headers = validate_message_set(b"".join(batches))
    assert headers == [read_header(b) for b in batches]
    assert validate_message_set(b"") == []


def test_validate_message_set_requires_whole_batches() -> None:
    buf = b"".join(_three_batches())
    for cut in (1, 12, 60, len(buf) - 1):
        with pytest.raises(CorruptRecordError):
            validate_message_set(buf[:cut])
    with pytest.raises(CorruptRecordError):
        validate_message_set(buf + b"\x00" * 3)


def test_validate_message_set_checks_every_crc() -> None:
    first, second, third = _three_batches()
    damaged = bytearray(second)
    damaged[-1] ^= 1
    with pytest.raises(CorruptRecordError, match="CRC32C"):
        validate_message_set(first + bytes(damaged) + third)


def test_validate_message_set_rejects_unknown_codecs() -> None:
    with pytest.raises(CorruptRecordError, match="codec 5"):
        validate_message_set(raw_batch(b"", count=0, attributes=5))


# ---------------------------------------------------------------------------------------- legacy magic


@pytest.mark.parametrize("magic", [0, 1])
def test_legacy_message_sets_are_rejected_everywhere(magic: int) -> None:
    legacy = _legacy_message_set(magic)
    entry_points = [
        lambda: read_header(legacy),
        lambda: verify_batch(legacy),
        lambda: list(iter_batches(legacy)),
        lambda: validate_message_set(legacy),
        lambda: list(iter_records(legacy)),
        lambda: list(iter_all_records(legacy)),
        lambda: validate_message_set(HAND_BATCH + legacy),
        lambda: list(iter_batches(HAND_BATCH + legacy[:20])),
    ]
    for call in entry_points:
        with pytest.raises(UnsupportedMagicError, match=rf"magic {magic}\b.*v2"):
            call()


def test_unsupported_magic_is_a_protocol_error() -> None:
    assert issubclass(UnsupportedMagicError, ProtocolError)


# --------------------------------------------------------------------------------------------- builder


def test_build_batch_compression_keyword_sets_codec_and_compresses() -> None:
    records = [Record(b"value" * 50, b"key", timestamp=10 + i) for i in range(20)]
    plain = build_batch(records)
    for codec in CompressionType:
        batch = build_batch(records, compression=codec)
        header = verify_batch(batch)
        assert header.compression == codec
        assert header.records_count == 20
        if codec:
            assert len(batch) < len(plain)
        assert [r.value for r in iter_records(batch)] == [r.value for r in records]


def test_build_batch_codec_from_attributes_or_name() -> None:
    records = [Record(b"x" * 200)]
    from_attributes = build_batch(records, attributes=CompressionType.ZSTD)
    assert from_attributes == build_batch(records, compression=CompressionType.ZSTD)
    assert from_attributes == build_batch(
        records, compression=CompressionType.from_name("zstd"), attributes=4
    )
    with pytest.raises(EncodeError, match="contradicts"):
        build_batch(records, compression=CompressionType.GZIP, attributes=CompressionType.LZ4)
    with pytest.raises(EncodeError, match="unknown compression"):
        build_batch(records, compression=6)


def test_build_batch_custom_compressor_is_still_honoured() -> None:
    batch = build_batch(
        [Record(b"abc")], attributes=CompressionType.GZIP, compress=lambda d: gzip.compress(d)
    )
    assert [r.value for r in iter_records(batch)] == [b"abc"]


def test_build_batch_flags() -> None:
    header = read_header(
        build_batch(
            [Record(b"v")],
            timestamp_type=TimestampType.LOG_APPEND_TIME,
            is_transactional=True,
            is_control=True,
            compression=CompressionType.LZ4,
        )
    )
    assert header.attributes == 0x08 | 0x10 | 0x20 | 0x03
    with pytest.raises(EncodeError, match="timestamp type"):
        build_batch([Record(b"v")], timestamp_type=2)


@pytest.mark.parametrize("codec", list(CompressionType))
def test_empty_batch_layout(codec: CompressionType) -> None:
    """Kafka only ever writes empty batches from compaction: a bare header, codec bits kept."""
    batch = build_batch([], compression=codec)
    header = verify_batch(batch)
    assert (header.records_count, header.last_offset_delta, header.base_timestamp) == (0, 0, -1)
    assert (header.size, header.compression) == (HEADER_SIZE, codec)
    assert list(iter_records(batch)) == []


def test_out_of_range_fields_are_encode_errors() -> None:
    with pytest.raises(EncodeError):
        build_batch([Record(b"v")], producer_epoch=1 << 20)


# ---------------------------------------------------------------------------------------------- codecs


@pytest.mark.parametrize(
    ("name", "codec"),
    [
        ("none", CompressionType.NONE),
        ("uncompressed", CompressionType.NONE),
        ("gzip", CompressionType.GZIP),
        ("Snappy", CompressionType.SNAPPY),
        ("LZ4", CompressionType.LZ4),
        (" zstd ", CompressionType.ZSTD),
    ],
)
def test_compression_type_from_name(name: str, codec: CompressionType) -> None:
    assert CompressionType.from_name(name) is codec


@pytest.mark.parametrize("name", ["producer", "brotli", ""])
def test_compression_type_from_unknown_name(name: str) -> None:
    with pytest.raises(ValueError, match="unknown compression type"):
        CompressionType.from_name(name)


PAYLOAD = bytes(range(256)) * 40 + b"z" * 100_000


def test_gzip_framing() -> None:
    data = compress(CompressionType.GZIP, PAYLOAD)
    assert data[:2] == b"\x1f\x8b"
    assert gzip.decompress(data) == PAYLOAD
    two_members = data + gzip.compress(b"tail")
    assert decompress(CompressionType.GZIP, two_members, 1 << 20) == PAYLOAD + b"tail"


def test_snappy_uses_xerial_framing_with_32k_blocks() -> None:
    data = compress(CompressionType.SNAPPY, PAYLOAD)
    assert data[:16] == b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
    pos, blocks = 16, []
    while pos < len(data):
        (length,) = struct.unpack_from(">i", data, pos)
        blocks.append(bytes(cramjam.snappy.decompress_raw(data[pos + 4 : pos + 4 + length])))
        pos += 4 + length
    assert b"".join(blocks) == PAYLOAD
    assert all(len(block) == 32 * 1024 for block in blocks[:-1])


def test_snappy_accepts_raw_blocks_and_concatenated_xerial_streams() -> None:
    raw = bytes(cramjam.snappy.compress_raw(PAYLOAD))
    assert decompress(CompressionType.SNAPPY, raw, 1 << 20) == PAYLOAD
    framed = compress(CompressionType.SNAPPY, b"abc")
    assert decompress(CompressionType.SNAPPY, framed + framed, 100) == b"abcabc"
    little_endian_header = framed[:8] + struct.pack("<ii", 1, 1) + framed[16:]
    assert decompress(CompressionType.SNAPPY, little_endian_header, 100) == b"abc"


def test_snappy_empty_stream_is_empty_both_ways() -> None:
    """xerial writes its header with the first block, and reads an empty input as empty."""
    assert compress(CompressionType.SNAPPY, b"") == b""
    assert decompress(CompressionType.SNAPPY, b"", 0) == b""
    assert decompress(CompressionType.SNAPPY, compress(CompressionType.SNAPPY, b"x")[:16], 0) == b""


def test_lz4_uses_independent_64k_blocks_without_content_size() -> None:
    data = compress(CompressionType.LZ4, PAYLOAD)
    assert data[:4] == b"\x04\x22\x4d\x18"
    flags, block_descriptor = data[4], data[5]
    assert flags >> 6 == 0b01  # version
    assert flags & 0x20  # block independence
    assert not flags & 0x08  # no content size
    assert block_descriptor == 0x40  # 64 KiB maximum block size
    assert lz4.frame.decompress(data) == PAYLOAD


def test_lz4_levels_select_the_compressor_kafka_uses() -> None:
    """Kafka's Lz4BlockOutputStream: lz4's fast compressor for the default level, 9, and LZ4 HC at the
    given level for every other one (1 and 2 become HC 3, the lowest of lz4's frame API; HC stops at 12)."""
    records = b"".join(b"record %d value %d " % (i, i * 7919 % 1000) for i in range(20_000))

    def frame(level: int) -> bytes:
        return lz4.frame.compress(
            records,
            compression_level=level,
            block_size=lz4.frame.BLOCKSIZE_MAX64KB,
            block_linked=False,
            content_checksum=False,
            store_size=False,
        )

    fast = frame(0)
    assert compress(CompressionType.LZ4, records) == fast  # no level: the Java producer's default
    assert compress(CompressionType.LZ4, records, 9) == fast
    expected = {1: 3, 2: 3, 3: 3, 8: 8, 10: 10, 12: 12, 13: 12, 17: 12}
    for level, hc_level in expected.items():
        compressed = compress(CompressionType.LZ4, records, level)
        assert compressed == frame(hc_level), level
        assert len(compressed) < len(fast), level
        assert decompress(CompressionType.LZ4, compressed, len(records)) == records


def test_zstd_streaming_frames_without_content_size() -> None:
    writer = zstandard.ZstdCompressor(write_content_size=False).compressobj()
    streamed = writer.compress(PAYLOAD) + writer.flush()
    assert zstandard.get_frame_parameters(streamed).content_size == zstandard.CONTENTSIZE_UNKNOWN
    assert decompress(CompressionType.ZSTD, streamed, len(PAYLOAD)) == PAYLOAD
    assert decompress(CompressionType.ZSTD, streamed + streamed, 2 * len(PAYLOAD)) == PAYLOAD * 2
    assert zstandard.ZstdDecompressor().decompress(compress(CompressionType.ZSTD, PAYLOAD)) == PAYLOAD


@pytest.mark.parametrize("codec", list(CompressionType))
def test_decompression_limit_is_exact(codec: CompressionType) -> None:
    data = compress(codec, PAYLOAD)
    assert decompress(codec, data, len(PAYLOAD)) == PAYLOAD
    with pytest.raises(CorruptRecordError, match="exceeds the limit"):
        decompress(codec, data, len(PAYLOAD) - 1)


@pytest.mark.parametrize("codec", [c for c in CompressionType if c])
def test_decompression_bomb_is_refused_early(codec: CompressionType) -> None:
    """128 MiB of zeros compress to a few hundred KiB at most; a 1 MiB limit must stop them."""
    bomb = compress(codec, bytes(128 << 20))
    with pytest.raises(CorruptRecordError, match="exceeds the limit of 1048576"):
        decompress(codec, bomb, 1 << 20)


@pytest.mark.parametrize("codec", [c for c in CompressionType if c])
def test_truncated_or_garbage_compressed_data_is_corrupt(codec: CompressionType) -> None:
    data = compress(codec, PAYLOAD)
    empty_is_valid = codec == CompressionType.SNAPPY  # see test_snappy_empty_stream_is_empty_both_ways
    for cut in (*((0,) if not empty_is_valid else ()), 1, 5, 17, len(data) // 2, len(data) - 1):
        with pytest.raises(CorruptRecordError):
            decompress(codec, data[:cut], 1 << 20)
    with pytest.raises(CorruptRecordError):
        decompress(codec, data + b"\x00junk", 1 << 20)


def test_unknown_codec_ids() -> None:
    for codec in (5, 6, 7):
        with pytest.raises(CorruptRecordError, match="unknown compression codec"):
            decompress(codec, b"", 10)
        with pytest.raises(EncodeError):
            compress(codec, b"")


def test_codec_errors_from_libraries_are_wrapped() -> None:
    with pytest.raises(CorruptRecordError) as caught:
        decompress(CompressionType.GZIP, b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xffgarbage!", 100)
    assert isinstance(caught.value.__cause__, zlib.error)


# --------------------------------------------------------------------------------------------- varints


VARINT_CASES = [
    (0, b"\x00"),
    (-1, b"\x01"),
    (1, b"\x02"),
    (63, b"\x7e"),
    (-64, b"\x7f"),
    (64, b"\x80\x01"),
    (2**31 - 1, b"\xfe\xff\xff\xff\x0f"),
    (-(2**31), b"\xff\xff\xff\xff\x0f"),
]


@pytest.mark.parametrize(("value", "encoded"), VARINT_CASES)
def test_varint_known_encodings(value: int, encoded: bytes) -> None:
    out = bytearray()
    encode_varint(value, out)
    assert bytes(out) == encoded
    assert decode_varint(b"\xaa" + encoded + b"\xbb", 1) == (value, 1 + len(encoded))
    assert decode_varlong(encoded, 0) == (value, len(encoded))


def test_varlong_extremes() -> None:
    for value in (2**63 - 1, -(2**63)):
        out = bytearray()
        encode_varint(value, out)
        assert len(out) == 10
        assert decode_varlong(bytes(out), 0) == (value, 10)


def test_malformed_varints() -> None:
    with pytest.raises(CorruptRecordError, match="longer than 5"):
        decode_varint(b"\x80\x80\x80\x80\x80\x00", 0)
    with pytest.raises(CorruptRecordError, match="longer than 10"):
        decode_varlong(b"\x80" * 10 + b"\x00", 0)
    with pytest.raises(CorruptRecordError, match="past the end"):
        decode_varint(b"\x80\x80", 0)
    with pytest.raises(CorruptRecordError, match="past the end"):
        decode_varint(b"", 0)
    with pytest.raises(CorruptRecordError, match="32 bits"):
        decode_varint(b"\xff\xff\xff\xff\x1f", 0)
    with pytest.raises(CorruptRecordError, match="64 bits"):
        decode_varlong(b"\xff" * 9 + b"\x02", 0)


# ---------------------------------------------------------------------------------------------- reader


def test_reader_decodes_the_hand_built_batch() -> None:
    first, second = iter_records(HAND_BATCH)
    assert (first.offset, first.timestamp, first.key, first.value, first.headers) == (
        0x0102030405,
        1_700_000_000_000,
        b"k0",
        b"v0",
        [("h", b"x")],
    )
    assert (second.offset, second.timestamp, second.key, second.value, second.headers) == (
        0x0102030406,
        1_700_000_000_007,
        None,
        b"",
        [("n", None)],
    )
    assert (second.producer_id, second.producer_epoch, second.sequence, second.leader_epoch) == (
        4242,
        3,
        100,
        17,
    )
    assert second.is_transactional and not second.is_control
    assert second.timestamp_type is TimestampType.CREATE_TIME


def test_reader_record_sequence_wraps() -> None:
    batch = build_batch([Record(b"a")] * 3, producer_id=1, producer_epoch=0, base_sequence=2**31 - 2)
    assert [r.sequence for r in iter_records(batch)] == [2**31 - 2, 2**31 - 1, 0]
    assert {r.sequence for r in iter_records(build_batch([Record(b"a")] * 2))} == {-1}


def test_reader_offset_gaps_from_compaction() -> None:
    records = raw_record(0, 0, b"a", b"1") + raw_record(5, 1, b"b", b"2")
    decoded = list(iter_records(raw_batch(records, count=2, base_offset=100, last_offset_delta=9)))
    assert [r.offset for r in decoded] == [100, 105]


@pytest.mark.parametrize("codec", list(CompressionType))
def test_empty_batches_keep_their_codec_bits(codec: CompressionType) -> None:
    assert list(iter_records(raw_batch(b"", count=0, attributes=codec))) == []


def test_reader_rejects_extra_bytes_after_the_batch() -> None:
    with pytest.raises(CorruptRecordError, match="buffer holds"):
        list(iter_records(HAND_BATCH + b"\x00"))


def test_reader_checks_the_crc_unless_told_not_to() -> None:
    damaged = bytearray(HAND_BATCH)
    damaged[27] ^= 1  # BaseTimestamp
    with pytest.raises(CorruptRecordError, match="CRC32C"):
        list(iter_records(bytes(damaged)))
    assert len(list(iter_records(bytes(damaged), verify_crc=False))) == 2


def test_iter_all_records_skips_a_partial_tail() -> None:
    batches = _three_batches()
    buf = b"".join(batches) + batches[1][:30]
    assert [r.offset for r in iter_all_records(buf)] == [0, 1, 2, 3]


GOOD = raw_record(0, 0, b"k", b"v")


def _framed(body: bytes) -> bytes:
    """A record body with its correct length prefix, so only the body's own fault shows."""
    return zigzag(len(body)) + body


@pytest.mark.parametrize(
    ("stream", "count", "message"),
    [
        (GOOD, 2, "declares 2 records"),
        (GOOD * 2 + b"\x00" * 7, 3, "record at position .* is empty"),
        (GOOD + GOOD, 1, "bytes left"),
        (GOOD + b"\x00", 1, "bytes left"),
        (b"\x00", 0, "bytes left"),
        (b"\x7f" + GOOD[1:], 1, "record length -64"),
        (b"\x64" + GOOD[1:], 1, "record length 50"),
        (GOOD[:-1] + b"\x02", 1, "header count 1"),
        (_framed(b"\x00\x00\x00\x03kv\x02v\x00"), 1, "key length -2"),
        (_framed(b"\x00\x00\x00\x10kv\x02v\x00"), 1, "key length 8"),
        (_framed(b"\x00\x00\x00\x02k\x06v\x00"), 1, "value length 3"),
        (_framed(b"\x00\x00\x00\x02k\x02v\x02\x01\x00"), 1, "header key at position .* is null"),
        (_framed(b"\x00\x00\x00\x02k\x02v\x02\x02\xff\x01"), 1, "UTF-8"),
        (_framed(b"\x00\x00\x00\x02k\x02v\x01\x00\x00"), 1, "header count -1"),
        (_framed(b"\x00\x00\x00\x02k\x02v\x00\x00\x00"), 1, "bytes before its declared length"),
        (_framed(b"\x00" + b"\xff" * 10 + b"\x01\x00\x00\x00\x00"), 1, "longer than 10"),
        (_framed(b"\x00\x00" + b"\xff" * 5 + b"\x7f\x00\x00\x00"), 1, "longer than 5"),
        (_framed(b"\x00\x00\x80\x80") + b"\x80\x80\x00\x00\x00", 1, "past the end of its record"),
        (b"\xff\xff\xff\xff\xff\x01\x00", 1, "longer than 5"),
        (b"\x00\x00\x00\x00\x00\x00\x00" * 2, 3, "declares 3 records but holds only 14 bytes"),
    ],
)
def test_malformed_records(stream: bytes, count: int, message: str) -> None:
    with pytest.raises(CorruptRecordError, match=message):
        list(iter_records(raw_batch(stream, count=count)))


def test_record_stream_must_match_records_count_inside_compressed_batches() -> None:
    good = build_batch([Record(b"v")] * 3, compression=CompressionType.GZIP)
    fewer = bytearray(good)
    struct.pack_into(">i", fewer, 57, 2)
    with pytest.raises(CorruptRecordError, match="bytes left"):
        list(iter_records(with_new_crc(fewer)))
    more = bytearray(good)
    struct.pack_into(">i", more, 57, 4)
    with pytest.raises(CorruptRecordError, match="declares 4 records"):
        list(iter_records(with_new_crc(more)))


def test_garbage_compressed_payload_is_corrupt() -> None:
    for codec in (1, 2, 3, 4):
        with pytest.raises(CorruptRecordError):
            list(iter_records(raw_batch(b"\x00not compressed at all", count=1, attributes=codec)))


def test_reader_decompression_limit() -> None:
    batch = build_batch([Record(b"\x00" * 10_000)], compression=CompressionType.ZSTD)
    assert len(list(iter_records(batch, 20_000))) == 1
    with pytest.raises(CorruptRecordError, match="exceeds the limit of 5000"):
        list(iter_records(batch, 5000))


# ------------------------------------------------------------------------------------- control records


def test_end_txn_marker_batch() -> None:
    batch = build_end_txn_marker_batch(
        commit=False, producer_id=55, producer_epoch=2, coordinator_epoch=9, timestamp=1234, base_offset=70
    )
    header = verify_batch(batch)
    assert header.is_control and header.is_transactional
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (55, 2, -1)
    (record,) = iter_records(batch)
    assert record.control_key() == (0, ControlRecordType.ABORT)
    assert parse_end_txn_marker(record.value) == (0, 9)
    (oracle,) = DefaultRecordBatch(batch)
    assert oracle.abort and (oracle.version, oracle.type) == (0, 0)


def test_control_key_parsing_rules() -> None:
    assert parse_control_record_key(encode_control_record_key(ControlRecordType.COMMIT)).type == 1
    assert parse_control_record_key(b"\x00\x01\x00\x63extra") == (1, 99)  # newer version, unknown type
    for bad in (None, b"", b"\x00\x00\x00", b"\xff\xff\x00\x00"):
        with pytest.raises(CorruptRecordError):
            parse_control_record_key(bad)
    for bad in (None, b"\x00\x00\x00\x00\x00", b"\x80\x00\x00\x00\x00\x00"):
        with pytest.raises(CorruptRecordError):
            parse_end_txn_marker(bad)
