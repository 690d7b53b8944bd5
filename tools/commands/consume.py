"""`kipling consume`: print a topic's records, like kafka-console-consumer.sh.

Records are printed as Kafka's ``DefaultMessageFormatter`` prints them, with the same ``--property``
names: ``print.timestamp`` (``CreateTime:1700000000000``), ``print.partition`` (``Partition:0``),
``print.offset`` (``Offset:42``), ``print.headers`` (``k1:v1,k2:v2`` or ``NO_HEADERS``),
``print.key``, ``print.value``, in that order, separated by ``key.separator`` (a tab), each record
ended by ``line.separator``; a null key or value prints ``null.literal`` (``null``). At the end the
count goes to stderr as Kafka prints it: ``Processed a total of N messages``.

How it fetches, and why:

* Without ``--group``, every partition of the topic (or the one ``--partition``) is assigned from its
  start offset (``--offset``, ``--from-beginning`` = earliest, default latest, resolved with
  ListOffsets at each leader), and nothing is committed. With ``--group``, the group assigns the
  partitions, they start at the group's committed offsets, and what was printed is committed
  (:mod:`tools.commands.consume_group`).
* Partitions are fetched from their leaders, with one :class:`client.consumer.Consumer` (one
  incremental fetch session) per leader broker, each in a task of its own, so an idle leader's long
  poll never holds back a busy one. The tasks hand their results to one loop that prints, counts and
  decides when to stop, so output is never interleaved mid-record.
* A partition whose fetch reports a retriable error (NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH,
  UNKNOWN_TOPIC_OR_PARTITION...) or whose leader's connection fails is taken off its fetcher with its
  position; the metadata is refreshed and it is assigned to its (new) leader's fetcher, at the same
  position, as Kafka's consumer does after a leader change. OFFSET_OUT_OF_RANGE resets the position to
  the earliest (``--from-beginning``) or latest offset, as ``auto.offset.reset`` would.
* It stops after ``--max-messages`` records, or when ``--timeout-ms`` passes without a new record (exit
  status 0, like Kafka's tool), or on Ctrl-C (status 130, like the JVM on SIGINT) with the count
  printed, or on an error it cannot retry (status 1).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import pathlib
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import BinaryIO, TextIO

import structlog

from client.connection import KafkaConnection
from client.consumer import Consumer, FetchResult
from client.errors import ClientError, KafkaResponseError
from client.fetch_session import TopicPartition
from client.offsets import list_offsets
from client.security import SECURITY_PROPERTY_KEYS, ClientSecurity, from_properties
from client.tasks import cancel_and_wait
from protocol.error_codes import ErrorCode
from protocol.records import DecodedRecord, TimestampType
from protocol.sentinels import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, IsolationLevel
from server_common.config.properties import PropertiesError, read_properties_file
from tools.commands.arguments import command_security, parse_properties, positive_int
from tools.commands.consume_group import (
    ConsoleGroupLink,
    GroupConsumeError,
    GroupOptions,
    offset_reset_policy,
)
from tools.commands.progress import ProgressBar, is_tty
from tools.commands.topics import (
    ClusterConnections,
    PartitionLeaders,
    add_bootstrap_argument,
    configure_tool_logging,
    error_text,
    is_retriable,
    run_async,
)

DEFAULT_MAX_WAIT_MS = 500
"""Kafka's ``fetch.max.wait.ms`` default: how long a fetch waits at the broker for new records."""
RETRY_BACKOFF_S = 0.1
RESULTS_QUEUE_SIZE = 4
"""Fetch results waiting to be printed; a fetcher waits for the printer beyond that."""
WRITE_SETTLE_S = 1.0
"""How long a Ctrl-C waits for records already being written to stdout (see TopicConsumer._write_out)."""
WAKE = object()
"""Queued (without a fetcher) to wake the printing loop: the group needs attention."""
TIMESTAMP_TYPE_NAMES = {
    TimestampType.CREATE_TIME: "CreateTime",
    TimestampType.LOG_APPEND_TIME: "LogAppendTime",
}
ISOLATION_LEVELS = {
    "read_uncommitted": IsolationLevel.READ_UNCOMMITTED,
    "read_committed": IsolationLevel.READ_COMMITTED,
}

