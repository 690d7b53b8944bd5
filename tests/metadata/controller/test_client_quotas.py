"""Client quotas on the controller (Kafka's ClientQuotaControlManager) and in the image: validation
and messages, the ClientQuotaRecords written, replay, snapshots, and DescribeClientQuotas' filter."""

from __future__ import annotations

import pathlib

import pytest

from metadata.client_quotas import (
    MatchType,
    QuotaAlteration,
    QuotaFilterComponent,
    describe_quotas,
)
from metadata.image import MetadataImage
from metadata.records import ClientQuotaRecord
from metadata.serde import metadata_record_value, record_from_wire
from metadata.snapshot import image_records, load_image, read_snapshot, snapshot_path, write_snapshot
from protocol.error_codes import ErrorCode, KafkaError
from tests.metadata.controller.helpers import Cluster, replayed

USER = (("user", "alice"),)
CLIENT = (("client-id", "app"),)
BOTH = (("client-id", "app"), ("user", "alice"))


@pytest.fixture
def cluster() -> Cluster:
    cluster = Cluster()
    cluster.join(1)
    return cluster


def alter(
    cluster: Cluster, *alterations: QuotaAlteration, validate_only: bool = False
) -> list[tuple[ErrorCode, str | None]]:
    results = cluster.controller.alter_client_quotas(alterations, validate_only=validate_only)
    return [(r.error, r.message) for r in results]


def test_setting_and_removing_quotas_writes_records_and_replays(cluster: Cluster) -> None:
    start = cluster.log.end_offset
    ops = (("producer_byte_rate", 1024.0), ("consumer_byte_rate", 2048.0))
    assert alter(
        cluster, QuotaAlteration(USER, ops), QuotaAlteration(BOTH, (("request_percentage", 12.5),))
    ) == [
        (ErrorCode.NONE, None),
        (ErrorCode.NONE, None),
    ]
    batch = cluster.log.read(start)
    assert [r for _, _, r in batch] == [
        ClientQuotaRecord(USER, "producer_byte_rate", 1024.0, False),
        ClientQuotaRecord(USER, "consumer_byte_rate", 2048.0, False),
        ClientQuotaRecord(BOTH, "request_percentage", 12.5, False),
    ]
    assert cluster.image.client_quota(USER) == {"producer_byte_rate": 1024.0, "consumer_byte_rate": 2048.0}
    # an unchanged value writes nothing; a removal writes remove=True; removing an absent key nothing
    start = cluster.log.end_offset
    assert alter(
        cluster,
        QuotaAlteration(USER, (("producer_byte_rate", 1024.0), ("consumer_byte_rate", None))),
        QuotaAlteration(CLIENT, (("consumer_byte_rate", None),)),
    ) == [(ErrorCode.NONE, None), (ErrorCode.NONE, None)]
    assert [r for _, _, r in cluster.log.read(start)] == [
        ClientQuotaRecord(USER, "consumer_byte_rate", 0.0, True)
    ]
    assert cluster.image.client_quota(USER) == {"producer_byte_rate": 1024.0}
    assert replayed(cluster.log) == cluster.image
    # the last key removed: the entity is gone
    alter(cluster, QuotaAlteration(USER, (("producer_byte_rate", None),)))
    assert USER not in cluster.image.client_quotas()
    assert replayed(cluster.log) == cluster.image


def test_validate_only_writes_nothing(cluster: Cluster) -> None:
    start = cluster.log.end_offset
    assert alter(cluster, QuotaAlteration(USER, (("producer_byte_rate", 5.0),)), validate_only=True) == [
        (ErrorCode.NONE, None)
    ]
    assert cluster.log.end_offset == start


