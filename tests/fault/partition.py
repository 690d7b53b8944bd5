"""A network partition that isolates one partition leader from the other nodes, never from clients.

As Jepsen's Kafka test did (reference/reliability.md §2.1), in two stages:

1. **Replication cut.** The leader's node can no longer reach the other nodes' client listeners
   (where followers fetch), and they cannot reach its: its followers stop fetching, but it keeps
   its controller session. The leader shrinks the ISR to itself (the controller accepts it), and
   then refuses acks=all writes with NOT_ENOUGH_REPLICAS, since ``min.insync.replicas=2``: nothing
   is acknowledged that only one broker holds.
2. **Full cut.** Its controller traffic goes too: its session expires, the controller fences it and
   elects a new leader from the ISR, and clients move there. The old leader, which cannot hear it,
   still thinks it leads; whatever it appends alone can never commit, and is truncated when the
   partition heals.

Nodes are told apart by the group owning each socket: every node runs with a gid of its own
(still as root, so no file changes hands), and the rules (nft ``meta skgid``) drop the packets
that the isolated node's sockets send to the others' ports and that the others' sockets send to
its ports. Clients (the workload, gid 0) reach everyone.

The rules live in a network namespace of the run's own, so the machine's network is never touched:
``python -m tests.fault.partition`` re-executes itself under ``unshare --net``, brings up ``lo``,
runs the fault with :func:`~tests.fault.scenario.run_fault`, and prints the checker's result as JSON
on its last line. ``test_fault_partition.py`` runs it in the CI tier; ``--seconds`` and ``--seed``
make the long tier's runs.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.fault.checker import CheckResult
from tests.fault.faults import Fault, FaultContext
from tests.fault.scenario import run_fault
from tests.integration.cluster import Cluster

FIRST_GID = 61_000
"""Node n runs with gid FIRST_GID + n: unused on Debian, which gives groups gids from 1000."""
TABLE = "kipling_fault"
NAMESPACE_FLAG = "KIPLING_FAULT_NETNS"
"""Set in the environment once the run is inside its own network namespace."""
ROOT = Path(__file__).resolve().parents[2]


def node_gid(node: int) -> int:
    return FIRST_GID + node


def _nft(*commands: str) -> None:
    """Run nft commands as one batch (all or nothing)."""
    subprocess.run(["nft", "-f", "-"], input="\n".join(commands).encode(), check=True)


def _cut_rules(victim: int, victim_ports: list[int], other_ports: list[int], others: list[int]) -> list[str]:
    """Drop what the victim's sockets send to the others' ports, and theirs to its ports."""
    theirs = ", ".join(str(node_gid(n)) for n in others)
    return [
        f"add rule inet {TABLE} out meta skgid {node_gid(victim)} tcp dport {{ {_set(other_ports)} }} drop",
        f"add rule inet {TABLE} out meta skgid {{ {theirs} }} tcp dport {{ {_set(victim_ports)} }} drop",
    ]


def _set(ports: list[int]) -> str:
    return ", ".join(str(p) for p in sorted(set(ports)))


class PartitionLeader(Fault):
    """Isolate the leader of one partition from the other nodes: replication first, then all."""

    name = "partition-leader"

    def prepare(self, cluster: Cluster) -> None:
        for node, broker in cluster.brokers.items():
            broker.group = node_gid(node)
        _nft(
            f"add table inet {TABLE}", f"add chain inet {TABLE} out {{ type filter hook output priority 0; }}"
        )

    def inject(self, ctx: FaultContext) -> None:
        partition = ctx.rng.randrange(ctx.partitions)
        victim = ctx.nodes.leader(ctx.topic, partition)
        if victim is None:
            ctx.problems.append(f"no leader for partition {partition} to isolate")
            return
        cluster = ctx.cluster
        others = [n for n in cluster.brokers if n != victim]
        client_ports = {n: cluster.brokers[n].port for n in cluster.brokers}
        stage = max(5.0, ctx.time_left() / 2)
        ctx.notes.append(
            f"node {victim} (leader of partition {partition}) isolated: replication {stage:.0f}s"
        )
        _nft(*_cut_rules(victim, [client_ports[victim]], [client_ports[n] for n in others], others))
        ctx.sleep(stage)
        controller_ports = dict(cluster.controller_ports)
        _nft(
            *_cut_rules(
                victim,
                [controller_ports[victim]] if victim in controller_ports else [],
                [controller_ports[n] for n in others if n in controller_ports],
                others,
            )
        )
        new_leader = ctx.nodes.leader(ctx.topic, partition, timeout_s=max(1.0, ctx.time_left()))
        ctx.notes.append(f"then fully: the partition's leader as seen by clients became {new_leader}")
        ctx.sleep(ctx.time_left())

    def heal(self, ctx: FaultContext) -> None:
        _nft(f"flush table inet {TABLE}")
        super().heal(ctx)


def unavailable() -> str | None:
    """Why this machine cannot run the fault (no root, no nft, no unshare), or None."""
    if os.geteuid() != 0:
        return "needs root (a network namespace, nft rules, brokers with gids of their own)"
    for tool in ("unshare", "nft", "ip"):
        if shutil.which(tool) is None:
            return f"needs {tool} on PATH"
    return None


def _in_namespace(seed: int, seconds: float) -> dict[str, object]:
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    root = Path(tempfile.mkdtemp(prefix="kipling-partition-"))
    try:
        result = run_fault(PartitionLeader(), root, seed=seed, seconds=seconds)
        return dataclasses.asdict(result)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def run_isolated(seed: int, seconds: float, timeout_s: float) -> CheckResult:
    """Run the fault in a network namespace of its own; the checker's result."""
    command = ["unshare", "--net", sys.executable, "-m", "tests.fault.partition"]
    command += [f"--seed={seed}", f"--seconds={seconds:g}"]
    done = subprocess.run(
        command,
        cwd=ROOT,
        env=dict(os.environ, **{NAMESPACE_FLAG: "1"}),
        capture_output=True,
        timeout=timeout_s,
        check=False,
    )
    lines = done.stdout.decode().strip().splitlines()
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"the partition run failed ({done.returncode}):\n{done.stderr.decode()[-4000:]}")
    fields = json.loads(lines[-1])
    for per_partition in ("max_ack_gap_s", "max_ack_gap_at_s"):  # JSON made the keys strings
        fields[per_partition] = {int(p): v for p, v in fields[per_partition].items()}
    return CheckResult(**fields)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--seconds", type=float, default=45.0)
    args = parser.parse_args()
    if os.environ.get(NAMESPACE_FLAG) != "1":
        result = run_isolated(args.seed, args.seconds, timeout_s=args.seconds * 4 + 240)
        print(result.report())
        return
    print(json.dumps(_in_namespace(args.seed, args.seconds)))


if __name__ == "__main__":
    main()
