"""The request quota (KIP-124, Kafka's ClientRequestQuotaManager) at the dispatcher.

Kafka measures the time a request spends on its request handler threads; kipling's one "request
thread" is the event loop, so a request's time is the time its handler's coroutine actually runs
on the loop: each step from one suspension to the next, plus decoding the request. A request that
parks (a DelayedFetch waiting for data, a DelayedProduce waiting for acks, a forward waiting for
the controller) costs only the steps before and after the wait, as Kafka counts the thread time
and not the wait. The time spent encoding the response, after the throttle is decided, is
recorded without a throttle and weighs on the next request (Kafka's network-thread time).

Over the quota, the response carries the larger of the byte-rate and the request throttle in its
``throttle_time_ms`` and the connection is muted for it (the byte quotas' mute). A throttled API
without a throttle field (or a version without one) is muted all the same. To a client older than
KIP-219 for that API the response is held for the throttle time, as Kafka's
``shouldClientThrottle`` makes the broker do.

Exempt, as in Kafka (its ``sendResponseExemptThrottle``): the cluster actions (inter-broker and
controller APIs) and a follower's Fetch. ApiVersions is not exempt in Kafka and is not here.

With no client quota in the image none of this runs: the dispatcher asks :meth:`RequestQuota.applies`
(one call to ``has_client_quotas``) and awaits the handler directly.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Coroutine, Generator
from typing import Any, Generic, TypeVar

from broker.handlers.base import EncodedResponse, RequestContext
from broker.quotas.enforcement import BrokerQuotas
from protocol.api_keys import ApiKey
from protocol.messages import RESPONSES

T = TypeVar("T")

EXEMPT_APIS = frozenset(
    {
        ApiKey.LEADER_AND_ISR,
        ApiKey.STOP_REPLICA,
        ApiKey.UPDATE_METADATA,
        ApiKey.CONTROLLED_SHUTDOWN,
        ApiKey.WRITE_TXN_MARKERS,
        ApiKey.SASL_HANDSHAKE,
        ApiKey.SASL_AUTHENTICATE,
        ApiKey.VOTE,
        ApiKey.BEGIN_QUORUM_EPOCH,
        ApiKey.END_QUORUM_EPOCH,
        ApiKey.FETCH_SNAPSHOT,
        ApiKey.ALTER_PARTITION,
        ApiKey.ENVELOPE,
        ApiKey.BROKER_REGISTRATION,
        ApiKey.BROKER_HEARTBEAT,
        ApiKey.ALLOCATE_PRODUCER_IDS,
        ApiKey.CONTROLLER_REGISTRATION,
        ApiKey.ASSIGN_REPLICAS_TO_DIRS,
    }
)
"""Kafka's cluster actions (and SASL, answered before a client is known): never throttled."""

CLIENT_THROTTLES_FROM: dict[int, int] = {
    ApiKey.PRODUCE: 6,
    ApiKey.FETCH: 8,
    ApiKey.LIST_OFFSETS: 3,
    ApiKey.METADATA: 6,
    ApiKey.OFFSET_COMMIT: 4,
    ApiKey.OFFSET_FETCH: 4,
    ApiKey.FIND_COORDINATOR: 2,
    ApiKey.JOIN_GROUP: 3,
    ApiKey.HEARTBEAT: 2,
    ApiKey.LEAVE_GROUP: 2,
    ApiKey.SYNC_GROUP: 2,
    ApiKey.DESCRIBE_GROUPS: 2,
    ApiKey.LIST_GROUPS: 2,
    ApiKey.API_VERSIONS: 2,
    ApiKey.CREATE_TOPICS: 3,
    ApiKey.DELETE_TOPICS: 2,
    ApiKey.DELETE_RECORDS: 1,
    ApiKey.INIT_PRODUCER_ID: 1,
    ApiKey.ADD_PARTITIONS_TO_TXN: 1,
    ApiKey.ADD_OFFSETS_TO_TXN: 1,
    ApiKey.END_TXN: 1,
    ApiKey.TXN_OFFSET_COMMIT: 1,
    ApiKey.DESCRIBE_ACLS: 1,
    ApiKey.CREATE_ACLS: 1,
    ApiKey.DELETE_ACLS: 1,
    ApiKey.DESCRIBE_CONFIGS: 2,
    ApiKey.ALTER_CONFIGS: 1,
    ApiKey.ALTER_REPLICA_LOG_DIRS: 1,
    ApiKey.DESCRIBE_LOG_DIRS: 1,
    ApiKey.CREATE_PARTITIONS: 1,
    ApiKey.DELETE_GROUPS: 1,
}
"""The first version of each API whose client backs off by itself (KIP-219, Kafka's per-response
``shouldClientThrottle``); APIs added after KIP-219 are throttled by their clients from v0."""

