"""A kipling node's process: ``python -m broker [--config FILE] [--override KEY=VALUE ...]``.

Also ``kipling broker``.

It loads the config, builds the node from it (:mod:`broker.node`, the one composition root: a single
node and a cluster node are the same code), runs until SIGTERM/SIGINT, then shuts down gracefully:
move leadership away, stop accepting, finish in-flight requests, flush and checkpoint every log,
write the clean-shutdown marker.

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
from collections.abc import Sequence
from pathlib import Path

import structlog

from broker.logging_setup import configure_logging
from broker.meta_properties import MetaPropertiesError
from broker.node import Node, build_node
from broker.node_processes import run_node
from broker.startup import StartupError, as_startup_error, check_log_dirs, report
from client.tasks import cancel_and_wait
from server_common.config import BrokerConfig, ConfigError, load_config
from server_common.config.properties import PropertiesError
from storage.file_pool import size_process_pool

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


async def _build_and_start(config: BrokerConfig, stop: asyncio.Event) -> Node | None:
    """The started broker, or None if ``stop`` came first (both undone then, as on a failure)."""
    check_log_dirs(config.log_dirs)
    broker = build_node(config)
    try:
        started = await _started_before_stop(broker, stop)
    except BaseException:
        await broker.abort()
        raise
    if not started:
        await broker.abort()
        return None
    return broker


async def _started_before_stop(broker: Node, stop: asyncio.Event) -> bool:
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
    """Lift the soft open-files limit to the hard one: segment files share half of it
    (``kipling.log.open.files.max``, storage/file_pool.py) and connections the rest, so the
    usual soft limit of 1024 would leave a busy broker reopening files. Kafka's operators raise
    it by hand; kipling does what the process may do by itself and logs the result."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError) as exc:
            log.warning("cannot raise the open-files limit", soft=soft, hard=hard, error=str(exc))
    log.info("open-files limit", limit=soft)


def run(args: argparse.Namespace) -> int:
    configure_logging(args.log_level, args.log_json)
    raise_file_limit()
    try:
        config, warnings = load_config(args.config, args.override)
    except (ConfigError, PropertiesError, OSError) as exc:
        return report(exc, json_output=args.log_json)
    if config.kipling_node_processes > 1:
        return _run_node(config, args)
    for warning in warnings:
        log.warning("configuration", message=warning)
    log.info("segment files", open_at_most=size_process_pool(config.kipling_log_open_files_max))
    try:
        import uvloop

        uvloop.install()
    except ImportError:  # pragma: no cover - uvloop is a dependency; keep running without it
        log.warning("uvloop unavailable, using the default asyncio loop")
    try:
        return asyncio.run(serve(config))
    except StartupError as exc:
        return report(exc, json_output=args.log_json)


def _run_node(config: BrokerConfig, args: argparse.Namespace) -> int:
    """Supervise the node's broker processes (``kipling.node.processes``); each loads the config
    again and logs its own warnings."""
    try:
        return run_node(config, args.config, args.override, args.log_level, args.log_json)
    except (ConfigError, MetaPropertiesError, OSError) as exc:
        return report(exc, json_output=args.log_json)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m broker", description="Run one kipling broker.")
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
