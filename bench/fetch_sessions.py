"""Fetch-session scaling: broker CPU and wire bytes per fetch, incremental (KIP-227) against sessionless.

DESIGN.md promises that an incremental fetch costs O(changed partitions), not O(partitions in the
session). This benchmark checks it on a real broker process, from outside, over the wire:

* a broker is started fresh for each session size N, and N partitions are created (N/100 topics of
  100 partitions; ``segment.index.bytes`` is set to one page so the preallocated indexes stay small);
* one client opens a session with a full fetch of all N partitions (epoch 0), then runs rounds of:
  one Produce request writing one small batch to 1 % of the partitions (a fresh random sample each
  round), then one incremental fetch that lists only the partitions whose fetch offset moved since
  the previous request, as kafka-python does (forgetting nothing, adding nothing);
* a second client runs the same rounds with sessionless full fetches (session id 0, epoch -1)
  listing all N partitions, as librdkafka and aiokafka always do;
* a third mode keeps the number of changed partitions fixed (``--fixed-changed``, 10 by default)
  whatever N: with 1 % the work per fetch grows with N by design, so only this mode can show the
  flat line the design aims for.

Broker CPU per fetch is the broker process's run time (``/proc/<pid>/task/*/schedstat``, ns)
read just before the fetch is sent and just after its response has arrived, so the produce of the
round is not counted; ``/proc/<pid>/stat`` ticks over the same windows are reported as a check.
Modes alternate in blocks on the same broker; the first rounds of every block are dropped, because
they carry the catch-up of what the other mode's rounds produced. Fetch v12 is used (topic names,
what kafka-python sends); ``--fetch-version 13`` switches to topic ids.

Session sizes that the machine cannot host are skipped, not faked. Descriptors no longer limit the
size: a broker keeps at most ``kipling.log.open.files.max`` of them for segment files, whatever N
(storage/file_pool.py), and maps none; the bench still measures maps per partition after the first
size and skips a size that ``vm.max_map_count`` could not hold.

Run from the repository root: ``python -m bench.fetch_sessions`` (``--sizes``, ``--blocks``,
``--rounds``, ``--fixed-changed``, ``--phase-seconds``); writes ``bench/results/fetch_sessions.json``
and ``bench/results/fetch_sessions.png`` (when matplotlib is installed).
"""

from __future__ import annotations

import argparse
import random
import resource
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench import RESULTS_DIR, write_results
from bench.broker_proc import KiplingProcess
from bench.scaling_plot import plot_session_scaling
from bench.wire import Connection, api_ranges, create_topics, pick_version
from protocol.api_keys import ApiKey
from protocol.records import Record, build_batch

PARTITIONS_PER_TOPIC = 100
CHANGED_FRACTION = 0.01
TOPIC_CONFIGS = {"segment.index.bytes": "4096"}
"""One page per index: kipling preallocates indexes to this size, and N of them are created."""

PRODUCE_VERSION = 9
MAX_WAIT_MS = 500
PARTITION_MAX_BYTES = 1 << 20
RESPONSE_MAX_BYTES = 50 << 20
SESSION_ERRORS = {70, 71, 106}
"""FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH, FETCH_SESSION_TOPIC_ID_ERROR."""
MAP_MARGIN = 2_000
FILL_STEP = 500


def topic_name(t: int) -> str:
    return f"fs-{t:04d}"


@dataclass
class Layout:
    """N partitions numbered 0..N-1 globally, 100 per topic; topic ids when the fetch version needs them."""

    n: int
    topic_ids: dict[str, Any] = field(default_factory=dict)

    @property
    def topics(self) -> list[tuple[str, int]]:
        full, rest = divmod(self.n, PARTITIONS_PER_TOPIC)
        sizes = [PARTITIONS_PER_TOPIC] * full + ([rest] if rest else [])
        return [(topic_name(t), size) for t, size in enumerate(sizes)]

    @staticmethod
    def split(g: int) -> tuple[int, int]:
        return divmod(g, PARTITIONS_PER_TOPIC)


