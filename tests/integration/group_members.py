"""Consumer-group members of kafka-python, aiokafka and confluent-kafka, each in a thread of its own,
and the small helpers the group tests share (topics, a paced producer, committed offsets).

A :class:`GroupMember` subscribes to one topic with a group id and consumes until stopped, recording
every record it was handed (:attr:`GroupMember.records`) and every assignment change its client
reported through the rebalance callbacks (:attr:`GroupMember.events`, :attr:`GroupMember.assigned`).
"Processing" a record is recording it, done at once when the client hands it out.

Commits, and why live members consume each record exactly once across rebalances:

- Manual (the default): the member commits synchronously what it was handed, after each batch and
  before it asks for the next one. kafka-python and librdkafka run a rebalance (and the revocation)
  only inside that next call (``poll``, ``consume``); aiokafka runs it in a background task, so the
  batch is processed and committed under a lock its revocation listener takes as well.
- ``auto_commit``: the client's auto commit (every 200 ms), which also commits the positions it
  handed out before it gives up partitions (kafka-python and aiokafka before calling the revocation
  listener, librdkafka when it unassigns) and when it closes.

Either way a partition moves to another member only after everything handed out from it is
committed, which is when Kafka promises that a record is not consumed twice. A member that dies, or
whose commit fails, leaves its uncommitted records to be consumed again (at least once).

Any exception in a member's thread is kept in :attr:`GroupMember.error` and raised by
:meth:`GroupMember.check` and :meth:`GroupMember.stop`, never lost in the thread.
"""

from __future__ import annotations

import asyncio
import re
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

HEARTBEAT_MS = 500
SESSION_MS = 10_000
POLL_S = 0.1


@dataclass(frozen=True)
class Record:
    member: str
    partition: int
    offset: int
    value: bytes


