"""Fault injectors on real broker processes, each run inside the same workload and checker.

A fault is a :class:`Fault`: cluster ``overrides`` it needs, a :meth:`Fault.prepare` hook run
before the cluster starts, :meth:`Fault.inject` run while the workload produces (it must return by
``ctx.until`` and release whatever it opened, sockets and threads, before returning) and
:meth:`Fault.heal` run afterwards whatever happened (by default: resume paused nodes, restart
killed ones). Every signal goes through :class:`~tests.fault.nodes.Nodes`, whose ledger tells a
crash from a fault. What a fault measures goes into ``ctx.notes``; a check of its own that fails
goes into ``ctx.problems`` and fails the test like a lost record.

The faults here:

* ``kill-leader`` — SIGKILL of the current leader of a random partition, restart after 1-4 s, wait
  for the full ISR, again, for the whole window;
* ``pause-leader`` — SIGSTOP of a partition leader (not the active controller, when possible) for
  6 s, longer than ``broker.session.timeout.ms`` (3 s), then SIGCONT; as often as the window allows;
* ``pause-controller`` — the same for the active controller (found by its raft metrics), 8 s;
* ``kill-all`` — SIGKILL of all three nodes at once, then all restarted together;
* ``mutated-frames`` — seeded mutations of real client requests (:mod:`tests.fault.frames`)
  pipelined over many short connections to every client and controller listener; afterwards every
  node must still answer clean requests;
* ``idle-slowloris`` — 2,000 idle connections plus 30 that send a request one byte per second;
  with ``kipling.request.receive.timeout.ms`` set, the slow ones must be closed;
* ``big-prefixes`` — 20 connections per node that send a 100 MiB size prefix and 64 KiB, held open;
  every node's RSS must stay under 300 MB.

Adding a fault (full disk on a tmpfs, a corrupted or truncated segment, a network partition):
subclass :class:`Fault`, put the cluster changes in ``overrides`` and :meth:`Fault.prepare` (a
tmpfs under ``cluster.brokers[n].data_dir``, a proxy between voters in front of
``cluster.controller_ports``), break things in :meth:`Fault.inject` (``ctx.nodes.kill`` a node,
rewrite a segment under ``cluster.partition_dir``, ``ctx.nodes.restart`` it), undo them in
:meth:`Fault.heal`, and register a factory in :data:`FAULTS`. The CI tier
(``test_fault_ci.py``) and the long tier (``long_tier.py``) then run it with the same workload and
checker.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from protocol.api import encode_request
from protocol.api_keys import ApiKey
from protocol.framing import DEFAULT_MAX_FRAME_SIZE, encode_frame, frame_header
from server_common.config.definitions import BY_NAME
from tests.fault.frames import FUZZ_TOPIC, mutate, seed_frames
from tests.fault.nodes import Nodes, rss_mb
from tests.fault.workload import Workload, create_topic
from tests.integration.cluster import Cluster

RECEIVE_TIMEOUT_KEY = "kipling.request.receive.timeout.ms"
SESSION_TIMEOUT_S = 3.0
"""``broker.session.timeout.ms`` of FAST_FAILOVER: a pause must outlast it."""


@dataclass
class FaultContext:
    """What a fault works with while the workload runs."""

    cluster: Cluster
    nodes: Nodes
    workload: Workload
    rng: random.Random
    topic: str
    partitions: int
    until: float = 0.0
    """Monotonic time by which inject() stops injecting (the workload then runs fault-free)."""
    notes: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def event(self, text: str) -> None:
        """A note stamped with the seconds since the workload started (to line up with ack gaps)."""
        self.notes.append(f"t+{time.monotonic() - self.workload.started_at:.0f}s {text}")

    def time_left(self) -> float:
        return self.until - time.monotonic()

    def sleep(self, seconds: float) -> None:
        time.sleep(max(0.0, seconds))

    def wait_full_isr(self, timeout_s: float = 60.0) -> None:
        """Before the next single failure, the last one is healed (else it would be a double one)."""
        if not self.nodes.wait_full_isr(self.topic, self.partitions, timeout_s):
            self.notes.append(f"ISR not full {timeout_s:.0f}s after a fault")


class Fault:
    """A fault: see the module docstring for the life cycle."""

    name = "none"
    overrides: tuple[str, ...] = ()

    def prepare(self, cluster: Cluster) -> None:
        """Before the cluster starts: change its disks or network here."""

    def inject(self, ctx: FaultContext) -> None:
        raise NotImplementedError

    def heal(self, ctx: FaultContext) -> None:
        ctx.nodes.heal()

    def cleanup(self, cluster: Cluster) -> None:
        """After every node stopped, whatever happened: undo what :meth:`prepare` set up."""


class KillLeader(Fault):
    name = "kill-leader"

    def inject(self, ctx: FaultContext) -> None:
        kills = 0
        while ctx.time_left() > 8:
            partition = ctx.rng.randrange(ctx.partitions)
            leader = ctx.nodes.leader(ctx.topic, partition)
            if leader is None:
                ctx.notes.append(f"no live leader for partition {partition}")
                ctx.sleep(1)
                continue
            ctx.event(f"kill {leader} (leads {partition})")
            ctx.nodes.kill(leader)
            kills += 1
            ctx.sleep(ctx.rng.uniform(1.0, 4.0))
            ctx.nodes.restart(leader)
            ctx.wait_full_isr()
            ctx.sleep(ctx.rng.uniform(1.0, 3.0))
        ctx.notes.append(f"{kills} leaders killed")


class _Pause(Fault):
    pause_s = 6.0

    def target(self, ctx: FaultContext) -> int | None:
        raise NotImplementedError

    def inject(self, ctx: FaultContext) -> None:
        pauses: list[int] = []
        while ctx.time_left() > self.pause_s + 4:
            node = self.target(ctx)
            if node is None:
                ctx.sleep(1)
                continue
            ctx.event(f"pause {node}")
            ctx.nodes.pause(node)
            try:
                ctx.sleep(self.pause_s)
            finally:
                ctx.nodes.resume(node)
            pauses.append(node)
            ctx.wait_full_isr()
            ctx.sleep(ctx.rng.uniform(2.0, 4.0))
        ctx.notes.append(f"paused nodes {pauses} for {self.pause_s:.0f}s each")


class PauseLeader(_Pause):
    name = "pause-leader"
    pause_s = 2 * SESSION_TIMEOUT_S

    def target(self, ctx: FaultContext) -> int | None:
        controller = ctx.nodes.active_controller(timeout_s=10)
        leaders = [ctx.nodes.leader(ctx.topic, p, timeout_s=10) for p in range(ctx.partitions)]
        candidates = [n for n in leaders if n is not None]
        preferred = [n for n in candidates if n != controller]
        return ctx.rng.choice(preferred or candidates) if candidates else None


class PauseController(_Pause):
    name = "pause-controller"
    pause_s = 8.0

    def target(self, ctx: FaultContext) -> int | None:
        node = ctx.nodes.active_controller()
        if node is not None:
            ctx.event(f"active controller {node}")
        return node


class KillAll(Fault):
    name = "kill-all"

    def __init__(self, rounds: int = 1) -> None:
        self.rounds = rounds

    def inject(self, ctx: FaultContext) -> None:
        every = sorted(ctx.cluster.brokers)
        spacing = max(ctx.time_left() / self.rounds, 1.0)
        for _ in range(self.rounds):
            if ctx.time_left() < 5:
                break
            ctx.sleep(ctx.rng.uniform(0.0, min(3.0, spacing / 4)))
            ctx.event("kill all")
            ctx.nodes.kill(*every)
            ctx.sleep(ctx.rng.uniform(1.0, 3.0))
            started = time.monotonic()
            ctx.nodes.restart(*every)
            ctx.wait_full_isr(90)
            ctx.notes.append(
                f"all nodes back with a full ISR {time.monotonic() - started:.1f}s after restart"
            )
            ctx.sleep(max(0.0, spacing - (time.monotonic() - started) - 5))


@dataclass
class FuzzStats:
    frames: int = 0
    connections: int = 0
    closed_by_broker: int = 0
    answered_bytes: int = 0
    refused: int = 0


class MutatedFrames(Fault):
    """Mutated real requests over many connections, to every node's client and controller listener."""

    name = "mutated-frames"
    overrides = ("auto.create.topics.enable=false",)  # a mutated Metadata would create topics
    concurrency = 48
    per_connection = 16
    quiet_s = 0.3
    """A connection is dropped once the broker has been silent this long (or closed it)."""

    def __init__(self, frames: int) -> None:
        self.frames = frames

    def inject(self, ctx: FaultContext) -> None:
        create_topic(ctx.cluster.bootstrap, FUZZ_TOPIC, partitions=1)
        ports = [b.port for b in ctx.cluster.brokers.values()] + list(ctx.cluster.controller_ports.values())
        stats = FuzzStats()
        started = time.monotonic()
        # the count is the bound: the workload is stretched so that it runs as long as the frames do
        hard_deadline = started + max(60.0, self.frames / 200)
        seeds = seed_frames()
        worker_seeds = [ctx.rng.getrandbits(64) for _ in range(self.concurrency)]

        async def worker(rng: random.Random) -> None:
            while stats.frames < self.frames and time.monotonic() < hard_deadline:
                frames = [mutate(rng, seeds) for _ in range(self.per_connection)]
                port = rng.choice(ports)
                try:
                    reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), 5)
                except (OSError, TimeoutError):
                    stats.refused += 1
                    await asyncio.sleep(0.1)
                    continue
                stats.connections += 1
                stats.frames += len(frames)
                try:
                    writer.write(b"".join(frames))
                    await asyncio.wait_for(writer.drain(), 5)
                    while True:
                        data = await asyncio.wait_for(reader.read(65536), self.quiet_s)
                        if not data:
                            stats.closed_by_broker += 1
                            break
                        stats.answered_bytes += len(data)
                except (TimeoutError, ConnectionError, OSError):
                    pass
                finally:
                    writer.transport.abort()  # RST: no TIME_WAIT pile-up over thousands of connections

        async def fuzz() -> None:
            workers = [asyncio.create_task(worker(random.Random(s))) for s in worker_seeds]
            while not all(w.done() for w in workers):
                await asyncio.sleep(1)
                if ctx.workload.remaining_s() < 10 and stats.frames < self.frames:
                    ctx.workload.extend(5)  # the workload runs as long as the frames are sent
            for w in workers:
                w.result()

        asyncio.run(fuzz())
        elapsed = time.monotonic() - started
        ctx.notes.append(
            f"{stats.frames} mutated frames over {stats.connections} connections in {elapsed:.0f}s "
            f"({stats.closed_by_broker} closed by the broker, {stats.answered_bytes} bytes answered, "
            f"{stats.refused} connects refused)"
        )
        if stats.frames < self.frames:
            ctx.problems.append(f"only {stats.frames} of {self.frames} mutated frames sent in {elapsed:.0f}s")
        for node in ctx.nodes.live():
            if not ctx.nodes.serves(node):
                ctx.problems.append(f"node {node} no longer answers clean requests after the mutated frames")


