"""DescribeCluster (60, v0-1): the cluster id, a controller id and the nodes, as admin clients ask.

One handler class serves both kinds of listener, as Kafka's ``AuthHelper.computeDescribeClusterResponse``
does, each with its own endpoint type (KIP-919):

* on a client listener (endpoint type 1, BROKER): the unfenced brokers with their address on the
  listener the request came in on and their rack; the controller id is the one Metadata reports, a
  live broker (KRaft's clients cannot reach the controller, KIP-590);
* on the controller listener (endpoint type 2, CONTROLLER): the quorum's voters with their controller
  address and, as controller id, the voter that leads the metadata quorum (-1 while none does).

An endpoint type other than 1 or 2 is UNSUPPORTED_ENDPOINT_TYPE; the other kind than the listener's
is MISMATCHED_ENDPOINT_TYPE (both INVALID_REQUEST in v0, which has no endpoint type), with Kafka's
messages. A controller id that is not among the nodes answered is -1, as Kafka does.
``cluster_authorized_operations`` is every operation Kafka supports on the cluster when asked for
(there is no authorizer), else INT32_MIN.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from broker.handlers.authorization import ALLOW_EVERYTHING, cluster_allowed
from broker.handlers.base import Handler, RequestContext
from broker.handlers.metadata import AUTHORIZED_OPERATIONS_OMITTED, CLUSTER_AUTHORIZED_OPERATIONS
from metadata.authorizer.standard import Authorizer
from protocol.acl_bindings import CLUSTER_NAME
from protocol.acl_types import AclOperation, ResourceType
from protocol.api_keys import ApiKey
from protocol.data import MessageData
from protocol.error_codes import ErrorCode

ENDPOINT_TYPE_VERSION = 1


class EndpointType(enum.IntEnum):
    """KIP-919's endpoint types; Kafka prints them by these names."""

    BROKER = 1
    CONTROLLER = 2


@dataclass(frozen=True, slots=True)
class ClusterNode:
    """A node as DescribeCluster lists it."""

    node_id: int
    host: str
    port: int
    rack: str | None = None


class DescribeClusterHandler(Handler):
    api_key = ApiKey.DESCRIBE_CLUSTER
    min_version = 0
    max_version = 1

    def __init__(
        self,
        endpoint_type: EndpointType,
        cluster_id: str,
        nodes: Callable[[str], Sequence[ClusterNode]],
        controller_id: Callable[[], int],
        authorizer: Authorizer = ALLOW_EVERYTHING,
    ) -> None:
        """``nodes(listener)`` lists the nodes with their address on the listener a request came in on."""
        self._endpoint_type = endpoint_type
        self._cluster_id = cluster_id
        self._nodes = nodes
        self._controller_id = controller_id
        self._authorizer = authorizer

    async def handle(self, ctx: RequestContext, request: MessageData) -> Any:
        version = ctx.api_version
        wanted = request.endpoint_type if version >= ENDPOINT_TYPE_VERSION else EndpointType.BROKER
        if wanted not in EndpointType.__members__.values():
            code = ErrorCode.INVALID_REQUEST if version == 0 else ErrorCode.UNSUPPORTED_ENDPOINT_TYPE
            return _error(code, f"Unsupported endpoint type {wanted}")
        if wanted != self._endpoint_type:
            code = ErrorCode.INVALID_REQUEST if version == 0 else ErrorCode.MISMATCHED_ENDPOINT_TYPE
            return _error(
                code,
                f"The request was sent to an endpoint of type {self._endpoint_type.name}, "
                f"but we wanted an endpoint of type {EndpointType(wanted).name}",
            )
        nodes = list(self._nodes(ctx.listener))
        controller_id = self._controller_id()
        return {
            "throttle_time_ms": 0,
            "error_code": 0,
            "error_message": None,
            "endpoint_type": int(self._endpoint_type),
            "cluster_id": self._cluster_id,
            "controller_id": controller_id if any(n.node_id == controller_id for n in nodes) else -1,
            "brokers": [
                {"broker_id": n.node_id, "host": n.host, "port": n.port, "rack": n.rack} for n in nodes
            ],
            "cluster_authorized_operations": (
                self._cluster_operations(ctx)
                if request.include_cluster_authorized_operations
                else AUTHORIZED_OPERATIONS_OMITTED
            ),
        }

    def _cluster_operations(self, ctx: RequestContext) -> int:
        """Kafka's rule: the authorizer's operations with DESCRIBE on the cluster, else 0 (the
        request itself needs no permission)."""
        authorizer = self._authorizer
        if not authorizer.enabled:
            return CLUSTER_AUTHORIZED_OPERATIONS
        if not cluster_allowed(authorizer, ctx, AclOperation.DESCRIBE):
            return 0
        return authorizer.authorized_operations(
            ctx.principal, ctx.client_host, ResourceType.CLUSTER, CLUSTER_NAME
        )

    def error_response(self, ctx: RequestContext, request: MessageData | None, code: ErrorCode) -> Any:
        return _error(code, None)


def _error(code: ErrorCode, message: str | None) -> dict[str, Any]:
    return {"throttle_time_ms": 0, "error_code": int(code), "error_message": message, "cluster_id": ""}
