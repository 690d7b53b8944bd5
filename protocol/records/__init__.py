"""Record batch v2: header view, CRC32C, stamping, building, compression, record iteration."""

from protocol.errors import CorruptRecordError, ProtocolError, UnsupportedMagicError
from protocol.records.batch import (
    HEADER_SIZE,
    LOG_OVERHEAD,
    RecordBatchHeader,
    TimestampType,
    iter_batches,
    read_header,
    rewrite_crc,
    stamp_base_offset,
    stamp_log_append_time,
    stamp_partition_leader_epoch,
    validate_message_set,
    verify_batch,
)
from protocol.records.builder import Record, build_batch, encode_varint
from protocol.records.compression import CompressionType, compress, decompress
from protocol.records.control import (
    ControlRecordKey,
    ControlRecordType,
    EndTxnMarker,
    build_end_txn_marker_batch,
    parse_control_record_key,
    parse_end_txn_marker,
)
from protocol.records.reader import (
    DEFAULT_MAX_DECOMPRESSED_SIZE,
    DecodedRecord,
    decode_varint,
    decode_varlong,
    iter_all_records,
    iter_records,
)

__all__ = [
    "DEFAULT_MAX_DECOMPRESSED_SIZE",
    "HEADER_SIZE",
    "LOG_OVERHEAD",
    "CompressionType",
    "ControlRecordKey",
    "ControlRecordType",
    "CorruptRecordError",
    "DecodedRecord",
    "EndTxnMarker",
    "ProtocolError",
    "Record",
    "RecordBatchHeader",
    "TimestampType",
    "UnsupportedMagicError",
    "build_batch",
    "build_end_txn_marker_batch",
    "compress",
    "decode_varint",
    "decode_varlong",
    "decompress",
    "encode_varint",
    "iter_all_records",
    "iter_batches",
    "iter_records",
    "parse_control_record_key",
    "parse_end_txn_marker",
    "read_header",
    "rewrite_crc",
    "stamp_base_offset",
    "stamp_log_append_time",
    "stamp_partition_leader_epoch",
    "validate_message_set",
    "verify_batch",
]
