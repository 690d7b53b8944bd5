"""controller_mutation_rate (KIP-599): partition mutations per second of CreateTopics,
CreatePartitions and DeleteTopics, Kafka's ControllerMutationQuotaManager.

Each client (found in the byte quotas' entity order, with the same quota lookup) has a token bucket
that refills at its quota per second up to a burst of ``quota x quota.window.num x
quota.window.size.seconds`` and starts full (Kafka's ``TokenBucket``). A topic's mutations are
its partitions: those a created topic gets (its assignments, its count, or ``num.partitions`` for
-1), those a CreatePartitions adds, those a deleted topic had.

* Strict (CreateTopics v6+, CreatePartitions v3+, DeleteTopics v5+): while the bucket holds a
  token, a topic is accepted and its mutations taken, even into debt; once the bucket is in debt
  every further topic gets THROTTLING_QUOTA_EXCEEDED with Kafka's message, and the response
  carries the time the bucket needs to be back at zero (``-tokens / quota`` seconds). A request
  that only runs the bucket into debt is not throttled: the next one is.
* Permissive (older versions, whose clients do not know the error): every topic is accepted, its
  mutations taken, and a bucket in debt throttles the response.

A topic that will fail anyway (one that already exists, an unknown one) costs nothing, as Kafka's
controller validates a topic before it takes its mutations; a forwarded topic the controller
refuses gets its mutations back. validate_only requests are not counted (Kafka records only real
changes). The connection is muted for the throttle time.

Where: kipling's broker forwards these requests to the controller as the client sent them, without
Kafka's Envelope, so the controller sees the broker and not the client. The quota is therefore kept
by the broker that receives the client's request (:mod:`broker.handlers.forwarding`): each broker
has its own buckets, so a client spreading its requests over N brokers gets up to N times its
quota (Kafka's controller keeps one bucket per client for the whole cluster).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from broker.handlers.base import RequestContext
from broker.quotas.client_quota_manager import (
    ANONYMOUS_USER,
    DEFAULT_QUOTA_WINDOW_NUM,
    DEFAULT_QUOTA_WINDOW_SIZE_SECONDS,
    INACTIVE_SENSOR_EXPIRATION_MS,
    SENSOR_EXPIRY_INTERVAL_MS,
    ClientQuotaManager,
    QuotaLookup,
)
from broker.quotas.throttle import ChannelThrottles
from metadata.client_quotas import CONTROLLER_MUTATION_RATE
from metadata.image import MetadataImage
from protocol.api_keys import ApiKey
from protocol.data import MessageData
from protocol.error_codes import ErrorCode

THROTTLING_QUOTA_EXCEEDED_MESSAGE = "The throttling quota has been exceeded."
"""Kafka's message for THROTTLING_QUOTA_EXCEEDED (``Errors.THROTTLING_QUOTA_EXCEEDED.message``)."""

STRICT_SINCE_VERSION = {ApiKey.CREATE_TOPICS: 6, ApiKey.CREATE_PARTITIONS: 3, ApiKey.DELETE_TOPICS: 5}
"""From these versions a client understands THROTTLING_QUOTA_EXCEEDED (KIP-599)."""

ThrottleListener = Callable[[str, str, str, int], None]
ErrorBody = Callable[[RequestContext, MessageData, ErrorCode], Any]


class TokenBucket:
    """Kafka's TokenBucket: refills at ``quota`` per second up to ``burst``; in debt below zero."""

    __slots__ = ("last_ms", "tokens")

    def __init__(self, burst: float, now_ms: int) -> None:
        self.tokens = burst
        self.last_ms = now_ms

    def measure(self, quota: float, burst: float, now_ms: int) -> float:
        self.tokens = min(burst, self.tokens + quota * max(0, now_ms - self.last_ms) / 1000)
        self.last_ms = max(self.last_ms, now_ms)
        return self.tokens

    def record(self, permits: float, quota: float, burst: float, now_ms: int) -> None:
        self.tokens = min(burst, self.measure(quota, burst, now_ms) - permits)