_log = structlog.get_logger("kipling.commands.consume")


# -- formatting ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MessageFormat:
    """Kafka's DefaultMessageFormatter: which fields, in which order, separated by what."""

    print_timestamp: bool = False
    print_partition: bool = False
    print_offset: bool = False
    print_headers: bool = False
    print_key: bool = False
    print_value: bool = True
    key_separator: bytes = b"\t"
    line_separator: bytes = b"\n"
    headers_separator: bytes = b","
    headers_key_separator: bytes = b":"
    null_literal: bytes = b"null"

    KNOWN = (
        "print.timestamp",
        "print.partition",
        "print.offset",
        "print.headers",
        "print.key",
        "print.value",
        "key.separator",
        "line.separator",
        "headers.separator",
        "headers.key.separator",
        "null.literal",
    )

    @classmethod
    def from_properties(cls, properties: Mapping[str, str]) -> MessageFormat:
        unknown = sorted(set(properties) - set(cls.KNOWN))
        if unknown:
            raise ValueError(
                f"unknown formatter properties: {', '.join(unknown)} (known: {', '.join(cls.KNOWN)})"
            )

        def flag(name: str, default: bool) -> bool:
            value = properties.get(name)
            return default if value is None else value.strip().lower() == "true"

        def text(name: str, default: bytes) -> bytes:
            value = properties.get(name)
            return default if value is None else value.replace("\\t", "\t").replace("\\n", "\n").encode()

        return cls(
            print_timestamp=flag("print.timestamp", False),
            print_partition=flag("print.partition", False),
            print_offset=flag("print.offset", False),
            print_headers=flag("print.headers", False),
            print_key=flag("print.key", False),
            print_value=flag("print.value", True),
            key_separator=text("key.separator", b"\t"),
            line_separator=text("line.separator", b"\n"),
            headers_separator=text("headers.separator", b","),
            headers_key_separator=text("headers.key.separator", b":"),
            null_literal=text("null.literal", b"null"),
        )

    def format(self, record: DecodedRecord, partition: int) -> bytes:
        """One record as kafka-console-consumer.sh prints it (ending with the line separator)."""
        fields: list[bytes] = []
        if self.print_timestamp:
            name = TIMESTAMP_TYPE_NAMES.get(record.timestamp_type, "NO_TIMESTAMP")
            fields.append(f"{name}:{record.timestamp}".encode())
        if self.print_partition:
            fields.append(b"Partition:%d" % partition)
        if self.print_offset:
            fields.append(b"Offset:%d" % record.offset)
        if self.print_headers:
            if record.headers:
                fields.append(
                    self.headers_separator.join(
                        name.encode() + self.headers_key_separator + self._nullable(value)
                        for name, value in record.headers
                    )
                )
            else:
                fields.append(b"NO_HEADERS")
        if self.print_key:
            fields.append(self._nullable(record.key))
        if self.print_value:
            fields.append(self._nullable(record.value))
        # Kafka writes the key separator between fields and the line separator after the last one
        # (after the value, or after the last field printed when print.value=false)
        return self.key_separator.join(fields) + self.line_separator if fields else b""

    def _nullable(self, data: bytes | None) -> bytes:
        return self.null_literal if data is None else bytes(data)


# -- where to start ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class StartOffset:
    """``--offset``: a number, or a ListOffsets timestamp sentinel (earliest -2, latest -1)."""

    offset: int | None = None
    timestamp: int = LATEST_TIMESTAMP

    @classmethod
    def parse(cls, text: str) -> StartOffset:
        lowered = text.strip().lower()
        if lowered == "earliest":
            return cls(timestamp=EARLIEST_TIMESTAMP)
        if lowered == "latest":
            return cls(timestamp=LATEST_TIMESTAMP)
        try:
            value = int(lowered)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, earliest or latest, got {text!r}") from None
        if value < 0:
            raise argparse.ArgumentTypeError(f"an offset is at least 0, got {value}")
        return cls(offset=value)


