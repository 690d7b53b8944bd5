"""The coordinator's only way to ``__transaction_state``: append one record, hear whether it is durable.

:class:`TransactionLog` is what the coordinator needs from the topic. The broker's implementation
appends the record (CREATE_TIME ``timestamp_ms``, no compression, no producer id) to partition
``partition`` of ``__transaction_state`` with acks=-1, as Kafka's ``TransactionStateManager`` does,
and resolves with the append's error: NONE once the record is committed.

Log errors are not what clients get: :func:`transaction_log_error` maps them as Kafka's
``appendTransactionToLog`` does (a timeout is COORDINATOR_NOT_AVAILABLE there, so clients retry).

:class:`InMemoryTransactionLog` is the reference behaviour for tests: appends complete at once, or
are held until the test releases them, and can be made to fail.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator
from dataclasses import dataclass
from typing import Any, Protocol

from protocol.error_codes import ErrorCode


@dataclass(frozen=True, slots=True)
class LoggedRecord:
    """One record of a partition of ``__transaction_state`` (for loading); value None: tombstone."""

    offset: int
    key: bytes
    value: bytes | None


class TransactionLog(Protocol):
    def append(
        self, partition: int, key: bytes, value: bytes | None, timestamp_ms: int
    ) -> Awaitable[ErrorCode]:
        """Append one record to ``__transaction_state-<partition>``; resolves with NONE once it is
        committed, or with the error that stopped it."""
        ...


_COORDINATOR_NOT_AVAILABLE = frozenset(
    {
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.NOT_ENOUGH_REPLICAS,
        ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        ErrorCode.REQUEST_TIMED_OUT,
    }
)
_NOT_COORDINATOR = frozenset({ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.KAFKA_STORAGE_ERROR})
_TOO_LARGE = frozenset({ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE})


def transaction_log_error(error: ErrorCode) -> ErrorCode:
    """What a client is answered when a write to ``__transaction_state`` failed with ``error``."""
    if error in _COORDINATOR_NOT_AVAILABLE:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if error in _NOT_COORDINATOR:
        return ErrorCode.NOT_COORDINATOR
    if error in _TOO_LARGE:
        return ErrorCode.UNKNOWN_SERVER_ERROR
    return error


class FutureLike(Protocol):
    """What a held append waits on: ``asyncio.Future`` fits (``loop.create_future``)."""

    def set_result(self, result: Any, /) -> None: ...

    def done(self) -> bool: ...

    def __await__(self) -> Generator[Any, None, Any]: ...


FutureFactory = Callable[[], FutureLike]


@dataclass(frozen=True, slots=True)
class Append:
    """One append the in-memory log received."""

    partition: int
    key: bytes
    value: bytes | None
    timestamp_ms: int


class InMemoryTransactionLog:
    """A TransactionLog over in-memory lists, one per partition.

    ``fail_with`` makes every append fail with that error (nothing is written). With ``hold`` set,
    appends wait until :meth:`release_next` / :meth:`release_all` resolve them in order; holding needs
    ``future_factory`` (tests pass ``asyncio.get_running_loop().create_future``), since this package
    does not use asyncio itself.
    """

    def __init__(self, *, future_factory: FutureFactory | None = None) -> None:
        self.partitions: dict[int, list[LoggedRecord]] = {}
        self.appends: list[Append] = []
        self.fail_with: ErrorCode | None = None
        self.hold = False
        self._future_factory = future_factory
        self._held: list[tuple[Append, FutureLike]] = []

    async def append(self, partition: int, key: bytes, value: bytes | None, timestamp_ms: int) -> ErrorCode:
        append = Append(partition, key, value, timestamp_ms)
        self.appends.append(append)
        if not self.hold:
            return self._resolve(append, self.fail_with)
        if self._future_factory is None:
            raise RuntimeError("holding appends needs a future_factory")
        future = self._future_factory()
        self._held.append((append, future))
        error: ErrorCode = await future
        return error

    @property
    def held(self) -> int:
        return len(self._held)

    def release_next(self, error: ErrorCode | None = None) -> None:
        """Resolve the oldest held append: written (``error`` None or NONE) or failed."""
        append, future = self._held.pop(0)
        result = self._resolve(append, error)
        if not future.done():
            future.set_result(result)

    def release_all(self, error: ErrorCode | None = None) -> None:
        while self._held:
            self.release_next(error)

    def records(self, partition: int) -> list[LoggedRecord]:
        return list(self.partitions.get(partition, ()))

    def _resolve(self, append: Append, error: ErrorCode | None) -> ErrorCode:
        if error is not None and error is not ErrorCode.NONE:
            return error
        log = self.partitions.setdefault(append.partition, [])
        log.append(LoggedRecord(len(log), append.key, append.value))
        return ErrorCode.NONE
