"""DelayedDeleteRecords: a DeleteRecords parked until its partitions' low watermarks reach the offsets
asked for, or its timeout passes (Kafka's DelayedDeleteRecords).

The handler first moves each partition's log start offset on the leader
(:meth:`broker.replication.partition.Partition.delete_records`). A partition whose low watermark (the
lowest log start offset among the leader and the followers on live brokers) is already at the offset
asked for, or that failed, is settled. If one still waits, the handler parks this operation in the
DeleteRecords purgatory keyed by its partitions. The followers learn the new log start offset from
their fetch responses, raise theirs, and report it in their next fetch; the partition then tells its
listeners, which call ``check_and_complete(partition key)``.

Per waiting partition, at each check: no longer hosted here: UNKNOWN_TOPIC_OR_PARTITION; offline:
KAFKA_STORAGE_ERROR; no longer the leader: NOT_LEADER_OR_FOLLOWER (low watermark -1); low watermark
reached: NONE with it. At the deadline the partitions still waiting answer REQUEST_TIMED_OUT with the
low watermark they had when the records were deleted.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from protocol.error_codes import ErrorCode
from server_common.purgatory import DelayedOperation

INVALID_LOW_WATERMARK = -1


class LowWatermarkPartition(Protocol):
    @property
    def is_leader(self) -> bool: ...

    @property
    def is_offline(self) -> bool: ...

    @property
    def low_watermark(self) -> int: ...


@dataclass(slots=True)
class DeleteRecordsPartitionStatus:
    """One partition of a DeleteRecords: the offset it waits for and what it will answer.

    ``error_code`` NONE means the leader moved its log start offset: it waits until the low
    watermark reaches ``required_offset`` and answers REQUEST_TIMED_OUT if it never does.
    """

    key: tuple[str, int]
    required_offset: int
    low_watermark: int
    error_code: ErrorCode = ErrorCode.NONE
    pending: bool = field(init=False)

    def __post_init__(self) -> None:
        self.pending = self.error_code is ErrorCode.NONE and self.low_watermark < self.required_offset
        if self.pending:
            self.error_code = ErrorCode.REQUEST_TIMED_OUT


class DelayedDeleteRecords(DelayedOperation):
    """Park with ``purgatory.try_complete_else_watch(op, op.watch_keys)``."""

    __slots__ = ("_get_partition", "_pending", "_response_callback", "statuses")

    def __init__(
        self,
        delay_ms: int,
        statuses: Sequence[DeleteRecordsPartitionStatus],
        response_callback: Callable[[Sequence[DeleteRecordsPartitionStatus]], None],
        *,
        get_partition: Callable[[Hashable], LowWatermarkPartition | None],
    ) -> None:
        super().__init__(delay_ms)
        self.statuses = tuple(statuses)
        self._pending = [status for status in self.statuses if status.pending]
        self._response_callback = response_callback
        self._get_partition = get_partition

    @property
    def watch_keys(self) -> tuple[Hashable, ...]:
        return tuple(status.key for status in self._pending)

    def try_complete(self) -> bool:
        if self.is_completed:
            return False
        still_pending = []
        for status in self._pending:
            partition = self._get_partition(status.key)
            if partition is None:
                error, low = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, INVALID_LOW_WATERMARK
            elif partition.is_offline:
                error, low = ErrorCode.KAFKA_STORAGE_ERROR, INVALID_LOW_WATERMARK
            elif not partition.is_leader:
                error, low = ErrorCode.NOT_LEADER_OR_FOLLOWER, INVALID_LOW_WATERMARK
            else:
                low = partition.low_watermark
                if low < status.required_offset:
                    still_pending.append(status)
                    continue
                error = ErrorCode.NONE
            status.pending = False
            status.error_code = error
            status.low_watermark = low
        self._pending = still_pending
        return False if still_pending else self.force_complete()

    def on_complete(self) -> None:
        self._response_callback(self.statuses)

    def __repr__(self) -> str:
        return f"DelayedDeleteRecords(partitions={len(self.statuses)}, pending={len(self._pending)})"