@pytest.mark.parametrize(
    ("entity", "ops", "message"),
    [
        ((), (("producer_byte_rate", 1.0),), "Invalid empty client quota entity"),
        ((("group", "g"),), (("producer_byte_rate", 1.0),), "Unhandled client quota entity type: group"),
        ((("user", ""),), (("producer_byte_rate", 1.0),), "Empty user not supported"),
        (
            (("user", "a"), ("user", "b")),
            (("producer_byte_rate", 1.0),),
            "Invalid client quota entity, duplicate entity entry user",
        ),
        (
            (("user", "a"), ("ip", "1.2.3.4")),
            (("producer_byte_rate", 1.0),),
            "Invalid empty client quota entity",
        ),
        (
            (("ip", "not an ip"),),
            (("connection_creation_rate", 1.0),),
            "not an ip is not a valid IP or resolvable host.",
        ),
        (USER, (("connection_creation_rate", 1.0),), "Invalid configuration key connection_creation_rate"),
        (
            (("ip", "1.2.3.4"),),
            (("producer_byte_rate", 1.0),),
            "Invalid configuration key producer_byte_rate",
        ),
        (USER, (("producer_byte_rate", 1.5),), "producer_byte_rate cannot be a fractional value."),
    ],
)
def test_invalid_alterations_carry_kafkas_messages(
    cluster: Cluster,
    entity: tuple[tuple[str, str | None], ...],
    ops: tuple[tuple[str, float | None], ...],
    message: str,
) -> None:
    start = cluster.log.end_offset
    assert alter(cluster, QuotaAlteration(entity, ops)) == [(ErrorCode.INVALID_REQUEST, message)]
    assert cluster.log.end_offset == start


def test_an_entity_with_one_bad_key_writes_none_of_its_keys(cluster: Cluster) -> None:
    start = cluster.log.end_offset
    results = alter(
        cluster,
        QuotaAlteration(USER, (("producer_byte_rate", 10.0), ("nonsense", 1.0))),
        QuotaAlteration(CLIENT, (("consumer_byte_rate", 10.0),)),
    )
    assert results == [
        (ErrorCode.INVALID_REQUEST, "Invalid configuration key nonsense"),
        (ErrorCode.NONE, None),
    ]
    assert [r.entity for _, _, r in cluster.log.read(start)] == [CLIENT]  # type: ignore[union-attr]


def test_duplicates_are_refused_as_kafka_refuses_them(cluster: Cluster) -> None:
    results = alter(
        cluster,
        QuotaAlteration(USER, (("producer_byte_rate", 1.0),)),
        QuotaAlteration(USER, (("consumer_byte_rate", 1.0),)),
        QuotaAlteration(CLIENT, (("producer_byte_rate", 1.0), ("producer_byte_rate", 2.0))),
    )
    assert results == [
        (ErrorCode.INVALID_REQUEST, "Ignoring duplicate entity ClientQuotaEntity(entries={user=alice})"),
        (ErrorCode.INVALID_REQUEST, "Ignoring duplicate entity ClientQuotaEntity(entries={client-id=app})"),
    ]
    assert cluster.image.client_quotas() == {}


def test_default_entities_and_ip_quotas(cluster: Cluster) -> None:
    default_user = (("user", None),)
    assert (
        alter(
            cluster,
            QuotaAlteration(default_user, (("producer_byte_rate", 100.0),)),
            QuotaAlteration((("ip", "10.0.0.1"),), (("connection_creation_rate", 5.0),)),
            QuotaAlteration((("ip", None),), (("connection_creation_rate", 7.0),)),
        )
        == [(ErrorCode.NONE, None)] * 3
    )
    assert cluster.image.client_quota(default_user) == {"producer_byte_rate": 100.0}


def test_the_record_round_trips_through_the_wire() -> None:
    record = ClientQuotaRecord((("client-id", None), ("user", "bob")), "consumer_byte_rate", 1e9, False)
    assert record_from_wire(metadata_record_value(record)) == record