@dataclass(slots=True)
class MutationQuota:
    """One request's view of its client's bucket (Kafka's Strict/PermissiveControllerMutationQuota)."""

    strict: bool
    quota: float
    burst: float
    bucket: TokenBucket
    clock_ms: Callable[[], int]
    throttle_ms_at_record: int = 0
    recorded_ms: int = 0

    def try_record(self, permits: float) -> bool:
        """Take ``permits``; False (nothing taken) when strict and the bucket is already in debt."""
        now_ms = self.clock_ms()
        if self.strict:
            tokens = self.bucket.measure(self.quota, self.burst, now_ms)
            if tokens < 0:
                self._throttled(tokens, now_ms)
                return False
            self.bucket.record(permits, self.quota, self.burst, now_ms)
            return True
        self.bucket.record(permits, self.quota, self.burst, now_ms)
        tokens = self.bucket.measure(self.quota, self.burst, now_ms)
        if tokens < 0:
            self._throttled(tokens, now_ms)
        return True

    def give_back(self, permits: float) -> None:
        """Return the mutations of a topic the controller refused."""
        self.bucket.record(-permits, self.quota, self.burst, self.clock_ms())

    def throttle_ms(self) -> int:
        """The throttle time, less the time since it was decided (Kafka's ``throttleTime``)."""
        elapsed = self.clock_ms() - self.recorded_ms
        return max(0, self.throttle_ms_at_record - elapsed)

    def _throttled(self, tokens: float, now_ms: int) -> None:
        self.throttle_ms_at_record = round(-tokens / self.quota * 1000) if self.quota > 0 else 0
        self.recorded_ms = now_ms


class ControllerMutationQuotaManager:
    """The buckets of every client with a ``controller_mutation_rate`` quota."""

    def __init__(
        self,
        quotas: QuotaLookup,
        *,
        any_quota: Callable[[], bool] = lambda: True,
        samples: int = DEFAULT_QUOTA_WINDOW_NUM,
        window_s: int = DEFAULT_QUOTA_WINDOW_SIZE_SECONDS,
        clock_ms: Callable[[], int] = lambda: int(time.time() * 1000),
    ) -> None:
        self._lookup = ClientQuotaManager(CONTROLLER_MUTATION_RATE, quotas, any_quota=any_quota)
        self._burst_s = samples * window_s
        self._clock_ms = clock_ms
        self._buckets: dict[tuple[str, str], tuple[TokenBucket, int]] = {}
        self._next_expiry_ms: int | None = None

    def quota_for(self, client_id: str | None, api_key: int, api_version: int) -> MutationQuota | None:
        """The request's quota, strict or permissive by version; None when the client has none."""
        found = self._lookup.quota_for(ANONYMOUS_USER, client_id or "")
        if found is None:
            return None
        quota, key = found
        burst = quota * self._burst_s
        now_ms = self._clock_ms()
        self._expire(now_ms)
        kept = self._buckets.get(key)
        bucket = kept[0] if kept is not None else TokenBucket(burst, now_ms)
        self._buckets[key] = (bucket, now_ms)
        strict = api_version >= STRICT_SINCE_VERSION.get(ApiKey(api_key), 0)
        return MutationQuota(strict, quota, burst, bucket, self._clock_ms)

    def _expire(self, now_ms: int) -> None:
        if self._next_expiry_ms is not None and now_ms < self._next_expiry_ms:
            return
        self._next_expiry_ms = now_ms + SENSOR_EXPIRY_INTERVAL_MS
        idle = [k for k, (_, used) in self._buckets.items() if now_ms - used > INACTIVE_SENSOR_EXPIRATION_MS]
        for k in idle:
            del self._buckets[k]


@dataclass(frozen=True, slots=True)
class _Shape:
    """Where an API keeps its topics in the request and their results in the response."""

    request_field: str
    response_field: str


def _shape(api_key: int, version: int) -> _Shape:
    if api_key == ApiKey.CREATE_TOPICS:
        return _Shape("topics", "topics")
    if api_key == ApiKey.CREATE_PARTITIONS:
        return _Shape("topics", "results")
    return _Shape("topics" if version >= 6 else "topic_names", "responses")


@dataclass(slots=True)
class Admission:
    """A request cut to the topics its quota admits, and how to answer it."""

    ctx: RequestContext
    quota: MutationQuota
    forwarded: MessageData
    rejected: Any
    permits: dict[str, int] = field(default_factory=dict)

    @property
    def anything_to_forward(self) -> bool:
        return bool(self.forwarded[_shape(self.ctx.api_key, self.ctx.api_version).request_field])


