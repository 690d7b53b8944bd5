"""Decode and encode time per partition of 10,000-partition Fetch requests and responses.

A follower that replicates many partitions from one leader sends Fetch requests naming all of them
(a full fetch when its session starts, or without sessions), and the leader encodes a response
entry for each; at that size the per-partition cost of the codec is what limits the broker, so
this benchmark reports it in microseconds per partition, for Fetch v12 (topic names) and v16
(topic ids, the follower's id in the tagged ReplicaState), with compiled construct (what the
broker uses) against the interpreted construct of the same declaration. It also measures how much
the first use of a codec costs, since codecs are compiled lazily on first use.

Run from the repository root: ``python -m bench.codec`` (``--reps N`` to change repetitions).
"""

from __future__ import annotations

import argparse
import time
import uuid
from typing import Any

from bench import Timing, repeat, repeat_interleaved, write_results
from protocol.messages.fetch import FETCH_REQUEST, FETCH_RESPONSE
from protocol.records import Record, build_batch
from protocol.schema import MessageCodec, MessageSpec

TOPICS = 100
PARTITIONS_PER_TOPIC = 100
PARTITIONS = TOPICS * PARTITIONS_PER_TOPIC
VERSIONS = (12, 16)

# A follower's settings as Kafka's defaults give them (replica.fetch.*).
FOLLOWER_ID = 2
BROKER_EPOCH = 42
REPLICA_FETCH_WAIT_MAX_MS = 500
REPLICA_FETCH_MIN_BYTES = 1
REPLICA_FETCH_RESPONSE_MAX_BYTES = 10 * 1024 * 1024
REPLICA_FETCH_MAX_BYTES = 1024 * 1024


def topic_name(t: int) -> str:
    return f"bench-topic-{t:03d}"


def topic_id(t: int) -> uuid.UUID:
    """Deterministic ids, so every run encodes byte-identical messages."""
    return uuid.uuid5(uuid.NAMESPACE_URL, f"kipling-bench/{topic_name(t)}")


def fetch_request(version: int) -> dict[str, Any]:
    """A follower's full fetch (new session) of every partition it follows from one leader.

    Up to v14 the follower names itself in ``replica_id``; from v15 that field is gone and the tagged
    ReplicaState carries its id and broker epoch (KIP-903), which consumers leave out. Topics are
    named up to v12 and identified by id from v13.
    """
    topics = []
    for t in range(TOPICS):
        partitions = [
            {
                "partition": p,
                "current_leader_epoch": 7,
                "fetch_offset": 1_000_000 + 1_000 * t + p,
                "last_fetched_epoch": 7,
                "log_start_offset": 1_000 * p,
                "partition_max_bytes": REPLICA_FETCH_MAX_BYTES,
            }
            for p in range(PARTITIONS_PER_TOPIC)
        ]
        topics.append({"topic": topic_name(t), "topic_id": topic_id(t), "partitions": partitions})
    request: dict[str, Any] = {
        "max_wait_ms": REPLICA_FETCH_WAIT_MAX_MS,
        "min_bytes": REPLICA_FETCH_MIN_BYTES,
        "max_bytes": REPLICA_FETCH_RESPONSE_MAX_BYTES,
        "isolation_level": 0,
        "session_id": 0,
        "session_epoch": 0,  # INITIAL_EPOCH: ask for a new session
        "topics": topics,
        "forgotten_topics_data": [],
        "rack_id": "",
    }
    if version >= 15:
        request["replica_state"] = {"replica_id": FOLLOWER_ID, "replica_epoch": BROKER_EPOCH}
    else:
        request["replica_id"] = FOLLOWER_ID
    return request


def small_batch() -> bytes:
    """One uncompressed batch of three ~60-byte records: a partition with a trickle of traffic."""
    records = [
        Record(value=b"v" * 60, key=f"key-{i}".encode(), timestamp=1_700_000_000_000 + i) for i in range(3)
    ]
    return build_batch(records, base_offset=1_000_000, partition_leader_epoch=7)


def fetch_response(version: int, records: bytes) -> dict[str, Any]:
    """The leader's answer to :func:`fetch_request`: every partition returns ``records``.

    Tagged fields (diverging epoch, current leader, snapshot id, node endpoints) hold their
    defaults and are left off the wire, as on a healthy follower fetch.
    """
    responses = []
    for t in range(TOPICS):
        partitions = [
            {
                "partition_index": p,
                "error_code": 0,
                "high_watermark": 1_000_003 + 1_000 * t + p,
                "last_stable_offset": 1_000_003 + 1_000 * t + p,
                "log_start_offset": 1_000 * p,
                "aborted_transactions": None,
                "preferred_read_replica": -1,
                "records": records,
            }
            for p in range(PARTITIONS_PER_TOPIC)
        ]
        responses.append({"topic": topic_name(t), "topic_id": topic_id(t), "partitions": partitions})
    return {"throttle_time_ms": 0, "error_code": 0, "session_id": 123456, "responses": responses}


def per_partition_us(timing: Timing) -> dict[str, float]:
    return {
        "best_us_per_partition": timing.best_ns / 1_000 / PARTITIONS,
        "median_us_per_partition": timing.median_ns / 1_000 / PARTITIONS,
        "best_ms_total": timing.best_ns / 1e6,
        "median_ms_total": timing.median_ns / 1e6,
    }


