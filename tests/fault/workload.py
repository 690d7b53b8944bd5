"""The fault suite's workload: idempotent acks=all producers and a live reader, in threads.

Every fault test runs the same workload so that one checker (:mod:`tests.fault.checker`) can judge
them all. Producers are confluent-kafka (librdkafka), the most faithful idempotent client: each
value is produced once and librdkafka's own retries carry it through a failover, and its delivery
callback reports the offset the broker acknowledged it at. Values are unique
(``p<producer>-<seq>``) and partitions are chosen round-robin, so every partition carries traffic
and a value found at two offsets is a duplicate, never a coincidence.

The rate is bounded (a busy two-core machine runs three brokers, the clients and a second test),
and so are the count and the time: the workload stops by itself and :meth:`Workload.stop` joins
every thread with a bound.

The live reader reads every partition from the beginning while the faults happen and records
``(partition, offset, value)``; a read at or below the previous offset of its partition is a read
going backwards, one past the next offset is a skip (offsets are contiguous here: no transactions,
no compaction). Its reads are checked against the final read afterwards (a value read live must be
in the log at that offset for good).
"""

from __future__ import annotations

import itertools
import logging
import os
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

TOPIC = "fault-workload"
PARTITIONS = 3
REPLICATION_FACTOR = 3
MIN_INSYNC_REPLICAS = 2


@dataclass(frozen=True, slots=True)
class Ack:
    """Where the broker said it put a value, and when the producer learnt it (monotonic)."""

    partition: int
    offset: int
    at: float


@dataclass(frozen=True, slots=True)
class Read:
    partition: int
    offset: int
    value: bytes


@dataclass
class WorkloadConfig:
    """Bounds of one run: ``rate`` values per second per producer for at most ``seconds``."""

    bootstrap: str
    topic: str = TOPIC
    partitions: int = PARTITIONS
    producers: int = 2
    rate: float = 60.0
    seconds: float = 45.0
    flush_timeout_s: float = 120.0
    """How long stop() waits for the outcome of values still in flight (a fault may be healing)."""
    max_in_flight: int = 5
    """librdkafka's max.in.flight per connection: 5, its most with idempotence and its default. With
    5, a producer that reaches a new leader while it is still taking the lead once got
    NOT_LEADER_OR_FOLLOWER and then OUT_OF_ORDER_SEQUENCE_NUMBER, bumped its epoch and wrote a
    batch twice (librdkafka#4953); the broker now waits out that window (ProduceService)."""

    def max_values(self, seconds: float) -> int:
        """Per producer, for a run of ``seconds``: the count bound (time usually ends the run first)."""
        return int(self.rate * seconds) + 1


def producer_config(bootstrap: str, max_in_flight: int = 5) -> dict[str, str | int | float | bool]:
    """acks=all and idempotence, with retries that outlast any fault here.

    ``message.timeout.ms`` (two minutes) covers the worst outage (every node killed and restarted on a
    busy machine); ``socket.timeout.ms`` abandons a request to a paused broker after 5 s so that it is
    retried on the new leader instead of waiting out the message timeout.
    """
    return {
        "bootstrap.servers": bootstrap,
        "max.in.flight.requests.per.connection": max_in_flight,
        "acks": "all",
        "enable.idempotence": True,
        "message.timeout.ms": 120_000,
        "socket.timeout.ms": 5000,
        "request.timeout.ms": 5000,
        "retry.backoff.ms": 100,
        "retry.backoff.max.ms": 1000,
        "reconnect.backoff.max.ms": 1000,
        "topic.metadata.refresh.interval.ms": 1000,
        "linger.ms": 5,
        "log_level": 2,
    }


