"""`kipling groups` against a real broker process, with a kafka-python consumer group as the subject
and kafka-python's admin client as the oracle for committed offsets."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.structs import OffsetAndMetadata

from broker.cli import main
from broker.commands.groups import (
    ResetScenario,
    decode_assignment,
    encode_assignment,
    new_offsets,
    parse_topic_partitions,
)
from client.fetch_session import TopicPartition as TP
from tests.integration.broker_process import BrokerProcess

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
    capsys.readouterr()


# -- pieces, without a broker ----------------------------------------------------------------------


def test_assignment_round_trip() -> None:
    data = encode_assignment({"a": [0, 2], "b": [1]}, version=1)
    assert decode_assignment(data) == {"a": [0, 2], "b": [1]}
    assert decode_assignment(b"") == {} and decode_assignment(b"\x00\x00\x00") == {}


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
