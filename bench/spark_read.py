"""Reading a kipling topic into Spark: the ``kipling`` source against Parquet, and decoder before/after.

What it answers:

1. How fast does ``spark.read.format("kipling")`` read a topic on a real broker, in rows/s and MB/s
   of values, next to Spark reading the same records from Parquet files (ratio kipling/parquet)?
2. What did the columnar decoder (``protocol.records.columnar`` → ``RecordBatchBuilder.append_batch``)
   gain over decoding every record into a ``DecodedRecord`` (``KIPLING_PIPELINE_DECODER=records``),
   in one task outside Spark and in Spark?

Setup. One kipling broker (``python -m broker``, as ``bench.broker_proc.KiplingProcess`` starts it, log
dir in a temporary directory, default flush policy); a topic of ``--partitions`` partitions;
``--records`` records with distinct random ``--value-bytes`` values and null keys (``--key-bytes`` for
random keys), produced round-robin over the partitions by confluent-kafka with acks=1, 1 MB batches
(``batch.size``; librdkafka also cuts them at 10,000 messages), linger 20 ms and no compression by
default (``--compression lz4`` stores lz4 batches; random values do not shrink).

Queries, each run ``--repeats`` times in a row (run 1 is *cold*, the best of the others *warm*):
``count()``, and ``groupBy("partition").agg(count(*), sum(length(value)))``, which forces every value
to be read; both results are checked against what was produced. Parquet: the DataFrame the
``kipling`` source reads, written once by Spark (snappy, one file per task; not timed) and read back
with ``spark.read.parquet``. CPU seconds of the broker, the JVM, Spark's Python workers and the driver
are read from ``/proc`` around every run (live processes only: a planner worker that exits within the
run is not counted); rows per CPU-second is the figure that other load on a shared machine moves least.

Spark runs in one child process per decoder, because the decoder is chosen by an environment variable
that Spark's Python workers inherit from the JVM: ``local[2]``, ``spark.driver.memory=4g``, UI off,
``spark.sql.shuffle.partitions=2``, session time zone UTC, the source's defaults otherwise (one task
per partition, ``kafka.max.partition.fetch.bytes`` 1 MiB). The ``records`` child reads the topic (or
its first ``--compare-records`` records) with the per-record decoder; the ``columnar`` child reads the
same (first, on its cold JVM as well), then everything, writes the Parquet copy and reads that. The
single-task figures read partition 0 in this process through ``pipeline.fetch.read_range``, the
function a Spark task runs, with both decoders alternating.

Run from the repository root: ``python -m bench.spark_read`` (``--records``, ``--partitions``,
``--value-bytes``, ``--key-bytes``, ``--repeats``, ``--compare-records``, ``--compression``,
``--keep-dir``); writes ``bench/results/spark_read.json``. The default run takes about 4 minutes here.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from bench import write_results
from bench.broker_proc import CLOCK_TICKS, ROOT, KiplingProcess

MB = 1_000_000
DECODER_ENV = "KIPLING_PIPELINE_DECODER"
"""As ``pipeline.fetch.DECODER_ENV`` (not imported here: the parent never needs pyspark)."""
BLOCK = 10_000
"""Records whose random values are cut from one ``os.urandom`` call."""
POLL_EVERY = 10_000
SPARK_CONF = {
    "spark.driver.memory": "4g",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "2",
    "spark.sql.session.timeZone": "UTC",
}
SPARK_MASTER = "local[2]"
CHILD_TIMEOUT_S = 3600
PROGRESS = "[spark_read] "
"""Prefix of the child's progress lines, which the parent shows (the rest goes to a log file)."""


# -- data ------------------------------------------------------------------------------------------


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics(
        [NewTopic(topic, num_partitions=partitions, replication_factor=1)]
    ).values():
        future.result(timeout=60)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        meta = admin.list_topics(topic, timeout=10).topics.get(topic)
        ready = meta is not None and meta.error is None and len(meta.partitions) == partitions
        if ready and all(p.leader >= 0 for p in meta.partitions.values()):
            return
        time.sleep(0.1)
    raise TimeoutError(f"topic {topic} not ready")


