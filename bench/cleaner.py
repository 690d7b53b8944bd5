"""Log compaction: the cleaner's speed, the owner's share of a round, and produce with the cleaner on.

Two parts, one run:

* **Cleaning a log** (in this process, storage API only): a log of ``--mb`` MB of 1 KiB values over
  ``--keys`` keys in 1 MB segments, cleaned in one round. The cleaner's half
  (:func:`storage.cleaner.write_cleaned_segments`, what a cleaner process runs) is timed apart from
  the owner's half (``PartitionLog.replace_segments`` for every group, what the broker runs on its
  event loop): MB/s read by the cleaner, and milliseconds of event-loop time per round on the owner.
* **Produce with the cleaner running vs not**: one kipling broker per round, in turn with
  ``log.cleaner.enable=false``, ``true`` (``log.cleaner.backoff.ms=100``) and ``true`` throttled by
  ``log.cleaner.io.max.bytes.per.second`` (``--throttle-mb-s``), each producing
  ``--produce-mb`` MB of keyed 1 KiB values (``--keys`` keys) with confluent-kafka to a compacted
  topic (1 MB segments, ``min.cleanable.dirty.ratio=0.1``). Throughput, the broker process's
  CPU-seconds per GB (the cleaner process's CPU is its own, not the broker's), the rounds the
  cleaner installed and the topic's size on disk at the end.

Prints figures and ratios, never asserts. Run from the repository root: ``python -m bench.cleaner``
(``--mb``, ``--keys``, ``--produce-mb``, ``--rounds``, ``--throttle-mb-s``); writes
``bench/results/cleaner.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from bench import write_results
from bench.broker_proc import KiplingProcess
from protocol.records import Record, build_batch
from storage.cleaner import OffsetMap, plan_clean, write_cleaned_segments
from storage.clock import SystemClock
from storage.config import LogConfig
from storage.log import PartitionLog

VALUE_SIZE = 1024
MB = 1_000_000
GB = 1_000_000_000
SEGMENT_BYTES = 1_048_576
RECORDS_PER_BATCH = 16


# -- part 1: one round in this process -----------------------------------------------------------------


def build_log(directory: Path, mb: int, keys: int) -> PartitionLog:
    config = LogConfig(segment_bytes=SEGMENT_BYTES, file_delete_delay_ms=0, cleanup_policy=("compact",))
    log = PartitionLog.open(directory / "bench-0", config, SystemClock())
    value = os.urandom(VALUE_SIZE)
    now = int(time.time() * 1000)
    written = 0
    i = 0
    while written < mb * MB:
        records = [Record(value, b"key-%d" % ((i + j) % keys), (), now) for j in range(RECORDS_PER_BATCH)]
        batch = build_batch(records)
        log.append_as_leader(batch, 0)
        written += len(batch)
        i += RECORDS_PER_BATCH
    log.roll()
    log.update_high_watermark(log.log_end_offset)
    log.flush()
    return log


def clean_once(mb: int, keys: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="kipling-bench-cleaner-") as tmp:
        log = build_log(Path(tmp), mb, keys)
        before = log.size_in_bytes
        segments = len(log.segments())
        t0 = time.perf_counter()
        task = plan_clean(log, first_dirty_offset=0, first_uncleanable_offset=log.log_end_offset, now_ms=0)
        plan_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        result = write_cleaned_segments(task, offset_map=OffsetMap())
        clean_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        for group in result.groups:
            log.replace_segments(group.replaced, token=result.token)
        install_s = time.perf_counter() - t0
        after = log.size_in_bytes
        log.close()
    return {
        "log_mb": before / MB,
        "segments": segments,
        "keys": keys,
        "groups": len(result.groups),
        "cleaner_seconds": clean_s,
        "cleaner_mb_per_s": result.bytes_read / MB / clean_s,
        "owner_plan_ms": plan_s * 1000,
        "owner_install_ms": install_s * 1000,
        "owner_install_ms_per_group": install_s * 1000 / max(len(result.groups), 1),
        "bytes_read": result.bytes_read,
        "bytes_written": result.bytes_written,
        "log_mb_after": after / MB,
    }


# -- part 2: produce with the cleaner on and off --------------------------------------------------------


def create_compacted_topic(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    configs = {
        "cleanup.policy": "compact",
        "segment.bytes": str(SEGMENT_BYTES),
        "min.cleanable.dirty.ratio": "0.1",
    }
    for future in admin.create_topics([NewTopic(topic, 1, 1, config=configs)]).values():
        future.result(timeout=60)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        meta = admin.list_topics(topic, timeout=10).topics.get(topic)
        if meta is not None and meta.error is None and all(p.leader >= 0 for p in meta.partitions.values()):
            return
        time.sleep(0.1)
    raise TimeoutError(f"topic {topic} not ready")


def produce_round(cleaner: bool, mb: int, keys: int, throttle_mb_s: float | None = None) -> dict[str, Any]:
    overrides = {"log.cleaner.enable": str(cleaner).lower(), "log.cleaner.backoff.ms": "100"}
    if throttle_mb_s is not None:
        overrides["log.cleaner.io.max.bytes.per.second"] = str(throttle_mb_s * MB)
    broker = KiplingProcess(overrides=overrides)
    broker.start()
    try:
        topic = "compacted"
        create_compacted_topic(broker.bootstrap, topic)
        producer = Producer(
            {
                "bootstrap.servers": broker.bootstrap,
                "acks": "1",
                "linger.ms": 5,
                "batch.size": 1_000_000,
                "compression.type": "none",
                "enable.idempotence": False,
                "queue.buffering.max.kbytes": 1_048_576,
            }
        )
        producer.list_topics(topic, timeout=10)
        value = os.urandom(VALUE_SIZE)
        target = mb * MB // VALUE_SIZE
        cpu0, t0 = broker.cpu_seconds(), time.perf_counter()
        sent = 0
        while sent < target:
            try:
                producer.produce(topic, value, key=b"key-%d" % (sent % keys), partition=0)
            except BufferError:
                producer.poll(0.001)
                continue
            sent += 1
            if sent % 1000 == 0:
                producer.poll(0)
        left = producer.flush(120)
        elapsed = time.perf_counter() - t0
        cpu = broker.cpu_seconds() - cpu0
        del producer
        volume = sent * VALUE_SIZE
        directory = broker.log_dir / f"{topic}-0"

        def on_disk() -> int:
            total = 0
            for path in directory.glob("*.log"):
                with contextlib.suppress(FileNotFoundError):  # replaced meanwhile by the cleaner
                    total += path.stat().st_size
            return total

        at_flush = on_disk()
        compacted_after: float | None = None
        if cleaner:  # how long until the cleaner caught up with the writes (bounded)
            t1 = time.perf_counter()
            while time.perf_counter() - t1 < 60:
                if on_disk() < at_flush / 2:
                    compacted_after = time.perf_counter() - t1
                    break
                time.sleep(0.1)
        return {
            "cleaner": cleaner,
            "throttle_mb_per_s": throttle_mb_s,
            "messages": sent,
            "unacknowledged": left,
            "seconds": elapsed,
            "mb_per_s": volume / MB / elapsed,
            "broker_cpu_s_per_gb": cpu / (volume / GB),
            "last_clean_time_s": broker.metric("kafka_log_logcleaner_max_clean_time_secs"),
            "topic_mb_at_flush": at_flush / MB,
            "topic_mb_on_disk": on_disk() / MB,
            "seconds_after_flush_until_halved": compacted_after,
        }
    finally:
        broker.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=64, help="size of the log cleaned in part 1")
    parser.add_argument("--keys", type=int, default=1000)
    parser.add_argument("--produce-mb", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument(
        "--throttle-mb-s", type=float, default=20.0, help="log.cleaner.io.max.bytes.per.second"
    )
    args = parser.parse_args()

    print(f"part 1: one cleaning round of a {args.mb} MB log, {args.keys} keys, 1 MB segments")
    cleaned = clean_once(args.mb, args.keys)
    print(
        f"  cleaner (its own process in the broker): {cleaned['cleaner_mb_per_s']:.1f} MB/s read, "
        f"{cleaned['cleaner_seconds']:.2f} s for {cleaned['log_mb']:.1f} MB "
        f"-> {cleaned['log_mb_after']:.2f} MB"
    )
    print(
        f"  owner (broker event loop): plan {cleaned['owner_plan_ms']:.1f} ms, install "
        f"{cleaned['owner_install_ms']:.1f} ms for {cleaned['groups']} group(s) "
        f"({cleaned['owner_install_ms_per_group']:.1f} ms each)"
    )

    print(f"part 2: produce {args.produce_mb} MB of keyed 1 KiB values to a compacted topic, cleaner on/off")
    variants: dict[str, tuple[bool, float | None]] = {
        "off": (False, None),
        "on": (True, None),
        f"on, throttled to {args.throttle_mb_s:g} MB/s": (True, args.throttle_mb_s),
    }
    rounds: dict[str, list[dict[str, Any]]] = {name: [] for name in variants}
    for _ in range(args.rounds):
        for name, (cleaner, throttle) in variants.items():
            result = produce_round(cleaner, args.produce_mb, args.keys, throttle)
            rounds[name].append(result)
            halved = result["seconds_after_flush_until_halved"]
            print(
                f"  cleaner {name:>24}: {result['mb_per_s']:7.1f} MB/s, broker "
                f"{result['broker_cpu_s_per_gb']:.2f} CPU-s/GB, topic {result['topic_mb_at_flush']:.1f} MB "
                f"at flush, {result['topic_mb_on_disk']:.1f} MB at the end"
                + ("" if halved is None else f" (halved {halved:.1f} s after the flush)")
            )
    medians = {name: statistics.median(r["mb_per_s"] for r in rs) for name, rs in rounds.items()}
    off = medians["off"]
    for name, mb_s in medians.items():
        print(
            f"  produce MB/s, cleaner {name} (median of rounds): {mb_s:.1f} = {mb_s / off:.2f}x cleaner off"
        )
    path = write_results(
        "cleaner",
        {
            "clean_round": cleaned,
            "produce": {"rounds": rounds, "median_mb_per_s": medians},
        },
    )
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
