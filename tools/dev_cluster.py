"""A local multi-broker cluster for development: N broker processes in the foreground, one output.

``kipling dev-cluster`` and ``docker-compose.yml`` must describe the same cluster, or a behaviour seen
on one would not reproduce on the other. So dev-cluster does not have settings of its own: it reads
the cluster-wide keys from the very files the compose file mounts (``config/cluster/broker-*.properties``)
and rewrites only what differs between containers and one machine's loopback interface: who a node
is and where it listens (:data:`NODE_KEYS`). Each broker is an ordinary ``python -m broker`` process
given a generated ``cluster.properties`` (the cluster-wide keys) plus ``--override`` for its node keys.

The supervisor works like ``docker-compose up``: every child's output is shown line by line behind a
``broker-i |`` tag, Ctrl-C or SIGTERM stops every broker gracefully (SIGTERM, then SIGKILL after a
timeout). A broker that exits on its own is reported and the others keep running (a failover to
watch); ``--restart-after`` starts it again. Each broker runs in its own process group: Ctrl-C in
the terminal reaches only the supervisor, which then stops the brokers in order. A broker's follower
processes run in sessions of their own and exit when their broker's IPC channel closes.
"""

from __future__ import annotations

import asyncio
import socket
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from broker.process_supervisor import (
    DEFAULT_STOP_TIMEOUT_S,
    Console,
    Supervisor,
)
from broker.startup import StartupError, check_log_dirs
from security.dev_certs import DevPki, write_dev_pki
from server_common.config import BrokerConfig, ConfigError
from server_common.config.properties import PropertiesError, read_properties_file

LOOPBACK = "127.0.0.1"
CLIENT_LISTENER = "PLAINTEXT"
CONTROLLER_LISTENER = "CONTROLLER"
QUORUM_VOTERS = 3
"""How many nodes (the first ones) are also controller voters: three, so the quorum survives the
loss of any one, as a production KRaft cluster is usually laid out."""
CONTROLLER_PORT_OFFSET = 100
"""Default first controller port: the base client port plus this, clear of the brokers' client
ports; voter i listens on it plus i - 1."""
DEFAULT_DATA_DIR = Path("kipling-cluster")
DEFAULT_BASE_PORT = 9092
DEFAULT_METRICS_BASE_PORT = 9404
CLUSTER_FILE_PATTERN = "broker-*.properties"
GENERATED_SETTINGS_FILE = "cluster.properties"
MAX_PORT = 65535

NODE_KEYS = frozenset(
    {
        "node.id",
        "broker.id",
        "process.roles",
        "controller.quorum.voters",
        "controller.listener.names",
        "listeners",
        "advertised.listeners",
        "listener.security.protocol.map",
        "inter.broker.listener.name",
        "metrics.listener",
        "log.dirs",
        "log.dir",
    }
)
"""Keys that say who a node is and where it listens. The compose files set them for containers and
dev-cluster sets them for loopback; every other key is cluster-wide and taken from the files as is."""

EXIT_CANNOT_START = 2


class DevClusterError(Exception):
    """A cluster that cannot start; the message says what to change. Raised before anything runs."""


# -- layout: which broker listens where ---------------------------------------------------------


@dataclass(frozen=True)
class ClusterLayout:
    """What the command line asks for: how many brokers, where their data goes, which ports."""

    brokers: int
    data_dir: Path = DEFAULT_DATA_DIR
    base_port: int = DEFAULT_BASE_PORT
    metrics_base_port: int = DEFAULT_METRICS_BASE_PORT
    controller_port: int | None = None
    host: str = LOOPBACK
    secure: bool = False
    """Every listener SASL_SSL (PLAIN logins, certificates of a dev CA), no plaintext port."""

    @property
    def effective_controller_port(self) -> int:
        if self.controller_port is not None:
            return self.controller_port
        return self.base_port + CONTROLLER_PORT_OFFSET


