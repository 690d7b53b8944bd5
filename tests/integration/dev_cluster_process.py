"""``kipling dev-cluster`` as a real process on free loopback ports, for the tests that drive it."""

from __future__ import annotations

import contextlib
import os
import random
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from protocol.api_keys import ApiKey
from tests.integration.broker_process import LISTEN_PORTS
from tests.integration.wire_client import WireClient
from tools.dev_cluster import QUORUM_VOTERS, port_in_use

ROOT = Path(__file__).resolve().parents[2]
CLUSTER_DIR = ROOT / "config" / "cluster"
STARTED = re.compile(r"started (broker-\d+) \(pid (\d+)\)")


def free_run(count: int, avoid: set[int]) -> int:
    """The first port of ``count`` consecutive free loopback ports, none of them in ``avoid``."""
    for _ in range(200):
        first = random.randrange(LISTEN_PORTS.start, LISTEN_PORTS.stop - count)
        ports = set(range(first, first + count))
        if not ports & avoid and not any(port_in_use("127.0.0.1", p) for p in ports):
            return first
    raise RuntimeError("no run of free ports")


def free_layout(brokers: int) -> tuple[int, int, int]:
    """Free client, metrics and controller ports for a cluster of ``brokers``: the controller run
    is as long as the cluster has voters (voter i listens on the first plus i - 1)."""
    base = free_run(brokers, set())
    taken = set(range(base, base + brokers))
    metrics = free_run(brokers, taken)
    taken |= set(range(metrics, metrics + brokers))
    controller = free_run(min(brokers, QUORUM_VOTERS), taken)
    return base, metrics, controller


def kipling_command() -> list[str]:
    script = Path(sys.executable).with_name("kipling")
    return [str(script)] if script.exists() else [sys.executable, "-m", "tools.cli"]


class DevCluster:
    """``kipling dev-cluster`` run as a process, its output in files."""

    def __init__(
        self,
        tmp_path: Path,
        brokers: int,
        stop_timeout_s: float = 8,
        data_dir: Path | None = None,
        restart_after_s: float | None = None,
        secure: bool = False,
    ) -> None:
        self.base, self.metrics, self.controller = free_layout(brokers)
        self.brokers = brokers
        self.data_dir = data_dir or tmp_path / "cluster"
        tmp_path.mkdir(parents=True, exist_ok=True)
        self.out_path, self.err_path = tmp_path / "out.txt", tmp_path / "err.txt"
        args = [
            *kipling_command(),
            "dev-cluster",
            f"--brokers={brokers}",
            f"--data-dir={self.data_dir}",
            f"--base-port={self.base}",
            f"--metrics-base-port={self.metrics}",
            f"--controller-port={self.controller}",
            f"--cluster-config={CLUSTER_DIR}",
            f"--stop-timeout={stop_timeout_s:g}",
            *([] if restart_after_s is None else [f"--restart-after={restart_after_s:g}"]),
            *(["--secure"] if secure else []),
        ]
        with self.out_path.open("wb") as out, self.err_path.open("wb") as err:
            self.process = subprocess.Popen(args, cwd=tmp_path, stdout=out, stderr=err)

    @property
    def ports(self) -> list[int]:
        return [self.base + i for i in range(self.brokers)]

    def out(self) -> str:
        return self.out_path.read_text(errors="replace")

    def err(self) -> str:
        return self.err_path.read_text(errors="replace")

    def pids(self) -> dict[str, int]:
        return {name: int(pid) for name, pid in STARTED.findall(self.err())}

    def wait_until_serving(self, timeout_s: float = 60.0) -> None:
        """Until every broker answers ApiVersions: a bound for a machine busy with other tests (a
        start takes a few seconds, two voters may need several elections), not a speed check."""
        deadline = time.monotonic() + timeout_s
        pending = list(self.ports)
        while pending:
            assert self.process.poll() is None, f"dev-cluster exited early:\n{self.err()}\n{self.out()}"
            assert time.monotonic() < deadline, f"brokers on {pending} never answered:\n{self.out()}"
            with contextlib.suppress(OSError), WireClient(pending[0], timeout_s=2) as client:
                body = {"client_software_name": "dev-cluster-test", "client_software_version": "1"}
                assert client.request(ApiKey.API_VERSIONS, 3, body).body.error_code == 0
                pending.pop(0)
                continue
            time.sleep(0.1)

    def stop(self) -> None:
        """Leave nothing running, whatever the test did."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        for pid in self.pids().values():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)


__all__ = ["CLUSTER_DIR", "STARTED", "DevCluster", "free_layout", "free_run", "kipling_command"]