@dataclass
class Sample:
    """One measured fetch."""

    cpu_us: float
    cpu_ticks_s: float
    wall_us: float
    request_bytes: int
    response_bytes: int
    partitions_listed: int
    partitions_returned: int
    partitions_with_records: int


class FetchClient:
    """One consumer's fetch state: offsets of all N partitions and, in session mode, its session."""

    def __init__(self, conn: Connection, layout: Layout, version: int, *, session: bool) -> None:
        self.conn = conn
        self.layout = layout
        self.version = version
        self.session = session
        self.offsets = [0] * layout.n
        self.session_id = 0
        self.epoch = 0 if session else -1
        self.moved: set[int] = set()
        self.session_restarts = 0
        self.partition_errors = 0

    def body(self, partitions: list[int], max_wait_ms: int = MAX_WAIT_MS) -> dict[str, Any]:
        topics: dict[int, list[dict[str, Any]]] = {}
        for g in sorted(partitions):
            t, p = Layout.split(g)
            topics.setdefault(t, []).append(
                {
                    "partition": p,
                    "current_leader_epoch": -1,
                    "fetch_offset": self.offsets[g],
                    "last_fetched_epoch": -1,
                    "log_start_offset": -1,
                    "partition_max_bytes": PARTITION_MAX_BYTES,
                }
            )
        return {
            "replica_id": -1,
            "max_wait_ms": max_wait_ms,
            "min_bytes": 1,
            "max_bytes": RESPONSE_MAX_BYTES,
            "isolation_level": 0,
            "session_id": self.session_id,
            "session_epoch": self.epoch,
            "topics": [
                {
                    "topic": topic_name(t),
                    "topic_id": self.layout.topic_ids.get(topic_name(t)),
                    "partitions": parts,
                }
                for t, parts in topics.items()
            ],
            "forgotten_topics_data": [],
            "rack_id": "",
        }

    def next_request(self) -> list[int]:
        """The partitions the next request lists: all (full, new session) or those that moved."""
        if not self.session or self.epoch == 0:
            return list(range(self.layout.n))
        return sorted(self.moved)

    def fetch(self, broker: KiplingProcess, max_wait_ms: int = MAX_WAIT_MS) -> Sample:
        listed = self.next_request()
        correlation_id, frame = self.conn.encode(ApiKey.FETCH, self.version, self.body(listed, max_wait_ms))
        cpu0, ticks0, t0 = broker.cpu_ns(), broker.cpu_seconds(), time.perf_counter_ns()
        self.conn.send_encoded(frame)
        raw = self.conn.read_frame()
        t1, cpu1, ticks1 = time.perf_counter_ns(), broker.cpu_ns(), broker.cpu_seconds()
        body = Connection.decode(raw, ApiKey.FETCH, self.version, correlation_id).body
        returned, with_records = self._apply(body)
        return Sample(
            cpu_us=(cpu1 - cpu0) / 1e3,
            cpu_ticks_s=ticks1 - ticks0,
            wall_us=(t1 - t0) / 1e3,
            request_bytes=len(frame),
            response_bytes=len(raw) + 4,
            partitions_listed=len(listed),
            partitions_returned=returned,
            partitions_with_records=with_records,
        )

    def _apply(self, body: Any) -> tuple[int, int]:
        """Advance offsets past what came back; set up the session's next epoch (or restart it)."""
        if body.error_code in SESSION_ERRORS and self.session:
            self.session_restarts += 1
            self.session_id, self.epoch, self.moved = 0, 0, set()
            return 0, 0
        if body.error_code:
            raise RuntimeError(f"fetch failed with top-level error {body.error_code}")
        self.moved = set()
        returned = with_records = 0
        names = {topic_name(t): t for t in range(len(self.layout.topics))}
        ids = {v: names[k] for k, v in self.layout.topic_ids.items() if v is not None}
        for topic in body.responses:
            t = names[topic.topic] if self.version < 13 else ids[topic.topic_id]
            for part in topic.partitions:
                returned += 1
                if part.error_code:
                    self.partition_errors += 1
                    continue
                if part.records:
                    # Each partition holds a few tiny batches at most: the response carries all of
                    # them, so the high watermark is the next fetch offset.
                    g = t * PARTITIONS_PER_TOPIC + part.partition_index
                    self.offsets[g] = part.high_watermark
                    self.moved.add(g)
                    with_records += 1
        if self.session:
            if self.epoch == 0:
                self.session_id = body.session_id
                if self.session_id == 0:
                    raise RuntimeError("the broker did not grant a fetch session")
            self.epoch += 1
        return returned, with_records


