"""Fetch-session scaling in one process: CPU and bytes per fetch, incremental (KIP-227) against sessionless.

``bench/fetch_sessions.py`` measures a broker process from outside, but stops near N = 3,500
partitions here: every partition holds segment files and index maps open, and the hard
``RLIMIT_NOFILE`` (20,000) cannot be raised. This benchmark removes that limit by replacing exactly
one layer, the segment files, and keeps every layer above it:

* **real broker code** from the request bytes to the response buffers:
  ``RequestDispatcher.dispatch`` (request header and body decoded by ``protocol.messages`` codecs, version
  check, :class:`~broker.handlers.fetch.FetchHandler`, response header, the
  :class:`~broker.handlers.base.EncodedResponse` parts, request metrics) →
  :class:`~broker.fetch.service.FetchService` (byte budget, long-poll decision, result building) →
  :mod:`broker.fetch_session` (``FetchManager``, ``FetchSessionCache`` with its watch index, the sessions'
  dirty sets) → :class:`~broker.replication.replica_manager.ReplicaManager` →
  :class:`~broker.replication.partition.Partition` (``read``, the high-watermark rule, ``append_records``
  with its batch validation, producer state, and the listeners through which
  ``FetchService.on_partition_changed`` marks sessions dirty) → :mod:`broker.fetch.response` (topics
  grouping, records as external bytes); topics created by a real
  :class:`~metadata.controller.controller.QuorumController` (over an in-memory metadata log, this node
  registered and unfenced) and led as the replica transitions lead them (``ReplicaManager.lead``), looked up
  in the controller's metadata image; the leader epoch cache a real
  :class:`~storage.epoch.LeaderEpochFileCache` without a checkpoint file;
* **in memory instead of on disk**: :class:`MemoryLog` stands in for ``storage.log.PartitionLog`` and
  its ``LogSegment`` files (``.log``, ``.index``, ``.timeindex``), and :class:`MemoryLogManager` for the
  ``LogManager`` that opens them. Appends still go through the real
  ``storage.validation.assign_offsets_as_leader`` (CRC check, offset and epoch stamping); batches are
  kept in one ``bytearray`` per partition, and reads return ``storage.slices.FileSlice`` objects over it,
  exactly the type a real segment returns, so the response is encoded around them as the broker does
  (no copy). The only differences: a batch lookup is a bisect over an in-memory list where a segment
  binary-searches its memory-mapped offset index and preads a header or two, and nothing is written to
  the socket (``sendfile`` of the slices, the kernel's share, is not counted). Both are O(1) per partition
  read, so they shift the per-partition cost, not how it grows with N.

Per session size N (``N/100`` topics of 100 partitions, as the process-level bench), a fresh "broker"
is built, then:

* one full fetch (session id 0, epoch 0, all N partitions, ``max_wait_ms`` 0) creates the session;
* ``incremental``: rounds of one batch (~100 bytes of records) appended to 1 % of the partitions (a
  seeded random sample per round), then an incremental fetch listing only the partitions whose fetch
  offset moved, i.e. those that returned records in the previous response (kafka-python's and Kafka's
  FetchSessionHandler), forgetting nothing, ``max_wait_ms`` 0;
* ``incremental_fixed``: the same with a fixed number of changed partitions (10) whatever N. With 1 %
  changed the work per fetch grows with N by design; this is the mode that must give a flat line;
* ``sessionless_full``: the same 1 % rounds with full fetches (session id 0, epoch -1) listing all N
  partitions at their current offsets, as librdkafka and aiokafka do.

Modes alternate in blocks; the first rounds of each block are dropped (they carry the catch-up of the
other modes' appends). Every round is checked, warm-up rounds included: an incremental response holds
exactly the partitions with new data, a full response all N partitions; every returned record set is
CRC-checked and must start at the client's fetch offset and end at the high watermark.

CPU per fetch is ``time.process_time_ns`` around ``dispatch`` only (decode, handle, encode); the
request is built and the response decoded and checked outside that window. The garbage collector stays
enabled, as in the broker, and ``gc.callbacks`` time what it takes inside the window: tables give the
median (a full collection, which scans the whole heap and so grows with N, lands in a few fetches at
random and shows in the mean) and the median without GC time. The in-memory logs hold fewer long-lived
objects per partition than real ones (about 29 against 45 tracked objects), and CPython starts a full
collection when survivors reach 25 % of the long-lived heap, so full collections come somewhat more
often here than in a broker on disk, each over a smaller heap.

At the largest N the fetches of both session modes are profiled (cProfile) and the functions with the
most own time printed with their calls per fetch: a function called ~N times per fetch is an O(N)
term. Two diagnostics run there and at the first N where 1 % reaches the fixed count (1,000), also
with 10 changed partitions per fetch: the *same* 10 partitions every round (their objects stay in
the CPU caches, so against random ones this separates cache misses from work), and random ones again
after a burst that changed every partition once (a consumer catching up): the session's dirty set
then held all N partitions, and what it costs afterwards is shown.

Run from the repository root: ``python -m bench.fetch_sessions_inprocess`` (``--sizes``, ``--rounds``,
``--full-rounds``, ``--blocks``, ``--fixed-changed``, ``--fetch-version`` 12 (names) or 13+ (topic ids),
``--no-profile``, ``--no-diagnostics``); writes ``bench/results/fetch_sessions_inprocess.json`` and
``.png`` (two log-log panels).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import io
import pathlib
import pstats
import random
import resource
import statistics
import sys
import tempfile
import time
import uuid
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import structlog
from prometheus_client import CollectorRegistry

from bench import RESULTS_DIR, write_results
from bench.scaling_plot import plot_session_scaling
from broker.fetch.service import FetchService
from broker.fetch_session import FetchManager, FetchSessionCache, FetchSessionCacheMetrics
from broker.handlers.fetch import FetchHandler
from broker.handlers.registry import HandlerRegistry
from broker.metrics.requests import RequestMetrics
from broker.replication.partition import Partition
from broker.replication.replica_manager import ReplicaManager
from broker.server.dispatcher import Reply, RequestDispatcher
from metadata.controller.controller import ControllerConfig, QuorumController
from metadata.controller.metadata_log import InMemoryMetadataLog
from metadata.controller.replication_control import CreatableTopic
from metadata.controller.topic_rules import MAX_PARTITIONS_PER_REQUEST
from metadata.image import MetadataImage
from metadata.records import BrokerEndpointRecord, SecurityProtocol
from protocol.api import decode_response, encode_request
from protocol.api_keys import ApiKey
from protocol.error_codes import ErrorCode
from protocol.records import HEADER_SIZE, Record, build_batch, read_header, verify_batch
from protocol.sentinels import NO_LEADER_EPOCH, NO_TIMESTAMP, UNKNOWN_OFFSET
from server_common.config import BrokerConfig, load_config
from server_common.purgatory import DelayedOperationPurgatory
from storage.clock import Clock, SystemClock
from storage.config import LogConfig
from storage.epoch import LeaderEpochFileCache
from storage.errors import OffsetOutOfRangeError
from storage.log import AppendInfo, ReadResult
from storage.segment import BatchPosition
from storage.slices import FileSlice
from storage.validation import assign_offsets_as_leader

NODE_ID = 1
PARTITIONS_PER_TOPIC = 100
CHANGED_FRACTION = 0.01
VALUE_BYTES = 100
PARTITION_MAX_BYTES = 1 << 20
RESPONSE_MAX_BYTES = 50 << 20
"""The client's max_bytes; the broker caps it at fetch.max.bytes (default 55 MiB), never reached here."""
DEFAULT_SIZES = "100,300,1000,3000,10000,30000,100000"
MODES = ("sessionless_full", "incremental", "incremental_fixed")


