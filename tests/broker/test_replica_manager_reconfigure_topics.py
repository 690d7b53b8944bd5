"""Dynamic configs: a cluster-wide default change reconfigures every topic's led partitions
in one pass.

``DynamicConfigPublisher`` hands every topic to the ReplicaManager when a broker default changes;
``reconfigure_topic`` scanned all led partitions for each topic (topics x partitions on the event
loop). ``reconfigure_topics`` groups them in a single pass.
"""

from __future__ import annotations

import pathlib
from dataclasses import replace
from typing import Any

from broker.replication.replica_manager import ReplicaManager
from server_common.config import BrokerConfigLayers, load_config, to_log_config
from storage.clock import FakeClock
from storage.log_manager import LogManager
from tests.broker.local_topics import LocalTopics

NODE = 1


class _CountingDict(dict[Any, Any]):
    scans = 0

    def items(self) -> Any:
        type(self).scans += 1
        return super().items()


def test_every_topic_reconfigured_in_one_pass(tmp_path: pathlib.Path) -> None:
    config = load_config(None, [f"log.dirs={tmp_path / 'logs'}", f"node.id={NODE}"])[0]
    defaults = {"log.segment.bytes": "8192"}
    log_manager = LogManager(config.log_dirs, to_log_config({}, config), FakeClock(1_700_000_000_000))
    topics = LocalTopics(NODE)
    replicas = ReplicaManager(
        log_manager,
        topics,
        NODE,
        config,
        FakeClock(1_700_000_000_000),
        broker_layers=lambda: BrokerConfigLayers(config, defaults),
    )
    topics.subscribe(replicas)
    try:
        created = [topics.create_topic(f"t{index}", 2, 1, {}) for index in range(20)]
        pinned = replace(created[0], configs={"segment.bytes": "4096"})
        defaults["log.segment.bytes"] = "2048"
        replicas._partitions = _CountingDict(replicas._partitions)  # type: ignore[assignment]
        _CountingDict.scans = 0
        assert replicas.reconfigure_topics([pinned, *created[1:]]) == 40
        assert _CountingDict.scans == 1
        sizes = {
            (name, index): partition.log.config.segment_bytes
            for (name, index), partition in dict.items(replicas._partitions)
        }
        assert sizes[("t0", 0)] == sizes[("t0", 1)] == 4096  # the topic's override wins
        assert {size for tp, size in sizes.items() if tp[0] != "t0"} == {2048}
        assert replicas.reconfigure_topics(created[1:]) == 0  # nothing left to change
        assert replicas.reconfigure_topic(created[0]) == 2  # the override dropped: the default
    finally:
        replicas.shutdown()
        log_manager.shutdown()