@dataclass(frozen=True)
class BrokerSpec:
    """One broker of the dev cluster: its identity, addresses and log directory."""

    node_id: int
    host: str
    port: int
    metrics_port: int
    controller_port: int
    log_dir: Path
    voters: str = ""
    """``controller.quorum.voters`` of the whole cluster (``id@host:port,...``)."""
    voter_count: int = 1
    pki: DevPki | None = None
    """The dev certificates of a secured cluster (``--secure``); None: every listener PLAINTEXT."""

    @property
    def name(self) -> str:
        return f"broker-{self.node_id}"

    @property
    def is_controller(self) -> bool:
        return self.node_id <= self.voter_count

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def client_listener(self) -> str:
        return SECURE_CLIENT_LISTENER if self.pki is not None else CLIENT_LISTENER

    def node_properties(self) -> dict[str, str]:
        """The :data:`NODE_KEYS` of this broker (and, secured, its TLS and SASL keys), as
        ``--override`` values."""
        client = self.client_listener
        listeners = [f"{client}://{self.host}:{self.port}"]
        if self.is_controller:
            listeners.append(f"{CONTROLLER_LISTENER}://{self.host}:{self.controller_port}")
        protocol = "SASL_SSL" if self.pki is not None else "PLAINTEXT"
        return {
            "node.id": str(self.node_id),
            "process.roles": "broker,controller" if self.is_controller else "broker",
            "controller.quorum.voters": self.voters,
            "controller.listener.names": CONTROLLER_LISTENER,
            "listeners": ",".join(listeners),
            # Empty: advertise the bound client listener, which is already a reachable address.
            "advertised.listeners": "",
            "listener.security.protocol.map": f"{CONTROLLER_LISTENER}:{protocol},{client}:{protocol}",
            "inter.broker.listener.name": client,
            "metrics.listener": f"{self.host}:{self.metrics_port}",
            "log.dirs": str(self.log_dir),
        }

    def ports(self) -> list[tuple[int, str]]:
        """Every port this broker binds, with what it is for (for clear errors)."""
        found = [(self.port, f"{self.name} client port"), (self.metrics_port, f"{self.name} metrics port")]
        if self.is_controller:
            found.append((self.controller_port, f"{self.name} controller port"))
        return found


def broker_specs(layout: ClusterLayout) -> list[BrokerSpec]:
    """Broker i (1-based) listens on base-port + i - 1 and metrics-base-port + i - 1."""
    if layout.brokers < 1:
        raise DevClusterError(f"--brokers must be at least 1, not {layout.brokers}")
    data_dir = layout.data_dir.resolve()
    voter_count = min(layout.brokers, QUORUM_VOTERS)
    first = layout.effective_controller_port
    voters = ",".join(f"{i}@{layout.host}:{first + i - 1}" for i in range(1, voter_count + 1))
    pki = write_dev_certificates(data_dir, layout.host) if layout.secure else None
    return [
        BrokerSpec(
            node_id=i,
            host=layout.host,
            port=layout.base_port + i - 1,
            metrics_port=layout.metrics_base_port + i - 1,
            controller_port=first + i - 1,
            log_dir=data_dir / f"broker-{i}",
            voters=voters,
            voter_count=voter_count,
            pki=pki,
        )
        for i in range(1, layout.brokers + 1)
    ]


# -- a secured cluster (--secure) ----------------------------------------------------------------

SECURE_CLIENT_LISTENER = "SASL_SSL"
PKI_DIR = "pki"
CLIENT_PROPERTIES = "client.properties"
DEV_USERS = {"admin": "admin-secret", "alice": "alice-secret"}
"""PLAIN users of a secured dev cluster: admin is what the brokers log in as (and a super user
once an authorizer is configured), alice a client."""


def _plain_jaas(users: tuple[str, ...]) -> str:
    entries = " ".join(f'user_{name}="{DEV_USERS[name]}"' for name in users)
    return (
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
        f'username="admin" password="{DEV_USERS["admin"]}" {entries};'
    )


def secure_properties(pki: DevPki, client_listener: str) -> dict[str, str]:
    """TLS from the dev CA on every listener and SASL/PLAIN logins on the client (inter-broker)
    and controller listeners, the brokers logging in as admin; only admin may log in to the
    controllers, as only brokers have business there."""
    props = {
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(pki.keystores["broker"]),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(pki.ca),
        "sasl.enabled.mechanisms": "PLAIN",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "sasl.mechanism.controller.protocol": "PLAIN",
    }
    props[f"listener.name.{client_listener.lower()}.plain.sasl.jaas.config"] = _plain_jaas(tuple(DEV_USERS))
    props[f"listener.name.{CONTROLLER_LISTENER.lower()}.plain.sasl.jaas.config"] = _plain_jaas(("admin",))
    return props


