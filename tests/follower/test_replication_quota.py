"""Replication quotas (KIP-73): the rate and throttled set (client/replication_quota.py), the
follower fetcher leaving throttled out-of-sync partitions out of its fetches while over quota, and
the broker's effective settings from the metadata image."""

from __future__ import annotations

import uuid

from client.replication_quota import ALL_PARTITIONS, UNBOUNDED, ReplicationQuota, throttled_partitions
from follower.fetcher import ReplicaFetcher
from metadata.image import MetadataImage
from metadata.records import ConfigRecord, ConfigResourceType, PartitionRecord, TopicRecord
from storage.clock import FakeClock
from tests.follower.fake_leader import FakeLeader
from tests.follower.helpers import CLIENT_ID, Harness

TP0 = ("topic", 0)
TP1 = ("topic", 1)


def test_throttled_partitions_are_this_brokers() -> None:
    assert throttled_partitions("*", 3) == ALL_PARTITIONS
    assert throttled_partitions(" 0:3, 1:4 ,2:3", 3) == frozenset({0, 2})
    assert throttled_partitions("0:4", 3) == frozenset()
    assert throttled_partitions(None, 3) == frozenset()


def test_the_rate_counts_at_least_ten_windows_then_the_bound_bites() -> None:
    clock = FakeClock(0)
    quota = ReplicationQuota(clock.time_ms, bound=1000)
    quota.update(1000, {"t": frozenset({0})})
    assert quota.is_throttled("t", 0) and not quota.is_throttled("t", 1) and not quota.is_throttled("u", 0)
    quota.record(9_000)
    assert quota.rate() == 900.0 and not quota.is_quota_exceeded()  # 9000 B over the 10 s minimum
    quota.record(2_000)
    assert quota.is_quota_exceeded()
    clock.advance(12_000)  # every sample expired
    assert quota.rate() == 0.0 and not quota.is_quota_exceeded()
    assert not ReplicationQuota(clock.time_ms).is_quota_exceeded()  # UNBOUNDED never is


async def test_a_follower_over_quota_leaves_out_throttled_partitions_not_in_sync(tmp_path) -> None:
    clock = FakeClock(0)
    quota = ReplicationQuota(clock.time_ms)
    quota.update(5, {"topic": frozenset({0})})  # one ~120-byte batch over the 10 s minimum window: over
    h = Harness(tmp_path, FakeLeader(max_batches=1))
    h.fetcher = ReplicaFetcher(
        CLIENT_ID,
        h.leader,
        h.logs,
        h.clock,
        h.metrics.fetcher(CLIENT_ID),
        backoff_ms=h.backoff_ms,
        quota=quota,
    )
    for tp in (TP0, TP1):
        h.replica(tp)
        h.leader_log(tp, [(0, 5)] * 4)
        h.add(tp, leader_epoch=0)

    await h.fetcher.do_work()  # not over quota yet: both fetched; TP0's bytes are recorded
    assert set(h.leader.requests[-1].partitions) == {TP0, TP1}
    assert quota.rate() > 0 and quota.is_quota_exceeded()

    await h.fetcher.do_work()  # over quota: TP0 (throttled, lagging) is left out, TP1 is not
    assert set(h.leader.requests[-1].partitions) == {TP1}
    assert h.logs[TP0].log_end_offset == 5 and h.logs[TP1].log_end_offset == 10

    clock.advance(12_000)  # the rate falls back under the bound: TP0 rejoins the fetch
    await h.fetcher.do_work()
    assert TP0 in h.leader.requests[-1].partitions
    assert h.logs[TP0].log_end_offset == 10


def test_the_brokers_effective_settings_come_from_the_image() -> None:
    from broker.replication.replication_quota import (
        FOLLOWER_THROTTLED_REPLICAS,
        LEADER_THROTTLED_RATE,
        LEADER_THROTTLED_REPLICAS,
        LeaderReplicationQuota,
        throttled_rate,
        throttled_replicas,
    )

    image = MetadataImage()
    topic_id = uuid.UUID(int=5)
    image.apply_batch(
        [
            (0, TopicRecord("t", topic_id)),
            (1, PartitionRecord(0, topic_id, (1, 2), (1, 2), 1, 0, 0)),
            (2, ConfigRecord(ConfigResourceType.TOPIC, "t", LEADER_THROTTLED_REPLICAS, "0:1,0:2")),
            (3, ConfigRecord(ConfigResourceType.TOPIC, "t", FOLLOWER_THROTTLED_REPLICAS, "*")),
        ],
        1,
    )
    clock = FakeClock(0)
    leader = LeaderReplicationQuota(image, 1, clock.time_ms)
    assert throttled_rate(image, 1, LEADER_THROTTLED_RATE) == UNBOUNDED
    assert throttled_replicas(image, 1, LEADER_THROTTLED_REPLICAS) == {"t": frozenset({0})}
    assert throttled_replicas(image, 3, FOLLOWER_THROTTLED_REPLICAS) == {"t": ALL_PARTITIONS}
    leader.record(10**9)
    assert not leader.should_throttle("t", 0, replica_in_sync=False)  # no rate set: never throttled

    image.apply_batch([(4, ConfigRecord(ConfigResourceType.BROKER, "", LEADER_THROTTLED_RATE, "5000"))], 1)
    assert throttled_rate(image, 1, LEADER_THROTTLED_RATE) == 5000
    assert leader.should_throttle("t", 0, replica_in_sync=False)
    assert not leader.should_throttle("t", 0, replica_in_sync=True)  # in-sync replicas never are
    assert not leader.should_throttle("t", 1, replica_in_sync=False)
    image.apply_batch(
        [(5, ConfigRecord(ConfigResourceType.BROKER, "1", LEADER_THROTTLED_RATE, "10000000000"))], 1
    )
    assert throttled_rate(image, 1, LEADER_THROTTLED_RATE) == 10_000_000_000  # this broker's override wins
    assert not leader.should_throttle("t", 0, replica_in_sync=False)
