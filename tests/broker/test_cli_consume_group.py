"""`kipling consume --group`: the console consumer as a consumer-group member, against a real broker.

* Option parsing: ``--group``/``--consumer-property``/``--consumer.config`` under Kafka's names, and the
  errors for what cannot work (a second, different group id; ``--partition`` with a group; bad values).
* Resuming: a consumer stopped at ``--max-messages`` commits the position after the last record it
  printed, so the next consumer of the group starts exactly there (nothing skipped, nothing twice);
  ``enable.auto.commit=false`` commits nothing; ``auto.offset.reset=none`` refuses partitions without a
  committed offset.
* Sharing: two ``kipling consume --group`` processes split a 6-partition topic, and each record is
  printed by exactly one of them through the rebalances when the second joins and when it leaves.
* Interoperating: a kipling console consumer and a kafka-python consumer in one group, each taking
  its turn as the group's leader (so each decodes the other's Subscription and Assignment).
"""

from __future__ import annotations

import argparse
import asyncio
import re
import signal
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from client.fetch_session import TopicPartition
from client.group_member import Generation
from protocol.sentinels import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP
from tests.integration.broker_process import BrokerProcess
from tests.integration.group_members import (
    ConsoleMember,
    KafkaPythonMember,
    PacedProducer,
    committed_offsets,
    create_topic,
    produce,
    stop_all,
    wait_for,
)
from tools.cli import build_parser, main
from tools.commands.consume import options_from
from tools.commands.consume_group import ConsoleGroupLink, GroupOptions
from tools.commands.topics import ClusterConnections, bootstrap_servers

TIMEOUT_S = 30.0
FAST_GROUP = [
    "--consumer-property", "heartbeat.interval.ms=200",
    "--consumer-property", "session.timeout.ms=6000",
    "--consumer-property", "auto.commit.interval.ms=200",
]  # fmt: skip
PRINTED = re.compile(r"Partition:(\d+)\tOffset:(\d+)\t(.*)")


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    process = BrokerProcess(
        tmp_path_factory.mktemp("console-group-broker"),
        overrides=["group.initial.rebalance.delay.ms=0", "offsets.topic.num.partitions=3"],
    ).start()
    yield process
    process.stop()


