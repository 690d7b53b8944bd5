"""A kipling cluster of real broker processes on loopback for benchmarks, with CPU and log-size meters.

Modelled on tests/integration/cluster.py (which bench code must not import): broker 1 also runs the
controller on a CONTROLLER listener of its own port, and every broker names it in
``controller.quorum.voters``. Each broker is a :class:`bench.broker_proc.KiplingProcess` (``python -m
broker`` with its log dir in the cluster's temporary directory), so it gets the same CPU meters as
the single-node benches; here they also count the broker's follower processes, because on a cluster
the replication work (fetch, append) happens there, not in the broker process.

Settings are the cluster-wide keys of config/cluster/*.properties (Kafka's defaults for the lag and
session timeouts), except ``num.replica.fetchers=1`` and ``num.partitions=1``, and the default flush
policy: no ``log.flush.interval.messages``, so appends go to the page cache as in Kafka by default.
The tests' FAST_FAILOVER timeouts are not used: a 3 s ``replica.lag.time.max.ms`` on a saturated
2-core machine could drop a follower from the ISR mid-phase and make acks=-1 look cheaper than it is.

A broker's follower processes run in sessions of their own and exit when their broker's IPC channel
closes; :meth:`ClusterBroker.stop` still records their pids before stopping the broker and SIGKILLs,
by pid, any that outlive it, so an interrupted benchmark leaves no stray process behind.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from bench.broker_proc import CLOCK_TICKS, KiplingProcess, free_port

CLUSTER_ID = "kipling-bench-cluster"
CONTROLLER_NODE = 1

CLUSTER_SETTINGS: dict[str, str] = {
    "default.replication.factor": "3",
    "min.insync.replicas": "2",
    "offsets.topic.replication.factor": "3",
    "num.partitions": "1",
    "num.replica.fetchers": "1",
    "replica.lag.time.max.ms": "30000",
    "broker.session.timeout.ms": "9000",
    "broker.heartbeat.interval.ms": "2000",
    "unclean.leader.election.enable": "false",
    "auto.create.topics.enable": "false",
}
"""Cluster-wide keys given to every broker (``--set`` of the benchmark adds or replaces keys)."""


def process_cpu_seconds(pid: int) -> float:
    """utime + stime of one process from ``/proc/<pid>/stat`` (0 when it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def children(pid: int) -> list[int]:
    """Direct children of ``pid`` (``/proc/<pid>/task/*/children``)."""
    found: list[int] = []
    with contextlib.suppress(FileNotFoundError, ProcessLookupError):
        for task in os.scandir(f"/proc/{pid}/task"):
            with contextlib.suppress(FileNotFoundError, ProcessLookupError):
                found += [int(c) for c in Path(task.path, "children").read_text().split()]
    return found


def tree_cpu_seconds(pid: int) -> float:
    """CPU of a broker process plus its direct children (its follower processes), in seconds."""
    return process_cpu_seconds(pid) + sum(process_cpu_seconds(child) for child in children(pid))


def problem_lines(log_path: Path) -> list[str]:
    """Lines of a broker's output at WARNING and above, or from a traceback (the bench reports them)."""
    if not log_path.exists():
        return []
    keys = ("error", "warning", "critical", "traceback", "exception")
    return [
        line
        for line in log_path.read_text(errors="replace").splitlines()
        if any(key in line.lower() for key in keys) and not line.startswith("--- kipling-bench")
    ]


def _is_follower_process(pid: int) -> bool:
    """True when ``pid`` is still a ``python -m follower`` (not a recycled pid of something else)."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except (FileNotFoundError, ProcessLookupError):
        return False
    return b"-m" in argv and b"follower" in argv


class ClusterBroker(KiplingProcess):
    """One broker of a :class:`KiplingCluster`: restartable, stoppable with any signal, followers counted."""

    def __init__(self, node_id: int, work_dir: Path, overrides: Mapping[str, str]) -> None:
        self.name = f"broker-{node_id}"
        self.node_id = node_id
        super().__init__(work_dir, dict(overrides))
        self.stops = 0

    def follower_pids(self) -> list[int]:
        """The follower processes this broker runs now."""
        if not self.alive():
            return []
        return [pid for pid in children(self.pid) if _is_follower_process(pid)]

    def total_cpu_seconds(self) -> float:
        """CPU of the broker process plus its live follower processes (replication runs in the latter)."""
        if not self.alive():
            return 0.0
        return self.cpu_seconds() + sum(process_cpu_seconds(pid) for pid in self.follower_pids())

    def stop(self, timeout_s: float = 30.0, sig: int = signal.SIGTERM) -> None:
        """Send ``sig`` (SIGTERM: graceful; SIGKILL: a crash), wait, and make sure its followers are gone.

        Followers flush and exit on their own once the broker's channel closes; any still alive a few
        seconds after the broker (e.g. a broker killed while starting one) is killed by pid.
        """
        if self.process is None:
            return
        followers = self.follower_pids()
        self.stops += 1
        with self.log_path.open("ab") as out:  # marks in the log where the bench stopped it
            out.write(f"--- kipling-bench: sending {signal.Signals(sig).name}\n".encode())
        if self.process.poll() is None:
            self.process.send_signal(sig)
        try:
            self.process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.process = None
        deadline = time.monotonic() + 10.0
        while (alive := [p for p in followers if _is_follower_process(p)]) and time.monotonic() < deadline:
            time.sleep(0.05)
        for pid in alive:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

    def partition_dir(self, topic: str, partition: int) -> Path:
        """Kafka's layout: ``<log.dirs>/<topic>-<partition>``, whether it leads or follows it."""
        return self.log_dir / f"{topic}-{partition}"

    def log_size(self, topic: str, partition: int) -> int:
        """Bytes in the partition's ``.log`` segments on disk (0 when it has none yet).

        Segments are not preallocated and appends are plain writes, so a file's size is the data
        written so far, visible at once through the page cache, even before any fsync.
        """
        total = 0
        directory = self.partition_dir(topic, partition)
        with contextlib.suppress(FileNotFoundError):
            for entry in os.scandir(directory):
                if entry.name.endswith(".log"):
                    with contextlib.suppress(FileNotFoundError):
                        total += entry.stat().st_size
        return total

    def problem_lines(self) -> list[str]:
        """Its output at WARNING and above (it runs with ``--log-level warning``)."""
        return problem_lines(self.log_path)


class KiplingCluster:
    """``size`` brokers on loopback, broker 1 also the controller; started, stopped and cleaned as one."""

    def __init__(
        self,
        size: int = 3,
        work_dir: Path | None = None,
        settings: Mapping[str, str] | None = None,
        keep_dir: bool = False,
    ) -> None:
        self._own_dir = work_dir is None and not keep_dir
        self.work_dir = (
            Path(tempfile.mkdtemp(prefix="kipling-bench-cluster-")) if work_dir is None else work_dir
        )
        self.controller_port = free_port()
        self.settings = {**CLUSTER_SETTINGS, **(settings or {})}
        voters = f"{CONTROLLER_NODE}@127.0.0.1:{self.controller_port}"
        self.brokers: dict[int, ClusterBroker] = {}
        for node in range(1, size + 1):
            broker = ClusterBroker(node, self.work_dir / f"broker-{node}", {})
            listeners = f"PLAINTEXT://127.0.0.1:{broker.port}"
            roles = "broker"
            if node == CONTROLLER_NODE:
                listeners += f",CONTROLLER://127.0.0.1:{self.controller_port}"
                roles = "broker,controller"
            broker.overrides = {
                "node.id": str(node),
                "process.roles": roles,
                "controller.quorum.voters": voters,
                "controller.listener.names": "CONTROLLER",
                "listeners": listeners,
                "cluster.id": CLUSTER_ID,
                **self.settings,
            }
            self.brokers[node] = broker

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers.values())

    def start(self, timeout_s: float = 60.0) -> KiplingCluster:
        """Start every broker (the controller first) and wait until metadata lists all of them."""
        try:
            for broker in self.brokers.values():
                broker.start(timeout_s)
            self.wait_registered(timeout_s)
        except BaseException:
            self.stop()
            raise
        return self

    def wait_registered(self, timeout_s: float, nodes: int | None = None) -> None:
        """Wait until a Metadata response lists ``nodes`` brokers (all by default): unfenced, serving."""
        from confluent_kafka.admin import AdminClient

        want = len(self.brokers) if nodes is None else nodes
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        deadline = time.monotonic() + timeout_s
        seen = 0
        while time.monotonic() < deadline:
            with contextlib.suppress(Exception):
                seen = len(admin.list_topics(timeout=5).brokers)
                if seen >= want:
                    return
            time.sleep(0.1)
        raise TimeoutError(f"only {seen} of {want} brokers registered after {timeout_s}s")

    def total_cpu_seconds(self) -> float:
        """CPU of every live broker and follower process of the cluster."""
        return sum(b.total_cpu_seconds() for b in self.brokers.values())

    def cpu_breakdown(self) -> dict[str, float]:
        """CPU seconds per broker process and per broker's follower processes (``broker-N/followers``).

        Says where replication costs: the leader's broker process serves the followers' fetches, the
        follower processes of the other brokers receive and append.
        """
        out: dict[str, float] = {}
        for node, broker in self.brokers.items():
            if broker.alive():
                out[f"broker-{node}"] = broker.cpu_seconds()
                out[f"broker-{node}/followers"] = sum(
                    process_cpu_seconds(pid) for pid in broker.follower_pids()
                )
        return out

    def stop(self) -> None:
        """Stop every broker, controller last, even when stopping one of them fails."""
        for broker in reversed(list(self.brokers.values())):
            with contextlib.suppress(Exception):
                broker.stop()

    def cleanup(self) -> None:
        """Stop every broker, then remove the temporary directory unless it was given or kept."""
        self.stop()
        if self._own_dir:
            shutil.rmtree(self.work_dir, ignore_errors=True)

    def __enter__(self) -> KiplingCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.cleanup()


def wait_until(predicate: Callable[[], bool], timeout_s: float, what: str, interval_s: float = 0.05) -> float:
    """Poll ``predicate`` until true; return the seconds it took (TimeoutError after ``timeout_s``)."""
    start = time.monotonic()
    while not predicate():
        if time.monotonic() - start > timeout_s:
            raise TimeoutError(f"timed out after {timeout_s}s waiting for {what}")
        time.sleep(interval_s)
    return time.monotonic() - start


__all__ = [
    "CLUSTER_SETTINGS",
    "ClusterBroker",
    "KiplingCluster",
    "children",
    "problem_lines",
    "process_cpu_seconds",
    "tree_cpu_seconds",
    "wait_until",
]
