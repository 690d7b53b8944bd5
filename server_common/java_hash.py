"""Java's ``String.hashCode``, bit for bit: Kafka places partitions and groups by it.

Kafka's fetcher id (``Utils.abs(31 * topic.hashCode() + partition) % numFetchers``) and a group's
``__consumer_offsets`` partition (``Utils.abs(groupId.hashCode()) % partitions``) both hash with it,
so matching it keeps the spread an operator of Kafka knows.
"""

from __future__ import annotations

import functools

INT_MIN = -(2**31)


def to_int32(value: int) -> int:
    """``value`` wrapped to a signed 32-bit int, as Java's int arithmetic overflows."""
    value &= 0xFFFFFFFF
    return value - 0x100000000 if value & 0x80000000 else value


def utils_abs(value: int) -> int:
    """Kafka's ``Utils.abs``: Integer.MIN_VALUE maps to 0, where ``Math.abs`` would stay negative."""
    return 0 if value == INT_MIN else abs(value)


@functools.lru_cache(maxsize=4096)
def java_string_hash(value: str) -> int:
    """Java's ``String.hashCode``: s[0]*31^(n-1) + ... + s[n-1] over UTF-16 code units, as int32."""
    units = value.encode("utf-16-be")
    result = 0
    for i in range(0, len(units), 2):
        result = (31 * result + (units[i] << 8 | units[i + 1])) & 0xFFFFFFFF
    return to_int32(result)