def produce(bootstrap: str, topic: str, args: argparse.Namespace) -> dict[str, Any]:
    """Produce ``args.records`` records round-robin over the partitions; flush; check the end offsets."""
    errors: list[str] = []
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "1",
            "linger.ms": 20,
            "batch.size": 1_000_000,
            "batch.num.messages": 10_000,
            "queue.buffering.max.messages": 2_000_000,
            "queue.buffering.max.kbytes": 2_000_000,
            "compression.type": args.compression,
            "enable.idempotence": False,
            "socket.nagle.disable": True,
            "error_cb": lambda e: errors.append(str(e)),
        }
    )
    producer.list_topics(topic, timeout=10)
    partitions = args.partitions
    started = time.perf_counter()
    sent = 0
    total = args.records
    value_bytes, key_bytes = args.value_bytes, args.key_bytes
    values: list[bytes] = []
    keys: list[bytes | None] = []
    while sent < total:
        if sent % BLOCK == 0:  # distinct random values (and keys), BLOCK at a time from one urandom
            values = _random_pieces(value_bytes)
            keys = _random_pieces(key_bytes) if key_bytes else [None] * BLOCK
        try:
            producer.produce(topic, values[sent % BLOCK], keys[sent % BLOCK], partition=sent % partitions)
        except BufferError:
            producer.poll(0.005)
            continue
        sent += 1
        if sent % POLL_EVERY == 0:
            producer.poll(0)
    left = producer.flush(120)
    elapsed = time.perf_counter() - started
    if left:
        raise RuntimeError(f"{left} messages unacknowledged after flush: {errors[:3]}")
    del producer
    ends = end_offsets(bootstrap, topic, partitions)
    if sum(ends) != total:
        raise RuntimeError(f"produced {total:,} records but the end offsets add up to {sum(ends):,}")
    return {"records": total, "seconds": elapsed, "records_per_s": total / elapsed, "end_offsets": ends}


def _random_pieces(size: int) -> list[bytes]:
    block = os.urandom(size * BLOCK)
    return [block[i : i + size] for i in range(0, size * BLOCK, size)]


def end_offsets(bootstrap: str, topic: str, partitions: int) -> list[int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "kipling-bench-spark-read"})
    try:
        return [
            consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(partitions)
        ]
    finally:
        consumer.close()


