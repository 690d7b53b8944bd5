"""The metadata quorum's election APIs on the controller listener: Vote (52), BeginQuorumEpoch (53),
EndQuorumEpoch (54), and DescribeQuorum (55).

Each decodes the one partition its request names (``__cluster_metadata-0``), hands the message to
the :class:`~broker.quorum.raft_manager.RaftManager` and encodes its answer. A request for another
cluster is INCONSISTENT_CLUSTER_ID, one for another partition INVALID_REQUEST (as Kafka answers).
DescribeQuorum answers only on the leader; elsewhere NOT_LEADER_OR_FOLLOWER.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any

from broker.cluster.controller_channel import ControllerChannel, ControllerUnavailableError
from broker.handlers.authorization import ALLOW_EVERYTHING, cluster_allowed
from broker.handlers.base import Handler, RequestContext
from broker.quorum.raft_manager import RaftManager
from metadata.authorizer.standard import Authorizer
from metadata.log_topic import METADATA_PARTITION, METADATA_TOPIC
from metadata.raft import wire
from metadata.raft.messages import RaftMessage
from metadata.raft.quorum import NotLeaderError
from metadata.snapshot import SnapshotId, SnapshotPositionError, read_snapshot_chunk, snapshot_size
from protocol.acl_types import AclOperation
from protocol.api_keys import ApiKey
from protocol.data import MessageData
from protocol.error_codes import ErrorCode, KafkaError
from storage.clock import Clock

__all__ = [
    "BeginQuorumEpochHandler",
    "DescribeQuorumHandler",
    "EndQuorumEpochHandler",
    "FetchSnapshotHandler",
    "ForwardedDescribeQuorumHandler",
    "VoteHandler",
]


class _QuorumHandler(Handler):
    """Decode, check the cluster, let the quorum answer, encode."""

    def __init__(self, raft: RaftManager, cluster_id: str) -> None:
        self._raft = raft
        self._cluster_id = cluster_id

    async def handle(self, ctx: RequestContext, request: MessageData) -> Any:
        cluster_id = wire.request_cluster_id(request)
        if cluster_id is not None and cluster_id != self._cluster_id:
            raise KafkaError(
                ErrorCode.INCONSISTENT_CLUSTER_ID, f"cluster {cluster_id!r} is not {self._cluster_id!r}"
            )
        message = self._parse(request, self._raft.node_id)
        if message is None:
            raise KafkaError(ErrorCode.INVALID_REQUEST, "the request does not name __cluster_metadata-0")
        return self._encode(self._raft.receive(message))

    def error_response(self, ctx: RequestContext, request: MessageData | None, code: ErrorCode) -> Any:
        return {"error_code": int(code), "topics": []}

    @abstractmethod
    def _parse(self, request: MessageData, destination: int) -> RaftMessage | None: ...

    @abstractmethod
    def _encode(self, response: Any) -> dict[str, Any]: ...


class VoteHandler(_QuorumHandler):
    api_key = ApiKey.VOTE
    min_version = 0
    max_version = 2

    def _parse(self, request: MessageData, destination: int) -> RaftMessage | None:
        return wire.vote_request_from_body(request, destination)

    def _encode(self, response: Any) -> dict[str, Any]:
        return wire.vote_response_body(response)


class BeginQuorumEpochHandler(_QuorumHandler):
    api_key = ApiKey.BEGIN_QUORUM_EPOCH
    min_version = 0
    max_version = 1

    def _parse(self, request: MessageData, destination: int) -> RaftMessage | None:
        return wire.begin_quorum_epoch_request_from_body(request, destination)

    def _encode(self, response: Any) -> dict[str, Any]:
        return wire.begin_quorum_epoch_response_body(response)


class EndQuorumEpochHandler(_QuorumHandler):
    api_key = ApiKey.END_QUORUM_EPOCH
    min_version = 0
    max_version = 1

    def _parse(self, request: MessageData, destination: int) -> RaftMessage | None:
        return wire.end_quorum_epoch_request_from_body(request, destination)

    def _encode(self, response: Any) -> dict[str, Any]:
        return wire.end_quorum_epoch_response_body(response)


class DescribeQuorumHandler(Handler):
    api_key = ApiKey.DESCRIBE_QUORUM
    min_version = 0
    max_version = 2

    def __init__(
        self,
        raft: RaftManager,
        clock: Clock,
        voter_endpoints: Mapping[int, Sequence[wire.Endpoint]] | None = None,
    ) -> None:
        """``voter_endpoints``: each voter's controller listener, for v2's Nodes."""
        self._raft = raft
        self._clock = clock
        self._voter_endpoints = voter_endpoints

    async def handle(self, ctx: RequestContext, request: MessageData) -> Any:
        try:
            info = self._raft.describe()
        except NotLeaderError:
            return wire.describe_quorum_response_body(
                None, ErrorCode.NOT_LEADER_OR_FOLLOWER, self._clock.time_ms(), ctx.api_version
            )
        return wire.describe_quorum_response_body(
            info,
            ErrorCode.NONE,
            self._clock.time_ms(),
            ctx.api_version,
            voter_endpoints=self._voter_endpoints,
        )

    def error_response(self, ctx: RequestContext, request: MessageData | None, code: ErrorCode) -> Any:
        return wire.describe_quorum_response_body(None, code, self._clock.time_ms(), ctx.api_version)


DESCRIBE_QUORUM_FORWARD_TIMEOUT_S = 5.0


class ForwardedDescribeQuorumHandler(Handler):
    """DescribeQuorum on a client listener: the broker asks the active controller, as Kafka's
    brokers forward it, so ``kafka-metadata-quorum --bootstrap-server`` works against any broker."""

    api_key = ApiKey.DESCRIBE_QUORUM
    min_version = 0
    max_version = 2

    def __init__(self, channel: ControllerChannel, authorizer: Authorizer = ALLOW_EVERYTHING) -> None:
        """With an authorizer the requester needs DESCRIBE on the cluster (ControllerApis' check,
        made here: the controller does not see the client), else CLUSTER_AUTHORIZATION_FAILED."""
        self._channel = channel
        self._authorizer = authorizer

    async def handle(self, ctx: RequestContext, request: MessageData) -> Any:
        if self._authorizer.enabled and not cluster_allowed(self._authorizer, ctx, AclOperation.DESCRIBE):
            raise KafkaError(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
        try:
            return await self._channel.forward(
                self.api_key, ctx.api_version, request, DESCRIBE_QUORUM_FORWARD_TIMEOUT_S
            )
        except ControllerUnavailableError as exc:
            raise KafkaError(ErrorCode.REQUEST_TIMED_OUT, str(exc)) from exc

    def error_response(self, ctx: RequestContext, request: MessageData | None, code: ErrorCode) -> Any:
        return {"error_code": int(code), "topics": []}


FETCH_SNAPSHOT_MAX_CHUNK = 1 << 20
"""The most one FetchSnapshot answer carries, whatever the request's MaxBytes."""


