"""Exactly-once through a crash: SIGKILL the driver of a streaming job mid-batch, restart it, count rows.

``pipeline.jobs.topic_to_parquet`` runs as its own process group (the Python driver, the JVM that
py4j starts, and the Python workers the JVM forks) with a 1-second processing-time trigger while a
producer keeps writing to the topic. When the checkpoint shows a micro-batch planned (``offsets/N``)
but not committed (``commits/N``), i.e. files of batch N are being written, the whole group gets
SIGKILL: nothing runs a shutdown hook, as on a power loss. The job is then started again with the
same checkpoint and ``--available-now``, so it re-runs batch N and catches up with everything produced
meanwhile. Reading the output through Spark (whose ``_spark_metadata`` log ignores files of the killed
batch) must give every produced (partition, offset) exactly once.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import structlog

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

from tests.integration.broker_process import BrokerProcess
from tests.pipeline.conftest import ROOT, SPARK_CONF, spark_environment
from tests.pipeline.helpers import Produced, new_topic, produce

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.slow

_log = structlog.get_logger("tests.pipeline.driver_kill")

FIRST_RUN_TIMEOUT_S = 240.0
"""A bound on waiting for the first committed micro-batch (JVM start, 3-6 s on a quiet machine, and
one batch), not a budget: the wait ends as soon as it is seen, and a machine busy with other
processes may take many times longer."""
SECOND_RUN_TIMEOUT_S = 240.0
MIN_COMMITTED_BEFORE_KILL = 1
MID_WRITE_WAIT_S = 8.0
"""How long to try to kill while the in-flight batch's files are written but not yet committed."""
PRODUCE_ROUND = 20
PRODUCE_PAUSE_S = 0.1


@dataclass(frozen=True)
class KillPoint:
    """Where the job was when it was killed."""

    batch: int | None
    """The micro-batch in flight (planned, not committed), if one was."""
    files_written: bool
    """Some of its parquet files were already in the output directory."""


def batch_ids(directory: Path) -> list[int]:
    """Micro-batch ids with a file in a checkpoint's ``offsets`` or ``commits`` directory."""
    if not directory.is_dir():
        return []
    return sorted(int(p.name) for p in directory.iterdir() if p.name.isdigit())