def _api_versions_frame() -> bytes:
    body = {"client_software_name": "slowloris", "client_software_version": "1"}
    return encode_frame(encode_request(ApiKey.API_VERSIONS, 3, 1, "slowloris", body))


def _closed(sock: socket.socket) -> bool:
    """The peer closed (EOF or reset); answers it might have sent are read and dropped.

    ``sock`` is non-blocking (select() cannot watch descriptors above 1024, and there are 2,000).
    """
    try:
        while True:
            data = sock.recv(65536)
            if not data:
                return True
    except BlockingIOError:
        return False
    except OSError:
        return True


class IdleAndSlowloris(Fault):
    """Idle connections held open, and slow ones that drip a request one byte a second."""

    name = "idle-slowloris"
    receive_timeout_ms = 3000

    def __init__(self, idle: int = 2000, slow: int = 30) -> None:
        self.idle = idle
        self.slow = slow
        self.enforced = RECEIVE_TIMEOUT_KEY in BY_NAME
        self.overrides = (f"{RECEIVE_TIMEOUT_KEY}={self.receive_timeout_ms}",) if self.enforced else ()

    def inject(self, ctx: FaultContext) -> None:
        ports = [b.port for b in ctx.cluster.brokers.values()]
        idle: list[socket.socket] = []
        slow: list[socket.socket] = []
        frame = _api_versions_frame()
        try:
            for i in range(self.idle + self.slow):
                sock = socket.create_connection(("127.0.0.1", ports[i % len(ports)]), timeout=10)
                sock.setblocking(False)  # a socket with a timeout would wait for data in _closed()
                (idle if i < self.idle else slow).append(sock)
            started = time.monotonic()
            closed_after: dict[int, float] = {}
            sent = 0
            while ctx.time_left() > 0:
                for i, sock in enumerate(slow):
                    if i in closed_after:
                        continue
                    if _closed(sock):
                        closed_after[i] = time.monotonic() - started
                        continue
                    try:
                        sock.send(frame[sent % len(frame) : sent % len(frame) + 1])
                    except OSError:
                        closed_after[i] = time.monotonic() - started
                sent += 1
                if len(closed_after) == len(slow) and time.monotonic() - started > 15:
                    break  # every slow one is gone; the idle ones have been held long enough
                ctx.sleep(1.0)
            held_s = time.monotonic() - started
            idle_closed = sum(_closed(sock) for sock in idle)
            latest = max(closed_after.values(), default=0.0)
            ctx.notes.append(
                f"{len(idle)} idle connections held {held_s:.0f}s ({idle_closed} closed by the brokers); "
                f"{len(closed_after)}/{len(slow)} slowloris connections closed (last after {latest:.0f}s)"
            )
            if not self.enforced:
                ctx.notes.append(
                    f"slowloris closing NOT asserted: {RECEIVE_TIMEOUT_KEY} is not a broker config key yet"
                )
            elif len(closed_after) < len(slow):
                ctx.problems.append(
                    f"{len(slow) - len(closed_after)} of {len(slow)} slowloris connections were still open "
                    f"after {held_s:.0f}s with {RECEIVE_TIMEOUT_KEY}={self.receive_timeout_ms}"
                )
        finally:
            for sock in idle + slow:
                sock.close()