def create_topic(
    bootstrap: str, topic: str = TOPIC, partitions: int = PARTITIONS, timeout_s: float = 60.0
) -> None:
    """RF 3 and min.insync.replicas=2: durable under any single failure, writable with one node down."""
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 2})
    new = NewTopic(
        topic,
        num_partitions=partitions,
        replication_factor=REPLICATION_FACTOR,
        config={"min.insync.replicas": str(MIN_INSYNC_REPLICAS)},
    )
    deadline = time.monotonic() + timeout_s
    while True:
        futures = admin.create_topics([new], request_timeout=timeout_s, operation_timeout=timeout_s)
        try:
            futures[topic].result(timeout=timeout_s)
            break
        except KafkaException as exc:
            # A node whose session lapsed on a busy machine is re-registering: fewer than three
            # brokers for a moment (librdkafka may drop the request with the broker it briefly
            # forgot: _DESTROY_BROKER). Anything else, or past the deadline, is the test's failure.
            code = exc.args[0].code() if exc.args else None
            retriable = code in (KafkaError.INVALID_REPLICATION_FACTOR, KafkaError._DESTROY_BROKER)
            if not retriable or time.monotonic() > deadline:
                raise
            time.sleep(0.5)
    while time.monotonic() < deadline:  # every partition has a leader before the workload starts
        metadata = admin.list_topics(topic, timeout=10)
        described = metadata.topics.get(topic)
        if (
            described is not None
            and described.error is None
            and len(described.partitions) == partitions
            and all(
                p.leader >= 0 and len(p.isrs) == REPLICATION_FACTOR for p in described.partitions.values()
            )
        ):
            return
        time.sleep(0.2)
    raise AssertionError(f"{topic} has no leader for every partition after {timeout_s}s")


RDKAFKA_DEBUG_ENV = "KIPLING_FAULT_RDKAFKA_DEBUG"
"""Set to librdkafka debug contexts (``eos``, ``eos,msg``...) to log each producer's client-side
view (retries, sequence errors, epoch bumps) to ``$TMPDIR/kipling-rdkafka-<pid>-<producer>.log``:
what the broker's own log cannot show when a run finds duplicates."""


def _producer(config: WorkloadConfig, index: int) -> Producer:
    settings = producer_config(config.bootstrap, config.max_in_flight)
    debug = os.environ.get(RDKAFKA_DEBUG_ENV)
    if not debug:
        return Producer(settings)
    logger = logging.getLogger(f"kipling.fault.rdkafka.{os.getpid()}.{index}.{id(config)}")
    path = Path(tempfile.gettempdir()) / f"kipling-rdkafka-{os.getpid()}-{index}.log"
    handler = logging.FileHandler(path)
    handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    settings.update({"debug": debug, "log_level": 7})
    return Producer(settings, logger=logger)


class _ProducerThread(threading.Thread):
    """One idempotent producer writing ``p<index>-<seq>`` values round-robin over the partitions."""

    def __init__(self, workload: Workload, index: int) -> None:
        super().__init__(name=f"fault-producer-{index}", daemon=True)
        self._workload = workload
        self._index = index
        self.sent = 0
        self.unflushed = -1
        self.error: BaseException | None = None

    def _delivered(self, err: KafkaError | None, msg: Message) -> None:
        value = msg.value()
        if not isinstance(value, bytes):
            where = f"partition {msg.partition()} offset {msg.offset()}"
            self._workload.unplaced.append(f"a delivery report without a value ({err}, {where})")
            return
        self._workload._record_delivery(value, err, msg)

    def run(self) -> None:
        config = self._workload.config
        try:
            producer = _producer(config, self._index)
            interval = 1.0 / config.rate
            next_at = time.monotonic()
            while not self._workload._stopping.is_set() and self.sent < self._workload.max_values:
                if time.monotonic() >= self._workload.deadline:
                    break
                value = f"p{self._index}-{self.sent}".encode()
                try:
                    producer.produce(
                        config.topic,
                        value,
                        partition=self.sent % config.partitions,
                        on_delivery=self._delivered,
                    )
                except BufferError:  # the local queue is full while a fault lasts: wait, then retry
                    producer.poll(0.1)
                    continue
                self.sent += 1
                next_at += interval
                while (remaining := next_at - time.monotonic()) > 0:
                    producer.poll(min(remaining, 0.05))
                producer.poll(0)
            self.unflushed = producer.flush(config.flush_timeout_s)
        except BaseException as exc:  # reported by stop(), not lost in the thread
            self.error = exc


