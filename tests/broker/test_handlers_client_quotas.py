"""DescribeClientQuotas (48) and AlterClientQuotas (49) handlers at every version, through the
codecs, and the effect a broker forwarding AlterClientQuotas waits for."""

from __future__ import annotations

from typing import Any

import pytest

from broker.handlers.client_quotas import AlterClientQuotasHandler, DescribeClientQuotasHandler
from broker.handlers.forwarding import effect_of
from metadata.controller.active import ActiveController
from metadata.image import MetadataImage
from protocol.api_keys import ApiKey
from protocol.error_codes import ErrorCode
from protocol.messages import REQUESTS
from tests.broker.cluster_admin_support import call, decoded, three_brokers
from tests.metadata.controller.helpers import Cluster


@pytest.fixture
def cluster() -> Cluster:
    return three_brokers()


def entity(*pairs: tuple[str, str | None]) -> list[dict[str, Any]]:
    return [{"entity_type": kind, "entity_name": name} for kind, name in pairs]


def alter_body(
    *entries: tuple[list[dict[str, Any]], list[tuple[str, float, bool]]], validate_only: bool = False
) -> dict[str, Any]:
    return {
        "entries": [
            {"entity": e, "ops": [{"key": k, "value": v, "remove": r} for k, v, r in ops]}
            for e, ops in entries
        ],
        "validate_only": validate_only,
    }


def test_handler_versions_match_the_schemas() -> None:
    for handler in (DescribeClientQuotasHandler, AlterClientQuotasHandler):
        versions = REQUESTS[int(handler.api_key)].versions
        assert (handler.min_version, handler.max_version) == (versions.low, versions.high)


@pytest.mark.parametrize("version", [0, 1])
async def test_alter_then_describe(cluster: Cluster, version: int) -> None:
    alter = AlterClientQuotasHandler(cluster.controller)
    body = alter_body(
        (entity(("user", "alice"), ("client-id", "app")), [("producer_byte_rate", 1024.0, False)]),
        (entity(("client-id", None)), [("consumer_byte_rate", 2048.0, False)]),
        (entity(("user", "bob")), [("nonsense", 1.0, False)]),
    )
    response = await call(alter, version, body)
    assert [
        (e.error_code, e.error_message, [(x.entity_type, x.entity_name) for x in e.entity])
        for e in response.entries
    ] == [
        (0, None, [("user", "alice"), ("client-id", "app")]),
        (0, None, [("client-id", None)]),
        (int(ErrorCode.INVALID_REQUEST), "Invalid configuration key nonsense", [("user", "bob")]),
    ]
    describe = DescribeClientQuotasHandler(cluster.image)
    filtered = await call(
        describe,
        version,
        {"components": [{"entity_type": "client-id", "match_type": 1, "match": None}], "strict": True},
    )
    assert filtered.error_code == 0
    assert [
        ([(x.entity_type, x.entity_name) for x in e.entity], [(v.key, v.value) for v in e["values"]])
        for e in filtered.entries
    ] == [([("client-id", None)], [("consumer_byte_rate", 2048.0)])]
    everything = await call(describe, version, {"components": [], "strict": False})
    assert len(everything.entries) == 2


async def test_describe_with_a_bad_filter_is_a_top_level_error(cluster: Cluster) -> None:
    describe = DescribeClientQuotasHandler(cluster.image)
    response = await call(
        describe,
        1,
        {"components": [{"entity_type": "group", "match_type": 0, "match": "g"}], "strict": False},
    )
    assert (response.error_code, response.error_message, response.entries) == (
        int(ErrorCode.UNSUPPORTED_VERSION),
        "Unsupported entity type group",
        None,
    )


async def test_alter_without_a_controller_is_not_controller_for_every_entity() -> None:
    alter = AlterClientQuotasHandler(ActiveController(1))
    response = await call(alter, 1, alter_body((entity(("user", "a")), [("producer_byte_rate", 1.0, False)])))
    assert [e.error_code for e in response.entries] == [int(ErrorCode.NOT_CONTROLLER)]


async def test_a_forwarding_broker_waits_until_its_image_shows_the_quotas(cluster: Cluster) -> None:
    alter = AlterClientQuotasHandler(cluster.controller)
    body = alter_body((entity(("user", "a")), [("producer_byte_rate", 5.0, False)]))
    request = decoded(alter, 1, body)
    effect = effect_of(ApiKey.ALTER_CLIENT_QUOTAS)
    response = await call(alter, 1, body)
    assert effect(request, response)(cluster.image)
    assert not effect(request, response)(MetadataImage())
