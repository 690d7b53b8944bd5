"""The follower replication quota with several follower processes: Kafka's follower quota
is one per broker (all fetcher threads share it), so a lone moving partition is copied at the whole
follower.replication.throttled.rate. Splitting the rate equally between num.replica.fetchers
processes held it to rate / N (half the rate with the shipped cluster configs)."""

from __future__ import annotations

from broker.replication.followers import FollowerSupervisor
from broker.replication.followers.fetcher_ids import fetcher_id_for
from broker.replication.followers.quota_shares import quota_shares
from client.replica_messages import FollowerSettings
from client.replication_quota import UNBOUNDED

RATE = 1_000_000


def partitions_by_fetcher(topic: str, fetchers: int, wanted: int) -> list[list[int]]:
    """Partition indexes of ``topic`` grouped by the follower process Kafka's hash gives them."""
    groups: list[list[int]] = [[] for _ in range(fetchers)]
    index = 0
    while min(len(g) for g in groups) < wanted:
        groups[fetcher_id_for(topic, index, fetchers)].append(index)
        index += 1
    return groups


def test_a_lone_moving_partition_gets_the_whole_rate() -> None:
    [first, _] = partitions_by_fetcher("t", 2, 1)
    shares = quota_shares(RATE, {"t": frozenset({first[0]})}, 2, [])
    assert shares[fetcher_id_for("t", first[0], 2)] == RATE


def test_the_shares_follow_the_throttled_partitions_and_add_up_to_the_rate() -> None:
    [zero, one] = partitions_by_fetcher("t", 2, 3)
    shares = quota_shares(RATE, {"t": frozenset(zero[:3] + one[:1])}, 2, [])
    assert shares == [RATE * 3 // 4, RATE // 4]


def test_every_partition_counts_those_followed_and_unknown_ones_keep_the_equal_share() -> None:
    [zero, one] = partitions_by_fetcher("t", 2, 1)
    assert quota_shares(RATE, {"t": "*"}, 2, [("t", zero[0]), ("u", one[0])]) == [RATE, RATE // 2]
    assert quota_shares(RATE, {"t": "*"}, 2, []) == [RATE // 2, RATE // 2]


def test_unbounded_stays_unbounded() -> None:
    assert quota_shares(UNBOUNDED, {"t": "*"}, 3, []) == [UNBOUNDED] * 3


async def test_the_supervisor_sends_each_process_its_share() -> None:
    supervisor = FollowerSupervisor(1, 2, FollowerSettings())
    [first, _] = partitions_by_fetcher("t", 2, 1)
    await supervisor.update_replication_quota(RATE, {"t": frozenset({first[0]})})
    moving = fetcher_id_for("t", first[0], 2)
    assert supervisor.replication_quota_body(moving) == {"rate": RATE, "throttled": {"t": [first[0]]}}
    assert supervisor.replication_quota_body(1 - moving) == {
        "rate": RATE // 2,
        "throttled": {"t": [first[0]]},
    }
