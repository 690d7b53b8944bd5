"""The cleaner gauges of one broker combine its own cleaner's figures with its follower processes'
(cleaner/stats.py): Kafka's aggregation over cleaner threads, and the snapshot's JSON for the IPC."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry

from broker.metrics.log_cleaner import (
    CLEANER_RECOPY,
    DEAD_THREAD_COUNT,
    MAX_BUFFER_UTILIZATION,
    MAX_CLEAN_TIME,
    MAX_COMPACTION_DELAY,
    MAX_DIRTY,
    TIME_SINCE_LAST_RUN,
    UNCLEANABLE_BYTES,
    UNCLEANABLE_PARTITIONS,
    LogCleanerMetrics,
)
from cleaner.stats import CleanerStats, RoundStats, UncleanableStats, combine
from storage.clock import FakeClock

rounds = st.builds(
    RoundStats,
    st.floats(0, 1),
    st.integers(0, 1 << 40),
    st.integers(0, 1 << 40),
    st.floats(0, 1e4),
)
snapshots = st.builds(
    CleanerStats,
    max_dirty_percent=st.floats(0, 100),
    last_run_ms=st.integers(0, 1 << 45),
    max_compaction_delay_ms=st.floats(0, 1e9),
    dead_count=st.integers(0, 8),
    last_rounds=st.lists(rounds, max_size=4).map(tuple),
    uncleanable=st.dictionaries(
        st.sampled_from(["/data/a", "/data/b", "/data/c"]),
        st.builds(UncleanableStats, st.integers(0, 10), st.integers(0, 1 << 40)),
    ),
)


@given(snapshots)
def test_a_snapshot_survives_the_ipc(stats: CleanerStats) -> None:
    assert CleanerStats.from_json(stats.to_json()) == stats


@given(st.lists(snapshots, min_size=1, max_size=5))
def test_combined_as_kafka_aggregates_over_cleaner_threads(owners: list[CleanerStats]) -> None:
    combined = combine(owners)
    all_rounds = [r for s in owners for r in s.last_rounds]
    assert combined.max_dirty_percent == max(s.max_dirty_percent for s in owners)
    assert combined.last_run_ms == max(s.last_run_ms for s in owners)  # the most recent look
    assert combined.max_compaction_delay_ms == max(s.max_compaction_delay_ms for s in owners)
    assert combined.dead_count == sum(s.dead_count for s in owners)
    assert combined.max_clean_time_s == max((r.seconds for r in all_rounds), default=0.0)
    assert combined.max_buffer_utilization_percent == 100 * max(
        (r.buffer_utilization for r in all_rounds), default=0.0
    )
    read = sum(r.bytes_read for r in all_rounds)
    assert combined.recopy_percent == 100 * sum(r.bytes_written for r in all_rounds) / max(read, 1)
    for log_dir in {d for s in owners for d in s.uncleanable}:
        parts = [s.uncleanable[log_dir] for s in owners if log_dir in s.uncleanable]
        assert combined.uncleanable[log_dir] == UncleanableStats(
            sum(u.count for u in parts), sum(u.size for u in parts)
        )


def test_no_owner_reports_zeros() -> None:
    assert combine([]) == CleanerStats()


def test_the_gauges_show_the_broker_and_its_follower_processes_together() -> None:
    clock = FakeClock(10_000)
    own = CleanerStats(
        max_dirty_percent=20,
        last_run_ms=9_000,
        last_rounds=(RoundStats(0.25, 1000, 100, 0.5),),
        uncleanable={"/data/a": UncleanableStats(0, 0)},
    )
    follower = CleanerStats(
        max_dirty_percent=60,
        last_run_ms=9_500,
        max_compaction_delay_ms=3_000,
        dead_count=1,
        last_rounds=(RoundStats(0.75, 3000, 300, 2.0),),
        uncleanable={"/data/a": UncleanableStats(1, 4096)},
    )
    followers: list[CleanerStats] = []
    registry = CollectorRegistry()
    LogCleanerMetrics(registry, lambda: [own, *followers], clock)

    def gauge(name: str, **labels: str) -> float | None:
        return registry.get_sample_value(name, labels)

    assert gauge(MAX_CLEAN_TIME) == 0.5 and gauge(MAX_DIRTY) == 20  # the broker's own, alone
    followers.append(follower)
    assert gauge(MAX_BUFFER_UTILIZATION) == 75
    assert gauge(CLEANER_RECOPY) == 10  # 400 written of 4000 read
    assert gauge(MAX_CLEAN_TIME) == 2.0
    assert gauge(MAX_COMPACTION_DELAY) == 3.0
    assert gauge(DEAD_THREAD_COUNT) == 1
    assert gauge(MAX_DIRTY) == 60
    assert gauge(TIME_SINCE_LAST_RUN) == 500
    assert gauge(UNCLEANABLE_PARTITIONS, logDirectory="/data/a") == 1
    assert gauge(UNCLEANABLE_BYTES, logDirectory="/data/a") == 4096