def measure_first_compile(reps: int) -> list[dict[str, Any]]:
    """Cost of deriving and compiling a codec, which happens on its first use in a process.

    The very first compile also pays one-off costs (importing construct's code generator, warming
    caches), so it is reported separately from the median of fresh compiles that follow.
    """
    out = []
    for spec in (FETCH_REQUEST, FETCH_RESPONSE):
        for version in VERSIONS:
            start = time.perf_counter_ns()
            spec.codec(version)
            first_ns = time.perf_counter_ns() - start
            again = repeat(lambda s=spec, v=version: MessageCodec(s, v, compiled=True), reps)
            derive_only = repeat(lambda s=spec, v=version: MessageCodec(s, v, compiled=False), reps)
            out.append(
                {
                    "message": spec.name,
                    "version": version,
                    "first_compile_ms": first_ns / 1e6,
                    "recompile_median_ms": again.median_ns / 1e6,
                    "derive_struct_only_median_ms": derive_only.median_ns / 1e6,
                }
            )
    return out


def measure_message(spec: MessageSpec, version: int, obj: dict[str, Any], reps: int) -> dict[str, Any]:
    """Encode and decode ``obj`` with both codecs; check they agree before timing anything."""
    compiled = spec.codec(version)
    interpreted = spec.codec(version, compiled=False)
    wire = compiled.encode(obj)
    if interpreted.encode(obj) != wire:
        raise AssertionError(f"{spec.name} v{version}: compiled and interpreted encodings differ")
    if compiled.decode(wire) != interpreted.decode(wire):
        raise AssertionError(f"{spec.name} v{version}: compiled and interpreted decodings differ")
    decoded = compiled.decode(wire)
    if compiled.encode(decoded) != wire:
        raise AssertionError(f"{spec.name} v{version}: decode → encode is not byte-identical")

    result: dict[str, Any] = {"message": spec.name, "version": version, "wire_bytes": len(wire)}
    # Encode what a decode produced (MessageData): the broker's responses are built the same way
    # from decoded requests and domain objects, and both codecs then read the same kind of mapping.
    ops = {
        "decode": {
            "compiled": lambda: compiled.decode(wire),
            "interpreted": lambda: interpreted.decode(wire),
        },
        "encode": {
            "compiled": lambda: compiled.encode(decoded),
            "interpreted": lambda: interpreted.encode(decoded),
        },
    }
    for op, candidates in ops.items():
        timings = repeat_interleaved(candidates, reps)
        for mode, timing in timings.items():
            result[f"{op}_{mode}"] = per_partition_us(timing)
        result[f"{op}_speedup_median"] = timings["interpreted"].median_ns / timings["compiled"].median_ns
        result[f"{op}_speedup_best"] = timings["interpreted"].best_ns / timings["compiled"].best_ns
    return result


def print_table(rows: list[dict[str, Any]]) -> None:
    print(
        f"{'message':<14} {'v':>3} {'op':<7} {'compiled µs/p':>22} {'interpreted µs/p':>22} "
        f"{'speed-up':>15} {'KiB':>6}"
    )
    print(f"{'':<14} {'':>3} {'':<7} {'best / median':>22} {'best / median':>22} {'best / median':>15}")
    for row in rows:
        for op in ("decode", "encode"):
            c, i = row[f"{op}_compiled"], row[f"{op}_interpreted"]
            best_x, median_x = f"{row[f'{op}_speedup_best']:.1f}x", f"{row[f'{op}_speedup_median']:.1f}x"
            print(
                f"{row['message']:<14} {row['version']:>3} {op:<7} "
                f"{c['best_us_per_partition']:>10.3f} / {c['median_us_per_partition']:<9.3f} "
                f"{i['best_us_per_partition']:>10.3f} / {i['median_us_per_partition']:<9.3f} "
                f"{best_x:>7} / {median_x:<6} "
                f"{row['wire_bytes'] / 1024:>6.0f}"
            )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=11, help="repetitions per measurement (default 11)")
    args = parser.parse_args(argv)

    # First, before anything else touches the Fetch codecs in this process.
    compile_rows = measure_first_compile(args.reps)

    records = small_batch()
    rows = []
    for version in VERSIONS:
        rows.append(measure_message(FETCH_REQUEST, version, fetch_request(version), args.reps))
    for version in VERSIONS:
        rows.append(measure_message(FETCH_RESPONSE, version, fetch_response(version, records), args.reps))

    print(
        f"Fetch codec, {PARTITIONS:,} partitions ({TOPICS} topics x {PARTITIONS_PER_TOPIC}), {args.reps} reps"
    )
    print(f"response records per partition: one batch of {len(records)} bytes\n")
    print_table(rows)
    print("\nfirst use of a codec (lazy compile)")
    print(f"{'message':<14} {'v':>3} {'first ms':>9} {'recompile ms':>13} {'derive only ms':>15}")
    for row in compile_rows:
        print(
            f"{row['message']:<14} {row['version']:>3} {row['first_compile_ms']:>9.1f} "
            f"{row['recompile_median_ms']:>13.1f} {row['derive_struct_only_median_ms']:>15.2f}"
        )
    path = write_results(
        "codec",
        {
            "partitions": PARTITIONS,
            "topics": TOPICS,
            "repetitions": args.reps,
            "response_records_bytes_per_partition": len(records),
            "messages": rows,
            "first_compile": compile_rows,
        },
    )
    print(f"\nwrote {path}")


if __name__ == "__main__":
    main()