@dataclass(frozen=True, slots=True)
class ConsumeOptions:
    topic: str
    partition: int | None = None
    start: StartOffset = StartOffset()
    reset_timestamp: int = LATEST_TIMESTAMP
    """Where an out-of-range position goes (``auto.offset.reset``; earliest with --from-beginning)."""
    reset_none: bool = False
    """``auto.offset.reset=none``: an out-of-range position is an error, not a reset."""
    max_messages: int | None = None
    timeout_ms: int | None = None
    isolation_level: IsolationLevel = IsolationLevel.READ_UNCOMMITTED
    max_wait_ms: int = DEFAULT_MAX_WAIT_MS
    message_format: MessageFormat = field(default_factory=MessageFormat)
    group: GroupOptions | None = None
    """With ``--group``: the group assigns the partitions and what was printed is committed."""
    unused_properties: tuple[str, ...] = ()
    """Consumer properties given that this tool has no use for (warned about)."""


@dataclass(slots=True)
class ConsumeStats:
    messages: int = 0
    bytes: int = 0
    fetches: int = 0
    moves: int = 0
    """Partitions moved to another fetcher (leader changes, lost connections)."""


class ConsumeError(Exception):
    """An error the consumer cannot retry; the tool stops with status 1."""


# -- fetching ------------------------------------------------------------------------------------


class LeaderFetcher:
    """One leader broker's Consumer and the task that fetches from it in a loop."""

    def __init__(
        self,
        node_id: int,
        connection: KafkaConnection,
        consumer: Consumer,
        results: asyncio.Queue[tuple[LeaderFetcher | None, object]],
        slots: asyncio.Semaphore,
    ) -> None:
        self.node_id = node_id
        self.connection = connection
        self.consumer = consumer
        self._results = results
        self._slots = slots
        self.task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self.task = asyncio.create_task(self._run(), name=f"kipling-consume-fetcher-{self.node_id}")

    async def _run(self) -> None:
        """Fetch while something is assigned; each result (or the error that ended it) goes to the printer."""
        while True:
            if not self.consumer.assignment:
                await asyncio.sleep(RETRY_BACKOFF_S)
                continue
            try:
                result: object = await self.consumer.fetch()
            except ClientError as exc:
                result = exc
            # a slot per queued result keeps fetchers at most RESULTS_QUEUE_SIZE results ahead of the
            # printer, while the queue itself stays unbounded for WAKE, which must never block
            await self._slots.acquire()
            self._results.put_nowait((self, result))
            if isinstance(result, ClientError):
                return

    async def stop(self) -> None:
        error = await cancel_and_wait(self.task)
        if error is not None:  # the other fetchers must still stop
            _log.error("a fetcher had failed", broker=self.node_id, error=repr(error))