class Producer:
    """One Produce request per round: one small batch to each chosen partition, acks=1."""

    def __init__(self, conn: Connection, version: int) -> None:
        self.conn = conn
        self.version = version
        self.batch = build_batch([Record(value=b"x" * 100, key=b"k", timestamp=int(time.time() * 1000))])

    def produce(self, partitions: list[int]) -> None:
        topics: dict[int, list[dict[str, Any]]] = {}
        for g in sorted(partitions):
            t, p = Layout.split(g)
            topics.setdefault(t, []).append({"index": p, "records": self.batch})
        body = {
            "transactional_id": None,
            "acks": 1,
            "timeout_ms": 30_000,
            "topic_data": [{"name": topic_name(t), "partition_data": parts} for t, parts in topics.items()],
        }
        response = self.conn.request(ApiKey.PRODUCE, self.version, body).response.body
        for topic in response.responses:
            for part in topic.partition_responses:
                if part.error_code:
                    raise RuntimeError(f"produce to {topic.name}-{part.index} failed: {part.error_code}")


def summarize(samples: list[Sample], changed: int) -> dict[str, Any]:
    def med(fn: Callable[[Sample], float]) -> float:
        return statistics.median(fn(s) for s in samples)

    def mean(fn: Callable[[Sample], float]) -> float:
        return statistics.fmean(fn(s) for s in samples)

    return {
        "fetches": len(samples),
        "changed_per_round": changed,
        "cpu_us_mean": mean(lambda s: s.cpu_us),
        "cpu_us_median": med(lambda s: s.cpu_us),
        "cpu_us_p10": statistics.quantiles([s.cpu_us for s in samples], n=10)[0]
        if len(samples) > 1
        else None,
        "cpu_us_per_changed_partition": mean(lambda s: s.cpu_us) / max(changed, 1),
        "cpu_us_mean_from_stat_ticks": mean(lambda s: s.cpu_ticks_s) * 1e6,
        "wall_us_median": med(lambda s: s.wall_us),
        "request_bytes_mean": mean(lambda s: s.request_bytes),
        "response_bytes_mean": mean(lambda s: s.response_bytes),
        "bytes_mean": mean(lambda s: s.request_bytes + s.response_bytes),
        "partitions_listed_mean": mean(lambda s: s.partitions_listed),
        "partitions_returned_mean": mean(lambda s: s.partitions_returned),
        "partitions_with_records_mean": mean(lambda s: s.partitions_with_records),
    }


def capacity(broker: KiplingProcess, n_created: int, fds_before: int, maps_before: int) -> dict[str, Any]:
    """How many partitions one broker process can host here, from what ``n_created`` took.

    Descriptors are pooled (a bounded number whatever N), so only memory maps can cap N."""
    fds_pp = (broker.open_files() - fds_before) / n_created
    maps_pp = (broker.memory_maps() - maps_before) / n_created
    max_maps = int(Path("/proc/sys/vm/max_map_count").read_text())
    by_maps = int((max_maps - maps_before - MAP_MARGIN) / maps_pp) if maps_pp else 10**9
    return {
        "fds_per_partition": fds_pp,
        "maps_per_partition": maps_pp,
        "rlimit_nofile_hard": resource.getrlimit(resource.RLIMIT_NOFILE)[1],
        "vm_max_map_count": max_maps,
        "max_partitions_by_maps": by_maps,
        "max_partitions": by_maps,
    }