def topic_name(t: int) -> str:
    return f"fs-{t:04d}"


# -- the in-memory storage layer -----------------------------------------------------------------------


class MemorySegmentFile:
    """The bytes of one in-memory segment; what a ``FileSlice`` of a :class:`MemorySegment` points into.

    It has no file descriptor on purpose: anything that tries to ``pread`` or ``sendfile`` it (the
    socket write, the fetch v<10 zstd probe) fails loudly instead of reading something else.
    """

    __slots__ = ("data", "name")

    def __init__(self, name: str) -> None:
        self.name = name
        self.data = bytearray()

    def fileno(self) -> int:
        raise io.UnsupportedOperation(f"{self.name} is an in-memory segment: no file descriptor")

    def slice_bytes(self, file_slice: FileSlice) -> bytes:
        """What ``sendfile`` would put on the wire for ``file_slice`` (the benchmark client's view)."""
        return bytes(self.data[file_slice.position : file_slice.position + file_slice.length])


class MemorySegment:
    """The one segment of a :class:`MemoryLog`: ``LogSegment``'s read side over a bytearray.

    Batch lookups bisect lists of last offsets and positions, where the real segment binary-searches
    its offset index and scans at most ``index.interval.bytes`` of headers. Reads follow
    ``LogSegment.read`` rule for rule (whole batches, exclusive ``max_offset``, ``max_bytes`` with the
    first-batch exception).
    """

    __slots__ = ("_batches", "_ends", "_lasts", "_positions", "base_offset", "file")

    def __init__(self, name: str, base_offset: int = 0) -> None:
        self.base_offset = base_offset
        self.file = MemorySegmentFile(name)
        self._batches: list[BatchPosition] = []
        self._lasts: list[int] = []
        self._positions: list[int] = []
        self._ends: list[int] = []

    @property
    def size(self) -> int:
        return len(self.file.data)

    @property
    def next_offset(self) -> int:
        return self._lasts[-1] + 1 if self._lasts else self.base_offset

    def append(self, data: bytes | bytearray, leader_epoch: int) -> None:
        """Append validated, stamped batches and index each of them (headers only)."""
        position = len(self.file.data)
        self.file.data += data
        pos, end = 0, len(data)
        while pos < end:
            header = read_header(data, pos)
            batch = BatchPosition(
                position + pos,
                header.base_offset,
                header.last_offset,
                header.size,
                header.max_timestamp,
                leader_epoch,
            )
            self._batches.append(batch)
            self._lasts.append(batch.last_offset)
            self._positions.append(batch.position)
            self._ends.append(batch.position + batch.size)
            pos += header.size

    def translate_offset(self, offset: int, start_position: int = 0) -> BatchPosition | None:
        """The first batch whose last offset is >= ``offset`` (at or after ``start_position``)."""
        i = max(bisect_left(self._lasts, offset), bisect_left(self._positions, start_position))
        return self._batches[i] if i < len(self._batches) else None

    def read(
        self, start_offset: int, max_bytes: int, max_offset: int | None = None, min_one_batch: bool = True
    ) -> tuple[FileSlice, int] | None:
        """``LogSegment.read``: (slice of whole batches, base offset of the first), or None."""
        first = self.translate_offset(start_offset)
        if first is None:
            return None
        size = self.size
        bound = size
        if max_offset is not None and max_offset < self.next_offset:
            limit = self.translate_offset(max_offset, first.position)
            bound = size if limit is None else limit.position
        end = min(bound, first.position + max_bytes)
        if end < bound:
            k = bisect_right(self._ends, end) - 1
            end = self._ends[k] if k >= 0 and self._ends[k] >= first.position else first.position
        if end == first.position and min_one_batch and first.position < bound:
            end = first.position + first.size
        return FileSlice(self.file, first.position, end - first.position), first.base_offset  # type: ignore[arg-type]