def _args(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(["consume", "--bootstrap-server", "127.0.0.1:1", "--topic", "t", *argv])


def _consume(
    capsys: pytest.CaptureFixture[str], broker: BrokerProcess, *argv: str
) -> tuple[int, list[str], str]:
    capsys.readouterr()
    code = main(["consume", "--bootstrap-server", broker.bootstrap, *argv])
    captured = capsys.readouterr()
    return code, captured.out.splitlines(), captured.err


# -- options -------------------------------------------------------------------------------------


def test_group_options_take_kafkas_names_and_defaults() -> None:
    assert options_from(_args()).group is None
    options = options_from(_args("--group", "g")).group
    assert options is not None
    assert options.member.group_id == "g" and options.member.session_timeout_ms == 45_000
    assert options.member.assignors == ("range", "roundrobin")
    assert options.enable_auto_commit and options.auto_commit_interval_ms == 5_000
    assert options.auto_offset_reset == "latest"
    assert options_from(_args("--group", "g", "--from-beginning")).group.auto_offset_reset == "earliest"  # type: ignore[union-attr]

    given = GroupOptions.from_properties(
        None,
        {
            "group.id": "from-properties",
            "group.instance.id": "console-1",
            "partition.assignment.strategy": "org.apache.kafka.clients.consumer.RoundRobinAssignor",
            "enable.auto.commit": "false",
            "auto.offset.reset": "none",
            "max.poll.interval.ms": "60000",
            "fetch.min.bytes": "1",
        },
        from_beginning=False,
    )
    assert given.member.group_id == "from-properties"
    assert given.member.group_instance_id == "console-1"
    assert given.member.assignors == ("roundrobin",)
    assert given.member.rebalance_timeout_ms == 60_000
    assert not given.enable_auto_commit and given.auto_offset_reset == "none"
    assert given.ignored == ("fetch.min.bytes",)


def test_auto_offset_reset_decides_where_partitions_without_an_offset_start() -> None:
    earliest = options_from(_args("--group", "g", "--consumer-property", "auto.offset.reset=earliest"))
    assert earliest.start.timestamp == EARLIEST_TIMESTAMP and earliest.reset_timestamp == EARLIEST_TIMESTAMP
    latest = options_from(_args("--group", "g"))
    assert latest.start.timestamp == LATEST_TIMESTAMP and latest.reset_timestamp == LATEST_TIMESTAMP
    none = options_from(_args("--group", "g", "--consumer-property", "auto.offset.reset=none"))
    assert none.reset_none and none.group is not None and none.group.auto_offset_reset == "none"
    # without a group too: Kafka's console consumer takes the property either way
    alone = options_from(
        _args("--consumer-property", "auto.offset.reset=earliest", "--consumer-property", "x=1")
    )
    assert alone.group is None and alone.start.timestamp == EARLIEST_TIMESTAMP
    assert alone.unused_properties == ("x",)


def test_consumer_config_file_and_property_precedence(tmp_path: Path) -> None:
    config = tmp_path / "consumer.properties"
    config.write_text("group.id=file-group\nsession.timeout.ms=10000\nenable.auto.commit=false\n")
    options = options_from(
        _args("--consumer.config", str(config), "--consumer-property", "session.timeout.ms=12000")
    ).group
    assert options is not None
    assert options.member.group_id == "file-group"
    assert options.member.session_timeout_ms == 12_000
    assert not options.enable_auto_commit


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--group", "a", "--consumer-property", "group.id=b"], "given twice"),
        (["--group", "a", "--partition", "0"], "cannot be combined"),
        (["--group", "a", "--offset", "earliest"], "cannot be combined"),
        (["--group", "a", "--consumer-property", "auto.offset.reset=smallest"], "auto.offset.reset"),
        (["--group", "a", "--consumer-property", "session.timeout.ms=soon"], "session.timeout.ms"),
        (["--group", "a", "--consumer-property", "enable.auto.commit=yes"], "enable.auto.commit"),
        (["--group", "a", "--consumer-property", "partition.assignment.strategy=sticky"], "sticky"),
        (["--group", "a", "--consumer-property", "heartbeat.interval.ms=50000"], "heartbeat.interval.ms"),
        (["--consumer.config", "/nonexistent/consumer.properties"], "cannot read"),
        (["--from-beginning", "--consumer-property", "auto.offset.reset=latest"], "contradict"),
        (["--consumer-property", "auto.offset.reset=none"], "needs --group"),
    ],
)
def test_invalid_group_options_are_refused(argv: list[str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        options_from(_args(*argv))


def test_usage_errors_exit_2_with_the_reason(
    capsys: pytest.CaptureFixture[str], broker: BrokerProcess
) -> None:
    code, out, err = _consume(capsys, broker, "--topic", "t", "--group", "g", "--partition", "1")
    assert code == 2 and out == []
    assert "ERROR --group cannot be combined with --partition" in err


# -- committing and resuming -----------------------------------------------------------------------


def test_a_group_resumes_after_the_last_record_printed(
    capsys: pytest.CaptureFixture[str], broker: BrokerProcess
) -> None:
    topic, group = "resume", "resume-group"
    create_topic(broker.bootstrap, topic, 3)
    values = [f"v{i}".encode() for i in range(30)]
    ends = produce(broker.bootstrap, topic, values, 3)

    common = ["--topic", topic, "--group", group, *FAST_GROUP, "--property", "print.partition=true",
              "--property", "print.offset=true"]  # fmt: skip
    code, first, err = _consume(capsys, broker, *common, "--from-beginning", "--max-messages", "7")
    assert code == 0 and len(first) == 7, err
    assert err.endswith("Processed a total of 7 messages\n")
    # the offsets committed are the positions after the records printed, partition by partition
    printed: dict[int, int] = {}
    for line in first:
        match = PRINTED.fullmatch(line)
        assert match is not None, line
        printed[int(match[1])] = int(match[2]) + 1
    assert {p: o for p, o in committed_offsets(broker.bootstrap, group, topic).items() if o > 0} == printed

    # no --from-beginning: the committed offsets decide, and everything not printed yet comes now
    code, rest, err = _consume(capsys, broker, *common, "--timeout-ms", "1500")
    assert code == 0, err
    everything = Counter(PRINTED.fullmatch(line)[3] for line in first + rest)  # type: ignore[index]
    assert everything == Counter(v.decode() for v in values)
    assert committed_offsets(broker.bootstrap, group, topic) == ends

    # a consumer of the group that finds nothing new prints nothing, and commits nothing new
    code, again, _ = _consume(capsys, broker, *common, "--from-beginning", "--timeout-ms", "800")
    assert code == 0 and again == []


def test_without_auto_commit_nothing_is_committed(
    capsys: pytest.CaptureFixture[str], broker: BrokerProcess
) -> None:
    topic, group = "no-commit", "no-commit-group"
    create_topic(broker.bootstrap, topic, 2)
    produce(broker.bootstrap, topic, [b"a", b"b", b"c", b"d"], 2)
    argv = ["--topic", topic, "--group", group, *FAST_GROUP, "--from-beginning", "--timeout-ms", "1000",
            "--consumer-property", "enable.auto.commit=false"]  # fmt: skip
    for _ in range(2):  # nothing committed: both runs start at the beginning
        code, out, err = _consume(capsys, broker, *argv)
        assert code == 0 and sorted(out) == ["a", "b", "c", "d"], err
    assert committed_offsets(broker.bootstrap, group, topic) == {}


def test_offset_reset_none_refuses_a_partition_without_a_committed_offset(
    capsys: pytest.CaptureFixture[str], broker: BrokerProcess
) -> None:
    topic = "reset-none"
    create_topic(broker.bootstrap, topic, 1)
    code, out, err = _consume(
        capsys, broker, "--topic", topic, "--group", "reset-none-group", *FAST_GROUP,
        "--consumer-property", "auto.offset.reset=none", "--timeout-ms", "3000",
    )  # fmt: skip
    assert code == 1 and out == []
    assert "Undefined offset with no reset policy for partitions: reset-none-0" in err


# -- console consumers sharing a topic -----------------------------------------------------------


def _values(prefix: str, count: int) -> list[bytes]:
    return [f"{prefix}{i}".encode() for i in range(count)]


def _printed_values(*members: ConsoleMember) -> Counter[str]:
    return Counter(value for member in members for _, _, value in member.printed())


def test_two_console_consumers_share_a_topic_each_record_printed_once(broker: BrokerProcess) -> None:
    topic, group, partitions = "shared", "shared-group", 6
    create_topic(broker.bootstrap, topic, partitions)
    produce(broker.bootstrap, topic, _values("a", 60), partitions)
    first = ConsoleMember(broker.bootstrap, topic, group, *FAST_GROUP)
    second: ConsoleMember | None = None
    try:
        wait_for(lambda: len(first.printed()) == 60, TIMEOUT_S, "the first consumer to print everything")
        assert {p for p, _, _ in first.printed()} == set(range(partitions))

        second = ConsoleMember(broker.bootstrap, topic, group, *FAST_GROUP)
        wait_for(lambda: _members(broker, group) == 2, TIMEOUT_S, "the second consumer to join")
        marks = (len(first.printed()), len(second.printed()))
        produce(broker.bootstrap, topic, _values("b", 60), partitions)
        members = (first, second)
        wait_for(lambda: sum(_printed_values(*members).values()) == 120, TIMEOUT_S, "the b records")
        shares = (first.partitions_since(marks[0]), second.partitions_since(marks[1]))
        assert len(shares[0]) == 3 and len(shares[1]) == 3 and not shares[0] & shares[1]

        assert second.interrupt() == 130  # commits what it printed, leaves: the first takes over
        assert second.stderr.endswith(f"Processed a total of {len(second.printed())} messages\n".encode())
        mark = len(first.printed())
        produce(broker.bootstrap, topic, _values("c", 60), partitions)
        wait_for(lambda: sum(_printed_values(*members).values()) == 180, TIMEOUT_S, "the c records")
        assert first.partitions_since(mark) == set(range(partitions))
    finally:
        for member in (first, second):
            if member is not None:
                member.interrupt()
    printed = _printed_values(first, *(m for m in (second,) if m is not None))
    expected = Counter(v.decode() for prefix in "abc" for v in _values(prefix, 60))
    assert printed == expected  # each record exactly once across the two consumers
    assert sum(committed_offsets(broker.bootstrap, group, topic).values()) == 180


def _members(broker: BrokerProcess, group: str) -> int:
    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10_000)
    try:
        described = admin.describe_groups([group])[group]
    finally:
        admin.close()
    if described["group_state"] != "Stable":
        return -1
    return len(described["members"])


def test_a_console_consumer_and_kafka_python_share_a_group_each_leading_in_turn(
    broker: BrokerProcess,
) -> None:
    topic, group, partitions = "mixed", "mixed-group", 6
    create_topic(broker.bootstrap, topic, partitions)
    produce(broker.bootstrap, topic, _values("a", 30), partitions)
    # the group's first member, so its leader
    console = ConsoleMember(broker.bootstrap, topic, group, *FAST_GROUP)
    python = KafkaPythonMember("python", broker.bootstrap, topic, group, auto_commit=True).start()
    later: ConsoleMember | None = None
    try:
        wait_for(lambda: _members(broker, group) == 2 and len(python.assigned) == 3, TIMEOUT_S,
                 "kafka-python to take the share kipling's leader gave it", [python])  # fmt: skip
        produce(broker.bootstrap, topic, _values("b", 30), partitions)
        wait_for(
            lambda: sum(_printed_values(console).values()) + len(python.values()) == 60,
            TIMEOUT_S, "the a and b records", [python],
        )  # fmt: skip

        assert console.interrupt() == 130  # kafka-python is alone, and the leader from now on
        wait_for(lambda: len(python.assigned) == partitions, TIMEOUT_S, "kafka-python to own all", [python])
        # joins a group that kafka-python leads
        later = ConsoleMember(broker.bootstrap, topic, group, *FAST_GROUP)
        wait_for(lambda: _members(broker, group) == 2 and len(python.assigned) == 3, TIMEOUT_S,
                 "kipling to take the share kafka-python's leader gave it", [python])  # fmt: skip
        mark = len(later.printed())
        produce(broker.bootstrap, topic, _values("c", 30), partitions)
        wait_for(
            lambda: sum(_printed_values(console, later).values()) + len(python.values()) == 90,
            TIMEOUT_S, "the c records", [python],
        )  # fmt: skip
        assert later.partitions_since(mark) == set(range(partitions)) - set(python.assigned)
    finally:
        for member in (console, later):
            if member is not None:
                member.interrupt()
        stop_all([python])
    seen = _printed_values(console, *(m for m in (later,) if m is not None))
    seen.update(v.decode() for v in python.values())
    assert seen == Counter(v.decode() for prefix in "abc" for v in _values(prefix, 30))


def test_the_console_leader_takes_partitions_added_to_its_topic(broker: BrokerProcess) -> None:
    """The group's leader rechecks the topic every metadata.max.age.ms: partitions added to it are
    assigned (after a rebalance) and consumed without waiting for a member to come or go."""
    from kafka import KafkaAdminClient
    from kafka.admin import NewPartitions

    topic, group = "growing", "growing-group"
    create_topic(broker.bootstrap, topic, 2)
    produce(broker.bootstrap, topic, _values("a", 4), 2)
    console = ConsoleMember(
        broker.bootstrap, topic, group, *FAST_GROUP, "--consumer-property", "metadata.max.age.ms=300"
    )
    try:
        wait_for(lambda: len(console.printed()) == 4, TIMEOUT_S, "the first records")
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=15_000)
        try:
            admin.create_partitions({topic: NewPartitions(4)})
        finally:
            admin.close()
        produce(broker.bootstrap, topic, _values("b", 8), 4)  # two on each partition, 2 and 3 too
        wait_for(lambda: len(console.printed()) == 12, TIMEOUT_S, "the records of the new partitions")
    finally:
        assert console.interrupt() == 130, console.stderr
    assert {p for p, _, _ in console.printed()} == {0, 1, 2, 3}
    assert _printed_values(console) == Counter(v.decode() for v in _values("a", 4) + _values("b", 8))


