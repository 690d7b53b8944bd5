"""`kipling groups` against a real broker process, with a kafka-python consumer group as the subject
and kafka-python's admin client as the oracle for committed offsets."""

from __future__ import annotations

import re
import subprocess
import time
from collections.abc import Iterator

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.structs import OffsetAndMetadata

from client.fetch_session import TopicPartition as TP
from protocol.error_codes import ErrorCode
from tests.integration.broker_process import BrokerProcess
from tests.integration.dev_cluster_process import kipling_command
from tools.cli import main
from tools.commands.groups import (
    Coordinator,
    GroupDescription,
    Member,
    ResetScenario,
    decode_assignment,
    delete_offsets_message,
    encode_assignment,
    format_delete_offsets_rows,
    format_member_rows,
    format_state,
    new_offsets,
    parse_topic_partitions,
)

TOPIC = "grp-orders"
GROUP = "grp-app"


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    process = BrokerProcess(
        tmp_path_factory.mktemp("groups-broker"),
        overrides=["group.initial.rebalance.delay.ms=0", "offsets.topic.num.partitions=3"],
    ).start()
    yield process
    process.stop()


def groups(capsys: pytest.CaptureFixture[str], broker: BrokerProcess, *args: str) -> tuple[int, str, str]:
    code = main(["groups", "--bootstrap-server", broker.bootstrap, *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def table(out: str) -> list[list[str]]:
    return [line.split() for line in out.splitlines() if line.strip()]


def committed(broker: BrokerProcess, group: str) -> dict[tuple[str, int], int]:
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        offsets = admin.list_group_offsets(group)[group]
    finally:
        admin.close()
    return {(tp.topic, tp.partition): meta.offset for tp, meta in offsets.items()}


def test_describe_reset_list_delete(capsys: pytest.CaptureFixture[str], broker: BrokerProcess) -> None:
    assert main(["topics", "--bootstrap-server", broker.bootstrap, "--create", "--topic", TOPIC,
                 "--partitions", "2"]) == 0  # fmt: skip
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
    for i in range(10):
        for p in (0, 1):
            producer.send(TOPIC, value=b"v%d" % i, partition=p)
    producer.flush()
    producer.close()
    capsys.readouterr()

    consumer = KafkaConsumer(
        TOPIC,
        bootstrap_servers=broker.bootstrap,
        group_id=GROUP,
        client_id="grp-client",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    try:
        seen = 0
        deadline = time.monotonic() + 10
        while seen < 20 and time.monotonic() < deadline:
            seen += sum(len(r) for r in consumer.poll(timeout_ms=500).values())
        assert seen == 20
        consumer.commit(
            {
                TopicPartition(TOPIC, 0): OffsetAndMetadata(4, "", -1),
                TopicPartition(TOPIC, 1): OffsetAndMetadata(10, "", -1),
            }
        )

        code, out, err = groups(capsys, broker, "--describe", "--group", GROUP)
        assert code == 0, err
        head, *rows = table(out)
        assert head == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
                        "CONSUMER-ID", "HOST", "CLIENT-ID"]  # fmt: skip
        assert [r[:6] for r in rows] == [
            [GROUP, TOPIC, "0", "4", "10", "6"],
            [GROUP, TOPIC, "1", "10", "10", "0"],
        ]
        assert all(r[6].startswith("grp-client") and r[8] == "grp-client" for r in rows)
        assert "has no active members" not in err

        # active: refused, dry run or not
        code, out, err = groups(capsys, broker, "--reset-offsets", "--group", GROUP, "--topic", TOPIC,
                                "--to-earliest", "--dry-run")  # fmt: skip
        assert (code, out) == (1, "")
        assert (
            f"Assignments can only be reset if the group '{GROUP}' is inactive, but the current state is "
            "Stable." in err
        )
        code, out, _ = groups(capsys, broker, "--delete", "--group", GROUP)
        assert code == 1 and "NON_EMPTY_GROUP" in out

        code, out, _ = groups(capsys, broker, "--list")
        assert code == 0 and GROUP in out.splitlines()
    finally:
        consumer.close(autocommit=False)

    code, out, err = groups(capsys, broker, "--describe", "--group", GROUP)
    assert code == 0
    assert f"Consumer group '{GROUP}' has no active members." in err
    assert [r[:9] for r in table(out)[1:]] == [
        [GROUP, TOPIC, "0", "4", "10", "6", "-", "-", "-"],
        [GROUP, TOPIC, "1", "10", "10", "0", "-", "-", "-"],
    ]

    code, out, err = groups(capsys, broker, "--reset-offsets", "--group", GROUP, "--topic", TOPIC,
                            "--to-earliest", "--dry-run")  # fmt: skip
    assert code == 0, err
    assert table(out) == [["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"], [GROUP, TOPIC, "0", "0"],
                          [GROUP, TOPIC, "1", "0"]]  # fmt: skip
    assert committed(broker, GROUP) == {(TOPIC, 0): 4, (TOPIC, 1): 10}

    code, out, err = groups(capsys, broker, "--reset-offsets", "--group", GROUP, "--topic", f"{TOPIC}:1",
                            "--to-earliest", "--execute")  # fmt: skip
    assert code == 0, err
    assert table(out)[1:] == [[GROUP, TOPIC, "1", "0"]]
    assert committed(broker, GROUP) == {(TOPIC, 0): 4, (TOPIC, 1): 0}

    # shift-by and to-offset are clamped to [earliest, latest]
    code, out, _ = groups(capsys, broker, "--reset-offsets", "--group", GROUP, "--topic", TOPIC,
                          "--shift-by", "8", "--execute")  # fmt: skip
    assert code == 0 and table(out)[1:] == [[GROUP, TOPIC, "0", "10"], [GROUP, TOPIC, "1", "8"]]
    code, out, _ = groups(capsys, broker, "--reset-offsets", "--group", GROUP, "--all-topics",
                          "--to-offset", "99", "--execute")  # fmt: skip
    assert code == 0 and table(out)[1:] == [[GROUP, TOPIC, "0", "10"], [GROUP, TOPIC, "1", "10"]]
    assert committed(broker, GROUP) == {(TOPIC, 0): 10, (TOPIC, 1): 10}

    code, out, _ = groups(capsys, broker, "--delete", "--group", GROUP)
    assert (code, out) == (0, f"Deletion of requested consumer groups ('{GROUP}') was successful.\n")
    assert GROUP not in groups(capsys, broker, "--list")[1].splitlines()
    code, out, err = groups(capsys, broker, "--describe", "--group", GROUP)
    assert (code, out) == (1, "") and f"Consumer group '{GROUP}' does not exist." in err


def test_describe_members_and_state(capsys: pytest.CaptureFixture[str], broker: BrokerProcess) -> None:
    """--members (--verbose) and --state of a group with one kafka-python member, then without."""
    topic, group = "grp-members", "grp-members-app"
    assert main(["topics", "--bootstrap-server", broker.bootstrap, "--create", "--topic", topic,
                 "--partitions", "3"]) == 0  # fmt: skip
    consumer = KafkaConsumer(
        topic, bootstrap_servers=broker.bootstrap, group_id=group, client_id="members-client",
        enable_auto_commit=False,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while not consumer.assignment() and time.monotonic() < deadline:
            consumer.poll(timeout_ms=200)
        assert consumer.assignment() == {TopicPartition(topic, p) for p in range(3)}
        capsys.readouterr()

        code, out, err = groups(capsys, broker, "--describe", "--group", group, "--members")
        assert code == 0, err
        assert out.startswith("\n") and err == ""
        head, row = table(out)
        assert head == ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS"]
        assert row[0] == group and row[1].startswith("members-client-")
        assert row[2].endswith("127.0.0.1") and row[3:] == ["members-client", "3"]

        code, out, err = groups(capsys, broker, "--describe", "--group", group, "--members", "--verbose")
        assert code == 0, err
        head, verbose_row = table(out)
        assert head == ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "ASSIGNMENT"]
        assert verbose_row == [*row, f"{topic}(0,1,2)"]

        code, out, err = groups(capsys, broker, "--describe", "--group", group, "--state")
        assert code == 0, err
        head, row = table(out)
        assert head == ["GROUP", "COORDINATOR", "(ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"]
        assert row[:2] == [group, broker.bootstrap] and re.fullmatch(r"\(\d+\)", row[2])
        assert row[3:] == ["range", "Stable", "1"]  # kafka-python's first assignor
    finally:
        consumer.close(autocommit=False)

    # without members: --members prints no table, --state an Empty group with 0 members
    code, out, err = groups(capsys, broker, "--describe", "--group", group, "--members")
    assert (code, out) == (0, "") and err == f"\nConsumer group '{group}' has no active members.\n"
    code, out, err = groups(capsys, broker, "--describe", "--group", group, "--state")
    assert code == 0 and f"Consumer group '{group}' has no active members." in err
    assert table(out)[1][:2] == [group, broker.bootstrap] and table(out)[1][-2:] == ["Empty", "0"]
    # and for a group that does not exist, the error --describe gives
    for view in ("--members", "--state"):
        code, out, err = groups(capsys, broker, "--describe", "--group", "nobody", view)
        assert (code, out) == (1, "") and err == "\nError: Consumer group 'nobody' does not exist.\n"


def test_unknown_group(capsys: pytest.CaptureFixture[str], broker: BrokerProcess) -> None:
    code, out, err = groups(capsys, broker, "--describe", "--group", "nobody")
    assert (code, out) == (1, "")
    assert err == "\nError: Consumer group 'nobody' does not exist.\n"
    code, out, _ = groups(capsys, broker, "--delete", "--group", "nobody")
    assert code == 1 and "could not be deleted due to: GROUP_ID_NOT_FOUND" in out


def test_usage_errors(capsys: pytest.CaptureFixture[str], broker: BrokerProcess) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["groups", "--bootstrap-server", broker.bootstrap, "--describe"])
    assert exc.value.code == 2
    with pytest.raises(SystemExit):
        main(["groups", "--bootstrap-server", broker.bootstrap, "--reset-offsets", "--group", "g"])
    for wrong in (["--list", "--members"], ["--list", "--verbose"], ["--describe", "--group", "g",
                  "--members", "--state"]):  # fmt: skip
        with pytest.raises(SystemExit) as exc:
            main(["groups", "--bootstrap-server", broker.bootstrap, *wrong])
        assert exc.value.code == 2
    capsys.readouterr()


def test_delete_offsets(capsys: pytest.CaptureFixture[str], broker: BrokerProcess) -> None:
    """--delete-offsets of an Empty group (offsets committed without group management): the named
    partitions, then a whole topic beside one that does not exist; OffsetFetch answers -1 after."""
    topic, group = "grp-delete-offsets", "grp-delete-offsets-app"
    assert main(["topics", "--bootstrap-server", broker.bootstrap, "--create", "--topic", topic,
                 "--partitions", "3"]) == 0  # fmt: skip
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=group, enable_auto_commit=False)
    try:
        consumer.assign([TopicPartition(topic, p) for p in range(3)])
        consumer.commit({TopicPartition(topic, p): OffsetAndMetadata(p + 1, "", -1) for p in range(3)})
    finally:
        consumer.close(autocommit=False)
    capsys.readouterr()

    code, out, err = groups(capsys, broker, "--delete-offsets", "--group", group, "--topic", f"{topic}:0,2")
    assert (code, err) == (0, "")
    assert out.splitlines()[0] == f"Request succeed for deleting offsets with topic {topic}:0,2 group {group}"
    assert table(out)[1:] == [["TOPIC", "PARTITION", "STATUS"], [topic, "0", "Successful"],
                              [topic, "2", "Successful"]]  # fmt: skip
    assert committed(broker, group) == {(topic, 1): 2}

    code, out, err = groups(capsys, broker, "--delete-offsets", "--group", group, "--topic", topic,
                            "--topic", "grp-no-such-topic")  # fmt: skip
    assert code == 1 and err == ""  # the request itself succeeded; one row failed
    rows = table(out)[1:]
    assert rows[1:4] == [[topic, str(p), "Successful"] for p in range(3)]
    assert rows[4][:4] == ["grp-no-such-topic", "Not", "Provided", "Error:"]
    assert rows[4][4] == "UNKNOWN_TOPIC_OR_PARTITION:"
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        fetched = admin.list_group_offsets({group: [TopicPartition(topic, p) for p in range(3)]})[group]
    finally:
        admin.close()
    assert {tp.partition: meta.offset for tp, meta in fetched.items()} == {0: -1, 1: -1, 2: -1}

    code, out, err = groups(capsys, broker, "--delete-offsets", "--group", "grp-nobody", "--topic", topic)
    assert code == 1 and err == "\nError: 'grp-nobody' does not exist.\n"
    assert [r[:4] for r in table(out)[1:]] == [
        [topic, str(p), "Error:", "GROUP_ID_NOT_FOUND:"] for p in range(3)
    ]

    for wrong in (["--group", "g"], ["--group", "g", "--all-topics"], ["--topic", topic]):
        with pytest.raises(SystemExit) as exc:
            main(["groups", "--bootstrap-server", broker.bootstrap, "--delete-offsets", *wrong])
        assert exc.value.code == 2
    capsys.readouterr()


