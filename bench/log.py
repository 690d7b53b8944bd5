"""Append and read throughput of one partition log, with ~1 KiB and ~16 KiB record batches.

What it measures, per batch size, in a fresh temporary directory with Kafka's default flush
settings (no fsync: the data stays in the page cache, as on a broker between flushes):

- **append**: ``PartitionLog.append_as_leader`` of pre-built batches, one batch per call (one
  produce to one partition), ~256 MB in all. Everything the leader does per append is in the
  figure (validation, CRC32C, offset stamping, the write, index upkeep); building the batches is
  not, since producers do that.
- **read, materialized**: one sequential pass over the whole log with
  ``read(offset, max_bytes=1 MiB, max_offset=HW)``, copying each slice's bytes out with
  ``os.pread`` on the slice's file, as the fetch path does when it cannot use ``sendfile``.
- **read, lookup only**: the same pass without the copy: what locating the slices costs by itself
  (index lookup and header walk), the part of a fetch that is Python's.

Rates are in MB/s (10^6 bytes) and batches/s. Run from the repository root: ``python -m
bench.log`` (``--total-mb``, ``--passes`` and ``--dir`` to change the workload or where it runs).
"""

from __future__ import annotations

import argparse
import gc
import logging
import os
import random
import struct
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import structlog

from bench import write_results
from protocol.records import Record, build_batch, read_header, rewrite_crc
from storage.clock import SystemClock
from storage.config import LogConfig
from storage.log import PartitionLog

KIB = 1024
MIB = 1024 * KIB
READ_MAX_BYTES = MIB
"""The per-partition fetch size of Kafka's consumers and followers (max.partition.fetch.bytes)."""
LEADER_EPOCH = 0
BASE_TIMESTAMP = 1_700_000_000_000
TEMPLATE_POOL = 64
"""Distinct record contents per case: enough that no two neighbouring batches are alike."""
_TIMESTAMPS = struct.Struct(">qq")
_BASE_TIMESTAMP_OFFSET = 27
"""BaseTimestamp then MaxTimestamp, both covered by the CRC (protocol.records.batch layout)."""


@dataclass(frozen=True)
class Case:
    """One workload: batches of about ``batch_bytes`` holding ``records_per_batch`` records each."""

    name: str
    batch_bytes: int
    records_per_batch: int


CASES = (Case("1KiB", 1 * KIB, 8), Case("16KiB", 16 * KIB, 32))


