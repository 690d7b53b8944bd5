"""Apache Kafka's message specifications, as shipped in kafka-python's package data.

An independent oracle for kipling's own declarations: the JSON files are read from the
installed test dependency at test time and never copied into the repository.
"""

from __future__ import annotations

import functools
import json
import re
from importlib import resources
from typing import Any

from protocol.schema import Versions


def _strip_comments(text: str) -> str:
    return "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("//"))


@functools.cache
def kafka_specs() -> dict[tuple[int, str], dict[str, Any]]:
    """(api key, "request"/"response") → the parsed JSON spec."""
    root = resources.files("kafka.protocol.schemas") / "resources"
    specs: dict[tuple[int, str], dict[str, Any]] = {}
    for entry in root.iterdir():
        if not entry.name.endswith(".json"):
            continue
        spec = json.loads(_strip_comments(entry.read_text()))
        if spec.get("type") in ("request", "response") and "apiKey" in spec:
            specs[(spec["apiKey"], spec["type"])] = spec
    return specs


def kafka_spec(api_key: int, kind: str) -> dict[str, Any] | None:
    return kafka_specs().get((api_key, kind))


def in_range(text: str | None, version: int) -> bool:
    return version in Versions.parse(text)


def snake(name: str) -> str:
    s = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", name)
    return re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", s).lower()


def resolve_fields(field: dict[str, Any], spec: dict[str, Any]) -> list[dict[str, Any]]:
    """Members of a struct field, following commonStructs references."""
    if "fields" in field:
        return field["fields"]
    struct_name = field["type"].removeprefix("[]")
    for common in spec.get("commonStructs", []):
        if common["name"] == struct_name:
            return common["fields"]
    return []
