"""The broker process: the one place where kipling's pieces are built and wired together.

``python -m broker [--config FILE] [--override KEY=VALUE ...]`` (also ``kipling broker``).
Everything else receives its collaborators as arguments; this module only composes them,
runs until SIGTERM/SIGINT, then shuts down gracefully: stop accepting, finish in-flight
requests, flush and checkpoint every log, write the clean-shutdown marker.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import structlog
from prometheus_client import CollectorRegistry

from broker.config import BrokerConfig, ConfigError, load_config
from broker.config.properties import PropertiesError
from broker.handlers.api_versions import ApiVersionsHandler
from broker.handlers.base import Handler
from broker.handlers.registry import HandlerRegistry
from broker.logging_setup import configure_logging
from broker.metrics_endpoint import MetricsEndpoint
from broker.periodic import PeriodicTask
from broker.request_metrics import RequestMetrics
from broker.server.dispatcher import RequestDispatcher
from broker.server.listener import BrokerServer
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
    server: BrokerServer
    metrics_endpoint: MetricsEndpoint | None
    tasks: list[PeriodicTask] = field(default_factory=list)

    async def start(self) -> None:
        await self.server.start()
        if self.metrics_endpoint is not None:
            await self.metrics_endpoint.start()
        for task in self.tasks:
            task.start()
        log.info(
            "broker started", node_id=self.config.node_id, log_dirs=[str(d) for d in self.config.log_dirs]
        )

    async def stop(self) -> None:
        log.info("shutting down")
        for task in self.tasks:
            task.stop()
        await self.server.stop()
        if self.metrics_endpoint is not None:
            await self.metrics_endpoint.stop()
        self.log_manager.shutdown()
        log.info("shutdown complete")


def broker_log_config(config: BrokerConfig) -> LogConfig:
    from broker.config import to_log_config

    return to_log_config({}, config)


def build_broker(config: BrokerConfig) -> Broker:
    registry = CollectorRegistry()
    clock = SystemClock()
    log_manager = LogManager(config.log_dirs, broker_log_config(config), clock)
    handlers: list[Handler] = []
    handler_registry = HandlerRegistry([])
    handlers.append(ApiVersionsHandler(handler_registry.api_ranges))
    for handler in handlers:
        handler_registry.register(handler)
    request_metrics = RequestMetrics(registry)
    dispatcher = RequestDispatcher(handler_registry, request_metrics)
    server = BrokerServer(
        dispatcher,
        [(listener.host, listener.port) for listener in config.listeners if listener.name != "CONTROLLER"],
        request_metrics,
        max_frame_size=config.socket_request_max_bytes,
        idle_timeout_ms=config.connections_max_idle_ms,
    )
    endpoint = MetricsEndpoint(registry, *config.metrics_listener) if config.metrics_listener else None
    tasks = [
        PeriodicTask("retention", config.log_retention_check_interval_ms, log_manager.run_retention),
        PeriodicTask(
            "high-watermark-checkpoint",
            config.replica_high_watermark_checkpoint_interval_ms,
            log_manager.checkpoint_high_watermarks,
        ),
        PeriodicTask(
            "recovery-point-checkpoint",
            config.log_flush_offset_checkpoint_interval_ms,
            log_manager.checkpoint_recovery_points,
        ),
        PeriodicTask(
            "log-start-offset-checkpoint",
            config.log_flush_start_offset_checkpoint_interval_ms,
            log_manager.checkpoint_log_start_offsets,
        ),
    ]
    return Broker(config, log_manager, server, endpoint, tasks)


async def serve(config: BrokerConfig) -> int:
    broker = build_broker(config)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        await broker.start()
    except OSError as exc:
        log.error("cannot listen", error=str(exc))
        broker.log_manager.shutdown()
        return 1
    await stop.wait()
    await broker.stop()
    return 0


def run(args: argparse.Namespace) -> int:
    configure_logging(args.log_level, args.log_json)
    try:
        config, warnings = load_config(args.config, args.override)
    except (ConfigError, PropertiesError, OSError) as exc:
        log.error("invalid configuration", error=str(exc))
        return 2
    for warning in warnings:
        log.warning("configuration", message=warning)
    try:
        import uvloop

        uvloop.install()
    except ImportError:  # pragma: no cover - uvloop is a dependency; keep running without it
        log.warning("uvloop unavailable, using the default asyncio loop")
    return asyncio.run(serve(config))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m broker", description="Run one kipling broker.")
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
