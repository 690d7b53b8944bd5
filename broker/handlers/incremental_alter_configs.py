"""IncrementalAlterConfigs (44): change single config overrides of topics, brokers and groups (KIP-339).

On the controller listener :class:`IncrementalAlterConfigsHandler` hands the request to the active
controller (metadata/controller/config_control.py has the rules, codes and messages) and answers
once the ConfigRecords are committed. A broker forwards the request to the controller
(:class:`ForwardedAlterConfigsHandler`, as Kafka's KRaft broker forwards every resource type it
persists, BROKER included) after Kafka's broker-side checks: a BROKER resource that names a broker
must name this one (Kafka's admin clients send it to that broker), and the client's answer waits
until this broker's metadata shows the change, so a DescribeConfigs sent next sees it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import structlog

from broker.cluster.controller_channel import ControllerChannel, ControllerUnavailableError
from broker.cluster.metadata_loader import MetadataLoader
from broker.handlers.authorization import ALLOW_EVERYTHING, config_resource_refusal
from broker.handlers.base import Handler, RequestContext
from metadata.authorizer.standard import Authorizer
from metadata.controller.active import ControllerRef, resolve_controller
from metadata.controller.config_control import (
    AlterableConfig,
    AlterConfigsResult,
    ConfigResourceChange,
    OpType,
)
from metadata.image import MetadataImage
from metadata.records import ConfigResourceType
from protocol.acl_types import AclOperation
from protocol.api_keys import ApiKey
from protocol.data import MessageData
from protocol.error_codes import ErrorCode, KafkaError
from server_common.config.definitions import TOPIC_BY_NAME, ConfigError, format_value
from server_common.config.dynamic import broker_definition
from server_common.config.group_config import parse_group_value

__all__ = ["ForwardedAlterConfigsHandler", "IncrementalAlterConfigsHandler", "error_body"]

FORWARD_TIMEOUT_S = 30.0
"""How long the controller gets to answer (AlterConfigs has no timeout_ms of its own)."""
EFFECT_TIMEOUT_S = 5.0
"""How long the answer waits for this broker's metadata to show the change; the change is
committed either way, so the controller's answer is returned after it regardless."""

_log = structlog.get_logger("kipling.configs")


class IncrementalAlterConfigsHandler(Handler):
    """The controller's IncrementalAlterConfigs."""

    api_key = ApiKey.INCREMENTAL_ALTER_CONFIGS
    min_version = 0
    max_version = 1
    incremental = True

    def __init__(self, controller: ControllerRef) -> None:
        self._controller = controller

    async def handle(self, ctx: RequestContext, request: MessageData) -> Any:
        changes = [change_of(resource, incremental=self.incremental) for resource in request.resources]
        try:
            controller = resolve_controller(self._controller)
            if self.incremental:
                results = controller.incremental_alter_configs(changes, validate_only=request.validate_only)
            else:
                results = controller.alter_configs(changes, validate_only=request.validate_only)
        except KafkaError as exc:
            return error_body(request, exc.code, exc.message)
        return {"throttle_time_ms": 0, "responses": [_response(r) for r in results]}

    def error_response(self, ctx: RequestContext, request: MessageData | None, code: ErrorCode) -> Any:
        return self.error_body(ctx, request, code)

    @staticmethod
    def error_body(ctx: RequestContext, request: MessageData | None, code: ErrorCode) -> Any:
        return error_body(request, code, None)


def change_of(resource: MessageData, *, incremental: bool) -> ConfigResourceChange:
    """A request resource as the controller's ConfigControl takes it."""
    return ConfigResourceChange(
        resource.resource_type,
        resource.resource_name,
        tuple(
            AlterableConfig(c.name, c.value, c.config_operation if incremental else OpType.SET)
            for c in resource.configs
        ),
    )


def error_body(request: MessageData | None, code: ErrorCode, message: str | None) -> dict[str, Any]:
    """Every resource of the request answered ``code`` (the response has no top-level error)."""
    resources = request.resources if request is not None else []
    return {
        "throttle_time_ms": 0,
        "responses": [_entry(r.resource_type, r.resource_name, code, message) for r in resources],
    }


def _response(result: AlterConfigsResult) -> dict[str, Any]:
    return _entry(result.resource_type, result.resource_name, result.error, result.message)


def _entry(resource_type: int, name: str, code: ErrorCode, message: str | None) -> dict[str, Any]:
    return {
        "error_code": int(code),
        "error_message": message,
        "resource_type": resource_type,
        "resource_name": name,
    }


# -- the broker side -------------------------------------------------------------------------------


