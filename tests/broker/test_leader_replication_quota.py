"""The leader side of the replication quota in the fetch path (Kafka's shouldLeaderThrottle): an
out-of-sync follower of a throttled partition gets the partition's offsets but no records while the
quota is exceeded, a parked fetch does not count those bytes (it waits out max_wait instead of
spinning), an in-sync follower and consumers are never throttled, and the bytes of throttled
partitions sent to followers are recorded."""

from __future__ import annotations

import asyncio
import pathlib
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest

from broker.fetch.service import FetchRequest
from broker.fetch_session import PartitionFetchParams
from protocol.sentinels import IsolationLevel
from tests.broker.test_fetch_service import BIG, by_key, key
from tests.broker.test_follower_fetch import FOLLOWER, NODE, Broker, Follower, build


@dataclass
class FakeQuota:
    exceeded: bool = True
    throttled: set[str] = field(default_factory=lambda: {"moving"})
    recorded: list[int] = field(default_factory=list)

    def is_throttled(self, topic: str, partition: int) -> bool:
        return topic in self.throttled

    def should_throttle(self, topic: str, partition: int, replica_in_sync: bool) -> bool:
        return not replica_in_sync and self.is_throttled(topic, partition) and self.exceeded

    def record(self, size: int) -> None:
        self.recorded.append(size)


@pytest.fixture
async def broker(tmp_path: pathlib.Path) -> AsyncIterator[Broker]:
    node = build(tmp_path)
    yield node
    for purgatory in node.purgatories:
        purgatory.shutdown()
    node.replicas.shutdown()
    node.logs.shutdown()


def with_quota(broker: Broker) -> FakeQuota:
    quota = FakeQuota()
    broker.fetch._leader_quota = quota  # what build_data_plane passes as leader_quota
    return quota


async def test_an_out_of_sync_follower_gets_no_records_while_over_quota(broker: Broker) -> None:
    quota = with_quota(broker)
    broker.create("moving", replicas=(NODE, FOLLOWER), isr=(NODE,))
    broker.append("moving", n=3)
    follower = Follower(broker, [key("moving")], session=False)

    parts = await follower.fetch()
    result = by_key(parts)[key("moving")]
    assert (result.error_code, result.records_size, result.high_watermark) == (0, 0, 3)
    assert quota.recorded == []

    quota.exceeded = False
    parts = await follower.fetch()
    size = by_key(parts)[key("moving")].records_size
    assert size > 0 and follower.offsets[key("moving")] == 3
    assert quota.recorded == [size]  # the bytes of a throttled partition count, throttled or not


async def test_in_sync_followers_and_other_partitions_are_never_throttled(broker: Broker) -> None:
    quota = with_quota(broker)
    broker.create("moving", replicas=(NODE, FOLLOWER), isr=(NODE, FOLLOWER))
    broker.create("other", replicas=(NODE, FOLLOWER), isr=(NODE,))
    broker.append("moving", n=2)
    broker.append("other", n=2)
    parts = await Follower(broker, [key("moving"), key("other")], session=False).fetch()
    assert by_key(parts)[key("moving")].records_size > 0
    assert by_key(parts)[key("other")].records_size > 0
    assert len(quota.recorded) == 1  # only "moving" is a throttled partition


async def test_a_parked_follower_fetch_waits_out_max_wait_instead_of_spinning(broker: Broker) -> None:
    quota = with_quota(broker)
    broker.create("moving", replicas=(NODE, FOLLOWER), isr=(NODE,))
    broker.append("moving", n=3)
    follower = Follower(broker, [key("moving")], session=True)
    started = time.monotonic()
    parts = await asyncio.wait_for(follower.fetch(max_wait_ms=300), 5)
    assert time.monotonic() - started >= 0.25
    assert by_key(parts)[key("moving")].records_size == 0
    assert quota.recorded == []


async def test_consumers_are_never_throttled(broker: Broker) -> None:
    with_quota(broker)
    broker.create("moving", replicas=(NODE,), isr=(NODE,))
    broker.append("moving", n=2)
    parts = await broker.fetch.fetch(
        FetchRequest(
            version=12,
            replica_id=-1,
            max_wait_ms=0,
            min_bytes=1,
            max_bytes=BIG,
            isolation_level=IsolationLevel.READ_UNCOMMITTED,
            session_id=0,
            session_epoch=-1,
            fetch_data=[(key("moving"), PartitionFetchParams(fetch_offset=0, max_bytes=BIG))],
            to_forget=[],
        )
    )
    assert by_key(parts)[key("moving")].records_size > 0