def run_size(n: int, args: argparse.Namespace, rng: random.Random) -> tuple[dict[str, Any], dict[str, Any]]:
    """Start a broker, create N partitions, alternate the modes in blocks; returns (figures, capacity)."""
    broker = KiplingProcess()
    broker.start()
    try:
        with Connection("127.0.0.1", broker.port, timeout_s=600) as admin:
            ranges = api_ranges(admin)
            fetch_version = pick_version(ranges, ApiKey.FETCH, args.fetch_version, args.fetch_version)
            produce_version = pick_version(ranges, ApiKey.PRODUCE, 3, PRODUCE_VERSION)
            layout = Layout(n)
            fds0, maps0 = broker.open_files(), broker.memory_maps()
            t0 = time.perf_counter()
            ids = create_topics(admin, layout.topics, TOPIC_CONFIGS, version=7)
            create_s = time.perf_counter() - t0
            layout.topic_ids = ids
            cap = capacity(broker, n, fds0, maps0)
            print(
                f"  N={n:,}: created in {create_s:.1f}s; {cap['fds_per_partition']:.1f} fds and "
                f"{cap['maps_per_partition']:.1f} maps per partition"
            )
        with (
            Connection("127.0.0.1", broker.port, client_id="bench-incremental", timeout_s=120) as c_inc,
            Connection("127.0.0.1", broker.port, client_id="bench-sessionless", timeout_s=120) as c_full,
            Connection("127.0.0.1", broker.port, client_id="bench-producer", timeout_s=120) as c_prod,
        ):
            producer = Producer(c_prod, produce_version)
            incremental = FetchClient(c_inc, layout, fetch_version, session=True)
            sessionless = FetchClient(c_full, layout, fetch_version, session=False)
            created = incremental.fetch(broker, max_wait_ms=0)  # epoch 0: the session is created here
            changed_1pct = max(1, round(n * CHANGED_FRACTION))
            modes: dict[str, tuple[FetchClient, int]] = {
                "incremental": (incremental, changed_1pct),
                "sessionless_full": (sessionless, changed_1pct),
                "incremental_fixed": (incremental, min(args.fixed_changed, n)),
            }
            samples: dict[str, list[Sample]] = {mode: [] for mode in modes}
            spent: dict[str, float] = dict.fromkeys(modes, 0.0)
            for _block in range(args.blocks):
                for mode, (client, changed) in modes.items():
                    if spent[mode] > args.phase_seconds and len(samples[mode]) >= args.min_rounds:
                        continue
                    start = time.perf_counter()
                    for r in range(args.rounds + args.warmup):
                        producer.produce(rng.sample(range(n), changed))
                        if args.settle_ms:
                            time.sleep(args.settle_ms / 1000)
                        sample = client.fetch(broker)
                        if r >= args.warmup:
                            samples[mode].append(sample)
                    spent[mode] += time.perf_counter() - start
            cached = broker.metric("kafka_server_fetchsessioncache_numincrementalfetchpartitionscached")
            figures = {
                "n": n,
                "topics": len(layout.topics),
                "create_seconds": create_s,
                "fetch_version": fetch_version,
                "produce_version": produce_version,
                "session_partitions_cached": cached,
                "session_restarts": incremental.session_restarts,
                "partition_errors": incremental.partition_errors + sessionless.partition_errors,
                "broker_rss_mb": broker.rss_mb(),
                "session_creating_fetch": {
                    "cpu_us": created.cpu_us,
                    "request_bytes": created.request_bytes,
                    "response_bytes": created.response_bytes,
                },
                **{mode: summarize(samples[mode], modes[mode][1]) for mode in modes},
            }
            return figures, cap
    finally:
        broker.cleanup()


def print_table(runs: list[dict[str, Any]]) -> None:
    header = (
        f"{'N':>8} {'mode':<18} {'changed':>7} {'CPU µs/fetch':>13} {'(median)':>9} {'µs/changed':>10} "
        f"{'req B':>10} {'resp B':>10} {'listed':>7} {'returned':>8}"
    )
    print(header)
    print("-" * len(header))
    for run in runs:
        for mode in ("sessionless_full", "incremental", "incremental_fixed"):
            f = run[mode]
            print(
                f"{run['n']:>8,} {mode:<18} {f['changed_per_round']:>7} {f['cpu_us_mean']:>13,.0f} "
                f"{f['cpu_us_median']:>9,.0f} {f['cpu_us_per_changed_partition']:>10,.1f} "
                f"{f['request_bytes_mean']:>10,.0f} {f['response_bytes_mean']:>10,.0f} "
                f"{f['partitions_listed_mean']:>7,.0f} {f['partitions_returned_mean']:>8,.1f}"
            )
        full, inc = run["sessionless_full"], run["incremental"]
        print(
            f"{'':>8} full/incremental: CPU x{full['cpu_us_mean'] / inc['cpu_us_mean']:.1f}, "
            f"bytes x{full['bytes_mean'] / inc['bytes_mean']:.1f}; session caches "
            f"{run['session_partitions_cached']:,.0f} partitions, {run['session_restarts']} restarts"
        )


