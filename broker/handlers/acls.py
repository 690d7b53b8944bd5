"""DescribeAcls (29), CreateAcls (30) and DeleteAcls (31), v1-3: the cluster's ACLs, kept in the
cluster metadata (AccessControlEntryRecord), as Kafka's ``AclApis`` serves them.

DescribeAcls is answered by a broker from its own image through its authorizer
(:mod:`metadata.authorizer`). CreateAcls and DeleteAcls are the controller's
(:mod:`metadata.controller.acl_control`): a broker checks them (:class:`AuthorizedAclForwarding`),
forwards them unchanged and answers once its own image shows the change, so a client that lists
the ACLs right after the answer sees its ACLs on the broker that answered.

As in Kafka, without an authorizer (``authorizer.class.name`` empty) all three answer
SECURITY_DISABLED: DescribeAcls at the top, CreateAcls for each creation, DeleteAcls for each
filter (the controller answers so too when its own config names no authorizer). With one, the
requester needs DESCRIBE (DescribeAcls) or ALTER (CreateAcls, DeleteAcls) on the CLUSTER resource,
else CLUSTER_AUTHORIZATION_FAILED. A forwarded request carries no principal (there is no Envelope),
so the broker that receives it from the client checks it; the controller listener does not.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from broker.handlers.base import Handler, RequestContext
from broker.handlers.forwarding import ForwardingHandler
from metadata.authorizer.standard import Authorizer
from metadata.controller.acl_control import AclCreationResult, AclDeletionResult
from metadata.controller.active import ControllerRef, resolve_controller
from metadata.controller.controller import QuorumController
from metadata.image import MetadataImage
from protocol.acl_bindings import CLUSTER_NAME, AclBinding, AclBindingFilter
from protocol.acl_types import AclOperation, ResourceType
from protocol.api_keys import ApiKey
from protocol.data import MessageData
from protocol.error_codes import ErrorCode, KafkaError

__all__ = [
    "NO_AUTHORIZER",
    "AuthorizedAclForwarding",
    "CreateAclsHandler",
    "DeleteAclsHandler",
    "DescribeAclsHandler",
    "created_acls_shown",
    "deleted_acls_gone",
    "describe_resources",
]

NO_AUTHORIZER = "No Authorizer is configured."
"""Kafka's message with SECURITY_DISABLED (DescribeAcls adds `` on the broker``)."""
MIN_VERSION, MAX_VERSION = 1, 3


def _cluster_allowed(authorizer: Authorizer, ctx: RequestContext, operation: AclOperation) -> bool:
    """Kafka's ``authorizeClusterOperation``."""
    return authorizer.authorize(ctx.principal, ctx.client_host, operation, ResourceType.CLUSTER, CLUSTER_NAME)


def describe_resources(bindings: list[AclBinding]) -> list[dict[str, Any]]:
    """DescribeAcls' ``resources``: the bindings grouped by resource pattern (Kafka's
    ``DescribeAclsResponse.aclsResources``), patterns and entries in binding order."""
    grouped: dict[Any, list[AclBinding]] = {}
    for binding in bindings:
        grouped.setdefault(binding.pattern, []).append(binding)
    return [
        {
            "resource_type": int(pattern.resource_type),
            "resource_name": pattern.name,
            "pattern_type": int(pattern.pattern_type),
            "acls": [
                {
                    "principal": b.entry.principal,
                    "host": b.entry.host,
                    "operation": int(b.entry.operation),
                    "permission_type": int(b.entry.permission_type),
                }
                for b in members
            ],
        }
        for pattern, members in grouped.items()
    ]


def _filter_of(request: Any) -> AclBindingFilter:
    """DescribeAcls' filter, or one DeleteAcls filter (their field names are the same)."""
    return AclBindingFilter.from_codes(
        request.resource_type_filter,
        request.resource_name_filter,
        request.pattern_type_filter,
        request.principal_filter,
        request.host_filter,
        request.operation,
        request.permission_type,
    )


def _binding_of(creation: Any) -> AclBinding:
    return AclBinding.from_codes(
        creation.resource_type,
        creation.resource_name,
        creation.resource_pattern_type,
        creation.principal,
        creation.host,
        creation.operation,
        creation.permission_type,
    )


