"""`kipling broker` starting and stopping, as an operator sees it: real processes, their output.

* A start that cannot succeed (a log dir that is a file, cannot be created or written, a port in
  use, a log dir of another node or cluster, an invalid value) exits non-zero with one line on
  stderr, ``error: <key or resource>: <problem>``, and no traceback (``--log-level debug`` has it).
* A fresh log dir says it is a first start, not an unclean shutdown; a stop by SIGINT leaves the
  clean-shutdown marker, and the next start says it needs no recovery.
"""

from __future__ import annotations

import fcntl
import os
import re
import signal
import socket
import subprocess
import tarfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.meta_properties import MetaPropertiesError
from broker.startup import EXIT_INVALID_CONFIG, StartupError, as_startup_error, bound, check_log_dirs
from server_common.config import ConfigError
from storage.checkpoint import CLEAN_SHUTDOWN_MARKER
from storage.errors import KiplingStorageError
from tests.integration.broker_process import BrokerProcess, free_port
from tests.integration.dev_cluster_process import CLUSTER_DIR, ROOT, free_layout, kipling_command

START_TIMEOUT_S = 60
FIRST_START = "first start: new log directory"
CLEAN_START = "log dir loaded after a clean shutdown: no recovery"
UNCLEAN = "unclean shutdown"
IN_USE = "cannot be bound: Address already in use"


# -- the helpers, in-process -----------------------------------------------------------------------


def test_check_log_dirs_names_the_directory_and_the_problem(tmp_path: Path) -> None:
    afile = tmp_path / "afile"
    afile.write_text("x")
    check_log_dirs([tmp_path / "a" / "b"])
    assert (tmp_path / "a" / "b").is_dir() and os.listdir(tmp_path / "a" / "b") == []
    with pytest.raises(StartupError, match=rf"^log\.dirs: {afile} is a file, not a directory$"):
        check_log_dirs([tmp_path, afile])
    with pytest.raises(StartupError, match=r"^log\.dirs: .*/afile/sub cannot be created: Not a directory$"):
        check_log_dirs([afile / "sub"])


def test_known_failures_become_startup_errors_naming_the_key() -> None:
    config = as_startup_error(ConfigError.invalid("num.partitions", "x", "expected an integer"))
    assert config.exit_code == EXIT_INVALID_CONFIG and "num.partitions" in str(config)
    assert str(as_startup_error(MetaPropertiesError("m belongs to node 2", key="node.id"))).startswith(
        "node.id: "
    )
    assert str(as_startup_error(KiplingStorageError("in use"))) == "log.dirs: in use"
    assert (
        str(as_startup_error(PermissionError(13, "Permission denied", "/x/y"))) == "/x/y: Permission denied"
    )
    unexpected = as_startup_error(RuntimeError("boom"))
    assert "RuntimeError: boom" in str(unexpected) and "--log-level debug" in str(unexpected)


async def test_a_bind_failure_names_the_listener_that_failed() -> None:
    async def fail() -> None:
        raise OSError(98, "error while attempting to bind on address ('127.0.0.1', 9093): address in use")

    addresses = ["PLAINTEXT://127.0.0.1:9092", "INTERNAL://127.0.0.1:9093"]
    with pytest.raises(StartupError) as caught:
        await bound("listeners", addresses, fail())
    assert str(caught.value) == "listeners: INTERNAL://127.0.0.1:9093 cannot be bound: Address already in use"


# -- start-up failures of the real command ---------------------------------------------------------


def run_broker(*overrides: str, log_level: str = "INFO") -> subprocess.CompletedProcess[str]:
    args = [*kipling_command(), "broker", "--log-level", log_level]
    for override in overrides:
        args += ["--override", override]
    return subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=START_TIMEOUT_S)


def single_node(log_dir: Path | str, *more: str) -> list[str]:
    return [
        f"log.dirs={log_dir}",
        f"listeners=PLAINTEXT://127.0.0.1:{free_port()}",
        "metrics.listener=",
        *more,
    ]


def assert_one_error_line(result: subprocess.CompletedProcess[str], expected: str) -> str:
    """Non-zero exit, exactly one ``error:`` line on stderr (the last), matching ``expected``."""
    output = result.stdout + result.stderr
    assert result.returncode != 0, output
    assert "Traceback" not in output, output
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, result.stderr
    assert re.fullmatch(expected, errors[0]), errors[0]
    assert result.stderr.rstrip("\n").splitlines()[-1] == errors[0]
    return errors[0]


