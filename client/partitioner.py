"""Kafka's default partitioner: murmur2 of the key for keyed records, a sticky partition for the rest.

Why it lives here: a record's key must land on the partition every Kafka client would choose
(``toPositive(murmur2(key)) % numPartitions``), or a kipling tool and a Java, librdkafka-with-murmur2
or kafka-python producer writing the same keys would split one key's records over two partitions and
lose their order. The CLI (``broker/``) and the Spark sink (``pipeline/``) both use it.

Records without a key follow Kafka's sticky partitioner (KIP-480, and KIP-794's "switch after
``batch.size`` bytes"): they all go to one partition until about a batch's worth of bytes went there,
then to another one, so null-key records make full batches instead of one tiny batch per partition.
"""

from __future__ import annotations

import random
from collections.abc import Callable

MURMUR2_SEED = 0x9747B28C
"""The seed Kafka's ``Utils.murmur2`` uses."""
_M = 0x5BD1E995
_MASK32 = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """Kafka's ``Utils.murmur2`` of ``data`` as an unsigned 32-bit value (Java's int, reinterpreted)."""
    length = len(data)
    h = (MURMUR2_SEED ^ length) & _MASK32
    whole = length - length % 4
    for i in range(0, whole, 4):
        k = int.from_bytes(data[i : i + 4], "little")
        k = (k * _M) & _MASK32
        k ^= k >> 24
        k = (k * _M) & _MASK32
        h = (h * _M) & _MASK32
        h ^= k
    rest = length % 4
    if rest == 3:
        h ^= data[whole + 2] << 16
    if rest >= 2:
        h ^= data[whole + 1] << 8
    if rest >= 1:
        h ^= data[whole]
        h = (h * _M) & _MASK32
    h ^= h >> 13
    h = (h * _M) & _MASK32
    h ^= h >> 15
    return h


def partition_for_key(key: bytes, num_partitions: int) -> int:
    """Kafka's choice for a keyed record: ``toPositive(murmur2(key)) % numPartitions``.

    Over all partitions, available or not, as Kafka does: a key's partition must not move when a
    leader is briefly unavailable.
    """
    if num_partitions < 1:
        raise ValueError(f"a topic has at least one partition, got {num_partitions}")
    return (murmur2(key) & 0x7FFFFFFF) % num_partitions


class StickyPartitioner:
    """The partition for records without a key: the same one until ``batch_size`` bytes went there.

    ``choose`` is injectable so tests can make the sequence of partitions deterministic; by default the
    next partition is a random one other than the current (when there is more than one), as Kafka picks.
    """

    def __init__(
        self,
        num_partitions: int,
        batch_size: int,
        *,
        choose: Callable[[int], int] | None = None,
    ) -> None:
        if num_partitions < 1:
            raise ValueError(f"a topic has at least one partition, got {num_partitions}")
        self.num_partitions = num_partitions
        self.batch_size = batch_size
        self._choose = choose if choose is not None else random.randrange
        self._current = self._choose(num_partitions)
        self._bytes = 0

    def partition(self, record_size: int) -> int:
        """The partition for a record of about ``record_size`` bytes (and account for it)."""
        if self._bytes >= self.batch_size:
            self._switch()
        self._bytes += record_size
        return self._current

    def _switch(self) -> None:
        self._bytes = 0
        if self.num_partitions == 1:
            return
        step = 1 + self._choose(self.num_partitions - 1)
        self._current = (self._current + step) % self.num_partitions


__all__ = ["MURMUR2_SEED", "StickyPartitioner", "murmur2", "partition_for_key"]
