"""The quorum's plain messages as Kafka request and response bodies, and back (sans-IO).

:mod:`metadata.raft.messages` speaks in node ids and epochs; the wire speaks Vote (52),
BeginQuorumEpoch (53), EndQuorumEpoch (54) and DescribeQuorum (55), each wrapping its one partition,
``__cluster_metadata-0``, in ``topics[].partitions[]``. The functions here build the body dicts the
protocol encoder takes and read the bodies its decoder returns (attribute access on
:class:`~protocol.data.MessageData`; plain dicts are read too). Nothing here opens a connection:
the asyncio driver chooses the version, encodes, sends, decodes and hands the result back.

What the driver sends: Vote v2 (the PreVote flag, KIP-996), BeginQuorumEpoch v1 and EndQuorumEpoch
v1 (KIP-853's flexible versions); every builder fills the fields of the older versions too, so a
body also encodes at a lower version (EndQuorumEpoch v0 then lists the plain successor ids). Kafka
fills these bodies the same way (``RaftUtil.singleton*``): a response carries its error at the
partition level, with NONE at the top; directory ids this quorum does not track are ZERO_UUID.

Reading is lenient where Kafka is: a request that does not hold exactly ``__cluster_metadata-0``
maps to None (Kafka answers such requests with INVALID_REQUEST), a version without PreVote reads as
a vote. A response that cannot become a message (no metadata partition, or an error the quorum has
no name for, such as a top-level INCONSISTENT_CLUSTER_ID) raises :class:`WireError`; the driver
treats it as no answer and retries after its backoff, as Kafka's client does.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from metadata.log_topic import METADATA_PARTITION, METADATA_TOPIC
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
from protocol.error_codes import ErrorCode
from protocol.sentinels import ZERO_UUID

VOTE_VERSION = 2
"""The Vote version the driver sends: the first with PreVote (KIP-996)."""
BEGIN_QUORUM_EPOCH_VERSION = 1
END_QUORUM_EPOCH_VERSION = 1
DESCRIBE_QUORUM_VERSIONS = (0, 1, 2)

NO_LEADER = -1
"""Kafka's LeaderId when no leader is known (``None`` in the messages)."""
UNKNOWN = -1
"""An unknown epoch, offset or timestamp on the wire."""

Endpoint = tuple[str, str, int]
"""A listener: (name, host, port)."""


class WireError(ValueError):
    """A response body that does not map to a quorum message; ``error`` is the code it carried."""

    def __init__(self, message: str, error: ErrorCode | None = None) -> None:
        super().__init__(message)
        self.error = error


# -- errors ----------------------------------------------------------------------------------------


def error_code(error: RaftError) -> ErrorCode:
    """The Kafka error code of a quorum error (the same name)."""
    return ErrorCode[error.name]


def raft_error(code: int) -> RaftError | None:
    """The quorum error of a Kafka error code (by name), or None if the quorum has no such error."""
    return RaftError.__members__.get(ErrorCode.for_code(code).name)


def _response_error(body: Any, partition: Any) -> RaftError:
    """A response's error: the top-level one if set, else the partition's."""
    top = ErrorCode.for_code(_field(body, "error_code", 0))
    code = top if top is not ErrorCode.NONE else ErrorCode.for_code(_field(partition, "error_code", 0))
    error = raft_error(code)
    if error is None:
        raise WireError(f"error {code.name} is not a quorum error", code)
    return error


# -- reading decoded bodies ------------------------------------------------------------------------


def _field(obj: Any, name: str, default: Any = None) -> Any:
    """``obj.name`` for a decoded struct, ``obj[name]`` for a plain dict; ``default`` when absent."""
    if isinstance(obj, Mapping):
        return obj.get(name, default)
    return getattr(obj, name, default)


def _metadata_partition(body: Any) -> Any | None:
    """The body's one partition if it holds exactly ``__cluster_metadata-0`` (Kafka's
    ``hasValidTopicPartition``), else None."""
    topics: Sequence[Any] = _field(body, "topics") or ()
    if len(topics) != 1 or _field(topics[0], "topic_name") != METADATA_TOPIC:
        return None
    partitions: Sequence[Any] = _field(topics[0], "partitions") or ()
    if len(partitions) != 1 or _field(partitions[0], "partition_index") != METADATA_PARTITION:
        return None
    return partitions[0]