class MemoryLog:
    """Stands in for ``storage.log.PartitionLog``: the same offsets and calls, one in-memory segment.

    It provides what :class:`~broker.replication.partition.Partition` and the ReplicaManager use of a log: the
    offsets (log start, log end, high watermark), the leader epoch cache, ``append_as_leader`` (through
    the real offset assignment and CRC check), ``read`` with ``PartitionLog.read``'s range rules, and the
    segment view that ``bytes_available`` / ``on_older_segment`` (the long-poll checks) inspect. No
    retention, rolling, flushing or recovery: nothing here is ever on disk.
    """

    def __init__(
        self, directory: pathlib.Path, topic: str, partition: int, topic_id: uuid.UUID, config: LogConfig
    ) -> None:
        self.directory = directory
        """A path that does not exist: the producer-state manager scans it and finds no snapshot."""
        self.topic = topic
        self.partition = partition
        self.topic_id = topic_id
        self.config = config
        self.leader_epoch_cache = LeaderEpochFileCache(None)
        self.log_start_offset = 0
        self.log_end_offset = 0
        self.high_watermark = 0
        self.recovery_point = 0
        self._clock: Clock = SystemClock()
        self._segment = MemorySegment(f"{topic}-{partition}/00000000000000000000.log")

    def drop_aborted_txns_from(self, offset: int) -> None:
        """``PartitionLog.drop_aborted_txns_from``: nothing to drop, the bench writes no transactions."""

    def append_as_leader(self, batches: bytes | bytearray | memoryview, leader_epoch: int) -> AppendInfo:
        """``PartitionLog.append_as_leader`` without the file: validate, stamp, keep the bytes."""
        buf = bytearray(batches)
        now = self._clock.time_ms()
        validated = assign_offsets_as_leader(buf, self.log_end_offset, leader_epoch, self.config, now)
        if validated.batches:
            if leader_epoch != self.leader_epoch_cache.latest_epoch:
                self.leader_epoch_cache.assign(leader_epoch, validated.first_offset)
            self._segment.append(buf, leader_epoch)
            self.log_end_offset = validated.last_offset + 1
            self.recovery_point = self.log_end_offset
        return AppendInfo(
            validated.first_offset,
            validated.last_offset,
            validated.max_timestamp,
            validated.offset_of_max_timestamp,
            now if self.config.log_append_time else NO_TIMESTAMP,
            validated.num_records,
            validated.size,
        )

    def read(
        self, start_offset: int, max_bytes: int, max_offset: int | None = None, min_one_batch: bool = True
    ) -> ReadResult:
        """``PartitionLog.read``: whole batches from the one holding ``start_offset``."""
        log_start, log_end = self.log_start_offset, self.log_end_offset
        if start_offset == log_end:
            return ReadResult(None, None, log_start, log_end)
        if not log_start <= start_offset < log_end:
            raise OffsetOutOfRangeError(
                f"offset {start_offset} is out of range [{log_start}, {log_end}] "
                f"for {self.topic}-{self.partition}"
            )
        segment = self._segment
        if max_offset is not None and segment.base_offset >= max_offset:
            return ReadResult(None, None, log_start, log_end)
        found = segment.read(start_offset, max_bytes, max_offset, min_one_batch)
        if found is None or found[0].length == 0:
            return ReadResult(None, None, log_start, log_end)
        return ReadResult(found[0], found[1], log_start, log_end)

    def update_high_watermark(self, offset: int) -> int:
        self.high_watermark = min(max(offset, self.log_start_offset), self.log_end_offset)
        return self.high_watermark

    def segments(self) -> list[MemorySegment]:
        return [self._segment]

    @property
    def active_segment(self) -> MemorySegment:
        return self._segment

    @property
    def size_in_bytes(self) -> int:
        return self._segment.size

    def close(self) -> None:
        """Nothing to flush or close."""


class MemoryLogManager:
    """Stands in for ``storage.log_manager.LogManager``: hands the ReplicaManager a :class:`MemoryLog`.

    Only the calls the ReplicaManager makes; it starts empty, so there are never stray logs to delete.
    """

    def __init__(self, root: pathlib.Path) -> None:
        self._root = root / "in-memory-logs"
        self._logs: dict[tuple[str, int], MemoryLog] = {}

    def get_or_create_log(
        self, topic: str, partition: int, topic_id: uuid.UUID | None, config: LogConfig | None = None
    ) -> MemoryLog:
        key = (topic, partition)
        log = self._logs.get(key)
        if log is None:
            assert topic_id is not None
            directory = self._root / f"{topic}-{partition}"
            log = self._logs[key] = MemoryLog(directory, topic, partition, topic_id, config or LogConfig())
        return log

    def all_logs(self) -> list[MemoryLog]:
        return list(self._logs.values())

    def delete_log(self, topic: str, partition: int) -> None:
        self._logs.pop((topic, partition), None)

    def mark_stray(self, topic: str, partition: int) -> pathlib.Path | None:
        log = self._logs.pop((topic, partition), None)
        return None if log is None else log.directory

    def run_retention(self) -> int:
        return 0


# -- a broker without its sockets ----------------------------------------------------------------------


def create_topics(n: int, clock: Clock) -> MetadataImage:
    """N partitions (``N/100`` topics) created by a controller of a cluster of one broker (this node),
    as many topics per CreateTopics as Kafka allows (``MAX_PARTITIONS_PER_REQUEST`` partitions)."""
    cluster_id = "fetch-sessions-inprocess"
    controller = QuorumController(InMemoryMetadataLog(), clock, 1, cluster_id, ControllerConfig())
    endpoint = BrokerEndpointRecord("PLAINTEXT", "localhost", 9092, SecurityProtocol.PLAINTEXT)
    epoch = controller.register_broker(NODE_ID, uuid.uuid4(), cluster_id, (endpoint,))
    controller.heartbeat(NODE_ID, epoch, controller.image.offset)  # caught up: unfenced
    full, rest = divmod(n, PARTITIONS_PER_TOPIC)
    sizes = [PARTITIONS_PER_TOPIC] * full + ([rest] if rest else [])
    wanted = [CreatableTopic(topic_name(t), size, 1) for t, size in enumerate(sizes)]
    per_request = MAX_PARTITIONS_PER_REQUEST // PARTITIONS_PER_TOPIC
    for start in range(0, len(wanted), per_request):
        for result in controller.create_topics(wanted[start : start + per_request]):
            assert result.error is ErrorCode.NONE, f"{result.name}: {result.error.name} {result.message}"
    return controller.image


