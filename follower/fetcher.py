"""One fetcher per source broker: truncate diverged partitions, fetch, append (kafka-behaviour.md 5).

:class:`ReplicaFetcher` is Kafka's AbstractFetcherThread as an asyncio task. Each round
(:meth:`ReplicaFetcher.do_work`) first truncates the partitions in state TRUNCATING
(OffsetForLeaderEpoch, or the high watermark when the leader cannot say), then sends one Fetch for
the partitions ready for it and handles each partition of the response on its own:

- NONE: append as follower (the fetch offset must be the log end offset), follow the leader's high
  watermark and log start offset. A DivergingEpoch instead truncates, and nothing else is applied
  from that response. A partition that received data moves to the end of the fetch order.
- OFFSET_OUT_OF_RANGE: ask the leader for its log end (and start) and reset (truncation.py).
- FENCED_LEADER_EPOCH: this replica's epoch is stale; the partition fails until it is re-added with
  new metadata.
- anything else (UNKNOWN_LEADER_EPOCH, NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION,
  KAFKA_STORAGE_ERROR, CORRUPT_MESSAGE, ...): transient, so the partition is delayed by
  replica.fetch.backoff.ms and retried.

A corrupt batch found while appending delays the partition, and so does a full disk (the append
was undone whole: the same fetch is retried after the backoff, and the replica falls out of the ISR
as its lag grows, as in Kafka); any other append or truncation failure (an unexpected offset, a
storage error) fails only that partition: it leaves the fetcher and joins the failed set, and the
others keep going. Responses that no longer match a partition's state (it
was removed, re-added with another epoch, or moved on) are ignored.

Everything the fetcher touches is passed in: the leader endpoint, the logs, a clock for backoff
deadlines and the metrics. Partitions are added and removed from the same event loop (the
follower's IPC with its broker); since a round awaits the leader, every result is checked against
the partition's state as it is after the await.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import replace

import structlog

from client.replication_quota import ReplicationQuota
from follower.fetch_state import (
    InitialFetchState,
    LeaderEpoch,
    PartitionFetchState,
    ReplicaState,
    TopicPartition,
    fetching,
    truncating,
)
from follower.leader_endpoint import (
    EpochEndOffset,
    FetchPartitionData,
    FetchPartitionParams,
    FollowerFetchRequest,
    LeaderEndpoint,
)
from follower.metrics import FetcherStats
from follower.partition_states import PartitionStates
from follower.replica_log import ReplicaLog
from follower.truncation import (
    OffsetTruncationState,
    needs_leader_start,
    out_of_range_reset,
    truncation_offset,
)
from protocol.error_codes import ErrorCode, KafkaError
from protocol.errors import DecodeError
from storage.clock import Clock
from storage.errors import InvalidRecordError, LogDirFullError

_log = structlog.get_logger(__name__)

DEFAULT_BACKOFF_MS = 1000
"""replica.fetch.backoff.ms"""

_RETRY_QUIETLY = frozenset({ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.UNKNOWN_LEADER_EPOCH})
"""Errors expected around every leadership change; logged at info, the others at warning."""

BeforeTruncate = Callable[[TopicPartition, int], Awaitable[None]]
"""Awaited before a partition's log is cut at an offset (the read fence, follower/read_offsets.py)."""
AfterRound = Callable[[set[TopicPartition]], Awaitable[None]]
"""Awaited after each round with the partitions it touched (their offsets may have moved)."""


class FetcherStateError(Exception):
    """The leader or the local log contradicts the fetcher's state (Kafka's IllegalStateException)."""