def cluster_settings(settings: Mapping[str, str], specs: Sequence[BrokerSpec]) -> dict[str, str]:
    """What every broker reads from the settings file: the cluster files' keys and, secured, the
    TLS and SASL keys (the same on every node; kept out of the command line, where ``ps`` shows
    arguments to everyone, since the JAAS entries hold passwords)."""
    pki = specs[0].pki if specs else None
    if pki is None:
        return dict(settings)
    return {**settings, **secure_properties(pki, specs[0].client_listener)}


def write_dev_certificates(data_dir: Path, host: str) -> DevPki:
    """The dev CA and the brokers' keystore under DATA_DIR/pki, made once and kept across restarts
    (clients keep trusting the same CA), and a ``client.properties`` for ``--command-config``."""
    directory = data_dir / PKI_DIR
    names = ("broker",)
    if (directory / "ca.pem").exists() and all((directory / f"{name}.pem").exists() for name in names):
        pki = DevPki(directory / "ca.pem", {name: directory / f"{name}.pem" for name in names})
    else:
        pki = write_dev_pki(directory, names, hosts=(host,))
    client_properties = data_dir / CLIENT_PROPERTIES
    client_properties.touch(mode=0o600)  # it holds alice's password
    client_properties.chmod(0o600)
    client_properties.write_text(
        "# Written by `kipling dev-cluster --secure`: kipling's tools take it with --command-config.\n"
        "security.protocol=SASL_SSL\n"
        "sasl.mechanism=PLAIN\n"
        "ssl.truststore.type=PEM\n"
        f"ssl.truststore.location={pki.ca}\n"
        "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
        f'username="alice" password="{DEV_USERS["alice"]}";\n'
    )
    return pki


def bootstrap_servers(specs: Sequence[BrokerSpec]) -> str:
    """The line clients need: ``bootstrap.servers=host:port,...``."""
    return "bootstrap.servers=" + ",".join(spec.bootstrap for spec in specs)


# -- configuration: the cluster-wide keys come from the compose files ----------------------------


def default_cluster_config_dir() -> Path:
    """``config/cluster`` of the working directory, else of the source tree kipling runs from."""
    candidates = [
        Path.cwd() / "config" / "cluster",
        Path(__file__).resolve().parents[1] / "config" / "cluster",
    ]
    return next((c for c in candidates if c.is_dir()), candidates[0])


def cluster_files(config_dir: Path) -> list[Path]:
    """The per-broker files of the compose cluster (``broker-*.properties``), sorted by name."""
    files = sorted(config_dir.glob(CLUSTER_FILE_PATTERN))
    if not files:
        raise DevClusterError(f"no {CLUSTER_FILE_PATTERN} files in {config_dir} (see --cluster-config)")
    return files


def cluster_wide(props: Mapping[str, str]) -> dict[str, str]:
    """The keys of one broker file that are the same on every broker (all but :data:`NODE_KEYS`)."""
    return {key: value.strip() for key, value in props.items() if key not in NODE_KEYS}


def read_cluster_settings(config_dir: Path) -> dict[str, str]:
    """The cluster-wide keys shared by every ``broker-*.properties`` file of ``config_dir``.

    The files must agree: a key set differently on two brokers is not cluster-wide, and guessing
    which one dev-cluster should use would make the two clusters differ silently.
    """
    settings: dict[str, str] | None = None
    first: Path | None = None
    for path in cluster_files(config_dir):
        try:
            props = cluster_wide(read_properties_file(path))
        except (OSError, PropertiesError) as exc:
            raise DevClusterError(f"cannot read {path}: {exc}") from exc
        if settings is None:
            settings, first = props, path
            continue
        for key in sorted(set(settings) | set(props)):
            if settings.get(key) != props.get(key):
                raise DevClusterError(
                    f"{key} differs between {first} ({settings.get(key)!r}) and {path} "
                    f"({props.get(key)!r}); cluster-wide keys must be identical in every broker file"
                )
    assert settings is not None
    return settings


