"""Prometheus metrics of the metadata quorum, named after Kafka's ``kafka.server:type=raft-metrics``.

Kafka's raft metrics are Kafka Metrics (not Yammer) with hyphenated names; they map to Prometheus as
the socket server's do here (``socket-server-metrics`` / ``connection-count`` became
``kafka_server_socketservermetrics_connection_count``): the type loses its hyphens, the attribute's
become underscores. So ``current-leader`` is ``kafka_server_raftmetrics_current_leader``.

- ``..._current_leader``: the leader's id, -1 when unknown;
- ``..._current_epoch``: the quorum epoch;
- ``..._current_state{state=...}``: Kafka reports a string; here one series per state (leader,
  candidate, prospective, voted, follower, unattached, observer, resigned), 1 for the current one
  and 0 for the others (a Prometheus state set), so ``..._current_state == 1`` names it;
- ``..._current_vote``: the id voted for in this epoch, -1 when none (Kafka reports the local id
  for a leader or a candidate: the caller passes it);
- ``..._high_watermark`` (-1 when unknown), ``..._log_end_offset``, ``..._log_end_epoch``;
- ``..._election_latency_avg`` / ``_max`` and ``..._commit_latency_avg`` / ``_max``: milliseconds,
  as Kafka's. Kafka computes them over two samples of 30 s each (``metrics.num.samples`` 2,
  ``metrics.sample.window.ms`` 30000), so they cover the last 30 to 60 s; :class:`WindowedStat` does
  the same, and like Kafka's ``Avg`` and ``Max`` reports NaN when that window saw nothing.

The windowed values are computed when Prometheus scrapes (``Gauge.set_function``). The rates Kafka
also reports (fetch-records-rate, append-records-rate, poll-idle-ratio-avg) are left out.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Gauge

PREFIX = "kafka_server_raftmetrics_"
CURRENT_LEADER = PREFIX + "current_leader"
CURRENT_EPOCH = PREFIX + "current_epoch"
CURRENT_STATE = PREFIX + "current_state"
CURRENT_VOTE = PREFIX + "current_vote"
HIGH_WATERMARK = PREFIX + "high_watermark"
LOG_END_OFFSET = PREFIX + "log_end_offset"
LOG_END_EPOCH = PREFIX + "log_end_epoch"
ELECTION_LATENCY_AVG = PREFIX + "election_latency_avg"
ELECTION_LATENCY_MAX = PREFIX + "election_latency_max"
COMMIT_LATENCY_AVG = PREFIX + "commit_latency_avg"
COMMIT_LATENCY_MAX = PREFIX + "commit_latency_max"

STATES = ("leader", "candidate", "prospective", "voted", "follower", "unattached", "observer", "resigned")
"""The values of Kafka's current-state."""

SAMPLE_WINDOW_S = 30.0
"""Kafka's ``metrics.sample.window.ms`` default, in seconds."""
NUM_SAMPLES = 2
"""Kafka's ``metrics.num.samples`` default."""


@dataclass
class _Sample:
    start_s: float
    count: int = 0
    total: float = 0.0
    max: float = -math.inf