class FetchSnapshotHandler(Handler):
    """FetchSnapshot (59) on the controller listener: the leader serves a snapshot of the metadata
    log in chunks, to a fetcher that asked for an offset the log no longer has (KIP-630)."""

    api_key = ApiKey.FETCH_SNAPSHOT
    min_version = 0
    max_version = 1

    def __init__(self, raft: RaftManager, cluster_id: str) -> None:
        self._raft = raft
        self._cluster_id = cluster_id

    async def handle(self, ctx: RequestContext, request: MessageData) -> Any:
        if request.cluster_id is not None and request.cluster_id != self._cluster_id:
            raise KafkaError(ErrorCode.INCONSISTENT_CLUSTER_ID, f"cluster {request.cluster_id!r}")
        partition = _snapshot_partition(request)
        if partition is None:
            raise KafkaError(ErrorCode.INVALID_REQUEST, "the request does not name __cluster_metadata-0")
        wanted = SnapshotId(int(partition.snapshot_id.end_offset), int(partition.snapshot_id.epoch))
        leader = (self._raft.leader_id if self._raft.leader_id is not None else -1, self._raft.epoch)
        if not self._raft.is_leader:
            return _snapshot_response(ErrorCode.NOT_LEADER_OR_FOLLOWER, wanted, leader)
        directory = self._raft.log.partition_log.directory
        try:
            size = snapshot_size(directory, wanted)
            chunk = read_snapshot_chunk(
                directory,
                wanted,
                int(partition.position),
                min(int(request.max_bytes), FETCH_SNAPSHOT_MAX_CHUNK),
            )
        except FileNotFoundError:
            return _snapshot_response(ErrorCode.SNAPSHOT_NOT_FOUND, wanted, leader)
        except SnapshotPositionError:
            return _snapshot_response(ErrorCode.POSITION_OUT_OF_RANGE, wanted, leader)
        return _snapshot_response(ErrorCode.NONE, wanted, leader, size, int(partition.position), chunk)

    def error_response(self, ctx: RequestContext, request: MessageData | None, code: ErrorCode) -> Any:
        return {"throttle_time_ms": 0, "error_code": int(code), "topics": []}


def _snapshot_partition(request: MessageData) -> Any | None:
    topics = list(request.topics)
    if len(topics) != 1 or topics[0].name != METADATA_TOPIC or len(topics[0].partitions) != 1:
        return None
    partition = topics[0].partitions[0]
    return partition if partition.partition == METADATA_PARTITION else None


def _snapshot_response(
    code: ErrorCode,
    snapshot: SnapshotId,
    leader: tuple[int, int],
    size: int = -1,
    position: int = -1,
    chunk: bytes = b"",
) -> dict[str, Any]:
    partition = {
        "index": METADATA_PARTITION,
        "error_code": int(code),
        "snapshot_id": {"end_offset": snapshot.end_offset, "epoch": snapshot.epoch},
        "current_leader": {"leader_id": leader[0], "leader_epoch": leader[1]},
        "size": size,
        "position": position,
        "unaligned_records": chunk,
    }
    return {
        "throttle_time_ms": 0,
        "error_code": 0,
        "topics": [{"name": METADATA_TOPIC, "partitions": [partition]}],
    }
