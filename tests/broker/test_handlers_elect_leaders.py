"""ElectLeaders (43) handler at every version, through the codecs, and the effect a broker
forwarding it waits for."""

from __future__ import annotations

import pytest

from broker.handlers.elect_leaders import ElectLeadersHandler
from broker.handlers.forwarding import effect_of
from metadata.controller.active import ActiveController
from protocol.api_keys import ApiKey
from protocol.data import MessageData
from protocol.error_codes import ErrorCode
from protocol.messages import REQUESTS
from tests.broker.cluster_admin_support import call, ctx, decoded, encoded, fence, three_brokers
from tests.metadata.controller.helpers import Cluster

NONE = int(ErrorCode.NONE)


@pytest.fixture
def cluster() -> Cluster:
    return three_brokers()


# -- ElectLeaders ------------------------------------------------------------------------------------


def test_handler_versions_match_the_schemas() -> None:
    versions = REQUESTS[int(ApiKey.ELECT_LEADERS)].versions
    assert (ElectLeadersHandler.min_version, ElectLeadersHandler.max_version) == (versions.low, versions.high)


@pytest.mark.parametrize("version", [0, 1, 2])
async def test_elect_leaders_answers_each_partition(cluster: Cluster, version: int) -> None:
    cluster.create_assigned("t", [1, 2, 3], [2, 3, 1])
    fence(cluster, 2)  # t-1 moves to broker 3; its preferred replica is fenced
    handler = ElectLeadersHandler(cluster.controller)
    body = {
        "election_type": 0,
        "topic_partitions": [{"topic": "t", "partitions": [0, 1, 7]}],
        "timeout_ms": 1000,
    }
    response = await call(handler, version, body)
    if version >= 1:
        assert response.error_code == NONE
    [topic] = response.replica_election_results
    assert topic.topic == "t"
    assert [(p.partition_id, p.error_code, p.error_message) for p in topic.partition_result] == [
        (0, int(ErrorCode.ELECTION_NOT_NEEDED), "Leader election not needed for topic partition."),
        (1, int(ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE), "The preferred leader was not available."),
        (7, int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), "No such partition as t-7"),
    ]


async def test_elect_leaders_unclean_elects_outside_the_isr(cluster: Cluster) -> None:
    cluster.create_assigned("t", [1, 2])
    fence(cluster, 2)
    fence(cluster, 1)
    cluster.register(2, 1)
    cluster.heartbeat(2)
    handler = ElectLeadersHandler(cluster.controller)
    body = {"election_type": 1, "topic_partitions": None, "timeout_ms": 1000}
    response = await call(handler, 2, body)
    assert [
        (r.topic, [(p.partition_id, p.error_code) for p in r.partition_result])
        for r in response.replica_election_results
    ] == [("t", [(0, NONE)])]
    assert (cluster.partition("t").leader_id, cluster.partition("t").isr) == (2, [2])


async def test_elect_leaders_without_an_active_controller_is_not_controller() -> None:
    handler = ElectLeadersHandler(ActiveController(1))
    body = {"election_type": 0, "topic_partitions": [{"topic": "t", "partitions": [0]}], "timeout_ms": 1000}
    response = await call(handler, 2, body)
    assert response.error_code == int(ErrorCode.NOT_CONTROLLER)
    assert response.replica_election_results[0].partition_result[0].error_code == int(
        ErrorCode.NOT_CONTROLLER
    )


async def test_elect_leaders_unknown_election_type_is_invalid_request(cluster: Cluster) -> None:
    handler = ElectLeadersHandler(cluster.controller)
    body = {"election_type": 5, "topic_partitions": [{"topic": "t", "partitions": [0]}], "timeout_ms": 1000}
    response = await call(handler, 1, body)
    assert response.error_code == int(ErrorCode.INVALID_REQUEST)


def test_elect_leaders_error_body_names_every_partition() -> None:
    handler = ElectLeadersHandler(ActiveController(1))
    body = {"election_type": 0, "topic_partitions": [{"topic": "t", "partitions": [0, 1]}], "timeout_ms": 1}
    response = encoded(
        handler,
        0,
        handler.error_response(ctx(handler, 0), decoded(handler, 0, body), ErrorCode.REQUEST_TIMED_OUT),
    )
    assert [p.error_code for p in response.replica_election_results[0].partition_result] == [
        int(ErrorCode.REQUEST_TIMED_OUT)
    ] * 2


def test_forwarded_election_waits_for_the_new_leaders(cluster: Cluster) -> None:
    cluster.create_assigned("t", [1, 2, 3], [2, 3, 1])
    request = MessageData(election_type=0, topic_partitions=None, timeout_ms=1000)
    response = MessageData(
        replica_election_results=[
            MessageData(topic="t", partition_result=[MessageData(partition_id=0, error_code=0)]),
        ]
    )
    assert effect_of(ApiKey.ELECT_LEADERS)(request, response)(cluster.image)  # 1 leads t-0
    fence(cluster, 1)
    assert not effect_of(ApiKey.ELECT_LEADERS)(request, response)(cluster.image)
    unclean = MessageData(election_type=1, topic_partitions=None, timeout_ms=1000)
    assert effect_of(ApiKey.ELECT_LEADERS)(unclean, response)(cluster.image)  # t-0 has a leader
