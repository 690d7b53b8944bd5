"""DelayedProduce: an acks=-1 Produce parked until its records are committed, or its timeout passes.

The Produce handler appends each partition's records on the leader first. Partitions whose append
failed carry that error and are settled already; for the others the records are committed once the
partition's high watermark reaches ``required_offset`` (the last appended offset + 1). If any
partition still waits, the handler parks a :class:`DelayedProduce` in the produce purgatory, keyed by
those partitions, with the request's ``TimeoutMs`` as deadline. Every high-watermark move (and a
leadership loss) calls ``check_and_complete(partition key)``.

Per waiting partition, at each check:

- the broker no longer hosts it: UNKNOWN_TOPIC_OR_PARTITION; its log went offline here:
  KAFKA_STORAGE_ERROR, at once (as Kafka's getPartitionOrError), rather than at the deadline, so
  the producer retries on the next leader without timing the request out; it is no longer the
  leader: NOT_LEADER_OR_FOLLOWER. The records may or may not survive; the producer retries.
- ``high_watermark >= required_offset``: committed. The partition's
  ``acks_all_completion_error()`` then decides: NONE if the maximal ISR (the committed ISR plus an
  expansion in flight) still has at least ``min.insync.replicas`` members, else
  NOT_ENOUGH_REPLICAS_AFTER_APPEND (the records stay in the log). Since Kafka 3.7 the high
  watermark does not advance while the ISR is below min ISR, so a produce caught by an ISR collapse
  mostly ends in REQUEST_TIMED_OUT instead.
- otherwise it keeps waiting.

The produce completes when no partition waits. At the deadline, partitions still waiting answer
REQUEST_TIMED_OUT (the error they carry from the start) and mark the expiry meter. The response
callback runs exactly once with every partition's status, in request order.

The high watermark of a partition with followers moves when a follower's fetch shows it has the
records (:meth:`broker.replication.partition.Partition.update_follower_fetch`); the partition's listeners then
call ``check_and_complete``, so a parked produce completes in the same event-loop tick as that fetch.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from protocol.error_codes import ErrorCode
from server_common.purgatory import DelayedOperation


class ReplicatedPartition(Protocol):
    """What a DelayedProduce needs to know about a partition; the broker's partition implements it."""

    @property
    def is_leader(self) -> bool: ...

    @property
    def is_offline(self) -> bool:
        """Its log failed here (a storage error, a damaged segment): nothing more will commit."""
        ...

    @property
    def high_watermark(self) -> int: ...

    def acks_all_completion_error(self) -> ErrorCode:
        """NONE, or NOT_ENOUGH_REPLICAS_AFTER_APPEND when the maximal ISR (the committed ISR plus
        members of an expansion in flight) is below min(min.insync.replicas, replication factor)."""
        ...


PartitionLookup = Callable[[Hashable], ReplicatedPartition | None]
"""Resolves a status key to the partition this broker hosts now, or None if it hosts none."""


@dataclass(slots=True)
class ProducePartitionStatus:
    """One partition of an acks=-1 produce: what it waits for and what it will answer.

    Pass ``error_code`` NONE for a partition whose append succeeded: it then waits, and answers
    REQUEST_TIMED_OUT unless the high watermark or an error settles it first. Any other
    ``error_code`` (set at append time) is final. ``payload`` is the handler's append result (base
    offset, log append time, log start offset...), carried to the response untouched.
    """

    key: Hashable
    required_offset: int
    error_code: ErrorCode = ErrorCode.NONE
    payload: object = None
    acks_pending: bool = field(init=False)

    def __post_init__(self) -> None:
        self.acks_pending = self.error_code == ErrorCode.NONE
        if self.acks_pending:
            self.error_code = ErrorCode.REQUEST_TIMED_OUT

    def settle(self, error_code: ErrorCode) -> None:
        self.acks_pending = False
        self.error_code = error_code


class DelayedProduce(DelayedOperation):
    """A parked acks=-1 Produce; see the module docstring for when it completes.

    Park it with ``purgatory.try_complete_else_watch(produce, produce.watch_keys)``.
    """

    __slots__ = ("_expiration_meter", "_get_partition", "_pending", "_response_callback", "produce_status")

    def __init__(
        self,
        delay_ms: int,
        produce_status: Sequence[ProducePartitionStatus],
        response_callback: Callable[[Sequence[ProducePartitionStatus]], None],
        *,
        get_partition: PartitionLookup,
        expiration_meter: Callable[[Hashable], None] | None = None,
    ) -> None:
        """``expiration_meter(key)`` runs once per partition still waiting at the deadline."""
        super().__init__(delay_ms)
        self.produce_status = tuple(produce_status)
        self._pending = [status for status in self.produce_status if status.acks_pending]
        self._response_callback = response_callback
        self._get_partition = get_partition
        self._expiration_meter = expiration_meter

    @property
    def watch_keys(self) -> tuple[Hashable, ...]:
        """The purgatory keys: the partitions that wait for their high watermark."""
        return tuple(status.key for status in self._pending)

    def try_complete(self) -> bool:
        if self.is_completed:
            return False
        still_pending = []
        for status in self._pending:
            error = self._check_partition(status)
            if error is None:
                still_pending.append(status)
            else:
                status.settle(error)
        self._pending = still_pending
        return False if still_pending else self.force_complete()

    def _check_partition(self, status: ProducePartitionStatus) -> ErrorCode | None:
        """The partition's final error code, or None while it must keep waiting."""
        partition = self._get_partition(status.key)
        if partition is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        if partition.is_offline:
            return ErrorCode.KAFKA_STORAGE_ERROR
        if not partition.is_leader:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        if partition.high_watermark < status.required_offset:
            return None
        return partition.acks_all_completion_error()

    def on_complete(self) -> None:
        self._response_callback(self.produce_status)

    def on_expiration(self) -> None:
        if self._expiration_meter is not None:
            for status in self._pending:
                self._expiration_meter(status.key)

    def __repr__(self) -> str:
        return (
            f"DelayedProduce(partitions={len(self.produce_status)}, pending={len(self._pending)}, "
            f"delay_ms={self.delay_ms}, completed={self.is_completed})"
        )
