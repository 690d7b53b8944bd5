"""The quorum's messages through the real encoder and decoder: Vote, BeginQuorumEpoch,
EndQuorumEpoch and DescribeQuorum bodies built from messages, encoded at the versions the driver
sends, decoded, and mapped back to equal messages."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from metadata.log_topic import METADATA_TOPIC
from metadata.raft import wire
from metadata.raft.leader import QuorumInfo, ReplicaInfo
from metadata.raft.messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    RaftError,
    VoteRequest,
    VoteResponse,
)
from protocol.api_keys import ApiKey
from protocol.data import MessageData, to_plain
from protocol.error_codes import ErrorCode
from protocol.messages import REQUESTS, RESPONSES
from protocol.sentinels import ZERO_UUID

node_ids = st.integers(0, 2**31 - 1)
epochs = st.integers(0, 2**31 - 1)
offsets = st.integers(0, 2**63 - 1)
leaders = st.none() | node_ids
errors = st.sampled_from(list(RaftError))


def request_trip(api_key: ApiKey, body: dict[str, Any], version: int) -> MessageData:
    codec = REQUESTS[api_key].codec(version)
    return codec.decode(codec.encode(body))


def response_trip(api_key: ApiKey, body: dict[str, Any], version: int) -> MessageData:
    codec = RESPONSES[api_key].codec(version)
    return codec.decode(codec.encode(body))


def elsewhere(body: dict[str, Any], topic: str = "other", partition: int = 0) -> dict[str, Any]:
    """``body`` with its one partition moved to ``topic``-``partition``."""
    [entry] = body["topics"]
    [data] = entry["partitions"]
    return {**body, "topics": [{"topic_name": topic, "partitions": [{**data, "partition_index": partition}]}]}


# -- Vote ------------------------------------------------------------------------------------------


@given(node_ids, node_ids, epochs, epochs, offsets, st.booleans())
def test_vote_request_round_trips_at_v2(
    source: int, destination: int, epoch: int, last_epoch: int, end_offset: int, pre_vote: bool
) -> None:
    request = VoteRequest(source, destination, epoch, last_epoch, end_offset, pre_vote)
    decoded = request_trip(ApiKey.VOTE, wire.vote_request_body(request, "cluster"), wire.VOTE_VERSION)
    assert wire.vote_request_from_body(decoded, destination) == request
    assert wire.request_cluster_id(decoded) == "cluster"


def test_vote_request_v2_fields() -> None:
    request = VoteRequest(1, 2, 5, 4, 100, pre_vote=True)
    voter_dir = uuid.UUID(int=7)
    decoded = request_trip(ApiKey.VOTE, wire.vote_request_body(request, "c", voter_dir), 2)
    assert decoded.voter_id == 2
    [topic] = decoded.topics
    assert topic.topic_name == METADATA_TOPIC
    [partition] = topic.partitions
    assert to_plain(partition) == {
        "partition_index": 0,
        "replica_epoch": 5,
        "replica_id": 1,
        "replica_directory_id": ZERO_UUID,
        "voter_directory_id": voter_dir,
        "last_offset_epoch": 4,
        "last_offset": 100,
        "pre_vote": True,
    }


@pytest.mark.parametrize("version", [0, 1])
def test_vote_request_before_v2_is_a_vote(version: int) -> None:
    request = VoteRequest(1, 2, 5, 4, 100, pre_vote=True)
    decoded = request_trip(ApiKey.VOTE, wire.vote_request_body(request, "c"), version)
    assert wire.vote_request_from_body(decoded, 2) == VoteRequest(1, 2, 5, 4, 100, pre_vote=False)


@pytest.mark.parametrize(("topic", "partition"), [("other", 0), (METADATA_TOPIC, 1)])
def test_vote_request_for_another_partition_maps_to_none(topic: str, partition: int) -> None:
    body = wire.vote_request_body(VoteRequest(1, 2, 5, 4, 100, False), "c")
    decoded = request_trip(ApiKey.VOTE, elsewhere(body, topic, partition), 2)
    assert wire.vote_request_from_body(decoded, 2) is None


def test_vote_request_without_partition_or_with_two_maps_to_none() -> None:
    body = wire.vote_request_body(VoteRequest(1, 2, 5, 4, 100, False), "c")
    assert wire.vote_request_from_body(request_trip(ApiKey.VOTE, {**body, "topics": []}, 2), 2) is None
    [topic] = body["topics"]
    twice = {**body, "topics": [topic, topic]}
    assert wire.vote_request_from_body(request_trip(ApiKey.VOTE, twice, 2), 2) is None
    two_partitions = {**body, "topics": [{**topic, "partitions": topic["partitions"] * 2}]}
    assert wire.vote_request_from_body(request_trip(ApiKey.VOTE, two_partitions, 2), 2) is None


@given(node_ids, node_ids, epochs, leaders, st.booleans(), st.booleans(), errors, st.sampled_from([0, 1, 2]))
def test_vote_response_round_trips(
    source: int,
    destination: int,
    epoch: int,
    leader_id: int | None,
    granted: bool,
    pre_vote: bool,
    error: RaftError,
    version: int,
) -> None:
    response = VoteResponse(source, destination, epoch, leader_id, granted, pre_vote, error)
    decoded = response_trip(ApiKey.VOTE, wire.vote_response_body(response), version)
    assert wire.vote_response_from_body(decoded, source, destination, pre_vote) == response


def test_vote_response_fields_and_no_leader() -> None:
    response = VoteResponse(2, 1, 6, None, False, False, RaftError.FENCED_LEADER_EPOCH)
    decoded = response_trip(ApiKey.VOTE, wire.vote_response_body(response), 2)
    assert decoded.error_code == 0  # Kafka puts the quorum's errors at the partition level
    [partition] = decoded.topics[0].partitions
    assert (partition.error_code, partition.leader_id, partition.leader_epoch) == (74, -1, 6)
    assert decoded.node_endpoints == []


def test_vote_response_names_the_leader_endpoint() -> None:
    response = VoteResponse(2, 1, 6, 3, False, False)
    body = wire.vote_response_body(response, leader_endpoint=("c3", 9093))
    decoded = response_trip(ApiKey.VOTE, body, 2)
    assert [(n.node_id, n.host, n.port) for n in decoded.node_endpoints] == [(3, "c3", 9093)]
    no_leader = wire.vote_response_body(
        VoteResponse(2, 1, 6, None, False, False), leader_endpoint=("c3", 9093)
    )
    assert no_leader["node_endpoints"] == []


def test_vote_response_top_level_error_wins() -> None:
    body = wire.vote_response_body(VoteResponse(2, 1, 6, 3, False, False))
    body["error_code"] = int(ErrorCode.INCONSISTENT_VOTER_SET)
    decoded = response_trip(ApiKey.VOTE, body, 2)
    response = wire.vote_response_from_body(decoded, 2, 1, False)
    assert response.error is RaftError.INCONSISTENT_VOTER_SET


def test_vote_response_with_an_error_the_quorum_does_not_know_raises() -> None:
    answer = response_trip(
        ApiKey.VOTE, {"error_code": int(ErrorCode.INCONSISTENT_CLUSTER_ID), "topics": []}, 2
    )
    with pytest.raises(wire.WireError) as raised:
        wire.vote_response_from_body(answer, 2, 1, False)
    assert raised.value.error is ErrorCode.INCONSISTENT_CLUSTER_ID
    body = wire.vote_response_body(VoteResponse(2, 1, 6, 3, False, False))
    body["topics"][0]["partitions"][0]["error_code"] = int(ErrorCode.UNKNOWN_SERVER_ERROR)
    with pytest.raises(wire.WireError):
        wire.vote_response_from_body(response_trip(ApiKey.VOTE, body, 2), 2, 1, False)
    other = response_trip(
        ApiKey.VOTE, elsewhere(wire.vote_response_body(VoteResponse(2, 1, 6, 3, False, False))), 2
    )
    with pytest.raises(wire.WireError):
        wire.vote_response_from_body(other, 2, 1, False)


# -- BeginQuorumEpoch ------------------------------------------------------------------------------


@given(node_ids, node_ids, epochs)
def test_begin_quorum_epoch_request_round_trips(leader: int, destination: int, epoch: int) -> None:
    request = BeginQuorumEpochRequest(leader, destination, epoch, leader)
    body = wire.begin_quorum_epoch_request_body(request, "cluster", [("CONTROLLER", "c1", 9093)])
    for version in (0, wire.BEGIN_QUORUM_EPOCH_VERSION):
        decoded = request_trip(ApiKey.BEGIN_QUORUM_EPOCH, body, version)
        assert wire.begin_quorum_epoch_request_from_body(decoded, destination) == request


def test_begin_quorum_epoch_request_v1_fields() -> None:
    request = BeginQuorumEpochRequest(1, 2, 5, 1)
    endpoints = [("CONTROLLER", "c1", 9093), ("SSL", "c1", 9094)]
    decoded = request_trip(
        ApiKey.BEGIN_QUORUM_EPOCH, wire.begin_quorum_epoch_request_body(request, "c", endpoints), 1
    )
    assert (decoded.cluster_id, decoded.voter_id) == ("c", 2)
    assert [(e.name, e.host, e.port) for e in decoded.leader_endpoints] == endpoints
    [partition] = decoded.topics[0].partitions
    assert to_plain(partition) == {
        "partition_index": 0,
        "voter_directory_id": ZERO_UUID,
        "leader_id": 1,
        "leader_epoch": 5,
    }


def test_begin_quorum_epoch_request_for_another_topic_maps_to_none() -> None:
    body = elsewhere(wire.begin_quorum_epoch_request_body(BeginQuorumEpochRequest(1, 2, 5, 1), "c"))
    assert (
        wire.begin_quorum_epoch_request_from_body(request_trip(ApiKey.BEGIN_QUORUM_EPOCH, body, 1), 2) is None
    )


@given(node_ids, node_ids, epochs, leaders, errors, st.sampled_from([0, 1]))
def test_begin_quorum_epoch_response_round_trips(
    source: int, destination: int, epoch: int, leader_id: int | None, error: RaftError, version: int
) -> None:
    response = BeginQuorumEpochResponse(source, destination, epoch, leader_id, error)
    decoded = response_trip(
        ApiKey.BEGIN_QUORUM_EPOCH, wire.begin_quorum_epoch_response_body(response), version
    )
    assert wire.begin_quorum_epoch_response_from_body(decoded, source, destination) == response


# -- EndQuorumEpoch --------------------------------------------------------------------------------


@given(node_ids, node_ids, epochs, st.lists(node_ids, max_size=5).map(tuple))
def test_end_quorum_epoch_request_round_trips(
    leader: int, destination: int, epoch: int, successors: tuple[int, ...]
) -> None:
    request = EndQuorumEpochRequest(leader, destination, epoch, leader, successors)
    body = wire.end_quorum_epoch_request_body(request, "cluster", [("CONTROLLER", "c1", 9093)])
    for version in (0, wire.END_QUORUM_EPOCH_VERSION):
        decoded = request_trip(ApiKey.END_QUORUM_EPOCH, body, version)
        assert wire.end_quorum_epoch_request_from_body(decoded, destination) == request


def test_end_quorum_epoch_request_lists_candidates_in_v1_and_successors_in_v0() -> None:
    body = wire.end_quorum_epoch_request_body(EndQuorumEpochRequest(1, 3, 5, 1, (3, 2)), "c")
    v1 = request_trip(ApiKey.END_QUORUM_EPOCH, body, 1).topics[0].partitions[0]
    assert v1.preferred_successors == []
    assert [(c.candidate_id, c.candidate_directory_id) for c in v1.preferred_candidates] == [
        (3, ZERO_UUID),
        (2, ZERO_UUID),
    ]
    v0 = request_trip(ApiKey.END_QUORUM_EPOCH, body, 0).topics[0].partitions[0]
    assert (v0.preferred_successors, v0.preferred_candidates) == ([3, 2], [])


def test_end_quorum_epoch_request_for_another_topic_maps_to_none() -> None:
    body = elsewhere(wire.end_quorum_epoch_request_body(EndQuorumEpochRequest(1, 3, 5, 1, (3,)), "c"))
    assert wire.end_quorum_epoch_request_from_body(request_trip(ApiKey.END_QUORUM_EPOCH, body, 1), 3) is None


@given(node_ids, node_ids, epochs, leaders, errors, st.sampled_from([0, 1]))
def test_end_quorum_epoch_response_round_trips(
    source: int, destination: int, epoch: int, leader_id: int | None, error: RaftError, version: int
) -> None:
    response = EndQuorumEpochResponse(source, destination, epoch, leader_id, error)
    decoded = response_trip(ApiKey.END_QUORUM_EPOCH, wire.end_quorum_epoch_response_body(response), version)
    assert wire.end_quorum_epoch_response_from_body(decoded, source, destination) == response


# -- errors ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("error", list(RaftError))
def test_errors_map_by_name_both_ways(error: RaftError) -> None:
    code = wire.error_code(error)
    assert code.name == error.name
    assert wire.raft_error(int(code)) is error


def test_error_codes_outside_the_quorum_map_to_none() -> None:
    assert wire.error_code(RaftError.FENCED_LEADER_EPOCH) == 74
    assert wire.raft_error(int(ErrorCode.INCONSISTENT_CLUSTER_ID)) is None
    assert wire.raft_error(30_000) is None  # unknown to this table: UNKNOWN_SERVER_ERROR


# -- DescribeQuorum --------------------------------------------------------------------------------

INFO = QuorumInfo(
    leader_id=1,
    leader_epoch=7,
    high_watermark=120,
    voters=(
        ReplicaInfo(1, 130, 1_000, 1_000),
        ReplicaInfo(2, 130, 1_900, 1_900),
        ReplicaInfo(3, -1, -1, -1),
    ),
    observers=(ReplicaInfo(4, 125, 1_950, 1_500),),
)


def test_describe_quorum_request_body() -> None:
    for version in (0, 1, 2):
        decoded = request_trip(ApiKey.DESCRIBE_QUORUM, wire.describe_quorum_request_body(), version)
        assert to_plain(decoded) == {
            "topics": [{"topic_name": METADATA_TOPIC, "partitions": [{"partition_index": 0}]}]
        }


@pytest.mark.parametrize("version", wire.DESCRIBE_QUORUM_VERSIONS)
def test_describe_quorum_response_from_the_leader(version: int) -> None:
    body = wire.describe_quorum_response_body(INFO, ErrorCode.NONE, now_ms=2_000, version=version)
    decoded = response_trip(ApiKey.DESCRIBE_QUORUM, body, version)
    assert decoded.error_code == 0
    [topic] = decoded.topics
    assert topic.topic_name == METADATA_TOPIC
    [partition] = topic.partitions
    assert (partition.partition_index, partition.error_code) == (0, 0)
    assert (partition.leader_id, partition.leader_epoch, partition.high_watermark) == (1, 7, 120)

    def rows(replicas: list[Any]) -> list[tuple[int, int, int, int]]:
        return [
            (r.replica_id, r.log_end_offset, r.last_fetch_timestamp, r.last_caught_up_timestamp)
            for r in replicas
        ]

    if version >= 1:  # the leader is caught up as of now; the others' times pass through
        assert rows(partition.current_voters) == [
            (1, 130, 2_000, 2_000),
            (2, 130, 1_900, 1_900),
            (3, -1, -1, -1),
        ]
        assert rows(partition.observers) == [(4, 125, 1_950, 1_500)]
    else:  # no timestamps before v1: the decoder's defaults
        assert rows(partition.current_voters) == [(1, 130, -1, -1), (2, 130, -1, -1), (3, -1, -1, -1)]
        assert rows(partition.observers) == [(4, 125, -1, -1)]
    assert decoded.nodes == []


@pytest.mark.parametrize("version", wire.DESCRIBE_QUORUM_VERSIONS)
def test_describe_quorum_response_off_the_leader(version: int) -> None:
    body = wire.describe_quorum_response_body(
        None, ErrorCode.NOT_LEADER_OR_FOLLOWER, now_ms=2_000, version=version
    )
    decoded = response_trip(ApiKey.DESCRIBE_QUORUM, body, version)
    assert decoded.error_code == 0
    [partition] = decoded.topics[0].partitions
    assert partition.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert (partition.leader_id, partition.current_voters, partition.observers) == (-1, [], [])
    assert wire.describe_quorum_response_body(None, ErrorCode.NONE, 2_000, version) == body


def test_describe_quorum_response_with_another_error_ignores_the_info() -> None:
    body = wire.describe_quorum_response_body(INFO, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, 2_000, 2)
    [partition] = response_trip(ApiKey.DESCRIBE_QUORUM, body, 2).topics[0].partitions
    assert (partition.error_code, partition.leader_id) == (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1)


def test_describe_quorum_v2_lists_the_voters_listeners_when_given() -> None:
    endpoints = {1: [("CONTROLLER", "c1", 9093)], 2: [("CONTROLLER", "c2", 9093)]}
    body = wire.describe_quorum_response_body(INFO, ErrorCode.NONE, 2_000, 2, voter_endpoints=endpoints)
    decoded = response_trip(ApiKey.DESCRIBE_QUORUM, body, 2)
    assert [(n.node_id, [(x.name, x.host, x.port) for x in n.listeners]) for n in decoded.nodes] == [
        (1, [("CONTROLLER", "c1", 9093)]),
        (2, [("CONTROLLER", "c2", 9093)]),
    ]
    [partition] = decoded.topics[0].partitions
    assert [r.replica_directory_id for r in partition.current_voters] == [ZERO_UUID] * 3


# -- plain dicts read like decoded bodies ----------------------------------------------------------


def test_plain_dict_bodies_are_read_too() -> None:
    request = VoteRequest(1, 2, 5, 4, 100, pre_vote=True)
    assert wire.vote_request_from_body(wire.vote_request_body(request, "c"), 2) == request
    response = EndQuorumEpochResponse(2, 1, 5, 2, RaftError.NONE)
    assert (
        wire.end_quorum_epoch_response_from_body(wire.end_quorum_epoch_response_body(response), 2, 1)
        == response
    )
