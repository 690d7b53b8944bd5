"""The deployment files agree with each other and with `kipling dev-cluster`.

docker-compose.yml, config/cluster/*.properties, config/prometheus.yml, the Dockerfile and the dev
cluster describe one cluster from several places; nothing but these tests notices when one of them
drifts (a published port that is not the advertised one, a Prometheus target on the wrong port, a
replication setting changed in one broker file only).
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from server_common.config import BrokerConfig, load_config
from server_common.config.properties import read_properties_file
from tools.commands import dev_certs
from tools.dev_cluster import (
    NODE_KEYS,
    ClusterLayout,
    broker_specs,
    cluster_wide,
    load_broker_configs,
    read_cluster_settings,
)

ROOT = Path(__file__).resolve().parent.parent
COMPOSE_FILE = ROOT / "docker-compose.yml"
DOCKERFILE = ROOT / "Dockerfile"
CLUSTER_DIR = ROOT / "config" / "cluster"
PROMETHEUS_FILE = ROOT / "config" / "prometheus.yml"
BROKER_CONFIG_PATH = "/etc/kipling/server.properties"
DATA_VOLUME_PATH = "/var/lib/kipling"

CLUSTER_SETTINGS = {
    "default.replication.factor": "3",
    "min.insync.replicas": "2",
    "num.partitions": "3",
    "offsets.topic.replication.factor": "3",
    "num.replica.fetchers": "2",
    "broker.session.timeout.ms": "9000",
    "broker.heartbeat.interval.ms": "2000",
    "replica.lag.time.max.ms": "30000",
    "unclean.leader.election.enable": "false",
    "auto.create.topics.enable": "true",
}
"""The cluster-wide settings the compose cluster is specified with."""

ADDRESS_KEYS = NODE_KEYS - {"node.id", "broker.id", "process.roles", "controller.listener.names"}
"""What may differ between a container and a dev-cluster broker: addresses, ports, log dirs, metrics."""


# -- helpers -------------------------------------------------------------------------------------


def _compose() -> dict[str, Any]:
    return yaml.safe_load(COMPOSE_FILE.read_text())


def _broker_services() -> dict[str, dict[str, Any]]:
    services = _compose()["services"]
    return {name: spec for name, spec in sorted(services.items()) if name.startswith("broker-")}


def _bind_mounts(service: Mapping[str, Any]) -> dict[str, Path]:
    """Container path -> host path of the service's ``./host:container[:mode]`` volumes."""
    mounts = {}
    for entry in service.get("volumes", []):
        source, target = entry.split(":")[:2]
        if source.startswith("."):
            mounts[target] = (ROOT / source).resolve()
    return mounts


def _named_volumes(service: Mapping[str, Any]) -> dict[str, str]:
    """Container path -> volume name of the service's named volumes."""
    found = {}
    for entry in service.get("volumes", []):
        source, target = entry.split(":")[:2]
        if not source.startswith((".", "/")):
            found[target] = source
    return found


def _published(service: Mapping[str, Any]) -> dict[int, int]:
    """Container port -> host port."""
    result = {}
    for entry in service.get("ports", []):
        host, container = str(entry).split(":")[-2:]
        result[int(container)] = int(host)
    return result


def _compose_configs() -> dict[str, BrokerConfig]:
    configs = {}
    for name, service in _broker_services().items():
        config, warnings = load_config(_bind_mounts(service)[BROKER_CONFIG_PATH])
        assert warnings == [], f"{name}: {warnings}"
        configs[name] = config
    return configs


def _dockerfile_instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    instructions: list[tuple[str, str]] = []
    pending = ""
    for line in DOCKERFILE.read_text().splitlines():
        stripped = line.strip()
        if not pending and (not stripped or stripped.startswith("#")):
            continue
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        full = pending + stripped
        pending = ""
        keyword, _, rest = full.partition(" ")
        instructions.append((keyword.upper(), rest.strip()))
    return instructions


def _dockerfile(keyword: str) -> list[str]:
    return [args for name, args in _dockerfile_instructions() if name == keyword]


# -- compose and the broker files ----------------------------------------------------------------


def test_three_broker_services_each_with_its_config_and_volume() -> None:
    services = _broker_services()
    assert sorted(services) == ["broker-1", "broker-2", "broker-3"]
    volumes = _compose()["volumes"]
    for name, service in services.items():
        assert service["build"] in (".", {"context": "."})
        mounts = _bind_mounts(service)
        assert mounts[BROKER_CONFIG_PATH] == CLUSTER_DIR / f"{name}.properties"
        assert any(entry.endswith(f":{BROKER_CONFIG_PATH}:ro") for entry in service["volumes"])
        volume = _named_volumes(service)[DATA_VOLUME_PATH]
        assert volume in volumes
    data_volumes = [_named_volumes(s)[DATA_VOLUME_PATH] for s in services.values()]
    assert len(set(data_volumes)) == len(data_volumes), "each broker needs its own volume"


