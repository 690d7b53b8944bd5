"""Records per second of the record decoders alone, and of the whole way to Arrow, side by side.

One task outside Spark (issue 21): the Spark source's Python workers spend their time decoding record
batches, so this measures the decoders on their own, in one run, alternating (``repeat_interleaved``)
so that their ratios are not skewed by load from other processes:

* ``reader``: :func:`protocol.records.iter_records`, one :class:`DecodedRecord` per record;
* ``python``: the pure-Python columnar walk (:func:`protocol.records.columnar.decode_batch_columns`);
* ``compiled``: the numba kernel (:func:`protocol.records.columnar_arrays.decode_batch_arrays`).

Each decodes whole batches of ``--records`` records (10,000 by default) of ``--value-bytes`` (100)
random bytes with 8-byte keys, CRC checked, uncompressed and LZ4-compressed (decompression included).
Then the whole way to Arrow, :meth:`pipeline.arrow.RecordBatchBuilder.append_record_batches` plus
``flush`` (what a Spark task runs per fetched slice), with the compiled kernel and with the Python
walk, over the same batches and over 16 KiB batches (~140 records, the Java producer's default).

Run from the repository root: ``python -m bench.decoder`` (``--reps``, ``--records``,
``--value-bytes``). The kernel's first compile (or cache load) happens before timing.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from typing import Any

from bench import Timing, repeat_interleaved, write_results
from protocol.records import CompressionType, Record, build_batch, iter_records
from protocol.records.columnar import decode_batch_columns
from protocol.records.columnar_arrays import KERNEL_AVAILABLE, decode_batch_arrays

SMALL_BATCH_BYTES = 16 * 1024
"""The Java producer's default batch.size."""


def make_records(count: int, value_bytes: int) -> list[Record]:
    rng = os.urandom
    return [
        Record(rng(value_bytes), b"key%05d" % (i % 100_000), (), 1_700_000_000_000 + i) for i in range(count)
    ]


def small_batches(records: list[Record], codec: CompressionType) -> bytes:
    """The records as consecutive batches of about SMALL_BATCH_BYTES each."""
    per_batch = max(1, SMALL_BATCH_BYTES // (len(records[0].value or b"") + 20))
    return b"".join(
        build_batch(records[i : i + per_batch], base_offset=i, compression=codec)
        for i in range(0, len(records), per_batch)
    )


def decoders(batch: bytes) -> dict[str, Callable[[], Any]]:
    def reader() -> None:
        for _ in iter_records(batch):
            pass

    return {
        "reader": reader,
        "python": lambda: decode_batch_columns(batch),
        "compiled": lambda: decode_batch_arrays(batch, compiled=True),
    }


def to_arrow(buf: bytes) -> dict[str, Callable[[], Any]]:
    from pipeline.arrow import RecordBatchBuilder

    def run(compiled: bool) -> Callable[[], Any]:
        builder = RecordBatchBuilder("bench", 0, include_headers=False, compiled=compiled)

        def go() -> Any:
            builder.append_record_batches(buf)
            return builder.flush()

        return go

    return {"python": run(False), "compiled": run(True)}


def rates(timings: dict[str, Timing], records: int) -> dict[str, dict[str, float]]:
    return {
        name: {
            "best_records_per_s": records / (t.best_ns / 1e9),
            "median_records_per_s": records / (t.median_ns / 1e9),
            "best_ns_per_record": t.best_ns / records,
        }
        for name, t in timings.items()
    }


def print_table(title: str, figures: dict[str, dict[str, float]], base: str) -> None:
    print(f"\n{title}")
    print(f"  {'decoder':<10} {'best rec/s':>14} {'median rec/s':>14} {'ns/rec':>8} {'vs ' + base:>10}")
    for name, f in figures.items():
        ratio = f["best_records_per_s"] / figures[base]["best_records_per_s"]
        print(
            f"  {name:<10} {f['best_records_per_s']:>14,.0f} {f['median_records_per_s']:>14,.0f} "
            f"{f['best_ns_per_record']:>8.1f} {ratio:>9.1f}x"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=9)
    parser.add_argument("--records", type=int, default=10_000)
    parser.add_argument("--value-bytes", type=int, default=100)
    args = parser.parse_args()
    if not KERNEL_AVAILABLE:
        raise SystemExit("numba is not installed: pip install -e '.[spark]'")
    records = make_records(args.records, args.value_bytes)
    out: dict[str, Any] = {
        "records_per_batch": args.records,
        "value_bytes": args.value_bytes,
        "reps": args.reps,
        "decode": {},
        "to_arrow": {},
    }
    print(f"{args.records:,} records of {args.value_bytes} B per batch, CRC checked, best of {args.reps}")
    for codec in (CompressionType.NONE, CompressionType.LZ4):
        batch = build_batch(records, compression=codec)
        candidates = decoders(batch)
        for fn in candidates.values():
            fn()  # warm up: the kernel's compile or cache load, the codecs' first use
        figures = rates(repeat_interleaved(candidates, args.reps), args.records)
        out["decode"][codec.name.lower()] = figures
        print_table(f"decoder alone, one batch, {codec.name.lower()}", figures, "python")
    for codec in (CompressionType.NONE, CompressionType.LZ4):
        for shape, buf in (
            (f"{args.records}-record batch", build_batch(records, compression=codec)),
            ("16 KiB batches", small_batches(records, codec)),
        ):
            candidates = to_arrow(buf)
            for fn in candidates.values():
                fn()
            figures = rates(repeat_interleaved(candidates, args.reps), args.records)
            out["to_arrow"][f"{codec.name.lower()}, {shape}"] = figures
            print_table(
                f"to Arrow (append_record_batches + flush), {shape}, {codec.name.lower()}", figures, "python"
            )
    path = write_results("decoder", out)
    print(f"\nwrote {path}")


if __name__ == "__main__":
    main()
