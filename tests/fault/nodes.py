"""The cluster under test, seen by the faults: kill, pause, resume and restart nodes, find leaders
and the active controller, and keep a ledger of what the test did to each process.

The ledger is how the checker tells a crash from a fault: every signal a fault sends goes through
:class:`Nodes`, so a broker process found dead that no fault killed died on its own. It is checked
whenever a fault is about to touch a node (its death would otherwise go unnoticed when it is
restarted) and once more when the cluster is stopped, where a graceful SIGTERM must also exit 0.
Paused nodes are resumed before anything is stopped: a stopped process cannot act on SIGTERM.
"""

from __future__ import annotations

import contextlib
import signal
import time
import urllib.request
from pathlib import Path

from protocol.api_keys import ApiKey
from tests.integration.broker_process import BrokerProcess, sample_value
from tests.integration.cluster import Cluster
from tests.integration.wire_client import WireClient

TRACEBACK = "Traceback (most recent call last)"
KILL_MARK = "--- kipling-fault: SIGKILL"
START_MARK = "--- kipling-tests: starting broker"
"""The marks Nodes and BrokerProcess write into a node's log where the test killed and started it."""


def rss_mb(pid: int) -> float:
    """A process's resident memory (VmRSS of /proc/<pid>/status), in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmRSS for {pid}")


class Nodes:
    """Every fault's handle on the cluster's processes."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.down: set[int] = set()
        """Nodes a fault killed and has not restarted yet."""
        self.paused: set[int] = set()
        self.crashes: list[str] = []
        self.kills = 0
        self.pauses = 0

    def _broker(self, node: int) -> BrokerProcess:
        return self.cluster.brokers[node]

    def _mark(self, node: int, text: str) -> None:
        """A line in the node's log where the test acted on it (its own output interleaves)."""
        with self._broker(node).log_path.open("ab") as out:
            out.write(f"--- kipling-fault: {text}\n".encode())

    def check_alive(self) -> None:
        """Record as a crash every node that exited although no fault killed it."""
        for node, broker in self.cluster.brokers.items():
            process = broker.process
            if node in self.down or process is None:
                continue
            code = process.poll()
            if code is not None:
                tail = "\n".join(broker.output().splitlines()[-30:])
                self.crashes.append(f"node {node} (pid {process.pid}) exited with {code} on its own:\n{tail}")
                broker.process = None
                self.down.add(node)  # restarted by heal(), counted once

    def live(self) -> list[int]:
        """Nodes running and not paused: the ones that can answer a request now."""
        return [
            node
            for node, broker in self.cluster.brokers.items()
            if node not in self.down and node not in self.paused and broker.process is not None
        ]

    # -- faults --------------------------------------------------------------------------------

    def kill(self, *nodes: int) -> None:
        """SIGKILL ``nodes`` together (signals first, then reaping), so an 'all at once' is at once."""
        self.check_alive()
        targets = [n for n in nodes if n not in self.down]
        for node in targets:
            self._mark(node, "SIGKILL")
            process = self._broker(node).process
            assert process is not None
            if node in self.paused:  # a stopped process dies of SIGKILL too; resume it anyway
                process.send_signal(signal.SIGCONT)
                self.paused.discard(node)
            process.send_signal(signal.SIGKILL)
        for node in targets:
            self._broker(node).stop(signal.SIGKILL)
            self.down.add(node)
            self.kills += 1

    def restart(self, *nodes: int, timeout_s: float = 90.0) -> None:
        """Launch ``nodes`` together and wait until each listens (a voter needs a majority first)."""
        for node in nodes:
            self._mark(node, "restart")
            self._broker(node).launch()
        for node in nodes:
            broker = self._broker(node)
            try:
                broker.wait_listening(timeout_s)
            except RuntimeError as exc:  # it exited before listening: a crash at startup
                tail = "\n".join(broker.output().splitlines()[-30:])
                self.crashes.append(f"node {node} failed to restart ({exc}):\n{tail}")
                broker.process = None
                continue
            self.down.discard(node)

    def pause(self, node: int) -> None:
        self.check_alive()
        process = self._broker(node).process
        assert process is not None and node not in self.down
        self._mark(node, "SIGSTOP")
        process.send_signal(signal.SIGSTOP)
        self.paused.add(node)
        self.pauses += 1

    def resume(self, node: int) -> None:
        process = self._broker(node).process
        if node in self.paused and process is not None:
            process.send_signal(signal.SIGCONT)
            self._mark(node, "SIGCONT")
        self.paused.discard(node)

    def heal(self, timeout_s: float = 90.0) -> None:
        """Resume every paused node and restart every node that is down (killed or crashed)."""
        for node in list(self.paused):
            self.resume(node)
        self.check_alive()
        if self.down:
            self.restart(*sorted(self.down), timeout_s=timeout_s)

    def stop_all(self) -> None:
        """Resume, then stop every node with SIGTERM; a graceful stop must exit 0."""
        for node in list(self.paused):
            self.resume(node)
        self.check_alive()
        for node, broker in reversed(list(self.cluster.brokers.items())):
            if broker.process is None:
                continue
            pid = broker.process.pid
            code = broker.stop(signal.SIGTERM, timeout_s=30)
            if code != 0:
                tail = "\n".join(broker.output().splitlines()[-30:])
                self.crashes.append(f"node {node} (pid {pid}) exited with {code} on SIGTERM:\n{tail}")

    # -- observation ---------------------------------------------------------------------------

    def _metadata(self, topic: str) -> object | None:
        """Metadata v12 for ``topic`` from the first live node that answers."""
        for node in self.live():
            body = {"topics": [{"name": topic}], "allow_auto_topic_creation": False}
            with (
                contextlib.suppress(OSError, ConnectionError, AssertionError),
                WireClient(self._broker(node).port, timeout_s=5) as client,
            ):
                return client.request(ApiKey.METADATA, 9, body).body
        return None

    def partitions(self, topic: str) -> dict[int, tuple[int, list[int]]]:
        """partition → (leader, ISR) as a live node sees it; empty if none answered."""
        body = self._metadata(topic)
        if body is None:
            return {}
        found: dict[int, tuple[int, list[int]]] = {}
        for described in body.topics:  # type: ignore[attr-defined]
            if described.error_code == 0:
                for p in described.partitions:
                    found[p.partition_index] = (p.leader_id, sorted(p.isr_nodes))
        return found

    def leader(self, topic: str, partition: int, timeout_s: float = 30.0) -> int | None:
        """The live leader of ``partition``, waited for; None if there was none in time."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            leader = self.partitions(topic).get(partition, (-1, []))[0]
            if leader in self.live():
                return leader
            time.sleep(0.25)
        return None

    def full_isr(self, topic: str, partitions: int) -> bool:
        found = self.partitions(topic)
        size = len(self.cluster.brokers)
        return len(found) == partitions and all(
            leader >= 0 and len(isr) == size for leader, isr in found.values()
        )

    def wait_full_isr(self, topic: str, partitions: int, timeout_s: float) -> bool:
        """Wait until every partition has a leader and every replica in sync; False if not in time."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.full_isr(topic, partitions):
                return True
            time.sleep(0.5)
        return False

    def active_controller(self, timeout_s: float = 30.0) -> int | None:
        """The voter whose raft metrics say it leads the metadata quorum; None if none in time."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for node in self.live():
                if node not in self.cluster.controller_ports:
                    continue
                url = f"http://127.0.0.1:{self._broker(node).metrics_port}/metrics"
                with contextlib.suppress(OSError):
                    with urllib.request.urlopen(url, timeout=3) as response:
                        text = response.read().decode()
                    if sample_value(text, "kafka_server_raftmetrics_current_state", state="leader") == 1:
                        return node
            time.sleep(0.25)
        return None

    def serves(self, node: int) -> bool:
        """The node answers a clean ApiVersions and Metadata request on a fresh connection."""
        try:
            with WireClient(self._broker(node).port, timeout_s=10) as client:
                body = {"client_software_name": "kipling-fault", "client_software_version": "1"}
                if client.request(ApiKey.API_VERSIONS, 3, body).body.error_code != 0:
                    return False
                client.request(ApiKey.METADATA, 9, {"topics": None, "allow_auto_topic_creation": False})
                return True
        except (OSError, ConnectionError, AssertionError):
            return False

    def tracebacks(self) -> list[str]:
        """Every Python traceback in the nodes' logs while they were alive, each as its context
        line and its last line (the exception)."""
        return self._scan_tracebacks()[0]

    def tracebacks_after_kill(self) -> list[str]:
        """Tracebacks logged between the test's SIGKILL of a node and its restart: from what
        outlived the killed broker for a moment (its follower processes, whose IPC channel to the
        broker closed), not from a broker that was serving. Reported, not counted as crashes."""
        return self._scan_tracebacks()[1]

    def _scan_tracebacks(self) -> tuple[list[str], list[str]]:
        alive: list[str] = []
        after_kill: list[str] = []
        for node, broker in self.cluster.brokers.items():
            lines = broker.output().splitlines()
            killed = False
            for i, line in enumerate(lines):
                if line.startswith(KILL_MARK):
                    killed = True
                elif line.startswith(START_MARK):
                    killed = False
                elif TRACEBACK in line:
                    end = next(
                        (
                            j
                            for j in range(i + 1, min(i + 200, len(lines)))
                            if not lines[j].startswith((" ", "\t"))
                        ),
                        min(i + 1, len(lines) - 1),
                    )
                    context = lines[i - 1] if i else ""
                    found = f"node {node}: {context.strip()[:200]} -> {lines[end].strip()[:300]}"
                    (after_kill if killed else alive).append(found)
        return alive, after_kill


__all__ = ["Nodes", "rss_mb"]
