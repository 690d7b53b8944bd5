"""Dynamic configs: a followed partition re-added with a new leader takes the config of
the same assignment.

A metadata delta that changes a topic's config and its partition's leader reaches a follower
process only through ``add_partitions``: the broker's table takes the new config with the new
leader, so its later ``update_log_configs`` finds nothing to send.
"""

from __future__ import annotations

import pathlib

from tests.follower.test_service import T0, World, until


async def test_a_leader_change_carries_the_new_log_config(tmp_path: pathlib.Path) -> None:
    world = World(tmp_path)
    try:
        leader = await world.leader(1)
        leader.log(T0, [(0, 2)])
        handover = world.release(T0)
        await world.service.add_partitions([world.assignment(handover, 1, 0, **{"segment.bytes": "4096"})])
        await until(lambda: world.replica(T0)["log_end_offset"] == 2)
        assert world.service._partitions[T0].log.log.config.segment_bytes == 4096

        await world.service.add_partitions(
            [world.assignment(handover, 1, 1, **{"segment.bytes": "2048", "retention.ms": "1000"})]
        )
        config = world.service._partitions[T0].log.log.config
        assert (config.segment_bytes, config.retention_ms) == (2048, 1000)
        assert world.service._partitions[T0].leader_epoch == 1
    finally:
        await world.close()
