"""Producer ids from the controller, in blocks, fetched ahead (Kafka's RPCProducerIdManager).

In a cluster the controller is the only one who may hand out producer ids: it records each block
in the metadata log before answering AllocateProducerIds, so ids are unique across brokers and
restarts. InitProducerId must not wait on that round trip, so the broker keeps a current block
and asks for the next one in the background once :data:`PREFETCH_FRACTION` of it is used. If no
id is at hand (first use, or the controller is unreachable) the request is answered at once with
:class:`ProducerIdsUnavailableError`, which the handler turns into COORDINATOR_LOAD_IN_PROGRESS:
a retriable error every client retries after its backoff, as against Kafka.

Failed requests are retried no sooner than :data:`RETRY_BACKOFF_S` later (the next InitProducerId
after that triggers one), so a controller outage costs one request per backoff, not one per
producer.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

import structlog

from broker.produce.producer_ids import ProducerIdsUnavailableError
from metadata.producer_id_block import ProducerIdBlock
from protocol.error_codes import ErrorCode

PREFETCH_FRACTION = 0.9
"""Kafka asks for the next block when 90 % of the current one is handed out."""
RETRY_BACKOFF_S = 0.5

AllocateBlock = Callable[[], Awaitable[tuple[ErrorCode, int, int]]]
"""Sends AllocateProducerIds; returns (error, first id, length)."""

_log = structlog.get_logger("kipling.producer_ids")


class ControllerProducerIdManager:
    """Hands out ids from the current block and keeps the next one coming from the controller."""

    def __init__(
        self,
        allocate: AllocateBlock,
        *,
        monotonic: Callable[[], float] = time.monotonic,
        retry_backoff_s: float = RETRY_BACKOFF_S,
    ) -> None:
        self._allocate = allocate
        self._monotonic = monotonic
        self._retry_backoff_s = retry_backoff_s
        self._current: ProducerIdBlock | None = None
        self._next_id = 0
        self._next_block: ProducerIdBlock | None = None
        self._request: asyncio.Task[None] | None = None
        self._retry_after = 0.0

    def generate_producer_id(self) -> int:
        """The next id; raises :class:`ProducerIdsUnavailableError` while no block is at hand."""
        block = self._current
        if block is None or self._next_id >= block.next_block_first_id:
            if self._next_block is None:
                self.prefetch()
                raise ProducerIdsUnavailableError("waiting for a block of producer ids from the controller")
            block, self._next_block = self._next_block, None
            self._current, self._next_id = block, block.first_id
        producer_id = self._next_id
        self._next_id += 1
        if self._next_id - block.first_id >= block.size * PREFETCH_FRACTION:
            self.prefetch()
        return producer_id

    def prefetch(self) -> None:
        """Ask for the next block unless one is at hand, asked for, or the last ask failed just now."""
        if self._next_block is not None or self._request is not None:
            return
        if self._monotonic() < self._retry_after:
            return
        self._request = asyncio.get_running_loop().create_task(self._fetch_block())

    async def close(self) -> None:
        request, self._request = self._request, None
        if request is not None:
            request.cancel()
            await asyncio.gather(request, return_exceptions=True)

    async def _fetch_block(self) -> None:
        try:
            error, first_id, length = await self._allocate()
        except Exception as exc:  # the controller is unreachable: retried after the backoff
            self._failed(str(exc))
            return
        finally:
            self._request = None
        if error != ErrorCode.NONE or length <= 0:
            self._failed(error.name)
            return
        self._next_block = ProducerIdBlock(first_id, length)
        _log.info("producer id block received", first_id=first_id, size=length)

    def _failed(self, reason: str) -> None:
        self._retry_after = self._monotonic() + self._retry_backoff_s
        _log.warning("producer id block request failed", reason=reason)