class _ReaderThread(threading.Thread):
    """Reads every partition from the beginning until stopped, checking that offsets only go forward."""

    def __init__(self, workload: Workload) -> None:
        super().__init__(name="fault-reader", daemon=True)
        self._workload = workload
        self.reads: list[Read] = []
        self.backwards: list[str] = []
        self.skips: list[str] = []
        self.errors: list[str] = []
        self.error: BaseException | None = None

    def run(self) -> None:
        config = self._workload.config
        try:
            consumer = Consumer(
                {
                    "bootstrap.servers": config.bootstrap,
                    "group.id": f"fault-reader-{id(self)}",
                    "enable.auto.commit": False,
                    "auto.offset.reset": "earliest",
                    "socket.timeout.ms": 5000,
                    "topic.metadata.refresh.interval.ms": 1000,
                    "fetch.wait.max.ms": 200,
                    "log_level": 2,
                }
            )
            consumer.assign(
                [TopicPartition(config.topic, p, OFFSET_BEGINNING) for p in range(config.partitions)]
            )
            last: dict[int, int] = {}
            try:
                while not self._workload._reader_stop.is_set():
                    for msg in consumer.consume(num_messages=1000, timeout=0.25):
                        err = msg.error()
                        if err is not None:
                            if err.code() != KafkaError._PARTITION_EOF:
                                self.errors.append(str(err))
                            continue
                        partition, offset, value = msg.partition(), msg.offset(), msg.value()
                        assert partition is not None and offset is not None
                        previous = last.get(partition)
                        if previous is not None and offset <= previous:
                            self.backwards.append(f"partition {partition}: read {offset} after {previous}")
                        elif previous is not None and offset > previous + 1:
                            self.skips.append(f"partition {partition}: read {offset} after {previous}")
                        elif previous is None and offset != 0:
                            self.skips.append(f"partition {partition}: first read at {offset}, not 0")
                        last[partition] = offset
                        self.reads.append(Read(partition, offset, value if isinstance(value, bytes) else b""))
            finally:
                consumer.close()
        except BaseException as exc:
            self.error = exc


@dataclass
class WorkloadResult:
    """What the clients observed: the checker's input."""

    topic: str
    partitions: int
    sent: int
    acked: dict[bytes, Ack]
    failed: dict[bytes, str]
    unflushed: int
    reads: list[Read]
    backwards: list[str]
    skips: list[str]
    client_errors: list[str] = field(default_factory=list)
    """A client thread that died or did not stop: the run itself is broken."""
    reader_errors: list[str] = field(default_factory=list)
    """Errors librdkafka reported to the reader (a broker down during a fault): informational."""
    started_at: float = 0.0
    ended_at: float = 0.0
    acked_unplaced: dict[bytes, int | None] = field(default_factory=dict)
    """Acknowledged without an offset (librdkafka's implicit acks): they must be in the log once."""

    def max_ack_gap_s(self) -> dict[int, float]:
        """Per partition, the longest time without an ack between the first and the last ack."""
        return {partition: gap for partition, (gap, _) in self.max_ack_gaps().items()}

    def max_ack_gaps(self) -> dict[int, tuple[float, float]]:
        """Per partition, (longest time without an ack, when it began in seconds since the start)."""
        times: dict[int, list[float]] = defaultdict(list)
        for ack in self.acked.values():
            times[ack.partition].append(ack.at)
        gaps: dict[int, tuple[float, float]] = {}
        for partition in range(self.partitions):
            ordered = sorted(times.get(partition, []))
            gaps[partition] = max(
                ((b - a, a - self.started_at) for a, b in itertools.pairwise(ordered)), default=(0.0, 0.0)
            )
        return gaps