def test_every_mounted_file_exists() -> None:
    for name, service in _compose()["services"].items():
        for target, source in _bind_mounts(service).items():
            assert source.is_file(), f"{name} mounts {source} at {target}, which does not exist"


def test_broker_files_load_without_warnings_and_match_their_service() -> None:
    for name, config in _compose_configs().items():
        assert f"broker-{config.node_id}" == name
        assert config.log_dirs[0].is_relative_to(DATA_VOLUME_PATH)
        assert config.inter_broker_listener is not None
        assert config.inter_broker_listener.host == name, "other brokers reach it by its service name"
        assert config.inter_broker_listener_name == "INTERNAL"
        voters = [(v.node_id, v.host) for v in config.controller_quorum_voters]
        assert voters == [(1, "broker-1"), (2, "broker-2"), (3, "broker-3")]  # a quorum of three
        assert config.is_voter, "every node is a broker and a controller voter"


def test_cluster_wide_settings_are_identical_and_as_specified() -> None:
    blocks = [cluster_wide(read_properties_file(path)) for path in sorted(CLUSTER_DIR.glob("*.properties"))]
    assert len(blocks) == 3
    assert all(block == blocks[0] for block in blocks)
    assert CLUSTER_SETTINGS.items() <= blocks[0].items()


def test_each_broker_advertises_the_host_port_compose_publishes() -> None:
    """A host client told ``localhost:9093`` must reach broker-2's EXTERNAL listener through compose."""
    configs = _compose_configs()
    for name, service in _broker_services().items():
        config = configs[name]
        external = next(li for li in config.advertised_listeners if li.name == "EXTERNAL")
        assert external.host == "localhost"
        published = _published(service)
        assert published[config.listener("EXTERNAL").port] == external.port
        assert config.metrics_listener is not None
        assert config.metrics_listener[1] in published
    host_ports = sorted(p for service in _broker_services().values() for p in _published(service).values())
    assert host_ports == [9092, 9093, 9094, 9404, 9405, 9406]


# -- the dev cluster is the same cluster ---------------------------------------------------------


def test_dev_cluster_describes_the_same_cluster(tmp_path: Path) -> None:
    compose = _compose_configs()
    specs = broker_specs(ClusterLayout(brokers=len(compose), data_dir=tmp_path))
    dev = {
        spec.name: config
        for spec, (config, _) in zip(specs, load_broker_configs(specs, read_cluster_settings(CLUSTER_DIR)))
    }
    assert sorted(dev) == sorted(compose)
    for name, ours in dev.items():
        theirs = compose[name]
        assert ours.node_id == theirs.node_id
        assert ours.process_roles == theirs.process_roles
        assert [v.node_id for v in ours.controller_quorum_voters] == [
            v.node_id for v in theirs.controller_quorum_voters
        ]
        assert ours.controller_listener_names == theirs.controller_listener_names
        assert ours.default_replication_factor == theirs.default_replication_factor == 3
        assert ours.min_insync_replicas == theirs.min_insync_replicas == 2
        assert ours.broker_session_timeout_ms == theirs.broker_session_timeout_ms
        assert ours.broker_heartbeat_interval_ms == theirs.broker_heartbeat_interval_ms
        assert ours.replica_lag_time_max_ms == theirs.replica_lag_time_max_ms
        assert ours.cluster_id == theirs.cluster_id is not None
        differing = {key for key in ours.values if ours.values[key] != theirs.values[key]}
        assert differing <= ADDRESS_KEYS, f"{name}: {sorted(differing - ADDRESS_KEYS)} differ"


# -- Prometheus ----------------------------------------------------------------------------------


def test_prometheus_scrapes_every_broker_metrics_port() -> None:
    prometheus = yaml.safe_load(PROMETHEUS_FILE.read_text())
    (job,) = prometheus["scrape_configs"]
    assert job["job_name"] == "kipling"
    assert job.get("scrape_interval", prometheus["global"]["scrape_interval"]) == "5s"
    targets = sorted(t for group in job["static_configs"] for t in group["targets"])
    expected = sorted(f"{name}:{config.metrics_listener[1]}" for name, config in _compose_configs().items())  # type: ignore[index]
    assert targets == expected == ["broker-1:9404", "broker-2:9404", "broker-3:9404"]


def test_prometheus_service() -> None:
    service = _compose()["services"]["prometheus"]
    assert service["image"].split(":")[0] == "prom/prometheus"
    assert _bind_mounts(service)["/etc/prometheus/prometheus.yml"] == PROMETHEUS_FILE
    assert _published(service)[9090] == 9090


# -- the image -----------------------------------------------------------------------------------


def _resolve_args(text: str) -> str:
    """Substitute the Dockerfile's ``ARG`` defaults for ``${NAME}``."""
    args = dict(arg.partition("=")[::2] for arg in _dockerfile("ARG"))
    return re.sub(r"\$\{(\w+)\}", lambda m: args[m.group(1)], text)


