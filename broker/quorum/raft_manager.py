"""The metadata quorum's driver on the event loop (Kafka's KafkaRaftClient poll loop and RaftManager).

:class:`RaftManager` owns one :class:`~metadata.raft.quorum.RaftNode` (sans-IO) over the
``__cluster_metadata-0`` log on segment files, and does what the node cannot: it runs the node's
timers, sends its requests to the other voters (:class:`~broker.quorum.peers.QuorumPeers`) and
hands their answers back, answers the requests the controller listener receives, parks empty
fetches until the log or the high watermark moves (the long poll that keeps commits one round
trip away), and tells whoever waits: a controller response waiting for its batch to commit, a
parked fetch, the :class:`~broker.quorum.controller_role.ControllerRole` that activates the
controller when this node leads.

All of it runs on the one event loop thread, so the node is never entered concurrently.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import structlog

from broker.metrics.raft import RaftMetrics
from broker.quorum.peers import QuorumPeers
from broker.quorum.snapshots import MetadataSnapshots
from client.tasks import cancel_and_wait
from metadata.raft.leader import QuorumInfo
from metadata.raft.messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    FetchRequest,
    FetchResponse,
    RaftMessage,
    VoteRequest,
    VoteResponse,
)
from metadata.raft.quorum import NotLeaderError, RaftNode
from metadata.raft.segment_log import SegmentRaftLog
from metadata.raft.state import Kind
from storage.clock import Clock
from storage.errors import is_log_dir_full

__all__ = ["LeadershipLostError", "QuorumSnapshot", "RaftManager"]

_log = structlog.get_logger("kipling.raft")

RESIGN_WAIT_S = 0.5
POLL_FAILURE_BACKOFF_S = 1.0
"""After an unexpected failure of the poll loop (logged), the next try comes this much later."""
"""How long a graceful stop waits for EndQuorumEpoch to reach the other voters."""

_RESPONSE_TO = {
    VoteRequest: VoteResponse,
    BeginQuorumEpochRequest: BeginQuorumEpochResponse,
    EndQuorumEpochRequest: EndQuorumEpochResponse,
    FetchRequest: FetchResponse,
}


class LeadershipLostError(Exception):
    """This node stopped leading the epoch a caller was waiting in."""


@dataclass(frozen=True, slots=True)
class QuorumSnapshot:
    """What the rest of the node reacts to: who leads which epoch, and how far the log is."""

    kind: Kind
    epoch: int
    leader_id: int | None
    high_watermark: int
    log_end_offset: int


class RaftManager:
    """Runs ``node`` on the event loop; ``peers`` carries its requests to the other voters."""

    def __init__(
        self,
        node: RaftNode,
        log: SegmentRaftLog,
        peers: QuorumPeers,
        clock: Clock,
        metrics: RaftMetrics | None = None,
        snapshots: MetadataSnapshots | None = None,
    ) -> None:
        self._metrics = metrics
        self._snapshots = snapshots
        self._stopped = False
        self._log_dir_full = False
        """The metadata log's disk was full at the last failed step: said once, until a step succeeds."""
        self._election_started_ms: int | None = None
        self._appended_at: collections.deque[tuple[int, int]] = collections.deque()
        """(log end after an append, when): the commit latency is measured from here."""
        self._node = node
        self._log = log
        self._peers = peers
        self._clock = clock
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._changed: asyncio.Future[None] | None = None
        self._commit_waiters: list[tuple[int, int, asyncio.Future[None]]] = []
        self._listeners: list[Callable[[QuorumSnapshot], None]] = []
        self._last = self.snapshot()
        self._measure(self._last, self._last)

    # -- state ------------------------------------------------------------------------------------

    @property
    def node_id(self) -> int:
        return self._node.node_id

    @property
    def log(self) -> SegmentRaftLog:
        return self._log

    def snapshot(self) -> QuorumSnapshot:
        node = self._node
        return QuorumSnapshot(
            node.state.kind, node.epoch, node.leader_id, node.high_watermark, self._log.end_offset
        )

    @property
    def epoch(self) -> int:
        return self._node.epoch

    @property
    def voters(self) -> frozenset[int]:
        return self._node.voters

    @property
    def leader_id(self) -> int | None:
        return self._node.leader_id

    @property
    def is_leader(self) -> bool:
        return self._node.is_leader

    @property
    def high_watermark(self) -> int:
        return self._node.high_watermark

    @property
    def own_epoch_committed(self) -> bool:
        """This node leads and its epoch's first entry is committed: the log below it is final."""
        start = self._node.epoch_start_offset
        return start is not None and self._node.high_watermark > start

    def describe(self) -> QuorumInfo:
        """DescribeQuorum's data; raises NotLeaderError unless this node leads."""
        return self._node.describe_quorum()

    def on_change(self, listener: Callable[[QuorumSnapshot], None]) -> None:
        """Call ``listener`` after every change of state, epoch, leader, HW or log end."""
        self._listeners.append(listener)

    # -- lifecycle --------------------------------------------------------------------------------

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name=f"raft-{self.node_id}")

    def resign(self) -> None:
        """Give up the leadership now (EndQuorumEpoch names the successors): this node cannot act
        as the active controller, another voter should."""
        if self._node.is_leader and not self._stopped and len(self._node.voters) > 1:
            self._send(self._node.resign())  # the only voter has nobody to hand over to
            self._after_step()

    async def stop(self) -> None:
        """Resign if leading (EndQuorumEpoch, so a successor need not wait out a timeout), then stop."""
        if self._node.is_leader and len(self._node.voters) > 1:
            self._send(self._node.resign())
            self._after_step()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(RESIGN_WAIT_S):
                    await self._peers.drain()
        self._stopped = True  # nothing more is sent: a late answer or failure changes nothing
        failure = await cancel_and_wait(self._task)
        if failure is not None and not isinstance(failure, asyncio.CancelledError):
            _log.error("the quorum's poll loop had failed", error=repr(failure))
        self._fail_commit_waiters()
        await self._peers.close()

    async def _run(self) -> None:
        while True:
            self._wake.clear()
            try:
                result = self._node.poll()
                self._send(result.messages)
                self._after_step()
            except Exception as exc:  # never a silent death: say so, step aside, and keep the timers going
                self._step_failed("the quorum's poll", exc)
                self._step_aside()
                await asyncio.sleep(POLL_FAILURE_BACKOFF_S)
                continue
            delay_s = max(0, result.next_deadline_ms - self._clock.time_ms()) / 1000
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(delay_s):
                    await self._wake.wait()

    # -- messages ---------------------------------------------------------------------------------

    def receive(self, request: RaftMessage) -> RaftMessage:
        """Handle a request from another voter (or an observer's fetch) and return the answer."""
        out = self._node.handle(request)
        wanted = _RESPONSE_TO[type(request)]
        answer = next(m for m in out if isinstance(m, wanted) and m.destination == request.source)
        self._send([m for m in out if m is not answer])
        self._after_step()
        return answer

    def _step_failed(self, what: str, exc: Exception) -> None:
        """A full metadata disk is said once per episode, in one line (Raft's timers retry until
        space returns); any other failure with its traceback, each time."""
        if not is_log_dir_full(exc):
            _log.error(f"{what} failed", node_id=self.node_id, exc_info=exc)
            return
        if not self._log_dir_full:
            self._log_dir_full = True
            _log.error(
                "metadata log dir full: this voter cannot write the quorum's log or state until it has space",
                node_id=self.node_id,
                during=what,
                error=str(exc),
            )

    def _step_succeeded(self) -> None:
        if self._log_dir_full:
            self._log_dir_full = False
            _log.info("metadata log dir has space again", node_id=self.node_id)

    def _step_aside(self) -> None:
        with contextlib.suppress(Exception):
            self.resign()

    def _deliver(self, response: RaftMessage) -> None:
        if self._stopped:
            return
        end_before = self._log.end_offset
        try:
            self._send(self._node.handle(response))
            self._after_step()
        except Exception as exc:  # e.g. a follower's append failed: say so, and let Raft's timers retry
            self._step_failed(f"handling a quorum {type(response).__name__}", exc)
            self._step_aside()
            return
        if self._log.end_offset != end_before:  # it wrote: the disk has space again
            self._step_succeeded()

    def _gone(self, node_id: int) -> None:
        if self._stopped:
            return
        self._send(self._node.leader_unreachable(node_id))
        self._after_step()

    def _send(self, messages: Sequence[RaftMessage]) -> None:
        if self._stopped:
            return
        for message in messages:
            self._peers.send(message, self._deliver, self._gone)

    # -- the leader's side --------------------------------------------------------------------------

    def append(self, payloads: Sequence[bytes]) -> tuple[int, int]:
        """Append one batch in this leader's epoch: (its first offset, the log end after it)."""
        first = self._log.end_offset
        end = self._node.append(payloads)
        self._appended_at.append((end, self._clock.time_ms()))
        self._after_step()
        return first, end

    async def wait_committed(self, end_offset: int, epoch: int) -> None:
        """Wait until everything below ``end_offset`` is committed in ``epoch``.

        Raises LeadershipLostError if this node stops leading ``epoch`` first: what it appended may
        then be truncated by the next leader.
        """
        if not self._node.is_leader or self._node.epoch != epoch:
            raise LeadershipLostError(f"node {self.node_id} no longer leads epoch {epoch}")
        if self._node.high_watermark >= end_offset:
            return
        future = asyncio.get_running_loop().create_future()
        self._commit_waiters.append((end_offset, epoch, future))
        await future

    async def wait_for_change(self, timeout_s: float) -> None:
        """Return when anything moves (log end, HW, leader, epoch) or after ``timeout_s``."""
        if self._changed is None or self._changed.done():
            self._changed = asyncio.get_running_loop().create_future()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout_s):
                await asyncio.shield(self._changed)

    # -- after every step -------------------------------------------------------------------------

    def _after_step(self) -> None:
        snapshot = self.snapshot()
        if snapshot == self._last:
            return
        previous, self._last = self._last, snapshot
        if snapshot.high_watermark != previous.high_watermark:
            self._log.note_committed(snapshot.high_watermark)
            self._snapshot_and_clean(snapshot.high_watermark)
        if (previous.kind, previous.epoch, previous.leader_id) != (
            snapshot.kind,
            snapshot.epoch,
            snapshot.leader_id,
        ):
            _log.info(
                "quorum state",
                node_id=self.node_id,
                state=snapshot.kind.value,
                epoch=snapshot.epoch,
                leader_id=snapshot.leader_id,
                log_end_offset=snapshot.log_end_offset,
            )
        self._wake.set()
        if self._changed is not None and not self._changed.done():
            self._changed.set_result(None)
        self._settle_commit_waiters(snapshot)
        self._measure(previous, snapshot)
        for listener in list(self._listeners):
            try:
                listener(snapshot)
            except Exception:
                _log.exception("quorum listener failed")

    def _snapshot_and_clean(self, high_watermark: int) -> None:
        if self._snapshots is None:
            return
        try:
            self._snapshots.on_committed(high_watermark)
            latest = self._log.latest_snapshot_id
            if latest is not None:
                self._snapshots.clean(self._node.cleanable_below(latest[0]))
        except Exception:  # a snapshot is an optimisation: the log stays whole, and we keep serving
            _log.exception("metadata snapshot or cleaning failed", high_watermark=high_watermark)

    def _measure(self, previous: QuorumSnapshot, snapshot: QuorumSnapshot) -> None:
        """Election latency (from leaving a known leader to knowing one again), commit latency
        (from an append to the high watermark passing it), and the state gauges."""
        now = self._clock.time_ms()
        electing = (Kind.PROSPECTIVE, Kind.CANDIDATE)
        if snapshot.kind in electing and previous.kind not in electing and self._election_started_ms is None:
            self._election_started_ms = now
        elif snapshot.kind in (Kind.LEADER, Kind.FOLLOWER) and self._election_started_ms is not None:
            if self._metrics is not None:
                self._metrics.record_election(now - self._election_started_ms)
            self._election_started_ms = None
        while self._appended_at and (
            snapshot.kind is not Kind.LEADER or self._appended_at[0][0] <= snapshot.high_watermark
        ):
            end, at = self._appended_at.popleft()
            if self._metrics is not None and end <= snapshot.high_watermark:
                self._metrics.record_commit(now - at)
        if self._metrics is not None:
            election = self._node.state.election
            self._metrics.update(
                leader_id=snapshot.leader_id,
                epoch=snapshot.epoch,
                state=_state_name(snapshot.kind, self._node.is_voter, election.voted_id),
                voted_id=self.node_id
                if snapshot.kind in (Kind.LEADER, Kind.CANDIDATE)
                else election.voted_id,
                high_watermark=snapshot.high_watermark,
                log_end_offset=snapshot.log_end_offset,
                log_end_epoch=self._log.last_fetched_epoch,
            )

    def _settle_commit_waiters(self, snapshot: QuorumSnapshot) -> None:
        leading = snapshot.kind is Kind.LEADER
        waiting = []
        for end_offset, epoch, future in self._commit_waiters:
            if future.done():
                continue
            if not leading or epoch != snapshot.epoch:
                future.set_exception(
                    LeadershipLostError(f"node {self.node_id} no longer leads epoch {epoch}")
                )
            elif snapshot.high_watermark >= end_offset:
                future.set_result(None)
            else:
                waiting.append((end_offset, epoch, future))
        self._commit_waiters = waiting

    def _fail_commit_waiters(self) -> None:
        for _, epoch, future in self._commit_waiters:
            if not future.done():
                future.set_exception(LeadershipLostError(f"node {self.node_id} stopped in epoch {epoch}"))
        self._commit_waiters = []


def _state_name(kind: Kind, is_voter: bool, voted_id: int | None) -> str:
    """Kafka's name of the state (raft-metrics current-state)."""
    if not is_voter and kind in (Kind.FOLLOWER, Kind.UNATTACHED):
        return "observer"
    if kind is Kind.UNATTACHED and voted_id is not None:
        return "voted"
    return kind.value.lower()


__all__ += ["NotLeaderError"]