@dataclass
class InProcessBroker:
    """The Fetch path of ``broker.assembly.build_data_plane``, wired the same way, over in-memory
    logs."""

    n: int
    topics: MetadataImage
    replicas: ReplicaManager
    cache: FetchSessionCache
    dispatcher: RequestDispatcher
    partitions: list[Partition]
    """Partition g is topic ``g // 100``, index ``g % 100`` (the clients' numbering)."""
    topic_ids: list[uuid.UUID]

    @classmethod
    def build(cls, n: int, root: pathlib.Path, loop: asyncio.AbstractEventLoop) -> InProcessBroker:
        config: BrokerConfig = load_config(None, [f"log.dirs={root / 'logs'}", f"node.id={NODE_ID}"])[0]
        registry = CollectorRegistry()
        clock = SystemClock()
        topics = create_topics(n, clock)
        replicas = ReplicaManager(MemoryLogManager(root), topics, NODE_ID, config, clock)  # type: ignore[arg-type]
        for topic in topics.all():  # what the replica transitions do for the partitions led here
            for state in topic.sorted_partitions():
                replicas.lead(topic, state)
        cache = FetchSessionCache(
            FetchSessionCacheMetrics(registry),
            max_slots=config.max_incremental_fetch_session_cache_slots,
            eviction_ms=config.min_incremental_fetch_session_eviction_ms,
        )
        service = FetchService(
            FetchManager(cache, clock.time_ms),
            replicas,
            topics,
            DelayedOperationPurgatory("Fetch", loop),
            fetch_max_bytes=config.fetch_max_bytes,
        )
        replicas.add_partition_listener(service.on_partition_changed)
        handlers = HandlerRegistry([FetchHandler(service)])
        dispatcher = RequestDispatcher(handlers, RequestMetrics(registry))
        ordered = topics.all()
        partitions: list[Partition] = []
        for topic in ordered:
            for index in sorted(topic.partitions):
                partition = replicas.get_partition(topic.name, index)
                assert partition is not None, f"{topic.name}-{index} was not created"
                partitions.append(partition)
        assert len(partitions) == n
        return cls(n, topics, replicas, cache, dispatcher, partitions, [t.topic_id for t in ordered])

    def append(self, changed: Iterable[int], batch: bytes, now_ms: int) -> None:
        """One produced batch per partition, through ``Partition.append_records`` (listeners included)."""
        for g in changed:
            self.partitions[g].append_records(batch, required_acks=1, now_ms=now_ms)

    async def fetch(self, frame: bytes, connection_id: int) -> Reply:
        reply = await self.dispatcher.dispatch(memoryview(frame), "in-process", connection_id)
        assert reply is not None
        return reply


# -- the client ----------------------------------------------------------------------------------------


@dataclass
class Sample:
    """One measured fetch."""

    cpu_us: float
    wall_us: float
    request_bytes: int
    response_bytes: int
    partitions_listed: int
    partitions_returned: int
    partitions_with_records: int
    session_dirty_after: int
    session_dirty_set_bytes: int
    gc_us: float
    gc_full_collections: int


class GcMeter:
    """Time the garbage collector spends inside the measured window, from ``gc.callbacks``.

    The collector stays enabled while a fetch is measured, as in the broker: what a fetch allocates
    triggers young collections, and now and then a full one lands in some fetch. This separates that
    share (and counts the full collections) instead of hiding it by disabling the collector.
    """

    def __init__(self) -> None:
        self.active = False
        self.ns = 0
        self.full = 0
        self._started = 0

    def reset(self) -> None:
        self.ns, self.full = 0, 0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if not self.active:
            return
        if phase == "start":
            self._started = time.process_time_ns()
            return
        self.ns += time.process_time_ns() - self._started
        if info["generation"] == 2:
            self.full += 1


GC_METER = GcMeter()


