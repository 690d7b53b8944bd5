"""`kipling dump-log`: list the batches of segment files, like Kafka's kafka-dump-log.sh."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from protocol.describe import COMPRESSION_NAMES
from protocol.errors import ProtocolError
from protocol.records.reader import iter_records
from storage.dump import SegmentDump, dump_segment, read_batch_bytes, segment_files


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "dump-log",
        help="print the record batches of a segment file or partition directory",
        description="Print every record batch of a .log segment file, or of all segments of a partition "
        "directory: offsets, partition leader epoch, CRC validity, compression, record count and byte "
        "position. With --verify, exit with status 1 at a corrupt or torn batch and say where it starts. "
        "With --print-records, also print each record's offset, timestamp, key, value and headers.",
    )
    p.add_argument("path", type=Path, help="a .log file or a partition directory (<topic>-<partition>)")
    p.add_argument("--verify", action="store_true", help="fail on a corrupt or torn batch")
    p.add_argument("--print-records", action="store_true", help="decode and print every record")
    p.set_defaults(func=run)


def _print_segment(dump: SegmentDump, print_records: bool) -> None:
    out = sys.stdout
    out.write(f"Dumping {dump.path}\nSize: {dump.size}\n")
    for info in dump.batches:
        h = info.header
        out.write(
            f"baseOffset: {h.base_offset} lastOffset: {h.last_offset} count: {h.records_count} "
            f"partitionLeaderEpoch: {h.partition_leader_epoch} position: {info.position} size: {h.size} "
            f"compression: {COMPRESSION_NAMES.get(h.compression, h.compression)} "
            f"producerId: {h.producer_id} baseSequence: {h.base_sequence} "
            f"isTransactional: {h.is_transactional} isControl: {h.is_control} "
            f"maxTimestamp: {h.max_timestamp} crc: {h.crc} crcValid: {info.crc_valid}\n"
        )
        if print_records and info.crc_valid:
            _print_records(read_batch_bytes(dump.path, info))
    if dump.problem is not None:
        out.write(f"PROBLEM at position {dump.problem.position}: {dump.problem.reason}\n")


def _print_records(batch: bytes) -> None:
    try:
        for r in iter_records(batch):
            headers = ", ".join(f"{k}={v!r}" for k, v in r.headers)
            sys.stdout.write(
                f"| offset: {r.offset} timestamp: {r.timestamp} key: {r.key!r} value: {r.value!r} "
                f"headers: [{headers}]\n"
            )
    except ProtocolError as exc:
        sys.stdout.write(f"| cannot decode records: {exc}\n")


def run(args: argparse.Namespace) -> int:
    files = segment_files(args.path)
    if not files or not all(f.is_file() for f in files):
        sys.stderr.write(f"dump-log: no segment files at {args.path}\n")
        return 2
    failed = False
    for path in files:
        dump = dump_segment(path)
        _print_segment(dump, args.print_records)
        failed = failed or dump.problem is not None
    if args.verify and failed:
        sys.stderr.write("dump-log: verification failed\n")
        return 1
    return 0
