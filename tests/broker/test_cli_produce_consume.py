"""`kipling produce` and `kipling consume` against real broker processes.

Most tests call ``tools.cli.main`` in-process (stdin swapped for the lines to send, stdout and stderr
captured); one runs the installed ``kipling`` script for exit codes and Ctrl-C, and one runs a
3-broker cluster for leaders, replicas and ISR, replication factor 3 and a leader change.
"""

from __future__ import annotations

import asyncio
import io
import os
import random
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka.partitioner.default import DefaultPartitioner
from kafka.partitioner.default import murmur2 as kafka_murmur2

from client.consumer import Consumer
from client.fetch_session import TopicPartition
from client.partitioner import StickyPartitioner, murmur2, partition_for_key
from protocol.records import CompressionType, iter_batches
from tests.integration.broker_process import BrokerProcess
from tests.integration.cluster import Cluster, wait_until
from tests.integration.dev_cluster_process import kipling_command
from tools.cli import build_parser, main
from tools.commands.consume import (
    ConsumeOptions,
    ConsumeStats,
    MessageFormat,
    StartOffset,
    consume,
    consume_command,
)
from tools.commands.produce import (
    LineFormat,
    LineFormatError,
    LineSplitter,
    ProduceOptions,
    ProduceStats,
    produce,
)
from tools.commands.progress import ProgressBar
from tools.commands.topics import ClusterConnections, bootstrap_servers

RECORD_LINE = re.compile(r"CreateTime:(\d+)\tPartition:(\d+)\tOffset:(\d+)\t(.*)\t(.*)\t(.*)")
ALL_PROPERTIES = [
    f"--property=print.{name}=true" for name in ("timestamp", "partition", "offset", "headers", "key")
]


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    process = BrokerProcess(tmp_path_factory.mktemp("cli-broker")).start()
    yield process
    process.stop()


class Cli:
    """`kipling` in-process against one bootstrap string, with stdin, stdout and stderr in hand."""

    def __init__(self, bootstrap: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch):
        self.bootstrap = bootstrap
        self._capsys = capsys
        self._monkeypatch = monkeypatch

    def run(self, *args: str, stdin: bytes = b"") -> tuple[int, str, str]:
        self._capsys.readouterr()
        self._monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin)))
        code = main([args[0], "--bootstrap-server", self.bootstrap, *args[1:]])
        captured = self._capsys.readouterr()
        return code, captured.out, captured.err

    def create(self, topic: str, partitions: int = 1, *extra: str) -> None:
        code, _, err = self.run(
            "topics", "--create", "--topic", topic, "--partitions", str(partitions), *extra
        )
        assert code == 0, err

    def produce(self, topic: str, lines: list[str], *args: str) -> str:
        code, _, err = self.run(
            "produce", "--topic", topic, *args, stdin="".join(f"{line}\n" for line in lines).encode()
        )
        assert code == 0, err
        assert err.endswith(f"Produced a total of {len(lines)} messages\n"), err
        return err

    def consume(self, topic: str, *args: str) -> tuple[list[str], str]:
        code, out, err = self.run("consume", "--topic", topic, *args)
        assert code == 0, err
        return out.splitlines(), err


