"""The fault suite's long tier: every fault for minutes per seed, then a table of the results.

    .venv/bin/python -m tests.fault.long_tier --seeds 3 --seconds 300

runs each fault of :data:`tests.fault.faults.FAULTS`, and the network partition of
:mod:`tests.fault.partition` in a network namespace of its own (``--faults`` picks some), for ``--seconds`` of
workload per seed, seeds 1 to ``--seeds``, each on a fresh 3-voter cluster, with the mutated-frames
fault sending ``--frames`` frames (1,000,000 by default; the workload is stretched until they are
all sent) and every node of the cluster killed at once about every 100 s. The checker is the CI
tier's (``test_fault_ci.py``); a row is printed as each run ends and the whole table at the end:
fault, seed, acked, lost, duplicated, misplaced, inconsistent, backwards, skipped, max ack gap,
crashes and the verdict. The exit status is 1 if any run failed; a failed run's directory (broker
logs and data) is kept and named. Not part of ``make test``: 3 seeds of 300 s take well over an
hour. ``KIPLING_FAULT_RDKAFKA_DEBUG=eos`` also logs each producer's own view (retries, sequence
errors, epoch bumps) to ``$TMPDIR/kipling-rdkafka-*.log``, for a run that finds duplicates.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

from tests.fault import disk  # noqa: F401  (registers the disk faults in FAULTS)
from tests.fault.checker import CheckResult
from tests.fault.faults import FAULTS, LONG, Tier
from tests.fault.partition import PartitionLeader, run_isolated
from tests.fault.scenario import failures, run_fault

ISOLATED = (PartitionLeader.name,)
"""Faults that run in a network namespace of their own (:mod:`tests.fault.partition`)."""


def max_gap_s(fault: str, seconds: float) -> float:
    """The longest ack gap a run may show (60 s, as in the CI tier), but for the network partition
    the whole run: its isolated leader shrinks the ISR to itself in the replication-only stage
    (below min.insync.replicas 2, so acks=all is refused), and once fully cut off it is the only
    ISR member, so no clean election can move the partition (Kafka does the same without KIP-966's
    eligible leader replicas). The partition comes back when the partition heals, with nothing lost."""
    return seconds + 60.0 if fault in ISOLATED else 60.0


COLUMNS = (
    ("fault", 18),
    ("seed", 4),
    ("acked", 7),
    ("lost", 5),
    ("duplicated", 10),
    ("misplaced", 9),
    ("inconsistent", 12),
    ("backwards", 9),
    ("skipped", 7),
    ("max ack gap", 11),
    ("crashes", 7),
    ("verdict", 7),
)


def row(result: CheckResult, verdict: str) -> str:
    cells = (
        result.fault,
        result.seed,
        result.acked,
        result.lost,
        result.duplicated,
        result.misplaced,
        result.inconsistent,
        result.backwards,
        result.skipped,
        f"{result.max_gap_s:.1f}s",
        len(result.crashes),
        verdict,
    )
    return "  ".join(str(cell).rjust(width) for cell, (_, width) in zip(cells, COLUMNS, strict=True))


def header() -> str:
    return "  ".join(name.rjust(width) for name, width in COLUMNS)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.fault.long_tier", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--seeds", type=int, default=3, help="seeds 1..N per fault (default 3)")
    parser.add_argument("--seconds", type=float, default=LONG.seconds, help="workload per run (default 300)")
    parser.add_argument(
        "--frames", type=int, default=LONG.frames, help="mutated frames per run (default 1e6)"
    )
    known = [*FAULTS, *ISOLATED]
    parser.add_argument("--faults", default=",".join(known), help="comma-separated (default: all)")
    parser.add_argument(
        "--root", type=Path, default=None, help="where the clusters live (default: a temp dir)"
    )
    parser.add_argument(
        "--keep", action="store_true", help="keep every run's directory, not only failed ones"
    )
    args = parser.parse_args(argv)
    names = [name.strip() for name in args.faults.split(",") if name.strip()]
    unknown = [name for name in names if name not in known]
    if unknown:
        parser.error(f"unknown faults {unknown}; known: {', '.join(known)}")
    tier = Tier("long", args.seconds, args.frames, kill_all_rounds=max(1, round(args.seconds / 100)))
    root = args.root or Path(tempfile.mkdtemp(prefix="kipling-fault-"))
    rows: list[str] = []
    failed = 0
    started = time.monotonic()
    for name in names:
        for seed in range(1, args.seeds + 1):
            directory = root / f"{name}-{seed}"
            print(f"# {name} seed {seed}: {args.seconds:.0f}s of workload in {directory}", flush=True)
            try:
                if name in ISOLATED:
                    result = run_isolated(seed, args.seconds, timeout_s=args.seconds * 4 + 240)
                else:
                    result = run_fault(
                        FAULTS[name](tier), directory, seed=seed, seconds=args.seconds, log=lambda line: None
                    )
            except Exception as exc:  # the run itself broke (a cluster that never started): a failure too
                failed += 1
                rows.append(f"{name:>18}  {seed:>4}  run failed: {exc!r} (kept {directory})")
                print(rows[-1], flush=True)
                continue
            found = failures(result, max_gap_s=max_gap_s(name, args.seconds))
            failed += bool(found)
            rows.append(row(result, "FAIL" if found else "ok"))
            print(header(), rows[-1], result.summary(), sep="\n", flush=True)
            if found:
                print(f"  failed: {', '.join(found)} (kept {directory})\n{result.report()}", flush=True)
            elif not args.keep:
                shutil.rmtree(directory, ignore_errors=True)
    print(f"\n{len(rows)} runs in {(time.monotonic() - started) / 60:.0f} min, {failed} failed", flush=True)
    print(header(), *rows, sep="\n", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