THROTTLE_TIME_MS = "throttle_time_ms"


class ThreadTime(Generic[T]):
    """Awaits a coroutine and counts, in ``ns``, only the time its steps run on the event loop.

    Each ``send``/``throw`` into the coroutine is one step; the time between steps (a future being
    waited for) is not counted. Awaiting this is awaiting the coroutine: values, exceptions and
    cancellation pass through unchanged."""

    __slots__ = ("_clock_ns", "_coro", "ns")

    def __init__(
        self, coro: Coroutine[Any, Any, T], clock_ns: Callable[[], int] = time.perf_counter_ns
    ) -> None:
        self._coro = coro
        self._clock_ns = clock_ns
        self.ns = 0

    def __await__(self) -> Generator[Any, Any, T]:
        coro, clock_ns = self._coro, self._clock_ns
        value: Any = None
        error: BaseException | None = None
        while True:
            started = clock_ns()
            try:
                awaited = coro.send(value) if error is None else coro.throw(error)
            except StopIteration as stop:
                self.ns += clock_ns() - started
                return stop.value  # type: ignore[no-any-return]
            except BaseException:
                self.ns += clock_ns() - started
                raise
            self.ns += clock_ns() - started
            try:
                value, error = (yield awaited), None
            except GeneratorExit:
                coro.close()
                raise
            except BaseException as exc:  # cancellation and the like go to the coroutine
                value, error = None, exc


class RequestQuota:
    """The dispatcher's side of the request quota: which requests count, their throttle, and
    the throttle time put into their responses."""

    def __init__(self, quotas: BrokerQuotas) -> None:
        self._quotas = quotas

    def applies(self, api_key: int) -> bool:
        """Whether to measure this request: some client quota exists and the API is not exempt."""
        return api_key not in EXEMPT_APIS and self._quotas.any_quota()

    def throttle_ms(self, ctx: RequestContext, request: Any, thread_ns: int) -> int:
        """Record the request's loop time; its throttle time (the connection muted for it)."""
        if ctx.api_key == ApiKey.FETCH and _replica_id(request) >= 0:
            return 0  # replication is exempt
        return self._quotas.request_throttle_ms(ctx.connection_id, ctx.client_id, thread_ns)

    def record_after(self, ctx: RequestContext, thread_ns: int) -> None:
        self._quotas.record_request_time(ctx.client_id, thread_ns)

    async def hold_for_old_client(self, ctx: RequestContext) -> None:
        """Before KIP-219 for its API the client does not back off: hold its response."""
        if ctx.api_version < CLIENT_THROTTLES_FROM.get(ctx.api_key, 0):
            await self._quotas.throttles.wait(ctx.connection_id)


def with_throttle_time(ctx: RequestContext, result: Any, throttle_ms: int) -> Any:
    """``result`` with ``throttle_time_ms`` the larger of its own (a byte-rate throttle) and
    ``throttle_ms``; unchanged where the response has no such field in this version."""
    field = next((f for f in RESPONSES[ctx.api_key].fields if f.name == THROTTLE_TIME_MS), None)
    if field is None or not field.exists_in(ctx.api_version):
        return result
    if isinstance(result, dict):
        patched = dict(result)
        patched[THROTTLE_TIME_MS] = max(int(result.get(THROTTLE_TIME_MS) or 0), throttle_ms)
        return patched
    if isinstance(result, EncodedResponse) and RESPONSES[ctx.api_key].fields[0] is field:
        return _patched_encoded(result, throttle_ms)
    return result


def _patched_encoded(result: EncodedResponse, throttle_ms: int) -> EncodedResponse:
    """An encoded body whose first field is ``throttle_time_ms`` (Fetch v1+), with it raised."""
    if not result.parts:
        return result
    first = bytes(result.parts[0])
    if len(first) < 4:
        return result
    current = int.from_bytes(first[:4], "big", signed=True)
    value = max(current, throttle_ms).to_bytes(4, "big", signed=True)
    return EncodedResponse([value + first[4:], *result.parts[1:]], result.size)


def _replica_id(request: Any) -> int:
    """A Fetch's replica id: in ``replica_state`` from v15, a field of its own before."""
    state = getattr(request, "replica_state", None)
    if state is not None and getattr(state, "replica_id", -1) >= 0:
        return int(state.replica_id)
    replica_id = getattr(request, "replica_id", -1)
    return int(replica_id) if replica_id is not None else -1