class BigPrefixes(Fault):
    """Connections that announce 100 MiB frames and send 64 KiB of them: no memory may be pinned."""

    name = "big-prefixes"
    rss_limit_mb = 300.0

    def __init__(self, connections: int = 20, hold_s: float = 20.0) -> None:
        self.connections = connections
        self.hold_s = hold_s

    def inject(self, ctx: FaultContext) -> None:
        payload = frame_header(DEFAULT_MAX_FRAME_SIZE) + bytes(64 * 1024)
        sockets: list[socket.socket] = []
        peak: dict[int, float] = {}
        try:
            before = {n: rss_mb(b.pid) for n, b in ctx.cluster.brokers.items() if b.pid is not None}
            for broker in ctx.cluster.brokers.values():
                for _ in range(self.connections):
                    sock = socket.create_connection(("127.0.0.1", broker.port), timeout=10)
                    sock.sendall(payload)
                    sockets.append(sock)
            held_until = time.monotonic() + min(self.hold_s, max(ctx.time_left(), 5.0))
            while time.monotonic() < held_until:
                for node, broker in ctx.cluster.brokers.items():
                    if broker.pid is not None:
                        peak[node] = max(peak.get(node, 0.0), rss_mb(broker.pid))
                ctx.sleep(1.0)
            figures = ", ".join(f"node {n} {before.get(n, 0):.0f}->{peak[n]:.0f} MB" for n in sorted(peak))
            ctx.notes.append(f"{len(sockets)} connections with 100 MiB prefixes: RSS {figures}")
            for node, mb in peak.items():
                if mb >= self.rss_limit_mb:
                    ctx.problems.append(f"node {node} RSS {mb:.0f} MB >= {self.rss_limit_mb:.0f} MB")
            for node in ctx.nodes.live():
                if not ctx.nodes.serves(node):
                    ctx.problems.append(f"node {node} no longer answers clean requests while prefixes pend")
        finally:
            for sock in sockets:
                with contextlib.suppress(OSError):
                    sock.close()


