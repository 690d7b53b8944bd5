"""One run of one fault: a fresh 3-voter cluster, the workload, the fault inside it, a heal period,
the final read and the checker; every process is stopped whatever happens.

The timeline of a run of ``seconds``::

    start cluster, create topic | workload starts | first acks | fault ... until | quiet tail
    | workload flushes | heal: every node up, full ISR | final read | check | stop (SIGTERM, exit 0)

The quiet tail (the last quarter of the run, at most 10 s) is workload without the fault: a fault
that broke the cluster for good shows there as an ack gap that never closes.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from pathlib import Path

from tests.fault.checker import CheckResult, FinalRead, check, final_read
from tests.fault.faults import Fault, FaultContext
from tests.fault.nodes import Nodes
from tests.fault.workload import PARTITIONS, TOPIC, Workload, WorkloadConfig, WorkloadResult, create_topic
from tests.integration.cluster import FAST_FAILOVER, Cluster

HEAL_TIMEOUT_S = 120.0


def run_fault(
    fault: Fault,
    root: Path,
    *,
    seed: int,
    seconds: float,
    rate: float = 60.0,
    producers: int = 2,
    partitions: int = PARTITIONS,
    log: Callable[[str], None] = lambda line: None,
) -> CheckResult:
    """Run ``fault`` inside ``seconds`` of workload on a fresh cluster under ``root``; judge it."""
    cluster = Cluster(root, size=3, voters=3, overrides=(*FAST_FAILOVER, *fault.overrides))
    nodes = Nodes(cluster)
    problems: list[str] = []
    ctx: FaultContext | None = None
    outcome: WorkloadResult | None = None
    read = FinalRead({}, {}, False, "not reached")
    healed = False
    try:
        fault.prepare(cluster)
        cluster.start(timeout_s=90)
        create_topic(cluster.bootstrap, TOPIC, partitions)
        config = WorkloadConfig(
            cluster.bootstrap,
            topic=TOPIC,
            partitions=partitions,
            producers=producers,
            rate=rate,
            seconds=seconds,
        )
        workload = Workload(config)
        ctx = FaultContext(cluster, nodes, workload, random.Random(seed), TOPIC, partitions)
        workload.start()
        try:
            if not workload.wait_for_acks(20, 60, "before the fault"):
                problems.append("the workload got no acks within 60s, before any fault")
            ctx.until = workload.deadline - min(10.0, seconds / 4)
            log(f"{fault.name} seed={seed}: injecting for {ctx.time_left():.0f}s")
            try:
                fault.inject(ctx)
            finally:
                fault.heal(ctx)
            workload.wait_done()
        finally:
            outcome = workload.stop()
        log(f"{fault.name} seed={seed}: workload done, healing")
        healed = nodes.wait_full_isr(TOPIC, partitions, HEAL_TIMEOUT_S) and len(nodes.live()) == len(
            cluster.brokers
        )
        for node in nodes.live():
            if not nodes.serves(node):
                problems.append(f"node {node} does not answer clean requests after the heal")
        read = final_read(cluster.bootstrap, TOPIC, partitions)
    finally:
        try:
            if ctx is not None:
                for node in list(nodes.paused):  # a fault that failed half-way: never stop a stopped one
                    nodes.resume(node)
        finally:
            try:
                nodes.stop_all()
            finally:
                fault.cleanup(cluster)
    assert outcome is not None
    result = check(fault.name, seed, outcome, read, nodes.crashes, nodes.tracebacks())
    result.healed = healed
    if not healed:
        problems.append(f"the cluster did not heal (every node up, full ISR) within {HEAL_TIMEOUT_S:.0f}s")
    result.notes += [f"{nodes.kills} kills, {nodes.pauses} pauses", *(ctx.notes if ctx else [])]
    result.notes += [
        f"traceback after SIGKILL (not a crash): {line}" for line in nodes.tracebacks_after_kill()
    ]
    result.problems += problems + (ctx.problems if ctx else [])
    log(result.summary())
    return result


def failures(result: CheckResult, max_gap_s: float = 60.0) -> list[str]:
    """What every fault run must not show: a broken data invariant, a crash, a cluster that did
    not heal, a fault's own failed check, or acks stopped for a minute (a loose bound: a busy
    machine stretches gaps, so the gap is reported rather than judged)."""
    found = []
    if result.acked == 0:
        found.append("nothing was acknowledged")
    if not result.read_complete:
        found.append("the final read did not complete")
    for name in ("lost", "duplicated", "misplaced", "inconsistent", "backwards", "skipped"):
        if getattr(result, name):
            found.append(f"{name}={getattr(result, name)}")
    if result.crashes:
        found.append(f"{len(result.crashes)} crashes")
    if result.tracebacks:
        found.append(f"{len(result.tracebacks)} tracebacks in the brokers' logs")
    if not result.healed:
        found.append("the cluster did not heal")
    if result.problems:
        found.append(f"{len(result.problems)} problems")
    if result.max_gap_s >= max_gap_s:
        found.append(f"no ack for {result.max_gap_s:.0f}s")
    return found


def assert_clean(result: CheckResult, max_gap_s: float = 60.0) -> None:
    """Fail with the run's full report unless :func:`failures` finds nothing."""
    found = failures(result, max_gap_s)
    assert not found, f"{', '.join(found)}\n{result.report()}"


def timed(fn: Callable[[], CheckResult]) -> tuple[CheckResult, float]:
    started = time.monotonic()
    result = fn()
    return result, time.monotonic() - started


__all__ = ["assert_clean", "failures", "run_fault", "timed"]