def live_members(pgid: int) -> list[int]:
    """Processes of a process group that are not zombies (a zombie has no memory and runs nothing)."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()  # after "pid (comm) ": state, ppid, pgrp, ...
        if int(fields[2]) == pgid and fields[0] != "Z":
            members.append(int(entry.name))
    return members


def job_environment() -> dict[str, str]:
    """The test session's Spark settings for the job's own JVM, through ``PYSPARK_SUBMIT_ARGS``."""
    args: list[str] = []
    for key, value in SPARK_CONF.items():
        args += ["--conf", f"{key}={value}"]
    return {
        **os.environ,
        **spark_environment(),
        "PYSPARK_SUBMIT_ARGS": shlex.join([*args, "pyspark-shell"]),
        "PYTHONUNBUFFERED": "1",
    }


def start_job(broker: BrokerProcess, topic: str, base: Path, *extra: str) -> subprocess.Popen[bytes]:
    """``python -m pipeline.jobs.topic_to_parquet`` as the leader of a new process group."""
    command = [
        sys.executable,
        "-m",
        "pipeline.jobs.topic_to_parquet",
        "--bootstrap",
        broker.bootstrap,
        "--topic",
        topic,
        "--output",
        str(base / "out"),
        "--checkpoint",
        str(base / "checkpoint"),
        "--master",
        "local[1]",
        *extra,
    ]
    with (base / "job.log").open("ab") as out:
        out.write(f"--- {shlex.join(command[2:])}\n".encode())
        out.flush()
        return subprocess.Popen(
            command,
            cwd=ROOT,
            env=job_environment(),
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def orphan_files(out: Path) -> list[str]:
    """Parquet files in the sink that its ``_spark_metadata`` log does not list (a killed batch's)."""
    listed: set[str] = set()
    metadata = out / "_spark_metadata"
    for entry in metadata.iterdir() if metadata.is_dir() else ():
        if not entry.name.removesuffix(".compact").isdigit():
            continue  # Hadoop's .crc checksum files
        # Read while the driver may still be writing: tolerate a torn or odd file, it is re-read.
        for line in entry.read_text(errors="replace").splitlines():
            if line.startswith("{"):
                try:
                    listed.add(Path(json.loads(line)["path"]).name)
                except (ValueError, KeyError):
                    continue
    return sorted(p.name for p in out.glob("part-*.parquet") if p.name not in listed)


def job_log(base: Path, lines: int = 40) -> str:
    path = base / "job.log"
    text = path.read_text(errors="replace") if path.exists() else ""
    return "\n".join(text.splitlines()[-lines:])


def kill_group(process: subprocess.Popen[bytes]) -> None:
    """SIGKILL the job's whole process group and wait until none of it runs any more."""
    pgid = process.pid  # the leader of its own session and group (start_new_session)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)
    process.wait(10)
    deadline = time.monotonic() + 10
    while (members := live_members(pgid)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not members, f"processes of the killed job still run: {members}"


class BackgroundProducer:
    """Produces rounds of records to both partitions until stopped; keeps what was acknowledged."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.bootstrap = bootstrap
        self.topic = topic
        self.produced: list[Produced] = []
        self.failures: list[BaseException] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="background-producer", daemon=True)

    def start(self) -> BackgroundProducer:
        self._thread.start()
        return self

    def _run(self) -> None:
        first = 0
        try:
            while not self._stop.is_set():
                self.produced += produce(
                    self.bootstrap,
                    self.topic,
                    PRODUCE_ROUND,
                    partitions=(0, 1),
                    first=first,
                    compression="lz4",
                    # record i is stamped base + i s: keep the base moving back so that a long run
                    # never stamps records past log.message.timestamp.after.max.ms (1 h) ahead
                    base_timestamp_ms=int(time.time() * 1000) - first * 1000,
                )
                first += PRODUCE_ROUND
                self._stop.wait(PRODUCE_PAUSE_S)
        except BaseException as exc:  # re-raised in the test by stop()
            self.failures.append(exc)

    def stop(self) -> list[Produced]:
        self._stop.set()
        self._thread.join(30)
        assert not self._thread.is_alive(), "the producer did not stop"
        if self.failures:
            raise self.failures[0]
        return self.produced


def test_sigkill_of_the_driver_mid_batch_then_restart_gives_each_offset_once(
    spark: SparkSession, broker: BrokerProcess, tmp_path: Path
) -> None:
    began = time.monotonic()
    topic = new_topic(broker.bootstrap, "driver-kill", partitions=2)
    producer = BackgroundProducer(broker.bootstrap, topic).start()
    job: subprocess.Popen[bytes] | None = None
    try:
        job = start_job(broker, topic, tmp_path, "--trigger-seconds", "1")
        kill_point = wait_for_a_batch_in_flight(job, tmp_path)
        kill_group(job)
        job = None
        time.sleep(1.0)  # the producer goes on while the job is down
    finally:
        produced = producer.stop()
        if job is not None:
            kill_group(job)
    planned = batch_ids(tmp_path / "checkpoint" / "offsets")
    committed_before = batch_ids(tmp_path / "checkpoint" / "commits")
    orphans = orphan_files(tmp_path / "out")
    _log.info(
        "driver killed",
        in_flight=kill_point.batch,
        files_of_the_killed_batch=len(orphans),
        planned=planned,
        committed=committed_before,
        seconds=round(time.monotonic() - began, 1),
    )

    restarted = start_job(broker, topic, tmp_path, "--available-now")
    try:
        code = restarted.wait(SECOND_RUN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        kill_group(restarted)
        raise AssertionError(f"the restarted job did not finish:\n{job_log(tmp_path)}") from None
    assert code == 0, f"the restarted job failed ({code}):\n{job_log(tmp_path)}"
    _log.info("restarted job finished", seconds=round(time.monotonic() - began, 1))

    committed_after = batch_ids(tmp_path / "checkpoint" / "commits")
    if kill_point.batch is not None:
        assert kill_point.batch in committed_after, "the batch killed in flight must be re-run"
    assert committed_after[: len(committed_before)] == committed_before
    if kill_point.files_written:
        # The killed batch's files (whole, or torn by the kill) are still in the directory: only the
        # _spark_metadata log keeps the read below from seeing them next to the re-run batch's files.
        assert orphans and set(orphans) <= set(orphan_files(tmp_path / "out"))

    rows = spark.read.parquet(str(tmp_path / "out")).select("partition", "offset", "key", "value").collect()
    counts = Counter((r["partition"], r["offset"]) for r in rows)
    duplicates = {key: n for key, n in counts.items() if n > 1}
    assert not duplicates, f"{len(duplicates)} offsets written more than once, e.g. {list(duplicates)[:5]}"
    expected = {(p.partition, p.offset): p for p in produced}
    missing = sorted(set(expected) - set(counts))
    assert not missing, f"{len(missing)} produced offsets missing, e.g. {missing[:5]}"
    assert set(counts) == set(expected), "rows that were never produced"
    assert all(
        r["key"] == expected[(r["partition"], r["offset"])].key.decode()
        and r["value"] == expected[(r["partition"], r["offset"])].value
        for r in rows
    )
    assert len(produced) >= 4 * PRODUCE_ROUND


def wait_for_a_batch_in_flight(job: subprocess.Popen[bytes], base: Path) -> KillPoint:
    """Wait for the moment to kill: a micro-batch planned but not committed, after one was committed.

    Best of all is a batch whose parquet files are already in the output but not yet in
    ``_spark_metadata`` (the driver has not committed them): the crash then leaves orphan files that a
    plain directory listing would read twice. That window is short, so it is awaited for
    ``MID_WRITE_WAIT_S`` after the first batch seen in flight; then any in-flight moment will do.
    Batches run back to back under a 1-second trigger while data keeps arriving, so one is in flight
    most of the time; should none be seen before the deadline, the job is killed between batches
    (still a crash to recover from).
    """
    offsets_dir, commits_dir = base / "checkpoint" / "offsets", base / "checkpoint" / "commits"
    deadline = time.monotonic() + FIRST_RUN_TIMEOUT_S
    settle_by: float | None = None
    while time.monotonic() < deadline:
        if job.poll() is not None:
            raise AssertionError(f"the job exited ({job.returncode}) before it was killed:\n{job_log(base)}")
        committed = batch_ids(commits_dir)
        planned = batch_ids(offsets_dir)
        if len(committed) >= MIN_COMMITTED_BEFORE_KILL and planned and planned[-1] > committed[-1]:
            if orphan_files(base / "out"):
                return KillPoint(planned[-1], files_written=True)
            settle_by = settle_by or time.monotonic() + MID_WRITE_WAIT_S
            if time.monotonic() > settle_by:
                return KillPoint(planned[-1], files_written=False)
        time.sleep(0.005)
    if len(batch_ids(commits_dir)) < MIN_COMMITTED_BEFORE_KILL:
        raise AssertionError(f"the job committed too few batches in time:\n{job_log(base)}")
    _log.warning("no batch seen in flight: killing the job between batches")
    return KillPoint(None, files_written=False)