class TopicConsumer:
    """The partitions of one topic, spread over one fetcher per leader, and the loop that prints them."""

    def __init__(
        self,
        cluster: ClusterConnections,
        out: BinaryIO,
        options: ConsumeOptions,
        stats: ConsumeStats,
        progress: ProgressBar | None = None,
        group: ConsoleGroupLink | None = None,
    ) -> None:
        self.cluster = cluster
        self.out = out
        self.options = options
        self.stats = stats
        self.progress = progress
        self.group = group
        """With ``--group``: decides which partitions this consumer owns, and commits."""
        self.leaders = PartitionLeaders(cluster, options.topic)
        self._results: asyncio.Queue[tuple[LeaderFetcher | None, object]] = asyncio.Queue()
        self._slots = asyncio.Semaphore(RESULTS_QUEUE_SIZE)
        self.positions: dict[TopicPartition, int] = {}
        """The next offset to print of each owned partition: what a commit records."""
        self._fetchers: dict[int, LeaderFetcher] = {}
        self.homeless: dict[TopicPartition, int | None] = {}
        """Partitions without a fetcher, with their position (None: to be looked up)."""
        self._started: set[TopicPartition] = set()
        """Partitions whose start offset was resolved once (a later lookup is a reset)."""
        self._stale = False
        """A partition moved: the metadata must be read again before placing it."""

    # -- setup -------------------------------------------------------------------------------------

    async def start(self) -> list[TopicPartition]:
        """Read the topic's partitions, resolve the start offsets, and start fetching.

        With a group, the group's assignment decides the partitions (and their positions) instead.
        """
        topic = await self.leaders.load(auto_create=True)  # as a Kafka consumer's subscription does
        if self.group is not None:
            await self.group.start(self)
            return sorted(self.positions)
        partitions = [p.partition for p in topic.partitions]
        options = self.options
        if options.partition is not None:
            if options.partition not in partitions:
                raise ConsumeError(
                    f"Partition {options.partition} of topic {options.topic} with partition count "
                    f"{len(partitions)} is not present in metadata"
                )
            partitions = [options.partition]
        tps = [TopicPartition(options.topic, p) for p in partitions]
        if options.start.offset is not None:
            for tp in tps:
                self.homeless[tp] = options.start.offset
        else:
            for tp in tps:
                self.homeless[tp] = None
        await self.place()
        return tps

    # -- the loop ----------------------------------------------------------------------------------

    async def run(self) -> None:
        """Print records until --max-messages or --timeout-ms (returns), or an error (raises)."""
        options = self.options
        timeout_s = None if options.timeout_ms is None else options.timeout_ms / 1000
        last_record = time.monotonic()
        while not self._done():
            wait_s = RETRY_BACKOFF_S if self.homeless else None
            if timeout_s is not None:
                remaining = last_record + timeout_s - time.monotonic()
                if remaining <= 0:
                    return
                wait_s = remaining if wait_s is None else min(wait_s, remaining)
            if self.group is not None:
                due_s = self.group.due_in()
                if due_s is not None:
                    wait_s = due_s if wait_s is None else min(wait_s, due_s)
            try:
                async with asyncio.timeout(wait_s):
                    fetcher, item = await self._results.get()
            except TimeoutError:
                item = None
                fetcher = None
            if fetcher is not None:
                self._slots.release()
            if fetcher is not None and self._fetchers.get(fetcher.node_id) is fetcher:
                if isinstance(item, ClientError):
                    await self._fetcher_failed(fetcher, item)
                elif isinstance(item, FetchResult) and await self._print(fetcher, item):
                    last_record = time.monotonic()
            if self.group is not None and not self._done():
                await self.group.tick(self)
            if self.homeless:
                await self.place()

    def wake(self) -> None:
        """Wake the loop (from another task) so that the group link gets its turn at once."""
        self._results.put_nowait((None, WAKE))

    def _done(self) -> bool:
        limit = self.options.max_messages
        return limit is not None and self.stats.messages >= limit

    async def _print(self, fetcher: LeaderFetcher, result: FetchResult) -> bool:
        """Print a fetch round's records; handle its partition errors. True if a record was printed.

        The write happens in a thread: a reader of stdout that stops reading (``| less``) must not
        stop the event loop, where a group member's heartbeats run. Positions move once the records
        are written, so a commit never covers records that were not.
        """
        self.stats.fetches += 1
        if not result.valid:
            self.leaders.warn("fetch session error", broker=fetcher.node_id, error=result.error.name)
            return False
        fmt = self.options.message_format
        limit = self.options.max_messages
        printed = False
        healthy = True
        chunks: list[bytes] = []
        moved: dict[TopicPartition, int] = {}
        for tp, partition in result.partitions.items():
            if self.positions.get(tp) != partition.fetch_offset:
                continue  # not ours any more, or fetched before a seek: never print a gap or twice
            if partition.error is not ErrorCode.NONE:
                healthy = False
                self._partition_error(fetcher, tp, partition.error)
                continue
            position = partition.next_offset
            for record in partition.records():
                if limit is not None and self.stats.messages >= limit:
                    position = record.offset
                    break
                chunks.append(fmt.format(record, tp.partition))
                self.stats.messages += 1
                self.stats.bytes += len(record.value or b"") + len(record.key or b"")
                printed = True
            moved[tp] = position
        if chunks:
            await self._write_out(b"".join(chunks), moved)
        self.positions.update(moved)
        if self.progress is not None and printed:
            self.progress.update(records=self.stats.messages, nbytes=self.stats.bytes)
        if healthy:
            self.leaders.succeeded()
        return printed

    async def _write_out(self, data: bytes, moved: Mapping[TopicPartition, int]) -> None:
        """Write ``data`` in a thread. A Ctrl-C that lands while the records are being written lets
        the write finish (for up to :data:`WRITE_SETTLE_S`) and moves the positions past them, so
        that the final commit covers every record printed; a write still blocked then (a reader
        that stopped reading) is left behind and its records are not committed."""
        writing = asyncio.ensure_future(asyncio.to_thread(self._write, data))
        try:
            await asyncio.shield(writing)
        except asyncio.CancelledError:
            await asyncio.wait([writing], timeout=WRITE_SETTLE_S)
            if writing.done() and not writing.cancelled() and writing.exception() is None:
                self.positions.update(moved)
            raise

    def _write(self, data: bytes) -> None:
        self.out.write(data)
        self.out.flush()

    def _partition_error(self, fetcher: LeaderFetcher, tp: TopicPartition, code: ErrorCode) -> None:
        position = fetcher.consumer.assignment.get(tp)
        if position is None:
            return  # moved already
        if code is ErrorCode.OFFSET_OUT_OF_RANGE:
            if self.options.reset_none:
                raise ConsumeError(
                    f"Offsets out of range with no configured reset policy for partitions: "
                    f"{tp.topic}-{tp.partition} (position {position})"
                )
            _log.warning("position out of range, resetting", partition=tp.partition, position=position)
            fetcher.consumer.unassign(tp)
            self.homeless[tp] = None
            return
        if not code.retriable:
            raise ConsumeError(f"fetch of {tp.topic}-{tp.partition}: {code.name}: {code.description}")
        _log.info("partition moves", partition=tp.partition, broker=fetcher.node_id, error=code.name)
        fetcher.consumer.unassign(tp)
        self.homeless[tp] = position
        self.stats.moves += 1
        self._stale = True

    async def _fetcher_failed(self, fetcher: LeaderFetcher, exc: ClientError) -> None:
        """A leader's connection failed: its partitions go back to placement, with their positions."""
        if not is_retriable(exc):
            raise ConsumeError(f"fetch from broker {fetcher.node_id}: {error_text(exc)}")
        self.leaders.warn(
            "fetch failed, moving its partitions", broker=fetcher.node_id, error=error_text(exc)
        )
        del self._fetchers[fetcher.node_id]
        await fetcher.stop()
        for tp, position in fetcher.consumer.assignment.items():
            self.homeless[tp] = position
            self.stats.moves += 1
        self._stale = True
        self.cluster.forget(fetcher.connection)

    # -- placement ---------------------------------------------------------------------------------

    async def place(self) -> None:
        """Give each homeless partition to its leader's fetcher (after a metadata refresh if needed)."""
        if self._stale or any(self.leaders.leader(tp.partition) < 0 for tp in self.homeless):
            self._stale = False
            await self.leaders.refresh(self.leaders.generation)
        by_leader: dict[int, list[TopicPartition]] = {}
        for tp in self.homeless:
            leader = self.leaders.leader(tp.partition)
            if leader >= 0:
                by_leader.setdefault(leader, []).append(tp)
        for leader, tps in by_leader.items():
            try:
                fetcher = await self._fetcher(leader)
                await self._resolve(fetcher, tps)
            except ClientError as exc:
                if not is_retriable(exc):
                    raise ConsumeError(
                        f"assigning partitions led by broker {leader}: {error_text(exc)}"
                    ) from exc
                self.leaders.warn("cannot assign partitions yet", broker=leader, error=error_text(exc))
                self._drop_fetcher(leader)
                self._stale = True
                continue
            for tp in tps:
                position = self.homeless.pop(tp)
                assert position is not None
                fetcher.consumer.assign(tp, position)
                self.positions[tp] = position

    async def _fetcher(self, node_id: int) -> LeaderFetcher:
        fetcher = self._fetchers.get(node_id)
        if fetcher is not None:
            return fetcher
        connection = await self.cluster.dedicated(node_id)
        consumer = Consumer(
            connection, max_wait_ms=self.options.max_wait_ms, isolation_level=self.options.isolation_level
        )
        fetcher = self._fetchers[node_id] = LeaderFetcher(
            node_id, connection, consumer, self._results, self._slots
        )
        fetcher.start()
        return fetcher

    def _drop_fetcher(self, node_id: int) -> None:
        fetcher = self._fetchers.get(node_id)
        if fetcher is not None and not fetcher.consumer.assignment:
            del self._fetchers[node_id]
            if fetcher.task is not None:
                fetcher.task.cancel()

    async def _resolve(self, fetcher: LeaderFetcher, tps: Sequence[TopicPartition]) -> None:
        """Turn the start or reset positions of ``tps`` that are not numbers yet into offsets."""
        wanted = {tp: self._lookup_timestamp(tp) for tp in tps if self.homeless[tp] is None}
        if not wanted:
            return
        connection = await self.cluster.broker(fetcher.node_id)
        answers = await list_offsets(connection, wanted, isolation_level=self.options.isolation_level)
        for tp, answer in answers.items():
            if not answer.ok:
                raise KafkaResponseError(answer.error, context=f"list offsets {tp.topic}-{tp.partition}")
            self.homeless[tp] = answer.offset
        self._started.update(wanted)

    def _lookup_timestamp(self, tp: TopicPartition) -> int:
        if tp in self._started or self.options.start.offset is not None:
            return self.options.reset_timestamp
        return self.options.start.timestamp

    # -- group assignment --------------------------------------------------------------------------

    async def revoke_all(self) -> dict[TopicPartition, int]:
        """Stop fetching every partition (an eager rebalance) and drop unprinted results.

        Returns the position of each partition: everything before it was printed. The positions stay
        (a commit at exit still covers them) until :meth:`assign` replaces them.
        """
        positions = dict(self.positions)
        fetchers = list(self._fetchers.values())
        self._fetchers.clear()
        for fetcher in fetchers:
            await fetcher.stop()
            self.cluster.forget(fetcher.connection)  # a cancelled fetch may still be parked on it
        while not self._results.empty():
            source, _ = self._results.get_nowait()
            if source is not None:
                self._slots.release()
        self.homeless.clear()
        return positions

    async def assign(self, positions: Mapping[TopicPartition, int | None]) -> None:
        """Own exactly ``positions``' partitions from there on (None: as ``auto.offset.reset`` says)."""
        self.positions.clear()
        self.homeless.clear()
        for tp, position in positions.items():
            self.homeless[tp] = position
        if self.homeless:
            await self.place()

    async def stop(self) -> None:
        """Commit and leave the group (if any), then stop every fetcher (also when that fails)."""
        try:
            if self.group is not None:
                await self.group.stop(self)
        finally:
            fetchers = list(self._fetchers.values())
            self._fetchers.clear()
            for fetcher in fetchers:
                await fetcher.stop()


