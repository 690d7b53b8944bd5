"""Client quotas as the controller validates them and as DescribeClientQuotas filters them.

Kafka's ``ClientQuotaControlManager`` (AlterClientQuotas) and ``ClientQuotasImage.describe``
(DescribeClientQuotas), over the quotas a :class:`~metadata.image.MetadataImage` holds.

An entity is a set of (entity type, entity name) pairs: ``user`` and/or ``client-id``, or ``ip``
alone; a None name is the type's default entity. The quota keys an entity may have follow from its
types: ``producer_byte_rate`` and ``consumer_byte_rate`` (integral), ``request_percentage`` and
``controller_mutation_rate`` for users and client ids, ``connection_creation_rate`` (integral) for
IPs. One deliberate difference from Kafka: an entity with an invalid key or value is refused as a
whole (Kafka reports the error but then overwrites it with success and writes the entity's other
keys); and an IP entity's name must be an IP address (Kafka also accepts a host name it can
resolve: the controller does no DNS lookups).
"""

from __future__ import annotations

import enum
import ipaddress
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from metadata.image import QuotaEntity, quota_entity
from metadata.records import ClientQuotaRecord
from protocol.error_codes import ErrorCode, KafkaError

__all__ = [
    "CLIENT_ID",
    "IP",
    "USER",
    "AlterationResult",
    "MatchType",
    "QuotaAlteration",
    "QuotaFilterComponent",
    "describe_quotas",
    "entity_text",
    "plan_alterations",
]

USER = "user"
CLIENT_ID = "client-id"
IP = "ip"

PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"
IP_CONNECTION_RATE = "connection_creation_rate"


class _Kind(enum.Enum):
    LONG = "Long"
    INT = "Int"
    DOUBLE = "Double"


CLIENT_QUOTA_KEYS = {
    PRODUCER_BYTE_RATE: _Kind.LONG,
    CONSUMER_BYTE_RATE: _Kind.LONG,
    REQUEST_PERCENTAGE: _Kind.DOUBLE,
    CONTROLLER_MUTATION_RATE: _Kind.DOUBLE,
}
"""Kafka's QuotaConfigs for users and client ids, with their types."""
IP_QUOTA_KEYS = {IP_CONNECTION_RATE: _Kind.INT}
_EPSILON = 1e-6
_INT_MAX = 2**31 - 1
_LONG_MAX = 2**63 - 1


@dataclass(frozen=True, slots=True)
class QuotaAlteration:
    """One entry of AlterClientQuotas: the entity's pairs as sent, and (key, value) operations
    (value None removes the key)."""

    entity: tuple[tuple[str, str | None], ...]
    ops: tuple[tuple[str, float | None], ...]


@dataclass(frozen=True, slots=True)
class AlterationResult:
    entity: tuple[tuple[str, str | None], ...]
    error: ErrorCode
    message: str | None = None


class MatchType(enum.IntEnum):
    """DescribeClientQuotas' match types."""

    EXACT = 0
    DEFAULT = 1
    SPECIFIED = 2


@dataclass(frozen=True, slots=True)
class QuotaFilterComponent:
    entity_type: str
    match_type: int
    match: str | None


def entity_text(entity: Sequence[tuple[str, str | None]]) -> str:
    """The entity as Kafka's ``ClientQuotaEntity.toString`` prints it in error messages."""
    entries = ", ".join(f"{kind}={name}" for kind, name in entity)
    return f"ClientQuotaEntity(entries={{{entries}}})"


def plan_alterations(
    quotas: Mapping[QuotaEntity, Mapping[str, float]], alterations: Sequence[QuotaAlteration]
) -> tuple[list[AlterationResult], list[ClientQuotaRecord]]:
    """Validate each alteration against the current ``quotas``; the results (one per distinct
    entity, in request order) and the records of the valid ones (only keys whose value changes)."""
    results: dict[QuotaEntity, AlterationResult] = {}
    records: list[ClientQuotaRecord] = []
    for alteration in alterations:
        entity = quota_entity(alteration.entity)
        keys = [key for key, _ in alteration.ops]
        duplicate = next((key for key in keys if keys.count(key) > 1), None)
        if entity in results or duplicate is not None:
            # Kafka answers a repeated key with this message too: its duplicate-key error is
            # overwritten when it then finds the entity already answered
            results[entity] = AlterationResult(
                alteration.entity,
                ErrorCode.INVALID_REQUEST,
                f"Ignoring duplicate entity {entity_text(alteration.entity)}",
            )
            continue
        try:
            records.extend(_alter(entity, alteration, quotas.get(entity, {})))
        except KafkaError as exc:
            results[entity] = AlterationResult(alteration.entity, exc.code, exc.message)
            continue
        results[entity] = AlterationResult(alteration.entity, ErrorCode.NONE)
    failed = {e for e, r in results.items() if r.error is not ErrorCode.NONE}
    return list(results.values()), [r for r in records if quota_entity(r.entity) not in failed]


def _alter(
    entity: QuotaEntity, alteration: QuotaAlteration, current: Mapping[str, float]
) -> list[ClientQuotaRecord]:
    valid_keys = _valid_keys(_validated_entity(alteration.entity))
    records = []
    for key, value in alteration.ops:
        if value is None:
            if key in current:
                records.append(ClientQuotaRecord(entity, key, 0.0, True))
            continue
        _check_value(valid_keys, key, value)
        if current.get(key) != value:
            records.append(ClientQuotaRecord(entity, key, value, False))
    return records