def _response_partition(body: Any) -> Any:
    partition = _metadata_partition(body)
    if partition is None:
        top = ErrorCode.for_code(_field(body, "error_code", 0))
        raise WireError(
            f"response does not hold exactly {METADATA_TOPIC}-{METADATA_PARTITION}",
            None if top is ErrorCode.NONE else top,
        )
    return partition


def _leader(leader_id: int) -> int | None:
    return None if leader_id < 0 else leader_id


def request_cluster_id(body: Any) -> str | None:
    """A Vote, BeginQuorumEpoch or EndQuorumEpoch request's ClusterId (None if it sent none)."""
    cluster_id: str | None = _field(body, "cluster_id")
    return cluster_id


# -- building bodies -------------------------------------------------------------------------------


def _topics(partition: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {
            "topic_name": METADATA_TOPIC,
            "partitions": [{"partition_index": METADATA_PARTITION, **partition}],
        }
    ]


def _leader_endpoints(endpoints: Sequence[Endpoint]) -> list[dict[str, Any]]:
    return [{"name": name, "host": host, "port": port} for name, host, port in endpoints]


def _node_endpoints(leader_id: int | None, endpoint: tuple[str, int] | None) -> list[dict[str, Any]]:
    """The tagged NodeEndpoints of a response: where the leader it names listens, if known."""
    if leader_id is None or endpoint is None:
        return []
    host, port = endpoint
    return [{"node_id": leader_id, "host": host, "port": port}]


def _quorum_response(
    error: RaftError,
    epoch: int,
    leader_id: int | None,
    leader_endpoint: tuple[str, int] | None,
    **partition: Any,
) -> dict[str, Any]:
    return {
        "error_code": int(ErrorCode.NONE),
        "topics": _topics(
            {
                "error_code": int(error_code(error)),
                "leader_id": NO_LEADER if leader_id is None else leader_id,
                "leader_epoch": epoch,
                **partition,
            }
        ),
        "node_endpoints": _node_endpoints(leader_id, leader_endpoint),
    }


# -- Vote ------------------------------------------------------------------------------------------


def vote_request_body(
    request: VoteRequest, cluster_id: str, voter_directory_id: uuid.UUID = ZERO_UUID
) -> dict[str, Any]:
    """A Vote request (v2; encodes at v0 and v1 too, without PreVote) from ``request.source`` to
    ``request.destination``."""
    return {
        "cluster_id": cluster_id,
        "voter_id": request.destination,
        "topics": _topics(
            {
                "replica_epoch": request.candidate_epoch,
                "replica_id": request.source,
                "replica_directory_id": ZERO_UUID,
                "voter_directory_id": voter_directory_id,
                "last_offset_epoch": request.last_epoch,
                "last_offset": request.end_offset,
                "pre_vote": request.pre_vote,
            }
        ),
    }


def vote_request_from_body(body: Any, destination: int) -> VoteRequest | None:
    """A decoded Vote request as the message ``destination`` (this node) handles; None if it does
    not hold exactly the metadata partition. Versions 0 and 1 carry no PreVote: a vote."""
    partition = _metadata_partition(body)
    if partition is None:
        return None
    return VoteRequest(
        source=_field(partition, "replica_id"),
        destination=destination,
        candidate_epoch=_field(partition, "replica_epoch"),
        last_epoch=_field(partition, "last_offset_epoch"),
        end_offset=_field(partition, "last_offset"),
        pre_vote=bool(_field(partition, "pre_vote", False)),
    )


def vote_response_body(
    response: VoteResponse, *, leader_endpoint: tuple[str, int] | None = None
) -> dict[str, Any]:
    """A Vote response; ``leader_endpoint`` (host, port) fills v1+'s NodeEndpoints for the leader."""
    return _quorum_response(
        response.error,
        response.epoch,
        response.leader_id,
        leader_endpoint,
        vote_granted=response.granted,
    )