class WindowedStat:
    """Average and maximum of the values recorded in the last ``num_samples`` windows, as Kafka's
    ``SampledStat`` keeps them: a value goes into the newest sample, a new sample starts once the
    newest is ``window_s`` old, and samples older than ``num_samples * window_s`` are dropped. Memory
    stays at ``num_samples`` samples whatever the rate. Both values are NaN when nothing is left."""

    def __init__(
        self,
        *,
        window_s: float = SAMPLE_WINDOW_S,
        num_samples: int = NUM_SAMPLES,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._window_s = window_s
        self._num_samples = num_samples
        self._clock = clock
        self._samples: list[_Sample] = []

    def record(self, value: float) -> None:
        now = self._clock()
        if not self._samples or now - self._samples[-1].start_s >= self._window_s:
            self._samples.append(_Sample(now))
            del self._samples[: -self._num_samples]
        sample = self._samples[-1]
        sample.count += 1
        sample.total += value
        sample.max = max(sample.max, value)

    def _live(self) -> list[_Sample]:
        now = self._clock()
        expiry = self._num_samples * self._window_s
        self._samples = [s for s in self._samples if now - s.start_s < expiry]
        return self._samples

    def avg(self) -> float:
        live = self._live()
        count = sum(s.count for s in live)
        return sum(s.total for s in live) / count if count else math.nan

    def max(self) -> float:
        live = self._live()
        return max(s.max for s in live) if live else math.nan


class RaftMetrics:
    """The raft-metrics of one node's quorum member, registered on ``registry``.

    :meth:`update` sets the state gauges (call it whenever the node's state, log end or high
    watermark changes); :meth:`record_election` and :meth:`record_commit` feed the latencies.
    """

    def __init__(self, registry: CollectorRegistry, *, clock: Callable[[], float] = time.monotonic) -> None:
        def gauge(name: str, doc: str, labels: tuple[str, ...] = ()) -> Gauge:
            return Gauge(name, doc, labels, registry=registry)

        self._leader = gauge(CURRENT_LEADER, "The current quorum leader's id; -1 when unknown.")
        self._epoch = gauge(CURRENT_EPOCH, "The current quorum epoch.")
        self._state = gauge(
            CURRENT_STATE,
            "The current state of this member: 1 for the state it is in, 0 for the others.",
            ("state",),
        )
        self._vote = gauge(CURRENT_VOTE, "The id voted for in the current epoch; -1 when none.")
        self._high_watermark = gauge(HIGH_WATERMARK, "The high watermark known here; -1 when unknown.")
        self._log_end_offset = gauge(LOG_END_OFFSET, "The end offset of the quorum's log.")
        self._log_end_epoch = gauge(LOG_END_EPOCH, "The epoch of the last entry of the quorum's log.")
        self._elections = WindowedStat(clock=clock)
        self._commits = WindowedStat(clock=clock)
        for name, doc, value in (
            (ELECTION_LATENCY_AVG, "Average milliseconds spent electing a new leader.", self._elections.avg),
            (ELECTION_LATENCY_MAX, "Longest milliseconds spent electing a new leader.", self._elections.max),
            (COMMIT_LATENCY_AVG, "Average milliseconds to commit an entry of the log.", self._commits.avg),
            (COMMIT_LATENCY_MAX, "Longest milliseconds to commit an entry of the log.", self._commits.max),
        ):
            gauge(name, doc).set_function(value)
        self._leader.set(-1)
        self._vote.set(-1)
        self._high_watermark.set(-1)
        self._set_state("unattached")

    def update(
        self,
        *,
        leader_id: int | None,
        epoch: int,
        state: str,
        voted_id: int | None,
        high_watermark: int,
        log_end_offset: int,
        log_end_epoch: int,
    ) -> None:
        """Set the state gauges; ``state`` is one of :data:`STATES` (ValueError otherwise), ``None``
        ids are reported as -1."""
        self._set_state(state)
        self._leader.set(-1 if leader_id is None else leader_id)
        self._epoch.set(epoch)
        self._vote.set(-1 if voted_id is None else voted_id)
        self._high_watermark.set(high_watermark)
        self._log_end_offset.set(log_end_offset)
        self._log_end_epoch.set(log_end_epoch)

    def record_election(self, latency_ms: float) -> None:
        """An election ended (this node learned of a leader) ``latency_ms`` after it began."""
        self._elections.record(latency_ms)

    def record_commit(self, latency_ms: float) -> None:
        """An entry was committed ``latency_ms`` after the leader appended it."""
        self._commits.record(latency_ms)

    def _set_state(self, state: str) -> None:
        if state not in STATES:
            raise ValueError(f"unknown raft state {state!r}: expected one of {', '.join(STATES)}")
        for name in STATES:
            self._state.labels(name).set(1 if name == state else 0)
