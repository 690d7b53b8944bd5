"""Writing a DataFrame into a kipling topic: the ``kipling`` sink against Spark writing Parquet, and
the sink's row path against its compiled path (issue 21).

What it answers:

1. How fast does ``df.write.format("kipling")`` write N rows of ``--value-bytes`` values (null keys, or
   ``--key-bytes`` keys) into a topic of ``--partitions`` partitions on a real broker, in rows/s, next
   to ``df.write.parquet`` of the same DataFrame in the same session (ratio kipling/parquet)?
2. In one task outside Spark: records/s of the encoder alone (``build_batch`` over ``Record`` objects
   made from the Arrow rows, as the row path does, against ``build_batch_pieces`` over the Arrow
   buffers), and of ``pipeline.produce.write_batches`` (the function a Spark task runs) into the broker
   with ``columnar=False`` (row path) and ``columnar=True`` (compiled path), alternating.

Setup. One kipling broker (``bench.broker_proc.KiplingProcess``, log dir in a temporary directory,
default flush policy). Inputs are Arrow record batches of 10,000 rows (Spark's
``spark.sql.execution.arrow.maxRecordsPerBatch``) with random values; the sink's defaults otherwise
(``kafka.batch.size`` 16,384 unless ``--batch-size``, acks=-1, no compression unless
``--compression``). The Spark DataFrame is ``spark.range(N)`` with a ``--value-bytes`` binary value
derived from the id (sha2, repeated and cut), ``local[2]``, written once untimed to warm up, then
``--repeats`` times each, kipling and parquet alternating; each kipling write goes to a fresh topic.
The Spark figures are those of the compiled path (the default; ``KIPLING_PIPELINE_COLUMNAR_SINK=0`` in
the environment makes Spark's workers take the row path).

Run from the repository root: ``python -m bench.spark_write`` (``--rows``, ``--partitions``,
``--value-bytes``, ``--key-bytes``, ``--batch-size``, ``--compression``, ``--repeats``,
``--task-rows``); writes ``bench/results/spark_write.json``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench import write_results
from bench.broker_proc import ROOT, KiplingProcess
from bench.spark_read import SPARK_CONF, SPARK_MASTER

ARROW_ROWS = 10_000


def arrow_batches(rows: int, value_bytes: int, key_bytes: int) -> list[Any]:
    import numpy as np
    import pyarrow as pa

    rng = np.random.default_rng(0)
    batches = []
    for start in range(0, rows, ARROW_ROWS):
        count = min(ARROW_ROWS, rows - start)
        data = rng.integers(0, 256, count * value_bytes, dtype=np.uint8)
        offsets = np.arange(0, (count + 1) * value_bytes, value_bytes, dtype=np.int32)
        values = pa.Array.from_buffers(pa.binary(), count, [None, pa.py_buffer(offsets), pa.py_buffer(data)])
        columns = {"value": values}
        if key_bytes:
            keys = rng.integers(0, 256, count * key_bytes, dtype=np.uint8)
            key_offsets = np.arange(0, (count + 1) * key_bytes, key_bytes, dtype=np.int32)
            columns["key"] = pa.Array.from_buffers(
                pa.binary(), count, [None, pa.py_buffer(key_offsets), pa.py_buffer(keys)]
            )
        batches.append(pa.record_batch(columns))
    return batches


def encoder_alone(batches: list[Any], batch_size: int, compression: str) -> dict[str, float]:
    """Records/s of encoding every row into batches of about ``batch_size`` bytes, both ways."""
    import numpy as np

    from pipeline.arrow import outgoing_records
    from pipeline.columnar_sink import binary_column, row_sizes
    from pipeline.produce import RECORD_OVERHEAD_BYTES
    from protocol.records import CompressionType, Record, build_batch
    from protocol.records.columnar_encoder import BinaryColumn, ColumnPiece, build_batch_pieces

    codec = CompressionType[compression.upper()]
    rows = sum(b.num_rows for b in batches)

    def python_path() -> int:
        out = 0
        timestamp = int(time.time() * 1000)
        for batch in batches:
            pending: list[Record] = []
            size = 0
            for row in outgoing_records(batch):
                pending.append(Record(row.value, row.key, row.headers, timestamp))
                size += RECORD_OVERHEAD_BYTES + len(row.key or b"") + len(row.value or b"")
                if size >= batch_size:
                    out += len(build_batch(pending, compression=codec))
                    pending, size = [], 0
            if pending:
                out += len(build_batch(pending, compression=codec))
        return out

    def compiled_path() -> int:
        out = 0
        timestamp = int(time.time() * 1000)
        for batch in batches:
            values = binary_column(batch.column("value"))
            names = batch.schema.names
            keys = (
                binary_column(batch.column("key")) if "key" in names else BinaryColumn.nulls(batch.num_rows)
            )
            cuts = np.searchsorted(
                np.cumsum(row_sizes(keys, values, RECORD_OVERHEAD_BYTES)),
                np.arange(batch_size, batch_size * (batch.num_rows + 1), batch_size),
                "left",
            )
            start = 0
            for cut in [*cuts.tolist(), batch.num_rows - 1]:
                end = min(int(cut) + 1, batch.num_rows)
                if end <= start:
                    continue
                chunk = np.arange(start, end, dtype=np.int64)
                stamps = np.full(chunk.shape[0], timestamp, np.int64)
                out += len(build_batch_pieces([ColumnPiece(keys, values, chunk, stamps)], compression=codec))
                start = end
        return out

    compiled_path()  # compile (or load numba's cache) outside the timing
    return {
        "python_records_per_s": rows / _best(python_path, 3),
        "compiled_records_per_s": rows / _best(compiled_path, 3),
    }


def _best(fn: Callable[[], Any], repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        began = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - began)
    return best


def single_task(bootstrap: str, batches: list[Any], args: argparse.Namespace) -> dict[str, float]:
    """Records/s of ``write_batches`` (one task) into fresh topics, row path and compiled alternating."""
    from pipeline.options import parse_write_options
    from pipeline.produce import write_batches

    rows = sum(b.num_rows for b in batches)
    best = {False: float("inf"), True: float("inf")}
    for _ in range(args.repeats):
        for columnar in (False, True):
            topic = new_topic(bootstrap, "bench-write-task", partitions=args.partitions)
            options = parse_write_options(_sink_options(bootstrap, topic, args))
            began = time.perf_counter()
            summary = write_batches(options, batches, columnar=columnar)
            best[columnar] = min(best[columnar], time.perf_counter() - began)
            if summary.records != rows:
                raise RuntimeError(f"wrote {summary.records} of {rows} rows")
    return {"row_path_records_per_s": rows / best[False], "compiled_records_per_s": rows / best[True]}


_topics = iter(range(1_000_000))


def new_topic(bootstrap: str, prefix: str, partitions: int) -> str:
    """A fresh topic, its leaders elected (confluent-kafka's admin client, as bench.spark_read)."""
    from bench.spark_read import create_topic

    topic = f"{prefix}-{next(_topics)}"
    create_topic(bootstrap, topic, partitions)
    return topic


def _sink_options(bootstrap: str, topic: str, args: argparse.Namespace) -> dict[str, str]:
    return {
        "kafka.bootstrap.servers": bootstrap,
        "topic": topic,
        "kafka.batch.size": str(args.batch_size),
        "kafka.compression.type": args.compression,
    }


def in_spark(bootstrap: str, work_dir: Path, args: argparse.Namespace) -> dict[str, Any]:
    path = os.environ.get("PYTHONPATH", "")
    os.environ.update(
        {
            "SPARK_LOCAL_IP": "127.0.0.1",
            "PYSPARK_PYTHON": sys.executable,
            "PYSPARK_DRIVER_PYTHON": sys.executable,
            "PYTHONPATH": str(ROOT) + (os.pathsep + path if path else ""),
        }
    )
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    import pipeline

    builder = SparkSession.builder.master(SPARK_MASTER).appName("kipling-bench-write")
    for key, value in SPARK_CONF.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    pipeline.register(spark)
    hexes = -(-args.value_bytes // 128)
    value_column = F.substring(F.repeat(F.sha2(F.col("id").cast("string"), 512), hexes), 1, args.value_bytes)
    df = spark.range(args.rows, numPartitions=2).select(value_column.cast("binary").alias("value"))
    if args.key_bytes:
        key_column = F.substring(F.sha2(F.col("id").cast("string"), 256), 1, args.key_bytes)
        df = spark.range(args.rows, numPartitions=2).select(
            key_column.cast("binary").alias("key"), value_column.cast("binary").alias("value")
        )

    def kipling() -> None:
        topic = new_topic(bootstrap, "bench-write-spark", partitions=args.partitions)
        df.write.format("kipling").options(**_sink_options(bootstrap, topic, args)).mode("append").save()

    counter = iter(range(1_000_000))

    def parquet() -> None:
        df.write.parquet(str(work_dir / f"parquet-{next(counter)}"))

    kipling()  # warm-up: JVM, workers, numba cache
    parquet()
    best = {"kipling": float("inf"), "parquet": float("inf")}
    for _ in range(args.repeats):
        for name, fn in (("kipling", kipling), ("parquet", parquet)):
            began = time.perf_counter()
            fn()
            best[name] = min(best[name], time.perf_counter() - began)
    spark.stop()
    return {
        "kipling_rows_per_s": args.rows / best["kipling"],
        "parquet_rows_per_s": args.rows / best["parquet"],
        "kipling_over_parquet": best["parquet"] / best["kipling"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--task-rows", type=int, default=1_000_000, help="rows of the single-task figures")
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--key-bytes", type=int, default=0)
    parser.add_argument("--batch-size", type=int, default=16_384)
    parser.add_argument("--compression", default="none", choices=["none", "gzip", "snappy", "lz4", "zstd"])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--no-spark", action="store_true", help="the single-task figures only")
    args = parser.parse_args()
    work_dir = Path(tempfile.mkdtemp(prefix="kipling-bench-write-"))
    broker = KiplingProcess(work_dir / "broker")
    report: dict[str, Any] = {"config": vars(args)}
    try:
        broker.start()
        batches = arrow_batches(args.task_rows, args.value_bytes, args.key_bytes)
        report["encoder_alone"] = encoder_alone(batches, args.batch_size, args.compression)
        print("encoder alone (records/s):", _fmt(report["encoder_alone"]), flush=True)
        report["single_task"] = single_task(broker.bootstrap, batches, args)
        print("write_batches, one task (records/s):", _fmt(report["single_task"]), flush=True)
        if not args.no_spark:
            report["spark"] = in_spark(broker.bootstrap, work_dir, args)
            print("Spark (rows/s):", _fmt(report["spark"]), flush=True)
    finally:
        broker.stop()
        shutil.rmtree(work_dir, ignore_errors=True)
    print(f"wrote {write_results('spark_write', report)}")


def _fmt(figures: dict[str, float]) -> str:
    return ", ".join(f"{k} {v:,.2f}" if v < 100 else f"{k} {v:,.0f}" for k, v in figures.items())


if __name__ == "__main__":
    main()
