"""The fault suite's checker: a final full read of every partition, judged against what the
workload's clients were told and saw.

After the fault and a heal period the whole topic is read from a healthy cluster, from offset 0 up
to each partition's high watermark, and the invariants of ``reference/reliability.md`` that a
client can observe are counted (Jepsen's Kafka checker names in brackets):

* **lost** — an acknowledged value that is nowhere in the log (lost-write);
* **duplicated** — a value at more than one offset: the idempotent producers must make retries
  invisible (duplicate);
* **misplaced** — an acknowledged value that is in the log, but not at the offset it was
  acknowledged at (inconsistent-offsets, seen from the producer);
* **inconsistent** — a value the live reader read at an offset, where the final log holds something
  else or nothing: a read of data the log later lost or moved (inconsistent-offsets, seen from the
  consumer);
* **backwards** / **skipped** — the live reader got an offset at or below the previous one of its
  partition, or jumped over offsets (nonmonotonic-poll, poll-skip);
* **crashes** — a broker process that died although no fault killed it, or did not exit 0 when
  stopped gracefully; **tracebacks** in the brokers' logs are listed with them;
* **max ack gap** per partition — the longest time without an acknowledgement (availability during
  the fault; reported, only loosely bounded, since a busy machine stretches it).

A value whose delivery failed may or may not be in the log (its outcome is indeterminate), so it
is neither lost nor a problem, only counted.
"""

from __future__ import annotations

import re
import time
from collections import defaultdict
from dataclasses import dataclass, field

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

from tests.fault.workload import WorkloadResult

WORKLOAD_VALUE = re.compile(rb"^p\d+-\d+$")
EXAMPLES = 5
"""How many examples of each violation a result keeps (the counts are complete)."""


@dataclass
class FinalRead:
    """Every record of every partition, partition → [(offset, value)], read up to the watermarks."""

    records: dict[int, list[tuple[int, bytes]]]
    high_watermarks: dict[int, int]
    complete: bool
    error: str = ""


def final_read(bootstrap: str, topic: str, partitions: int, timeout_s: float = 120.0) -> FinalRead:
    """Read every partition from offset 0 to its high watermark (taken first) with a fresh consumer."""
    deadline = time.monotonic() + timeout_s
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "fault-final-read",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "enable.partition.eof": True,
            "log_level": 2,
        }
    )
    records: dict[int, list[tuple[int, bytes]]] = {p: [] for p in range(partitions)}
    watermarks: dict[int, int] = {}
    try:
        for p in range(partitions):
            while p not in watermarks:
                try:
                    watermarks[p] = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                except Exception as exc:  # a leader still moving: ask again until the deadline
                    if time.monotonic() > deadline:
                        return FinalRead(records, watermarks, False, f"no watermark for {p}: {exc}")
                    time.sleep(0.5)
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        position = {p: 0 for p in range(partitions)}
        while any(position[p] < watermarks[p] for p in range(partitions)):
            if time.monotonic() > deadline:
                short = {p: (position[p], watermarks[p]) for p in range(partitions)}
                return FinalRead(records, watermarks, False, f"read (position, watermark) {short} only")
            for msg in consumer.consume(num_messages=5000, timeout=0.5):
                err = msg.error()
                if err is not None:
                    if err.code() != KafkaError._PARTITION_EOF:
                        time.sleep(0.1)
                    continue
                partition, offset, value = msg.partition(), msg.offset(), msg.value()
                assert partition is not None and offset is not None
                if offset >= watermarks[partition] or offset < position[partition]:
                    continue  # past the watermark taken, or read already (a refetch after an error)
                records[partition].append((offset, value if isinstance(value, bytes) else b""))
                position[partition] = max(position[partition], offset + 1)
        return FinalRead(records, watermarks, True)
    finally:
        consumer.close()