async def consume(
    cluster: ClusterConnections,
    out: BinaryIO,
    options: ConsumeOptions,
    *,
    stats: ConsumeStats | None = None,
    progress: ProgressBar | None = None,
) -> ConsumeStats:
    """Print ``options.topic``'s records to ``out`` until a stop condition; returns the counts.

    Raises :class:`ConsumeError` (or a ClientError from the first metadata request) on an error that
    cannot be retried; ``stats`` then holds what was printed before.
    """
    stats = stats if stats is not None else ConsumeStats()
    group = None if options.group is None else ConsoleGroupLink(cluster, options.topic, options.group)
    consumer = TopicConsumer(cluster, out, options, stats, progress, group)
    try:
        await consumer.start()
        await consumer.run()
    finally:
        await consumer.stop()
    return stats


# -- the command ---------------------------------------------------------------------------------


CONSUME_DESCRIPTION = """\
Print the records of every partition of a topic (or of one --partition) as kafka-console-consumer.sh
does, fetching from each partition's leader and following leader changes. Starts at the latest offset
unless --from-beginning or --offset says otherwise.

With --group G the consumer joins consumer group G: it prints the partitions the group assigns to it
(several consumers of one group share the topic), starts each at the group's committed offset
(partitions without one start as auto.offset.reset says: latest, or earliest with --from-beginning),
and commits the position after the last record printed every auto.commit.interval.ms, before a
rebalance and when it stops. Consumer settings go in with --consumer-property under Kafka's names
(group.instance.id, session.timeout.ms, heartbeat.interval.ms, max.poll.interval.ms,
partition.assignment.strategy=range|roundrobin, enable.auto.commit, auto.commit.interval.ms,
auto.offset.reset=earliest|latest|none, metadata.max.age.ms) or in a --consumer.config file.

Stops after --max-messages records, or when --timeout-ms passes without a new record (status 0), or
on Ctrl-C (status 130), and prints "Processed a total of N messages" on stderr. With --max-messages,
a progress bar is drawn on stderr when stderr is a terminal and stdout is not.
"""