class ReplicaFetcher:
    """Replicates the partitions this broker follows whose leader is one source broker."""

    def __init__(
        self,
        name: str,
        leader: LeaderEndpoint,
        logs: Mapping[TopicPartition, ReplicaLog],
        clock: Clock,
        stats: FetcherStats,
        *,
        backoff_ms: int = DEFAULT_BACKOFF_MS,
        on_failed: Callable[[TopicPartition, str], None] | None = None,
        quota: ReplicationQuota | None = None,
        before_truncate: BeforeTruncate | None = None,
        after_round: AfterRound | None = None,
    ) -> None:
        """``name`` is the client id (Kafka's ``ReplicaFetcherThread-<fetcherId>-<sourceBrokerId>``).

        ``logs`` must hold the log of every partition before it is added; ``clock`` (monotonic in
        production, see fetch_state.MonotonicClock) times the backoff deadlines. ``on_failed`` is
        told (partition, reason) when a partition is marked failed, so that the owner of the
        fetcher can report it (the follower process tells its broker).
        ``quota`` is the follower side of the replication quota (KIP-73): while it is exceeded, the
        partitions it throttles that are not in sync are left out of the fetch (Kafka's
        ``shouldFollowerThrottle``), and the bytes appended to throttled partitions count against it.
        ``before_truncate(tp, offset)`` is awaited before a log is cut; a partition whose state
        changed meanwhile (removed, re-added) is not cut. ``after_round(touched)`` is awaited after
        each round with the partitions whose logs it appended to, truncated or reset, or whose high
        watermark or log start offset it moved.
        """
        self.name = name
        self._leader = leader
        self._logs = logs
        self._clock = clock
        self._stats = stats
        self._backoff_ms = backoff_ms
        self._on_failed = on_failed
        self._quota = quota
        self._before_truncate = before_truncate
        self._after_round = after_round
        self._touched: set[TopicPartition] = set()
        self._left_out: frozenset[TopicPartition] = frozenset()
        """The partitions the last request left out for the follower quota."""
        self._partitions = PartitionStates()
        self._failed: set[TopicPartition] = set()
        self._out_of_space: set[TopicPartition] = set()
        """Partitions whose last append found the disk full: logged once per episode, not per retry."""
        self._partitions_changed = asyncio.Event()
        self._stop_event: asyncio.Event | None = None
        self._logger = _log.bind(fetcher=name)

    # -- partitions ----------------------------------------------------------------------------------

    def add_partitions(self, initial_states: Mapping[TopicPartition, InitialFetchState]) -> None:
        """Start (or keep) fetching these partitions; clears their failed mark.

        A partition already here with the same leader epoch keeps its state, so re-adding it does
        not truncate again. Otherwise it starts FETCHING from ``init_offset`` with the local latest
        epoch when the leader detects divergence on fetch and the log has epochs, else TRUNCATING.
        """
        for tp, initial in initial_states.items():
            if initial.init_offset < 0:
                raise ValueError(f"{tp}: initial fetch offset {initial.init_offset} is negative")
            if tp not in self._logs:
                raise KeyError(f"{tp}: no local log; open it before adding the partition")
            self._failed.discard(tp)
            current = self._partitions.get(tp)
            if current is not None and current.current_leader_epoch == initial.current_leader_epoch:
                state = current
            else:
                state = self._initial_state(tp, initial)
            self._set_state(tp, state, move_to_end=True)
            self._logger.info("partition added", topic=tp[0], partition=tp[1], state=state)
        self._stats.set_failed_partitions(len(self._failed))
        self._partitions_changed.set()

    def remove_partitions(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, PartitionFetchState]:
        """Stop fetching ``tps`` (and forget that they failed); returns the states they had."""
        removed = {}
        for tp in tps:
            self._failed.discard(tp)
            self._out_of_space.discard(tp)
            self._stats.remove_partition(tp)
            state = self._partitions.remove(tp)
            if state is not None:
                removed[tp] = state
        self._stats.set_failed_partitions(len(self._failed))
        self._partitions_changed.set()
        return removed

    def fetch_state(self, tp: TopicPartition) -> PartitionFetchState | None:
        return self._partitions.get(tp)

    @property
    def partitions(self) -> frozenset[TopicPartition]:
        return frozenset(tp for tp, _ in self._partitions.items())

    @property
    def partition_count(self) -> int:
        return len(self._partitions)

    @property
    def failed_partitions(self) -> frozenset[TopicPartition]:
        """Partitions that hit an unrecoverable error; they stay out until re-added."""
        return frozenset(self._failed)

    # -- the loop ------------------------------------------------------------------------------------

    async def run(self, stop_event: asyncio.Event) -> None:
        """Repeat :meth:`do_work` until ``stop_event`` is set.

        A round in flight finishes first (cancel the task to stop at once). An unexpected error
        is logged and followed by the backoff, instead of killing the fetcher as in Kafka.
        """
        self._stop_event = stop_event
        watcher = asyncio.create_task(self._wake_on(stop_event))
        try:
            while not stop_event.is_set():
                try:
                    await self.do_work()
                except Exception:
                    self._logger.exception("fetcher round failed")
                    self._partitions_changed.clear()  # back off in full, however the round ended
                    await self._wait_for_changes()
        finally:
            watcher.cancel()
            self._stop_event = None

    async def do_work(self) -> None:
        """One round: truncate where needed, then fetch and append; then report what it touched."""
        try:
            await self.maybe_truncate()
            await self.maybe_fetch()
        finally:
            if self._touched and self._after_round is not None:
                touched, self._touched = self._touched, set()
                await self._after_round(touched)

    async def _wake_on(self, stop_event: asyncio.Event) -> None:
        await stop_event.wait()
        self._partitions_changed.set()

    async def _wait_for_changes(self) -> None:
        """Back off for replica.fetch.backoff.ms, or less if partitions are added or removed meanwhile."""
        if self._stop_event is not None and self._stop_event.is_set():
            return
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self._backoff_ms / 1000):
                await self._partitions_changed.wait()

    # -- truncation ------------------------------------------------------------------------------------

    async def maybe_truncate(self) -> None:
        """Truncate every TRUNCATING partition that is not delayed (kafka-behaviour.md 5.4)."""
        self._expire_delays()
        with_epochs: dict[TopicPartition, tuple[LeaderEpoch, LeaderEpoch]] = {}
        for tp in self._partitions.truncating(self._clock.time_ms()):
            state = self._partitions.get(tp)
            assert state is not None
            log = self._logs.get(tp)
            if log is None:
                self._mark_failed(tp, "no local log")
                continue
            latest = log.latest_epoch
            if self._leader.supports_offset_for_leader_epoch and latest is not None:
                with_epochs[tp] = (state.current_leader_epoch, latest)
            else:
                await self._apply_truncation(tp, state, OffsetTruncationState(state.fetch_offset, True))
        if with_epochs:
            await self._truncate_to_epoch_end_offsets(with_epochs)

    async def _truncate_to_epoch_end_offsets(
        self, requested: dict[TopicPartition, tuple[LeaderEpoch, LeaderEpoch]]
    ) -> None:
        try:
            results = await self._leader.fetch_epoch_end_offsets(requested)
        except Exception as exc:
            self._logger.warning("OffsetForLeaderEpoch failed", error=repr(exc), partitions=len(requested))
            self._delay(requested)
            return
        unexpected = results.keys() - requested.keys()
        if unexpected:
            raise FetcherStateError(
                f"OffsetForLeaderEpoch answered unrequested partitions {sorted(unexpected)}"
            )
        now = self._clock.time_ms()
        errors = []
        for tp, (request_epoch, _) in requested.items():
            state = self._partitions.get(tp)
            if state is None or state.current_leader_epoch != request_epoch or not state.is_truncating(now):
                continue  # removed or re-added while the request was in flight: its result is stale
            result = results.get(tp)
            if result is not None and result.error is ErrorCode.NONE:
                await self._truncate_to(tp, state, result)
            elif result is not None and result.error is ErrorCode.FENCED_LEADER_EPOCH:
                if not self._on_partition_fenced(tp, request_epoch):
                    errors.append(tp)
            else:
                self._log_partition_error(tp, "OffsetForLeaderEpoch", result.error if result else None)
                errors.append(tp)
        self._delay(errors)

    async def _truncate_to(
        self, tp: TopicPartition, state: PartitionFetchState, leader: EpochEndOffset
    ) -> None:
        log = self._logs.get(tp)
        if log is None:
            self._mark_failed(tp, "no local log")
            return
        await self._apply_truncation(tp, state, truncation_offset(leader, state.fetch_offset, log))

    async def _fenced(self, tp: TopicPartition, state: PartitionFetchState, offset: int) -> bool:
        """Await ``before_truncate``; False when the partition's state changed meanwhile (its log may
        be someone else's now): the truncation must not happen."""
        if self._before_truncate is None:
            return True
        log = self._logs.get(tp)
        await self._before_truncate(tp, offset)
        return self._partitions.get(tp) is state and self._logs.get(tp) is log

    async def _apply_truncation(
        self, tp: TopicPartition, state: PartitionFetchState, truncation: OffsetTruncationState
    ) -> None:
        """Cut the log and fetch on from its new end, or truncate again if not complete (5.4)."""
        if not await self._fenced(tp, state, truncation.offset):
            return
        log = self._logs.get(tp)
        self._touched.add(tp)
        try:
            if log is None:
                raise FetcherStateError("no local log")
            end = log.truncate_to(truncation.offset)
        except Exception as exc:
            self._mark_failed(tp, f"truncation to {truncation.offset} failed: {exc!r}")
            return
        done = truncation.truncation_completed or self._leader.supports_truncation_on_fetch
        new_state = PartitionFetchState(
            end,
            state.current_leader_epoch,
            ReplicaState.FETCHING if done else ReplicaState.TRUNCATING,
            lag=state.lag,
            last_fetched_epoch=log.latest_epoch,
            topic_id=state.topic_id,
        )
        self._set_state(tp, new_state)

    # -- fetch -----------------------------------------------------------------------------------------

    async def maybe_fetch(self) -> None:
        """Send one Fetch for the ready partitions and handle the response; back off if there is none."""
        self._expire_delays()
        self._partitions_changed.clear()
        request = self._build_fetch()
        if request is None:
            await self._wait_for_changes()
            return
        await self._process_fetch_request(request)

    def _build_fetch(self) -> FollowerFetchRequest | None:
        changed = self._partitions.take_changed()
        ready: Mapping[TopicPartition, FetchPartitionParams] = self._partitions.ready
        left_out = self._throttled_out(ready)
        if left_out or self._left_out:
            # a partition leaving or rejoining the fetch is a change of the fetch session
            changed = changed | left_out | self._left_out
            ready = {tp: params for tp, params in ready.items() if tp not in left_out}
        try:
            request = self._leader.build_fetch(ready, changed)
        except Exception:
            for tp in changed:  # the endpoint saw none of them: offer them again next time
                self._partitions.mark_changed(tp)
            raise
        self._left_out = left_out
        return request

    def _throttled_out(
        self, ready: Mapping[TopicPartition, FetchPartitionParams]
    ) -> frozenset[TopicPartition]:
        """Kafka's shouldFollowerThrottle: the throttled partitions not in sync, while over quota."""
        quota = self._quota
        if quota is None or not quota.throttled or not quota.is_quota_exceeded():
            return frozenset()
        out = set()
        for tp in ready:
            state = self._partitions.get(tp)
            in_sync = state is not None and state.lag is not None and state.lag <= 0
            if not in_sync and quota.is_throttled(*tp):
                out.add(tp)
        return frozenset(out)

    async def _process_fetch_request(self, request: FollowerFetchRequest) -> None:
        loop = asyncio.get_running_loop()
        started = loop.time()
        try:
            responses = await self._leader.fetch(request)
        except Exception as exc:
            self._stats.request_failed(loop.time() - started)
            if self._stop_event is None or not self._stop_event.is_set():
                self._logger.warning("fetch failed", error=repr(exc), partitions=len(request.partitions))
            self._delay(request.partitions)
            return
        self._stats.request_completed(loop.time() - started, sum(len(d.records) for d in responses.values()))
        divergent: dict[TopicPartition, tuple[PartitionFetchState, EpochEndOffset]] = {}
        errors: list[TopicPartition] = []
        for tp, data in responses.items():
            state = self._partitions.get(tp)
            params = request.partitions.get(tp)
            if state is None or params is None or not self._answers_current_state(state, params):
                continue
            if not await self._handle_partition(tp, state, params, data, divergent):
                errors.append(tp)
        await self._truncate_on_fetch_response(divergent)
        self._delay(errors)

    def _answers_current_state(self, state: PartitionFetchState, params: FetchPartitionParams) -> bool:
        """The response was asked for by the partition's present state (not a stale one)."""
        return (
            state.fetch_offset == params.fetch_offset
            and state.current_leader_epoch == params.current_leader_epoch
            and state.is_ready_for_fetch(self._clock.time_ms())
        )

    async def _handle_partition(
        self,
        tp: TopicPartition,
        state: PartitionFetchState,
        params: FetchPartitionParams,
        data: FetchPartitionData,
        divergent: dict[TopicPartition, tuple[PartitionFetchState, EpochEndOffset]],
    ) -> bool:
        """Apply one partition of a response (5.3); False when it must be delayed."""
        error = data.error
        if error is ErrorCode.NONE:
            if data.diverging_epoch is not None and self._leader.supports_truncation_on_fetch:
                divergent[tp] = (state, data.diverging_epoch)
                return True
            return self._process_partition_data(tp, state, params, data)
        if error is ErrorCode.OFFSET_OUT_OF_RANGE:
            return await self._handle_out_of_range(tp, state)
        if error is ErrorCode.FENCED_LEADER_EPOCH:
            return self._on_partition_fenced(tp, params.current_leader_epoch)
        self._log_partition_error(tp, "Fetch", error)
        return False

    def _process_partition_data(
        self,
        tp: TopicPartition,
        state: PartitionFetchState,
        params: FetchPartitionParams,
        data: FetchPartitionData,
    ) -> bool:
        """Append, then follow the leader's HW and log start offset; False if the batches were corrupt."""
        log = self._logs.get(tp)
        try:
            if log is None:
                raise FetcherStateError("no local log")
            if log.log_end_offset != params.fetch_offset:
                raise FetcherStateError(
                    f"fetched offset {params.fetch_offset} is not the log end offset {log.log_end_offset}"
                )
            end = log.append_as_follower(data.records)
            log.update_high_watermark(data.high_watermark)
            log.maybe_increment_log_start_offset(data.log_start_offset)
        except (DecodeError, InvalidRecordError) as exc:
            self._logger.warning(
                "corrupt batches from the leader", topic=tp[0], partition=tp[1], error=repr(exc)
            )
            return False
        except LogDirFullError as exc:
            if tp not in self._out_of_space:
                self._out_of_space.add(tp)
                self._logger.warning(
                    "no space left for the leader's batches; retrying after backoff until space returns",
                    topic=tp[0],
                    partition=tp[1],
                    error=str(exc),
                )
            return False
        except Exception as exc:
            self._mark_failed(tp, f"append failed: {exc!r}")
            return True
        appended = end != params.fetch_offset
        self._touched.add(tp)
        if appended and self._quota is not None and self._quota.is_throttled(*tp):
            self._quota.record(len(data.records))
        if appended and tp in self._out_of_space:
            self._out_of_space.discard(tp)
            self._logger.info(
                "space returned: appending the leader's batches again", topic=tp[0], partition=tp[1]
            )
        lag = max(0, data.high_watermark - end)
        new_state = replace(
            state,
            fetch_offset=end,
            lag=lag,
            last_fetched_epoch=log.latest_epoch if appended else state.last_fetched_epoch,
        )
        self._set_state(tp, new_state, move_to_end=appended)
        self._stats.set_lag(tp, lag)
        return True

    async def _handle_out_of_range(self, tp: TopicPartition, state: PartitionFetchState) -> bool:
        """OFFSET_OUT_OF_RANGE: reset from the leader's log end and start (5.5); False to retry later."""
        try:
            new_state = await self._fetch_offset_and_truncate(tp, state)
        except KafkaError as exc:
            if exc.code is ErrorCode.FENCED_LEADER_EPOCH:
                return self._on_partition_fenced(tp, state.current_leader_epoch)
            self._log_partition_error(tp, "ListOffsets", exc.code)
            return False
        except Exception as exc:
            self._logger.warning("out of range reset failed", topic=tp[0], partition=tp[1], error=repr(exc))
            return False
        if new_state is not None:
            self._set_state(tp, new_state, move_to_end=True)
            self._stats.set_lag(tp, new_state.lag or 0)
        return True

    async def _fetch_offset_and_truncate(
        self, tp: TopicPartition, state: PartitionFetchState
    ) -> PartitionFetchState | None:
        """Kafka's fetchOffsetAndTruncate; None if the partition's state changed while asking the leader."""
        epoch = state.current_leader_epoch
        leader_end = (await self._leader.fetch_latest_offset(tp, epoch)).offset
        log = self._logs[tp]
        leader_start = None
        if needs_leader_start(log.log_end_offset, leader_end):
            leader_start = (await self._leader.fetch_earliest_offset(tp, epoch)).offset
        if self._partitions.get(tp) is not state:
            return None
        decision = out_of_range_reset(log.log_end_offset, leader_end, leader_start)
        if decision.truncate_to is not None and not await self._fenced(tp, state, decision.truncate_to):
            return None
        self._logger.warning(
            "fetch offset out of range at the leader",
            topic=tp[0],
            partition=tp[1],
            log_end_offset=log.log_end_offset,
            leader_start=leader_start,
            leader_end=leader_end,
            decision=decision,
        )
        self._touched.add(tp)
        if decision.truncate_to is not None:
            log.truncate_to(decision.truncate_to)
        if decision.start_at is not None:
            log.truncate_fully_and_start_at(decision.start_at)
        return fetching(
            log.log_end_offset,
            epoch,
            lag=decision.lag,
            last_fetched_epoch=log.latest_epoch,
            topic_id=state.topic_id,
        )

    async def _truncate_on_fetch_response(
        self, divergent: dict[TopicPartition, tuple[PartitionFetchState, EpochEndOffset]]
    ) -> None:
        """Truncate the partitions whose response carried a DivergingEpoch, unless they changed since."""
        for tp, (state, diverging_epoch) in divergent.items():
            if self._partitions.get(tp) is not state:
                continue
            self._logger.info(
                "log diverges from the leader's",
                topic=tp[0],
                partition=tp[1],
                epoch=diverging_epoch.leader_epoch,
                end_offset=diverging_epoch.end_offset,
            )
            await self._truncate_to(tp, state, diverging_epoch)

    # -- state changes ---------------------------------------------------------------------------------

    def _initial_state(self, tp: TopicPartition, initial: InitialFetchState) -> PartitionFetchState:
        latest = self._logs[tp].latest_epoch if self._leader.supports_truncation_on_fetch else None
        make = truncating if latest is None else fetching
        return make(
            initial.init_offset,
            initial.current_leader_epoch,
            last_fetched_epoch=latest,
            topic_id=initial.topic_id,
        )

    def _set_state(self, tp: TopicPartition, state: PartitionFetchState, move_to_end: bool = False) -> None:
        """Store ``state`` with its request fields if it is ready; delay it if the log cannot give them."""
        now = self._clock.time_ms()
        params = None
        if state.is_ready_for_fetch(now):
            log = self._logs.get(tp)
            if log is None:
                state, move_to_end = state.delayed(now + self._backoff_ms), True
            else:
                params = FetchPartitionParams(
                    state.fetch_offset,
                    log.log_start_offset,
                    state.current_leader_epoch,
                    state.last_fetched_epoch if self._leader.supports_truncation_on_fetch else None,
                    state.topic_id,
                )
        self._partitions.update(tp, state, params, move_to_end)

    def _delay(self, tps: Iterable[TopicPartition]) -> None:
        """Hold ``tps`` back for the backoff; a partition already delayed keeps its deadline (5.3)."""
        now = self._clock.time_ms()
        for tp in tps:
            state = self._partitions.get(tp)
            if state is not None and not state.is_delayed(now):
                self._set_state(tp, state.delayed(now + self._backoff_ms), move_to_end=True)

    def _expire_delays(self) -> None:
        for tp in self._partitions.expired_delays(self._clock.time_ms()):
            state = self._partitions.get(tp)
            assert state is not None
            self._set_state(tp, state.undelayed())

    def _on_partition_fenced(self, tp: TopicPartition, request_epoch: int) -> bool:
        """FENCED_LEADER_EPOCH: fail the partition if our epoch is still the one fenced; True if so."""
        state = self._partitions.get(tp)
        if state is None or state.current_leader_epoch != request_epoch:
            return False
        self._mark_failed(tp, f"leader epoch {request_epoch} is fenced; waiting for new metadata")
        return True

    def _mark_failed(self, tp: TopicPartition, reason: str) -> None:
        self._partitions.remove(tp)
        self._stats.remove_partition(tp)
        self._failed.add(tp)
        self._stats.set_failed_partitions(len(self._failed))
        self._logger.error("partition marked as failed", topic=tp[0], partition=tp[1], reason=reason)
        if self._on_failed is not None:
            self._on_failed(tp, reason)

    def _log_partition_error(self, tp: TopicPartition, api: str, error: ErrorCode | None) -> None:
        log = self._logger.info if error in _RETRY_QUIETLY else self._logger.warning
        log(
            "partition error; retrying after backoff",
            api=api,
            topic=tp[0],
            partition=tp[1],
            error=error.name if error is not None else "no result",
            backoff_ms=self._backoff_ms,
        )


__all__ = ["DEFAULT_BACKOFF_MS", "FetcherStateError", "ReplicaFetcher"]
