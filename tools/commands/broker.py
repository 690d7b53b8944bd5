"""`kipling broker`: run one broker (the main job)."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from broker.__main__ import add_arguments, run

    p = sub.add_parser(
        "broker",
        help="run a broker (single node with built-in defaults, or from a server.properties file)",
        description="Run one kipling broker. With no arguments it is a single-node broker on "
        "127.0.0.1:9092 with its data in ./kipling-data and Prometheus metrics on 127.0.0.1:9404. "
        "--config reads a server.properties file (Kafka's key names); --override KEY=VALUE sets one key "
        "over the file. Stops gracefully on SIGTERM or Ctrl-C.",
    )
    add_arguments(p)
    p.set_defaults(func=run)
