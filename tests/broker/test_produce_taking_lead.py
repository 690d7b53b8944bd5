"""A produce for a partition this broker is taking the lead of waits for it (bounded) first.

The replica manager is a stand-in that says which partitions are being taken over and records the
waits; the appends then go to it as usual (here: nothing is led, so they answer its error).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

import pytest

from broker.produce.service import (
    MAX_TAKING_LEAD_WAIT_MS,
    ProducePartitionData,
    ProduceRequest,
    ProduceService,
)
from protocol.error_codes import ErrorCode
from server_common.purgatory import DelayedOperationPurgatory
from storage.clock import FakeClock

pytestmark = pytest.mark.timeout(30)


@dataclass
class TakingOver:
    taking: set[tuple[str, int]]
    waits: list[tuple[str, int, float]] = field(default_factory=list)

    def taking_lead(self, topic: str, index: int) -> bool:
        return (topic, index) in self.taking

    async def wait_until_led(self, topic: str, index: int, timeout_s: float) -> None:
        self.waits.append((topic, index, timeout_s))
        self.taking.discard((topic, index))

    def get_partition(self, topic: str, index: int) -> None:
        return None

    def partition_error(self, topic: str, index: int) -> ErrorCode:
        return ErrorCode.NOT_LEADER_OR_FOLLOWER


def request(timeout_ms: int, *partitions: tuple[str, int]) -> ProduceRequest:
    return ProduceRequest(
        version=9,
        client_id="t",
        acks=1,
        timeout_ms=timeout_ms,
        transactional_id=None,
        partitions=[ProducePartitionData(t, i, None) for t, i in partitions],
    )


def service(replicas: TakingOver) -> ProduceService:
    purgatory = DelayedOperationPurgatory("Produce", asyncio.get_running_loop())
    return ProduceService(replicas, purgatory, FakeClock(0))  # type: ignore[arg-type]


async def test_waits_for_the_partitions_taken_over_for_half_the_request_timeout() -> None:
    replicas = TakingOver({("t", 1)})
    outcomes = await service(replicas).produce(request(3000, ("t", 0), ("t", 1)))
    assert replicas.waits == [("t", 1, 1.5)]
    assert [o.error_code for o in outcomes] == [ErrorCode.NOT_LEADER_OR_FOLLOWER] * 2


async def test_the_wait_is_capped_and_skipped_without_a_timeout() -> None:
    replicas = TakingOver({("t", 0)})
    await service(replicas).produce(request(600_000, ("t", 0)))
    assert replicas.waits == [("t", 0, MAX_TAKING_LEAD_WAIT_MS / 1000)]
    replicas = TakingOver({("t", 0)})
    await service(replicas).produce(request(0, ("t", 0)))
    assert replicas.waits == []