def build_template(case: Case, rng: random.Random) -> bytes:
    """One batch of exactly ``case.batch_bytes`` bytes: record values sized to fill it.

    Builds once with a guess, then corrects the value size by what is missing; varint lengths can
    shift by a byte, so a final pass trims or pads the first record's value.
    """
    n = case.records_per_batch

    def build(value_sizes: list[int]) -> bytes:
        records = [
            Record(value=rng.randbytes(size), key=f"key-{i:04d}".encode(), timestamp=BASE_TIMESTAMP + i)
            for i, size in enumerate(value_sizes)
        ]
        return build_batch(records)  # producers send no leader epoch; the leader stamps it

    sizes = [max(1, (case.batch_bytes - 61) // n - 16)] * n
    for _ in range(4):
        missing = case.batch_bytes - len(build(sizes))
        if missing == 0:
            break
        sizes[0] += missing
    batch = build(sizes)
    if len(batch) != case.batch_bytes:
        raise AssertionError(f"could not size a batch to {case.batch_bytes} bytes (got {len(batch)})")
    return batch


def prebuild_batches(case: Case, total_bytes: int) -> list[bytearray]:
    """Every batch of the run, built before timing starts (the producer's work, not the broker's).

    A pool of distinct record contents is reused, but each batch gets its own, increasing
    timestamps (and so its own CRC): the time index then grows as it does under real traffic.
    """
    rng = random.Random(f"kipling-bench-log/{case.name}")
    templates = [build_template(case, rng) for _ in range(TEMPLATE_POOL)]
    count = max(1, total_bytes // case.batch_bytes)
    batches = []
    for i in range(count):
        batch = bytearray(templates[i % TEMPLATE_POOL])
        first = BASE_TIMESTAMP + i * case.records_per_batch
        _TIMESTAMPS.pack_into(batch, _BASE_TIMESTAMP_OFFSET, first, first + case.records_per_batch - 1)
        rewrite_crc(batch, 0)
        batches.append(batch)
    return batches


def rates(total_bytes: int, batches: int, elapsed_ns: int) -> dict[str, float]:
    seconds = elapsed_ns / 1e9
    return {
        "seconds": seconds,
        "mb_per_s": total_bytes / 1e6 / seconds,
        "batches_per_s": batches / seconds,
        "us_per_batch": elapsed_ns / 1_000 / batches,
    }


def read_pass(log: PartitionLog, case: Case, high_watermark: int, *, materialize: bool) -> tuple[int, int]:
    """Read from offset 0 up to the high watermark in 1 MiB slices; returns (bytes covered, reads).

    Every batch of the run has the same size and record count, so the next offset follows from the
    slice length alone and the lookup-only pass never needs to look at the bytes.
    """
    offset = 0
    total = 0
    reads = 0
    while offset < high_watermark:
        result = log.read(offset, READ_MAX_BYTES, max_offset=high_watermark)
        piece = result.slice
        if piece is None or piece.length == 0:
            raise AssertionError(f"read at offset {offset} below HW {high_watermark} returned nothing")
        if materialize:
            data = os.pread(piece.file.fd(), piece.length, piece.position)
            if len(data) != piece.length:
                raise AssertionError(f"short pread: {len(data)} of {piece.length} bytes")
        total += piece.length
        reads += 1
        offset = result.first_offset + (piece.length // case.batch_bytes) * case.records_per_batch
    return total, reads


def check_log(log: PartitionLog, case: Case, high_watermark: int) -> None:
    """Make sure the log holds what was appended, before its read rates mean anything."""
    result = log.read(0, READ_MAX_BYTES, max_offset=high_watermark)
    if result.slice is None or result.first_offset != 0:
        raise AssertionError(f"first read: {result}")
    if result.log_end_offset != high_watermark:
        raise AssertionError(f"log end offset {result.log_end_offset}, expected {high_watermark}")
    data = os.pread(result.slice.file.fd(), case.batch_bytes, result.slice.position)
    header = read_header(data)
    if header.base_offset != 0 or header.size != case.batch_bytes:
        raise AssertionError(f"first batch on disk: {header}")


def run_case(case: Case, total_bytes: int, passes: int, parent: Path | None) -> dict[str, Any]:
    batches = prebuild_batches(case, total_bytes)
    batch_count = len(batches)
    appended_bytes = batch_count * case.batch_bytes
    high_watermark = batch_count * case.records_per_batch
    with tempfile.TemporaryDirectory(prefix="kipling-bench-log-", dir=parent) as tmp:
        log = PartitionLog.open(Path(tmp) / "bench-0", LogConfig(), SystemClock())
        try:
            gc.collect()
            start = time.perf_counter_ns()
            for batch in batches:
                log.append_as_leader(batch, LEADER_EPOCH)
            append_ns = time.perf_counter_ns() - start
            del batches  # 256 MB the read passes do not need
            log.update_high_watermark(high_watermark)
            check_log(log, case, high_watermark)

            samples: dict[str, list[int]] = {"materialized": [], "lookup_only": []}
            covered, reads = 0, 0
            for _ in range(passes):
                for mode in samples:  # alternate, so load from other processes hits both alike
                    gc.collect()
                    start = time.perf_counter_ns()
                    covered, reads = read_pass(log, case, high_watermark, materialize=mode == "materialized")
                    samples[mode].append(time.perf_counter_ns() - start)
            if covered != appended_bytes:
                raise AssertionError(f"read pass covered {covered} bytes, expected {appended_bytes}")
        finally:
            log.close()
    return {
        "case": case.name,
        "batch_bytes": case.batch_bytes,
        "records_per_batch": case.records_per_batch,
        "batches": batch_count,
        "total_bytes": appended_bytes,
        "append": rates(appended_bytes, batch_count, append_ns),
        "read_materialized": {
            **rates(appended_bytes, batch_count, min(samples["materialized"])),
            "us_per_read": min(samples["materialized"]) / 1_000 / reads,
        },
        "read_lookup_only": {
            **rates(appended_bytes, batch_count, min(samples["lookup_only"])),
            "us_per_read": min(samples["lookup_only"]) / 1_000 / reads,
        },
        "reads_per_pass": reads,
        "read_passes": passes,
        "read_max_bytes": READ_MAX_BYTES,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--total-mb", type=int, default=256, help="MiB appended per case (default 256)")
    parser.add_argument("--passes", type=int, default=10, help="read passes per mode, best kept (default 10)")
    parser.add_argument("--dir", type=Path, default=None, help="parent of the temporary log directory")
    args = parser.parse_args(argv)
    # The log reports opening at info level; keep the figures the only thing on stdout.
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))

    rows = []
    for case in CASES:
        rows.append(run_case(case, args.total_mb * MIB, args.passes, args.dir))
        row = rows[-1]
        print(
            f"{case.name}: {row['batches']:,} batches, {row['total_bytes'] / 1e6:.0f} MB "
            f"({case.records_per_batch} records per batch)"
        )

    print("\npartition log throughput (no fsync; reads come from the page cache; best read pass)")
    print(f"{'batch':<6} {'operation':<22} {'MB/s':>9} {'batches/s':>11} {'µs/batch':>9} {'µs/read':>8}")
    for row in rows:
        for key, label in (
            ("append", "append_as_leader"),
            ("read_materialized", "read + pread"),
            ("read_lookup_only", "read (slice lookup)"),
        ):
            r = row[key]
            per_read = f"{r['us_per_read']:.1f}" if "us_per_read" in r else "-"
            print(
                f"{row['case']:<6} {label:<22} {r['mb_per_s']:>9.0f} {r['batches_per_s']:>11,.0f} "
                f"{r['us_per_batch']:>9.2f} {per_read:>8}"
            )
    path = write_results("log", {"cases": rows, "fsync": False, "total_mib_per_case": args.total_mb})
    print(f"\nwrote {path}")


if __name__ == "__main__":
    main()