def vote_response_from_body(body: Any, source: int, destination: int, pre_vote: bool) -> VoteResponse:
    """A decoded Vote response from ``source``, answering the (pre-)vote ``destination`` sent
    (the response does not say which it answers); raises :class:`WireError`."""
    partition = _response_partition(body)
    return VoteResponse(
        source=source,
        destination=destination,
        epoch=_field(partition, "leader_epoch"),
        leader_id=_leader(_field(partition, "leader_id")),
        granted=bool(_field(partition, "vote_granted")),
        pre_vote=pre_vote,
        error=_response_error(body, partition),
    )


# -- BeginQuorumEpoch ------------------------------------------------------------------------------


def begin_quorum_epoch_request_body(
    request: BeginQuorumEpochRequest, cluster_id: str, leader_endpoints: Sequence[Endpoint] = ()
) -> dict[str, Any]:
    """A BeginQuorumEpoch request (v1; encodes at v0 too); ``leader_endpoints`` are the leader's
    listeners as (name, host, port)."""
    return {
        "cluster_id": cluster_id,
        "voter_id": request.destination,
        "topics": _topics(
            {
                "voter_directory_id": ZERO_UUID,
                "leader_id": request.leader_id,
                "leader_epoch": request.epoch,
            }
        ),
        "leader_endpoints": _leader_endpoints(leader_endpoints),
    }


def begin_quorum_epoch_request_from_body(body: Any, destination: int) -> BeginQuorumEpochRequest | None:
    """A decoded BeginQuorumEpoch request; its source is the leader. None if it does not hold
    exactly the metadata partition."""
    partition = _metadata_partition(body)
    if partition is None:
        return None
    leader_id = _field(partition, "leader_id")
    return BeginQuorumEpochRequest(
        source=leader_id,
        destination=destination,
        epoch=_field(partition, "leader_epoch"),
        leader_id=leader_id,
    )


def begin_quorum_epoch_response_body(
    response: BeginQuorumEpochResponse, *, leader_endpoint: tuple[str, int] | None = None
) -> dict[str, Any]:
    return _quorum_response(response.error, response.epoch, response.leader_id, leader_endpoint)


def begin_quorum_epoch_response_from_body(
    body: Any, source: int, destination: int
) -> BeginQuorumEpochResponse:
    """Raises :class:`WireError` for a response that maps to no message."""
    partition = _response_partition(body)
    return BeginQuorumEpochResponse(
        source=source,
        destination=destination,
        epoch=_field(partition, "leader_epoch"),
        leader_id=_leader(_field(partition, "leader_id")),
        error=_response_error(body, partition),
    )


# -- EndQuorumEpoch --------------------------------------------------------------------------------


def end_quorum_epoch_request_body(
    request: EndQuorumEpochRequest, cluster_id: str, leader_endpoints: Sequence[Endpoint] = ()
) -> dict[str, Any]:
    """An EndQuorumEpoch request (v1: PreferredCandidates; v0: PreferredSuccessors), best
    successor first."""
    return {
        "cluster_id": cluster_id,
        "topics": _topics(
            {
                "leader_id": request.leader_id,
                "leader_epoch": request.epoch,
                "preferred_successors": list(request.preferred_successors),
                "preferred_candidates": [
                    {"candidate_id": node, "candidate_directory_id": ZERO_UUID}
                    for node in request.preferred_successors
                ],
            }
        ),
        "leader_endpoints": _leader_endpoints(leader_endpoints),
    }


def end_quorum_epoch_request_from_body(body: Any, destination: int) -> EndQuorumEpochRequest | None:
    """A decoded EndQuorumEpoch request (either version); its source is the resigning leader.
    None if it does not hold exactly the metadata partition."""
    partition = _metadata_partition(body)
    if partition is None:
        return None
    candidates = _field(partition, "preferred_candidates") or ()
    if candidates:
        successors = tuple(_field(candidate, "candidate_id") for candidate in candidates)
    else:
        successors = tuple(_field(partition, "preferred_successors") or ())
    leader_id = _field(partition, "leader_id")
    return EndQuorumEpochRequest(
        source=leader_id,
        destination=destination,
        epoch=_field(partition, "leader_epoch"),
        leader_id=leader_id,
        preferred_successors=successors,
    )


