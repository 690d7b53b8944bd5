"""`kipling produce` and `kipling consume` to a topic that does not exist, run as `kipling` processes
against real broker processes.

As Kafka's console tools and kcat do, they ask for the topic's metadata with auto-creation allowed: a
broker with auto.create.topics.enable=true (the default) creates the topic with num.partitions, and
the records sent are there to consume; a broker with auto.create.topics.enable=false refuses, and the
tool exits with status 1 and one line that says the topic does not exist and how to create it.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator

import pytest

from tests.integration.broker_process import BrokerProcess
from tests.integration.dev_cluster_process import kipling_command

RUN_TIMEOUT_S = 60
"""Every `kipling` run is bounded (subprocess timeout), so every test is."""
REFUSED = "does not exist and the broker does not create topics on demand (auto.create.topics.enable=false)"


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    process = BrokerProcess(
        tmp_path_factory.mktemp("auto-create-broker"),
        overrides=[
            "num.partitions=2",
            "group.initial.rebalance.delay.ms=0",
            "offsets.topic.num.partitions=1",
        ],
    ).start()
    yield process
    process.stop()


@pytest.fixture(scope="module")
def strict_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    process = BrokerProcess(
        tmp_path_factory.mktemp("no-auto-create-broker"),
        overrides=[
            "auto.create.topics.enable=false",
            "group.initial.rebalance.delay.ms=0",
            "offsets.topic.num.partitions=1",
        ],
    ).start()
    yield process
    process.stop()


def kipling(broker: BrokerProcess, command: str, *args: str, stdin: bytes = b"") -> tuple[int, str, str]:
    """``kipling COMMAND --bootstrap-server B ARGS...`` as a process: exit status, stdout, stderr."""
    done = subprocess.run(
        [*kipling_command(), command, "--bootstrap-server", broker.bootstrap, *args],
        input=stdin,
        capture_output=True,
        timeout=RUN_TIMEOUT_S,
    )
    return done.returncode, done.stdout.decode(), done.stderr.decode()


def topic_names(broker: BrokerProcess) -> list[str]:
    code, out, err = kipling(broker, "topics", "--list")
    assert code == 0, err
    return out.splitlines()


def partition_count(broker: BrokerProcess, topic: str) -> int:
    code, out, err = kipling(broker, "topics", "--describe", "--topic", topic)
    assert code == 0, err
    return int(out.split("PartitionCount: ")[1].split()[0])


def test_produce_auto_creates_the_topic_and_its_records_are_consumable(broker: BrokerProcess) -> None:
    assert "fresh-produce" not in topic_names(broker)
    code, _, err = kipling(broker, "produce", "--topic", "fresh-produce", stdin=b"one\ntwo\nthree\n")
    assert code == 0, err
    assert err.endswith("Produced a total of 3 messages\n"), err
    assert partition_count(broker, "fresh-produce") == 2  # the broker's num.partitions
    code, out, err = kipling(
        broker, "consume", "--topic", "fresh-produce", "--from-beginning", "--max-messages", "3"
    )
    assert code == 0, err
    assert sorted(out.splitlines()) == ["one", "three", "two"]


def test_consume_auto_creates_the_topic(broker: BrokerProcess) -> None:
    assert "fresh-consume" not in topic_names(broker)
    code, out, err = kipling(broker, "consume", "--topic", "fresh-consume", "--timeout-ms", "500")
    assert code == 0, err
    assert out == "" and err.endswith("Processed a total of 0 messages\n"), err
    assert "fresh-consume" in topic_names(broker)
    assert partition_count(broker, "fresh-consume") == 2


def test_consume_with_a_group_auto_creates_the_topic(broker: BrokerProcess) -> None:
    assert "fresh-group" not in topic_names(broker)
    code, out, err = kipling(
        broker, "consume", "--topic", "fresh-group", "--group", "fresh-group-app", "--timeout-ms", "2000"
    )
    assert code == 0, err
    assert out == "", out
    assert "fresh-group" in topic_names(broker)


def _refusal(err: str, topic: str, bootstrap: str) -> None:
    lines = [line for line in err.splitlines() if REFUSED in line]
    assert len(lines) == 1, err
    assert f"Topic {topic} {REFUSED}" in lines[0]
    assert f"kipling topics --bootstrap-server {bootstrap} --create --topic {topic}" in lines[0]
    assert "Traceback" not in err


def test_without_auto_creation_produce_and_consume_fail_with_one_clear_line(
    strict_broker: BrokerProcess,
) -> None:
    bootstrap = strict_broker.bootstrap
    code, _, err = kipling(strict_broker, "produce", "--topic", "absent", stdin=b"x\n")
    assert code == 1, err
    _refusal(err, "absent", bootstrap)
    assert err.endswith("Produced a total of 0 messages\n")

    code, out, err = kipling(strict_broker, "consume", "--topic", "absent", "--timeout-ms", "500")
    assert code == 1 and out == "", err
    _refusal(err, "absent", bootstrap)

    code, out, err = kipling(
        strict_broker, "consume", "--topic", "absent", "--group", "absent-app", "--timeout-ms", "500"
    )
    assert code == 1 and out == "", err
    _refusal(err, "absent", bootstrap)

    assert "absent" not in topic_names(strict_broker)
    # a topic created explicitly works as before
    code, _, err = kipling(strict_broker, "topics", "--create", "--topic", "absent")
    assert code == 0, err
    code, _, err = kipling(strict_broker, "produce", "--topic", "absent", stdin=b"x\n")
    assert code == 0, err
