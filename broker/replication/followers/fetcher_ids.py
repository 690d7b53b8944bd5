"""Which follower process fetches a partition: Kafka's fetcher id, bit for bit.

Kafka's AbstractFetcherManager picks ``Utils.abs(31 * topic.hashCode() + partition) % numFetchers``;
matching it keeps the spread of partitions over fetchers the one Kafka operators know.
"""

from __future__ import annotations

from server_common.java_hash import java_string_hash, to_int32, utils_abs


def fetcher_id_for(topic: str, partition: int, num_fetchers: int) -> int:
    """Kafka's ``Utils.abs(31 * topic.hashCode() + partition) % numFetchers`` with int overflow."""
    if num_fetchers < 1:
        raise ValueError(f"num.replica.fetchers must be at least 1, got {num_fetchers}")
    return utils_abs(to_int32(31 * java_string_hash(topic) + partition)) % num_fetchers


__all__ = ["fetcher_id_for"]