# -- pieces, without a broker ----------------------------------------------------------------------


def test_delete_offsets_messages_and_table_as_kafka_prints_them() -> None:
    assert delete_offsets_message("g", ["t", "u:0"], ErrorCode.NONE) == (
        "Request succeed for deleting offsets with topic t, u:0 group g"
    )
    assert delete_offsets_message("g", ["t"], ErrorCode.NON_EMPTY_GROUP) == (
        "Error: Deleting offsets of a consumer group 'g' is forbidden if the group is not empty."
    )
    assert delete_offsets_message("g", ["t"], ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC) == (
        "Error: Encounter some partition level error, see the follow-up details:"
    )
    assert delete_offsets_message("g", ["t"], ErrorCode.NOT_COORDINATOR) == (
        "Error: Encounter some unknown error: NOT_COORDINATOR"
    )
    rows = {
        TP("t", 1): ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC,
        TP("t", 0): ErrorCode.NONE,
        TP("u", -1): ErrorCode.NONE,
    }
    lines = format_delete_offsets_rows(rows).splitlines()
    assert lines[:3] == [
        "",
        "TOPIC                          PARTITION       STATUS",
        "t                              0               Successful",
    ]
    assert lines[3].startswith(
        "t                              1               Error: GROUP_SUBSCRIBED_TO_TOPIC: "
    )
    assert lines[4] == "u                              Not Provided    Successful"


