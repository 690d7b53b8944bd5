"""`kipling dev-cluster`: its layout and checks in-process, then the real command with real brokers.

The process tests start a real cluster (broker 1 hosts the controller) and check what the
supervisor promises: every broker up on its ports, one tagged output, a graceful stop on SIGTERM
with nothing left behind, a failed broker stopping the rest, a busy port refused before anything
starts.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from broker.process_supervisor import Console, LineSplitter, Supervisor
from protocol.api_keys import ApiKey
from server_common.config import BrokerConfig
from storage.checkpoint import CLEAN_SHUTDOWN_MARKER
from tests.integration.dev_cluster_process import (
    CLUSTER_DIR,
    ROOT,
    DevCluster,
    free_layout,
    kipling_command,
)
from tests.integration.wire_client import WireClient
from tools.cli import main
from tools.dev_cluster import (
    ClusterLayout,
    DevClusterError,
    bootstrap_servers,
    broker_command,
    broker_properties,
    broker_specs,
    check_ports,
    cluster_settings,
    default_cluster_config_dir,
    fit_to_cluster,
    port_in_use,
    read_cluster_settings,
)

# -- layout and configuration --------------------------------------------------------------------


def test_layout_ports_roles_and_voters(tmp_path: Path) -> None:
    specs = broker_specs(ClusterLayout(brokers=3, data_dir=tmp_path))
    assert [(s.name, s.port, s.metrics_port) for s in specs] == [
        ("broker-1", 9092, 9404),
        ("broker-2", 9093, 9405),
        ("broker-3", 9094, 9406),
    ]
    assert bootstrap_servers(specs) == "bootstrap.servers=127.0.0.1:9092,127.0.0.1:9093,127.0.0.1:9094"
    props = [s.node_properties() for s in specs]
    for i, node in enumerate(props, start=1):  # three combined nodes: each a broker and a voter
        assert node["process.roles"] == "broker,controller"
        assert node["listeners"] == f"PLAINTEXT://127.0.0.1:{9091 + i},CONTROLLER://127.0.0.1:{9191 + i}"
        assert node["controller.quorum.voters"] == "1@127.0.0.1:9192,2@127.0.0.1:9193,3@127.0.0.1:9194"
        assert node["controller.listener.names"] == "CONTROLLER"
    assert specs[2].log_dir == tmp_path.resolve() / "broker-3"


def test_controller_port_can_be_chosen(tmp_path: Path) -> None:
    layout = ClusterLayout(brokers=2, data_dir=tmp_path, base_port=20000, controller_port=21000)
    specs = broker_specs(layout)
    assert specs[1].node_properties()["controller.quorum.voters"] == "1@127.0.0.1:21000,2@127.0.0.1:21001"
    assert (21000, "broker-1 controller port") in specs[0].ports()
    assert (21001, "broker-2 controller port") in specs[1].ports()


def test_only_the_first_three_nodes_are_voters(tmp_path: Path) -> None:
    specs = broker_specs(ClusterLayout(brokers=5, data_dir=tmp_path))
    assert [s.node_properties()["process.roles"] for s in specs] == ["broker,controller"] * 3 + ["broker"] * 2
    assert {s.node_properties()["controller.quorum.voters"] for s in specs} == {
        "1@127.0.0.1:9192,2@127.0.0.1:9193,3@127.0.0.1:9194"
    }


def test_every_broker_config_is_valid_and_takes_the_cluster_files_settings(tmp_path: Path) -> None:
    settings = read_cluster_settings(CLUSTER_DIR)
    for spec in broker_specs(ClusterLayout(brokers=5, data_dir=tmp_path)):
        config, warnings = BrokerConfig.from_properties(broker_properties(spec, settings))
        assert warnings == []
        assert config.node_id == spec.node_id
        assert config.min_insync_replicas == 2 and config.default_replication_factor == 3
        assert [str(li) for li in config.advertised_listeners] == [f"PLAINTEXT://{spec.bootstrap}"]
        assert config.metrics_listener == ("127.0.0.1", spec.metrics_port)


def test_a_secured_cluster_has_no_plaintext_listener_and_keeps_its_certificates(tmp_path: Path) -> None:
    settings = read_cluster_settings(CLUSTER_DIR)
    specs = broker_specs(ClusterLayout(brokers=3, data_dir=tmp_path, secure=True))
    ca = (tmp_path / "pki" / "ca.pem").read_text()
    secured = cluster_settings(settings, specs)
    for spec in specs:
        assert not [value for value in spec.node_properties().values() if "secret" in value]  # ps shows them
        config, warnings = BrokerConfig.from_properties(broker_properties(spec, secured))
        assert warnings == []
        assert {s.protocol for s in config.listener_security.values()} == {"SASL_SSL"}
        assert config.inter_broker_listener_name == "SASL_SSL"
    assert "alice-secret" in (tmp_path / "client.properties").read_text()
    assert (tmp_path / "client.properties").stat().st_mode & 0o777 == 0o600
    assert "user_alice" not in secured["listener.name.controller.plain.sasl.jaas.config"]
    broker_specs(ClusterLayout(brokers=3, data_dir=tmp_path, secure=True))
    assert (tmp_path / "pki" / "ca.pem").read_text() == ca  # a restart keeps the CA clients trust


def test_a_smaller_cluster_lowers_replication_settings_it_cannot_meet() -> None:
    settings = read_cluster_settings(CLUSTER_DIR)
    assert fit_to_cluster(settings, 3) == (settings, [])
    fitted, notes = fit_to_cluster(settings, 1)
    assert fitted["default.replication.factor"] == "1" and fitted["min.insync.replicas"] == "1"
    assert fitted["offsets.topic.replication.factor"] == "1"
    assert {k: v for k, v in fitted.items() if settings[k] != v} == {
        "default.replication.factor": "1",
        "offsets.topic.replication.factor": "1",
        "min.insync.replicas": "1",
    }
    assert notes[0] == "default.replication.factor=1 (the cluster files say 3; this cluster has 1)"
    two, _ = fit_to_cluster(settings, 2)
    assert (two["default.replication.factor"], two["min.insync.replicas"]) == ("2", "2")


def test_broker_files_that_disagree_are_refused(tmp_path: Path) -> None:
    (tmp_path / "broker-1.properties").write_text("node.id=1\nmin.insync.replicas=2\n")
    (tmp_path / "broker-2.properties").write_text("node.id=2\nmin.insync.replicas=1\n")
    with pytest.raises(DevClusterError, match=r"min\.insync\.replicas differs"):
        read_cluster_settings(tmp_path)
    with pytest.raises(DevClusterError, match="no broker-"):
        read_cluster_settings(tmp_path / "missing")


def test_default_cluster_config_falls_back_to_the_source_tree(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert default_cluster_config_dir() == CLUSTER_DIR


def test_broker_command_runs_the_broker_module(tmp_path: Path) -> None:
    (spec,) = broker_specs(ClusterLayout(brokers=1, data_dir=tmp_path))
    argv = broker_command(spec, tmp_path / "cluster.properties")
    assert argv[:5] == [sys.executable, "-m", "broker", "--config", str(tmp_path / "cluster.properties")]
    assert "node.id=1" in argv and f"log.dirs={tmp_path.resolve() / 'broker-1'}" in argv


# -- ports ---------------------------------------------------------------------------------------


@contextlib.contextmanager
def _listening() -> Iterator[int]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


def test_port_checks_name_the_port() -> None:
    with _listening() as busy:
        assert port_in_use("127.0.0.1", busy)
        with pytest.raises(DevClusterError, match=rf"port {busy} \(broker-2 client port\) is already in use"):
            check_ports(
                "127.0.0.1", [(busy - 1 if busy > 1 else busy + 1, "x"), (busy, "broker-2 client port")]
            )
    with pytest.raises(DevClusterError, match="port 9404 is both the a and the b"):
        check_ports("127.0.0.1", [(9404, "a"), (9404, "b")])
    with pytest.raises(DevClusterError, match="port 70000"):
        check_ports("127.0.0.1", [(70000, "a")])


# -- output --------------------------------------------------------------------------------------


def test_line_splitter_handles_any_chunking() -> None:
    splitter = LineSplitter()
    assert splitter.feed(b"one\ntw") == ["one"]
    assert splitter.feed(b"o\r\n\nthr") == ["two", ""]
    assert splitter.feed(b"\xffee") == []
    assert splitter.flush() == ["thr\ufffdee"]
    assert splitter.flush() == []


def test_console_tags_have_a_fixed_width_and_colour_only_on_request() -> None:
    out, err = io.StringIO(), io.StringIO()
    names = [f"broker-{i}" for i in (1, 2, 10)]
    plain = Console(names, out, err)  # a StringIO is not a terminal
    plain.lines("broker-1", ["hello"])
    plain.lines("broker-10", ["world"])
    plain.notice("stopping")
    assert out.getvalue().splitlines() == ["broker-1    | hello", "broker-10   | world"]
    assert err.getvalue() == "dev-cluster | stopping\n"
    coloured = io.StringIO()
    Console(names, coloured, err, colour=True).lines("broker-2", ["x"])
    assert coloured.getvalue() == "\x1b[33mbroker-2    |\x1b[0m x\n"


def test_help_documents_the_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["dev-cluster", "--help"])
    assert exc.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    for expected in (
        "--brokers",
        "--data-dir",
        "--base-port",
        "--metrics-base-port",
        "--controller-port",
        "--cluster-config",
        "--stop-timeout",
        "bootstrap.servers=",
        "config/cluster/broker-*.properties",
        "SIGTERM",
        "status 1",
        "already in use",
    ):
        assert expected in text, expected


# -- the real command ----------------------------------------------------------------------------


@pytest.fixture
def start_cluster(tmp_path: Path) -> Iterator[Callable[[int], DevCluster]]:
    """Start ``kipling dev-cluster`` processes of the test's own; whatever is left is killed afterwards."""
    started: list[DevCluster] = []

    def start(brokers: int, **options: Any) -> DevCluster:
        cluster = DevCluster(tmp_path / f"run{len(started)}", brokers, **options)
        started.append(cluster)
        return cluster

    yield start
    for cluster in started:
        cluster.stop()