@dataclass(frozen=True)
class Tier:
    """How hard each fault pushes: the CI tier is short, the long tier runs for minutes."""

    name: str
    seconds: float
    frames: int
    kill_all_rounds: int


CI = Tier("ci", seconds=45.0, frames=50_000, kill_all_rounds=1)
LONG = Tier("long", seconds=300.0, frames=1_000_000, kill_all_rounds=3)

FAULTS: dict[str, Callable[[Tier], Fault]] = {
    "kill-leader": lambda tier: KillLeader(),
    "pause-leader": lambda tier: PauseLeader(),
    "pause-controller": lambda tier: PauseController(),
    "kill-all": lambda tier: KillAll(rounds=tier.kill_all_rounds),
    "mutated-frames": lambda tier: MutatedFrames(frames=tier.frames),
    "idle-slowloris": lambda tier: IdleAndSlowloris(),
    "big-prefixes": lambda tier: BigPrefixes(),
}
"""Every fault by name; others register theirs here (see the module docstring)."""

CONNECTION_FAULTS = ("mutated-frames", "idle-slowloris", "big-prefixes")
"""The faults of ``test_fault_ci_connections.py``; ``test_fault_ci.py`` runs the others."""

__all__ = [
    "CI",
    "CONNECTION_FAULTS",
    "FAULTS",
    "LONG",
    "BigPrefixes",
    "Fault",
    "FaultContext",
    "IdleAndSlowloris",
    "KillAll",
    "KillLeader",
    "MutatedFrames",
    "PauseController",
    "PauseLeader",
    "Tier",
]