async def test_stopping_with_an_unreachable_coordinator_takes_bounded_time() -> None:
    """The final commit gets one request timeout, then the member closes anyway (Ctrl-C never hangs)."""
    options = GroupOptions.from_properties("g", {"request.timeout.ms": "200"}, from_beginning=False)
    link = ConsoleGroupLink(ClusterConnections(bootstrap_servers("127.0.0.1:1"), client_id="t"), "t", options)
    link.member.generation = Generation(generation_id=3, member_id="m-1")
    link._assigned_generation = 3
    committing: list[dict[TopicPartition, int]] = []
    closed: list[bool] = []

    async def commit_forever(offsets: dict[TopicPartition, int], metadata: str = "") -> None:
        committing.append(dict(offsets))
        await asyncio.Event().wait()  # a coordinator that never answers

    async def close(reason: str = "") -> None:
        closed.append(True)

    link.member.commit = commit_forever  # type: ignore[method-assign]
    link.member.close = close  # type: ignore[method-assign]
    started = time.monotonic()
    await link.stop(SimpleNamespace(positions={TopicPartition("t", 0): 5}))  # type: ignore[arg-type]
    assert time.monotonic() - started < 2
    assert committing == [{TopicPartition("t", 0): 5}] and closed == [True]


# -- Ctrl-C while records flow ---------------------------------------------------------------------