class PartitionMutationQuotas:
    """What a forwarding broker asks before it forwards CreateTopics, CreatePartitions or DeleteTopics."""

    def __init__(
        self,
        manager: ControllerMutationQuotaManager,
        throttles: ChannelThrottles,
        *,
        default_partitions: int,
        on_throttle: ThrottleListener | None = None,
    ) -> None:
        self._manager = manager
        self._throttles = throttles
        self._default_partitions = default_partitions
        self._on_throttle = on_throttle

    def admit(
        self, ctx: RequestContext, request: MessageData, image: MetadataImage, error_body: ErrorBody
    ) -> Admission | None:
        """The topics to forward and those refused; None when the quota does not apply (no quota
        for the client, another API, or validate_only)."""
        if ctx.api_key not in STRICT_SINCE_VERSION or getattr(request, "validate_only", False):
            return None
        quota = self._manager.quota_for(ctx.client_id, ctx.api_key, ctx.api_version)
        if quota is None:
            return None
        shape = _shape(ctx.api_key, ctx.api_version)
        admitted: list[Any] = []
        refused: list[Any] = []
        permits: dict[str, int] = {}
        for topic in request[shape.request_field]:
            cost = self._mutations(ctx.api_key, topic, image)
            if cost == 0 or quota.try_record(cost):
                admitted.append(topic)
                if cost:
                    permits[_name(topic, image)] = permits.get(_name(topic, image), 0) + cost
            else:
                refused.append(topic)
        forwarded = MessageData(request)
        forwarded[shape.request_field] = admitted
        rejected = None
        if refused:
            cut = MessageData(request)
            cut[shape.request_field] = refused
            rejected = error_body(ctx, cut, ErrorCode.THROTTLING_QUOTA_EXCEEDED)
            for result in rejected[shape.response_field]:
                result["error_message"] = THROTTLING_QUOTA_EXCEEDED_MESSAGE
        return Admission(ctx, quota, forwarded, rejected, permits)

    def respond(self, admission: Admission, response: Any) -> Any:
        """The controller's response (None when nothing was forwarded) with the refused topics
        added, the mutations of topics it refused given back, and the throttle time."""
        ctx = admission.ctx
        shape = _shape(ctx.api_key, ctx.api_version)
        results: list[Any] = []
        throttle_ms = 0
        if response is not None:
            results.extend(response[shape.response_field])
            throttle_ms = int(response.get("throttle_time_ms") or 0)
            for result in response[shape.response_field]:
                cost = admission.permits.get(result.get("name") or "", 0)
                if cost and result["error_code"] != ErrorCode.NONE:
                    admission.quota.give_back(cost)
        if admission.rejected is not None:
            results.extend(admission.rejected[shape.response_field])
        quota_throttle_ms = admission.quota.throttle_ms()
        if quota_throttle_ms > 0:
            self._throttles.mute(ctx.connection_id, quota_throttle_ms)
            if self._on_throttle is not None:
                self._on_throttle(
                    "ControllerMutation", ANONYMOUS_USER, ctx.client_id or "", quota_throttle_ms
                )
        body = dict(response) if response is not None else dict(admission.rejected or {})
        body[shape.response_field] = results
        body["throttle_time_ms"] = max(throttle_ms, quota_throttle_ms)
        return body

    def _mutations(self, api_key: int, topic: Any, image: MetadataImage) -> int:
        """The partitions a topic's change creates or deletes (0 for one that will fail anyway)."""
        if api_key == ApiKey.CREATE_TOPICS:
            if image.get(topic.name) is not None:
                return 0
            if topic.assignments:
                return len(topic.assignments)
            count = self._default_partitions if topic.num_partitions == -1 else topic.num_partitions
            return max(int(count), 0)
        if api_key == ApiKey.CREATE_PARTITIONS:
            state = image.get(topic.name)
            return 0 if state is None else max(int(topic.count) - len(state.partitions), 0)
        state = _deleted(topic, image)
        return 0 if state is None else len(state.partitions)


def _deleted(topic: Any, image: MetadataImage) -> Any:
    """The topic a DeleteTopics entry names: a name (before v6), or a name or an id (v6+)."""
    if isinstance(topic, str):
        return image.get(topic)
    if topic.name:
        return image.get(topic.name)
    return image.get_by_id(topic.topic_id)


def _name(topic: Any, image: MetadataImage) -> str:
    if isinstance(topic, str):
        return topic
    if getattr(topic, "name", None):
        return str(topic.name)
    state = image.get_by_id(topic.topic_id)
    return "" if state is None else str(state.name)
