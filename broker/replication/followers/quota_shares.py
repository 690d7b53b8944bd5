"""How the broker's follower replication quota is split between its follower processes.

Kafka has one follower ReplicationQuotaManager per broker, shared by all its fetcher threads: a
single throttled partition may use the whole ``follower.replication.throttled.rate``. Here each
follower process measures its own rate, so the broker's rate is split between them. An equal split
held one moving partition to rate / ``num.replica.fetchers``; instead each process gets the rate in
proportion to the throttled partitions it fetches (or will: a listed ``partition:broker`` entry
lands in the process Kafka's fetcher hash picks), so the shares still add up to the rate and a lone
moving partition gets all of it. A process with no throttled partition known (a ``*`` topic none
of whose partitions is followed yet) keeps the equal share, so a partition added to it later is
never starved.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from broker.replication.followers.fetcher_ids import fetcher_id_for
from client.replication_quota import UNBOUNDED

__all__ = ["quota_shares"]


def quota_shares(
    rate: int,
    throttled: Mapping[str, frozenset[int] | str],
    num_fetchers: int,
    followed: Iterable[tuple[str, int]],
) -> list[int]:
    """Each follower process's bound (indexed by fetcher id) out of the broker's ``rate``."""
    if rate >= UNBOUNDED:
        return [rate] * num_fetchers
    equal = max(1, rate // num_fetchers)
    counts = [0] * num_fetchers
    followed = list(followed)
    for topic, partitions in throttled.items():
        if isinstance(partitions, str):  # every partition of the topic: those followed here
            indexes = [p for t, p in followed if t == topic]
        else:
            indexes = sorted(partitions)
        for index in indexes:
            counts[fetcher_id_for(topic, index, num_fetchers)] += 1
    total = sum(counts)
    if total == 0:
        return [equal] * num_fetchers
    return [max(1, rate * count // total) if count else equal for count in counts]
