"""DescribeClientQuotas (48, v0-1) and AlterClientQuotas (49, v0-1).

DescribeClientQuotas is served by brokers from their metadata image (Kafka's
``ClientQuotasImage.describe``): the entities matching the filter with their quotas; a bad filter
is a top-level error with Kafka's message and null entries. AlterClientQuotas is the controller's
(:mod:`metadata.client_quotas`): brokers forward it and answer once their own metadata shows the
change (broker/handlers/forwarding.py). Each distinct entity of the request gets one result.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from broker.handlers.authorization import ALLOW_EVERYTHING, cluster_allowed
from broker.handlers.base import Handler, RequestContext
from metadata.authorizer.standard import Authorizer
from metadata.client_quotas import (
    AlterationResult,
    QuotaAlteration,
    QuotaFilterComponent,
    describe_quotas,
)
from metadata.controller.active import ControllerRef, resolve_controller
from metadata.image import MetadataImage, quota_entity
from protocol.acl_types import AclOperation
from protocol.api_keys import ApiKey
from protocol.data import MessageData
from protocol.error_codes import ErrorCode, KafkaError


class DescribeClientQuotasHandler(Handler):
    api_key = ApiKey.DESCRIBE_CLIENT_QUOTAS
    min_version = 0
    max_version = 1

    def __init__(self, image: MetadataImage, authorizer: Authorizer = ALLOW_EVERYTHING) -> None:
        """With an authorizer the requester needs DESCRIBE_CONFIGS on the cluster (else
        CLUSTER_AUTHORIZATION_FAILED), as in Kafka."""
        self._image = image
        self._authorizer = authorizer

    async def handle(self, ctx: RequestContext, request: MessageData) -> Any:
        if self._authorizer.enabled and not cluster_allowed(
            self._authorizer, ctx, AclOperation.DESCRIBE_CONFIGS
        ):
            raise KafkaError(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
        components = [QuotaFilterComponent(c.entity_type, c.match_type, c.match) for c in request.components]
        try:
            matched = describe_quotas(self._image.client_quotas(), components, request.strict)
        except KafkaError as exc:
            return _describe_error(exc.code, exc.message)
        entries = [
            {
                "entity": [{"entity_type": kind, "entity_name": name} for kind, name in entity],
                "values": [{"key": key, "value": value} for key, value in sorted(values.items())],
            }
            for entity, values in matched
        ]
        return {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "entries": entries}

    def error_response(self, ctx: RequestContext, request: MessageData | None, code: ErrorCode) -> Any:
        return _describe_error(code, None)


def _describe_error(code: ErrorCode, message: str | None) -> dict[str, Any]:
    return {"throttle_time_ms": 0, "error_code": int(code), "error_message": message, "entries": None}


class AlterClientQuotasHandler(Handler):
    api_key = ApiKey.ALTER_CLIENT_QUOTAS
    min_version = 0
    max_version = 1

    def __init__(self, controller: ControllerRef) -> None:
        self._controller = controller

    async def handle(self, ctx: RequestContext, request: MessageData) -> Any:
        alterations = [
            QuotaAlteration(
                tuple((e.entity_type, e.entity_name) for e in entry.entity),
                tuple((op.key, None if op.remove else op.value) for op in entry.ops),
            )
            for entry in request.entries
        ]
        try:
            results = resolve_controller(self._controller).alter_client_quotas(
                alterations, validate_only=request.validate_only
            )
        except KafkaError as exc:
            return self.error_body(ctx, request, exc.code)
        return {"throttle_time_ms": 0, "entries": [_result(r) for r in results]}

    def error_response(self, ctx: RequestContext, request: MessageData | None, code: ErrorCode) -> Any:
        return self.error_body(ctx, request, code)

    @staticmethod
    def error_body(ctx: RequestContext, request: MessageData | None, code: ErrorCode) -> Any:
        """Every entity of the request carries ``code``."""
        entries = request.entries if request is not None else []
        results = [
            AlterationResult(tuple((e.entity_type, e.entity_name) for e in entry.entity), code)
            for entry in entries
        ]
        return {"throttle_time_ms": 0, "entries": [_result(r) for r in results]}


def _result(result: AlterationResult) -> dict[str, Any]:
    return {
        "error_code": int(result.error),
        "error_message": result.message,
        "entity": [{"entity_type": kind, "entity_name": name} for kind, name in result.entity],
    }


def altered_quotas_shown(request: MessageData, response: MessageData) -> Callable[[MetadataImage], bool]:
    """The effect a broker forwarding AlterClientQuotas waits for: every entity answered NONE has
    the values the request set and lacks the keys it removed."""
    ok = {
        quota_entity((e.entity_type, e.entity_name) for e in entry.entity)
        for entry in response.entries
        if entry.error_code == ErrorCode.NONE
    }
    wanted = [
        (entity, {op.key: None if op.remove else op.value for op in entry.ops})
        for entry in request.entries
        if (entity := quota_entity((e.entity_type, e.entity_name) for e in entry.entity)) in ok
    ]

    def effect(image: MetadataImage) -> bool:
        for entity, ops in wanted:
            current = image.client_quota(entity)
            if any(current.get(key) != value for key, value in ops.items()):
                return False
        return True

    return effect
