"""The quorum's requests to the other voters: Vote, BeginQuorumEpoch, EndQuorumEpoch and Fetch.

Each voter gets two connections: one for the long-polled Fetch of the metadata log, one for the
election messages, so that a vote is never queued behind a parked fetch (a connection answers in
order). The Fetch is the very request a broker sends to follow the metadata log
(:meth:`broker.cluster.controller_channel.ControllerChannel.fetch_metadata`), with the voter's id as replica
id and its epoch as current leader epoch: voters and observers fetch with the same code, and the
leader serves both with the same handler. A request that gets no answer delivers nothing: the
Raft node resends on its own timers.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

import structlog

from broker.cluster.controller_channel import (
    ControllerChannel,
    ControllerUnavailableError,
)
from client.errors import PeerClosedError
from client.security import ClientSecurity
from metadata.raft import wire
from metadata.raft.messages import (
    BeginQuorumEpochRequest,
    DivergingEpoch,
    EndQuorumEpochRequest,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    RaftError,
    RaftMessage,
    VoteRequest,
)
from metadata.raft.segment_log import batch_entries
from protocol.api_keys import ApiKey
from protocol.error_codes import ErrorCode

__all__ = ["QuorumPeers"]

_log = structlog.get_logger("kipling.raft.peers")

Deliver = Callable[[RaftMessage], None]
Gone = Callable[[int], None]
VoterAddress = Callable[[int], tuple[str, int]]
FETCH_MAX_BYTES = 8 * 1024 * 1024


class _Peer:
    def __init__(
        self,
        voter_id: int,
        address: VoterAddress,
        client_id: str,
        request_timeout_s: float,
        security: ClientSecurity | None,
    ) -> None:
        def where() -> tuple[str, int]:
            return address(voter_id)

        def channel() -> ControllerChannel:
            return ControllerChannel(
                where, client_id=client_id, request_timeout_s=request_timeout_s, security=security
            )

        self.control = channel()
        self.fetch = channel()

    async def close(self) -> None:
        await self.control.close()
        await self.fetch.close()


class QuorumPeers:
    """Sends one node's Raft requests and delivers the answers back to it."""

    def __init__(
        self,
        local_id: int,
        voter_ids: Sequence[int],
        address: VoterAddress,
        *,
        cluster_id: str,
        fetch_max_wait_ms: int,
        request_timeout_ms: int,
        leader_endpoints: Callable[[], list[wire.Endpoint]],
        security: ClientSecurity | None = None,
    ) -> None:
        """``security``: how this voter connects to the others' controller listener (TLS, SASL;
        :func:`broker.client_security.controller_client_security`), None for PLAINTEXT."""
        self._local_id = local_id
        self._cluster_id = cluster_id
        self._fetch_max_wait_ms = fetch_max_wait_ms
        self._leader_endpoints = leader_endpoints
        timeout_s = request_timeout_ms / 1000
        client_id = f"raft-{local_id}"
        self._peers = {
            voter: _Peer(voter, address, client_id, timeout_s, security)
            for voter in voter_ids
            if voter != local_id
        }
        self._tasks: set[asyncio.Task[None]] = set()

    def send(self, message: RaftMessage, deliver: Deliver, gone: Gone) -> None:
        """Send ``message`` (a request) in the background; its answer goes to ``deliver``, and
        ``gone(node)`` hears of a destination whose process is not there (refused or reset)."""
        if message.destination not in self._peers:
            _log.warning("raft message to an unknown voter", destination=message.destination)
            return
        task = asyncio.create_task(
            self._exchange(message, deliver, gone), name=f"raft-{type(message).__name__}"
        )
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def drain(self) -> None:
        """Wait for the requests in flight to be answered or to fail."""
        await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for peer in self._peers.values():
            await peer.close()

    async def _exchange(self, message: RaftMessage, deliver: Deliver, gone: Gone) -> None:
        try:
            answer = await self._request(message)
        except (ControllerUnavailableError, wire.WireError) as exc:
            _log.debug(
                "raft request failed", message=type(message).__name__, to=message.destination, error=str(exc)
            )
            if _process_gone(exc):
                gone(message.destination)
            return
        if answer is not None:
            deliver(answer)

    async def _request(self, message: RaftMessage) -> RaftMessage | None:
        peer = self._peers[message.destination]
        match message:
            case FetchRequest():
                return await self._fetch(peer, message)
            case FetchSnapshotRequest():
                return await self._fetch_snapshot(peer, message)
            case VoteRequest():
                _, body = await peer.control.request(
                    ApiKey.VOTE, wire.vote_request_body(message, self._cluster_id), version=wire.VOTE_VERSION
                )
                return wire.vote_response_from_body(
                    body, message.destination, self._local_id, message.pre_vote
                )
            case BeginQuorumEpochRequest():
                request = wire.begin_quorum_epoch_request_body(
                    message, self._cluster_id, self._leader_endpoints()
                )
                _, body = await peer.control.request(
                    ApiKey.BEGIN_QUORUM_EPOCH, request, version=wire.BEGIN_QUORUM_EPOCH_VERSION
                )
                return wire.begin_quorum_epoch_response_from_body(body, message.destination, self._local_id)
            case EndQuorumEpochRequest():
                request = wire.end_quorum_epoch_request_body(
                    message, self._cluster_id, self._leader_endpoints()
                )
                _, body = await peer.control.request(
                    ApiKey.END_QUORUM_EPOCH, request, version=wire.END_QUORUM_EPOCH_VERSION
                )
                return wire.end_quorum_epoch_response_from_body(body, message.destination, self._local_id)
        return None  # responses are answered by the handlers, never sent from here

    async def _fetch_snapshot(self, peer: _Peer, request: FetchSnapshotRequest) -> FetchSnapshotResponse:
        chunk = await peer.fetch.fetch_snapshot(
            replica_id=self._local_id,
            snapshot_id=request.snapshot_id,
            position=request.position,
            max_bytes=FETCH_MAX_BYTES,
        )
        epoch, leader_id, error = _leader_and_error(chunk.current_leader, chunk.error, request.epoch)
        return FetchSnapshotResponse(
            source=request.destination,
            destination=self._local_id,
            epoch=epoch,
            leader_id=leader_id,
            snapshot_id=request.snapshot_id,
            size=chunk.size,
            position=chunk.position,
            data=chunk.data,
            error=error,
        )

    async def _fetch(self, peer: _Peer, request: FetchRequest) -> FetchResponse:
        """The brokers' metadata Fetch, as this voter (its id, its epoch): one fetch path for both."""
        fetched = await peer.fetch.fetch_metadata(
            cluster_id=self._cluster_id,
            broker_id=self._local_id,
            replica_id=self._local_id,
            fetch_offset=request.fetch_offset,
            last_fetched_epoch=request.last_fetched_epoch,
            current_leader_epoch=request.epoch,
            max_wait_ms=self._fetch_max_wait_ms,
            max_bytes=FETCH_MAX_BYTES,
        )
        epoch, leader_id, error = _leader_and_error(fetched.current_leader, fetched.error, request.epoch)
        return FetchResponse(
            source=request.destination,
            destination=self._local_id,
            epoch=epoch,
            leader_id=leader_id,
            fetch_offset=request.fetch_offset,
            high_watermark=fetched.high_watermark,
            entries=tuple(batch_entries(fetched.records)) if error is RaftError.NONE else (),
            diverging_epoch=DivergingEpoch(*fetched.diverging_epoch) if fetched.diverging_epoch else None,
            error=error,
            snapshot_id=fetched.snapshot_id,
            log_start_offset=fetched.log_start_offset,
        )


def _leader_and_error(
    current_leader: tuple[int, int] | None, code: ErrorCode, request_epoch: int
) -> tuple[int, int | None, RaftError]:
    """(epoch, leader, error) of an answer: the leader it names (else the request's epoch and no
    leader), and its error as the quorum knows it (one it has no name for: not the leader)."""
    leader_id, epoch = current_leader or (-1, request_epoch)
    if code == ErrorCode.NONE:
        return epoch, None if leader_id < 0 else leader_id, RaftError.NONE
    return (
        epoch,
        None if leader_id < 0 else leader_id,
        wire.raft_error(code) or RaftError.NOT_LEADER_OR_FOLLOWER,
    )


def _process_gone(exc: BaseException) -> bool:
    """True when the peer's process is not there: its port refused us, or its side closed or reset
    the connection under a request. A paused process accepts connections and times out instead,
    which is left to Raft's own timeouts, and so is a connection this side closed."""
    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, ConnectionRefusedError | ConnectionResetError | PeerClosedError):
            return True
        cause = cause.__cause__
    return False