CONSUME_EPILOG = """\
Formatter properties (--property, as kafka-console-consumer.sh): print.timestamp, print.partition,
print.offset, print.headers, print.key, print.value, key.separator, line.separator,
headers.separator, headers.key.separator, null.literal.

Examples:
  kipling consume --bootstrap-server 127.0.0.1:9092 --topic t --from-beginning --max-messages 10
  kipling consume --bootstrap-server 127.0.0.1:9092 --topic t --partition 0 --offset 42 \\
      --property print.key=true --property print.offset=true --timeout-ms 5000
  kipling consume --bootstrap-server 127.0.0.1:9092 --topic t --group readers --from-beginning
"""


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "consume",
        help="print a topic's records (like kafka-console-consumer.sh), alone or in a consumer group",
        description=CONSUME_DESCRIPTION,
        epilog=CONSUME_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_bootstrap_argument(p)
    p.add_argument("--topic", required=True, help="the topic to consume")
    p.add_argument("--partition", type=int, metavar="P", help="consume only this partition")
    start = p.add_mutually_exclusive_group()
    start.add_argument(
        "--from-beginning", action="store_true", help="start at the earliest offset of every partition"
    )
    start.add_argument(
        "--offset",
        type=StartOffset.parse,
        metavar="N|earliest|latest",
        help="where to start: an offset (needs --partition), earliest or latest (default latest)",
    )
    p.add_argument("--max-messages", type=positive_int, metavar="N", help="stop after N records")
    p.add_argument(
        "--timeout-ms",
        type=positive_int,
        metavar="MS",
        help="stop when no record arrived for MS milliseconds",
    )
    p.add_argument(
        "--property",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a formatter property (repeatable), e.g. print.key=true",
    )
    p.add_argument(
        "--isolation-level",
        choices=sorted(ISOLATION_LEVELS),
        default="read_uncommitted",
        help="read_committed hides records of open and aborted transactions (default read_uncommitted)",
    )
    p.add_argument("--group", metavar="G", help="consume as a member of consumer group G, committing offsets")
    p.add_argument(
        "--consumer-property",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a consumer setting under its Kafka name (repeatable), e.g. enable.auto.commit=false",
    )
    p.add_argument(
        "--consumer.config",
        dest="consumer_config",
        type=pathlib.Path,
        metavar="FILE",
        help="a properties file of consumer settings (--consumer-property wins over it)",
    )
    p.set_defaults(func=run, consume_parser=p)