class DescribeAclsHandler(Handler):
    """A broker's: the ACLs its image holds that the request's filter matches."""

    api_key = ApiKey.DESCRIBE_ACLS
    min_version = MIN_VERSION
    max_version = MAX_VERSION

    def __init__(self, authorizer: Authorizer) -> None:
        self._authorizer = authorizer

    async def handle(self, ctx: RequestContext, request: MessageData) -> Any:
        binding_filter = _filter_of(request)
        if binding_filter.is_unknown:
            return _describe_body(ErrorCode.INVALID_REQUEST, "The filter contains UNKNOWN elements")
        if not _cluster_allowed(self._authorizer, ctx, AclOperation.DESCRIBE):
            return _describe_body(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
        if not self._authorizer.enabled:
            return _describe_body(ErrorCode.SECURITY_DISABLED, "No Authorizer is configured on the broker")
        return _describe_body(
            ErrorCode.NONE, resources=describe_resources(self._authorizer.acls(binding_filter))
        )

    def error_response(self, ctx: RequestContext, request: MessageData | None, code: ErrorCode) -> Any:
        return _describe_body(code)


def _describe_body(
    code: ErrorCode, message: str | None = None, resources: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    return {
        "throttle_time_ms": 0,
        "error_code": int(code),
        "error_message": message,
        "resources": resources or [],
    }


class _AclChangeHandler(Handler):
    """CreateAcls or DeleteAcls at the controller (a broker forwards them here unchanged): one
    result per creation or filter, each carrying the error when the whole request fails (Kafka's
    getErrorResponse)."""

    min_version = MIN_VERSION
    max_version = MAX_VERSION

    def __init__(self, controller: ControllerRef, enabled: bool) -> None:
        """``enabled``: this node's config names an authorizer (else SECURITY_DISABLED)."""
        self._controller = controller
        self._enabled = enabled

    async def handle(self, ctx: RequestContext, request: MessageData) -> Any:
        if not self._enabled:
            return self.error_body(ctx, request, ErrorCode.SECURITY_DISABLED, NO_AUTHORIZER)
        try:
            return self._change(resolve_controller(self._controller), request)
        except KafkaError as exc:
            return self.error_body(ctx, request, exc.code, exc.message)

    def error_response(self, ctx: RequestContext, request: MessageData | None, code: ErrorCode) -> Any:
        return self.error_body(ctx, request, code)

    def _change(self, controller: QuorumController, request: MessageData) -> Any:
        """The response body of the change the controller made."""
        raise NotImplementedError

    @classmethod
    def error_body(
        cls, ctx: RequestContext, request: MessageData | None, code: ErrorCode, message: str | None = None
    ) -> Any:
        raise NotImplementedError


class CreateAclsHandler(_AclChangeHandler):
    api_key = ApiKey.CREATE_ACLS

    def _change(self, controller: QuorumController, request: MessageData) -> Any:
        results = controller.create_acls([_binding_of(creation) for creation in request.creations])
        return {"throttle_time_ms": 0, "results": [_creation(result) for result in results]}

    @classmethod
    def error_body(
        cls, ctx: RequestContext, request: MessageData | None, code: ErrorCode, message: str | None = None
    ) -> Any:
        """Every creation carries ``code``."""
        count = 0 if request is None else len(request.creations)
        return {"throttle_time_ms": 0, "results": [_creation(AclCreationResult(code, message))] * count}


def _creation(result: AclCreationResult) -> dict[str, Any]:
    return {"error_code": int(result.error), "error_message": result.message}


class DeleteAclsHandler(_AclChangeHandler):
    api_key = ApiKey.DELETE_ACLS

    def _change(self, controller: QuorumController, request: MessageData) -> Any:
        results = controller.delete_acls([_filter_of(f) for f in request.filters])
        return {"throttle_time_ms": 0, "filter_results": [_filter_result(result) for result in results]}

    @classmethod
    def error_body(
        cls, ctx: RequestContext, request: MessageData | None, code: ErrorCode, message: str | None = None
    ) -> Any:
        """Every filter carries ``code``, matching nothing."""
        count = 0 if request is None else len(request.filters)
        return {
            "throttle_time_ms": 0,
            "filter_results": [_filter_result(AclDeletionResult(code, message))] * count,
        }


def _filter_result(result: AclDeletionResult) -> dict[str, Any]:
    return {
        "error_code": int(result.error),
        "error_message": result.message,
        "matching_acls": [
            {
                "error_code": 0,
                "error_message": None,
                "resource_type": int(b.pattern.resource_type),
                "resource_name": b.pattern.name,
                "pattern_type": int(b.pattern.pattern_type),
                "principal": b.entry.principal,
                "host": b.entry.host,
                "operation": int(b.entry.operation),
                "permission_type": int(b.entry.permission_type),
            }
            for b in result.deleted
        ],
    }


class AuthorizedAclForwarding(Handler):
    """CreateAcls or DeleteAcls on a client listener: SECURITY_DISABLED without an authorizer,
    CLUSTER_AUTHORIZATION_FAILED without ALTER on the cluster, else forwarded to the controller."""

    def __init__(
        self,
        api: type[CreateAclsHandler] | type[DeleteAclsHandler],
        forwarding: ForwardingHandler,
        authorizer: Authorizer,
    ) -> None:
        self.api_key = api.api_key  # type: ignore[misc]
        self.min_version = api.min_version  # type: ignore[misc]
        self.max_version = api.max_version  # type: ignore[misc]
        self._api = api
        self._forwarding = forwarding
        self._authorizer = authorizer

    async def handle(self, ctx: RequestContext, request: MessageData) -> Any:
        if not self._authorizer.enabled:
            return self._api.error_body(ctx, request, ErrorCode.SECURITY_DISABLED, NO_AUTHORIZER)
        if not _cluster_allowed(self._authorizer, ctx, AclOperation.ALTER):
            return self._api.error_body(ctx, request, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
        return await self._forwarding.handle(ctx, request)

    def error_response(self, ctx: RequestContext, request: MessageData | None, code: ErrorCode) -> Any:
        return self._api.error_body(ctx, request, code)


Effect = Callable[[MetadataImage], bool]


def created_acls_shown(request: MessageData, response: MessageData) -> Effect:
    """The effect a broker forwarding CreateAcls waits for: every creation answered NONE is an ACL
    of its image."""
    wanted = [
        _binding_of(creation)
        for creation, result in zip(request.creations, response.results, strict=False)
        if result.error_code == ErrorCode.NONE
    ]
    return lambda image: all(binding in image.acls for binding in wanted)


def deleted_acls_gone(request: MessageData, response: MessageData) -> Effect:
    """The effect a broker forwarding DeleteAcls waits for: no ACL a filter deleted is left."""
    gone = [
        AclBinding.from_codes(
            m.resource_type,
            m.resource_name,
            m.pattern_type,
            m.principal,
            m.host,
            m.operation,
            m.permission_type,
        )
        for result in response.filter_results
        if result.error_code == ErrorCode.NONE
        for m in result.matching_acls
        if m.error_code == ErrorCode.NONE
    ]
    return lambda image: not any(binding in image.acls for binding in gone)