@pytest.fixture
def cli(broker: BrokerProcess, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Cli:
    return Cli(broker.bootstrap, capsys, monkeypatch)


class _Cluster:
    """What kafka-python's DefaultPartitioner asks of its cluster metadata."""

    def __init__(self, topic: str, partitions: int) -> None:
        self._topic = topic
        self._partitions = set(range(partitions))

    def topics(self) -> set[str]:
        return {self._topic}

    def partitions_for_topic(self, topic: str) -> set[int]:
        return self._partitions

    def available_partitions_for_topic(self, topic: str) -> set[int]:
        return self._partitions


def _kafka_python_partition(topic: str, key: bytes, partitions: int) -> int:
    return DefaultPartitioner().partition(topic, key, key, None, None, _Cluster(topic, partitions))


# -- produce, then consume -------------------------------------------------------------------------


def test_keys_and_headers_round_trip_with_every_print_property(cli: Cli) -> None:
    cli.create("kv", 4)
    lines = [f"key-{i}:value {i}" for i in range(40)] + ["key-x:with:colons"]
    before = int(time.time() * 1000)
    cli.produce(
        "kv", lines, "--property", "parse.key=true", "--property", "key.separator=:",
        "--header", "h1=one", "--header", "h2=two",
    )  # fmt: skip
    out, err = cli.consume("kv", "--from-beginning", "--max-messages", str(len(lines)), *ALL_PROPERTIES)
    assert err.endswith(f"Processed a total of {len(lines)} messages\n")
    seen = {}
    offsets: dict[int, list[int]] = {}
    for line in out:
        match = RECORD_LINE.fullmatch(line)
        assert match, line
        timestamp, partition, offset, headers, key, value = match.groups()
        assert before <= int(timestamp) <= time.time() * 1000
        assert headers == "h1:one,h2:two"
        seen[key] = (int(partition), value)
        offsets.setdefault(int(partition), []).append(int(offset))
    assert seen["key-x"] == (_kafka_python_partition("kv", b"key-x", 4), "with:colons")
    for i in range(40):
        key = f"key-{i}"
        assert seen[key] == (_kafka_python_partition("kv", key.encode(), 4), f"value {i}")
    assert len(offsets) > 1  # the keys spread over the partitions
    for partition_offsets in offsets.values():
        assert partition_offsets == list(range(len(partition_offsets)))


def test_keys_land_where_kafka_python_puts_them(cli: Cli) -> None:
    cli.create("spread", 7)
    rng = random.Random(7)
    keys = [bytes(rng.randrange(256) for _ in range(rng.randrange(1, 24))).hex() for _ in range(300)]
    cli.produce("spread", [f"{k}\t{i}" for i, k in enumerate(keys)], "--property", "parse.key=true")
    out, _ = cli.consume(
        "spread", "--from-beginning", "--max-messages", "300",
        "--property", "print.partition=true", "--property", "print.key=true",
    )  # fmt: skip
    assert len(out) == 300
    for line in out:
        partition, key, _ = line.split("\t")
        assert int(partition.removeprefix("Partition:")) == _kafka_python_partition("spread", key.encode(), 7)


def test_null_keys_values_and_headers_print_as_kafka_does(cli: Cli) -> None:
    cli.create("nulls")
    cli.produce(
        "nulls", ["plain", "k|NULL", "NULL|v"],
        "--property", "parse.key=true", "--property", "key.separator=|", "--property", "null.marker=NULL",
        "--property", "ignore.error=true",
    )  # fmt: skip
    out, _ = cli.consume(
        "nulls", "--offset", "earliest", "--max-messages", "3",
        "--property", "print.key=true", "--property", "print.headers=true", "--property", "key.separator= | ",
    )  # fmt: skip
    assert out == ["NO_HEADERS | null | plain", "NO_HEADERS | k | null", "NO_HEADERS | null | v"]


def test_latest_by_default_earliest_from_beginning(cli: Cli) -> None:
    cli.create("positions")
    cli.produce("positions", ["old-1", "old-2"])
    started = time.monotonic()
    out, err = cli.consume("positions", "--timeout-ms", "600")
    assert out == [] and err.endswith("Processed a total of 0 messages\n")
    assert 0.5 < time.monotonic() - started < 5
    out, _ = cli.consume("positions", "--from-beginning", "--timeout-ms", "600")
    assert out == ["old-1", "old-2"]


async def test_latest_sees_only_records_produced_after_it_started(broker: BrokerProcess) -> None:
    servers = bootstrap_servers(broker.bootstrap)
    cluster = ClusterConnections(servers, client_id="test")
    setup = ClusterConnections(servers, client_id="test-producer")
    try:
        from client.admin import AdminClient

        await AdminClient(await setup.any_connection()).create_topic("live", 2)
        await produce(setup, io.BytesIO(b"before\n"), ProduceOptions("live"))
        out = io.BytesIO()
        options = ConsumeOptions("live", max_messages=3, timeout_ms=10_000)
        task = asyncio.create_task(consume(cluster, out, options))
        await asyncio.sleep(0.5)  # the consumer has resolved "latest" and is polling
        stats = await produce(setup, io.BytesIO(b"after-1\nafter-2\nafter-3\n"), ProduceOptions("live"))
        assert stats.records_sent == 3
        consumed = await asyncio.wait_for(task, 10)
        assert consumed.messages == 3
        assert sorted(out.getvalue().splitlines()) == [b"after-1", b"after-2", b"after-3"]
    finally:
        await cluster.close()
        await setup.close()


def test_max_messages_and_timeout(cli: Cli) -> None:
    cli.create("limits", 1)
    cli.produce("limits", [str(i) for i in range(10)])
    out, err = cli.consume("limits", "--from-beginning", "--max-messages", "4")
    assert out == ["0", "1", "2", "3"] and err.endswith("Processed a total of 4 messages\n")
    started = time.monotonic()
    out, err = cli.consume("limits", "--from-beginning", "--timeout-ms", "500")
    assert len(out) == 10 and err.endswith("Processed a total of 10 messages\n")
    assert time.monotonic() - started < 5


def test_explicit_partition_and_offset(cli: Cli) -> None:
    cli.create("pinned", 3)
    cli.produce(
        "pinned", [f"k{i}\tv{i}" for i in range(6)], "--partition", "2", "--property", "parse.key=true"
    )
    out, _ = cli.consume(
        "pinned", "--partition", "2", "--offset", "3", "--max-messages", "3",
        "--property", "print.offset=true", "--property", "print.partition=true",
    )  # fmt: skip
    assert out == ["Partition:2\tOffset:3\tv3", "Partition:2\tOffset:4\tv4", "Partition:2\tOffset:5\tv5"]
    for partition in ("0", "1"):
        out, _ = cli.consume("pinned", "--partition", partition, "--from-beginning", "--timeout-ms", "300")
        assert out == []
    code, _, err = cli.run("produce", "--topic", "pinned", "--partition", "3", stdin=b"x\n")
    assert code == 1 and "Partition 3 of topic pinned with partition count 3 is not present" in err
    code, _, err = cli.run("consume", "--topic", "pinned", "--offset", "1")
    assert code == 2 and "The partition is required when offset is specified." in err


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
async def test_compressed_batches_round_trip(codec: str, broker: BrokerProcess) -> None:
    servers = bootstrap_servers(broker.bootstrap)
    cluster = ClusterConnections(servers, client_id="test")
    topic = f"compressed-{codec}"
    try:
        from client.admin import AdminClient

        await AdminClient(await cluster.any_connection()).create_topic(topic)
        lines = [f"{codec} record {i} " + "x" * (i % 50) for i in range(200)]
        data = "".join(f"{line}\n" for line in lines).encode()
        options = ProduceOptions(topic, compression=CompressionType.from_name(codec))
        assert (await produce(cluster, io.BytesIO(data), options)).records_sent == 200
        # the batches on the broker carry the codec
        consumer = Consumer(await cluster.any_connection())
        consumer.assign(TopicPartition(topic, 0), 0)
        result = await consumer.fetch()
        raw = result.partitions[TopicPartition(topic, 0)].raw_records
        assert raw and {h.compression for _, h in iter_batches(raw)} == {
            int(CompressionType.from_name(codec))
        }
        out = io.BytesIO()
        await consume(cluster, out, ConsumeOptions(topic, start=StartOffset(timestamp=-2), max_messages=200))
        assert out.getvalue().decode().splitlines() == lines
    finally:
        await cluster.close()


def test_produce_from_a_file_with_the_cli_compression_flag(cli: Cli, tmp_path: Path) -> None:
    cli.create("from-file")
    path = tmp_path / "lines.txt"
    path.write_bytes(b"".join(b"line %d\r\n" % i for i in range(1000)) + b"last without newline")
    code, _, err = cli.run("produce", "--topic", "from-file", "--file", str(path), "--compression", "zstd")
    assert code == 0 and err.endswith("Produced a total of 1001 messages\n")
    out, _ = cli.consume("from-file", "--from-beginning", "--max-messages", "1001")
    assert out[0] == "line 0" and out[999] == "line 999" and out[1000] == "last without newline"


def test_produce_errors(cli: Cli) -> None:
    cli.create("strict")
    code, _, err = cli.run(
        "produce", "--topic", "strict", "--property", "parse.key=true", stdin=b"k\tv\nnokey\n"
    )
    assert code == 1
    assert "ERROR No key separator found on line number 2: 'nokey'" in err
    assert err.endswith("Produced a total of 1 messages\n")  # the line before the bad one was sent
    code, _, err = cli.run("produce", "--topic", "strict", stdin=b"small\n" + b"x" * 1_100_000 + b"\n")
    assert code == 1
    assert "ERROR Error when sending message to topic strict partition 0: MESSAGE_TOO_LARGE: " in err
    code, _, err = cli.run("produce", "--topic", "strict", "--property", "parse.keys=true", stdin=b"x\n")
    assert code == 2 and "unknown reader properties: parse.keys" in err
    # a topic that does not exist is auto-created (or refused): test_cli_auto_create.py


def test_progress_bars_draw_on_a_terminal_only(broker: BrokerProcess, tmp_path: Path) -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    async def scenario() -> tuple[str, str]:
        cluster = ClusterConnections(bootstrap_servers(broker.bootstrap), client_id="test")
        try:
            from client.admin import AdminClient

            await AdminClient(await cluster.any_connection()).create_topic("progress")
        finally:
            await cluster.close()
        path = tmp_path / "data.txt"
        path.write_bytes(b"".join(b"%d\n" % i for i in range(5000)))
        produce_err = Terminal()
        args = build_parser().parse_args(
            ["produce", "--bootstrap-server", broker.bootstrap, "--topic", "progress"]
        )
        with path.open("rb") as source:
            from tools.commands.produce import produce_command

            assert await produce_command(args, source, produce_err) == 0
        consume_err = Terminal()
        args = build_parser().parse_args(
            ["consume", "--bootstrap-server", broker.bootstrap, "--topic", "progress", "--from-beginning",
             "--max-messages", "5000"]
        )  # fmt: skip
        out = io.BytesIO()
        assert await consume_command(args, out, consume_err, stdout_is_tty=False) == 0
        assert len(out.getvalue().splitlines()) == 5000
        return produce_err.getvalue(), consume_err.getvalue()

    produced, consumed = asyncio.run(scenario())
    assert "\r[" in produced and "100.0%" in produced and "5,000 records" in produced and "MB/s" in produced
    assert produced.endswith("\nProduced a total of 5000 messages\n")
    assert "\r[" in consumed and "100.0%" in consumed and "records/s" in consumed
    assert consumed.endswith("\nProcessed a total of 5000 messages\n")


# -- the kipling script ----------------------------------------------------------------------------


def test_script_exit_codes_and_ctrl_c(broker: BrokerProcess) -> None:
    kipling = kipling_command()
    bootstrap = ["--bootstrap-server", broker.bootstrap]

    def run(*args: str, stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
        return subprocess.run([*kipling, *args], input=stdin, capture_output=True, timeout=60)

    assert run("topics", *bootstrap, "--create", "--topic", "script").returncode == 0
    done = run("produce", *bootstrap, "--topic", "script", stdin=b"a\nb\nc\n")
    assert done.returncode == 0 and done.stderr.endswith(b"Produced a total of 3 messages\n")
    assert run("topics", *bootstrap, "--describe", "--topic", "nothing").returncode == 1
    assert run("produce", *bootstrap, "--topic", "script", "--partition", "7", stdin=b"x\n").returncode == 1

    consumer = subprocess.Popen(
        [*kipling, "consume", *bootstrap, "--topic", "script", "--from-beginning"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert consumer.stdout is not None
        lines = [consumer.stdout.readline() for _ in range(3)]
        assert lines == [b"a\n", b"b\n", b"c\n"]
        consumer.send_signal(signal.SIGINT)
        _, err = consumer.communicate(timeout=30)
    finally:
        if consumer.poll() is None:
            consumer.kill()
            consumer.wait()
    assert consumer.returncode == 130
    assert err.endswith(b"Processed a total of 3 messages\n"), err
    assert b"Traceback" not in err


# -- a 3-broker cluster ----------------------------------------------------------------------------


def test_cluster_describe_replicated_produce_consume_and_leader_change(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster = Cluster(tmp_path).start()
    try:
        cli = Cli(cluster.bootstrap, capsys, monkeypatch)
        cli.create("replicated", 3, "--replication-factor", "3")

        def describe() -> list[list[str]]:
            code, out, err = cli.run("topics", "--describe", "--topic", "replicated")
            assert code == 0, err
            return [line.strip().split("\t") for line in out.splitlines()]

        def fully_replicated() -> bool:
            rows = describe()[1:]
            return len(rows) == 3 and all(
                sorted(row[4][len("Isr: ") :].split(",")) == ["1", "2", "3"] for row in rows
            )

        wait_until(fully_replicated, 15, "every partition's ISR to hold 3 brokers")
        head, *rows = describe()
        assert head[2:4] == ["PartitionCount: 3", "ReplicationFactor: 3"]
        leaders = {}
        for partition, row in enumerate(rows):
            assert row[:2] == ["Topic: replicated", f"Partition: {partition}"]
            replicas = row[3].removeprefix("Replicas: ").split(",")
            assert sorted(replicas) == ["1", "2", "3"]
            leaders[partition] = int(row[2].removeprefix("Leader: "))
            assert str(leaders[partition]) in replicas

        # the leader of some partition (not the controller's broker) goes away while a producer and a
        # consumer are running with its leadership in their metadata: both must follow the move
        victim = next((node for node in leaders.values() if node != 1), 2)
        stats, consumed = asyncio.run(_produce_and_consume_across_a_leader_loss(cluster, victim))
        assert stats.records_sent == 120 and stats.retries >= 1
        assert consumed.messages == 120 and consumed.moves >= 1
        rows = describe()[1:]
        assert all(row[2] != f"Leader: {victim}" for row in rows)
    finally:
        cluster.stop()


async def _produce_and_consume_across_a_leader_loss(
    cluster: Cluster, victim: int
) -> tuple[ProduceStats, ConsumeStats]:
    """Produce 60 keyed records, stop broker ``victim``, produce 60 more, through one producer run
    (its input is a pipe) while one consumer run reads them all; checks order and partitions."""
    servers = bootstrap_servers(cluster.bootstrap)
    producing = ClusterConnections(servers, client_id="test-producer")
    consuming = ClusterConnections(servers, client_id="test-consumer")
    read_end, write_end = os.pipe()
    stats = ProduceStats()
    out = io.BytesIO()
    try:
        with open(read_end, "rb") as source:
            options = ProduceOptions("replicated", acks=-1, line_format=LineFormat(parse_key=True))
            producer = asyncio.create_task(produce(producing, source, options, stats=stats))
            consume_options = ConsumeOptions(
                "replicated",
                start=StartOffset(timestamp=-2),
                max_messages=120,
                timeout_ms=20_000,
                message_format=MessageFormat(print_partition=True, print_key=True),
            )
            consumer = asyncio.create_task(consume(consuming, out, consume_options))
            os.write(write_end, "".join(f"k{i}\tfirst-{i}\n" for i in range(60)).encode())
            deadline = time.monotonic() + 15
            while stats.records_sent < 60 or len(out.getvalue().splitlines()) < 60:
                assert time.monotonic() < deadline, "the first 60 records were not produced and consumed"
                await asyncio.sleep(0.05)
            await asyncio.to_thread(cluster.brokers[victim].stop)
            os.write(write_end, "".join(f"k{i}\tsecond-{i}\n" for i in range(60)).encode())
            os.close(write_end)
            write_end = -1
            await asyncio.wait_for(producer, 30)
            consumed = await asyncio.wait_for(consumer, 30)
    finally:
        if write_end >= 0:
            os.close(write_end)
        await producing.close()
        await consuming.close()
    by_key: dict[str, list[str]] = {}
    for line in out.getvalue().decode().splitlines():
        partition, key, value = line.split("\t")
        assert int(partition.removeprefix("Partition:")) == partition_for_key(key.encode(), 3)
        by_key.setdefault(key, []).append(value)
    assert by_key == {f"k{i}": [f"first-{i}", f"second-{i}"] for i in range(60)}
    return stats, consumed


# -- pieces, without a broker ----------------------------------------------------------------------


def test_murmur2_matches_kafka_python() -> None:
    rng = random.Random(1)
    for length in range(0, 40):
        data = bytes(rng.randrange(256) for _ in range(length))
        assert murmur2(data) == kafka_murmur2(data) & 0xFFFFFFFF
    # Kafka's own test vectors (Utils.murmur2, as signed ints)
    assert murmur2(b"21") == -973932308 & 0xFFFFFFFF
    assert murmur2(b"a-little-bit-long-string") == -985981536 & 0xFFFFFFFF
    for key in (b"", b"a", b"ab", b"abc", b"abcd", b"abcde"):
        assert partition_for_key(key, 6) == _kafka_python_partition("t", key, 6)


def test_sticky_partitioner_switches_after_a_batch() -> None:
    choices = iter([1, 0, 1, 0])
    sticky = StickyPartitioner(3, batch_size=100, choose=lambda n: next(choices))
    assert [sticky.partition(40) for _ in range(3)] == [1, 1, 1]  # 120 bytes >= 100 after the third
    assert sticky.partition(40) == 2  # moved by 1 + choose(2) = 1
    single = StickyPartitioner(1, batch_size=10)
    assert {single.partition(50) for _ in range(5)} == {0}


def test_line_format_as_kafkas_line_reader() -> None:
    fmt = LineFormat.from_properties(
        {"parse.key": "true", "parse.headers": "true", "key.separator": "|", "null.marker": "-"},
        [("static", b"s")],
    )
    record = fmt.parse(b"h1:a,h2:-\tk|v|w", 1, 5)
    assert (record.key, record.value, record.timestamp) == (b"k", b"v|w", 5)
    assert list(record.headers) == [("static", b"s"), ("h1", b"a"), ("h2", None)]
    nulls = fmt.parse(b"-\t-|-", 2, 0)
    assert (nulls.key, nulls.value, list(nulls.headers)) == (None, None, [("static", b"s")])
    with pytest.raises(
        LineFormatError, match="No header key separator found in pair 'oops' on line number 3"
    ):
        fmt.parse(b"oops\tk|v", 3, 0)
    with pytest.raises(LineFormatError, match="No headers delimiter found on line number 4"):
        fmt.parse(b"k|v", 4, 0)
    with pytest.raises(ValueError):
        LineFormat.from_properties({"key.separator": ""})
    splitter = LineSplitter()
    assert splitter.feed(b"a\r\nb") == [b"a"]
    assert splitter.feed(b"c\n\nd") == [b"bc", b""]
    assert splitter.finish() == [b"d"]


def test_message_format_as_kafkas_default_formatter() -> None:
    from protocol.records import Record, build_batch, iter_all_records

    batch = build_batch([Record(None, b"k", (("a", b"1"), ("b", None)), 1700000000000)])
    record = next(iter_all_records(batch))
    fmt = MessageFormat.from_properties(
        {"print.timestamp": "true", "print.headers": "true", "print.key": "true", "print.value": "false"}
    )
    assert fmt.format(record, 0) == b"CreateTime:1700000000000\ta:1,b:null\tk\n"
    fmt = MessageFormat.from_properties(
        {"print.offset": "true", "null.literal": "<none>", "line.separator": "|"}
    )
    assert fmt.format(record, 0) == b"Offset:0\t<none>|"
    with pytest.raises(ValueError, match=r"unknown formatter properties: print\.keys"):
        MessageFormat.from_properties({"print.keys": "true"})


def test_progress_bar_is_rate_limited_and_silent_off_a_terminal() -> None:
    now = [0.0]
    stream = io.StringIO()
    bar = ProgressBar(stream, total=1000, enabled=True, min_interval_s=0.25, clock=lambda: now[0])
    for i in range(1, 17):
        now[0] = i / 16
        bar.update(records=i * 1000 // 16, nbytes=i * 62_500)
    assert bar.draws == 4  # at 1/16 s, then every 0.25 s until 1 s
    bar.close()
    text = stream.getvalue()
    assert text.endswith("\n") and "100.0%" in text and "1,000 records" in text and "1.00 MB/s" in text
    quiet = io.StringIO()
    off = ProgressBar(quiet, total=10)  # a StringIO is not a terminal
    off.update(records=10, nbytes=10)
    off.close()
    assert quiet.getvalue() == "" and not off.enabled
