"""`kipling produce`: send lines of stdin or a file as records, like kafka-console-producer.sh.

One line is one record. Lines are parsed as Kafka's ``LineMessageReader`` parses them, with the same
``--property`` names (``parse.key``, ``key.separator``, ``parse.headers``, ``headers.delimiter``,
``headers.separator``, ``headers.key.separator``, ``null.marker``, ``ignore.error``), and the same
error text for a line without a key separator. ``--header k=v`` adds headers to every record (kcat's
``-H``).

Partitioning is Kafka's default partitioner (:mod:`client.partitioner`): an explicit ``--partition``,
else murmur2 of the key, else a sticky partition for records without a key, so keys land where any Kafka
client would put them.

How records flow, and why:

* A reader thread reads the input in chunks (``read1``: whatever is available, up to 64 KiB) and hands
  them to the event loop through a small bounded queue. A thread, because stdin may be a terminal or a
  pipe on which a read blocks, and the event loop must keep sending meanwhile; chunks rather than
  lines, so a large file costs one hand-over per 64 KiB, yet a line typed on a terminal goes out at once.
* Each partition has a sender task with a bounded queue of records. A sender takes everything queued
  (up to ``--batch-size`` bytes) whenever its previous request has finished, so batches grow exactly
  as large as the broker's pace requires (Kafka's ``linger.ms=0`` behaviour, without a timer), and one
  batch per partition is in flight at a time, which keeps each partition's records in input order even
  across retries. Senders of different partitions run concurrently, pipelined on each leader's
  connection.
* A retriable failure (NOT_LEADER_OR_FOLLOWER and other retriable errors, a lost connection, a timeout)
  refreshes the metadata and sends the same batch again to the partition's leader, until
  ``--delivery-timeout-ms`` has passed (Kafka's ``delivery.timeout.ms``). As in Kafka's producer without
  idempotence, a batch whose request timed out may then be written twice. Any other failure stops the
  tool with exit status 1, after printing how many records were acknowledged.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import os
import stat
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO, TextIO

import structlog

from client.errors import ClientError, KafkaResponseError
from client.partitioner import StickyPartitioner, partition_for_key
from client.producer import Producer
from protocol.error_codes import ErrorCode
from protocol.records import CompressionType, Record, build_batch
from tools.commands.arguments import command_security, parse_properties, positive_int
from tools.commands.progress import ProgressBar
from tools.commands.topics import (
    ClusterConnections,
    PartitionLeaders,
    add_bootstrap_argument,
    configure_tool_logging,
    error_text,
    is_retriable,
    run_async,
)

CHUNK_SIZE = 65_536
CHUNK_QUEUE_SIZE = 16
"""Chunks read ahead of parsing (1 MiB at most)."""
PARTITION_QUEUE_RECORDS = 20_000
"""Records waiting per partition before the reader waits for its sender (Kafka's buffer.memory)."""
DEFAULT_BATCH_SIZE = 262_144
"""Bytes of records per batch at most; well under the broker's message.max.bytes (1 MiB)."""
DEFAULT_DELIVERY_TIMEOUT_MS = 120_000
"""Kafka's ``delivery.timeout.ms`` default: how long a batch may be retried."""
DEFAULT_REQUEST_TIMEOUT_MS = 30_000
RECORD_OVERHEAD_BYTES = 21
"""About what a record's framing (length, attributes, deltas, lengths) adds to its key and value."""

_log = structlog.get_logger("kipling.commands.produce")


# -- parsing lines -------------------------------------------------------------------------------


class LineFormatError(Exception):
    """A line the reader cannot turn into a record (Kafka's KafkaException text)."""


@dataclass(frozen=True, slots=True)
class LineFormat:
    """How a line becomes a record: Kafka's LineMessageReader properties."""

    parse_key: bool = False
    key_separator: bytes = b"\t"
    parse_headers: bool = False
    headers_delimiter: bytes = b"\t"
    headers_separator: bytes = b","
    headers_key_separator: bytes = b":"
    null_marker: bytes | None = None
    ignore_error: bool = False
    headers: tuple[tuple[str, bytes | None], ...] = ()
    """Headers added to every record (``--header``), before the line's own."""

    @classmethod
    def from_properties(
        cls, properties: dict[str, str], headers: Sequence[tuple[str, bytes | None]] = ()
    ) -> LineFormat:
        known = {
            "parse.key",
            "key.separator",
            "parse.headers",
            "headers.delimiter",
            "headers.separator",
            "headers.key.separator",
            "null.marker",
            "ignore.error",
        }
        unknown = sorted(set(properties) - known)
        if unknown:
            raise ValueError(
                f"unknown reader properties: {', '.join(unknown)} (known: {', '.join(sorted(known))})"
            )

        def flag(name: str) -> bool:
            return properties.get(name, "false").strip().lower() == "true"

        def text(name: str, default: bytes) -> bytes:
            value = properties.get(name)
            return default if value is None else _unescape(value).encode()

        null_marker = properties.get("null.marker")
        fmt = cls(
            parse_key=flag("parse.key"),
            key_separator=text("key.separator", b"\t"),
            parse_headers=flag("parse.headers"),
            headers_delimiter=text("headers.delimiter", b"\t"),
            headers_separator=text("headers.separator", b","),
            headers_key_separator=text("headers.key.separator", b":"),
            null_marker=None if null_marker is None else null_marker.encode(),
            ignore_error=flag("ignore.error"),
            headers=tuple(headers),
        )
        for name in ("key_separator", "headers_delimiter", "headers_separator", "headers_key_separator"):
            if not getattr(fmt, name):
                raise ValueError(f"{name.replace('_', '.')} must not be empty")
        return fmt

    def parse(self, line: bytes, line_number: int, timestamp: int) -> Record:
        """The record for one line (without its line ending)."""
        offset = 0
        line_headers: list[tuple[str, bytes | None]] = []
        if self.parse_headers:
            raw = self._field(line, 0, self.headers_delimiter, "headers delimiter", line_number)
            if raw is not None:
                offset = len(raw) + len(self.headers_delimiter)
                if raw != self.null_marker:
                    line_headers = self._headers(raw, line_number)
        key = None
        if self.parse_key:
            key = self._field(line, offset, self.key_separator, "key separator", line_number)
            if key is not None:
                offset += len(key) + len(self.key_separator)
        value: bytes | None = line[offset:]
        if key is not None and key == self.null_marker:
            key = None
        if value == self.null_marker:
            value = None
        headers = [*self.headers, *line_headers]
        return Record(value, key, tuple(headers), timestamp)

    def _field(self, line: bytes, start: int, separator: bytes, name: str, line_number: int) -> bytes | None:
        index = line.find(separator, start)
        if index < 0:
            if self.ignore_error:
                return None
            raise LineFormatError(f"No {name} found on line number {line_number}: '{_text(line)}'")
        return line[start:index]

    def _headers(self, raw: bytes, line_number: int) -> list[tuple[str, bytes | None]]:
        out: list[tuple[str, bytes | None]] = []
        for pair in raw.split(self.headers_separator):
            index = pair.find(self.headers_key_separator)
            if index < 0:
                if not self.ignore_error:
                    raise LineFormatError(
                        f"No header key separator found in pair '{_text(pair)}' on line number {line_number}"
                    )
                out.append((_text(pair), None))
                continue
            key = pair[:index]
            if key == self.null_marker:
                raise LineFormatError(
                    f"Header keys should not be equal to the null marker '{_text(key)}' as they can't be null"
                )
            value: bytes | None = pair[index + len(self.headers_key_separator) :]
            out.append((_text(key), None if value == self.null_marker else value))
        return out


def _text(data: bytes) -> str:
    return data.decode("utf-8", "replace")


def _unescape(value: str) -> str:
    r"""Let ``key.separator=\t`` on a command line mean a tab, as people write it for Kafka's tools."""
    return value.replace("\\t", "\t").replace("\\n", "\n")


class LineSplitter:
    """Cuts chunks of bytes into lines; a line split across chunks is joined (``\\n`` or ``\\r\\n`` ends)."""

    def __init__(self) -> None:
        self._partial = b""

    def feed(self, chunk: bytes) -> list[bytes]:
        data = self._partial + chunk if self._partial else chunk
        lines = data.split(b"\n")
        self._partial = lines.pop()
        return [line[:-1] if line.endswith(b"\r") else line for line in lines]

    def finish(self) -> list[bytes]:
        """The last line when the input does not end with a newline."""
        partial, self._partial = self._partial, b""
        if partial.endswith(b"\r"):
            partial = partial[:-1]
        return [partial] if partial else []


def record_size(record: Record) -> int:
    """About how many bytes ``record`` adds to a batch (for batch and sticky-partition sizes)."""
    size = RECORD_OVERHEAD_BYTES + len(record.key or b"") + len(record.value or b"")
    for name, value in record.headers:
        size += len(name) + len(value or b"") + 2
    return size


# -- partitioning --------------------------------------------------------------------------------


class Partitioner:
    """Kafka's choice of partition: explicit, else by key (murmur2), else sticky."""

    def __init__(
        self,
        num_partitions: int,
        *,
        partition: int | None = None,
        batch_size: int = DEFAULT_BATCH_SIZE,
        choose: Callable[[int], int] | None = None,
    ) -> None:
        self.num_partitions = num_partitions
        self.explicit = partition
        self._sticky = StickyPartitioner(num_partitions, batch_size, choose=choose)

    def partition(self, record: Record, size: int) -> int:
        if self.explicit is not None:
            return self.explicit
        if record.key is not None:
            return partition_for_key(record.key, self.num_partitions)
        return self._sticky.partition(size)


# -- sending -------------------------------------------------------------------------------------


class ProduceError(Exception):
    """A batch that could not be delivered; the tool stops."""

    def __init__(self, topic: str, partition: int, cause: ClientError) -> None:
        self.topic = topic
        self.partition = partition
        self.cause = cause
        super().__init__(
            f"Error when sending message to topic {topic} partition {partition}: {error_text(cause)}"
        )


@dataclass(frozen=True, slots=True)
class ProduceOptions:
    topic: str
    partition: int | None = None
    acks: int = -1
    compression: CompressionType = CompressionType.NONE
    batch_size: int = DEFAULT_BATCH_SIZE
    request_timeout_ms: int = DEFAULT_REQUEST_TIMEOUT_MS
    delivery_timeout_ms: int = DEFAULT_DELIVERY_TIMEOUT_MS
    line_format: LineFormat = field(default_factory=LineFormat)


@dataclass(slots=True)
class ProduceStats:
    """What was read and what the brokers acknowledged (with acks=0: what was written to a socket)."""

    records_read: int = 0
    bytes_read: int = 0
    records_sent: int = 0
    bytes_sent: int = 0
    batches_sent: int = 0
    retries: int = 0
    by_partition: dict[int, int] = field(default_factory=dict)


class PartitionSender:
    """Sends one partition's records, one batch in flight at a time, in input order."""

    def __init__(
        self, partition: int, leaders: PartitionLeaders, options: ProduceOptions, stats: ProduceStats
    ) -> None:
        self.partition = partition
        self.queue: asyncio.Queue[Record | None] = asyncio.Queue(PARTITION_QUEUE_RECORDS)
        self._leaders = leaders
        self._options = options
        self._stats = stats

    async def run(self) -> None:
        """Send until the end marker (None) has been taken from the queue."""
        queue = self.queue
        while True:
            first = await queue.get()
            if first is None:
                return
            batch = [first]
            size = record_size(first)
            finished = False
            while size < self._options.batch_size and not queue.empty():
                record = queue.get_nowait()
                if record is None:
                    finished = True
                    break
                batch.append(record)
                size += record_size(record)
            await self.send(batch, size)
            if finished:
                return

    async def send(self, records: list[Record], size: int) -> None:
        """Deliver one batch to the partition's leader, retrying retriable failures until the deadline."""
        options = self._options
        encoded = build_batch(records, compression=options.compression)
        deadline = time.monotonic() + options.delivery_timeout_ms / 1000
        leaders = self._leaders
        while True:
            generation = leaders.generation
            connection = None
            try:
                connection = await leaders.connection(self.partition)
                producer = Producer(
                    connection,
                    acks=options.acks,
                    timeout_ms=options.request_timeout_ms,
                    compression=options.compression,
                )
                await producer.send_batch(options.topic, self.partition, encoded)
                break
            except ClientError as exc:
                if not is_retriable(exc) or time.monotonic() >= deadline:
                    raise ProduceError(options.topic, self.partition, exc) from exc
                if connection is not None and not isinstance(exc, KafkaResponseError):
                    leaders.cluster.forget(connection)
                self._stats.retries += 1
                leaders.warn("retrying a produce", partition=self.partition, error=error_text(exc))
                await leaders.refresh(generation)
        leaders.succeeded()
        stats = self._stats
        stats.records_sent += len(records)
        stats.bytes_sent += size
        stats.batches_sent += 1
        stats.by_partition[self.partition] = stats.by_partition.get(self.partition, 0) + len(records)


# -- reading -------------------------------------------------------------------------------------


class ChunkReader:
    """Reads a binary stream in a daemon thread and hands chunks (then None, or an error) to the loop."""

    def __init__(self, source: BinaryIO, loop: asyncio.AbstractEventLoop, queue_size: int = CHUNK_QUEUE_SIZE):
        self.queue: asyncio.Queue[bytes | BaseException | None] = asyncio.Queue(queue_size)
        self._source = source
        self._loop = loop
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="kipling-produce-reader", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Let the thread end at its next hand-over (a read it is blocked in is not interrupted)."""
        self._stop.set()

    def _run(self) -> None:
        read = getattr(self._source, "read1", None) or self._source.read
        try:
            while not self._stop.is_set():
                chunk = read(CHUNK_SIZE)
                if not chunk:
                    break
                if not self._put(chunk):
                    return
        except Exception as exc:  # handed to the loop, which reports it
            self._put(exc)
            return
        self._put(None)

    def _put(self, item: bytes | BaseException | None) -> bool:
        if self._stop.is_set():
            return False
        put = self.queue.put(item)
        try:
            future = asyncio.run_coroutine_threadsafe(put, self._loop)
        except RuntimeError:  # the loop is closed: nobody is listening any more
            put.close()
            return False
        while not self._stop.is_set():
            try:
                future.result(timeout=0.5)
                return True
            except TimeoutError:
                continue
        future.cancel()
        return False


async def produce(
    cluster: ClusterConnections,
    source: BinaryIO,
    options: ProduceOptions,
    *,
    stats: ProduceStats | None = None,
    progress: ProgressBar | None = None,
    choose: Callable[[int], int] | None = None,
) -> ProduceStats:
    """Send every line of ``source`` as a record to ``options.topic``; returns what was sent.

    A missing topic is auto-created where the broker allows it, as Kafka's producer asks for it.
    Raises :class:`ProduceError` when a batch cannot be delivered, KafkaResponseError when the topic
    (that the broker does not auto-create) or partition does not exist, and :class:`LineFormatError`
    for a line that cannot be parsed (after sending the lines before it, as Kafka's console producer
    flushes on its way out). Pass ``stats`` to know what was acknowledged before a failure.
    ``choose`` picks sticky partitions (tests).
    """
    stats = stats if stats is not None else ProduceStats()
    leaders = PartitionLeaders(cluster, options.topic)
    topic = await leaders.load(auto_create=True)  # as Kafka's producer: a missing topic may be created
    partitions = len(topic.partitions)
    if options.partition is not None and not 0 <= options.partition < partitions:
        raise KafkaResponseError(
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
            f"Partition {options.partition} of topic {options.topic} with partition count {partitions} "
            "is not present in metadata",
        )
    partitioner = Partitioner(
        partitions, partition=options.partition, batch_size=options.batch_size, choose=choose
    )
    reader = ChunkReader(source, asyncio.get_running_loop())
    senders: dict[int, PartitionSender] = {}
    bad_line: LineFormatError | None = None

    def report() -> None:
        if progress is not None:
            progress.update(records=stats.records_sent, nbytes=stats.bytes_sent, completed=stats.bytes_read)

    try:
        async with asyncio.TaskGroup() as tasks:
            reader.start()
            line_format = options.line_format
            splitter = LineSplitter()
            while bad_line is None:
                item = await reader.queue.get()
                if isinstance(item, BaseException):
                    raise item
                lines = splitter.feed(item) if item is not None else splitter.finish()
                now_ms = int(time.time() * 1000)
                for line in lines:
                    try:
                        record = line_format.parse(line, stats.records_read + 1, now_ms)
                    except LineFormatError as exc:
                        bad_line = exc
                        break
                    stats.records_read += 1
                    size = record_size(record)
                    partition = partitioner.partition(record, size)
                    sender = senders.get(partition)
                    if sender is None:
                        sender = senders[partition] = PartitionSender(partition, leaders, options, stats)
                        tasks.create_task(sender.run())
                    await sender.queue.put(record)
                if item is None:
                    break
                stats.bytes_read += len(item)
                report()
            reader.stop()
            for sender in senders.values():
                await sender.queue.put(None)
    except BaseExceptionGroup as group:
        raise _first_error(group) from None
    finally:
        reader.stop()
        report()
    if bad_line is not None:
        raise bad_line
    return stats


def _first_error(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The error to report from a TaskGroup's: a ProduceError first, as the one that says most."""
    leaves = list(_leaves(group))
    for exc in leaves:
        if isinstance(exc, ProduceError):
            return exc
    return leaves[0]


def _leaves(group: BaseExceptionGroup[BaseException]) -> Iterator[BaseException]:
    for exc in group.exceptions:
        if isinstance(exc, BaseExceptionGroup):
            yield from _leaves(exc)
        else:
            yield exc


# -- the command ---------------------------------------------------------------------------------


PRODUCE_DESCRIPTION = """\
Read lines from stdin (or --file) and send each line as a record to a topic, batched per partition,
to each partition's leader, following leader changes (as kafka-console-producer.sh does). The
partition is --partition, else Kafka's murmur2 hash of the key (the partition every Kafka client
picks for that key), else a sticky partition for records without a key. A topic that does not exist
is created by a broker with auto.create.topics.enable=true (num.partitions partitions), as with
Kafka's console producer; otherwise the tool stops with an error that says so.

Prints "Produced a total of N messages" (records acknowledged) on stderr, with a progress bar when
stderr is a terminal and the input is a file. Exits with status 1 when a record cannot be sent or a
line cannot be parsed (after sending the lines before it), 130 on Ctrl-C.
"""

PRODUCE_EPILOG = """\
Line reader properties (--property, as kafka-console-producer.sh): parse.key, key.separator
(default tab), parse.headers, headers.delimiter, headers.separator, headers.key.separator,
null.marker, ignore.error.

Examples:
  seq 1000 | kipling produce --bootstrap-server 127.0.0.1:9092 --topic t
  kipling produce --bootstrap-server 127.0.0.1:9092 --topic t --property parse.key=true \\
      --property key.separator=: --header source=cli --compression zstd --file data.txt
"""


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "produce",
        help="send lines of stdin or a file as records (like kafka-console-producer.sh)",
        description=PRODUCE_DESCRIPTION,
        epilog=PRODUCE_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_bootstrap_argument(p)
    p.add_argument("--topic", required=True, help="the topic to produce to")
    p.add_argument("--partition", type=int, metavar="P", help="send every record to this partition")
    p.add_argument(
        "--property",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a line reader property (repeatable), e.g. parse.key=true",
    )
    p.add_argument(
        "--header",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a header added to every record (repeatable); KEY alone gives a null value",
    )
    p.add_argument(
        "--acks",
        "--request-required-acks",
        dest="acks",
        type=int,
        choices=(-1, 0, 1),
        default=-1,
        help="acknowledgements the leader waits for: -1 all in-sync replicas, 1 leader, 0 none (default -1)",
    )
    p.add_argument(
        "--compression",
        "--compression-codec",
        dest="compression",
        choices=[c.name.lower() for c in CompressionType],
        default="none",
        help="compression of the record batches (default none)",
    )
    p.add_argument(
        "--batch-size",
        type=positive_int,
        default=DEFAULT_BATCH_SIZE,
        metavar="BYTES",
        help=f"largest batch per partition and request (default {DEFAULT_BATCH_SIZE})",
    )
    p.add_argument(
        "--request-timeout-ms",
        type=positive_int,
        default=DEFAULT_REQUEST_TIMEOUT_MS,
        metavar="MS",
        help=f"how long the broker may take per produce request (default {DEFAULT_REQUEST_TIMEOUT_MS})",
    )
    p.add_argument(
        "--delivery-timeout-ms",
        type=positive_int,
        default=DEFAULT_DELIVERY_TIMEOUT_MS,
        metavar="MS",
        help=f"how long a batch may be retried before the tool fails (default {DEFAULT_DELIVERY_TIMEOUT_MS})",
    )
    p.add_argument("--file", type=Path, metavar="PATH", help="read lines from PATH instead of stdin")
    p.set_defaults(func=run, produce_parser=p)


def parse_headers(items: Sequence[str]) -> list[tuple[str, bytes | None]]:
    """``--header k=v`` items; ``k`` alone is a header with a null value (as kcat's ``-H k``)."""
    out: list[tuple[str, bytes | None]] = []
    for item in items:
        key, sep, value = item.partition("=")
        if not key:
            raise ValueError(f"invalid header {item!r}: expected KEY=VALUE")
        out.append((key, value.encode() if sep else None))
    return out


def input_size(source: BinaryIO) -> int | None:
    """The size of ``source`` if it is a regular file (for the progress bar), else None."""
    try:
        info = os.fstat(source.fileno())
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
        return None
    return info.st_size if stat.S_ISREG(info.st_mode) else None


async def produce_command(args: argparse.Namespace, source: BinaryIO, err: TextIO) -> int:
    """Run ``kipling produce`` with parsed arguments; the exit status."""
    try:
        line_format = LineFormat.from_properties(parse_properties(args.property), parse_headers(args.header))
    except ValueError as exc:
        err.write(f"ERROR {exc}\n")
        return 2
    options = ProduceOptions(
        topic=args.topic,
        partition=args.partition,
        acks=args.acks,
        compression=CompressionType.from_name(args.compression),
        batch_size=args.batch_size,
        request_timeout_ms=args.request_timeout_ms,
        delivery_timeout_ms=args.delivery_timeout_ms,
        line_format=line_format,
    )
    size = input_size(source)
    progress = ProgressBar(err, total=size, enabled=None if size is not None else False)
    cluster = ClusterConnections(
        args.bootstrap_server,
        client_id="kipling-console-producer",
        request_timeout_s=args.request_timeout_ms / 1000 + 5,
        security=command_security(args),
    )
    stats = ProduceStats()
    failure: str | None = None
    try:
        await produce(cluster, source, options, stats=stats, progress=progress)
    except (ProduceError, LineFormatError) as exc:
        failure = str(exc)
    except ClientError as exc:
        failure = error_text(exc)
    except OSError as exc:
        failure = f"cannot read the input: {exc}"
    finally:
        # also on Ctrl-C (the task is cancelled): the count is what the user wants to see then
        progress.close()
        await cluster.close()
        if failure is not None:
            err.write(f"ERROR {failure}\n")
        err.write(f"Produced a total of {stats.records_sent} messages\n")
        err.flush()
    return 1 if failure is not None else 0


def run(args: argparse.Namespace) -> int:
    configure_tool_logging()
    with contextlib.ExitStack() as stack:
        if args.file is not None:
            try:
                source: BinaryIO = stack.enter_context(args.file.open("rb"))
            except OSError as exc:
                args.produce_parser.error(f"cannot open {args.file}: {exc.strerror}")
        else:
            source = sys.stdin.buffer
        try:
            return run_async(produce_command(args, source, sys.stderr))
        except KeyboardInterrupt:
            return 130
    return 0  # pragma: no cover - unreachable; ExitStack does not swallow


__all__ = [
    "LineFormat",
    "LineFormatError",
    "LineSplitter",
    "Partitioner",
    "ProduceError",
    "ProduceOptions",
    "ProduceStats",
    "produce",
    "produce_command",
    "register",
    "run",
]