def _alive(pid: int) -> bool:
    try:
        os.killpg(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _gone(pid: int, timeout_s: float) -> bool:
    """Whether ``pid`` is dead, allowing a killed orphan the moment init needs to reap it."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            return True
        if state == "Z":
            return True
        time.sleep(0.05)
    return False


def _healthcheck_command(port: int) -> list[str]:
    """The Dockerfile's HEALTHCHECK, pointed at ``port``."""
    text = (ROOT / "Dockerfile").read_text()
    match = re.search(r"HEALTHCHECK[^\n]*\\\n\s*CMD (\[.*\])", text)
    assert match is not None
    argv = json.loads(match.group(1))
    return [
        sys.executable if argv[0] == "python" else argv[0],
        *(a.replace("9092", str(port)) for a in argv[1:]),
    ]


def test_three_brokers_serve_then_stop_on_sigterm(start_cluster: Callable[..., DevCluster]) -> None:
    cluster = start_cluster(3)
    cluster.wait_until_serving()
    for i in range(3):
        with urllib.request.urlopen(f"http://127.0.0.1:{cluster.metrics + i}/metrics", timeout=5) as response:
            assert response.status == 200
            assert b"kafka_" in response.read()
    # The image's health check speaks to a broker as Docker would.
    assert subprocess.run(_healthcheck_command(cluster.base), timeout=10).returncode == 0
    pids = cluster.pids()
    assert sorted(pids) == ["broker-1", "broker-2", "broker-3"]

    started = time.monotonic()
    cluster.process.send_signal(signal.SIGTERM)
    assert cluster.process.wait(timeout=15) == 0, cluster.err()
    assert time.monotonic() - started < 15
    assert not [name for name, pid in pids.items() if _alive(pid)], "a broker survived dev-cluster"

    out = cluster.out().splitlines()
    assert out[0] == "bootstrap.servers=" + ",".join(f"127.0.0.1:{p}" for p in cluster.ports)
    for name in pids:
        assert any(line.startswith(f"{name}    | ") and "node started" in line for line in out), name
        assert f"{name} stopped (exit code 0)" in cluster.err()
    assert (cluster.data_dir / "broker-1" / "meta.properties").exists()


def _produce_and_commit(bootstrap: str, timeout_s: float = 60.0) -> None:
    """Records in a replicated topic, then a group commit, which creates ``__consumer_offsets``
    (50 partitions, replicated to all three brokers): many logs in every follower process."""
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.structs import OffsetAndMetadata

    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    try:
        for partition in range(3):
            producer.send("orders", b"x", partition=partition).get(timeout=30)
    finally:
        producer.close(timeout=10)
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id="clean-stop", enable_auto_commit=False)
    try:
        tp = TopicPartition("orders", 0)
        consumer.assign([tp])
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                consumer.commit({tp: OffsetAndMetadata(1, "", -1)})
                return
            except Exception:  # the offsets topic is being created: its coordinator is not ready yet
                assert time.monotonic() < deadline, "the group commit never succeeded"
                time.sleep(0.5)
    finally:
        consumer.close()


