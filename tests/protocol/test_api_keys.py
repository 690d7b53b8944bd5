"""ApiKey against the apiKey numbers of Apache Kafka's message specs (kafka-python's package data)."""

from __future__ import annotations

import json
import re
from importlib import resources
from typing import Any

import pytest

from protocol.api_keys import ApiKey


def _load_specs() -> list[dict[str, Any]]:
    root = resources.files("kafka.protocol.schemas") / "resources"
    specs = []
    for entry in root.iterdir():
        if entry.name.endswith(("Request.json", "Response.json")):
            text = "\n".join(
                line for line in entry.read_text().splitlines() if not line.lstrip().startswith("//")
            )
            specs.append(json.loads(text))
    return specs


SPECS = _load_specs()


def test_the_oracle_is_there() -> None:
    assert len(SPECS) >= 100


@pytest.mark.parametrize("spec", SPECS, ids=lambda spec: spec["name"])
def test_spec_api_key_matches(spec: dict[str, Any]) -> None:
    key = ApiKey(spec["apiKey"])
    suffix = "Request" if spec["type"] == "request" else "Response"
    assert key.message_name + suffix == spec["name"]


def test_keys_are_contiguous_and_upper_snake_case() -> None:
    assert [key.value for key in ApiKey] == list(range(94))
    for key in ApiKey:
        assert re.fullmatch(r"[A-Z][A-Z0-9_]*", key.name), key


@pytest.mark.parametrize(
    ("key", "number"),
    [
        (ApiKey.PRODUCE, 0),
        (ApiKey.FETCH, 1),
        (ApiKey.LIST_OFFSETS, 2),
        (ApiKey.METADATA, 3),
        (ApiKey.API_VERSIONS, 18),
        (ApiKey.CREATE_TOPICS, 19),
        (ApiKey.OFFSET_FOR_LEADER_EPOCH, 23),
        (ApiKey.DESCRIBE_CLUSTER, 60),
        (ApiKey.GET_TELEMETRY_SUBSCRIPTIONS, 71),
        (ApiKey.GET_REPLICA_LOG_INFO, 93),
    ],
)
def test_well_known_numbers(key: ApiKey, number: int) -> None:
    assert key == number


def test_message_names() -> None:
    assert ApiKey.OFFSET_FOR_LEADER_EPOCH.message_name == "OffsetForLeaderEpoch"
    assert ApiKey.API_VERSIONS.message_name == "ApiVersions"
    assert ApiKey.LEADER_AND_ISR.message_name == "LeaderAndIsr"


def test_lookup() -> None:
    assert ApiKey.lookup(1) is ApiKey.FETCH
    assert ApiKey.lookup(-1) is None
    assert ApiKey.lookup(32767) is None
