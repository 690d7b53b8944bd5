"""A node of several broker processes: ``kipling.node.processes`` above 1 uses that many cores.

One broker process runs one event loop, so it uses one core. A node that should use more runs
several brokers, each a plain ``python -m broker`` process, presented to clients the way Kafka
presents brokers sharing a host: as brokers of one rack. Clients need nothing new: Metadata lists
every broker process, topics spread their partitions (and their leaders) over all of them, and
rack-aware placement keeps the replicas of a partition on different hosts when a cluster has several.
Every broker keeps its own fetch sessions, its own segment files and its zero-copy fetch path.

Broker ``i`` (from 0) of a node is derived from the node's config by one rule, :func:`process_overrides`:

* ``node.id`` + i, every listener's port + i (and ``advertised.listeners``, ``metrics.listener``);
* its own log directories: broker 0 keeps ``log.dirs``, broker i uses each directory with ``-i``
  appended (so a node that grows from one process keeps its data on broker 0);
* broker 0 keeps the node's roles; the others are brokers only. A node that is its own controller
  (no ``controller.quorum.voters``) gets a CONTROLLER listener on broker 0, on the first client port +
  the process count, unless it has one, and every broker is told that voter;
* ``broker.rack``, when unset, becomes the host name;
* all join one cluster: ``cluster.id``, else the one in broker 0's ``meta.properties`` (written first
  with a new id on a first start).

The process started by the operator becomes their supervisor (:mod:`broker.process_supervisor`):
it shows their output behind a ``broker-<id> |`` tag (untagged with ``--log-json``), forwards
SIGTERM/SIGINT to all of them for a graceful stop, and stops the whole node when one of them exits
on its own, so that the service manager that restarts a crashed broker restarts the node.
"""

from __future__ import annotations

import asyncio
import socket
import sys
from collections.abc import Sequence
from pathlib import Path

import structlog

from broker.meta_properties import ensure_meta_properties
from broker.process_supervisor import Console, Supervisor
from server_common.config import BrokerConfig, ConfigError
from server_common.config.broker_config import Listener

_log = structlog.get_logger("kipling.node")

PROCESSES_KEY = "kipling.node.processes"
CONTROLLER_LISTENER = "CONTROLLER"
WILDCARD_HOSTS = ("", "0.0.0.0", "::")
LOOPBACK = "127.0.0.1"
STOP_TIMEOUT_S = 300.0
"""How long a broker process may take to stop gracefully (a controlled shutdown, then every log
flushed and checkpointed: minutes with 100,000 partitions) before it is killed; a second SIGTERM,
more than half a second after the first, kills at once. A killed broker recovers its logs at the
next start."""


def process_overrides(
    config: BrokerConfig, cluster_id: str, hostname: str | None = None
) -> list[dict[str, str]]:
    """The config keys each broker process of the node sets over the node's config, broker 0 first.

    Raises :class:`ConfigError` naming the key that keeps the node from being split
    (:func:`check_node`).
    """
    count = config.kipling_node_processes
    check_node(config)
    controller = _controller_listener(config)
    voters = _voters(config, controller)
    rack = config.broker_rack or hostname or socket.gethostname()
    shared = {"cluster.id": cluster_id, "broker.rack": rack, PROCESSES_KEY: "1"}
    return [{**_overrides_of(config, index, controller, voters), **shared} for index in range(count)]


def check_node(config: BrokerConfig) -> None:
    """Raise :class:`ConfigError` if the node cannot be split into its broker processes: a
    controller-only node, a port of 0 (each broker needs ports of its own, known in advance),
    shifted ports that land on another listener's, or node ids that land on a voter's."""
    count = config.kipling_node_processes
    if not config.is_broker:
        raise ConfigError.invalid(PROCESSES_KEY, str(count), "a controller-only node runs one process")
    for listener in config.listeners:
        if listener.port == 0:
            raise ConfigError.invalid(
                "listeners", _joined(config.listeners), f"{PROCESSES_KEY}={count} needs fixed ports, not 0"
            )
    _check_ports_apart(config, _controller_listener(config))
    voter_ids = {voter.node_id for voter in config.controller_quorum_voters}
    taken = sorted(voter_ids & {config.node_id + i for i in range(1, count)})
    if taken:
        raise ConfigError.invalid(
            "node.id",
            str(config.node_id),
            f"with {PROCESSES_KEY}={count} its brokers take node ids {config.node_id} to "
            f"{config.node_id + count - 1}, and {taken[0]} is a controller voter's: space the nodes' "
            f"ids at least {count} apart",
        )


def _controller_listener(config: BrokerConfig) -> Listener | None:
    """Broker 0's controller listener: the node's own, or one added for a node that is its own
    controller (the other brokers must reach it); None for a broker-only node."""
    if not config.is_controller:
        return None
    own = [li for li in config.listeners if li.name in config.controller_listener_names]
    if own:
        return own[0]
    first = config.client_listeners()[0]
    return Listener(CONTROLLER_LISTENER, first.host, first.port + config.kipling_node_processes)


