"""Disk faults on one node of the fault suite's cluster: a full disk, a corrupted and a truncated
segment. Each runs inside the same workload and checker as the process faults.

* ``disk-full`` — one node keeps its partition data on a small tmpfs of its own (``log.dirs``),
  its metadata log elsewhere (``metadata.log.dir``, as Kafka recommends). The fault fills the
  tmpfs with a ballast file, restarts the node on the full disk (a broker must start on one), and
  then deletes the ballast: the node must take writes again and return to every ISR by itself.
  ``disk-full-shared`` does the same with the node's metadata log on that disk too
  (Kafka's default layout), so its metadata quorum replica fills with its data.
* ``corrupt-segment`` — the preferred leader of one partition is stopped cleanly, 16 bytes of a
  batch header in its segment are flipped (a batch a clean start does not scan), and it is
  restarted: as after a clean shutdown in Kafka, nothing is re-validated. It rejoins the ISR and is
  made leader again (a controlled shutdown of the node that led meanwhile); a reader going through
  the partition from offset 0 then meets the damage. The node must take the replica offline
  (KAFKA_STORAGE_ERROR), give up leadership to a healthy ISR member, cut its log back to the last
  valid batch and fetch the rest again, and nobody may read anything but what was acknowledged.
* ``truncated-segment`` — the same, with the segment cut inside its last batch instead: the node
  must notice at its start, even a clean one, and cut the torn batch off before it appends.

The damaged-segment faults found a broker bug, fixed with them: a restarted follower whose
truncation by leader epoch met the damage gave the partition up for good; it now reopens its log
with crash recovery and fetches the rest again (``follower/replica_log.py``).
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import time
from pathlib import Path

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

from protocol.api_keys import ApiKey
from storage.segment import walk_batches
from tests.fault.faults import FAULTS, Fault, FaultContext
from tests.integration.cluster import Cluster
from tests.integration.tmpfs import mount_tmpfs, unmount
from tests.integration.wire_client import WireClient

TMPFS_SIZE = "48m"
BALLAST = "ballast"
LAST_OFFSET_DELTA_AT = 23
"""A batch header's LastOffsetDelta: flipped, the batch claims a negative or absurd record count."""


