"""A kipling cluster of real broker processes on loopback for benchmarks, with CPU and log-size meters.

Modelled on tests/integration/cluster.py (which bench code must not import): the first ``voters``
brokers (by default all of them) are combined nodes, ``process.roles=broker,controller``, each with a
CONTROLLER listener on a port of its own, and every broker names them in ``controller.quorum.voters``.
The voters elect a Raft leader, the active controller; it can be any of them and moves when it dies,
so :meth:`KiplingCluster.active_controller` asks the voters (DescribeQuorum, api 55: only the leader
answers without an error). ``voters=1`` keeps the older layout, broker 1 the only controller. A voter
is not ready before a majority of voters runs, so :meth:`KiplingCluster.start` launches every broker
first and only then waits for each one's port. Each broker is a
:class:`bench.broker_proc.KiplingProcess` (``python -m broker`` with its log dir in the cluster's
temporary directory), so it gets the same CPU meters as the single-node benches; here they also count
the broker's follower processes, because on a cluster the replication work (fetch, append) happens
there, not in the broker process.

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
import datetime
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from bench.broker_proc import KiplingProcess, free_port, own_cpu_seconds, stat_fields
from bench.broker_proc import child_pids as children

CLUSTER_ID = "kipling-bench-cluster"
CONTROLLER_NODE = 1
"""The only controller of the single-voter layout (``voters=1``); the first voter in any layout."""
DESCRIBE_QUORUM_VERSION = 2

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
    fields = stat_fields(pid)
    return 0.0 if fields is None else own_cpu_seconds(fields)


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


@dataclass(frozen=True)
class QuorumState:
    """The Raft leader's DescribeQuorum answer: who leads in which epoch, and each voter's progress."""

    leader: int
    epoch: int
    high_watermark: int
    voter_log_end: dict[int, int]
    """Voter node id → log end offset of the metadata log, as the leader last saw it."""


def describe_quorum(port: int, timeout_s: float = 2.0) -> QuorumState | None:
    """The metadata quorum as the voter on controller ``port`` describes it (DescribeQuorum v2).

    None when that voter does not lead (it answers NOT_LEADER_OR_FOLLOWER at partition level), or
    does not answer at all within ``timeout_s`` (down, starting, refusing the connection).
    """
    import asyncio
    import logging

    import structlog

    from client.connection import KafkaConnection
    from metadata.raft import wire
    from protocol.api_keys import ApiKey

    if not structlog.is_configured():  # the client logs every connection at debug level otherwise
        structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))

    async def ask() -> QuorumState | None:
        connection = await KafkaConnection.open(
            "127.0.0.1", port, connect_timeout_s=timeout_s, request_timeout_s=timeout_s
        )
        try:
            body = wire.describe_quorum_request_body()
            response = await connection.request(ApiKey.DESCRIBE_QUORUM, DESCRIBE_QUORUM_VERSION, body)
        finally:
            connection.close()
            await connection.wait_closed()
        partition = response.topics[0].partitions[0]
        if response.error_code or partition.error_code:
            return None
        return QuorumState(
            leader=int(partition.leader_id),
            epoch=int(partition.leader_epoch),
            high_watermark=int(partition.high_watermark),
            voter_log_end={int(v.replica_id): int(v.log_end_offset) for v in partition.current_voters},
        )

    try:
        return asyncio.run(ask())
    except Exception:  # connection refused or reset, timeout, a half-started voter: not a leader
        return None


def _utc_now() -> str:
    """Now as the brokers' log lines stamp it (ISO 8601, UTC), for the bench's marks in their logs."""
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


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

    def launch(self, marker: str | None = None) -> ClusterBroker:
        """Start the process without waiting for its port (a voter listens only once a majority runs)."""
        super().launch(marker or f"--- kipling-bench: {_utc_now()} starting")
        return self

    def wait_listening(self, timeout_s: float = 30.0) -> ClusterBroker:
        super().wait_listening(timeout_s)
        return self

    def start(self, timeout_s: float = 30.0) -> ClusterBroker:
        """Launch and wait for the port: a restart, when a majority of the voters runs already."""
        return self.launch().wait_listening(timeout_s)

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
            out.write(f"--- kipling-bench: {_utc_now()} sending {signal.Signals(sig).name}\n".encode())
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
    """``size`` brokers on loopback, the first ``voters`` (all by default) also controller voters.

    Started, stopped and cleaned as one. ``controller_ports`` maps each voter's node id to its
    CONTROLLER port; ``voters=1`` is the older layout, broker 1 the only controller.
    """

    def __init__(
        self,
        size: int = 3,
        work_dir: Path | None = None,
        settings: Mapping[str, str] | None = None,
        keep_dir: bool = False,
        voters: int | None = None,
    ) -> None:
        voters = size if voters is None else voters
        if not 1 <= voters <= size:
            raise ValueError(f"voters must be between 1 and {size}, got {voters}")
        self._own_dir = work_dir is None and not keep_dir
        self.work_dir = (
            Path(tempfile.mkdtemp(prefix="kipling-bench-cluster-")) if work_dir is None else work_dir
        )
        self.controller_ports: dict[int, int] = {node: free_port() for node in range(1, voters + 1)}
        self.settings = {**CLUSTER_SETTINGS, **(settings or {})}
        quorum = ",".join(f"{node}@127.0.0.1:{port}" for node, port in self.controller_ports.items())
        self.brokers: dict[int, ClusterBroker] = {}
        for node in range(1, size + 1):
            broker = ClusterBroker(node, self.work_dir / f"broker-{node}", {})
            listeners = f"PLAINTEXT://127.0.0.1:{broker.port}"
            roles = "broker"
            if node in self.controller_ports:
                listeners += f",CONTROLLER://127.0.0.1:{self.controller_ports[node]}"
                roles = "broker,controller"
            broker.overrides = {
                "node.id": str(node),
                "process.roles": roles,
                "controller.quorum.voters": quorum,
                "controller.listener.names": "CONTROLLER",
                "listeners": listeners,
                "cluster.id": CLUSTER_ID,
                **self.settings,
            }
            self.brokers[node] = broker

    @property
    def voters(self) -> list[int]:
        """Node ids of the controller voters."""
        return list(self.controller_ports)

    @property
    def controller_port(self) -> int:
        """The first voter's CONTROLLER port (the only one with ``voters=1``)."""
        return self.controller_ports[CONTROLLER_NODE]

    def describe_quorum(self, node: int, timeout_s: float = 2.0) -> QuorumState | None:
        """The quorum as voter ``node`` describes it when it leads the metadata quorum, else None."""
        answer = describe_quorum(self.controller_ports[node], timeout_s)
        return answer if answer is not None and answer.leader == node else None

    def active_controller(
        self, nodes: Iterable[int] | None = None, timeout_s: float = 60.0, min_epoch: int = 0
    ) -> tuple[int, int]:
        """(node id, epoch) of the Raft leader among ``nodes`` (live voters by default), waited for.

        ``min_epoch``: wait for a leader of at least that epoch (after a kill, old epoch + 1).
        """
        asked = [n for n in (self.voters if nodes is None else nodes) if self.brokers[n].alive()]
        deadline = time.monotonic() + timeout_s
        while True:
            for node in asked:
                answer = self.describe_quorum(node)
                if answer is not None and answer.epoch >= min_epoch:
                    return answer.leader, answer.epoch
            if time.monotonic() > deadline:
                raise TimeoutError(f"no voter of {asked} leads the metadata quorum after {timeout_s}s")
            time.sleep(0.05)

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers.values())

    def start(self, timeout_s: float = 60.0) -> KiplingCluster:
        """Launch every broker, wait for each port, a quorum leader, and Metadata listing all of them.

        All are launched before any is waited for: a voter is not ready before a majority runs.
        """
        try:
            for broker in self.brokers.values():
                broker.launch()
            deadline = time.monotonic() + timeout_s
            for broker in self.brokers.values():
                broker.wait_listening(max(1.0, deadline - time.monotonic()))
            self.active_controller(timeout_s=max(1.0, deadline - time.monotonic()))
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
        """Stop every broker, the first voter last, even when stopping one of them fails."""
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
    "CONTROLLER_NODE",
    "ClusterBroker",
    "KiplingCluster",
    "QuorumState",
    "children",
    "describe_quorum",
    "problem_lines",
    "process_cpu_seconds",
    "tree_cpu_seconds",
    "wait_until",
]
