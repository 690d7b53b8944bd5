"""LogConfig (Kafka's topic keys, defaults and bounds) and the clocks."""

from __future__ import annotations

import re
import time

import pytest

from storage.clock import FakeClock, SystemClock
from storage.config import LogConfig


def test_defaults_are_kafkas() -> None:
    config = LogConfig()
    assert config.segment_bytes == 1073741824 and config.segment_ms == 604800000
    assert config.index_interval_bytes == 4096 and config.max_index_size == 10485760
    assert config.retention_ms == 604800000 and config.retention_bytes == -1
    assert config.flush_messages == config.flush_ms == 2**63 - 1
    assert config.max_message_bytes == 1048588 and config.file_delete_delay_ms == 60000
    assert config.message_timestamp_type == "CreateTime" and not config.log_append_time
    assert config.compression_type == "producer"
    assert (config.compression_gzip_level, config.compression_lz4_level, config.compression_zstd_level) == (
        -1,
        9,
        3,
    )


def test_from_properties_maps_every_key() -> None:
    props = {
        "segment.bytes": "2048",
        "segment.ms": "1000",
        "segment.jitter.ms": "10",
        "index.interval.bytes": "64",
        "segment.index.bytes": "4096",
        "retention.ms": "-1",
        "retention.bytes": "100000",
        "flush.messages": "5",
        "flush.ms": "250",
        "max.message.bytes": "999",
        "message.timestamp.type": "LogAppendTime",
        "file.delete.delay.ms": "0",
        "compression.type": "zstd",
        "compression.gzip.level": "9",
        "compression.lz4.level": "1",
        "compression.zstd.level": "-5",
        "cleanup.policy": "delete",  # not a log setting: ignored
    }
    config = LogConfig.from_properties(props)
    assert config == LogConfig(
        segment_bytes=2048,
        segment_ms=1000,
        segment_jitter_ms=10,
        index_interval_bytes=64,
        max_index_size=4096,
        retention_ms=-1,
        retention_bytes=100000,
        flush_messages=5,
        flush_ms=250,
        max_message_bytes=999,
        message_timestamp_type="LogAppendTime",
        file_delete_delay_ms=0,
        compression_type="zstd",
        compression_gzip_level=9,
        compression_lz4_level=1,
        compression_zstd_level=-5,
    )
    assert config.log_append_time
    assert LogConfig.from_properties(config.to_properties()) == config


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("segment.bytes", "13", "segment.bytes must be in"),
        ("segment.bytes", "big", "segment.bytes must be an integer"),
        ("segment.ms", "0", "segment.ms"),
        ("segment.index.bytes", "3", "segment.index.bytes"),
        ("flush.messages", "0", "flush.messages"),
        ("retention.ms", "-2", "retention.ms"),
        ("file.delete.delay.ms", "-1", "file.delete.delay.ms"),
        ("message.timestamp.type", "WallClock", "message.timestamp.type must be one of"),
        ("compression.type", "brotli", "compression.type must be one of"),
        ("compression.gzip.level", "0", "compression.gzip.level must be -1 or in [1, 9]"),
        ("compression.gzip.level", "10", "compression.gzip.level must be in"),
        ("compression.lz4.level", "18", "compression.lz4.level must be in"),
        ("compression.zstd.level", "23", "compression.zstd.level must be in"),
    ],
)
def test_bad_values_are_refused_with_the_key_named(key: str, value: str, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        LogConfig.from_properties({key: value})


def test_direct_construction_is_validated_too() -> None:
    with pytest.raises(ValueError, match=r"segment\.bytes"):
        LogConfig(segment_bytes=0)


def test_fake_clock_moves_only_when_told() -> None:
    clock = FakeClock(100)
    assert clock.time_ms() == 100
    clock.advance(50)
    assert clock.time_ms() == 150
    clock.set(10)
    assert clock.time_ms() == 10
    with pytest.raises(ValueError):
        clock.advance(-1)


def test_system_clock_is_wall_time_in_ms() -> None:
    assert abs(SystemClock().time_ms() - time.time() * 1000) < 1000
