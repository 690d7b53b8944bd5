"""Sends leaders' ISR proposals to the controller (Kafka's AlterPartitionManager).

A partition led here proposes an ISR shrink or expansion with :meth:`submit` and goes on serving:
until the controller commits the change the partition keeps its committed ISR, and its high
watermark uses the "maximal" ISR (kafka-behaviour.md 6.3). Proposals are sent in batches, one
AlterPartition in flight at a time; each partition hears its answer through
``on_alter_partition_result``. A proposal that could not be delivered (controller unreachable)
is retried after a backoff unless the partition has submitted a newer one; a refused one
(FENCED_LEADER_EPOCH, INVALID_UPDATE_VERSION, ...) is reported to the partition, which drops it
and waits for the metadata that explains the refusal.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from typing import Protocol

import structlog

from broker.cluster.background import BackgroundTask
from broker.cluster.controller_channel import (
    AlterPartitionItem,
    ControllerChannel,
    ControllerUnavailableError,
)
from broker.replication.replica_state import IsrProposal
from protocol.error_codes import ErrorCode

__all__ = ["AlterPartitionManager"]

RETRY_BACKOFF_S = 0.5

_log = structlog.get_logger("kipling.alter_partition")


class ProposingPartition(Protocol):
    """What the manager needs of a partition (broker.replication.partition.Partition)."""

    topic: str
    index: int

    @property
    def topic_id(self) -> uuid.UUID: ...

    def on_alter_partition_result(
        self,
        proposal: IsrProposal,
        error: ErrorCode,
        leader_epoch: int,
        isr: tuple[int, ...],
        partition_epoch: int,
    ) -> object: ...


class AlterPartitionManager:
    """Batches ISR proposals to the controller; one request in flight."""

    def __init__(
        self, channel: ControllerChannel, *, broker_id: int, broker_epoch: Callable[[], int]
    ) -> None:
        self._channel = channel
        self._broker_id = broker_id
        self._broker_epoch = broker_epoch
        self._pending: dict[tuple[str, int], tuple[ProposingPartition, IsrProposal]] = {}
        self._wake = asyncio.Event()
        self._task = BackgroundTask("alter-partition", self._run)

    def submit(self, partition: ProposingPartition, proposal: IsrProposal) -> None:
        """Queue ``proposal``; a newer proposal for the same partition replaces an unsent one."""
        self._pending[(partition.topic, partition.index)] = (partition, proposal)
        self._wake.set()

    def start(self) -> None:
        self._task.start()

    async def stop(self) -> None:
        await self._task.stop()

    async def _run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            if not self._pending:
                continue
            batch, self._pending = self._pending, {}
            if not await self._send(batch):
                for key, entry in batch.items():
                    self._pending.setdefault(key, entry)  # a newer submission wins
                await asyncio.sleep(RETRY_BACKOFF_S)
                self._wake.set()

    async def _send(self, batch: dict[tuple[str, int], tuple[ProposingPartition, IsrProposal]]) -> bool:
        items = [
            AlterPartitionItem(
                partition.topic_id,
                partition.index,
                proposal.leader_epoch,
                tuple(proposal.new_isr),
                proposal.partition_epoch,
            )
            for partition, proposal in batch.values()
        ]
        try:
            error, replies = await self._channel.alter_partition(
                broker_id=self._broker_id, broker_epoch=self._broker_epoch(), items=items
            )
        except ControllerUnavailableError as exc:
            _log.warning("AlterPartition not delivered; will retry", error=str(exc), partitions=len(items))
            return False
        if error != ErrorCode.NONE:
            _log.warning("AlterPartition refused", error=error.name, partitions=len(items))
            if error in (ErrorCode.STALE_BROKER_EPOCH, ErrorCode.NOT_CONTROLLER, ErrorCode.REQUEST_TIMED_OUT):
                return False
            for partition, proposal in batch.values():
                partition.on_alter_partition_result(
                    proposal, error, proposal.leader_epoch, tuple(proposal.new_isr), proposal.partition_epoch
                )
            return True
        by_id = {(p.topic_id, p.index): (p, proposal) for p, proposal in batch.values()}
        for reply in replies:
            entry = by_id.get((reply.topic_id, reply.partition))
            if entry is None:
                continue
            partition, proposal = entry
            if reply.error != ErrorCode.NONE:
                _log.info(
                    "ISR change refused",
                    topic=partition.topic,
                    partition=partition.index,
                    error=reply.error.name,
                )
            partition.on_alter_partition_result(
                proposal, reply.error, reply.leader_epoch, reply.isr, reply.partition_epoch
            )
        return True
