"""Writing transaction markers (COMMIT / ABORT control records) to the partitions of a transaction.

:class:`TransactionMarkerSender` is what the coordinator needs from the broker (Kafka's
``TransactionMarkerChannelManager`` and WriteTxnMarkers): :meth:`~TransactionMarkerSender.write_markers`
resolves once every partition of the request holds the marker or no longer exists (the broker finds
the leaders and retries by itself). It raises :class:`CoordinatorFencedError` when a partition
answered TRANSACTION_COORDINATOR_FENCED: a newer coordinator owns the transactional id, and this one
stops completing the transaction.

:class:`InMemoryMarkerSender` records requests for tests; it can hold them or fail them.
"""

from __future__ import annotations

from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Protocol

from coordinator.transaction.log import FutureFactory, FutureLike


@dataclass(frozen=True, slots=True)
class MarkerRequest:
    """One transaction's markers: ``commit`` says COMMIT or ABORT."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    commit: bool
    partitions: frozenset[tuple[str, int]]


class CoordinatorFencedError(Exception):
    """A partition leader has seen markers from a newer coordinator epoch."""


class TransactionMarkerSender(Protocol):
    def write_markers(self, request: MarkerRequest) -> Awaitable[None]:
        """Resolve once every partition holds the marker (or is gone); raise CoordinatorFencedError
        if this coordinator's epoch is stale."""
        ...


class InMemoryMarkerSender:
    """Records every request in :attr:`requests`. ``fence`` makes requests raise
    :class:`CoordinatorFencedError`; with ``hold`` (and a ``future_factory``) they wait until
    :meth:`release_next` / :meth:`release_all`."""

    def __init__(self, *, future_factory: FutureFactory | None = None) -> None:
        self.requests: list[MarkerRequest] = []
        self.fence = False
        self.hold = False
        self._future_factory = future_factory
        self._held: list[tuple[MarkerRequest, FutureLike]] = []

    async def write_markers(self, request: MarkerRequest) -> None:
        self.requests.append(request)
        if self.hold:
            if self._future_factory is None:
                raise RuntimeError("holding markers needs a future_factory")
            future = self._future_factory()
            self._held.append((request, future))
            fenced = await future
        else:
            fenced = self.fence
        if fenced:
            raise CoordinatorFencedError(f"coordinator epoch {request.coordinator_epoch} is fenced")

    @property
    def held(self) -> int:
        return len(self._held)

    def release_next(self, *, fenced: bool = False) -> MarkerRequest:
        request, future = self._held.pop(0)
        if not future.done():
            future.set_result(fenced)
        return request

    def release_all(self, *, fenced: bool = False) -> None:
        while self._held:
            self.release_next(fenced=fenced)