@dataclass
class CheckResult:
    """One run of one fault: the counts a test asserts on, and examples of each violation."""

    fault: str
    seed: int
    sent: int = 0
    acked: int = 0
    failed: int = 0
    unflushed: int = 0
    read: int = 0
    lost: int = 0
    duplicated: int = 0
    misplaced: int = 0
    inconsistent: int = 0
    backwards: int = 0
    skipped: int = 0
    foreign: int = 0
    """Records in the topic that no workload producer sent (nothing else writes there)."""
    max_ack_gap_s: dict[int, float] = field(default_factory=dict)
    max_ack_gap_at_s: dict[int, float] = field(default_factory=dict)
    """When each partition's longest gap began, in seconds since the workload started."""
    crashes: list[str] = field(default_factory=list)
    tracebacks: list[str] = field(default_factory=list)
    read_complete: bool = False
    healed: bool = False
    """Every node came back and every partition had its full ISR again before the final read."""
    problems: list[str] = field(default_factory=list)
    """Examples of each violation, the fault's own failed checks and the clients' errors."""
    notes: list[str] = field(default_factory=list)
    """Figures the fault reports (kills, frames sent, RSS...)."""

    @property
    def max_gap_s(self) -> float:
        return max(self.max_ack_gap_s.values(), default=0.0)

    @property
    def safe(self) -> bool:
        """No data invariant broken and no crash."""
        return not (
            self.lost
            or self.duplicated
            or self.misplaced
            or self.inconsistent
            or self.backwards
            or self.skipped
            or self.crashes
            or self.tracebacks
        )

    def summary(self) -> str:
        gaps = " ".join(
            f"p{p}={gap:.1f}s@{self.max_ack_gap_at_s.get(p, 0.0):.0f}s"
            for p, gap in sorted(self.max_ack_gap_s.items())
        )
        return (
            f"{self.fault} seed={self.seed}: sent={self.sent} acked={self.acked} failed={self.failed} "
            f"read={self.read} lost={self.lost} duplicated={self.duplicated} misplaced={self.misplaced} "
            f"inconsistent={self.inconsistent} backwards={self.backwards} skipped={self.skipped} "
            f"crashes={len(self.crashes)} tracebacks={len(self.tracebacks)} healed={self.healed} "
            f"max_ack_gap[{gaps}]" + (f" | {'; '.join(self.notes)}" if self.notes else "")
        )

    def report(self) -> str:
        """The summary, then every problem (what a failing assertion shows)."""
        lines = [self.summary(), *self.problems, *self.crashes, *self.tracebacks]
        return "\n".join(lines)


def check(
    fault: str,
    seed: int,
    workload: WorkloadResult,
    read: FinalRead,
    crashes: list[str],
    tracebacks: list[str],
) -> CheckResult:
    """Judge one run; see the module docstring for what each count means."""
    result = CheckResult(
        fault=fault,
        seed=seed,
        sent=workload.sent,
        acked=len(workload.acked) + len(workload.acked_unplaced),
        failed=len(workload.failed),
        unflushed=workload.unflushed,
        read_complete=read.complete,
        crashes=list(crashes),
        tracebacks=list(tracebacks),
        max_ack_gap_s=workload.max_ack_gap_s(),
        max_ack_gap_at_s={p: at for p, (_, at) in workload.max_ack_gaps().items()},
    )
    problems: dict[str, list[str]] = defaultdict(list)
    if not read.complete:
        problems["final read"].append(f"the final read did not complete: {read.error}")
    if workload.unflushed:
        problems["unflushed"].append(f"{workload.unflushed} values never got an outcome from the producers")
    problems["client"].extend(workload.client_errors)

    where: dict[bytes, list[tuple[int, int]]] = defaultdict(list)
    at: dict[tuple[int, int], bytes] = {}
    for partition, records in read.records.items():
        for offset, value in records:
            where[value].append((partition, offset))
            at[(partition, offset)] = value
            result.read += 1
            if not WORKLOAD_VALUE.match(value):
                result.foreign += 1
                problems["foreign"].append(f"{value[:40]!r} at {partition}/{offset}: no producer sent it")

    for value, places in where.items():
        if len(places) > 1:
            result.duplicated += 1
            problems["duplicated"].append(f"{value!r} at {places}")

    for value, ack in workload.acked.items():
        found = where.get(value)
        if not found:
            if read.complete:
                result.lost += 1
                problems["lost"].append(
                    f"{value!r} acknowledged at {ack.partition}/{ack.offset}, not in the log"
                )
        elif (ack.partition, ack.offset) not in found:
            result.misplaced += 1
            problems["misplaced"].append(
                f"{value!r} acknowledged at {ack.partition}/{ack.offset}, found at {found}"
            )

    for value, on in workload.acked_unplaced.items():
        if value not in where and read.complete:
            result.lost += 1
            problems["lost"].append(f"{value!r} acknowledged (no offset) on {on}, not in the log")
    if workload.acked_unplaced:
        result.notes.append(f"{len(workload.acked_unplaced)} acked without an offset (checked for presence)")

    for r in workload.reads:
        final = at.get((r.partition, r.offset))
        if final != r.value and (final is not None or read.complete):
            result.inconsistent += 1
            problems["inconsistent"].append(
                f"{r.value!r} read live at {r.partition}/{r.offset}, the log holds {final!r} there"
            )

    result.backwards = len(workload.backwards)
    problems["backwards"].extend(workload.backwards)
    result.skipped = len(workload.skips)
    problems["skipped"].extend(workload.skips)

    for kind, examples in problems.items():
        for example in examples[:EXAMPLES]:
            result.problems.append(f"{kind}: {example}")
        if len(examples) > EXAMPLES:
            result.problems.append(f"{kind}: ... {len(examples) - EXAMPLES} more")
    return result


__all__ = ["CheckResult", "FinalRead", "check", "final_read"]