class GroupMember:
    """One member of ``group`` consuming ``topic`` in a thread; see the module docstring."""

    client = "?"

    def __init__(
        self,
        name: str,
        bootstrap: str,
        topic: str,
        group: str,
        *,
        auto_commit: bool = False,
        config: dict[str, Any] | None = None,
    ) -> None:
        self.name = name
        self.bootstrap = bootstrap
        self.topic = topic
        self.group = group
        self.auto_commit = auto_commit
        self.config = dict(config or {})
        self.records: list[Record] = []
        self.events: list[tuple[str, frozenset[int]]] = []
        """("assign" | "revoke" | "lost", partitions), in the order the client reported them."""
        self.assigned: frozenset[int] = frozenset()
        self.commits = 0
        """Explicit commits the member made (manual mode)."""
        self.generation: int | None = None
        """The generation the member is in (kafka-python members only: the others do not tell)."""
        self.error: BaseException | None = None
        self.closed = threading.Event()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._main, name=f"member-{name}", daemon=True)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r}, assigned={sorted(self.assigned)})"

    # -- test side ------------------------------------------------------------------------------------

    def start(self) -> GroupMember:
        self._thread.start()
        return self

    def stop(self, timeout_s: float = 30) -> None:
        """Stop consuming and close the client (a dynamic member leaves the group); raise its error."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout_s)
        assert not self._thread.is_alive(), f"member {self.name} did not close within {timeout_s}s"
        self.check()

    def check(self) -> None:
        if self.error is not None:
            raise AssertionError(f"member {self.name} ({self.client}) failed: {self.error!r}") from self.error

    def values(self) -> list[bytes]:
        with self._lock:
            return [r.value for r in self.records]

    def snapshot(self) -> list[Record]:
        with self._lock:
            return list(self.records)

    def event_count(self) -> int:
        with self._lock:
            return len(self.events)

    # -- member side ----------------------------------------------------------------------------------

    def _main(self) -> None:
        try:
            self._run()
        except BaseException as exc:  # reported by check(), not lost in the thread
            self.error = exc
        finally:
            self.closed.set()

    def _run(self) -> None:
        raise NotImplementedError

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def _took(self, records: Iterable[tuple[int, int, bytes]]) -> None:
        with self._lock:
            self.records.extend(Record(self.name, p, o, v) for p, o, v in records)

    def _python_client_options(self) -> dict[str, Any]:
        """kafka-python's and aiokafka's consumer options (the two share their names), then ``config``."""
        return {
            "bootstrap_servers": self.bootstrap,
            "group_id": self.group,
            "client_id": self.name,
            "enable_auto_commit": self.auto_commit,
            "auto_commit_interval_ms": 200,
            "auto_offset_reset": "earliest",
            "session_timeout_ms": SESSION_MS,
            "heartbeat_interval_ms": HEARTBEAT_MS,
            "request_timeout_ms": 15_000,
            "metadata_max_age_ms": 2000,
            "retry_backoff_ms": 100,
            **self.config,
        }

    def _event(self, kind: str, partitions: Iterable[int]) -> None:
        parts = frozenset(partitions)
        with self._lock:
            self.events.append((kind, parts))
            if kind == "assign":
                self.assigned = parts
            else:
                self.assigned = self.assigned - parts


class KafkaPythonMember(GroupMember):
    """kafka-python polls with a long timeout (``poll`` returns as soon as records arrive): in
    kafka-python 3.0.12 a poll that times out while a JoinGroup it sent because the topic's metadata
    changed (e.g. a leader that assigned before it knew the new topic's partitions) is in flight
    never completes that join, and the member stops heartbeating until its session expires."""

    client = "kafka-python"
    poll_ms = 1000

    def _run(self) -> None:
        from kafka import ConsumerRebalanceListener, KafkaConsumer

        member = self

        class Listener(ConsumerRebalanceListener):
            def on_partitions_revoked(self, revoked):  # type: ignore[no-untyped-def]
                member._event("revoke", (tp.partition for tp in revoked))

            def on_partitions_assigned(self, assigned):  # type: ignore[no-untyped-def]
                member.generation = consumer.group_metadata().generation_id
                member._event("assign", (tp.partition for tp in assigned))

        options = self._python_client_options()
        consumer = KafkaConsumer(**options)
        try:
            consumer.subscribe([self.topic], listener=Listener())
            while not self.stopping:
                batches = consumer.poll(timeout_ms=self.poll_ms)
                self._took((r.partition, r.offset, r.value) for rs in batches.values() for r in rs)
                if batches and not self.auto_commit:
                    consumer.commit()  # the positions: everything poll handed out, all processed
                    self.commits += 1
        finally:
            consumer.close()


class ConfluentMember(GroupMember):
    """librdkafka; ``group.instance.id`` in ``config`` makes it a static member."""

    client = "confluent-kafka"

    def _run(self) -> None:
        from confluent_kafka import Consumer, TopicPartition

        options: dict[str, Any] = {
            "bootstrap.servers": self.bootstrap,
            "group.id": self.group,
            "client.id": self.name,
            "enable.auto.commit": self.auto_commit,
            "auto.commit.interval.ms": 200,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": SESSION_MS,
            "heartbeat.interval.ms": HEARTBEAT_MS,
            "topic.metadata.refresh.interval.ms": 2000,
            "retry.backoff.ms": 100,
        }
        options.update(self.config)
        consumer = Consumer(options)
        try:
            consumer.subscribe(
                [self.topic],
                on_assign=lambda _c, parts: self._event("assign", (p.partition for p in parts)),
                on_revoke=lambda _c, parts: self._event("revoke", (p.partition for p in parts)),
                on_lost=lambda _c, parts: self._event("lost", (p.partition for p in parts)),
            )
            while not self.stopping:
                messages = consumer.consume(num_messages=1000, timeout=POLL_S)
                taken: list[tuple[int, int, bytes]] = []
                for message in messages:
                    if message.error() is None:  # errors are events (a broker went away): librdkafka retries
                        taken.append((message.partition(), message.offset(), message.value()))
                self._took(taken)
                if taken and not self.auto_commit:
                    ends: dict[int, int] = {}
                    for partition, offset, _ in taken:
                        ends[partition] = max(ends.get(partition, 0), offset + 1)
                    offsets = [TopicPartition(self.topic, p, o) for p, o in ends.items()]
                    for result in consumer.commit(offsets=offsets, asynchronous=False) or []:
                        if result.error is not None:
                            raise AssertionError(f"commit of {result} failed: {result.error}")
                    self.commits += 1
        finally:
            consumer.close()


class AiokafkaMember(GroupMember):
    client = "aiokafka"

    def _run(self) -> None:
        asyncio.run(self._consume())

    async def _consume(self) -> None:
        from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener

        member = self
        # Held from the moment getmany hands out a batch until it is processed and committed; the
        # revocation listener takes it too, so a rebalance waits for that commit. It must not be held
        # across getmany: during a rebalance getmany waits for the new assignment, which waits for
        # the listener. getmany returns to this coroutine without a turn of the event loop, and a free
        # asyncio.Lock is taken without one, so no revocation can come between the two.
        lock = asyncio.Lock()

        class Listener(ConsumerRebalanceListener):
            async def on_partitions_revoked(self, revoked):  # type: ignore[no-untyped-def]
                async with lock:
                    member._event("revoke", (tp.partition for tp in revoked))

            async def on_partitions_assigned(self, assigned):  # type: ignore[no-untyped-def]
                member._event("assign", (tp.partition for tp in assigned))

        options = self._python_client_options()
        consumer = AIOKafkaConsumer(**options)
        consumer.subscribe([self.topic], listener=Listener())
        await consumer.start()
        try:
            while not self.stopping:
                batches = await consumer.getmany(timeout_ms=int(POLL_S * 1000))
                async with lock:
                    self._took((r.partition, r.offset, r.value) for rs in batches.values() for r in rs)
                    if batches and not self.auto_commit:
                        await consumer.commit()
                        self.commits += 1
        finally:
            await consumer.stop()


MEMBERS: dict[str, type[GroupMember]] = {
    "kafka-python": KafkaPythonMember,
    "aiokafka": AiokafkaMember,
    "confluent-kafka": ConfluentMember,
}


CONSOLE_LINE = re.compile(r"Partition:(\d+)\tOffset:(\d+)\t(.*)")


class ConsoleMember:
    """``kipling consume --group`` as a process (from the beginning, printing partition and offset);
    a thread collects what it prints as ``(partition, offset, value)``. Its stderr goes to a file, so
    a chatty consumer never blocks on a full pipe."""

    def __init__(self, bootstrap: str, topic: str, group: str, *extra: str) -> None:
        from tests.integration.dev_cluster_process import kipling_command

        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 - closed by interrupt()
        self.process = subprocess.Popen(
            [*kipling_command(), "consume", "--bootstrap-server", bootstrap, "--topic", topic,
             "--group", group, "--from-beginning", "--property", "print.partition=true",
             "--property", "print.offset=true", *extra],
            stdout=subprocess.PIPE,
            stderr=self._stderr,
        )  # fmt: skip
        self.records: list[tuple[int, int, str]] = []
        self.stderr = b""
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for raw in self.process.stdout:
            match = CONSOLE_LINE.fullmatch(raw.decode().rstrip("\n"))
            assert match is not None, raw
            with self._lock:
                self.records.append((int(match[1]), int(match[2]), match[3]))

    def printed(self) -> list[tuple[int, int, str]]:
        with self._lock:
            return list(self.records)

    def values(self) -> list[bytes]:
        return [value.encode() for _, _, value in self.printed()]

    def partitions_since(self, count: int) -> set[int]:
        """The partitions of the records printed after the first ``count``."""
        return {p for p, _, _ in self.printed()[count:]}

    def interrupt(self, timeout_s: float = 30) -> int:
        """Ctrl-C (the consumer commits, leaves and prints its count); the exit status. Idempotent."""
        if self._stderr.closed:
            return self.process.returncode
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
        try:
            self.process.wait(timeout_s)
        finally:
            if self.process.poll() is None:
                self.process.kill()
                self.process.wait()
            self._reader.join(5)
            self._stderr.seek(0)
            self.stderr = self._stderr.read()
            self._stderr.close()
        return self.process.returncode


def stop_all(members: Sequence[GroupMember]) -> None:
    """Stop every member (in a finally block: errors of one do not keep the others running)."""
    errors: list[BaseException] = []
    for member in members:
        try:
            member.stop()
        except BaseException as exc:
            errors.append(exc)
    if errors:
        raise errors[0]


def wait_for(
    predicate: Callable[[], bool],
    timeout_s: float,
    what: str,
    members: Sequence[GroupMember] = (),
    interval_s: float = 0.1,
) -> None:
    """Wait for ``predicate``; fail early if a member's thread died, and say what was waited for."""
    deadline = time.monotonic() + timeout_s
    while True:
        for member in members:
            member.check()
            if member.closed.is_set() and not member.stopping:
                raise AssertionError(f"member {member.name} stopped on its own while waiting for {what}")
        if predicate():
            return
        if time.monotonic() > deadline:
            state = ", ".join(f"{m.name}: {len(m.values())} records, {sorted(m.assigned)}" for m in members)
            raise AssertionError(f"timed out after {timeout_s}s waiting for {what} ({state})")
        time.sleep(interval_s)


def consumed_values(members: Iterable[GroupMember]) -> list[bytes]:
    return [value for member in members for value in member.values()]


# ------------------------------------------------------------------------------ topics, data, offsets


def create_topic(bootstrap: str, topic: str, partitions: int, replication_factor: int = 1) -> None:
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=15_000)
    try:
        admin.create_topics([NewTopic(topic, partitions, replication_factor)])
    finally:
        admin.close()