class Workload:
    """Producers and a live reader in threads; bounded in count and time, stopped by :meth:`stop`."""

    def __init__(self, config: WorkloadConfig) -> None:
        self.config = config
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._reader_stop = threading.Event()
        self.acked: dict[bytes, Ack] = {}
        self.failed: dict[bytes, str] = {}
        self.acked_unplaced: dict[bytes, int | None] = {}
        """Values acknowledged without an offset, with their partition: checked for presence only."""
        self.unplaced: list[str] = []
        """Delivery reports the workload could not read (no value): a broken run."""
        self._producers = [_ProducerThread(self, i) for i in range(config.producers)]
        self._reader = _ReaderThread(self)
        self.started_at = 0.0
        self.deadline = 0.0
        self.max_values = config.max_values(config.seconds)

    def _record_delivery(self, value: bytes, err: KafkaError | None, msg: Message) -> None:
        at = time.monotonic()
        with self._lock:
            if err is None:
                partition, offset = msg.partition(), msg.offset()
                if offset is None or offset < 0:
                    # librdkafka acknowledges implicitly, with no offset, the batches in flight
                    # on a lost connection once a later batch of the same producer is acked
                    # (the broker must have taken them, in sequence): present, place unknown.
                    self.acked_unplaced[value] = partition
                    return
                assert partition is not None  # an acked message always has its partition
                self.acked[value] = Ack(partition, offset, at)
            else:
                self.failed[value] = str(err)

    def start(self) -> Workload:
        self.started_at = time.monotonic()
        self.deadline = self.started_at + self.config.seconds
        self._reader.start()
        for thread in self._producers:
            thread.start()
        return self

    def __enter__(self) -> Workload:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def acked_count(self) -> int:
        with self._lock:
            return len(self.acked)

    def wait_for_acks(self, more: int, timeout_s: float, what: str) -> bool:
        """Block until ``more`` values beyond now are acknowledged; False if that took too long."""
        target = self.acked_count() + more
        deadline = time.monotonic() + timeout_s
        while self.acked_count() < target:
            if time.monotonic() > deadline or not self.producing():
                return self.acked_count() >= target
            time.sleep(0.1)
        return True

    def extend(self, seconds: float) -> None:
        """Produce ``seconds`` longer than planned (a fault that needs the workload for longer)."""
        self.deadline += seconds
        self.max_values += self.config.max_values(seconds)

    def producing(self) -> bool:
        return any(thread.is_alive() for thread in self._producers)

    def remaining_s(self) -> float:
        return max(0.0, self.deadline - time.monotonic())

    def wait_done(self, poll: Callable[[], None] | None = None) -> None:
        """Let the producers run out their time (and flush); ``poll`` runs meanwhile."""
        while self.producing():
            if poll is not None:
                poll()
            time.sleep(0.2)

    def stop(self, reader_grace_s: float = 5.0) -> WorkloadResult:
        """Stop producing, wait for every outcome, then stop the reader; every thread is joined."""
        self._stopping.set()
        for thread in self._producers:
            thread.join(self.config.flush_timeout_s + 30)
        time.sleep(reader_grace_s)  # the reader catches up with the last acks
        self._reader_stop.set()
        self._reader.join(30)
        threads: list[_ProducerThread | _ReaderThread] = [*self._producers, self._reader]
        errors = [f"{t.name}: {t.error!r}" for t in threads if t.error is not None]
        errors += self.unplaced[:5]
        errors += [f"{t.name} did not stop" for t in threads if t.is_alive()]
        with self._lock:
            acked, failed = dict(self.acked), dict(self.failed)
            acked_unplaced = dict(self.acked_unplaced)
        return WorkloadResult(
            topic=self.config.topic,
            partitions=self.config.partitions,
            sent=sum(t.sent for t in self._producers),
            acked=acked,
            failed=failed,
            unflushed=sum(max(t.unflushed, 0) for t in self._producers),
            reads=list(self._reader.reads),
            backwards=list(self._reader.backwards),
            skips=list(self._reader.skips),
            client_errors=errors,
            reader_errors=list(self._reader.errors),
            acked_unplaced=acked_unplaced,
            started_at=self.started_at,
            ended_at=time.monotonic(),
        )


__all__ = [
    "PARTITIONS",
    "TOPIC",
    "Ack",
    "Read",
    "Workload",
    "WorkloadConfig",
    "WorkloadResult",
    "create_topic",
    "producer_config",
]