def plot(runs: list[dict[str, Any]], path: Path) -> Path | None:
    return plot_session_scaling(
        runs,
        path,
        cpu_key="cpu_us_mean",
        cpu_title="broker CPU per fetch",
        cpu_unit="µs (schedstat)",
        suptitle=(
            f"kipling fetch sessions: Fetch v{runs[0]['fetch_version']}, 1 small batch per changed partition"
        ),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="1000,10000,100000", help="session sizes N, comma-separated")
    parser.add_argument("--blocks", type=int, default=4, help="blocks per mode (modes alternate by block)")
    parser.add_argument("--rounds", type=int, default=50, help="measured rounds per block")
    parser.add_argument("--warmup", type=int, default=2, help="rounds dropped at the start of each block")
    parser.add_argument("--fixed-changed", type=int, default=10, help="changed partitions in the fixed mode")
    parser.add_argument(
        "--phase-seconds", type=float, default=60.0, help="stop adding blocks to a mode after"
    )
    parser.add_argument("--min-rounds", type=int, default=20, help="...once it has at least this many rounds")
    parser.add_argument("--fetch-version", type=int, default=12, help="12 (topic names) or 13+ (topic ids)")
    parser.add_argument(
        "--no-fill", action="store_true", help="do not replace unfit sizes by the largest fit"
    )
    parser.add_argument(
        "--settle-ms",
        type=float,
        default=0.0,
        help="pause between a produce and its fetch (0: back to back; a pause lets the broker go "
        "idle, and a cold cache makes the fetch cost more, not less)",
    )
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    sizes = sorted({int(s) for s in args.sizes.split(",")})
    runs: list[dict[str, Any]] = []
    skipped: list[dict[str, Any]] = []
    cap: dict[str, Any] | None = None
    queue = list(sizes)
    filled = False
    while queue:
        n = queue.pop(0)
        if cap is not None and n > cap["max_partitions"]:
            needs = {
                "n": n,
                "maps_needed": round(n * cap["maps_per_partition"]),
                "vm_max_map_count": cap["vm_max_map_count"],
            }
            skipped.append(needs)
            print(
                f"  N={n:,} skipped: needs ~{needs['maps_needed']:,} memory maps "
                f"(vm.max_map_count {needs['vm_max_map_count']:,})"
            )
            fit = cap["max_partitions"] // FILL_STEP * FILL_STEP
            if not args.no_fill and not filled and fit > max([r["n"] for r in runs], default=0):
                queue.insert(0, fit)
                filled = True
                print(f"  measuring N={fit:,} instead, the largest multiple of {FILL_STEP} that fits")
            continue
        print(f"N={n:,}: starting a broker")
        figures, measured_cap = run_size(n, args, rng)
        cap = cap or measured_cap
        runs.append(figures)
    print()
    print_table(runs)
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    png = plot(runs, RESULTS_DIR / "fetch_sessions.png") if runs else None
    out = write_results(
        "fetch_sessions",
        {
            "fetch_version": runs[0]["fetch_version"] if runs else None,
            "changed_fraction": CHANGED_FRACTION,
            "cpu_meter": "broker process run time from /proc/<pid>/task/*/schedstat around each fetch",
            "capacity": cap,
            "skipped_sizes": skipped,
            "runs": runs,
            "plot": str(png) if png else None,
        },
    )
    print(f"\nwrote {out}" + (f" and {png}" if png else ""))


if __name__ == "__main__":
    main()
