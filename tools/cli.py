"""The `kipling` command: one entry point, one subcommand per job.

Subcommands register themselves from :mod:`tools.commands`; each module exposes
``register(subparsers)`` and sets ``func`` on its parser, so adding a command touches one file.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import sys
from collections.abc import Sequence

from tools.commands import (
    acls,
    broker,
    configs,
    consume,
    decode_frame,
    delete_records,
    dev_certs,
    dev_cluster,
    dump_log,
    groups,
    leader_election,
    log_dirs,
    metadata_quorum,
    produce,
    reassign_partitions,
    storage,
    topics,
    transactions,
)

COMMANDS = (
    broker,
    storage,
    dev_cluster,
    dev_certs,
    decode_frame,
    dump_log,
    topics,
    produce,
    consume,
    groups,
    metadata_quorum,
    log_dirs,
    transactions,
    delete_records,
    leader_election,
    reassign_partitions,
    configs,
    acls,
)


def version() -> str:
    """kipling's version, from the installed package's metadata."""
    try:
        return importlib.metadata.version("kipling")
    except importlib.metadata.PackageNotFoundError:  # run from a checkout that was never installed
        return "unknown"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kipling",
        description="kipling: a Kafka-compatible, replicated log broker, and the tools to inspect its "
        "wire traffic and on-disk logs.",
    )
    parser.add_argument(
        "--version", action="version", version=f"%(prog)s {version()}", help="print the version and exit"
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for command in COMMANDS:
        command.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "func", None) is None:
        parser.print_help()
        return 2
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
