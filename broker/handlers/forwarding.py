"""Admin requests a broker forwards to the controller (KRaft's ForwardingManager, without Envelope).

In a cluster the controller alone changes topics. A broker sends CreateTopics, DeleteTopics,
CreatePartitions and ElectLeaders to it exactly as the client sent them (same version, same body),
and answers the client with the controller's response once its own copy of the metadata shows the
effect: the client's next Metadata request to this broker then sees the created topic, no longer
sees the deleted one, or sees the elected leaders. If the metadata does not catch up within the
request's ``timeout_ms`` the controller's answer is returned anyway (the change is committed; it
just has not reached this broker yet), as Kafka does. A controller that cannot be reached is
REQUEST_TIMED_OUT for every topic of the request, which clients retry.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import structlog

from broker.cluster.controller_channel import ControllerChannel, ControllerUnavailableError
from broker.cluster.metadata_loader import MetadataLoader
from broker.handlers.base import Handler, RequestContext
from broker.handlers.client_quotas import altered_quotas_shown
from broker.handlers.user_scram_credentials import altered_credentials_shown
from broker.quotas.controller_mutation import PartitionMutationQuotas
from metadata.image import MetadataImage
from metadata.topics import NO_LEADER
from protocol.api_keys import ApiKey
from protocol.data import MessageData
from protocol.error_codes import ErrorCode
from protocol.sentinels import ZERO_UUID

__all__ = ["ForwardingHandler", "effect_of"]

MIN_WAIT_S = 0.05
DEFAULT_WAIT_MS = 30_000
"""How long a broker waits for its metadata to show the effect of a request without ``timeout_ms``
(AlterClientQuotas, AlterUserScramCredentials): Kafka's default request timeout."""
FORWARD_TIMEOUT_FLOOR_S = 5.0
"""The controller gets at least this long to answer, whatever the client's ``timeout_ms`` (which
bounds only the wait for this broker's metadata to show the effect): a CreateTopics with
timeout_ms=0 is carried out and answered, as Kafka's controller does, not timed out in transit."""

Effect = Callable[[MetadataImage], bool]
EffectOf = Callable[[MessageData, MessageData], Effect]

_log = structlog.get_logger("kipling.forwarding")


class ForwardedApi(Protocol):
    """The controller's handler class of a forwarded API: its versions and its error shape."""

    @property
    def api_key(self) -> ApiKey: ...

    @property
    def min_version(self) -> int: ...

    @property
    def max_version(self) -> int: ...

    def error_body(self, ctx: RequestContext, request: MessageData | None, code: ErrorCode) -> Any: ...


class ForwardingHandler(Handler):
    """Forwards one admin API to the controller, serving the versions the controller's handler does."""

    def __init__(
        self,
        api: ForwardedApi,
        channel: ControllerChannel,
        loader: MetadataLoader,
        effect: EffectOf,
        mutations: PartitionMutationQuotas | None = None,
    ) -> None:
        """``mutations`` enforces controller_mutation_rate quotas here, where the client's
        request arrives (the controller does not see the client: there is no Envelope)."""
        self.api_key = api.api_key  # type: ignore[misc]
        self.min_version = api.min_version  # type: ignore[misc]
        self.max_version = api.max_version  # type: ignore[misc]
        self._api = api
        self._channel = channel
        self._loader = loader
        self._effect = effect
        self._mutations = mutations

    async def handle(self, ctx: RequestContext, request: MessageData) -> Any:
        admission = None
        if self._mutations is not None:
            admission = self._mutations.admit(ctx, request, self._loader.image, self._api.error_body)
        if admission is None:
            return await self._forward(ctx, request)
        forwarded = await self._forward(ctx, admission.forwarded) if admission.anything_to_forward else None
        return self._mutations.respond(admission, forwarded)  # type: ignore[union-attr]

    async def _forward(self, ctx: RequestContext, request: MessageData) -> Any:
        timeout_s = max(getattr(request, "timeout_ms", DEFAULT_WAIT_MS) / 1000, MIN_WAIT_S)
        try:
            response = await self._channel.forward(
                self.api_key, ctx.api_version, request, max(timeout_s, FORWARD_TIMEOUT_FLOOR_S)
            )
        except ControllerUnavailableError as exc:
            _log.warning(
                "controller unavailable for a forwarded request", api=self.api_key.name, error=str(exc)
            )
            return self._api.error_body(ctx, request, ErrorCode.REQUEST_TIMED_OUT)
        if not getattr(request, "validate_only", False):
            await self._loader.wait_for(self._effect(request, response), timeout_s)
        return response

    def error_response(self, ctx: RequestContext, request: MessageData | None, code: ErrorCode) -> Any:
        return self._api.error_body(ctx, request, code)