@pytest.fixture
def busy_port() -> Iterator[int]:
    """A loopback port something else listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


def test_log_dirs_that_is_a_file(tmp_path: Path) -> None:
    afile = tmp_path / "afile"
    afile.write_text("not a directory")
    result = run_broker(*single_node(afile))
    assert_one_error_line(result, rf"error: log\.dirs: {afile} is a file, not a directory")
    assert afile.read_text() == "not a directory"


@pytest.mark.parametrize(
    ("where", "reason"), [("under-a-file", "Not a directory"), ("proc", "No such file or directory")]
)
def test_log_dirs_that_cannot_be_created(tmp_path: Path, where: str, reason: str) -> None:
    (tmp_path / "afile").write_text("x")
    log_dir = tmp_path / "afile" / "logs" if where == "under-a-file" else Path(f"/proc/kipling-{os.getpid()}")
    result = run_broker(*single_node(log_dir))
    assert_one_error_line(result, rf"error: log\.dirs: {log_dir} cannot be created: {reason}")


def _unwritable_dir(tmp_path: Path) -> Path:
    """A directory this process cannot create files in (root ignores permission bits: sysfs)."""
    if os.geteuid() != 0:
        directory = tmp_path / "read-only"
        directory.mkdir(mode=0o555)
        return directory
    directory = Path("/sys/kernel")
    try:
        os.close(os.open(directory / "kipling-probe", os.O_CREAT | os.O_WRONLY))
    except OSError:
        return directory
    os.unlink(directory / "kipling-probe")
    pytest.skip("no unwritable directory on this machine")


def test_a_log_dir_that_is_not_writable(tmp_path: Path) -> None:
    log_dir = _unwritable_dir(tmp_path)
    result = run_broker(*single_node(log_dir))
    assert_one_error_line(result, rf"error: log\.dirs: {log_dir} is not writable: .+")


def test_a_log_dir_locked_by_another_broker(tmp_path: Path) -> None:
    log_dir = tmp_path / "logs"
    log_dir.mkdir()
    with (log_dir / ".lock").open("a") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        result = run_broker(*single_node(log_dir))
    assert_one_error_line(result, r"error: log\.dirs: log directory .* is in use by another broker.*")


def test_a_listener_port_in_use(tmp_path: Path, busy_port: int) -> None:
    result = run_broker(
        f"log.dirs={tmp_path / 'logs'}", f"listeners=PLAINTEXT://127.0.0.1:{busy_port}", "metrics.listener="
    )
    assert_one_error_line(
        result,
        rf"error: listeners: PLAINTEXT://127\.0\.0\.1:{busy_port} {IN_USE}",
    )


def test_the_metrics_port_in_use(tmp_path: Path, busy_port: int) -> None:
    result = run_broker(*single_node(tmp_path / "logs")[:2], f"metrics.listener=127.0.0.1:{busy_port}")
    assert_one_error_line(result, rf"error: metrics\.listener: 127\.0\.0\.1:{busy_port} {IN_USE}")


def test_the_controller_port_of_a_cluster_node_in_use(tmp_path: Path, busy_port: int) -> None:
    result = run_broker(
        f"log.dirs={tmp_path / 'logs'}",
        "node.id=1",
        "process.roles=broker,controller",
        f"controller.quorum.voters=1@127.0.0.1:{busy_port}",
        "controller.listener.names=CONTROLLER",
        f"listeners=PLAINTEXT://127.0.0.1:{free_port()},CONTROLLER://127.0.0.1:{busy_port}",
        "listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
        "metrics.listener=",
    )
    assert_one_error_line(
        result,
        rf"error: listeners: CONTROLLER://127\.0\.0\.1:{busy_port} {IN_USE}",
    )


def test_an_invalid_config_value(tmp_path: Path) -> None:
    result = run_broker(*single_node(tmp_path / "logs", "num.partitions=many"))
    assert result.returncode == EXIT_INVALID_CONFIG
    assert_one_error_line(result, r"error: invalid configuration: .*'many'.*num\.partitions.*")
    assert not (tmp_path / "logs").exists()


@pytest.mark.parametrize(
    ("override", "expected"),
    [
        ("node.id=2", r"error: node\.id: .*meta\.properties belongs to node 7, not node\.id=2"),
        (
            "cluster.id=AAAAAAAAAAAAAAAAAAAAAA",
            r"error: cluster\.id: .*meta\.properties belongs to cluster c1, not cluster\.id=A{22}",
        ),
    ],
)
def test_a_log_dir_of_another_node_or_cluster(tmp_path: Path, override: str, expected: str) -> None:
    log_dir = tmp_path / "logs"
    log_dir.mkdir()
    (log_dir / "meta.properties").write_text("version=1\ncluster.id=c1\nnode.id=7\n")
    node = [] if override.startswith("node.id") else ["node.id=7"]
    result = run_broker(*single_node(log_dir, *node, override))
    assert_one_error_line(result, expected)


def test_debug_logging_keeps_the_traceback(tmp_path: Path) -> None:
    afile = tmp_path / "afile"
    afile.write_text("x")
    result = run_broker(*single_node(afile), log_level="debug")
    assert result.returncode != 0
    assert "Traceback" in result.stderr
    assert (
        result.stderr.rstrip("\n").splitlines()[-1] == f"error: log.dirs: {afile} is a file, not a directory"
    )


def test_dev_cluster_names_a_log_dir_it_cannot_use(tmp_path: Path) -> None:
    base, metrics, controller = free_layout(2)
    data_dir = tmp_path / "cluster"
    data_dir.mkdir()
    (data_dir / "broker-2").write_text("in the way")
    result = subprocess.run(
        [
            *kipling_command(),
            "dev-cluster",
            "--brokers=2",
            f"--data-dir={data_dir}",
            f"--base-port={base}",
            f"--metrics-base-port={metrics}",
            f"--controller-port={controller}",
            f"--cluster-config={CLUSTER_DIR}",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=START_TIMEOUT_S,
    )
    assert result.returncode == 2
    assert "Traceback" not in result.stdout + result.stderr
    assert result.stderr.splitlines() == [
        f"dev-cluster: broker-2: log.dirs: {data_dir / 'broker-2'} is a file, not a directory"
    ]


# -- first start, clean stop, clean restart --------------------------------------------------------


def _produce(bootstrap: str, topic: str, count: int) -> None:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    try:
        for i in range(count):
            producer.send(topic, f"record-{i}".encode(), partition=i % 2)
        producer.flush(timeout=30)
    finally:
        producer.close(timeout=10)


def _output_since_last_start(broker: BrokerProcess) -> str:
    return broker.output().rsplit("--- kipling-tests: starting broker", 1)[-1]


@pytest.fixture
def fresh_broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    broker = BrokerProcess(tmp_path / "broker", overrides=["num.partitions=2"])
    try:
        yield broker
    finally:
        broker.stop(signal.SIGKILL)


def test_first_start_then_a_clean_stop_and_a_restart_without_recovery(fresh_broker: BrokerProcess) -> None:
    log_dir = fresh_broker.data_dir / "logs"
    fresh_broker.start(timeout_s=START_TIMEOUT_S)
    first = _output_since_last_start(fresh_broker)
    assert FIRST_START in first and f"log_dir={log_dir}" in first
    assert UNCLEAN not in first and "clean_shutdown=False" not in first

    _produce(fresh_broker.bootstrap, "orders", 10)
    assert fresh_broker.stop(signal.SIGINT, timeout_s=30) == 0
    assert (log_dir / CLEAN_SHUTDOWN_MARKER).exists()
    assert "not marking the log dir clean" not in fresh_broker.output()

    fresh_broker.start(timeout_s=START_TIMEOUT_S)
    second = _output_since_last_start(fresh_broker)
    # two partitions of orders and the metadata log, __cluster_metadata-0
    assert CLEAN_START in second and "logs=3" in second, second
    assert FIRST_START not in second and UNCLEAN not in second
    assert re.findall(r"log loaded .*recovered=(\w+)", second) == ["False"] * 3, second
    assert not (log_dir / CLEAN_SHUTDOWN_MARKER).exists(), "the marker goes while the broker runs"

    assert fresh_broker.stop(signal.SIGKILL) != 0
    fresh_broker.start(timeout_s=START_TIMEOUT_S)
    third = _output_since_last_start(fresh_broker)
    assert UNCLEAN in third and CLEAN_START not in third and FIRST_START not in third


def test_sigterm_during_start_up_exits_cleanly_without_an_error(tmp_path: Path) -> None:
    """A cluster node whose controller never answers can still be stopped: status 0, no error line."""
    log_dir = tmp_path / "logs"
    args = [*kipling_command(), "broker"]
    for override in single_node(
        log_dir,
        "node.id=2",
        "process.roles=broker",
        f"controller.quorum.voters=1@127.0.0.1:{free_port()}",
        "controller.listener.names=CONTROLLER",
        "listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
    ):
        args += ["--override", override]
    process = subprocess.Popen(args, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not (log_dir / "meta.properties").exists():
            assert process.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
        time.sleep(1)
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 0, err
    assert "Traceback" not in err and not [line for line in err.splitlines() if line.startswith("error:")]
    assert (log_dir / CLEAN_SHUTDOWN_MARKER).exists()


def _legacy_log_dir(tmp_path: Path) -> Path:
    """A log dir of the earlier single-node release (tests/fixtures/legacy-single-node.tar.gz)."""
    with tarfile.open(ROOT / "tests" / "fixtures" / "legacy-single-node.tar.gz") as archive:
        archive.extractall(tmp_path, filter="data")
    return tmp_path / "data"


def test_a_legacy_log_dir_is_refused_by_a_node_that_cannot_import_it(tmp_path: Path) -> None:
    """Only a voter imports the old topic file; a broker-only node would delete those logs as
    strays, so it refuses to start and says how to import them."""
    log_dir = _legacy_log_dir(tmp_path)
    result = run_broker(
        *single_node(
            log_dir,
            "process.roles=broker",
            f"controller.quorum.voters=2@127.0.0.1:{free_port()}",  # the controller is another node
            "controller.listener.names=CONTROLLER",
        )
    )
    assert_one_error_line(
        result,
        r"error: log\.dirs: .*__kipling_metadata\.json holds topics of an earlier single-node release.*",
    )
    _assert_untouched(log_dir)


def _assert_untouched(log_dir: Path) -> None:
    """A refused legacy log dir is as the earlier release left it: files, marker, no metadata log."""
    assert (log_dir / "__kipling_metadata.json").exists() and (log_dir / "orders-0").is_dir()
    assert (log_dir / CLEAN_SHUTDOWN_MARKER).exists(), "the next start would recover every log"
    assert not (log_dir / "__cluster_metadata-0").exists()


def test_a_legacy_log_dir_of_another_node_is_refused(tmp_path: Path) -> None:
    log_dir = _legacy_log_dir(tmp_path)
    (log_dir / "meta.properties").unlink()  # so that only the topic file says whose it is
    result = run_broker(*single_node(log_dir, "node.id=2"))
    assert not (log_dir / "meta.properties").exists(), "refused before the log dir is formatted"
    assert_one_error_line(result, r"error: log\.dirs: .*written by node 1, but this is node 2.*")


def test_a_legacy_log_dir_not_listed_first_is_refused(tmp_path: Path) -> None:
    """The earlier release kept its topic file in the first log dir; found elsewhere (log.dirs
    reordered), it is not imported by guess: the start is refused, nothing is deleted."""
    log_dir = _legacy_log_dir(tmp_path)
    first = tmp_path / "first"
    result = run_broker(*single_node(f"{first},{log_dir}"))
    assert_one_error_line(result, r"error: log\.dirs: .*is not in the first of log\.dirs: list .* first.*")
    _assert_untouched(log_dir)


def test_legacy_topics_the_metadata_log_lacks_are_refused(tmp_path: Path) -> None:
    """A node that already has a metadata log never imports: legacy files it does not account for
    are refused (its stray-log rules would delete their logs); the log dir is left clean."""
    log_dir = tmp_path / "data"
    node = BrokerProcess(tmp_path / "node")
    node.overrides = [f"log.dirs={log_dir}"]
    node.start(timeout_s=START_TIMEOUT_S)
    assert node.stop() == 0
    legacy = _legacy_log_dir(tmp_path / "legacy")
    (legacy / "__kipling_metadata.json").rename(log_dir / "__kipling_metadata.json")
    result = run_broker(*single_node(log_dir))
    assert_one_error_line(
        result, r"error: log\.dirs: .*that the metadata log does not: move the file aside.*"
    )
    assert (log_dir / "__kipling_metadata.json").exists() and (log_dir / CLEAN_SHUTDOWN_MARKER).exists()


def test_an_import_interrupted_before_the_rename_only_renames(tmp_path: Path) -> None:
    """A crash after the import batch but before the files were renamed: the next start finds every
    legacy topic in the metadata log, imports nothing twice and renames the files."""
    log_dir = _legacy_log_dir(tmp_path)
    node = BrokerProcess(tmp_path / "node")
    node.overrides = [f"log.dirs={log_dir}", "offsets.topic.num.partitions=2"]
    node.start(timeout_s=START_TIMEOUT_S)
    assert node.stop() == 0
    for name in ("__kipling_metadata.json", "__kipling_producer_id_block"):
        (log_dir / f"{name}.imported").rename(log_dir / name)  # as if the rename never happened
    node.start(timeout_s=START_TIMEOUT_S)
    try:
        assert not (log_dir / "__kipling_metadata.json").exists()
        assert (log_dir / "__kipling_metadata.json.imported").exists()
        assert "metadata imported" not in _output_since_last_start(node)
    finally:
        assert node.stop() == 0
