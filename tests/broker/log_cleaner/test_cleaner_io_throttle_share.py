"""log.cleaner.io.max.bytes.per.second bounds the I/O of all cleaners together, as Kafka's
LogCleaner shares one Throttler between its threads. Kipling runs one cleaner process per log dir in
the broker and in each follower process; each must get its share of the rate, as of the offset map."""

from __future__ import annotations

import pathlib
from types import SimpleNamespace
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from broker.log_cleaner.service import build_log_cleaner
from broker.replication.followers.settings import follower_cleaner_settings
from client.cleaner_messages import CleanerSettings
from server_common.config import BrokerConfig
from storage.clock import FakeClock

pytestmark = pytest.mark.timeout(30)

RATE = 30_000_000.0
BUFFER = 96 * 1024 * 1024


def config(tmp_path: pathlib.Path) -> BrokerConfig:
    dirs = ",".join(str(tmp_path / name) for name in ("a", "b"))
    static, _ = BrokerConfig.from_properties(
        {
            "node.id": "1",
            "log.dirs": dirs,
            "num.replica.fetchers": "2",
            "log.cleaner.io.max.bytes.per.second": str(RATE),
            "log.cleaner.dedupe.buffer.size": str(BUFFER),
        }
    )
    return static


def test_every_cleaner_process_gets_a_share_of_the_io_rate(tmp_path: pathlib.Path) -> None:
    cfg = config(tmp_path)
    replicas: Any = SimpleNamespace(log_manager=SimpleNamespace(log_dirs=list(cfg.log_dirs)))
    cleaner = build_log_cleaner(cfg, replicas, FakeClock(0), CollectorRegistry())
    assert cleaner is not None
    broker_share: CleanerSettings = cleaner._settings
    follower_share = CleanerSettings.from_json(follower_cleaner_settings(cfg))
    processes_per_owner = len(cfg.log_dirs)  # one cleaner process per log dir
    owners = 1 + cfg.num_replica_fetchers  # the broker and its follower processes
    total_rate = (
        broker_share.io_max_bytes_per_second + follower_share.io_max_bytes_per_second * (owners - 1)
    ) * (processes_per_owner)
    assert total_rate == pytest.approx(RATE)
    total_buffer = (broker_share.dedupe_buffer_size + follower_share.dedupe_buffer_size * (owners - 1)) * (
        processes_per_owner
    )
    assert total_buffer <= BUFFER