class FetchClient:
    """One consumer's fetch state over all N partitions; in session mode, its session as well.

    ``pending`` holds the partitions appended to since this client's last fetch: the ground truth
    each response is checked against (kept by the benchmark, not read from the broker).
    """

    def __init__(self, broker: InProcessBroker, version: int, template: bytes, *, session: bool) -> None:
        self.broker = broker
        self.version = version
        self.template = template
        self.session = session
        self.connection_id = 1 if session else 2
        self.client_id = "bench-incremental" if session else "bench-sessionless"
        self.offsets = [0] * broker.n
        self.session_id = 0
        self.epoch = 0 if session else -1
        self.moved: list[int] = []
        self.pending: set[int] = set()
        self._correlation_id = 0
        self._names = {topic_name(t): t for t in range(len(broker.topic_ids))}
        self._ids = {topic_id: t for t, topic_id in enumerate(broker.topic_ids)}

    def listed(self) -> list[int]:
        """All partitions (full fetches) or those whose fetch offset moved (incremental)."""
        if not self.session or self.epoch == 0:
            return list(range(self.broker.n))
        return self.moved

    def request(self, listed: list[int]) -> bytes:
        topics: dict[int, list[dict[str, Any]]] = {}
        for g in listed:
            t, p = divmod(g, PARTITIONS_PER_TOPIC)
            topics.setdefault(t, []).append(
                {
                    "partition": p,
                    "current_leader_epoch": NO_LEADER_EPOCH,
                    "fetch_offset": self.offsets[g],
                    "last_fetched_epoch": NO_LEADER_EPOCH,
                    "log_start_offset": UNKNOWN_OFFSET,
                    "partition_max_bytes": PARTITION_MAX_BYTES,
                }
            )
        body = {
            "replica_id": -1,
            "max_wait_ms": 0,
            "min_bytes": 1,
            "max_bytes": RESPONSE_MAX_BYTES,
            "isolation_level": 0,
            "session_id": self.session_id,
            "session_epoch": self.epoch,
            "topics": [
                {"topic": topic_name(t), "topic_id": self.broker.topic_ids[t], "partitions": parts}
                for t, parts in topics.items()
            ],
            "forgotten_topics_data": [],
            "rack_id": "",
        }
        self._correlation_id += 1
        return encode_request(ApiKey.FETCH, self.version, self._correlation_id, self.client_id, body)

    async def fetch(self, profiler: cProfile.Profile | None = None) -> Sample:
        """Build the request, time the broker's dispatch of it, then decode, check and apply the response."""
        listed = self.listed()
        frame = self.request(listed)
        GC_METER.reset()
        if profiler is not None:
            profiler.enable()
        GC_METER.active = True
        cpu0, wall0 = time.process_time_ns(), time.perf_counter_ns()
        reply = await self.broker.fetch(frame, self.connection_id)
        wall1, cpu1 = time.perf_counter_ns(), time.process_time_ns()
        GC_METER.active = False
        if profiler is not None:
            profiler.disable()
        raw = _wire_bytes(reply)
        if len(raw) != reply.size:
            raise AssertionError(f"response parts hold {len(raw)} bytes, the reply says {reply.size}")
        body = decode_response(raw[4:], ApiKey.FETCH, self.version).body
        returned, with_records = self._check_and_apply(body, len(listed))
        session = self.broker.cache.get(self.session_id) if self.session else None
        return Sample(
            cpu_us=(cpu1 - cpu0) / 1e3,
            wall_us=(wall1 - wall0) / 1e3,
            request_bytes=len(frame) + 4,
            response_bytes=reply.size,
            partitions_listed=len(listed),
            partitions_returned=returned,
            partitions_with_records=with_records,
            session_dirty_after=len(session.dirty) if session is not None else 0,
            session_dirty_set_bytes=sys.getsizeof(session.dirty) if session is not None else 0,
            gc_us=GC_METER.ns / 1e3,
            gc_full_collections=GC_METER.full,
        )

    def _check_and_apply(self, body: Any, listed: int) -> tuple[int, int]:
        """Check the response against ``pending`` and the records against the log, then advance.

        Full fetches (sessionless, or the one creating the session) must return all N partitions;
        an incremental one exactly the partitions with new data. Every record set must be whole,
        CRC-valid batches of the template starting at the fetch offset and ending at the HW.
        """
        if body.error_code != 0:
            raise AssertionError(f"fetch failed: top-level error {body.error_code}")
        full = listed == self.broker.n and (not self.session or self.epoch == 0)
        seen: set[int] = set()
        moved: list[int] = []
        for topic in body.responses:
            t = self._names[topic.topic] if self.version < 13 else self._ids[topic.topic_id]
            for part in topic.partitions:
                g = t * PARTITIONS_PER_TOPIC + part.partition_index
                if part.error_code != 0:
                    raise AssertionError(f"partition {g}: error {part.error_code}")
                if g in seen:
                    raise AssertionError(f"partition {g} listed twice")
                seen.add(g)
                records = bytes(part.records or b"")
                if records:
                    self._check_records(g, records, part.high_watermark)
                    self.offsets[g] = part.high_watermark
                    moved.append(g)
                elif part.high_watermark != self.offsets[g]:
                    raise AssertionError(f"partition {g}: no records below HW {part.high_watermark}")
        if set(moved) != self.pending:
            raise AssertionError(
                f"{len(moved)} partitions returned records, {len(self.pending)} had new data "
                f"({len(set(moved) ^ self.pending)} differ)"
            )
        expected = self.broker.n if full else len(self.pending)
        if len(seen) != expected:
            raise AssertionError(f"{len(seen)} partitions in the response, {expected} expected")
        self.pending = set()
        self.moved = moved
        if self.session:
            if self.epoch == 0:
                if body.session_id == 0:
                    raise AssertionError("the broker did not create a fetch session")
                self.session_id = body.session_id
            elif body.session_id != self.session_id:
                raise AssertionError(f"session {body.session_id} answered, {self.session_id} expected")
            self.epoch += 1
        elif body.session_id != 0:
            raise AssertionError("a sessionless fetch got a session id")
        return len(seen), len(moved)

    def _check_records(self, g: int, records: bytes, high_watermark: int) -> None:
        expected_base, pos = self.offsets[g], 0
        while pos < len(records):
            header = verify_batch(records, pos)
            if header.base_offset != expected_base or header.size != len(self.template):
                raise AssertionError(
                    f"partition {g}: batch at {header.base_offset}, {expected_base} expected"
                )
            payload = records[pos + HEADER_SIZE : pos + header.size]
            if payload != self.template[HEADER_SIZE:]:
                raise AssertionError(f"partition {g}: records differ from what was appended")
            expected_base = header.last_offset + 1
            pos += header.size
        if expected_base != high_watermark:
            raise AssertionError(f"partition {g}: records end at {expected_base}, HW {high_watermark}")


def _wire_bytes(reply: Reply) -> bytes:
    """The response frame as the connection would write it: encoded pieces and the slices' bytes."""
    out = bytearray()
    for part in reply.parts:
        if isinstance(part, FileSlice):
            out += part.file.slice_bytes(part)  # type: ignore[attr-defined]
        else:
            out += part
    return bytes(out)


# -- rounds --------------------------------------------------------------------------------------------


@dataclass
class SizeRun:
    """Everything measured at one N."""

    n: int
    samples: dict[str, list[Sample]] = field(default_factory=lambda: {mode: [] for mode in MODES})
    changed: dict[str, int] = field(default_factory=dict)
    creating: Sample | None = None
    build_seconds: float = 0.0
    profile: dict[str, Any] = field(default_factory=dict)
    diagnostics: dict[str, Any] = field(default_factory=dict)


class Rounds:
    """Appends and fetches of one N, with the clients' ground truth kept in step."""

    def __init__(self, broker: InProcessBroker, version: int, rng: random.Random) -> None:
        self.broker = broker
        self.rng = rng
        self.template = build_batch(
            [Record(value=b"x" * VALUE_BYTES, key=b"k", timestamp=int(time.time() * 1000))]
        )
        self.incremental = FetchClient(broker, version, self.template, session=True)
        self.sessionless = FetchClient(broker, version, self.template, session=False)

    def append(self, changed: list[int] | range) -> None:
        self.broker.append(changed, self.template, int(time.time() * 1000))
        self.incremental.pending.update(changed)
        self.sessionless.pending.update(changed)

    async def round(
        self,
        client: FetchClient,
        count: int,
        profiler: cProfile.Profile | None = None,
        changed: list[int] | None = None,
    ) -> Sample:
        """Append to ``count`` random partitions (or to ``changed``), then fetch."""
        self.append(changed if changed is not None else self.rng.sample(range(self.broker.n), count))
        return await client.fetch(profiler)

    async def median_cpu(self, count: int, rounds: int, same: list[int] | None = None) -> dict[str, float]:
        """Incremental rounds after two unmeasured ones: median CPU µs with and without GC time."""
        samples = [await self.round(self.incremental, count, changed=same) for _ in range(rounds + 2)][2:]
        return {
            "cpu_us_median": statistics.median(s.cpu_us for s in samples),
            "cpu_ex_gc_us_median": statistics.median(s.cpu_us - s.gc_us for s in samples),
            "session_dirty_set_kib": samples[-1].session_dirty_set_bytes / 1024,
        }