def _check_ports_apart(config: BrokerConfig, controller: Listener | None) -> None:
    """Broker i takes every client and metrics port + i: those runs must not overlap one another
    nor the controller's port (a common layout has the controller right after a client port)."""
    count = config.kipling_node_processes
    owners: dict[int, str] = {}
    runs = [(li.port, f"listener {li.name}") for li in config.client_listeners()]
    if config.metrics_listener is not None:
        runs.append((config.metrics_listener[1], "metrics.listener"))
    taken = [(port + i, what) for port, what in runs for i in range(count)]
    if controller is not None:
        taken.append((controller.port, f"listener {controller.name}"))
    for port, what in taken:
        other = owners.setdefault(port, what)
        if other != what:
            raise ConfigError.invalid(
                "listeners",
                _joined(config.listeners),
                f"with {PROCESSES_KEY}={count} port {port} would serve both {other} and {what}: "
                f"leave {count} ports from each client and metrics port to the node's brokers",
            )


def _voters(config: BrokerConfig, controller: Listener | None) -> str:
    if config.controller_quorum_voters or controller is None:
        return ",".join(f"{v.node_id}@{v.host}:{v.port}" for v in config.controller_quorum_voters)
    host = LOOPBACK if controller.host in WILDCARD_HOSTS else controller.host
    return f"{config.node_id}@{host}:{controller.port}"


def _overrides_of(
    config: BrokerConfig, index: int, controller: Listener | None, voters: str
) -> dict[str, str]:
    clients = [_shifted(listener, index) for listener in config.client_listeners()]
    overrides = {
        "node.id": str(config.node_id + index),
        "log.dirs": ",".join(str(_own_dir(d, index)) for d in config.log_dirs),
    }
    if voters:
        overrides["controller.quorum.voters"] = voters
    if index == 0 and controller is not None:
        overrides["listeners"] = _joined([*clients, controller])
        overrides["controller.listener.names"] = controller.name
    else:
        overrides["listeners"] = _joined(clients)
        overrides["process.roles"] = "broker"
    if "advertised.listeners" in config.explicit_keys:
        advertised = [
            li for li in config.advertised_listeners if li.name not in config.controller_listener_names
        ]
        overrides["advertised.listeners"] = _joined([_shifted(li, index) for li in advertised])
    if config.metrics_listener is not None:
        host, port = config.metrics_listener
        overrides["metrics.listener"] = f"{host}:{port + index}"
    if "metadata.log.dir" in config.explicit_keys:
        overrides["metadata.log.dir"] = str(_own_dir(config.metadata_log_dir, index))
    return overrides


def _shifted(listener: Listener, index: int) -> Listener:
    return Listener(listener.name, listener.host, listener.port + index)


def _joined(listeners: Sequence[Listener]) -> str:
    return ",".join(str(listener) for listener in listeners)


def _own_dir(directory: Path, index: int) -> Path:
    return directory if index == 0 else directory.with_name(f"{directory.name}-{index}")


def node_cluster_id(config: BrokerConfig) -> str:
    """The cluster all the node's brokers join: ``cluster.id``, else the one broker 0's log dirs were
    formatted with (a node that was one process before), else a new one, written there first.
    Raises :class:`MetaPropertiesError` when broker 0's log dirs belong to another node or cluster."""
    return ensure_meta_properties(config.log_dirs, config.node_id, config.cluster_id)


def broker_argv(
    config_file: Path | None, overrides: Sequence[str], own: dict[str, str], log_level: str, log_json: bool
) -> list[str]:
    """The command line of one broker process: the node's file and overrides, then its own keys."""
    argv = [sys.executable, "-m", "broker", "--log-level", log_level]
    if log_json:
        argv.append("--log-json")
    if config_file is not None:
        argv += ["--config", str(config_file)]
    for item in [*overrides, *(f"{key}={value}" for key, value in own.items())]:
        argv += ["--override", item]
    return argv


def run_node(
    config: BrokerConfig, config_file: Path | None, overrides: Sequence[str], log_level: str, log_json: bool
) -> int:
    """Run the node's broker processes until a stop signal or until one exits; the exit status."""
    check_node(config)  # before anything is written to the log dirs
    commands = []
    for own in process_overrides(config, node_cluster_id(config)):
        argv = broker_argv(config_file, overrides, own, log_level, log_json)
        commands.append((f"broker-{own['node.id']}", argv))
    console = Console(
        [name for name, _ in commands],
        sys.stdout,
        sys.stderr,
        supervisor_name="node",
        tagged=not log_json,
        notify=_log.info if log_json else None,
    )
    supervisor = Supervisor(commands, console, stop_timeout_s=STOP_TIMEOUT_S, one_for_all=True)
    return asyncio.run(supervisor.run())