def compare_ends(ends: list[int], records: int) -> list[int]:
    """End offsets of the before/after subset: the first ``records`` records, spread as produced."""
    total = sum(ends)
    if records >= total:
        return list(ends)
    return [min(end, -(-records * end // total)) for end in ends]


# -- one task outside Spark -----------------------------------------------------------------------


def outside_spark(bootstrap: str, topic: str, subset_end: int, full_end: int, repeats: int) -> dict[str, Any]:
    """records/s of ``read_range`` over partition 0, as one Spark task runs it, for both decoders."""
    import structlog

    from pipeline.fetch import ReadTask, read_range
    from pipeline.offsets import OffsetRange
    from pipeline.options import BrokerAddress, ConnectionSettings

    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    host, port = bootstrap.rsplit(":", 1)
    connection = ConnectionSettings((BrokerAddress(host, int(port)),))

    def read(decoder: str, end: int) -> float:
        os.environ[DECODER_ENV] = decoder
        try:
            task = ReadTask(OffsetRange(topic, 0, 0, end), connection, None)
            started = time.perf_counter()
            rows = sum(batch.num_rows for batch in read_range(task))
            elapsed = time.perf_counter() - started
        finally:
            os.environ.pop(DECODER_ENV, None)
        if rows != end:
            raise RuntimeError(f"read {rows:,} records of partition 0, expected {end:,}")
        return elapsed

    samples: dict[str, list[float]] = {"records": [], "columnar": [], "columnar_full": []}
    for _ in range(repeats):  # alternating, so load from other processes lands on both
        samples["records"].append(read("records", subset_end))
        samples["columnar"].append(read("columnar", subset_end))
        samples["columnar_full"].append(read("columnar", full_end))
    out: dict[str, Any] = {}
    for name, seconds in samples.items():
        rows = full_end if name == "columnar_full" else subset_end
        out[name] = {"records": rows, "seconds": seconds, "best_records_per_s": rows / min(seconds)}
    out["speedup"] = out["columnar"]["best_records_per_s"] / out["records"]["best_records_per_s"]
    return out


# -- Spark, in a child process -----------------------------------------------------------------------


def run_child(config: dict[str, Any], work_dir: Path) -> dict[str, Any]:
    """Run the Spark phases of ``config`` in ``python -m bench.spark_read --child`` with its decoder."""
    decoder = config["decoder"]
    config_path = work_dir / f"child-{decoder}.json"
    config["results_path"] = str(work_dir / f"child-{decoder}-results.json")
    config_path.write_text(json.dumps(config))
    path = os.environ.get("PYTHONPATH", "")
    env = {
        **os.environ,
        DECODER_ENV: decoder,
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "PYTHONPATH": str(ROOT) + (os.pathsep + path if path else ""),
    }
    log_path = work_dir / f"child-{decoder}.log"
    with (
        log_path.open("w") as log,
        subprocess.Popen(
            [sys.executable, "-m", "bench.spark_read", "--child", str(config_path)],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        ) as child,
    ):
        assert child.stdout is not None
        for line in child.stdout:  # Spark's and the Python workers' output goes to the log only
            log.write(line)
            if line.startswith(PROGRESS):
                print(line[len(PROGRESS) :], end="", flush=True)
        code = child.wait(CHILD_TIMEOUT_S)
    if code != 0:
        tail = "".join(log_path.read_text(errors="replace").splitlines(keepends=True)[-30:])
        raise RuntimeError(f"the Spark child ({decoder}) exited with {code}; end of {log_path}:\n{tail}")
    return json.loads(Path(config["results_path"]).read_text())


def child_main(config_path: str) -> None:
    """The Spark side: one session, the phases the parent asked for, results as JSON."""
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    from pipeline.source import KiplingDataSource

    config = json.loads(Path(config_path).read_text())
    if os.environ.get(DECODER_ENV) != config["decoder"]:
        raise RuntimeError(f"{DECODER_ENV} is not {config['decoder']!r} in the child")
    builder = SparkSession.builder.master(SPARK_MASTER).appName(f"kipling-bench-{config['decoder']}")
    for key, value in SPARK_CONF.items():
        builder = builder.config(key, value)
    started = time.perf_counter()
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    spark.dataSource.register(KiplingDataSource)
    results: dict[str, Any] = {"session_start_s": time.perf_counter() - started, "queries": []}
    print(f"{PROGRESS}    session started in {results['session_start_s']:.1f}s", flush=True)
    repeats = config["repeats"]
    value_bytes = config["value_bytes"]
    topic = config["topic"]

    def kipling(ends: list[int] | None) -> Any:
        reader = (
            spark.read.format("kipling")
            .option("kafka.bootstrap.servers", config["bootstrap"])
            .option("subscribe", topic)
            .option("startingOffsets", "earliest")
        )
        if ends is not None:
            reader = reader.option(
                "endingOffsets", json.dumps({topic: {str(p): e for p, e in enumerate(ends)}})
            )
        return reader.load()

    def measure(label: str, source: str, df: Any, expected: int) -> None:
        queries: dict[str, Callable[[], None]] = {
            "count": lambda: _check(df.count() == expected, f"{label}: count"),
            "sum(length(value))": lambda: _check_groups(
                df.groupBy("partition")
                .agg(F.count(F.lit(1)).alias("rows"), F.sum(F.length("value")).alias("bytes"))
                .collect(),
                expected,
                value_bytes,
                label,
            ),
        }
        for query, run in queries.items():
            seconds = []
            cpu = []
            for _ in range(repeats):
                cpu0 = process_cpu(config["broker_pid"])
                t0 = time.perf_counter()
                run()
                seconds.append(time.perf_counter() - t0)
                cpu1 = process_cpu(config["broker_pid"])
                cpu.append({kind: cpu1.get(kind, 0.0) - cpu0.get(kind, 0.0) for kind in cpu1})
            entry = {
                "label": label,
                "source": source,
                "query": query,
                "rows": expected,
                "seconds": seconds,
                "cpu_seconds": cpu,
            }
            results["queries"].append(entry)
            runs = " ".join(f"{s:6.2f}s" for s in seconds)
            print(f"{PROGRESS}    {label:<8} {source:<17} {query:<19} {runs}", flush=True)

    source = "kipling/" + config["decoder"]
    subset = config["compare_ends"]
    if subset is not None:
        measure("compare", source, kipling(subset), sum(subset))
    if config["full"]:
        measure("full", source, kipling(None), config["records"])
    if config["parquet_dir"]:
        parquet_dir = config["parquet_dir"]
        t0 = time.perf_counter()
        kipling(None).write.mode("overwrite").parquet(parquet_dir)
        results["parquet_write_s"] = time.perf_counter() - t0
        results["parquet_bytes"] = sum(p.stat().st_size for p in Path(parquet_dir).glob("*.parquet"))
        results["parquet_files"] = len(list(Path(parquet_dir).glob("*.parquet")))
        print(f"{PROGRESS}    parquet written in {results['parquet_write_s']:.1f}s (not timed)", flush=True)
        measure("full", "parquet", spark.read.parquet(parquet_dir), config["records"])
    results["spark_version"] = spark.version
    spark.stop()
    Path(config["results_path"]).write_text(json.dumps(results))


def process_cpu(broker_pid: int) -> dict[str, float]:
    """CPU seconds (user + system, live processes) of the broker and of this process's tree, by kind:
    the JVM, Spark's Python workers (``pyspark.daemon`` and its forks), and this driver process."""
    stats: dict[int, tuple[int, str, float]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            raw = Path(entry.path, "stat").read_text()
            cmdline = Path(entry.path, "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        fields = raw.rsplit(")", 1)[1].split()
        stats[int(entry.name)] = (int(fields[1]), cmdline, (int(fields[11]) + int(fields[12])) / CLOCK_TICKS)
    out = {"broker": 0.0, "jvm": 0.0, "python workers": 0.0, "driver": 0.0}
    for pid, (_, cmdline, cpu) in stats.items():
        ancestor, kind = pid, None
        while ancestor > 1 and ancestor in stats and kind is None:
            if ancestor == broker_pid:
                kind = "broker"
            elif ancestor == os.getpid():
                if pid == ancestor:
                    kind = "driver"
                elif "pyspark.daemon" in cmdline or "pyspark.sql.worker" in cmdline:
                    kind = "python workers"
                elif cmdline.split(" ", 1)[0].endswith("java"):
                    kind = "jvm"
                else:
                    kind = "driver"
            ancestor = stats[ancestor][0]
        if kind is not None:
            out[kind] += cpu
    return out


def _check(ok: bool, what: str) -> None:
    if not ok:
        raise RuntimeError(f"wrong result: {what}")


def _check_groups(rows: list[Any], expected: int, value_bytes: int, label: str) -> None:
    total = sum(r["rows"] for r in rows)
    volume = sum(r["bytes"] for r in rows)
    _check(total == expected and volume == expected * value_bytes, f"{label}: {total} rows, {volume} bytes")


# -- report -----------------------------------------------------------------------------------------


def summarize(entry: dict[str, Any], record_bytes: int) -> dict[str, Any]:
    seconds = entry["seconds"]
    warm_index = min(range(1, len(seconds)), key=seconds.__getitem__) if len(seconds) > 1 else 0
    warm = seconds[warm_index]
    rows = entry["rows"]
    cpu = entry["cpu_seconds"][warm_index]
    return {
        **entry,
        "cold_s": seconds[0],
        "warm_s": warm,
        "warm_rows_per_s": rows / warm,
        "warm_mb_per_s": rows * record_bytes / MB / warm,
        "cold_rows_per_s": rows / seconds[0],
        "warm_cpu_seconds": cpu,
        "warm_rows_per_cpu_s": rows / max(sum(cpu.values()), 1e-9),
    }


HEADER = (
    f"{'query':<20} {'source':<18} {'rows':>11} {'cold s':>7} {'warm s':>7} {'warm rows/s':>12} "
    f"{'warm MB/s':>10}  {'CPU-s workers/JVM/broker':>25} {'rows/CPU-s':>11}"
)


def _row(query: str, source: str, q: dict[str, Any]) -> str:
    cpu = q["warm_cpu_seconds"]
    split = f"{cpu['python workers']:.1f} / {cpu['jvm']:.1f} / {cpu['broker']:.1f}"
    return (
        f"{query:<20} {source:<18} {q['rows']:>11,} {q['cold_s']:>7.2f} {q['warm_s']:>7.2f} "
        f"{q['warm_rows_per_s']:>12,.0f} {q['warm_mb_per_s']:>10.1f}  {split:>25} "
        f"{q['warm_rows_per_cpu_s']:>11,.0f}"
    )


def _ratio_row(label: str, wall: float, cpu: float) -> str:
    return f"{'':<20} {label:<18} {'':>11} {'':>7} {'':>7} {wall:>11.2f}x {'':>10}  {'':>25} {cpu:>10.2f}x"


def print_tables(report: dict[str, Any]) -> None:
    rule = "-" * len(HEADER)
    print("\nSpark reads of the whole topic (MB/s: key and value bytes; CPU of the warm run)")
    print(HEADER)
    print(rule)
    for query, pair in report["full"].items():
        for source in ("kipling/columnar", "parquet"):
            print(_row(query, source, pair[source]))
        print(_ratio_row("kipling/parquet", pair["ratio"], pair["cpu_ratio"]))
    what = "all" if report["compare_records"] == report["config"]["records"] else "the first"
    print(f"\nBefore/after in Spark: {what} {report['compare_records']:,} records")
    print(HEADER)
    print(rule)
    for query, pair in report["compare"].items():
        for source in ("records", "columnar"):
            print(_row(query, "kipling/" + source, pair[source]))
        print(_ratio_row("columnar/records", pair["speedup"], pair["cpu_speedup"]))
    out = report["outside_spark"]
    print("\nOne task outside Spark (read_range over partition 0, best of the runs)")
    for name, label, note in (
        ("records", "records decoder", ""),
        ("columnar", "columnar decoder", f"   ({out['speedup']:.1f}x)"),
        ("columnar_full", "columnar decoder", "   (the whole partition)"),
    ):
        figures = out[name]
        print(
            f"  {label:<17} {figures['records']:>10,} records {figures['best_records_per_s']:>12,.0f}/s{note}"
        )


def versions() -> dict[str, str]:
    import pyarrow

    found = {"pyarrow": pyarrow.__version__}
    try:
        import pyspark

        found["pyspark"] = pyspark.__version__
    except ImportError:
        pass
    java = subprocess.run(["java", "-version"], capture_output=True, text=True, check=False)
    found["java"] = (java.stderr or java.stdout).splitlines()[0] if (java.stderr or java.stdout) else "?"
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=10_000_000, help="records in the topic")
    parser.add_argument("--partitions", type=int, default=8, help="partitions of the topic")
    parser.add_argument("--value-bytes", type=int, default=100, help="bytes per value")
    parser.add_argument("--key-bytes", type=int, default=0, help="bytes per key (0: null keys)")
    parser.add_argument("--repeats", type=int, default=2, help="runs of each query (the first is cold)")
    parser.add_argument(
        "--compare-records",
        type=int,
        help="records read with the per-record decoder too, for before/after (default: all)",
    )
    parser.add_argument("--compression", choices=("none", "lz4"), default="none", help="producer codec")
    parser.add_argument(
        "--keep-dir", metavar="DIR", help="work directory to use and keep (broker logs, parquet)"
    )
    parser.add_argument("--child", metavar="CONFIG", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child_main(args.child)
        return
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    run(args)


def run(args: argparse.Namespace) -> None:
    work_dir = Path(args.keep_dir) if args.keep_dir else Path(tempfile.mkdtemp(prefix="kipling-bench-spark-"))
    work_dir.mkdir(parents=True, exist_ok=True)
    broker = KiplingProcess(work_dir / "broker")
    topic = "spark-read"
    began = time.perf_counter()
    keys = f"{args.key_bytes} B keys" if args.key_bytes else "null keys"
    print(
        f"spark_read: {args.records:,} records of {args.value_bytes} B values and {keys}, "
        f"{args.partitions} partitions, compression {args.compression}; Spark {SPARK_MASTER}, "
        + ", ".join(f"{k}={v}" for k, v in SPARK_CONF.items()),
        flush=True,
    )
    try:
        broker.start()
        create_topic(broker.bootstrap, topic, args.partitions)
        print("  producing...", flush=True)
        produced = produce(broker.bootstrap, topic, args)
        print(
            f"  produced in {produced['seconds']:.1f}s ({produced['records_per_s']:,.0f} records/s)",
            flush=True,
        )
        ends = produced["end_offsets"]
        compare_all = args.compare_records is None or args.compare_records >= args.records
        subset = list(ends) if compare_all else compare_ends(ends, args.compare_records)
        print("  one task outside Spark...", flush=True)
        outside = outside_spark(broker.bootstrap, topic, subset[0], ends[0], max(3, args.repeats))
        common = {
            "bootstrap": broker.bootstrap,
            "topic": topic,
            "records": args.records,
            "value_bytes": args.value_bytes,
            "repeats": args.repeats,
            "compare_ends": None if compare_all else subset,
            "broker_pid": broker.pid,
        }
        print("  Spark, records decoder (child process)...", flush=True)
        before = run_child(
            {**common, "decoder": "records", "full": compare_all, "parquet_dir": None}, work_dir
        )
        print("  Spark, columnar decoder (child process)...", flush=True)
        after = run_child(
            {**common, "decoder": "columnar", "full": True, "parquet_dir": str(work_dir / "parquet")},
            work_dir,
        )
    finally:
        broker.stop()
        if not args.keep_dir:
            shutil.rmtree(work_dir, ignore_errors=True)
    record_bytes = args.value_bytes + args.key_bytes
    queries = [summarize(q, record_bytes) for q in before["queries"] + after["queries"]]
    full: dict[str, Any] = {}
    compare: dict[str, Any] = {}
    for q in queries:
        if q["label"] == "full":
            full.setdefault(q["query"], {})[q["source"]] = q
        if q["source"].startswith("kipling/") and q["label"] == ("full" if compare_all else "compare"):
            compare.setdefault(q["query"], {})[q["source"].split("/")[1]] = q
    for pair in full.values():
        pair["ratio"] = pair["kipling/columnar"]["warm_rows_per_s"] / pair["parquet"]["warm_rows_per_s"]
        pair["cpu_ratio"] = (
            pair["kipling/columnar"]["warm_rows_per_cpu_s"] / pair["parquet"]["warm_rows_per_cpu_s"]
        )
    for pair in compare.values():
        pair["speedup"] = pair["columnar"]["warm_rows_per_s"] / pair["records"]["warm_rows_per_s"]
        pair["cpu_speedup"] = pair["columnar"]["warm_rows_per_cpu_s"] / pair["records"]["warm_rows_per_cpu_s"]
    report = {
        "config": {
            "records": args.records,
            "partitions": args.partitions,
            "value_bytes": args.value_bytes,
            "key_bytes": args.key_bytes,
            "repeats": args.repeats,
            "compression": args.compression,
            "spark_master": SPARK_MASTER,
            "spark_conf": SPARK_CONF,
            "producer": "confluent-kafka acks=1 linger.ms=20 batch.size=1000000 batch.num.messages=10000",
        },
        "versions": versions(),
        "produce": produced,
        "compare_records": sum(subset),
        "outside_spark": outside,
        "full": full,
        "compare": compare,
        "spark_sessions": {
            "records": {k: v for k, v in before.items() if k != "queries"},
            "columnar": {k: v for k, v in after.items() if k != "queries"},
        },
        "total_seconds": time.perf_counter() - began,
    }
    print_tables(report)
    print(f"\ntotal {report['total_seconds']:.0f}s; wrote {write_results('spark_read', report)}")


if __name__ == "__main__":
    main()
