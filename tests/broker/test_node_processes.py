"""The broker processes of a node (``kipling.node.processes``): how each one's config is derived."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from broker import process_supervisor
from broker.node_processes import broker_argv, node_cluster_id, process_overrides
from broker.process_supervisor import SAME_STOP_S, Console, Supervisor
from server_common.config import BrokerConfig, ConfigError, load_config


def config_of(*overrides: str) -> BrokerConfig:
    config, _ = load_config(None, ["listeners=PLAINTEXT://127.0.0.1:9092", "log.dirs=/data/k", *overrides])
    return config


def test_a_single_node_is_split_into_brokers_around_one_controller() -> None:
    config = config_of("kipling.node.processes=3", "metrics.listener=127.0.0.1:9404", "node.id=10")
    first, second, third = process_overrides(config, "cluster-x", hostname="host-a")
    assert first["node.id"] == "10" and second["node.id"] == "11" and third["node.id"] == "12"
    # broker 0 keeps both roles and gets a CONTROLLER listener past the client ports
    assert first["listeners"] == "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9095"
    assert first["controller.listener.names"] == "CONTROLLER"
    assert "process.roles" not in first
    assert second["listeners"] == "PLAINTEXT://127.0.0.1:9093"
    assert second["process.roles"] == third["process.roles"] == "broker"
    for own in (first, second, third):
        assert own["controller.quorum.voters"] == "10@127.0.0.1:9095"
        assert own["broker.rack"] == "host-a"
        assert own["cluster.id"] == "cluster-x"
        assert own["kipling.node.processes"] == "1"
    assert [o["log.dirs"] for o in (first, second, third)] == ["/data/k", "/data/k-1", "/data/k-2"]
    assert [o["metrics.listener"] for o in (first, second, third)] == [
        "127.0.0.1:9404",
        "127.0.0.1:9405",
        "127.0.0.1:9406",
    ]
    for own in (first, second, third):  # each derived config is valid as it stands
        load_config(None, [f"{k}={v}" for k, v in own.items()])


def test_a_cluster_node_keeps_its_voters_and_controller_listener() -> None:
    config = config_of(
        "kipling.node.processes=2",
        "node.id=1",
        "listeners=PLAINTEXT://:9092,CONTROLLER://:9192",
        "advertised.listeners=PLAINTEXT://kafka-1:9092",
        "controller.listener.names=CONTROLLER",
        "controller.quorum.voters=1@kafka-1:9192",
        "broker.rack=zone-a",
        "metadata.log.dir=/meta",
    )
    first, second = process_overrides(config, "c")
    assert first["listeners"] == "PLAINTEXT://:9092,CONTROLLER://:9192"
    assert second["listeners"] == "PLAINTEXT://:9093"
    assert first["advertised.listeners"] == "PLAINTEXT://kafka-1:9092"
    assert second["advertised.listeners"] == "PLAINTEXT://kafka-1:9093"
    assert first["controller.quorum.voters"] == second["controller.quorum.voters"] == "1@kafka-1:9192"
    assert first["broker.rack"] == second["broker.rack"] == "zone-a"
    assert (first["metadata.log.dir"], second["metadata.log.dir"]) == ("/meta", "/meta-1")


def test_a_broker_only_node_has_only_brokers() -> None:
    config = config_of(
        "kipling.node.processes=2", "process.roles=broker", "controller.quorum.voters=9@c:9093"
    )
    for own in process_overrides(config, "c", hostname="h"):
        assert own["process.roles"] == "broker"
        assert own["controller.quorum.voters"] == "9@c:9093"


def test_port_zero_cannot_be_split() -> None:
    config = config_of("kipling.node.processes=2", "listeners=PLAINTEXT://127.0.0.1:0")
    with pytest.raises(ConfigError, match=r"listeners.*fixed ports"):
        process_overrides(config, "c")


def test_ports_of_the_brokers_must_not_overlap_another_listener() -> None:
    config = config_of(
        "kipling.node.processes=2",
        "listeners=EXTERNAL://:9092,CONTROLLER://:9093",
        "listener.security.protocol.map=EXTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "inter.broker.listener.name=EXTERNAL",
        "controller.listener.names=CONTROLLER",
        "controller.quorum.voters=1@localhost:9093",
    )
    with pytest.raises(
        ConfigError, match=r"port 9093 would serve both listener EXTERNAL and listener CONTROLLER"
    ):
        process_overrides(config, "c")


def test_the_brokers_node_ids_must_not_take_another_voters() -> None:
    config = config_of(
        "kipling.node.processes=2",
        "listeners=PLAINTEXT://:9092,CONTROLLER://:9193",
        "controller.listener.names=CONTROLLER",
        "controller.quorum.voters=1@h1:9193,2@h2:9193,3@h3:9193",
    )
    with pytest.raises(ConfigError, match=r"node ids 1 to 2, and 2 is a controller voter's"):
        process_overrides(config, "c")


def test_a_controller_only_node_runs_one_process() -> None:
    config = config_of(
        "kipling.node.processes=2",
        "process.roles=controller",
        "listeners=CONTROLLER://127.0.0.1:9093",
        "controller.listener.names=CONTROLLER",
        "controller.quorum.voters=1@127.0.0.1:9093",
    )
    with pytest.raises(ConfigError, match=r"kipling\.node\.processes.*controller-only"):
        process_overrides(config, "c")


def test_process_count_must_be_positive() -> None:
    with pytest.raises(ConfigError, match=r"kipling\.node\.processes"):
        config_of("kipling.node.processes=0")


def test_the_node_keeps_the_cluster_of_broker_zero(tmp_path: Path) -> None:
    config = config_of("kipling.node.processes=2", f"log.dirs={tmp_path / 'logs'}")
    first = node_cluster_id(config)
    assert (tmp_path / "logs" / "meta.properties").exists()
    assert node_cluster_id(config) == first  # read back, not made anew
    assert node_cluster_id(config_of(f"log.dirs={tmp_path / 'logs'}", f"cluster.id={first}")) == first


def test_broker_argv_puts_its_own_keys_last() -> None:
    argv = broker_argv(Path("server.properties"), ["num.partitions=3"], {"node.id": "2"}, "INFO", True)
    assert argv[1:] == [
        "-m",
        "broker",
        "--log-level",
        "INFO",
        "--log-json",
        "--config",
        "server.properties",
        "--override",
        "num.partitions=3",
        "--override",
        "node.id=2",
    ]


def test_one_stop_signalled_twice_at_once_stays_graceful(monkeypatch: pytest.MonkeyPatch) -> None:
    """``timeout`` or a service manager may signal the supervisor and then its whole group: the
    second signal within SAME_STOP_S is the same stop; a later one kills."""
    err = io.StringIO()
    supervisor = Supervisor([], Console(["broker-1"], io.StringIO(), err, supervisor_name="node"))
    clock = [100.0]
    monkeypatch.setattr(process_supervisor.time, "monotonic", lambda: clock[0])
    supervisor.request_stop("SIGTERM received")
    clock[0] += SAME_STOP_S / 2
    supervisor.request_stop("SIGTERM received")
    assert not supervisor._force.is_set()
    clock[0] += SAME_STOP_S
    supervisor.request_stop("SIGINT received")
    assert supervisor._force.is_set()
    assert err.getvalue().splitlines() == [
        "node     | SIGTERM received: stopping the brokers",
        "node     | SIGINT received again: killing the brokers now",
    ]
