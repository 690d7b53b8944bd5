"""DescribeCluster (60) handler on a client listener and on the controller listener, at every
version, through the codecs."""

from __future__ import annotations

import pytest

from broker.handlers.describe_cluster import ClusterNode, DescribeClusterHandler, EndpointType
from broker.handlers.metadata import AUTHORIZED_OPERATIONS_OMITTED, CLUSTER_AUTHORIZED_OPERATIONS
from protocol.error_codes import ErrorCode
from protocol.messages import REQUESTS
from tests.broker.cluster_admin_support import call
from tests.metadata.controller.helpers import CLUSTER_ID

NONE = int(ErrorCode.NONE)


def test_handler_versions_match_the_schema() -> None:
    versions = REQUESTS[int(DescribeClusterHandler.api_key)].versions
    assert (DescribeClusterHandler.min_version, DescribeClusterHandler.max_version) == (
        versions.low,
        versions.high,
    )


# -- DescribeCluster -------------------------------------------------------------------------------


def nodes(listener: str) -> list[ClusterNode]:
    return (
        [ClusterNode(1, "b1", 9092, "rack-a"), ClusterNode(2, "b2", 9092)] if listener == "PLAINTEXT" else []
    )


@pytest.mark.parametrize("version", [0, 1])
@pytest.mark.parametrize("with_ops", [False, True])
async def test_describe_cluster_lists_the_brokers(version: int, with_ops: bool) -> None:
    handler = DescribeClusterHandler(EndpointType.BROKER, CLUSTER_ID, nodes, lambda: 2)
    body = {"include_cluster_authorized_operations": with_ops, "endpoint_type": 1}
    response = await call(handler, version, body)
    assert (response.error_code, response.error_message) == (NONE, None)
    assert response.cluster_id == CLUSTER_ID
    assert response.controller_id == 2
    assert [(b.broker_id, b.host, b.port, b.rack) for b in response.brokers] == [
        (1, "b1", 9092, "rack-a"),
        (2, "b2", 9092, None),
    ]
    expected_ops = CLUSTER_AUTHORIZED_OPERATIONS if with_ops else AUTHORIZED_OPERATIONS_OMITTED
    assert response.cluster_authorized_operations == expected_ops
    if version >= 1:
        assert response.endpoint_type == 1


async def test_describe_cluster_controller_id_not_among_the_nodes_is_minus_one() -> None:
    handler = DescribeClusterHandler(EndpointType.BROKER, CLUSTER_ID, nodes, lambda: 9)
    response = await call(handler, 1, {"include_cluster_authorized_operations": False, "endpoint_type": 1})
    assert response.controller_id == -1


@pytest.mark.parametrize(
    ("kind", "version", "wanted", "code", "message"),
    [
        (
            EndpointType.BROKER,
            1,
            2,
            ErrorCode.MISMATCHED_ENDPOINT_TYPE,
            "The request was sent to an endpoint of type BROKER, "
            "but we wanted an endpoint of type CONTROLLER",
        ),
        (
            EndpointType.CONTROLLER,
            1,
            1,
            ErrorCode.MISMATCHED_ENDPOINT_TYPE,
            "The request was sent to an endpoint of type CONTROLLER, "
            "but we wanted an endpoint of type BROKER",
        ),
        (EndpointType.BROKER, 1, 3, ErrorCode.UNSUPPORTED_ENDPOINT_TYPE, "Unsupported endpoint type 3"),
        (EndpointType.CONTROLLER, 0, 1, ErrorCode.INVALID_REQUEST, None),
    ],
)
async def test_describe_cluster_endpoint_types(
    kind: EndpointType, version: int, wanted: int, code: ErrorCode, message: str | None
) -> None:
    handler = DescribeClusterHandler(kind, CLUSTER_ID, nodes, lambda: 1)
    response = await call(
        handler, version, {"include_cluster_authorized_operations": False, "endpoint_type": wanted}
    )
    assert response.error_code == int(code)
    if message is not None:
        assert response.error_message == message
    assert response.brokers == []


async def test_describe_cluster_on_the_controller_lists_the_voters() -> None:
    voters = [ClusterNode(1, "c1", 9093), ClusterNode(2, "c2", 9093)]
    handler = DescribeClusterHandler(EndpointType.CONTROLLER, CLUSTER_ID, lambda listener: voters, lambda: 2)
    response = await call(
        handler, 1, {"include_cluster_authorized_operations": False, "endpoint_type": 2}, "CONTROLLER"
    )
    assert (response.error_code, response.endpoint_type, response.controller_id) == (NONE, 2, 2)
    assert [(b.broker_id, b.host, b.port) for b in response.brokers] == [(1, "c1", 9093), (2, "c2", 9093)]