def test_assignment_round_trip() -> None:
    data = encode_assignment({"a": [0, 2], "b": [1]}, version=1)
    assert decode_assignment(data) == {"a": [0, 2], "b": [1]}
    assert decode_assignment(b"") == {} and decode_assignment(b"\x00\x00\x00") == {}


def test_member_and_state_tables_as_kafka_prints_them() -> None:
    members = (
        Member("c-1-0f", "c-1", "/10.0.0.1", {"b": [1], "a": [2, 0]}, "static-1"),
        Member("c-2-aa", "c-2", "/10.0.0.2", {}),
    )
    group = GroupDescription("g", "Stable", ErrorCode.NONE, members, "roundrobin")
    # a GROUP-INSTANCE-ID column when some member has one (17 wide at least), trailing blanks dropped
    assert format_member_rows(group, verbose=True).splitlines() == [
        "",
        "GROUP           CONSUMER-ID     GROUP-INSTANCE-ID HOST            CLIENT-ID       #PARTITIONS     "
        "ASSIGNMENT",
        "g               c-1-0f          static-1          /10.0.0.1       c-1             3               "
        "a(0,2), b(1)",
        "g               c-2-aa                            /10.0.0.2       c-2             0               -",
    ]
    dynamic = GroupDescription("g", "Stable", ErrorCode.NONE, (members[1],), "range")
    assert format_member_rows(dynamic).splitlines()[1:] == [
        "GROUP           CONSUMER-ID     HOST            CLIENT-ID       #PARTITIONS",
        "g               c-2-aa          /10.0.0.2       c-2             0",
    ]
    assert format_state(group, Coordinator(3, "broker-3.example", 9092)) == (
        "\nGROUP                     COORDINATOR (ID)          ASSIGNMENT-STRATEGY  STATE           #MEMBERS"
        "\ng                         broker-3.example:9092 (3) roundrobin           Stable          2\n"
    )


