"""Argument types shared by the `kipling` subcommands, so every tool reads them the same way."""

from __future__ import annotations

import argparse
from collections.abc import Sequence


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
