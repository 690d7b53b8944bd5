"""`kipling dev-cluster`: run N brokers on this machine, in the foreground, with one combined output."""

from __future__ import annotations

import argparse
from pathlib import Path

from broker.process_supervisor import DEFAULT_STOP_TIMEOUT_S
from tools.commands.arguments import non_negative_seconds, positive_int
from tools.dev_cluster import (
    CONTROLLER_PORT_OFFSET,
    DEFAULT_BASE_PORT,
    DEFAULT_DATA_DIR,
    DEFAULT_METRICS_BASE_PORT,
    ClusterLayout,
    DevClusterOptions,
    default_cluster_config_dir,
    run_dev_cluster,
)

DESCRIPTION = """\
Run a cluster of N kipling brokers on 127.0.0.1, each in its own process, in the foreground.

Broker i (1..N) has node.id=i, a PLAINTEXT listener on 127.0.0.1:(BASE_PORT + i - 1), Prometheus
metrics on 127.0.0.1:(METRICS_BASE_PORT + i - 1) and its log directory in DATA_DIR/broker-i.
Broker 1 is also the controller (process.roles=broker,controller, CONTROLLER listener on
127.0.0.1:CONTROLLER_PORT); the others have process.roles=broker. Every broker has
controller.quorum.voters=1@127.0.0.1:CONTROLLER_PORT and controller.listener.names=CONTROLLER.

Cluster-wide settings (replication factor, min.insync.replicas, session timeouts, ...) are read from
the broker files of docker-compose.yml, config/cluster/broker-*.properties, which must agree on them:
the dev cluster and the compose cluster are the same cluster, and dev-cluster only rewrites node ids,
roles, addresses, ports, log directories and the metrics listener. They are copied to
DATA_DIR/cluster.properties, which each broker reads with --config; its node keys are --override's.

The first output line is bootstrap.servers=127.0.0.1:BASE_PORT,... for clients. Then every broker's
output follows, each line tagged "broker-i |" (coloured on a terminal; NO_COLOR turns colours off).
"""

EPILOG = """\
Stopping: Ctrl-C or SIGTERM stops every broker gracefully (SIGTERM to each, SIGKILL to whatever is
still running after --stop-timeout; a second Ctrl-C kills at once) and exits with status 0. If a broker
exits on its own (kill -9 one to try a failover), dev-cluster says so and the others keep running; with
--restart-after SECONDS it starts that broker again after SECONDS, on its log directory. It exits with
status 1 if a broker died and was not restarted, and stops by itself once no broker is left running.
If a port is already in use or a configuration is invalid, it says which and exits with status 2
before starting anything.

Example: kipling dev-cluster --brokers 3
         kcat -L -b 127.0.0.1:9092
"""


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "dev-cluster",
        help="run a local cluster of N brokers in the foreground (like docker-compose.yml, on 127.0.0.1)",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--brokers", type=positive_int, default=3, metavar="N", help="brokers (default: 3)")
    p.add_argument(
        "--data-dir",
        type=Path,
        default=DEFAULT_DATA_DIR,
        metavar="DIR",
        help=f"broker i keeps its logs in DIR/broker-i (default: ./{DEFAULT_DATA_DIR})",
    )
    p.add_argument(
        "--base-port",
        type=int,
        default=DEFAULT_BASE_PORT,
        metavar="PORT",
        help=f"client port of broker 1; broker i uses PORT + i - 1 (default: {DEFAULT_BASE_PORT})",
    )
    p.add_argument(
        "--metrics-base-port",
        type=int,
        default=DEFAULT_METRICS_BASE_PORT,
        metavar="PORT",
        help=f"metrics port of broker 1; broker i uses PORT + i - 1 (default: {DEFAULT_METRICS_BASE_PORT})",
    )
    p.add_argument(
        "--controller-port",
        type=int,
        default=None,
        metavar="PORT",
        help=f"CONTROLLER listener of broker 1 (default: base port + {CONTROLLER_PORT_OFFSET})",
    )
    p.add_argument(
        "--cluster-config",
        type=Path,
        default=None,
        metavar="DIR",
        help="directory of the broker-*.properties files to take cluster-wide settings from "
        "(default: config/cluster of the working directory, else of kipling's source tree)",
    )
    p.add_argument(
        "--stop-timeout",
        type=float,
        default=DEFAULT_STOP_TIMEOUT_S,
        metavar="SECONDS",
        help=f"how long a broker may take to stop before it is killed (default: {DEFAULT_STOP_TIMEOUT_S:g})",
    )
    p.add_argument(
        "--restart-after",
        type=non_negative_seconds,
        default=None,
        metavar="SECONDS",
        help="start a broker that exited on its own again after SECONDS (default: leave it stopped)",
    )
    p.add_argument(
        "--secure",
        action="store_true",
        help="SASL_SSL on every listener (certificates of a dev CA made under DATA_DIR/pki, PLAIN users "
        "admin and alice; DATA_DIR/client.properties for --command-config)",
    )
    p.add_argument(
        "--log-level",
        default="INFO",
        metavar="LEVEL",
        help="the brokers' log level: DEBUG, INFO, WARNING or ERROR (default: INFO)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    layout = ClusterLayout(
        brokers=args.brokers,
        data_dir=args.data_dir,
        base_port=args.base_port,
        metrics_base_port=args.metrics_base_port,
        controller_port=args.controller_port,
        secure=args.secure,
    )
    options = DevClusterOptions(
        layout=layout,
        cluster_config_dir=args.cluster_config or default_cluster_config_dir(),
        stop_timeout_s=args.stop_timeout,
        log_level=args.log_level,
        restart_after_s=args.restart_after,
    )
    return run_dev_cluster(options)