def options_from(args: argparse.Namespace) -> ConsumeOptions:
    """The options of a parsed command line; ValueError for an invalid combination or property."""
    if args.offset is not None and args.offset.offset is not None and args.partition is None:
        raise ValueError("The partition is required when offset is specified.")
    properties = consumer_properties(args)
    reset = offset_reset_policy(properties, from_beginning=args.from_beginning)
    group = group_options(args, properties)
    if reset == "none" and group is None:
        raise ValueError("auto.offset.reset=none needs --group: only a group has offsets to start from")
    reset_timestamp = EARLIEST_TIMESTAMP if reset == "earliest" else LATEST_TIMESTAMP
    start = args.offset if args.offset is not None else StartOffset(timestamp=reset_timestamp)
    max_wait_ms = (
        DEFAULT_MAX_WAIT_MS if args.timeout_ms is None else min(DEFAULT_MAX_WAIT_MS, args.timeout_ms)
    )
    unused = group.ignored if group is not None else tuple(sorted(set(properties) - {"auto.offset.reset"}))
    unused = tuple(name for name in unused if name not in SECURITY_PROPERTY_KEYS)  # consumer_security's
    return ConsumeOptions(
        topic=args.topic,
        partition=args.partition,
        start=start,
        reset_timestamp=reset_timestamp,
        reset_none=reset == "none",
        max_messages=args.max_messages,
        timeout_ms=args.timeout_ms,
        isolation_level=ISOLATION_LEVELS[args.isolation_level],
        max_wait_ms=max_wait_ms,
        message_format=MessageFormat.from_properties(parse_properties(args.property)),
        group=group,
        unused_properties=unused,
    )


