"""`kipling topics` against a real broker process, driven in-process through `tools.cli.main`.

Output is checked against kafka-topics.sh's formats (tab-separated describe lines, ``Created topic
T.``), errors against Kafka's error names on stderr with exit status 1.
"""

from __future__ import annotations

import io
import re
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from client.admin import ClusterMetadata, PartitionInfo, TopicDescription
from protocol.error_codes import ErrorCode
from tests.integration.broker_process import BrokerProcess
from tools.cli import main
from tools.commands.topics import (
    DescribeFilter,
    TopicCommandError,
    bootstrap_servers,
    describe_topics,
    kafka_uuid,
    list_topics,
    parse_replica_assignment,
)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    process = BrokerProcess(tmp_path_factory.mktemp("topics-broker")).start()
    yield process
    process.stop()


def topics(capsys: pytest.CaptureFixture[str], broker: BrokerProcess, *args: str) -> tuple[int, str, str]:
    code = main(["topics", "--bootstrap-server", broker.bootstrap, *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_create_list_describe_delete(capsys: pytest.CaptureFixture[str], broker: BrokerProcess) -> None:
    code, out, _ = topics(
        capsys,
        broker,
        "--create",
        "--topic",
        "orders",
        "--partitions",
        "3",
        "--replication-factor",
        "1",
        "--config",
        "retention.ms=3600000",
        "--config",
        "cleanup.policy=compact",
    )
    assert (code, out) == (0, "Created topic orders.\n")

    code, out, _ = topics(capsys, broker, "--list")
    assert code == 0 and "orders" in out.splitlines()

    code, out, _ = topics(capsys, broker, "--describe", "--topic", "orders")
    assert code == 0
    head, *partitions = out.splitlines()
    match = re.fullmatch(
        r"Topic: orders\tTopicId: ([A-Za-z0-9_-]{22})\tPartitionCount: 3\tReplicationFactor: 1"
        r"\tConfigs: (.*)",
        head,
    )
    assert match, head
    configs = dict(item.split("=", 1) for item in match.group(2).split(","))
    assert configs["retention.ms"] == "3600000" and configs["cleanup.policy"] == "compact"
    assert partitions == [
        f"\tTopic: orders\tPartition: {p}\tLeader: 1\tReplicas: 1\tIsr: 1" for p in range(3)
    ]

    code, out, err = topics(capsys, broker, "--delete", "--topic", "orders")
    assert (code, out, err) == (0, "", "")
    code, out, _ = topics(capsys, broker, "--list")
    assert "orders" not in out.splitlines()


def test_create_errors_and_if_not_exists(capsys: pytest.CaptureFixture[str], broker: BrokerProcess) -> None:
    assert topics(capsys, broker, "--create", "--topic", "dup")[0] == 0
    code, out, err = topics(capsys, broker, "--create", "--topic", "dup")
    assert code == 1 and out == ""
    assert err == "Error while executing topic command : TOPIC_ALREADY_EXISTS: Topic 'dup' already exists.\n"
    assert topics(capsys, broker, "--create", "--topic", "dup", "--if-not-exists") == (0, "", "")

    code, _, err = topics(capsys, broker, "--create", "--topic", "wide", "--replication-factor", "3")
    assert code == 1
    assert err.startswith("Error while executing topic command : INVALID_REPLICATION_FACTOR: ")
    assert "only 1 broker(s) are registered" in err

    code, _, err = topics(capsys, broker, "--create", "--topic", "bad", "--config", "retention.ms=soon")
    assert code == 1 and "INVALID_CONFIG" in err

    code, _, err = topics(capsys, broker, "--create", "--topic", "bad", "--config", "novalue")
    assert code == 1 and "all configs must be in the format 'key=val'" in err


def test_unknown_topics(capsys: pytest.CaptureFixture[str], broker: BrokerProcess) -> None:
    code, out, err = topics(capsys, broker, "--describe", "--topic", "ghost")
    assert (code, out) == (1, "")
    assert err == "Error while executing topic command : Topic 'ghost' does not exist as expected\n"
    assert topics(capsys, broker, "--describe", "--topic", "ghost", "--if-exists") == (0, "", "")
    code, _, err = topics(capsys, broker, "--delete", "--topic", "ghost")
    assert code == 1 and "Topic 'ghost' does not exist as expected" in err
    assert topics(capsys, broker, "--delete", "--topic", "ghost", "--if-exists") == (0, "", "")


def test_alter_adds_partitions_and_refuses_the_rest(
    capsys: pytest.CaptureFixture[str], broker: BrokerProcess
) -> None:
    assert topics(capsys, broker, "--create", "--topic", "growing", "--partitions", "2")[0] == 0
    # kafka-topics.sh --alter prints nothing on success
    assert topics(capsys, broker, "--alter", "--topic", "growing", "--partitions", "5") == (0, "", "")
    code, out, _ = topics(capsys, broker, "--describe", "--topic", "growing")
    assert code == 0 and "PartitionCount: 5\t" in out.splitlines()[0]
    assert [line.split("\t")[2] for line in out.splitlines()[1:]] == [f"Partition: {p}" for p in range(5)]

    # not an increase: Kafka's INVALID_PARTITIONS messages, on one line, status 1
    code, out, err = topics(capsys, broker, "--alter", "--topic", "growing", "--partitions", "5")
    assert (code, out) == (1, "")
    assert err == (
        "Error while executing topic command : INVALID_PARTITIONS: Topic already has 5 partition(s).\n"
    )
    code, out, err = topics(capsys, broker, "--alter", "--topic", "growing", "--partitions", "3")
    assert (code, out) == (1, "")
    assert err == (
        "Error while executing topic command : INVALID_PARTITIONS: The topic growing currently has 5 "
        "partition(s); 3 would not be an increase.\n"
    )
    code, out, _ = topics(capsys, broker, "--describe", "--topic", "growing")
    assert "PartitionCount: 5\t" in out.splitlines()[0]

    # an unknown topic: one line naming it (nothing with --if-exists)
    code, out, err = topics(capsys, broker, "--alter", "--topic", "ghost", "--partitions", "3")
    assert (code, out) == (1, "")
    assert err == "Error while executing topic command : Topic 'ghost' does not exist as expected\n"
    assert topics(capsys, broker, "--alter", "--topic", "ghost", "--partitions", "3", "--if-exists") == (
        0,
        "",
        "",
    )

    # --partitions is required, and --alter changes nothing else
    for extra in ([], ["--partitions", "9", "--config", "retention.ms=1"], ["--partitions", "9",
                  "--replication-factor", "1"]):  # fmt: skip
        with pytest.raises(SystemExit) as exc:
            main(["topics", "--bootstrap-server", broker.bootstrap, "--alter", "--topic", "growing", *extra])
        assert exc.value.code == 2
    capsys.readouterr()
    code, out, _ = topics(capsys, broker, "--describe", "--topic", "growing")
    assert "PartitionCount: 5\t" in out.splitlines()[0]


def test_replica_assignment_and_patterns(capsys: pytest.CaptureFixture[str], broker: BrokerProcess) -> None:
    code, out, _ = topics(capsys, broker, "--create", "--topic", "pinned.a", "--replica-assignment", "1,1")
    assert code == 0
    assert out.endswith("Created topic pinned.a.\n") and out.startswith("WARNING: Due to limitations")
    assert topics(capsys, broker, "--create", "--topic", "pinned-b", "--partitions", "1")[0] == 0

    code, out, _ = topics(capsys, broker, "--list", "--topic", "pinned.*")
    assert out.splitlines() == ["pinned-b", "pinned.a"]
    code, out, _ = topics(capsys, broker, "--describe", "--topic", r"pinned\.a")
    assert "PartitionCount: 2\tReplicationFactor: 1" in out.splitlines()[0]
    assert len(out.splitlines()) == 3

    # healthy partitions: the health filters print nothing
    code, out, _ = topics(capsys, broker, "--describe", "--under-replicated-partitions")
    assert (code, out) == (0, "")

    assert topics(capsys, broker, "--delete", "--topic", "pinned.*")[0] == 0
    assert topics(capsys, broker, "--list", "--topic", "pinned.*")[1] == ""


def test_usage_errors(capsys: pytest.CaptureFixture[str], broker: BrokerProcess) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["topics", "--bootstrap-server", broker.bootstrap, "--create"])
    assert exc.value.code == 2
    assert 'Missing required argument "[topic]"' in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        main(["topics", "--bootstrap-server", broker.bootstrap, "--list", "--describe"])
    assert exc.value.code == 2
    with pytest.raises(SystemExit):
        main(["topics", "--bootstrap-server", "nohost", "--list"])
    capsys.readouterr()
    code, _, err = topics(
        capsys, broker, "--create", "--topic", "x", "--partitions", "2", "--replica-assignment", "1"
    )
    assert code == 1 and "can't be used with" in err


def test_unreachable_bootstrap_server(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    dead = BrokerProcess(tmp_path)  # never started: nothing listens on its port
    code = main(["topics", "--bootstrap-server", dead.bootstrap, "--list"])
    err = capsys.readouterr().err
    assert code == 1
    assert err.startswith("Error while executing topic command : no broker reachable")


# -- pieces, without a broker ----------------------------------------------------------------------


class _FakeAdmin:
    def __init__(self, metadata: ClusterMetadata) -> None:
        self._metadata = metadata

    async def metadata(self, topics: object = None) -> ClusterMetadata:
        return self._metadata


class _NoConfigs:
    """A connection whose broker serves no DescribeConfigs: --describe prints empty Configs."""

    def version_for(self, *args: object, **kwargs: object) -> int:
        from client.errors import UnsupportedApiVersionError

        raise UnsupportedApiVersionError(32, "no DescribeConfigs")


def _metadata() -> ClusterMetadata:
    def partition(index: int, leader: int, isr: tuple[int, ...]) -> PartitionInfo:
        return PartitionInfo(index, leader, 0, (1, 2, 3), isr, (), ErrorCode.NONE)

    topics = {
        "__consumer_offsets": TopicDescription(
            "__consumer_offsets", uuid.uuid4(), True, (partition(0, 1, (1, 2, 3)),), ErrorCode.NONE
        ),
        "events": TopicDescription(
            "events",
            uuid.UUID(int=1),
            False,
            (partition(0, 2, (2, 3)), partition(1, -1, ()), partition(2, 3, (3, 1, 2))),
            ErrorCode.NONE,
        ),
    }
    return ClusterMetadata("c", 1, (), topics)


async def test_list_exclude_internal() -> None:
    admin = _FakeAdmin(_metadata())
    out = io.StringIO()
    await list_topics(admin, out)  # type: ignore[arg-type]
    assert out.getvalue() == "__consumer_offsets\nevents\n"
    out = io.StringIO()
    await list_topics(admin, out, exclude_internal=True)  # type: ignore[arg-type]
    assert out.getvalue() == "events\n"


async def test_describe_leaderless_and_under_replicated_partitions() -> None:
    admin = _FakeAdmin(_metadata())
    out = io.StringIO()
    await describe_topics(admin, _NoConfigs(), out, exclude_internal=True)  # type: ignore[arg-type]
    assert out.getvalue().splitlines() == [
        "Topic: events\tTopicId: AAAAAAAAAAAAAAAAAAAAAQ\tPartitionCount: 3\tReplicationFactor: 3\tConfigs: ",
        "\tTopic: events\tPartition: 0\tLeader: 2\tReplicas: 1,2,3\tIsr: 2,3",
        "\tTopic: events\tPartition: 1\tLeader: none\tReplicas: 1,2,3\tIsr: ",
        "\tTopic: events\tPartition: 2\tLeader: 3\tReplicas: 1,2,3\tIsr: 3,1,2",
    ]
    out = io.StringIO()
    await describe_topics(admin, _NoConfigs(), out, health=DescribeFilter(unavailable=True))  # type: ignore[arg-type]
    assert out.getvalue() == "\tTopic: events\tPartition: 1\tLeader: none\tReplicas: 1,2,3\tIsr: \n"
    out = io.StringIO()
    await describe_topics(admin, _NoConfigs(), out, health=DescribeFilter(under_replicated=True))  # type: ignore[arg-type]
    assert [line.split("\t")[2] for line in out.getvalue().splitlines()] == ["Partition: 0", "Partition: 1"]


def test_kafka_uuid_and_parsers() -> None:
    assert kafka_uuid(uuid.UUID(int=0)) == "AAAAAAAAAAAAAAAAAAAAAA"
    assert kafka_uuid(uuid.UUID("5fdb0e5d-1c3e-4a5b-9f6d-0123456789ab")) == "X9sOXRw-SlufbQEjRWeJqw"
    assert parse_replica_assignment("1:2:3,2:3:1") == {0: [1, 2, 3], 1: [2, 3, 1]}
    with pytest.raises(TopicCommandError):
        parse_replica_assignment("1:2,3")
    with pytest.raises(TopicCommandError):
        parse_replica_assignment("1:1")
    servers = bootstrap_servers("a:1, [::1]:9092")
    assert [(s.host, s.port) for s in servers] == [("a", 1), ("::1", 9092)]
    assert str(servers[1]) == "[::1]:9092"