def test_quotas_survive_a_snapshot(cluster: Cluster, tmp_path: pathlib.Path) -> None:
    alter(
        cluster,
        QuotaAlteration(BOTH, (("producer_byte_rate", 3.0),)),
        QuotaAlteration(CLIENT, (("request_percentage", 50.0),)),
    )
    image = replayed(cluster.log)
    assert MetadataImage.from_snapshot(image_records(image), offset=image.offset, epoch=image.epoch) == image
    snapshot_id = write_snapshot(
        tmp_path, image, end_offset=image.offset + 1, epoch=image.epoch, timestamp_ms=1
    )
    loaded = load_image(
        read_snapshot(snapshot_path(tmp_path, snapshot_id)), snapshot_id.end_offset, snapshot_id.epoch
    )
    assert loaded == image and loaded.client_quota(BOTH) == {"producer_byte_rate": 3.0}


QUOTAS = {
    (("user", "alice"),): {"producer_byte_rate": 1.0},
    (("user", None),): {"producer_byte_rate": 2.0},
    (("client-id", "app"), ("user", "alice")): {"consumer_byte_rate": 3.0},
    (("client-id", "app"),): {"consumer_byte_rate": 4.0},
    (("ip", "1.2.3.4"),): {"connection_creation_rate": 5.0},
}


def names(
    matched: list[tuple[tuple[tuple[str, str | None], ...], dict[str, float]]],
) -> set[tuple[tuple[str, str | None], ...]]:
    return {entity for entity, _ in matched}


def test_describe_filters_like_kafka() -> None:
    exact_alice = QuotaFilterComponent("user", MatchType.EXACT, "alice")
    assert names(describe_quotas(QUOTAS, [exact_alice], strict=True)) == {(("user", "alice"),)}
    assert names(describe_quotas(QUOTAS, [exact_alice], strict=False)) == {
        (("user", "alice"),),
        (("client-id", "app"), ("user", "alice")),
    }
    default_user = QuotaFilterComponent("user", MatchType.DEFAULT, None)
    assert names(describe_quotas(QUOTAS, [default_user], strict=True)) == {(("user", None),)}
    any_client = QuotaFilterComponent("client-id", MatchType.SPECIFIED, None)
    assert names(describe_quotas(QUOTAS, [any_client], strict=True)) == {(("client-id", "app"),)}
    assert len(describe_quotas(QUOTAS, [], strict=False)) == len(QUOTAS)
    assert describe_quotas(QUOTAS, [], strict=True) == []


@pytest.mark.parametrize(
    ("components", "code", "message"),
    [
        ([QuotaFilterComponent("", 0, "x")], ErrorCode.INVALID_REQUEST, "Invalid empty entity type."),
        (
            [QuotaFilterComponent("group", 0, "x")],
            ErrorCode.UNSUPPORTED_VERSION,
            "Unsupported entity type group",
        ),
        (
            [QuotaFilterComponent("user", 0, None)],
            ErrorCode.INVALID_REQUEST,
            "Request specified MATCH_TYPE_EXACT, but set match string to null.",
        ),
        (
            [QuotaFilterComponent("user", 1, "x")],
            ErrorCode.INVALID_REQUEST,
            "Request specified MATCH_TYPE_DEFAULT, but also specified a match string.",
        ),
        ([QuotaFilterComponent("user", 7, None)], ErrorCode.INVALID_REQUEST, "Unknown match type 7"),
        (
            [QuotaFilterComponent("user", 2, None), QuotaFilterComponent("user", 1, None)],
            ErrorCode.INVALID_REQUEST,
            "Entity type user cannot appear more than once in the filter.",
        ),
        (
            [QuotaFilterComponent("ip", 2, None), QuotaFilterComponent("user", 1, None)],
            ErrorCode.INVALID_REQUEST,
            "Invalid entity filter component combination. IP filter component should not be used with "
            "user or clientId filter component.",
        ),
    ],
)
def test_bad_filters_are_refused_with_kafkas_messages(
    components: list[QuotaFilterComponent], code: ErrorCode, message: str
) -> None:
    with pytest.raises(KafkaError) as caught:
        describe_quotas(QUOTAS, components, strict=False)
    assert (caught.value.code, caught.value.message) == (code, message)