_REPLICATION_FACTOR_KEYS = (
    "default.replication.factor",
    "offsets.topic.replication.factor",
    "transaction.state.log.replication.factor",
)
_MIN_ISR_KEYS = {
    "min.insync.replicas": "default.replication.factor",
    "transaction.state.log.min.isr": ("transaction.state.log.replication.factor"),
}


def fit_to_cluster(settings: Mapping[str, str], brokers: int) -> tuple[dict[str, str], list[str]]:
    """Lower replication factors (and their min ISR) that a cluster of ``brokers`` cannot meet.

    The cluster files describe three brokers; ``--brokers 1`` with their replication factor of 3
    would refuse every topic creation (INVALID_REPLICATION_FACTOR). Returns the settings to run
    with and one note per change, so that the console says what differs from the files.
    """
    fitted = dict(settings)
    notes: list[str] = []
    for key in _REPLICATION_FACTOR_KEYS:
        value = fitted.get(key, "").strip()
        if value.lstrip("-").isdigit() and int(value) > brokers:
            fitted[key] = str(brokers)
            notes.append(f"{key}={brokers} (the cluster files say {value}; this cluster has {brokers})")
    for key, factor_key in _MIN_ISR_KEYS.items():
        value, factor = fitted.get(key, "").strip(), fitted.get(factor_key, "").strip()
        if value.isdigit() and factor.isdigit() and int(value) > int(factor):
            fitted[key] = factor
            notes.append(f"{key}={factor} (the cluster files say {value}; at most {factor_key})")
    return fitted, notes


def broker_properties(spec: BrokerSpec, settings: Mapping[str, str]) -> dict[str, str]:
    """Everything one broker runs with: the cluster-wide keys plus its own node keys."""
    return {**settings, **spec.node_properties()}


def load_broker_configs(
    specs: Sequence[BrokerSpec], settings: Mapping[str, str]
) -> list[tuple[BrokerConfig, list[str]]]:
    """Validate every broker's configuration with the broker's own loader, before starting any.

    Raises :class:`DevClusterError` naming the broker whose configuration the broker would refuse.
    """
    configs = []
    for spec in specs:
        try:
            configs.append(BrokerConfig.from_properties(broker_properties(spec, settings)))
        except ConfigError as exc:
            raise DevClusterError(f"{spec.name}: {exc}") from exc
    return configs