STOP_BOUND_S = 60.0
"""A bound on exiting after SIGINT (it takes well under a second): a consumer that ignored the
signal, as one did when the interrupt met a fetch result completing (asyncio.wait_for on Python
3.11), would otherwise keep the test waiting forever."""


@pytest.mark.parametrize("with_group", [False, True], ids=["plain", "group"])
def test_ctrl_c_stops_a_console_consumer_while_records_flow(broker: BrokerProcess, with_group: bool) -> None:
    """Records arrive all the time, so the interrupt lands while fetch results are completing; each
    of several consumers in turn must stop at once with Kafka's exit status and its count."""
    from tests.integration.dev_cluster_process import kipling_command

    topic = f"flowing-{with_group}"
    create_topic(broker.bootstrap, topic, 3)
    producer = PacedProducer(broker.bootstrap, topic, 3, "v", rate=400).start()
    try:
        producer.wait_for_more(50, "before the consumers start", timeout_s=TIMEOUT_S)
        for round_ in range(4):
            group = ["--group", f"flowing-{round_}", *FAST_GROUP] if with_group else []
            consumer = subprocess.Popen(
                [*kipling_command(), "consume", "--bootstrap-server", broker.bootstrap, "--topic", topic,
                 "--from-beginning", *group],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            )  # fmt: skip
            try:
                assert consumer.stdout is not None
                for _ in range(50 + 20 * round_):  # records printed: it is in the middle of the stream
                    assert consumer.stdout.readline(), "the consumer stopped printing"
                consumer.send_signal(signal.SIGINT)
                _, err = consumer.communicate(timeout=STOP_BOUND_S)
            finally:
                if consumer.poll() is None:
                    consumer.kill()
                    consumer.wait()
            assert consumer.returncode == 130, err
            assert re.search(rb"Processed a total of \d+ messages\n$", err), err
            assert b"Traceback" not in err
    finally:
        producer.stop(check=False)