def _sigint_and_wait(cluster: DevCluster, timeout_s: float = 90.0) -> None:
    cluster.process.send_signal(signal.SIGINT)
    assert cluster.process.wait(timeout=timeout_s) == 0, cluster.err()


@pytest.mark.slow
def test_ctrl_c_leaves_every_log_dir_clean(start_cluster: Callable[..., DevCluster]) -> None:
    """Ctrl-C while leadership of many partitions moves (every broker stops at once, each with a
    controlled shutdown) still hands every followed log back closed: every broker's log dir gets
    the clean-shutdown marker, and the next start recovers nothing."""
    cluster = start_cluster(3, stop_timeout_s=60)
    cluster.wait_until_serving(timeout_s=60)
    first = cluster.out()
    assert first.count("first start: new log directory") == 3, first
    assert "unclean shutdown" not in first
    _produce_and_commit(f"127.0.0.1:{cluster.base}")
    log_dirs = [cluster.data_dir / f"broker-{i}" for i in (1, 2, 3)]
    deadline = time.monotonic() + 30  # every broker has a replica of every partition
    while any(len(list(d.glob("__consumer_offsets-*"))) < 50 for d in log_dirs):
        assert time.monotonic() < deadline, "__consumer_offsets was not created on every broker"
        time.sleep(0.2)
    _sigint_and_wait(cluster)

    out = cluster.out()
    assert "not marking the log dir clean" not in out, out[-5000:]
    assert [d.name for d in log_dirs if not (d / CLEAN_SHUTDOWN_MARKER).exists()] == []

    again = start_cluster(3, stop_timeout_s=60, data_dir=cluster.data_dir)
    again.wait_until_serving(timeout_s=60)
    _sigint_and_wait(again)
    out = again.out()
    for name in ("broker-1", "broker-2", "broker-3"):
        assert any(
            line.startswith(f"{name} ") and "log dir loaded after a clean shutdown: no recovery" in line
            for line in out.splitlines()
        ), name
    assert "unclean shutdown" not in out and "recovered=True" not in out
    assert "first start" not in out
    assert all((d / CLEAN_SHUTDOWN_MARKER).exists() for d in log_dirs)