def write_settings_file(data_dir: Path, settings: Mapping[str, str], source: Path) -> Path:
    """Write the cluster-wide keys as the ``--config`` file every broker reads."""
    data_dir.mkdir(parents=True, exist_ok=True)
    path = data_dir / GENERATED_SETTINGS_FILE
    path.touch(mode=0o600)  # a secured cluster's JAAS entries hold passwords
    path.chmod(0o600)
    lines = [
        f"# Written by `kipling dev-cluster` from {source}/{CLUSTER_FILE_PATTERN}; rewritten at every",
        "# start. Node keys (ids, roles, listeners, log.dirs, metrics) are passed with --override.",
        *(f"{key}={value}" for key, value in settings.items()),
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


def broker_command(spec: BrokerSpec, settings_file: Path, log_level: str = "INFO") -> list[str]:
    """The argv of one broker process."""
    argv = [sys.executable, "-m", "broker", "--config", str(settings_file), "--log-level", log_level]
    for key, value in spec.node_properties().items():
        argv += ["--override", f"{key}={value}"]
    return argv


# -- ports: refuse to start when one is taken ----------------------------------------------------


def check_ports(host: str, ports: Sequence[tuple[int, str]]) -> None:
    """Raise :class:`DevClusterError` naming the first port that is invalid, repeated or in use.

    Checked before any broker starts, so a clash never leaves half a cluster running.
    """
    seen: dict[int, str] = {}
    for port, what in ports:
        if not 1 <= port <= MAX_PORT:
            raise DevClusterError(f"port {port} ({what}) is not between 1 and {MAX_PORT}")
        if port in seen:
            raise DevClusterError(f"port {port} is both the {seen[port]} and the {what}; choose other ports")
        seen[port] = what
    for port, what in ports:
        if port_in_use(host, port):
            raise DevClusterError(f"port {port} ({what}) is already in use on {host}; nothing was started")


def port_in_use(host: str, port: int) -> bool:
    """Whether binding ``host:port`` fails, with SO_REUSEADDR as the broker binds (so that a port
    left in TIME_WAIT by the previous run is not reported as taken)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return True
    return False


# -- the whole command ---------------------------------------------------------------------------


@dataclass(frozen=True)
class DevClusterOptions:
    """Everything ``kipling dev-cluster`` was asked for."""

    layout: ClusterLayout
    cluster_config_dir: Path
    stop_timeout_s: float = DEFAULT_STOP_TIMEOUT_S
    log_level: str = "INFO"
    restart_after_s: float | None = None


def run_dev_cluster(options: DevClusterOptions, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """Start the cluster and supervise it in the foreground; returns the exit status."""
    out = out if out is not None else sys.stdout
    err = err if err is not None else sys.stderr
    try:
        specs, settings_file, notices = prepare(options)
    except DevClusterError as exc:
        err.write(f"dev-cluster: {exc}\n")
        return EXIT_CANNOT_START
    console = Console([spec.name for spec in specs], out, err)
    for notice in notices:
        console.notice(notice)
    _announce(console, specs, settings_file, options.cluster_config_dir)
    commands = [(spec.name, broker_command(spec, settings_file, options.log_level)) for spec in specs]
    supervisor = Supervisor(
        commands, console, options.stop_timeout_s, restart_after_s=options.restart_after_s
    )
    return asyncio.run(supervisor.run())


def prepare(options: DevClusterOptions) -> tuple[list[BrokerSpec], Path, list[str]]:
    """Everything that can fail before a broker starts, in an order that leaves no trace on failure:
    the layout, the cluster files, every broker's configuration, the ports, then the log
    directories (created, and checked to be writable directories) and the settings file. (A
    secured cluster's dev certificates come first, since the configurations name them; they are
    kept for the next start.)

    Returns the brokers, the settings file and the notices to print: replication settings lowered
    to fit a smaller cluster, then the configuration warnings (each once).
    """
    specs = broker_specs(options.layout)
    settings, fitted = fit_to_cluster(read_cluster_settings(options.cluster_config_dir), len(specs))
    settings = cluster_settings(settings, specs)
    notices = [f"lowered {note}" for note in fitted]
    notices += [
        f"configuration warning: {w}"
        for w in sorted({w for _, ws in load_broker_configs(specs, settings) for w in ws})
    ]
    check_ports(options.layout.host, [port for spec in specs for port in spec.ports()])
    for spec in specs:
        try:
            check_log_dirs([spec.log_dir])
        except StartupError as exc:
            raise DevClusterError(f"{spec.name}: {exc}") from exc
    data_dir = options.layout.data_dir.resolve()
    try:
        settings_file = write_settings_file(data_dir, settings, options.cluster_config_dir)
    except OSError as exc:
        raise DevClusterError(f"cannot write to the data directory {data_dir}: {exc}") from exc
    return specs, settings_file, notices


def _announce(console: Console, specs: Sequence[BrokerSpec], settings_file: Path, source: Path) -> None:
    """Say where everything is before the brokers' own output starts scrolling."""
    console.plain(bootstrap_servers(specs))
    console.notice(f"cluster-wide settings from {source}/{CLUSTER_FILE_PATTERN} (copied to {settings_file})")
    for spec in specs:
        controller = f", controller {spec.host}:{spec.controller_port}" if spec.is_controller else ""
        console.notice(
            f"{spec.name}: node.id={spec.node_id}, client {spec.bootstrap}{controller}, "
            f"metrics http://{spec.host}:{spec.metrics_port}/metrics, data {spec.log_dir}"
        )
    pki = specs[0].pki
    if pki is not None:
        console.notice(
            f"secured: SASL_SSL everywhere, CA {pki.ca}; clients log in with PLAIN as alice/alice-secret "
            f"(tools: --command-config {pki.ca.parent.parent / CLIENT_PROPERTIES}; librdkafka: "
            f"security.protocol=SASL_SSL sasl.mechanisms=PLAIN ssl.ca.location={pki.ca})"
        )
    console.notice("Ctrl-C stops every broker gracefully")