def _created_topics(request: MessageData, response: MessageData) -> Effect:
    names = [t.name for t in response.topics if t.error_code == ErrorCode.NONE]
    return lambda image: all(image.get(name) is not None for name in names)


def _deleted_topics(request: MessageData, response: MessageData) -> Effect:
    gone = [(r.name, r.topic_id) for r in response.responses if r.error_code == ErrorCode.NONE]

    def effect(image: MetadataImage) -> bool:
        return all(
            (name is None or image.get(name) is None)
            and (topic_id in (None, ZERO_UUID) or image.get_by_id(topic_id) is None)
            for name, topic_id in gone
        )

    return effect


def _created_partitions(request: MessageData, response: MessageData) -> Effect:
    ok = {r.name for r in response.results if r.error_code == ErrorCode.NONE}
    wanted = {t.name: t.count for t in request.topics if t.name in ok}

    def effect(image: MetadataImage) -> bool:
        for name, count in wanted.items():
            topic = image.get(name)
            if topic is None or len(topic.partitions) < count:
                return False
        return True

    return effect


def _elected_leaders(request: MessageData, response: MessageData) -> Effect:
    """Each partition elected (error NONE) shows its new leader: the preferred replica after a
    preferred election, a leader at all after an unclean one (v0 requests are preferred)."""
    preferred = getattr(request, "election_type", 0) == 0
    elected = [
        (result.topic, p.partition_id)
        for result in response.replica_election_results
        for p in result.partition_result
        if p.error_code == ErrorCode.NONE
    ]

    def effect(image: MetadataImage) -> bool:
        for name, index in elected:
            topic = image.get(name)
            partition = None if topic is None else topic.partitions.get(index)
            if partition is None:
                continue  # deleted meanwhile: nothing left to wait for
            if preferred and partition.leader_id != (partition.replicas or [NO_LEADER])[0]:
                return False
            if not preferred and partition.leader_id == NO_LEADER:
                return False
        return True

    return effect


def _reassigned_partitions(request: MessageData, response: MessageData) -> Effect:
    """Each accepted partition shows its target replicas (as the target of a reassignment in
    progress, or completed), or, for a cancel, no reassignment in progress."""
    ok = {
        (topic.name, p.partition_index)
        for topic in response.responses
        for p in topic.partitions
        if p.error_code == ErrorCode.NONE
    }
    wanted = [
        (topic.name, p.partition_index, None if p.replicas is None else list(p.replicas))
        for topic in request.topics
        for p in topic.partitions
        if (topic.name, p.partition_index) in ok
    ]

    def effect(image: MetadataImage) -> bool:
        for name, index, replicas in wanted:
            topic = image.get(name)
            state = topic.partitions.get(index) if topic is not None else None
            if state is None:
                continue
            if state.target_replicas != replicas if replicas is not None else state.is_reassigning:
                return False
        return True

    return effect


def _no_change(request: MessageData, response: MessageData) -> Effect:
    return lambda image: True


def effect_of(api_key: ApiKey) -> EffectOf:
    """The metadata change that shows a forwarded request took effect."""
    return {
        ApiKey.CREATE_TOPICS: _created_topics,
        ApiKey.DELETE_TOPICS: _deleted_topics,
        ApiKey.CREATE_PARTITIONS: _created_partitions,
        ApiKey.ALTER_PARTITION_REASSIGNMENTS: _reassigned_partitions,
        ApiKey.LIST_PARTITION_REASSIGNMENTS: _no_change,
        ApiKey.ELECT_LEADERS: _elected_leaders,
        ApiKey.ALTER_CLIENT_QUOTAS: altered_quotas_shown,
        ApiKey.ALTER_USER_SCRAM_CREDENTIALS: altered_credentials_shown,
    }[api_key]