def _validated_entity(pairs: Sequence[tuple[str, str | None]]) -> dict[str, str | None]:
    """Kafka's validateEntity: known types, each once, no empty names."""
    if not pairs:
        raise KafkaError(ErrorCode.INVALID_REQUEST, "Invalid empty client quota entity")
    validated: dict[str, str | None] = {}
    for kind, name in pairs:
        if kind in validated:
            raise KafkaError(
                ErrorCode.INVALID_REQUEST, f"Invalid client quota entity, duplicate entity entry {kind}"
            )
        if kind not in (USER, CLIENT_ID, IP):
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"Unhandled client quota entity type: {kind}")
        validated[kind] = name
        if name is not None and name == "":
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"Empty {kind} not supported")
    return validated


def _valid_keys(entity: Mapping[str, str | None]) -> Mapping[str, _Kind]:
    """Kafka's configKeysForEntityType: user and/or client-id, or ip alone."""
    has_user, has_client, has_ip = USER in entity, CLIENT_ID in entity, IP in entity
    if (has_user or has_client) and not has_ip:
        return CLIENT_QUOTA_KEYS
    if has_ip and not has_user and not has_client:
        address = entity[IP]
        if address is not None and not _is_ip(address):
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"{address} is not a valid IP or resolvable host.")
        return IP_QUOTA_KEYS
    raise KafkaError(ErrorCode.INVALID_REQUEST, "Invalid empty client quota entity")


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def _check_value(valid_keys: Mapping[str, _Kind], key: str, value: float) -> None:
    """Kafka's validateQuotaKeyValue (3.6 on): a known key, a value above 0, and for Long and Int
    keys an integral value within the type's range."""
    kind = valid_keys.get(key)
    if kind is None:
        raise KafkaError(ErrorCode.INVALID_REQUEST, f"Invalid configuration key {key}")
    if value <= 0.0:  # Kafka >= 3.6 (KAFKA-14943): a zero or negative quota would throttle everyone
        raise KafkaError(ErrorCode.INVALID_REQUEST, f"Quota {key} must be greater than 0")
    if kind is _Kind.DOUBLE:
        return
    limit, article = (_INT_MAX, "an INT") if kind is _Kind.INT else (_LONG_MAX, "a LONG")
    if value > limit:
        raise KafkaError(ErrorCode.INVALID_REQUEST, f"Proposed value for {key} is too large for {article}.")
    if abs(math.fmod(value, 1.0)) > _EPSILON:
        raise KafkaError(ErrorCode.INVALID_REQUEST, f"{key} cannot be a fractional value.")


def describe_quotas(
    quotas: Mapping[QuotaEntity, Mapping[str, float]],
    components: Sequence[QuotaFilterComponent],
    strict: bool,
) -> list[tuple[QuotaEntity, dict[str, float]]]:
    """The entities matching the filter (Kafka's ClientQuotasImage.describe), in entity order.

    Raises KafkaError: INVALID_REQUEST for a malformed filter or an unknown match type,
    UNSUPPORTED_VERSION for an unknown entity type, with Kafka's messages.
    """
    exact: dict[str, str | None] = {}
    specified: set[str] = set()
    for component in components:
        kind = component.entity_type
        if not kind:
            raise KafkaError(ErrorCode.INVALID_REQUEST, "Invalid empty entity type.")
        if kind in exact or kind in specified:
            raise KafkaError(
                ErrorCode.INVALID_REQUEST, f"Entity type {kind} cannot appear more than once in the filter."
            )
        if kind not in (IP, USER, CLIENT_ID):
            raise KafkaError(ErrorCode.UNSUPPORTED_VERSION, f"Unsupported entity type {kind}")
        if component.match_type == MatchType.EXACT:
            if component.match is None:
                raise KafkaError(
                    ErrorCode.INVALID_REQUEST,
                    "Request specified MATCH_TYPE_EXACT, but set match string to null.",
                )
            exact[kind] = component.match
        elif component.match_type == MatchType.DEFAULT:
            if component.match is not None:
                raise KafkaError(
                    ErrorCode.INVALID_REQUEST,
                    "Request specified MATCH_TYPE_DEFAULT, but also specified a match string.",
                )
            exact[kind] = None
        elif component.match_type == MatchType.SPECIFIED:
            if component.match is not None:
                raise KafkaError(
                    ErrorCode.INVALID_REQUEST,
                    "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string.",
                )
            specified.add(kind)
        else:
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"Unknown match type {component.match_type}")
    mentioned = set(exact) | specified
    if IP in mentioned and (USER in mentioned or CLIENT_ID in mentioned):
        raise KafkaError(
            ErrorCode.INVALID_REQUEST,
            "Invalid entity filter component combination. IP filter component should not be used with "
            "user or clientId filter component.",
        )
    matched = []
    for entity, values in sorted(quotas.items(), key=lambda item: repr(item[0])):
        names = dict(entity)
        if strict and len(names) != len(exact) + len(specified):
            continue
        if any(kind not in names or names[kind] != name for kind, name in exact.items()):
            continue
        if any(kind not in names for kind in specified):
            continue
        matched.append((entity, dict(values)))
    return matched
