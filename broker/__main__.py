"""The broker process: the one place where kipling's pieces are built and wired together.

``python -m broker [--config FILE] [--override KEY=VALUE ...]`` (also ``kipling broker``).
Everything else receives its collaborators as arguments; this module only composes them,
runs until SIGTERM/SIGINT, then shuts down gracefully: stop accepting, finish in-flight
requests, flush and checkpoint every log, write the clean-shutdown marker.

Whatever keeps the broker from starting (an invalid config, a log dir that is a file or cannot be
written, a port in use, a log dir of another node) is caught in one place, :func:`run`, as a
:class:`~broker.startup.StartupError` and reported as one line that names the key or resource,
with a non-zero exit status and no traceback (``--log-level debug`` logs it).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import resource
import signal
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import structlog
from prometheus_client import CollectorRegistry

from broker.assembly import build_data_plane, build_group_coordination, group_handlers, housekeeping_tasks
from broker.cluster_node import ClusterBroker, build_cluster_broker
from broker.group_runtime import GroupCoordinatorRuntime, single_node_offsets_topic_creator
from broker.handlers.api_versions import ApiVersionsHandler
from broker.handlers.base import Handler
from broker.handlers.create_partitions import CreatePartitionsHandler
from broker.handlers.create_topics import CreateTopicsHandler
from broker.handlers.delete_topics import DeleteTopicsHandler
from broker.handlers.describe_configs import DescribeConfigsHandler
from broker.handlers.fetch import FetchHandler
from broker.handlers.init_producer_id import InitProducerIdHandler
from broker.handlers.list_offsets import ListOffsetsHandler
from broker.handlers.metadata import BrokerEndpoint, MetadataHandler
from broker.handlers.offset_for_leader_epoch import OffsetForLeaderEpochHandler
from broker.handlers.produce import ProduceHandler
from broker.handlers.registry import HandlerRegistry
from broker.logging_setup import configure_logging
from broker.meta_properties import ensure_meta_properties
from broker.metrics_endpoint import MetricsEndpoint
from broker.producer_ids import LocalProducerIdBlockSource, ProducerIdManager
from broker.replica_manager import ReplicaManager
from broker.request_metrics import RequestMetrics
from broker.server.dispatcher import RequestDispatcher
from broker.server.listener import BrokerServer
from broker.startup import StartupError, as_startup_error, bound, check_log_dirs, report
from broker.topics import METADATA_FILE_NAME, TopicStore
from client.tasks import cancel_and_wait
from server_common.config import BrokerConfig, ConfigError, load_config, to_log_config
from server_common.config.properties import PropertiesError
from server_common.periodic import PeriodicTask
from server_common.purgatory import DelayedOperationPurgatory
from storage.clock import SystemClock
from storage.config import LogConfig
from storage.log_manager import LogManager

log = structlog.get_logger("kipling.broker")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", type=Path, help="server.properties file (Kafka's key names)")
    parser.add_argument(
        "--override",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="set one config key, over the file (repeatable)",
    )
    parser.add_argument("--log-level", default="INFO", help="DEBUG, INFO, WARNING or ERROR")
    parser.add_argument("--log-json", action="store_true", help="log as JSON lines")


@dataclass
class Broker:
    """A composed broker: what to start and what to stop, in order."""

    config: BrokerConfig
    log_manager: LogManager
    replicas: ReplicaManager
    purgatories: list[DelayedOperationPurgatory]
    server: BrokerServer
    metrics_endpoint: MetricsEndpoint | None
    groups: GroupCoordinatorRuntime
    tasks: list[PeriodicTask] = field(default_factory=list)

    async def start(self) -> None:
        served = [str(li) for li in self.config.listeners if li.name != "CONTROLLER"]
        await bound("listeners", served, self.server.start())
        if self.metrics_endpoint is not None and self.config.metrics_listener is not None:
            host, port = self.config.metrics_listener
            await bound("metrics.listener", [f"{host}:{port}"], self.metrics_endpoint.start())
        for task in self.tasks:
            task.start()
        log.info(
            "broker started", node_id=self.config.node_id, log_dirs=[str(d) for d in self.config.log_dirs]
        )

    async def abort(self) -> None:
        """Undo a start that failed (a port in use): close what listens and the logs."""
        await self.server.stop()
        if self.metrics_endpoint is not None:
            await self.metrics_endpoint.stop()
        self.log_manager.shutdown()

    async def stop(self) -> None:
        log.info("shutting down")
        for task in self.tasks:
            task.stop()
        await self.groups.stop()  # before the purgatories: group timers are cancelled, not expired
        for purgatory in self.purgatories:
            purgatory.shutdown()  # answer parked fetches/produces now rather than at their deadlines
        await self.server.stop()
        if self.metrics_endpoint is not None:
            await self.metrics_endpoint.stop()
        self.replicas.shutdown()
        self.log_manager.shutdown()
        log.info("shutdown complete")


def _advertised(config: BrokerConfig, server: BrokerServer) -> Callable[[], list[BrokerEndpoint]]:
    """This broker as Metadata lists it: its advertised listener (the bound port if it was 0)."""

    def endpoints() -> list[BrokerEndpoint]:
        listener = next(
            (a for a in config.advertised_listeners if a.name != "CONTROLLER"), config.advertised_listeners[0]
        )
        port = listener.port or (server.bound[0][1] if server.bound else 0)
        return [BrokerEndpoint(config.node_id, listener.host, port)]

    return endpoints


def build_broker(config: BrokerConfig) -> Broker:
    registry = CollectorRegistry()
    clock = SystemClock()
    cluster_id = ensure_meta_properties(config.log_dirs, config.node_id, config.cluster_id)
    topics = TopicStore(
        config.log_dirs[0] / METADATA_FILE_NAME,
        config.node_id,
        default_num_partitions=config.num_partitions,
        default_replication_factor=config.default_replication_factor,
    )

    def topic_log_config(name: str) -> LogConfig:
        topic = topics.get(name)
        return to_log_config(topic.configs if topic else {}, config)

    log_manager = LogManager(
        config.log_dirs, to_log_config({}, config), clock, topic_configs=topic_log_config
    )
    replicas = ReplicaManager(log_manager, topics, config.node_id, config, clock)
    plane = build_data_plane(config, registry, clock, replicas, topics)
    producer_ids = ProducerIdManager(LocalProducerIdBlockSource.in_log_dir(config.log_dirs[0]))
    request_metrics = RequestMetrics(registry)
    handler_registry = HandlerRegistry([])
    dispatcher = RequestDispatcher(handler_registry, request_metrics)
    server = BrokerServer(
        dispatcher,
        [(listener.host, listener.port) for listener in config.listeners if listener.name != "CONTROLLER"],
        request_metrics,
        max_frame_size=config.socket_request_max_bytes,
        idle_timeout_ms=config.connections_max_idle_ms,
    )
    advertised = _advertised(config, server)
    groups = build_group_coordination(
        config,
        clock,
        replicas,
        plane,
        topics,
        lambda listener: advertised(),
        single_node_offsets_topic_creator(
            topics, config.offsets_topic_num_partitions, config.offsets_topic_replication_factor
        ),
    )
    handlers: list[Handler] = [
        ApiVersionsHandler(handler_registry.api_ranges),
        MetadataHandler(
            topics,
            brokers=lambda listener: advertised(),
            cluster_id=cluster_id,
            controller_id=config.node_id,
            auto_create_topics_enable=config.auto_create_topics_enable,
        ),
        CreateTopicsHandler(topics, config),
        DeleteTopicsHandler(topics, config.delete_topic_enable),
        CreatePartitionsHandler(topics),
        DescribeConfigsHandler(topics, config),
        ProduceHandler(plane.produce_service),
        FetchHandler(plane.fetch_service, brokers=advertised),
        ListOffsetsHandler(replicas),
        OffsetForLeaderEpochHandler(replicas),
        InitProducerIdHandler(producer_ids),
        *group_handlers(groups, topics),
    ]
    for handler in handlers:
        handler_registry.register(handler)
    endpoint = MetricsEndpoint(registry, *config.metrics_listener) if config.metrics_listener else None
    tasks = [*housekeeping_tasks(config, replicas, log_manager), *groups.tasks]
    purgatories = [*plane.purgatories, *groups.purgatories]
    return Broker(config, log_manager, replicas, purgatories, server, endpoint, groups.runtime, tasks)


async def serve(config: BrokerConfig) -> int:
    """Build and start the broker, serve until SIGTERM/SIGINT, stop it; the exit status.

    Anything that fails before the broker serves is raised as a :class:`StartupError`, after
    whatever was started has been undone.
    """
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        started = await _build_and_start(config, stop)
    except StartupError:
        raise
    except Exception as exc:
        raise as_startup_error(exc) from exc
    if started is None:
        log.info("stopped while starting (the controller was never reached)")
        return 0
    # Everything built at start (partitions, segments, indexes, sessions' structures) lives
    # as long as the broker: move it out of the collector's sight, so a full collection
    # does not stall the event loop walking a heap of thousands of partitions.
    gc.collect()
    gc.freeze()
    await stop.wait()
    await started.stop()
    return 0


async def _build_and_start(config: BrokerConfig, stop: asyncio.Event) -> Broker | ClusterBroker | None:
    """The started broker, or None if ``stop`` came first (both undone then, as on a failure)."""
    check_log_dirs(config.log_dirs)
    broker: Broker | ClusterBroker = (
        build_cluster_broker(config) if config.controller_quorum_voters else build_broker(config)
    )
    try:
        started = await _started_before_stop(broker, stop)
    except BaseException:
        await broker.abort()
        raise
    if not started:
        await broker.abort()
        return None
    return broker


async def _started_before_stop(broker: Broker | ClusterBroker, stop: asyncio.Event) -> bool:
    """Start ``broker`` unless SIGTERM comes first: a cluster node waits for its controller to
    start serving, and an operator must be able to stop it meanwhile."""
    starting = asyncio.ensure_future(broker.start())
    stopping = asyncio.ensure_future(stop.wait())
    await asyncio.wait({starting, stopping}, return_when=asyncio.FIRST_COMPLETED)
    stopping.cancel()
    if starting.done():
        starting.result()  # re-raises OSError (a port in use)
        return True
    error = await cancel_and_wait(starting)
    if error is not None:
        raise error
    return False


def raise_file_limit() -> None:
    """Lift the soft open-files limit to the hard one: every partition holds ~3 descriptors
    (its active segment and two index mappings), and the usual soft limit of 1024 would cap a
    broker at a few hundred partitions. Kafka's operators raise it by hand; kipling does what
    the process may do by itself and logs the result."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError) as exc:
            log.warning("cannot raise the open-files limit", soft=soft, hard=hard, error=str(exc))
    log.info("open-files limit", limit=soft, partitions_at_most=max(soft - 64, 0) // 3)


def run(args: argparse.Namespace) -> int:
    configure_logging(args.log_level, args.log_json)
    raise_file_limit()
    try:
        config, warnings = load_config(args.config, args.override)
    except (ConfigError, PropertiesError, OSError) as exc:
        return report(exc, json_output=args.log_json)
    for warning in warnings:
        log.warning("configuration", message=warning)
    try:
        import uvloop

        uvloop.install()
    except ImportError:  # pragma: no cover - uvloop is a dependency; keep running without it
        log.warning("uvloop unavailable, using the default asyncio loop")
    try:
        return asyncio.run(serve(config))
    except StartupError as exc:
        return report(exc, json_output=args.log_json)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m broker", description="Run one kipling broker.")
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