def produce(bootstrap: str, topic: str, values: Sequence[bytes], partitions: int) -> dict[int, int]:
    """Send ``values`` round robin over the partitions (kafka-python, acks=all); returns each
    partition's end offset afterwards as the acknowledgments report it."""
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5, request_timeout_ms=15_000)
    try:
        futures = [producer.send(topic, value, partition=i % partitions) for i, value in enumerate(values)]
        producer.flush(30)
        ends: dict[int, int] = {}
        for future in futures:
            metadata = future.get(timeout=30)
            ends[metadata.partition] = max(ends.get(metadata.partition, 0), metadata.offset + 1)
        return ends
    finally:
        producer.close()


class PacedProducer:
    """confluent-kafka (idempotent, acks=all) writing ``<prefix><n>`` round robin over the partitions
    in a thread, about ``rate`` values a second, until stopped; each value is sent once and the
    producer's own retries carry it through a failover.

    ``acked`` maps every acknowledged value to its (partition, offset); :meth:`stop` waits for every
    outcome and asserts that every value sent was acknowledged.
    """

    def __init__(self, bootstrap: str, topic: str, partitions: int, prefix: str, rate: float = 150) -> None:
        self._config = {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "message.timeout.ms": 60_000,
            "socket.timeout.ms": 5000,
            "request.timeout.ms": 5000,
            "retry.backoff.ms": 100,
            "topic.metadata.refresh.interval.ms": 1000,
            "linger.ms": 5,
        }
        self._topic = topic
        self._partitions = partitions
        self._prefix = prefix
        self._interval_s = 1 / rate
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self.acked: dict[bytes, tuple[int, int]] = {}
        self.failed: list[tuple[bytes, str]] = []
        self.sent = 0
        self.unflushed = -1
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._main, name=f"producer-{prefix}", daemon=True)

    def start(self) -> PacedProducer:
        self._thread.start()
        return self

    def _delivered(self, err, msg) -> None:  # type: ignore[no-untyped-def]
        with self._lock:
            if err is None:
                self.acked[msg.value()] = (msg.partition(), msg.offset())
            else:
                self.failed.append((msg.value(), str(err)))

    def _main(self) -> None:
        try:
            from confluent_kafka import Producer

            producer = Producer(self._config)
            while not self._stop.is_set():
                value = f"{self._prefix}{self.sent}".encode()
                producer.produce(
                    self._topic, value, partition=self.sent % self._partitions, on_delivery=self._delivered
                )
                self.sent += 1
                producer.poll(self._interval_s)  # serves delivery callbacks and paces the stream
            self.unflushed = producer.flush(60)
        except BaseException as exc:
            self.error = exc

    def acked_values(self) -> set[bytes]:
        with self._lock:
            return set(self.acked)

    def wait_for_more(self, count: int, what: str, timeout_s: float = 30) -> None:
        """Block until ``count`` more values than now are acknowledged: the stream is flowing."""
        with self._lock:
            target = len(self.acked) + count

        def flowing() -> bool:
            if self.error is not None:
                raise AssertionError(f"the producer failed: {self.error!r}")
            with self._lock:
                return len(self.acked) >= target

        wait_for(flowing, timeout_s, f"{count} more acknowledgments {what}")

    def stop(self, timeout_s: float = 70, *, check: bool = True) -> dict[bytes, tuple[int, int]]:
        """Stop sending; every value sent must have been acknowledged (unless not ``check``, for
        cleaning up after a failure). Returns value → (partition, offset)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout_s)
        if not check:
            return dict(self.acked)
        assert not self._thread.is_alive(), "the producer did not finish flushing"
        assert self.error is None, f"the producer failed: {self.error!r}"
        assert self.unflushed == 0, f"{self.unflushed} values never got an outcome"
        assert not self.failed, f"deliveries failed: {self.failed[:5]}"
        assert len(self.acked) == self.sent, f"{self.sent} sent, {len(self.acked)} acknowledged"
        return dict(self.acked)

    def end_offsets(self) -> dict[int, int]:
        ends: dict[int, int] = {}
        for partition, offset in self.acked.values():
            ends[partition] = max(ends.get(partition, 0), offset + 1)
        return ends


def committed_offsets(bootstrap: str, group: str, topic: str | None = None) -> dict[int, int]:
    """The group's committed offsets (partition → offset) as its coordinator serves them now: a
    fresh kafka-python admin client each time, so no coordinator is remembered from before."""
    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=15_000)
    try:
        offsets = admin.list_group_offsets({group: None})[group]
    finally:
        admin.close()
    return {tp.partition: om.offset for tp, om in offsets.items() if topic is None or tp.topic == topic}


__all__ = [
    "MEMBERS",
    "AiokafkaMember",
    "ConfluentMember",
    "ConsoleMember",
    "GroupMember",
    "KafkaPythonMember",
    "PacedProducer",
    "Record",
    "committed_offsets",
    "consumed_values",
    "create_topic",
    "produce",
    "stop_all",
    "wait_for",
]
