"""AlterClientQuotas refuses the values Kafka's ClientQuotaControlManager
refuses since 3.6 (KAFKA-14943): zero or negative quotas (which would throttle every client of the
entity for the whole quota window), fractions of integral keys, and values beyond the key's type."""

from __future__ import annotations

import pytest

from metadata.client_quotas import QuotaAlteration, QuotaFilterComponent, describe_quotas
from protocol.error_codes import ErrorCode, KafkaError
from tests.metadata.controller.helpers import Cluster

USER = (("user", "alice"),)
IP = (("ip", "1.2.3.4"),)


@pytest.fixture
def cluster() -> Cluster:
    cluster = Cluster()
    cluster.join(1)
    return cluster


@pytest.mark.parametrize(
    ("entity", "key", "value", "message"),
    [
        (USER, "producer_byte_rate", 0.0, "Quota producer_byte_rate must be greater than 0"),
        (USER, "consumer_byte_rate", -1024.0, "Quota consumer_byte_rate must be greater than 0"),
        (USER, "request_percentage", 0.0, "Quota request_percentage must be greater than 0"),
        (USER, "controller_mutation_rate", -0.5, "Quota controller_mutation_rate must be greater than 0"),
        (IP, "connection_creation_rate", -3.0, "Quota connection_creation_rate must be greater than 0"),
        (USER, "producer_byte_rate", 1.5, "producer_byte_rate cannot be a fractional value."),
        (
            IP,
            "connection_creation_rate",
            2.0**31,
            "Proposed value for connection_creation_rate is too large for an INT.",
        ),
        (IP, "connection_creation_rate", 10.25, "connection_creation_rate cannot be a fractional value."),
        (
            USER,
            "producer_byte_rate",
            2.0**64,
            "Proposed value for producer_byte_rate is too large for a LONG.",
        ),
    ],
)
def test_values_kafka_refuses(
    cluster: Cluster, entity: tuple[tuple[str, str], ...], key: str, value: float, message: str
) -> None:
    start = cluster.log.end_offset
    results = cluster.controller.alter_client_quotas(
        [QuotaAlteration(entity, ((key, value),))], validate_only=False
    )
    assert [(r.error, r.message) for r in results] == [(ErrorCode.INVALID_REQUEST, message)]
    assert cluster.log.end_offset == start
    assert cluster.image.client_quota(entity) == {}


def test_positive_values_pass_and_a_duplicate_entity_type_has_kafkas_message(cluster: Cluster) -> None:
    ops = (("producer_byte_rate", 1024.0), ("request_percentage", 0.5))
    results = cluster.controller.alter_client_quotas([QuotaAlteration(USER, ops)], validate_only=False)
    assert [(r.error, r.message) for r in results] == [(ErrorCode.NONE, None)]
    assert cluster.image.client_quota(USER) == {"producer_byte_rate": 1024.0, "request_percentage": 0.5}
    twice = (("user", "a"), ("user", "b"))
    results = cluster.controller.alter_client_quotas(
        [QuotaAlteration(twice, (("producer_byte_rate", 1.0),))], validate_only=False
    )
    assert [(r.error, r.message) for r in results] == [
        (ErrorCode.INVALID_REQUEST, "Invalid client quota entity, duplicate entity entry user")
    ]


def test_an_unknown_match_type_is_an_invalid_request() -> None:
    """Kafka's ClientQuotasImage.describe throws InvalidRequestException for it (an unknown entity
    type stays UNSUPPORTED_VERSION)."""
    with pytest.raises(KafkaError) as caught:
        describe_quotas({}, [QuotaFilterComponent("user", 7, None)], strict=False)
    assert (caught.value.code, caught.value.message) == (ErrorCode.INVALID_REQUEST, "Unknown match type 7")
    with pytest.raises(KafkaError) as caught:
        describe_quotas({}, [QuotaFilterComponent("group", 0, "g")], strict=False)
    assert caught.value.code == ErrorCode.UNSUPPORTED_VERSION
