"""Replication quotas (KIP-73): a byte rate bound and the set of throttled partitions.

Kafka's ReplicationQuotaManager, shared by both ends of replication: the leader side
(``leader.replication.throttled.rate`` over ``leader.replication.throttled.replicas``) lives in the
broker's fetch path, the follower side (``follower.replication.throttled.rate`` over
``follower.replication.throttled.replicas``) in the follower processes, which cannot import the
broker, hence this module in ``client/``.

The rate is Kafka's ``Rate`` over ``replication.quota.window.num`` (11) samples of
``replication.quota.window.size.seconds`` (1 s): the bytes recorded in the retained samples divided by
the time they span, where that time counts at least ``num - 1`` whole windows; the bound is
exceeded when the rate is above it. So, as with Kafka's, a quota lets about ten seconds' worth of
bytes through in a burst, then nothing until that sample leaves the window: a long throttled copy
comes in bursts and averages about the bound.

The throttled-replicas lists are ``*`` (every partition of the topic) or ``partition:broker`` pairs;
a broker throttles the partitions listed with its own id (Kafka's ``parseThrottledPartitions``).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

__all__ = [
    "ALL_PARTITIONS",
    "DEFAULT_NUM_SAMPLES",
    "DEFAULT_SAMPLE_MS",
    "UNBOUNDED",
    "ReplicationQuota",
    "ThrottledPartitions",
    "throttled_partitions",
]

UNBOUNDED = 2**63 - 1
"""Long.MAX_VALUE: Kafka's default throttled rate, no throttle."""
DEFAULT_NUM_SAMPLES = 11
DEFAULT_SAMPLE_MS = 1000
ALL_PARTITIONS = "*"

ThrottledPartitions = Mapping[str, frozenset[int] | str]
"""topic -> the partitions throttled here, or ALL_PARTITIONS."""


def throttled_partitions(value: str | None, broker_id: int) -> frozenset[int] | str:
    """The partitions a ``*.replication.throttled.replicas`` value throttles on ``broker_id``:
    ALL_PARTITIONS for ``*``, else those listed as ``partition:broker_id`` (malformed items are
    ignored here: the config was validated when it was set)."""
    if value is None:
        return frozenset()
    text = value.strip()
    if text == ALL_PARTITIONS:
        return ALL_PARTITIONS
    out: set[int] = set()
    for item in text.split(","):
        partition, _, broker = item.strip().partition(":")
        try:
            if int(broker) == broker_id:
                out.add(int(partition))
        except ValueError:
            continue
    return frozenset(out)


@dataclass
class _Sample:
    start_ms: int
    bytes: int = 0


@dataclass
class ReplicationQuota:
    """A bound in bytes per second and the partitions it applies to (Kafka's ReplicationQuotaManager)."""

    now_ms: Callable[[], int]
    bound: int = UNBOUNDED
    num_samples: int = DEFAULT_NUM_SAMPLES
    sample_ms: int = DEFAULT_SAMPLE_MS
    throttled: dict[str, frozenset[int] | str] = field(default_factory=dict)
    _samples: deque[_Sample] = field(default_factory=deque)

    def update(self, bound: int, throttled: ThrottledPartitions) -> None:
        """New settings; the recorded bytes stay (the rate is measured, not configured)."""
        self.bound = bound
        self.throttled = {t: p for t, p in throttled.items() if p}

    def is_throttled(self, topic: str, partition: int) -> bool:
        partitions = self.throttled.get(topic)
        if partitions is None:
            return False
        return partitions == ALL_PARTITIONS or partition in partitions

    def is_quota_exceeded(self) -> bool:
        return self.bound < UNBOUNDED and self.rate() > self.bound

    def record(self, size: int) -> None:
        if size <= 0:
            return
        now = self.now_ms()
        self._expire(now)
        if not self._samples or now - self._samples[-1].start_ms >= self.sample_ms:
            self._samples.append(_Sample(now))
        self._samples[-1].bytes += size

    def rate(self) -> float:
        """Bytes per second over the retained samples (Kafka's Rate, with its minimum window)."""
        now = self.now_ms()
        self._expire(now)
        if not self._samples:
            return 0.0
        total = sum(s.bytes for s in self._samples)
        elapsed = now - self._samples[0].start_ms
        min_elapsed = (self.num_samples - 1) * self.sample_ms
        return total * 1000.0 / max(elapsed, min_elapsed, 1)

    def _expire(self, now: int) -> None:
        horizon = now - self.num_samples * self.sample_ms
        while self._samples and self._samples[0].start_ms <= horizon:
            self._samples.popleft()

    def throttled_size(self, sizes: Iterable[tuple[str, int, int]]) -> int:
        """The bytes of ``(topic, partition, size)`` that count against this quota."""
        return sum(size for topic, partition, size in sizes if self.is_throttled(topic, partition))