def test_a_one_broker_cluster_takes_acks_all_writes(start_cluster: Callable[..., DevCluster]) -> None:
    """--brokers 1 runs the cluster path on one node with the replication settings lowered to fit."""
    from kafka import KafkaProducer

    cluster = start_cluster(1)
    cluster.wait_until_serving()
    producer = KafkaProducer(bootstrap_servers=f"127.0.0.1:{cluster.base}", acks="all")
    try:
        metadata = producer.send("one-node", b"hello", partition=0).get(timeout=20)
    finally:
        producer.close()
    assert (metadata.partition, metadata.offset) == (0, 0)
    assert "lowered default.replication.factor=1" in cluster.err()


def _wait_for(cluster: DevCluster, text: str, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while text not in cluster.err():
        assert time.monotonic() < deadline, f"no {text!r} in:\n{cluster.err()}"
        time.sleep(0.05)


def test_a_broker_that_dies_leaves_the_others_running(start_cluster: Callable[..., DevCluster]) -> None:
    """A failover can be watched from one terminal: the others keep serving; Ctrl-C then stops
    them and the status says a broker died (1)."""
    cluster = start_cluster(2)
    cluster.wait_until_serving()
    pids = cluster.pids()
    os.kill(pids["broker-2"], signal.SIGKILL)
    _wait_for(cluster, "broker-2 exited on its own (killed by SIGKILL); the other brokers keep running")
    assert cluster.process.poll() is None and _alive(pids["broker-1"])
    with WireClient(cluster.base, timeout_s=5) as client:  # broker 1 still answers
        body = {"client_software_name": "dev-cluster-test", "client_software_version": "1"}
        assert client.request(ApiKey.API_VERSIONS, 3, body).body.error_code == 0
    cluster.process.send_signal(signal.SIGTERM)
    assert cluster.process.wait(timeout=60) == 1, cluster.err()
    assert "broker-1 stopped (exit code 0)" in cluster.err()
    assert not _alive(pids["broker-1"])


def test_a_broker_that_dies_is_started_again_with_restart_after(
    start_cluster: Callable[..., DevCluster],
) -> None:
    cluster = start_cluster(2, restart_after_s=0.5)
    cluster.wait_until_serving()
    first = cluster.pids()["broker-2"]
    os.kill(first, signal.SIGKILL)
    _wait_for(cluster, "broker-2 exited on its own (killed by SIGKILL); restarting it in 0.5 s")
    deadline = time.monotonic() + 30
    while cluster.pids()["broker-2"] == first:
        assert time.monotonic() < deadline, cluster.err()
        time.sleep(0.05)
    cluster.wait_until_serving(timeout_s=60)
    _sigint_and_wait(cluster)  # every broker that died was restarted: status 0
    assert "broker-2 stopped (exit code 0)" in cluster.err()


def test_dev_cluster_stops_when_no_broker_is_left(start_cluster: Callable[..., DevCluster]) -> None:
    cluster = start_cluster(1)
    cluster.wait_until_serving()
    os.kill(cluster.pids()["broker-1"], signal.SIGKILL)
    assert cluster.process.wait(timeout=30) == 1, cluster.err()
    assert "no broker is running: stopping" in cluster.err()


def test_a_port_in_use_is_reported_before_anything_starts(tmp_path: Path) -> None:
    base, metrics, controller = free_layout(3)
    data_dir = tmp_path / "cluster"
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", base + 1))
        busy.listen()
        result = subprocess.run(
            [
                *kipling_command(),
                "dev-cluster",
                "--brokers=3",
                f"--data-dir={data_dir}",
                f"--base-port={base}",
                f"--metrics-base-port={metrics}",
                f"--controller-port={controller}",
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=30,
        )
    assert result.returncode == 2
    assert f"port {base + 1} (broker-2 client port) is already in use" in result.stderr
    assert result.stdout == ""
    assert not data_dir.exists()
    assert not port_in_use("127.0.0.1", base), "broker-1 must not have been started"


# -- the supervisor with stand-in children -------------------------------------------------------

STUBBORN_CHILD = """
import signal, subprocess, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
grandchild = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
print("grandchild", grandchild.pid, flush=True)
print("no newline at the end", end="", flush=True)
time.sleep(60)
"""


async def test_a_child_that_ignores_sigterm_is_killed_with_its_group() -> None:
    """The stop timeout is a promise: a broker stuck in shutdown, and any process it started, go."""
    out, err = io.StringIO(), io.StringIO()
    console = Console(["broker-1"], out, err)
    supervisor = Supervisor(
        [("broker-1", [sys.executable, "-c", STUBBORN_CHILD])], console, stop_timeout_s=0.5
    )

    async def stop_when_ready() -> None:
        while "grandchild" not in out.getvalue():
            await asyncio.sleep(0.02)
        supervisor.request_stop("test")

    stopper = asyncio.create_task(stop_when_ready())
    assert await asyncio.wait_for(supervisor.run(), timeout=15) == 0
    await stopper
    grandchild = int(re.search(r"grandchild (\d+)", out.getvalue()).group(1))  # type: ignore[union-attr]
    assert _gone(grandchild, timeout_s=5), "the broker's own child survived"
    assert "broker-1    | no newline at the end" in out.getvalue().splitlines()
    assert "broker-1 did not stop in time: killing it" in err.getvalue()
    assert "broker-1 stopped (killed by SIGKILL)" in err.getvalue()
    assert "processes left by" not in err.getvalue(), "the group was already killed whole"
