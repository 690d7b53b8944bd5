"""Argument types shared by the `kipling` subcommands, so every tool reads them the same way."""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import structlog

from client.security import SECURITY_PROPERTY_KEYS, ClientSecurity, ClientSecurityConfig, from_properties
from server_common.config.properties import PropertiesError, read_properties_file

_log = structlog.get_logger("kipling.commands")


def positive_int(text: str) -> int:
    """An argparse type: an integer of at least 1."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected at least 1, got {value}")
    return value


def non_negative_seconds(text: str) -> float:
    """An argparse type: a number of seconds, 0 or more."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"expected 0 or more seconds, got {text}")
    return value


def parse_properties(items: Sequence[str]) -> dict[str, str]:
    """``--property k=v`` items, as Kafka's console tools take them; raises ValueError for one
    without '='."""
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"invalid property {item!r}: expected KEY=VALUE")
        out[key.strip()] = value
    return out


# -- --command-config ------------------------------------------------------------------------------


@dataclass(frozen=True)
class CommandConfig:
    """A ``--command-config`` file, read and checked when the command line is parsed."""

    path: Path
    security: ClientSecurityConfig = field(repr=False)
    unknown: tuple[str, ...] = ()
    """Keys kipling's tools do not use (warned about when the tool runs)."""


def security_settings(text: str, props: Mapping[str, str]) -> CommandConfig:
    """The security settings of client properties read from ``text``; ArgumentTypeError naming
    the file and the key at fault (never a secret)."""
    try:
        security = from_properties(props)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{text}: {exc}") from None
    unknown = tuple(sorted(set(props) - SECURITY_PROPERTY_KEYS))
    return CommandConfig(Path(text), security, unknown)


def command_config_file(text: str) -> CommandConfig:
    """An argparse type: a properties file of Kafka client settings, as the ``--command-config``
    of Kafka's tools takes (security.protocol, ssl.truststore.*, ssl.keystore.*, sasl.mechanism,
    sasl.jaas.config)."""
    try:
        props = read_properties_file(Path(text))
    except (OSError, PropertiesError) as exc:
        raise argparse.ArgumentTypeError(f"cannot read {text}: {exc}") from None
    return security_settings(text, props)


def add_command_config_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--command-config",
        type=command_config_file,
        metavar="FILE",
        help="a properties file of client settings for connecting to secured listeners, as Kafka's "
        "tools take it: security.protocol, ssl.truststore.type=PEM, ssl.truststore.location, "
        "ssl.keystore.*, ssl.endpoint.identification.algorithm, sasl.mechanism and sasl.jaas.config "
        "(its username and password); other keys are ignored with a warning",
    )


def command_security(args: argparse.Namespace) -> ClientSecurity | None:
    """The connections' TLS context and SASL login from ``--command-config`` (None: PLAINTEXT).
    Call after the tool configured its logging: unknown keys are warned about here."""
    config: CommandConfig | None = getattr(args, "command_config", None)
    if config is None:
        return None
    for key in config.unknown:
        _log.warning("client property not used by kipling's tools, ignored", key=key, file=str(config.path))
    return config.security.build()