async def run_size(
    n: int, args: argparse.Namespace, rng: random.Random, *, profile: bool, diagnose: bool
) -> SizeRun:
    """Build a broker for N partitions, create the session, alternate the modes in blocks."""
    run = SizeRun(n)
    loop = asyncio.get_running_loop()
    with tempfile.TemporaryDirectory(prefix="kipling-fs-inproc-") as tmp:
        t0 = time.perf_counter()
        broker = InProcessBroker.build(n, pathlib.Path(tmp), loop)
        rounds = Rounds(broker, args.fetch_version, rng)
        run.build_seconds = time.perf_counter() - t0
        run.creating = await rounds.incremental.fetch()
        changed_1pct = max(1, round(n * CHANGED_FRACTION))
        run.changed = {
            "sessionless_full": changed_1pct,
            "incremental": changed_1pct,
            "incremental_fixed": min(args.fixed_changed, n),
        }
        clients = {
            "sessionless_full": rounds.sessionless,
            "incremental": rounds.incremental,
            "incremental_fixed": rounds.incremental,
        }
        full_rounds = args.full_rounds if args.full_rounds else full_rounds_for(n)
        session_rounds = args.rounds if args.rounds else session_rounds_for(n)
        per_block = {
            "sessionless_full": max(1, -(-full_rounds // args.blocks)),
            "incremental": max(1, -(-session_rounds // args.blocks)),
            "incremental_fixed": max(1, -(-session_rounds // args.blocks)),
        }
        warmup = {"sessionless_full": 1, "incremental": 2, "incremental_fixed": 2}
        for _block in range(args.blocks):
            for mode in MODES:
                for r in range(per_block[mode] + warmup[mode]):
                    sample = await rounds.round(clients[mode], run.changed[mode])
                    if r >= warmup[mode]:
                        run.samples[mode].append(sample)
        if profile:
            for mode in ("incremental", "incremental_fixed"):
                for _ in range(2):  # catch up after the previous mode, unprofiled
                    await rounds.round(clients[mode], run.changed[mode])
                profiler = cProfile.Profile()
                fetches = args.profile_rounds
                for _ in range(fetches):
                    await rounds.round(clients[mode], run.changed[mode], profiler)
                run.profile[mode] = top_functions(profiler, fetches, args.profile_top)
        if diagnose:
            run.diagnostics = await diagnostics(rounds, run.changed["incremental_fixed"], session_rounds)
        del broker, rounds, clients
        gc.collect()
    return run


async def diagnostics(rounds: Rounds, count: int, measured: int) -> dict[str, Any]:
    """Where a growth of the fixed-changed cost with N comes from (see the module docstring).

    ``random``/``same``: random partitions each round against the same ones (cache misses against
    work). ``after_burst``: random ones after every partition changed once and was fetched; the
    session's dirty set held N entries then, and ``dirty_set_rebuilt`` gives the same rounds after
    replacing that set by a fresh copy of itself (same contents, table sized to them).
    """
    n = rounds.broker.n
    same = rounds.rng.sample(range(n), count)
    out: dict[str, Any] = {"changed": count}
    out["random"] = await rounds.median_cpu(count, measured)
    out["same"] = await rounds.median_cpu(count, measured, same)
    rounds.append(range(n))
    t0 = time.process_time_ns()
    for _ in range(2):  # the burst comes back, then the client re-sends all N offsets
        burst = await rounds.incremental.fetch()
    out["burst_fetch_cpu_us"] = burst.cpu_us
    out["burst_seconds"] = (time.process_time_ns() - t0) / 1e9
    out["after_burst"] = await rounds.median_cpu(count, measured)
    session = rounds.broker.cache.get(rounds.incremental.session_id)
    assert session is not None
    session.dirty = set(session.dirty)
    out["dirty_set_rebuilt"] = await rounds.median_cpu(count, measured)
    return out


def session_rounds_for(n: int) -> int:
    """Measured rounds per session mode: many where a round is cheap, so a burst of load from another
    process moves the median less; 60 at 100k, where a round (1,000 appends, checks) takes ~0.1 s."""
    return 200 if n <= 10_000 else 100 if n <= 30_000 else 60


def full_rounds_for(n: int) -> int:
    """Measured sessionless rounds: one full fetch of 100k partitions takes on the order of a second."""
    return max(6, min(60, 200_000 // n))


def top_functions(profiler: cProfile.Profile, fetches: int, top: int) -> list[dict[str, Any]]:
    """The functions with the most own time, with calls per fetch (~N calls per fetch: an O(N) term)."""
    stats = pstats.Stats(profiler)
    rows = []
    for (filename, line, name), (_cc, ncalls, tottime, cumtime, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        rows.append(
            {
                "function": f"{_short(filename)}:{line}({name})",
                "calls_per_fetch": ncalls / fetches,
                "own_us_per_fetch": tottime / fetches * 1e6,
                "cumulative_us_per_fetch": cumtime / fetches * 1e6,
            }
        )
    rows.sort(key=lambda row: row["own_us_per_fetch"], reverse=True)
    return rows[:top]


def _short(filename: str) -> str:
    for marker in ("/broker/", "/protocol/", "/storage/", "/bench/", "/site-packages/"):
        if marker in filename:
            return marker.strip("/") + "/" + filename.split(marker, 1)[1]
    return filename.rsplit("/", 1)[-1]


# -- figures -------------------------------------------------------------------------------------------


def summarize(samples: list[Sample], changed: int) -> dict[str, Any]:
    def values(fn: Callable[[Sample], float]) -> list[float]:
        return [fn(s) for s in samples]

    cpu = values(lambda s: s.cpu_us)
    return {
        "fetches": len(samples),
        "changed_per_round": changed,
        "cpu_us_mean": statistics.fmean(cpu),
        "cpu_us_median": statistics.median(cpu),
        "cpu_us_min": min(cpu),
        "cpu_ex_gc_us_median": statistics.median(values(lambda s: s.cpu_us - s.gc_us)),
        "cpu_us_per_changed_partition": statistics.median(cpu) / max(changed, 1),
        "wall_us_median": statistics.median(values(lambda s: s.wall_us)),
        "request_bytes_mean": statistics.fmean(values(lambda s: s.request_bytes)),
        "response_bytes_mean": statistics.fmean(values(lambda s: s.response_bytes)),
        "bytes_mean": statistics.fmean(values(lambda s: s.request_bytes + s.response_bytes)),
        "partitions_listed_mean": statistics.fmean(values(lambda s: s.partitions_listed)),
        "partitions_returned_mean": statistics.fmean(values(lambda s: s.partitions_returned)),
        "partitions_with_records_mean": statistics.fmean(values(lambda s: s.partitions_with_records)),
        "session_dirty_after_mean": statistics.fmean(values(lambda s: s.session_dirty_after)),
        "session_dirty_set_kib_max": max(values(lambda s: s.session_dirty_set_bytes)) / 1024,
        "gc_us_mean": statistics.fmean(values(lambda s: s.gc_us)),
        "gc_full_collections": sum(s.gc_full_collections for s in samples),
    }


def figures_of(run: SizeRun, version: int) -> dict[str, Any]:
    assert run.creating is not None
    out: dict[str, Any] = {
        "n": run.n,
        "topics": -(-run.n // PARTITIONS_PER_TOPIC),
        "fetch_version": version,
        "build_seconds": run.build_seconds,
        "session_creating_fetch": {
            "cpu_us": run.creating.cpu_us,
            "request_bytes": run.creating.request_bytes,
            "response_bytes": run.creating.response_bytes,
        },
        **{mode: summarize(run.samples[mode], run.changed[mode]) for mode in MODES},
    }
    full, inc = out["sessionless_full"], out["incremental"]
    out["full_over_incremental"] = {
        "cpu": full["cpu_us_median"] / inc["cpu_us_median"],
        "bytes": full["bytes_mean"] / inc["bytes_mean"],
    }
    if run.profile:
        out["profile"] = run.profile
    if run.diagnostics:
        out["diagnostics"] = run.diagnostics
    return out


def flatness(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """How the costs grow from the first N where 1 % is at least the fixed count to the largest N.

    1.0 is flat. Below that N the 1 % mode changes fewer partitions than the fixed one, and its cost
    per changed partition is mostly the per-fetch overhead.
    """
    fixed = runs[0]["incremental_fixed"]["changed_per_round"]
    first = next((run for run in runs if run["incremental"]["changed_per_round"] >= fixed), runs[0])
    last = runs[-1]

    def growth(mode: str, key: str, per: Callable[[dict[str, Any]], float] = lambda run: 1.0) -> float:
        return (last[mode][key] / per(last)) / (first[mode][key] / per(first))

    def changed(run: dict[str, Any]) -> float:
        return float(run["incremental"]["changed_per_round"])

    def n(run: dict[str, Any]) -> float:
        return float(run["n"])

    return {
        "n_from": first["n"],
        "n_to": last["n"],
        "incremental_us_per_changed": growth("incremental", "cpu_us_median", changed),
        "incremental_us_per_changed_ex_gc": growth("incremental", "cpu_ex_gc_us_median", changed),
        "incremental_fixed_us_per_fetch": growth("incremental_fixed", "cpu_us_median"),
        "incremental_fixed_us_per_fetch_ex_gc": growth("incremental_fixed", "cpu_ex_gc_us_median"),
        "sessionless_us_per_partition": growth("sessionless_full", "cpu_us_median", n),
        "sessionless_us_per_partition_ex_gc": growth("sessionless_full", "cpu_ex_gc_us_median", n),
    }


def print_table(runs: list[dict[str, Any]]) -> None:
    header = (
        f"{'N':>8} {'mode':<18} {'changed':>7} {'fetches':>7} {'CPU µs mean':>12} {'median':>11} "
        f"{'ex GC':>11} {'best':>11} {'µs/changed':>10} {'req B':>11} {'resp B':>11} "
        f"{'listed':>7} {'returned':>8}"
    )
    print(header)
    print("-" * len(header))
    for run in runs:
        for mode in MODES:
            f = run[mode]
            print(
                f"{run['n']:>8,} {mode:<18} {f['changed_per_round']:>7,} {f['fetches']:>7} "
                f"{f['cpu_us_mean']:>12,.0f} {f['cpu_us_median']:>11,.0f} "
                f"{f['cpu_ex_gc_us_median']:>11,.0f} {f['cpu_us_min']:>11,.0f} "
                f"{f['cpu_us_per_changed_partition']:>10,.1f} {f['request_bytes_mean']:>11,.0f} "
                f"{f['response_bytes_mean']:>11,.0f} {f['partitions_listed_mean']:>7,.0f} "
                f"{f['partitions_returned_mean']:>8,.0f}"
            )
        ratio = run["full_over_incremental"]
        created = run["session_creating_fetch"]
        full_gcs = sum(run[mode]["gc_full_collections"] for mode in MODES)
        print(
            f"{'':>8} full/incremental: CPU x{ratio['cpu']:,.1f}, bytes x{ratio['bytes']:,.1f}; "
            f"session-creating fetch {created['cpu_us']:,.0f} µs, "
            f"{created['request_bytes'] + created['response_bytes']:,} B; {full_gcs} full GCs in measured "
            f"fetches; built in {run['build_seconds']:.1f}s"
        )


def print_flatness(flat: dict[str, Any]) -> None:
    print(
        f"\nGrowth from N={flat['n_from']:,} to N={flat['n_to']:,} (1.00 = flat; median, and without GC):\n"
        f"  incremental 1 %: µs per changed partition x{flat['incremental_us_per_changed']:.2f} "
        f"(x{flat['incremental_us_per_changed_ex_gc']:.2f})\n"
        f"  incremental fixed: µs per fetch x{flat['incremental_fixed_us_per_fetch']:.2f} "
        f"(x{flat['incremental_fixed_us_per_fetch_ex_gc']:.2f})\n"
        f"  sessionless full: µs per partition x{flat['sessionless_us_per_partition']:.2f} "
        f"(x{flat['sessionless_us_per_partition_ex_gc']:.2f})"
    )


def print_diagnostics(n: int, diag: dict[str, Any]) -> None:
    print(f"\nDiagnostics at N={n:,}, {diag['changed']} changed partitions per incremental fetch:")
    rows = (
        ("random partitions each round", "random"),
        ("the same partitions each round", "same"),
        ("random, after a burst of all N", "after_burst"),
        ("random, dirty set rebuilt", "dirty_set_rebuilt"),
    )
    for label, key in rows:
        d = diag[key]
        print(
            f"  {label:<32} {d['cpu_us_median']:>7,.0f} µs median, "
            f"{d['cpu_ex_gc_us_median']:>7,.0f} without GC; dirty set {d['session_dirty_set_kib']:,.1f} KiB"
        )
    print(f"  (the burst's catch-up fetch: {diag['burst_fetch_cpu_us'] / 1e3:,.0f} ms)")


def print_profile(n: int, profile: dict[str, list[dict[str, Any]]]) -> None:
    for mode, rows in profile.items():
        print(f"\ncProfile at N={n:,}, {mode}: own time per fetch (profiler overhead included)")
        print(f"  {'calls/fetch':>11} {'own µs':>9} {'cum µs':>9}  function")
        for row in rows:
            print(
                f"  {row['calls_per_fetch']:>11,.1f} {row['own_us_per_fetch']:>9,.1f} "
                f"{row['cumulative_us_per_fetch']:>9,.1f}  {row['function']}"
            )


def plot(runs: list[dict[str, Any]], path: pathlib.Path) -> pathlib.Path | None:
    return plot_session_scaling(
        runs,
        path,
        cpu_key="cpu_us_median",
        extra_cpu_key="cpu_ex_gc_us_median",
        cpu_title="broker CPU per fetch (median)",
        cpu_unit="µs (process CPU time: decode + handle + encode)",
        suptitle=(
            f"kipling fetch path in one process (in-memory logs), Fetch v{runs[0]['fetch_version']}, "
            f"one ~{VALUE_BYTES}-byte batch per changed partition"
        ),
    )


async def run_all(args: argparse.Namespace) -> None:
    rng = random.Random(args.seed)
    sizes = sorted({int(s) for s in args.sizes.split(",")})
    runs: list[dict[str, Any]] = []
    started = time.perf_counter()
    gc.callbacks.append(GC_METER)
    reference = next((n for n in sizes if n * CHANGED_FRACTION >= args.fixed_changed), sizes[0])
    for n in sizes:
        t0 = time.perf_counter()
        last = n == sizes[-1]
        diagnose = (last or n == reference) and not args.no_diagnostics
        run = await run_size(n, args, rng, profile=last and not args.no_profile, diagnose=diagnose)
        figures = figures_of(run, args.fetch_version)
        runs.append(figures)
        inc, fixed, full = figures["incremental"], figures["incremental_fixed"], figures["sessionless_full"]
        print(
            f"N={n:,}: incremental {inc['cpu_us_median']:,.0f} µs ({inc['cpu_us_per_changed_partition']:.1f} "
            f"µs/changed), fixed {fixed['cpu_us_median']:,.0f} µs, full {full['cpu_us_median']:,.0f} µs; "
            f"{time.perf_counter() - t0:.1f}s",
            flush=True,
        )
    print()
    print_table(runs)
    flat = flatness(runs) if len(runs) > 1 else None
    if flat is not None:
        print_flatness(flat)
    for run in runs:
        if "profile" in run:
            print_profile(run["n"], run["profile"])
    for run in runs:
        if "diagnostics" in run:
            print_diagnostics(run["n"], run["diagnostics"])
    png = plot(runs, RESULTS_DIR / "fetch_sessions_inprocess.png") if runs else None
    out = write_results(
        "fetch_sessions_inprocess",
        {
            "fetch_version": args.fetch_version,
            "changed_fraction": CHANGED_FRACTION,
            "cpu_meter": "time.process_time_ns around RequestDispatcher.dispatch (decode, handle, encode)",
            "storage": "in-memory logs (MemoryLog) instead of segment files; everything above is broker code",
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "seconds": time.perf_counter() - started,
            "flatness": flat,
            "runs": runs,
            "plot": str(png) if png else None,
        },
    )
    print(f"\nwrote {out}" + (f" and {png}" if png else "") + f" in {time.perf_counter() - started:.0f}s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default=DEFAULT_SIZES, help="session sizes N, comma-separated")
    parser.add_argument(
        "--rounds", type=int, default=0, help="measured rounds per session mode and N (0: 200, 60 at 100k)"
    )
    parser.add_argument(
        "--full-rounds",
        type=int,
        default=0,
        help="measured sessionless rounds per N (0: 60, fewer above 10k)",
    )
    parser.add_argument("--blocks", type=int, default=2, help="blocks per mode (modes alternate by block)")
    parser.add_argument("--fixed-changed", type=int, default=10, help="changed partitions in the fixed mode")
    parser.add_argument("--fetch-version", type=int, default=12, choices=range(10, 18), metavar="{10..17}")
    parser.add_argument("--no-profile", action="store_true", help="skip the cProfile pass at the largest N")
    parser.add_argument(
        "--no-diagnostics",
        action="store_true",
        help="skip the cache and dirty-set diagnostics at the largest N",
    )
    parser.add_argument("--profile-rounds", type=int, default=20)
    parser.add_argument("--profile-top", type=int, default=15)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(40))  # errors only
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    asyncio.run(run_all(args))


if __name__ == "__main__":
    main()
