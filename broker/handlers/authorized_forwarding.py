"""Forwarded admin APIs, authorized on the broker that receives them.

Kafka forwards these to the controller inside an Envelope that carries the client's principal, and
the controller (ControllerApis) checks it. Kipling has no Envelope: the controller never sees the
client, so the broker checks with Kafka's rules before forwarding, then forwards only what is
allowed and answers the rest itself:

* CreateTopics: CREATE on the cluster, else on each topic (TOPIC_AUTHORIZATION_FAILED, "Authorization
  failed."); a created topic's configs are returned only with DESCRIBE_CONFIGS on it (else
  ``topic_config_error_code`` TOPIC_AUTHORIZATION_FAILED and no configs).
* DeleteTopics: DELETE on the cluster, else on each topic (TOPIC_AUTHORIZATION_FAILED; one named
  by id keeps its name only when the requester may DESCRIBE it; a missing topic it may DESCRIBE
  gets the controller's UNKNOWN_TOPIC_OR_PARTITION).
* CreatePartitions: ALTER on each topic (TOPIC_AUTHORIZATION_FAILED).
* ElectLeaders, AlterPartitionReassignments, AlterUserScramCredentials: ALTER on the cluster;
  ListPartitionReassignments: DESCRIBE on the cluster; AlterClientQuotas: ALTER_CONFIGS on the
  cluster (all CLUSTER_AUTHORIZATION_FAILED for the whole request).

Without an enabled authorizer the request is forwarded untouched.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from broker.handlers.authorization import allowed, cluster_allowed
from broker.handlers.base import Handler, RequestContext
from broker.handlers.forwarding import ForwardedApi, ForwardingHandler
from metadata.authorizer.standard import Authorizer
from metadata.image import MetadataImage
from protocol.acl_types import AclOperation, ResourceType
from protocol.api_keys import ApiKey
from protocol.data import MessageData
from protocol.error_codes import ErrorCode

__all__ = ["CLUSTER_OPERATIONS", "AuthorizedForwarding"]

CLUSTER_OPERATIONS: dict[ApiKey, AclOperation] = {
    ApiKey.ELECT_LEADERS: AclOperation.ALTER,
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: AclOperation.ALTER,
    ApiKey.LIST_PARTITION_REASSIGNMENTS: AclOperation.DESCRIBE,
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: AclOperation.ALTER,
    ApiKey.ALTER_CLIENT_QUOTAS: AclOperation.ALTER_CONFIGS,
}
"""The forwarded APIs checked against the cluster alone, and the operation each needs."""
AUTHORIZATION_FAILED = "Authorization failed."


@dataclass(frozen=True, slots=True)
class _Split:
    """A request cut into what may be forwarded and the answers for what may not."""

    forwarded: MessageData | None
    refused: list[Any]


class AuthorizedForwarding(Handler):
    """A :class:`ForwardingHandler` behind the requester's ACLs (see the module docstring)."""

    def __init__(
        self,
        api: ForwardedApi,
        forwarding: ForwardingHandler,
        authorizer: Authorizer,
        image: MetadataImage,
    ) -> None:
        self.api_key = api.api_key  # type: ignore[misc]
        self.min_version = api.min_version  # type: ignore[misc]
        self.max_version = api.max_version  # type: ignore[misc]
        self._api = api
        self._forwarding = forwarding
        self._authorizer = authorizer
        self._image = image

    async def handle(self, ctx: RequestContext, request: MessageData) -> Any:
        if not self._authorizer.enabled:
            return await self._forwarding.handle(ctx, request)
        operation = CLUSTER_OPERATIONS.get(self.api_key)
        if operation is not None:
            if not cluster_allowed(self._authorizer, ctx, operation):
                return self._api.error_body(ctx, request, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
            return await self._forwarding.handle(ctx, request)
        split, field = self._split(ctx, request)
        if split.forwarded is None:
            return self._finish(ctx, await self._forwarding.handle(ctx, request))
        response: Any = {"throttle_time_ms": 0, field: []}
        if split.forwarded[_request_field(self.api_key, ctx.api_version)]:
            response = await self._forwarding.handle(ctx, split.forwarded)
        body = dict(response)
        body[field] = [*response[field], *split.refused]
        return self._finish(ctx, body)

    def error_response(self, ctx: RequestContext, request: MessageData | None, code: ErrorCode) -> Any:
        return self._api.error_body(ctx, request, code)

    # -- per-topic APIs ---------------------------------------------------------------------------

    def _split(self, ctx: RequestContext, request: MessageData) -> tuple[_Split, str]:
        """The entries the requester may change, and the refusals of the others (forwarded None
        when nothing is refused)."""
        key, version = self.api_key, ctx.api_version
        request_field = _request_field(key, version)
        entries = list(request[request_field])
        if key == ApiKey.CREATE_TOPICS:
            may = self._creatable(ctx)
            refusals = {
                i: _refusal(self._api, ctx, request, request_field, e, AUTHORIZATION_FAILED)
                for i, e in enumerate(entries)
                if not may(e.name)
            }
            field = "topics"
        elif key == ApiKey.CREATE_PARTITIONS:
            refusals = {
                i: _refusal(self._api, ctx, request, request_field, e)
                for i, e in enumerate(entries)
                if not self._topic(ctx, AclOperation.ALTER, e.name)
            }
            field = "results"
        elif cluster_allowed(self._authorizer, ctx, AclOperation.DELETE):  # DeleteTopics, all of them
            refusals = {}
            field = "responses"
        else:  # DeleteTopics
            refusals = {}
            for i, entry in enumerate(entries):
                refusal = self._delete_refusal(ctx, request, request_field, entry)
                if refusal is not None:
                    refusals[i] = refusal
            field = "responses"
        if not refusals:
            return _Split(None, []), field
        forwarded = MessageData(request)
        forwarded[request_field] = [e for i, e in enumerate(entries) if i not in refusals]
        return _Split(forwarded, list(refusals.values())), field

    def _creatable(self, ctx: RequestContext) -> Callable[[str], bool]:
        if cluster_allowed(self._authorizer, ctx, AclOperation.CREATE):
            return lambda name: True
        return lambda name: self._topic(ctx, AclOperation.CREATE, name)

    def _delete_refusal(
        self, ctx: RequestContext, request: MessageData, request_field: str, entry: Any
    ) -> Any | None:
        """DeleteTopics' refusal of one entry (a name before v6, a name or an id from v6), or None."""
        if isinstance(entry, str):
            name: str | None = entry
            topic_id = None
        else:
            name, topic_id = entry.name, entry.topic_id
        if not name:
            topic = self._image.get_by_id(topic_id) if topic_id is not None else None
            if topic is None:
                return None  # UNKNOWN_TOPIC_ID, the controller's answer
            if self._topic(ctx, AclOperation.DELETE, topic.name):
                return None
            refusal = _refusal(self._api, ctx, request, request_field, entry)
            if self._topic(ctx, AclOperation.DESCRIBE, topic.name):
                refusal["name"] = topic.name
            return refusal
        if self._topic(ctx, AclOperation.DELETE, name):
            return None
        if self._image.get(name) is None and self._topic(ctx, AclOperation.DESCRIBE, name):
            return None  # described: the controller's UNKNOWN_TOPIC_OR_PARTITION may be told
        return _refusal(self._api, ctx, request, request_field, entry)

    def _topic(self, ctx: RequestContext, operation: AclOperation, name: str) -> bool:
        return allowed(self._authorizer, ctx, operation, ResourceType.TOPIC, name)

    def _finish(self, ctx: RequestContext, response: Any) -> Any:
        """CreateTopics: hide the configs of the created topics the requester may not DESCRIBE_CONFIGS."""
        if self.api_key != ApiKey.CREATE_TOPICS:
            return response
        body = dict(response)
        results = []
        for result in body["topics"]:
            entry = dict(result)
            if entry.get("error_code") == ErrorCode.NONE and not self._topic(
                ctx, AclOperation.DESCRIBE_CONFIGS, entry["name"]
            ):
                entry["configs"] = []
                entry["topic_config_error_code"] = int(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
            results.append(entry)
        body["topics"] = results
        return body


def _request_field(key: ApiKey, version: int) -> str:
    if key == ApiKey.DELETE_TOPICS and version < 6:
        return "topic_names"
    return "topics"


def _refusal(
    api: ForwardedApi,
    ctx: RequestContext,
    request: MessageData,
    request_field: str,
    entry: Any,
    message: str | None = None,
) -> dict[str, Any]:
    """The api's own error entry for ``entry`` with TOPIC_AUTHORIZATION_FAILED."""
    cut = MessageData(request)
    cut[request_field] = [entry]
    body = api.error_body(ctx, cut, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    (result,) = next(v for k, v in body.items() if k != "throttle_time_ms")
    result = dict(result)
    if message is not None:
        result["error_message"] = message
    return result