def _fill(path: Path) -> int:
    """Write zeros to ``path`` until the file system is full; the bytes written."""
    written = 0
    chunk = bytes(1024 * 1024)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        while True:
            try:
                written += os.write(fd, chunk)
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise
                if len(chunk) == 1:
                    return written
                chunk = chunk[: len(chunk) // 2]
    finally:
        os.close(fd)


class DiskFull(Fault):
    name = "disk-full"

    def __init__(self, node: int = 3, *, shared: bool = False) -> None:
        """``shared``: the metadata log is on the full disk too (``metadata.log.dir`` unset: the
        first ``log.dirs`` entry, Kafka's default), so the node's quorum replica fills with it."""
        self.node = node
        self.shared = shared
        self.mount: Path | None = None
        if shared:
            self.name = "disk-full-shared"

    def prepare(self, cluster: Cluster) -> None:
        broker = cluster.brokers[self.node]
        mount = broker.data_dir / "data"
        problem = mount_tmpfs(mount, TMPFS_SIZE)
        if problem is not None:
            raise RuntimeError(f"disk-full needs a tmpfs (root): {problem}")
        self.mount = mount
        broker.overrides.append(f"log.dirs={mount}")
        if not self.shared:
            broker.overrides.append(f"metadata.log.dir={broker.data_dir / 'logs'}")

    def inject(self, ctx: FaultContext) -> None:
        assert self.mount is not None
        ballast = self.mount / BALLAST
        third = max(4.0, ctx.time_left() / 3)
        ctx.sleep(2)
        ctx.notes.append(f"node {self.node}: disk filled ({_fill(ballast) // 2**20} MiB of ballast)")
        ctx.sleep(third)
        ctx.nodes.kill(self.node)  # SIGKILL: its restart recovers, on the full disk
        ctx.nodes.restart(self.node)
        ctx.notes.append(f"node {self.node} restarted on the full disk")
        ctx.sleep(third)
        ballast.unlink()
        ctx.notes.append("ballast deleted: space returned")
        if not ctx.nodes.wait_full_isr(ctx.topic, ctx.partitions, timeout_s=60):
            ctx.problems.append(f"node {self.node} did not return to every ISR within 60s of space returning")

    def heal(self, ctx: FaultContext) -> None:
        if self.mount is not None:
            with contextlib.suppress(FileNotFoundError):
                (self.mount / BALLAST).unlink()
        super().heal(ctx)

    def cleanup(self, cluster: Cluster) -> None:
        if self.mount is not None:
            unmount(self.mount)


def _replicas(ctx: FaultContext, partition: int) -> list[int]:
    """The partition's replicas in assignment order (the first is its preferred leader)."""
    for node in ctx.nodes.live():
        body = {"topics": [{"name": ctx.topic}], "allow_auto_topic_creation": False}
        with (
            contextlib.suppress(OSError, ConnectionError, AssertionError),
            WireClient(ctx.cluster.brokers[node].port, timeout_s=5) as client,
        ):
            answer = client.request(ApiKey.METADATA, 9, body).body
            for p in answer.topics[0].partitions:
                if p.partition_index == partition:
                    return list(p.replica_nodes)
    return []


def _read_from_start(bootstrap: str, topic: str, partition: int, timeout_s: float) -> int:
    """Read ``partition`` from offset 0 in small fetches, as a consumer catching up would, until it
    reaches the end or the time is up; the records read. Errors are retried (the leader moves)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "fault-disk-reader",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "max.partition.fetch.bytes": 1024,
            "fetch.max.bytes": 1024,
            "message.max.bytes": 1000,
            "topic.metadata.refresh.interval.ms": 1000,
            "log_level": 2,
        }
    )
    read = 0
    deadline = time.monotonic() + timeout_s
    try:
        consumer.assign([TopicPartition(topic, partition, OFFSET_BEGINNING)])
        while time.monotonic() < deadline:
            for msg in consumer.consume(num_messages=500, timeout=0.5):
                error = msg.error()
                if error is None:
                    read += 1
                elif error.code() == KafkaError._PARTITION_EOF:
                    return read
    finally:
        consumer.close()
    return read


def _stop_cleanly(ctx: FaultContext, node: int) -> None:
    """SIGTERM: a controlled shutdown that leaves clean logs; the node counts as down until restarted."""
    ctx.nodes.check_alive()
    code = ctx.cluster.brokers[node].stop(signal.SIGTERM)
    ctx.nodes.down.add(node)
    if code != 0:
        ctx.problems.append(f"node {node} exited with {code} on SIGTERM")


class DamagedSegment(Fault):
    """Damage a stopped replica's segment (``how``: "corrupt" or "truncate"), bring it back as
    leader, and read through the damage."""

    def __init__(self, how: str) -> None:
        assert how in ("corrupt", "truncate")
        self.how = how
        self.name = "corrupt-segment" if how == "corrupt" else "truncated-segment"

    def inject(self, ctx: FaultContext) -> None:
        partition = ctx.rng.randrange(ctx.partitions)
        replicas = _replicas(ctx, partition)
        if len(replicas) < 3:
            ctx.problems.append(f"no replica assignment for partition {partition}")
            return
        victim = replicas[0]
        ctx.sleep(min(8.0, ctx.time_left() / 4))  # some data in the segment first
        broker = ctx.cluster.brokers[victim]
        _stop_cleanly(ctx, victim)  # its logs are trusted at the next start
        directory = ctx.cluster.partition_dir(victim, ctx.topic, partition)
        ctx.notes.append(f"node {victim}, partition {partition}: {self._damage(directory)}")
        ctx.nodes.restart(victim)
        if not ctx.nodes.wait_full_isr(ctx.topic, ctx.partitions, timeout_s=60):
            ctx.problems.append(f"node {victim} did not rejoin the ISR after its restart")
            return
        leader = ctx.nodes.leader(ctx.topic, partition)
        if leader is not None and leader != victim:
            _stop_cleanly(ctx, leader)  # a controlled shutdown: the preferred replica leads again
            ctx.notes.append(f"node {leader} stopped: node {victim} leads partition {partition} again")
            read = _read_from_start(ctx.cluster.bootstrap, ctx.topic, partition, max(10.0, ctx.time_left()))
            ctx.notes.append(f"read {read} records of partition {partition} from offset 0 through the damage")
            ctx.nodes.restart(leader)
        output = broker.output()
        if "partition read failed" in output:
            ctx.problems.append(f"node {victim} answered a read of the damage with UNKNOWN_SERVER_ERROR")

    def _damage(self, directory: Path) -> str:
        logs = sorted(directory.glob("*.log"))
        path = logs[-1]
        fd = os.open(path, os.O_RDWR)
        try:
            size = os.fstat(fd).st_size
            batches = list(walk_batches(fd, 0, size))
            if self.how == "truncate":
                cut = batches[-1].position + batches[-1].size // 2
                os.ftruncate(fd, cut)
                return f"{path.name} cut from {size} to {cut} bytes, inside its last batch"
            victim = batches[len(batches) // 3]
            at = victim.position + LAST_OFFSET_DELTA_AT
            os.pwrite(fd, bytes(b ^ 0xFF for b in os.pread(fd, 16, at)), at)
            os.fsync(fd)
            return f"16 bytes flipped at {at} of {path.name} (the batch at {victim.position})"
        finally:
            os.close(fd)


FAULTS["disk-full"] = lambda tier: DiskFull()
FAULTS["disk-full-shared"] = lambda tier: DiskFull(shared=True)
FAULTS["corrupt-segment"] = lambda tier: DamagedSegment("corrupt")
FAULTS["truncated-segment"] = lambda tier: DamagedSegment("truncate")
DISK_FAULTS = ["disk-full", "disk-full-shared", "corrupt-segment", "truncated-segment"]

__all__ = ["DISK_FAULTS", "DamagedSegment", "DiskFull"]