def consumer_properties(args: argparse.Namespace) -> dict[str, str]:
    """``--consumer.config`` then ``--consumer-property`` (which wins), under Kafka's names."""
    properties: dict[str, str] = {}
    if args.consumer_config is not None:
        try:
            properties.update(read_properties_file(args.consumer_config))
        except (OSError, PropertiesError) as exc:
            raise ValueError(f"cannot read {args.consumer_config}: {exc}") from None
    properties.update(parse_properties(args.consumer_property))
    return properties


def consumer_security(args: argparse.Namespace) -> ClientSecurity | None:
    """``--command-config``, else the security keys of the consumer properties (where Kafka's
    console consumer reads them: security.protocol, ssl.*, sasl.*); ValueError naming the key."""
    if getattr(args, "command_config", None) is not None:
        return command_security(args)
    properties = consumer_properties(args)
    if not SECURITY_PROPERTY_KEYS & set(properties):
        return None
    return from_properties(properties).build()


def group_options(args: argparse.Namespace, properties: Mapping[str, str]) -> GroupOptions | None:
    """The group settings of ``--group`` and the consumer properties, if a group is used."""
    if args.group is None and "group.id" not in properties:
        return None
    if args.partition is not None or args.offset is not None:
        raise ValueError(
            "--group cannot be combined with --partition or --offset: the group assigns the partitions "
            "and they start at its committed offsets"
        )
    return GroupOptions.from_properties(args.group, properties, from_beginning=args.from_beginning)


async def consume_command(
    args: argparse.Namespace, out: BinaryIO, err: TextIO, *, stdout_is_tty: bool = False
) -> int:
    """Run ``kipling consume`` with parsed arguments; the exit status."""
    try:
        options = options_from(args)
        security = consumer_security(args)
    except ValueError as exc:
        err.write(f"ERROR {exc}\n")
        return 2
    for name in options.unused_properties:
        err.write(f"WARN The consumer property '{name}' is not used by kipling consume.\n")
    progress = None
    if options.max_messages is not None:
        progress = ProgressBar(err, total=options.max_messages, enabled=is_tty(err) and not stdout_is_tty)
    cluster = ClusterConnections(
        args.bootstrap_server, client_id="kipling-console-consumer", security=security
    )
    stats = ConsumeStats()
    failure: str | None = None
    try:
        await consume(cluster, out, options, stats=stats, progress=progress)
    except (ConsumeError, GroupConsumeError) as exc:
        failure = str(exc)
    except ClientError as exc:
        failure = error_text(exc)
    finally:
        # also on Ctrl-C (the task is cancelled): Kafka's tool prints the count then too
        if progress is not None:
            progress.close()
        await cluster.close()
        if failure is not None:
            err.write(f"ERROR Error processing message, terminating consumer process: {failure}\n")
        err.write(f"Processed a total of {stats.messages} messages\n")
        err.flush()
    return 1 if failure is not None else 0


def run(args: argparse.Namespace) -> int:
    configure_tool_logging()
    out = sys.stdout.buffer
    try:
        return run_async(consume_command(args, out, sys.stderr, stdout_is_tty=is_tty(sys.stdout)))
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # the reader of stdout went away (``| head``): stop quietly, and keep the interpreter's final
        # flush of stdout from failing again
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0


__all__ = [
    "ConsumeError",
    "ConsumeOptions",
    "ConsumeStats",
    "MessageFormat",
    "StartOffset",
    "TopicConsumer",
    "consume",
    "consume_command",
    "register",
    "run",
]
