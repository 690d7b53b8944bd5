"""RaftMetrics: Kafka's raft-metrics names, the state set, and the windowed latency avg/max."""

from __future__ import annotations

import math

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from broker.metrics.raft import STATES, RaftMetrics, WindowedStat


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def scrape(registry: CollectorRegistry) -> dict[str, float]:
    """Every sample of the text exposition, keyed by name{labels}."""
    values = {}
    for line in generate_latest(registry).decode().splitlines():
        if line and not line.startswith("#"):
            key, _, value = line.rpartition(" ")
            values[key] = float(value)
    return values


def test_kafka_names_and_initial_values() -> None:
    registry = CollectorRegistry()
    RaftMetrics(registry)
    values = scrape(registry)
    assert values["kafka_server_raftmetrics_current_leader"] == -1
    assert values["kafka_server_raftmetrics_current_vote"] == -1
    assert values["kafka_server_raftmetrics_current_epoch"] == 0
    assert values["kafka_server_raftmetrics_high_watermark"] == -1
    assert values["kafka_server_raftmetrics_log_end_offset"] == 0
    assert values["kafka_server_raftmetrics_log_end_epoch"] == 0
    assert values['kafka_server_raftmetrics_current_state{state="unattached"}'] == 1
    for name in ("election", "commit"):
        for stat in ("avg", "max"):
            assert math.isnan(values[f"kafka_server_raftmetrics_{name}_latency_{stat}"])


def test_update_sets_every_gauge_and_exactly_one_state() -> None:
    registry = CollectorRegistry()
    metrics = RaftMetrics(registry)
    metrics.update(
        leader_id=2,
        epoch=7,
        state="follower",
        voted_id=2,
        high_watermark=41,
        log_end_offset=42,
        log_end_epoch=6,
    )
    values = scrape(registry)
    assert values["kafka_server_raftmetrics_current_leader"] == 2
    assert values["kafka_server_raftmetrics_current_epoch"] == 7
    assert values["kafka_server_raftmetrics_current_vote"] == 2
    assert values["kafka_server_raftmetrics_high_watermark"] == 41
    assert values["kafka_server_raftmetrics_log_end_offset"] == 42
    assert values["kafka_server_raftmetrics_log_end_epoch"] == 6
    states = {s: values[f'kafka_server_raftmetrics_current_state{{state="{s}"}}'] for s in STATES}
    assert states == {s: (1.0 if s == "follower" else 0.0) for s in STATES}

    metrics.update(
        leader_id=None,
        epoch=8,
        state="candidate",
        voted_id=None,
        high_watermark=41,
        log_end_offset=42,
        log_end_epoch=6,
    )
    values = scrape(registry)
    assert values["kafka_server_raftmetrics_current_leader"] == -1
    assert values["kafka_server_raftmetrics_current_vote"] == -1
    assert values['kafka_server_raftmetrics_current_state{state="candidate"}'] == 1
    assert values['kafka_server_raftmetrics_current_state{state="follower"}'] == 0


def test_an_unknown_state_is_refused() -> None:
    metrics = RaftMetrics(CollectorRegistry())
    with pytest.raises(ValueError, match="'Leader'"):
        metrics.update(
            leader_id=1,
            epoch=1,
            state="Leader",
            voted_id=1,
            high_watermark=0,
            log_end_offset=0,
            log_end_epoch=1,
        )


def test_latencies_are_averaged_and_maxed_over_the_last_samples() -> None:
    clock = Clock()
    registry = CollectorRegistry()
    metrics = RaftMetrics(registry, clock=clock)
    metrics.record_election(100)
    metrics.record_election(300)
    for latency in (2.0, 4.0, 9.0):
        metrics.record_commit(latency)
    values = scrape(registry)
    assert values["kafka_server_raftmetrics_election_latency_avg"] == 200
    assert values["kafka_server_raftmetrics_election_latency_max"] == 300
    assert values["kafka_server_raftmetrics_commit_latency_avg"] == 5
    assert values["kafka_server_raftmetrics_commit_latency_max"] == 9
    clock.now += 61
    values = scrape(registry)
    assert math.isnan(values["kafka_server_raftmetrics_election_latency_avg"])
    assert math.isnan(values["kafka_server_raftmetrics_commit_latency_max"])


def test_windowed_stat_keeps_two_samples_of_thirty_seconds() -> None:
    clock = Clock()
    stat = WindowedStat(clock=clock)
    stat.record(10)  # sample 1 starts at 1000
    clock.now += 29
    stat.record(20)  # still sample 1
    clock.now += 2
    stat.record(3)  # sample 2 starts at 1031
    assert (stat.avg(), stat.max()) == (11, 20)
    clock.now = 1059.9  # sample 1 is 59.9 s old: still counted
    assert stat.max() == 20
    clock.now = 1060  # sample 1 expired
    assert (stat.avg(), stat.max()) == (3, 3)
    clock.now = 1062
    stat.record(1)  # sample 3 starts; sample 2 (31 s old) is kept, sample 1 is dropped
    assert (stat.avg(), stat.max()) == (2, 3)
    clock.now = 1091
    assert (stat.avg(), stat.max()) == (1, 1)
    clock.now = 1122
    assert math.isnan(stat.avg()) and math.isnan(stat.max())