def end_quorum_epoch_response_body(
    response: EndQuorumEpochResponse, *, leader_endpoint: tuple[str, int] | None = None
) -> dict[str, Any]:
    return _quorum_response(response.error, response.epoch, response.leader_id, leader_endpoint)


def end_quorum_epoch_response_from_body(body: Any, source: int, destination: int) -> EndQuorumEpochResponse:
    """Raises :class:`WireError` for a response that maps to no message."""
    partition = _response_partition(body)
    return EndQuorumEpochResponse(
        source=source,
        destination=destination,
        epoch=_field(partition, "leader_epoch"),
        leader_id=_leader(_field(partition, "leader_id")),
        error=_response_error(body, partition),
    )


# -- DescribeQuorum --------------------------------------------------------------------------------


def describe_quorum_request_body() -> dict[str, Any]:
    """What a client sends (the same in every version): ``__cluster_metadata-0``."""
    return {
        "topics": [{"topic_name": METADATA_TOPIC, "partitions": [{"partition_index": METADATA_PARTITION}]}]
    }


def _replica_state(replica: ReplicaInfo, leader_id: int, now_ms: int) -> dict[str, Any]:
    # The leader reports itself fetched and caught up as of now (Kafka's RaftUtil.toReplicaState).
    own = replica.replica_id == leader_id
    return {
        "replica_id": replica.replica_id,
        "replica_directory_id": ZERO_UUID,
        "log_end_offset": replica.log_end_offset,
        "last_fetch_timestamp": now_ms if own else replica.last_fetch_ms,
        "last_caught_up_timestamp": now_ms if own else replica.last_caught_up_ms,
    }


def describe_quorum_response_body(
    info: QuorumInfo | None,
    error: ErrorCode,
    now_ms: int,
    version: int,
    *,
    voter_endpoints: Mapping[int, Sequence[Endpoint]] | None = None,
) -> dict[str, Any]:
    """The DescribeQuorum answer (any version 0-2) for the metadata partition.

    With ``info`` (the leader's view) and ``error`` NONE: the leader, its epoch and high watermark
    and every voter's and observer's progress; timestamps are passed through (-1: unknown) except
    the leader's own, which are ``now_ms``. Without ``info`` (not the leader), or with an ``error``:
    that partition-level error (NOT_LEADER_OR_FOLLOWER when ``error`` is NONE) and no leader.
    ``voter_endpoints`` fills v2's Nodes with each voter's listeners; Nodes stays empty without it.
    """
    nodes: list[dict[str, Any]] = []
    if info is None or error is not ErrorCode.NONE:
        failure = ErrorCode.NOT_LEADER_OR_FOLLOWER if error is ErrorCode.NONE else error
        partition: dict[str, Any] = {
            "error_code": int(failure),
            "error_message": None,
            "leader_id": NO_LEADER,
            "leader_epoch": UNKNOWN,
            "high_watermark": UNKNOWN,
            "current_voters": [],
            "observers": [],
        }
    else:
        partition = {
            "error_code": int(ErrorCode.NONE),
            "error_message": None,
            "leader_id": info.leader_id,
            "leader_epoch": info.leader_epoch,
            "high_watermark": info.high_watermark,
            "current_voters": [_replica_state(r, info.leader_id, now_ms) for r in info.voters],
            "observers": [_replica_state(r, info.leader_id, now_ms) for r in info.observers],
        }
        if version >= 2 and voter_endpoints:
            nodes = [
                {
                    "node_id": voter.replica_id,
                    "listeners": _leader_endpoints(voter_endpoints[voter.replica_id]),
                }
                for voter in info.voters
                if voter.replica_id in voter_endpoints
            ]
    return {
        "error_code": int(ErrorCode.NONE),
        "error_message": None,
        "topics": _topics(partition),
        "nodes": nodes,
    }
