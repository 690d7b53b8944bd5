"""Start a real kipling broker process on loopback ports for integration tests."""

from __future__ import annotations

import collections
import contextlib
import os
import random
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def sample_value(text: str, name: str, **labels: str) -> float:
    """The value of sample ``name`` in Prometheus text, summed over label sets matching ``labels``.

    A sample the broker has not exported yet counts as 0: prometheus_client omits a labelled series
    until its first use (e.g. no Fetch request counter before the first Fetch).
    """
    from prometheus_client.parser import text_string_to_metric_families

    total = 0.0
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                total += sample.value
    return total


def _worker_ports(ports: range) -> range:
    """This pytest-xdist worker's share of ``ports`` (all of them outside xdist).

    A port is checked free here and bound later by the broker process: two workers picking from
    the same range could both find one free and the second broker would fail to start. Disjoint
    shares make that impossible; within a worker the picks are sequential.
    """
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1)
    if not worker.startswith("gw") or not worker[2:].isdigit() or count <= 1:
        return ports
    share = len(ports) // count
    start = ports.start + int(worker[2:]) % count * share
    return range(start, start + share)


LISTEN_PORTS = _worker_ports(range(10_000, 32_000))
"""Where this test process's brokers listen: below Linux's ephemeral range (32768-60999), so that
no client connection's source port, picked by the kernel meanwhile, can take a port chosen here,
and apart from the other xdist workers' ports."""


_RECENT: collections.deque[int] = collections.deque(maxlen=2_000)
"""Ports handed out lately: a pick is bound only when its broker starts, so a cluster picking
nine ports before starting any could otherwise be handed one twice (a broker then failed with
"Address already in use" in CI)."""


def free_port() -> int:
    """A loopback port in ``LISTEN_PORTS`` that nothing is bound to now and that was not handed
    out lately."""
    for _ in range(200):
        port = random.randrange(LISTEN_PORTS.start, LISTEN_PORTS.stop)
        if port not in _RECENT and _bindable(port):
            _RECENT.append(port)
            return port
    raise RuntimeError(f"no free loopback port in {LISTEN_PORTS}")


def free_port_run(count: int) -> int:
    """The first of ``count`` consecutive loopback ports in ``LISTEN_PORTS`` that are all free now
    (a node of several broker processes listens on its port + i)."""
    for _ in range(200):
        first = random.randrange(LISTEN_PORTS.start, LISTEN_PORTS.stop - count)
        ports = range(first, first + count)
        if not any(port in _RECENT for port in ports) and all(_bindable(port) for port in ports):
            _RECENT.extend(ports)
            return first
    raise RuntimeError(f"no {count} free consecutive loopback ports in {LISTEN_PORTS}")


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _wait_for_port(port: int, process: subprocess.Popen[bytes], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"broker exited with {process.returncode} before listening")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return
        time.sleep(0.05)
    raise TimeoutError(f"broker did not listen on {port} within {timeout_s}s")


@dataclass
class BrokerProcess:
    """One broker process: its ports, data dir and log file; restartable."""

    data_dir: Path
    overrides: list[str] = field(default_factory=list)
    port: int = field(default_factory=free_port)
    metrics_port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None
    command_prefix: list[str] = field(default_factory=list)
    """Run the broker under this command (``prlimit --nofile=...``, which execs it: same pid)."""
    group: int | None = None
    """Run the broker (and the follower processes it starts) with this gid: a fault test tells the
    nodes' traffic apart by the group owning each socket (nft ``meta skgid``)."""

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.data_dir / "broker.out"

    def start(self, timeout_s: float = 20.0) -> BrokerProcess:
        self.launch()
        return self.wait_listening(timeout_s)

    def wait_listening(self, timeout_s: float = 20.0) -> BrokerProcess:
        """Wait until the launched broker listens for clients (it is registered and unfenced)."""
        assert self.process is not None, "launch the broker first"
        _wait_for_port(self.port, self.process, timeout_s)
        return self

    def launch(self) -> BrokerProcess:
        """Start the process without waiting (the voters of a quorum start together)."""
        args = [
            *self.command_prefix,
            sys.executable,
            "-m",
            "broker",
            "--override",
            f"listeners=PLAINTEXT://127.0.0.1:{self.port}",
            "--override",
            f"log.dirs={self.data_dir / 'logs'}",
            "--override",
            f"metrics.listener=127.0.0.1:{self.metrics_port}",
        ]
        for override in self.overrides:
            args += ["--override", override]
        self.data_dir.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        with self.log_path.open("ab") as out:  # the child keeps its own copy of the descriptor
            out.write(f"--- kipling-tests: starting broker with {self.overrides}\n".encode())
            out.flush()
            self.process = subprocess.Popen(
                args, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, env=env, group=self.group
            )
        return self

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    def stop(self, sig: int = signal.SIGTERM, timeout_s: float = 20.0) -> int:
        """Send ``sig`` and wait for the exit (SIGKILL after ``timeout_s``); returns the exit code."""
        if self.process is None:
            return 0
        with self.log_path.open("ab") as out:  # marks in the log where each test-driven stop happened
            out.write(f"--- kipling-tests: sending {signal.Signals(sig).name}\n".encode())
        if self.process.poll() is None:
            self.process.send_signal(sig)
        try:
            code = self.process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.process.kill()
            code = self.process.wait()
        self.process = None
        return code

    def restart(self, sig: int = signal.SIGTERM) -> BrokerProcess:
        self.stop(sig)
        return self.start()

    def metrics(self) -> str:
        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.read().decode()

    def metric(self, name: str, **labels: str) -> float:
        """One sample of /metrics (summed over label sets matching ``labels``; absent counts as 0)."""
        return sample_value(self.metrics(), name, **labels)

    def output(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
