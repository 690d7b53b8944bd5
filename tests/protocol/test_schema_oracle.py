"""Every kipling declaration agrees with Apache Kafka's spec, version by version.

For each API and each version kipling declares: the version is valid in Kafka, flexibility
matches, and the fields present in that version match in order, name, type, nullability,
tag and default.

kafka-python ships the specs of the APIs a client sends, not of the controller-only ones
(BrokerRegistration, BrokerHeartbeat, AlterPartition) nor of the metadata quorum's own (Vote,
BeginQuorumEpoch, EndQuorumEpoch, FetchSnapshot; it does ship DescribeQuorum, which admin clients
send), nor of KIP-848's ConsumerGroupHeartbeat and ConsumerGroupDescribe: those are skipped, by an
explicit list, so that any other missing spec still fails.
"""

from __future__ import annotations

from typing import Any

import pytest

from protocol.api_keys import ApiKey
from protocol.messages import REQUESTS, RESPONSES
from protocol.schema import PRIMITIVES, Field, MessageSpec
from tests.protocol.oracle import in_range, kafka_spec, resolve_fields, snake

ALL_SPECS = [*REQUESTS.values(), *RESPONSES.values()]

NOT_IN_ORACLE = frozenset(
    {
        ApiKey.ALTER_PARTITION,
        ApiKey.BROKER_REGISTRATION,
        ApiKey.BROKER_HEARTBEAT,
        ApiKey.ALLOCATE_PRODUCER_IDS,
        ApiKey.VOTE,
        ApiKey.BEGIN_QUORUM_EPOCH,
        ApiKey.END_QUORUM_EPOCH,
        ApiKey.FETCH_SNAPSHOT,
        ApiKey.CONSUMER_GROUP_HEARTBEAT,
        ApiKey.CONSUMER_GROUP_DESCRIBE,
    }
)
"""Controller-only and quorum-internal APIs whose JSON kafka-python does not ship; their declarations
were checked against Apache Kafka's own message files by hand and are pinned byte by byte by
tests/protocol/test_controller_apis.py and tests/protocol/test_kraft_apis.py. kafka-python 3.0.12 ships
no spec for KIP-848's ConsumerGroupHeartbeat and ConsumerGroupDescribe either; they are pinned the same
way against Apache Kafka 4.0's JSON by tests/protocol/test_consumer_group_apis.py."""


def _kafka_type(type_name: str) -> str:
    element = type_name.removeprefix("[]")
    prefix = "[]" if type_name.startswith("[]") else ""
    return prefix + (element if element in PRIMITIVES else "struct")


def _default_text(value: Any) -> str | None:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return None if isinstance(value, dict | list) else str(value)


def _compare(
    ours: tuple[Field, ...], theirs: list[dict[str, Any]], spec: dict, version: int, path: str
) -> list[str]:
    problems: list[str] = []
    mine = [f for f in ours if f.exists_in(version)]
    kafka = [f for f in theirs if in_range(f.get("versions"), version)]
    names_mine = [f.name for f in mine]
    names_kafka = [snake(f["name"]) for f in kafka]
    if names_mine != names_kafka:
        return [f"{path} v{version}: fields {names_mine} != Kafka's {names_kafka}"]
    for f, k in zip(mine, kafka):
        where = f"{path}.{f.name} v{version}"
        if _kafka_type(f.type) != _kafka_type(k["type"]):
            problems.append(f"{where}: type {f.type} != {k['type']}")
        if f.nullable_in(version) != in_range(k.get("nullableVersions"), version):
            problems.append(f"{where}: nullable differs")
        if f.tagged_in(version) != in_range(k.get("taggedVersions"), version):
            problems.append(f"{where}: tagged differs")
        elif f.tagged_in(version) and f.tag != k.get("tag"):
            problems.append(f"{where}: tag {f.tag} != {k.get('tag')}")
        if "default" in k and not f.is_struct and not f.is_array:
            expected = str(k["default"])
            got = _default_text(f.default_value())
            if got is not None and expected.lower() != got.lower():
                try:
                    same = int(expected, 0) == int(got, 0)
                except ValueError:
                    same = False
                if not same:
                    problems.append(f"{where}: default {got} != Kafka's {expected}")
        if f.is_struct:
            problems += _compare(f.fields, resolve_fields(k, spec), spec, version, where)
    return problems


@pytest.mark.parametrize("spec", ALL_SPECS, ids=lambda s: s.name)
def test_declaration_matches_kafka(spec: MessageSpec) -> None:
    theirs = kafka_spec(spec.api_key, spec.type)
    if theirs is None and spec.api_key in NOT_IN_ORACLE:
        pytest.skip(f"kafka-python ships no spec for {spec.name}")
    assert theirs is not None, f"Kafka has no spec for {spec.name}"
    problems: list[str] = []
    for version in spec.version_list():
        if not in_range(theirs["validVersions"], version):
            problems.append(f"v{version} is not valid in Kafka ({theirs['validVersions']})")
            continue
        if spec.is_flexible(version) != in_range(theirs["flexibleVersions"], version):
            problems.append(f"v{version}: flexible differs")
        problems += _compare(spec.fields, theirs["fields"], theirs, version, spec.name)
    assert not problems, "\n".join(problems)