def test_dockerfile_runs_the_broker_as_a_non_root_user() -> None:
    (user,) = _dockerfile("USER")
    uid, _, gid = _resolve_args(user).partition(":")
    assert uid.isdigit() and int(uid) >= 1000, f"USER {user} must be a fixed, non-root uid"
    assert gid in ("", uid)
    created = re.search(r"useradd\b[^&]*--uid\s+(\S+)[^&]*\bkipling\b", " ".join(_dockerfile("RUN")))
    assert created is not None, "the kipling user is created"
    assert _resolve_args(created.group(1)) == uid
    assert json.loads(_dockerfile("ENTRYPOINT")[-1]) == ["kipling", "broker"]
    assert json.loads(_dockerfile("CMD")[-1]) == ["--config", BROKER_CONFIG_PATH]


def test_dockerfile_base_volume_ports_and_healthcheck() -> None:
    bases = " ".join(_dockerfile("FROM") + _dockerfile("ARG"))
    assert re.search(r"python:3\.1[12]-slim", bases)
    assert any("pip install --no-cache-dir ." in run for run in _dockerfile("RUN"))
    assert DATA_VOLUME_PATH in json.loads(_dockerfile("VOLUME")[-1])
    assert any(f"chown kipling:kipling {DATA_VOLUME_PATH}" in run for run in _dockerfile("RUN"))
    exposed = {port for line in _dockerfile("EXPOSE") for port in line.split()}
    assert {"9092", "9093", "9404"} <= exposed
    assert _dockerfile("HEALTHCHECK") and _dockerfile("LABEL")


def test_dockerignore_keeps_the_build_context_small() -> None:
    ignored = {
        line.strip()
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    }
    assert {".venv", ".git", "kipling-data", "kipling-cluster", "bench/results"} <= ignored
    assert "README.md" not in ignored, "pyproject.toml names it as the package's readme"


# -- docker-compose's own check ------------------------------------------------------------------


def _compose_command() -> list[str] | None:
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    docker = shutil.which("docker")
    if docker and subprocess.run([docker, "compose", "version"], capture_output=True).returncode == 0:
        return [docker, "compose"]
    return None


def test_docker_compose_accepts_the_file() -> None:
    command = _compose_command()
    if command is None:
        pytest.skip("neither docker-compose nor the docker compose plugin is installed")
    result = subprocess.run(
        [*command, "-f", str(COMPOSE_FILE), "config", "-q"], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr


# -- the secured layer: docker-compose.secure.yml ------------------------------------------------

SECURE_COMPOSE_FILE = ROOT / "docker-compose.secure.yml"


def _secure_services() -> dict[str, Any]:
    return dict(yaml.safe_load(SECURE_COMPOSE_FILE.read_text())["services"])


def _overrides(command: list[str]) -> list[str]:
    """The ``--override`` values of a broker's command line."""
    return [command[i + 1] for i, arg in enumerate(command) if arg == "--override"]


def test_secure_layer_makes_every_listener_sasl_ssl_with_the_certs_service_keystore(tmp_path: Path) -> None:
    services = _secure_services()
    certs = services["certs"]["entrypoint"]
    assert certs[:2] == ["kipling", "dev-certs"]
    pki_dir = certs[certs.index("--dir") + 1]
    hosts = [certs[i + 1] for i, arg in enumerate(certs) if arg == "--host"]
    assert sorted(hosts) == sorted(_broker_services())  # inter-broker TLS checks these host names
    args = [arg.replace(pki_dir, str(tmp_path)) for arg in certs[2:]]
    del args[args.index("--readable-by") : args.index("--readable-by") + 2]
    parser = argparse.ArgumentParser()
    dev_certs.register(parser.add_subparsers())
    parsed = parser.parse_args(["dev-certs", *args])
    assert parsed.func(parsed) == 0  # (not tools.cli.main: it would configure structlog for the worker)
    for name, base in _broker_services().items():
        secure = services[name]
        assert secure["depends_on"]["certs"]["condition"] == "service_completed_successfully"
        assert f"pki:{pki_dir}:ro" in secure["volumes"]
        command = secure["command"]
        assert command[:2] == ["--config", BROKER_CONFIG_PATH]
        overrides = [o.replace(pki_dir, str(tmp_path)) for o in _overrides(command)]
        config, warnings = load_config(_bind_mounts(base)[BROKER_CONFIG_PATH], overrides)
        assert warnings == [], f"{name}: {warnings}"
        assert {s.protocol for s in config.listener_security.values()} == {"SASL_SSL"}, name
        assert config.inter_broker_security().protocol == "SASL_SSL"
        assert config.controller_security().protocol == "SASL_SSL"


def test_docker_compose_accepts_the_secure_layer() -> None:
    command = _compose_command()
    if command is None:
        pytest.skip("neither docker-compose nor the docker compose plugin is installed")
    files = ["-f", str(COMPOSE_FILE), "-f", str(SECURE_COMPOSE_FILE)]
    result = subprocess.run([*command, *files, "config", "-q"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
