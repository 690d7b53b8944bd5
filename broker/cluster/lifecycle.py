"""Registration and heartbeats of one broker with the controller (KRaft's BrokerLifecycleManager).

A broker registers with a fresh incarnation id at every start and gets a broker epoch, which its
follower processes send in their fetches (KIP-903: a leader refuses ISR membership to a replica
whose broker epoch is stale). It then heartbeats every ``broker.heartbeat.interval.ms`` with the
offset of the metadata it has applied; the controller unfences it once that offset reaches its
registration (the broker has seen itself registered, so it knows the current leaders), and fences it
when heartbeats stop for ``broker.session.timeout.ms``, which moves leadership of its partitions to
other in-sync replicas.

On a graceful stop the broker asks for a controlled shutdown (heartbeats with WantShutDown) and
waits, bounded, until the controller has moved its leaderships away: clients then fail over to
new leaders before this broker stops answering, instead of after a session timeout.

Errors: STALE_BROKER_EPOCH or BROKER_ID_NOT_REGISTERED in a heartbeat mean the controller does not
know this registration (its log was replaced): the broker registers again. A controller that
cannot be reached is retried every heartbeat interval; the broker keeps serving meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Callable, Sequence

import structlog

from broker.cluster.background import BackgroundTask
from broker.cluster.controller_channel import BrokerListener, ControllerChannel, ControllerUnavailableError
from protocol.error_codes import ErrorCode

__all__ = ["BrokerLifecycleManager"]

NO_EPOCH = -1
REGISTRATION_BACKOFF_S = 0.5
_REREGISTER = frozenset((ErrorCode.STALE_BROKER_EPOCH, ErrorCode.BROKER_ID_NOT_REGISTERED))

_log = structlog.get_logger("kipling.lifecycle")


HEARTBEAT_RETRY_BACKOFF_S = 0.1
"""First retry of a heartbeat that did not reach the controller (then doubling up to the interval)."""
HEARTBEAT_RETRY_BACKOFF_MAX_S = 0.5
"""A failed heartbeat is retried at least this often: while the quorum elects a new controller a
broker keeps knocking, so it reaches the new one well within the grace it gets (an interval)."""


class BrokerLifecycleManager:
    """Registers this broker, keeps its session alive, and runs the controlled shutdown."""

    def __init__(
        self,
        channel: ControllerChannel,
        *,
        broker_id: int,
        cluster_id: str,
        listeners: Callable[[], Sequence[BrokerListener]],
        rack: str | None,
        heartbeat_interval_ms: int,
        metadata_offset: Callable[[], int],
        on_epoch: Callable[[int], None] = lambda epoch: None,
    ) -> None:
        self._channel = channel
        self._broker_id = broker_id
        self._cluster_id = cluster_id
        self._listeners = listeners
        self._rack = rack
        self._interval_s = heartbeat_interval_ms / 1000
        self._metadata_offset = metadata_offset
        self._on_epoch = on_epoch
        self.incarnation_id = uuid.uuid4()
        self.broker_epoch = NO_EPOCH
        self.is_fenced = True
        self._registered = asyncio.Event()
        self._unfenced = asyncio.Event()
        self._task = BackgroundTask("broker-lifecycle", self._run)
        self._want_shut_down = False
        self._wake = asyncio.Event()
        self._logger = _log.bind(broker_id=broker_id)

    async def wait_registered(self) -> int:
        await self._registered.wait()
        return self.broker_epoch

    async def wait_unfenced(self) -> None:
        await self._unfenced.wait()

    def start(self) -> None:
        self._task.start()

    async def stop(self) -> None:
        await self._task.stop()

    async def controlled_shutdown(self, timeout_s: float) -> bool:
        """Ask the controller to move leadership away; True once it says this broker may stop."""
        if self.broker_epoch == NO_EPOCH:
            return True
        self._want_shut_down = True
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while loop.time() < deadline:
            try:
                reply = await self._channel.heartbeat(
                    broker_id=self._broker_id,
                    broker_epoch=self.broker_epoch,
                    current_metadata_offset=self._metadata_offset(),
                    want_fence=False,
                    want_shut_down=True,
                    timeout_s=max(deadline - loop.time(), 0.1),
                )
            except ControllerUnavailableError:
                return False
            if reply.error == ErrorCode.NONE and reply.should_shut_down:
                self._logger.info("controlled shutdown granted")
                return True
            await asyncio.sleep(min(0.1, max(deadline - loop.time(), 0)))
        self._logger.warning("controlled shutdown not granted in time", timeout_s=timeout_s)
        return False

    # -- loop --------------------------------------------------------------------------------------

    async def _run(self) -> None:
        await self._register()
        failures = 0 if await self._heartbeat() else 1
        while True:
            wait_s = self._retry_wait_s(failures)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(wait_s):
                    await self._wake.wait()
            self._wake.clear()
            if self._want_shut_down:
                continue
            # A heartbeat that did not get through is retried soon (its connection broke: the
            # controller gives this broker only a short grace then), backing off to the interval.
            failures = 0 if await self._heartbeat() else failures + 1

    def _retry_wait_s(self, failures: int) -> float:
        """The interval, or after ``failures`` failed heartbeats a backoff doubling up to it."""
        if failures == 0:
            return self._interval_s
        backoff_s: float = HEARTBEAT_RETRY_BACKOFF_S * 2.0 ** min(failures - 1, 16)
        return min(backoff_s, HEARTBEAT_RETRY_BACKOFF_MAX_S, self._interval_s)

    def nudge(self) -> None:
        """Heartbeat now rather than at the next interval (the metadata just caught up with this
        broker's registration: the controller can unfence it at once)."""
        self._wake.set()

    async def _register(self) -> None:
        previous = self.broker_epoch
        while True:
            try:
                error, epoch = await self._channel.register(
                    broker_id=self._broker_id,
                    cluster_id=self._cluster_id,
                    incarnation_id=self.incarnation_id,
                    listeners=self._listeners(),
                    rack=self._rack,
                    previous_broker_epoch=previous,
                )
            except ControllerUnavailableError as exc:
                self._logger.warning("cannot reach the controller to register", error=str(exc))
                await asyncio.sleep(REGISTRATION_BACKOFF_S)
                continue
            if error == ErrorCode.NONE:
                break
            self._logger.warning("registration refused", error=error.name)
            await asyncio.sleep(REGISTRATION_BACKOFF_S)
        self.broker_epoch = epoch
        self._logger.info("registered with the controller", broker_epoch=epoch)
        self._on_epoch(epoch)
        self._registered.set()

    async def _heartbeat(self) -> bool:
        """One heartbeat; False if it did not reach the controller."""
        try:
            reply = await self._channel.heartbeat(
                broker_id=self._broker_id,
                broker_epoch=self.broker_epoch,
                current_metadata_offset=self._metadata_offset(),
                want_fence=False,
                want_shut_down=False,
                # one interval: a heartbeat stuck on a paused (deposed) controller must give way
                # to the next try in time for the new controller's grace
                timeout_s=max(self._interval_s, 0.5),
            )
        except ControllerUnavailableError as exc:
            self._logger.warning("heartbeat failed", error=str(exc))
            return False
        if reply.error in _REREGISTER:
            self._logger.warning(
                "the controller lost this registration; registering again", error=reply.error.name
            )
            self._unfenced.clear()
            self.is_fenced = True
            await self._register()  # the next heartbeat comes at the next interval, never nested
            return True
        if reply.error != ErrorCode.NONE:
            self._logger.warning("heartbeat refused", error=reply.error.name)
            return True
        if reply.is_fenced != self.is_fenced:
            self._logger.info("fencing state changed", fenced=reply.is_fenced)
        self.is_fenced = reply.is_fenced
        if reply.is_fenced:
            self._unfenced.clear()
        else:
            self._unfenced.set()
        return True