class ForwardedAlterConfigsHandler(Handler):
    """IncrementalAlterConfigs or AlterConfigs on a broker: checked here, carried out by the controller."""

    def __init__(
        self,
        api: type[IncrementalAlterConfigsHandler],
        channel: ControllerChannel,
        loader: MetadataLoader,
        node_id: int,
        authorizer: Authorizer = ALLOW_EVERYTHING,
    ) -> None:
        self.api_key = api.api_key  # type: ignore[misc]
        self.min_version = api.min_version  # type: ignore[misc]
        self.max_version = api.max_version  # type: ignore[misc]
        self._incremental = api.incremental
        self._channel = channel
        self._loader = loader
        self._node_id = node_id
        self._authorizer = authorizer

    async def handle(self, ctx: RequestContext, request: MessageData) -> Any:
        refused: dict[int, tuple[ErrorCode, str]] = {}
        for index, resource in enumerate(request.resources):
            problem = self._preprocess(resource)
            if problem is None:
                # the controller would check ALTER_CONFIGS (ControllerApis); it never sees the client
                refusal = config_resource_refusal(
                    self._authorizer,
                    ctx,
                    AclOperation.ALTER_CONFIGS,
                    resource.resource_type,
                    resource.resource_name,
                )
                if refusal is not None:
                    problem = (refusal, refusal.description)
            if problem is not None:
                refused[index] = problem
        kept = [r for i, r in enumerate(request.resources) if i not in refused]
        _log.info(
            "config change received",
            api=self.api_key.name,
            version=ctx.api_version,
            client_id=ctx.client_id,
            resources=len(request.resources),
            forwarded=len(kept),
            validate_only=request.validate_only,
        )
        answers: list[dict[str, Any]] = []
        if kept:
            answers = await self._forward(ctx, request, kept)
        answered = iter(answers)
        responses = []
        for index, resource in enumerate(request.resources):
            if index in refused:
                code, message = refused[index]
                responses.append(_entry(resource.resource_type, resource.resource_name, code, message))
            else:
                responses.append(next(answered))
        return {"throttle_time_ms": 0, "responses": responses}

    def error_response(self, ctx: RequestContext, request: MessageData | None, code: ErrorCode) -> Any:
        return error_body(request, code, None)

    def _preprocess(self, resource: MessageData) -> tuple[ErrorCode, str] | None:
        """Kafka's ConfigAdminManager.preprocess for a BROKER resource: a named broker must be this
        one; ``""`` (the cluster defaults) is accepted by both APIs, legacy AlterConfigs included."""
        if resource.resource_type != ConfigResourceType.BROKER:
            return None
        name = resource.resource_name
        if name == "":
            return None
        try:
            broker_id = int(name)
        except ValueError:
            return ErrorCode.INVALID_REQUEST, f"Node id must be an integer, but it is: {name}"
        if broker_id != self._node_id:
            return (
                ErrorCode.INVALID_REQUEST,
                f"Unexpected broker id, expected {self._node_id}, but received {name}",
            )
        return None

    async def _forward(
        self, ctx: RequestContext, request: MessageData, kept: list[MessageData]
    ) -> list[dict[str, Any]]:
        body = MessageData(request)
        body["resources"] = kept
        try:
            response = await self._channel.forward(self.api_key, ctx.api_version, body, FORWARD_TIMEOUT_S)
        except ControllerUnavailableError as exc:
            _log.warning("controller unavailable for a forwarded config change", error=str(exc))
            return list(error_body(body, ErrorCode.REQUEST_TIMED_OUT, None)["responses"])
        answers = [
            _entry(r.resource_type, r.resource_name, ErrorCode(r.error_code), r.error_message)
            for r in response.responses
        ]
        if not request.validate_only:
            done = [
                change_of(resource, incremental=self._incremental)
                for resource, answer in zip(kept, answers, strict=False)
                if answer["error_code"] == ErrorCode.NONE
            ]
            if done:
                await self._loader.wait_for(_shows(done, incremental=self._incremental), EFFECT_TIMEOUT_S)
        return answers


def _shows(changes: Sequence[ConfigResourceChange], *, incremental: bool) -> Callable[[MetadataImage], bool]:
    """Whether an image holds the overrides the changes asked for."""

    def effect(image: MetadataImage) -> bool:
        for change in changes:
            kind = change.resource_type
            if kind == ConfigResourceType.TOPIC:
                state = image.get(change.resource_name)
                if state is None:
                    return False
                current = state.configs
            elif kind == ConfigResourceType.GROUP:
                current = image.group_configs(change.resource_name)
            else:
                current = image.broker_configs(change.resource_name)
            named = {config.name for config in change.configs}
            if not incremental and any(key not in named for key in current):
                return False
            if not all(_holds(current, config, kind) for config in change.configs):
                return False
        return True

    return effect


def _holds(current: dict[str, str], config: AlterableConfig, kind: int) -> bool:
    value = current.get(config.name)
    if config.operation == OpType.DELETE:
        return value is None
    if config.operation == OpType.SET:
        return value == _canonical(config.name, config.value, kind)
    items = value.split(",") if value else []
    given = [item.strip() for item in (config.value or "").split(",") if item.strip()]
    if config.operation == OpType.APPEND:
        return all(item in items for item in given)
    return not any(item in items for item in given)


def _canonical(key: str, value: str | None, kind: int) -> str | None:
    """The text the controller stores for ``value`` (the key's type's canonical form)."""
    if value is None:
        return value
    try:
        if kind == ConfigResourceType.GROUP:
            return str(parse_group_value(key, value))
        topic = kind == ConfigResourceType.TOPIC
        definition: Any = TOPIC_BY_NAME.get(key) if topic else broker_definition(key)
        if definition is None:
            return value
        return format_value(definition.parse(value))
    except ConfigError:
        return value