def test_new_offsets_clamped() -> None:
    tps = [TP("t", 0), TP("t", 1)]
    earliest, latest = {tps[0]: 5, tps[1]: 0}, {tps[0]: 20, tps[1]: 3}
    committed = {tps[0]: 7, tps[1]: 2}
    assert new_offsets(ResetScenario("shift-by", -5), tps, committed, earliest, latest) == {
        tps[0]: 5,
        tps[1]: 0,
    }
    assert new_offsets(ResetScenario("to-offset", 10), tps, committed, earliest, latest) == {
        tps[0]: 10,
        tps[1]: 3,
    }
    assert new_offsets(ResetScenario("to-latest"), tps, {}, earliest, latest) == {tps[0]: 20, tps[1]: 3}
    assert parse_topic_partitions("t:0,2") == ("t", [0, 2]) and parse_topic_partitions("t") == ("t", None)


def test_the_kipling_script_alters_a_topic_and_describes_members_and_state(broker: BrokerProcess) -> None:
    """The new habits as a user types them: `kipling topics --alter`, `kipling groups --describe
    --members / --state` and `kipling --version`, each a process of its own."""

    def kipling(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*kipling_command(), *args], capture_output=True, text=True, timeout=60)

    bootstrap = ["--bootstrap-server", broker.bootstrap]
    topic, group = "script-grown", "script-group"
    assert kipling("topics", *bootstrap, "--create", "--topic", topic, "--partitions", "1").returncode == 0
    assert kipling("topics", *bootstrap, "--alter", "--topic", topic, "--partitions", "3").returncode == 0
    refused = kipling("topics", *bootstrap, "--alter", "--topic", topic, "--partitions", "2")
    assert refused.returncode == 1 and refused.stderr.count("\n") == 1
    assert "INVALID_PARTITIONS" in refused.stderr
    described = kipling("topics", *bootstrap, "--describe", "--topic", topic)
    assert "PartitionCount: 3\t" in described.stdout

    consumer = KafkaConsumer(topic, bootstrap_servers=broker.bootstrap, group_id=group, client_id="script")
    try:
        deadline = time.monotonic() + 60
        while len(consumer.assignment()) < 3 and time.monotonic() < deadline:
            consumer.poll(timeout_ms=200)
        assert len(consumer.assignment()) == 3
        members = kipling("groups", *bootstrap, "--describe", "--group", group, "--members")
        assert members.returncode == 0, members.stderr
        assert table(members.stdout)[1][3:] == ["script", "3"]
        state = kipling("groups", *bootstrap, "--describe", "--group", group, "--state")
        assert state.returncode == 0, state.stderr
        assert table(state.stdout)[1][-2:] == ["Stable", "1"]
    finally:
        consumer.close(autocommit=False)

    version = kipling("--version")
    assert version.returncode == 0 and re.fullmatch(r"kipling \S+\n", version.stdout)
