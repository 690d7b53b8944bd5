"""Which follower process fetches a partition: Kafka's fetcher id, bit for bit.

Kafka's AbstractFetcherManager picks ``Utils.abs(31 * topic.hashCode() + partition) % numFetchers``.
Matching it (Java's String.hashCode over UTF-16 code units, 32-bit overflow, and ``Utils.abs``
mapping Integer.MIN_VALUE to 0 where ``Math.abs`` would stay negative) keeps the spread of
partitions over fetchers the one Kafka operators know.
"""

from __future__ import annotations

import functools

_INT_MIN = -(2**31)


def _to_int32(value: int) -> int:
    value &= 0xFFFFFFFF
    return value - 0x100000000 if value & 0x80000000 else value


@functools.lru_cache(maxsize=4096)
def java_string_hash(value: str) -> int:
    """Java's ``String.hashCode``: s[0]*31^(n-1) + ... + s[n-1] over UTF-16 code units, as int32."""
    units = value.encode("utf-16-be")
    result = 0
    for i in range(0, len(units), 2):
        result = (31 * result + (units[i] << 8 | units[i + 1])) & 0xFFFFFFFF
    return _to_int32(result)


def fetcher_id_for(topic: str, partition: int, num_fetchers: int) -> int:
    """Kafka's ``Utils.abs(31 * topic.hashCode() + partition) % numFetchers`` with int overflow."""
    if num_fetchers < 1:
        raise ValueError(f"num.replica.fetchers must be at least 1, got {num_fetchers}")
    value = _to_int32(31 * java_string_hash(topic) + partition)
    return (0 if value == _INT_MIN else abs(value)) % num_fetchers


__all__ = ["fetcher_id_for", "java_string_hash"]
