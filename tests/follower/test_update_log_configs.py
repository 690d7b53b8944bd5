"""``update_log_configs``: a dynamic config change reaches the logs a follower process owns."""

from __future__ import annotations

import pathlib

from client.replica_messages import UPDATE_LOG_CONFIGS
from follower.ipc import FollowerRequestHandler
from storage.config import LogConfig
from tests.follower.test_service import T0, World, until


async def test_followed_logs_take_the_new_config(tmp_path: pathlib.Path) -> None:
    world = World(tmp_path)
    handler = FollowerRequestHandler(world.service)
    handler._configured = True  # the World configured the service directly
    try:
        leader = await world.leader(1)
        leader.log(T0, [(0, 2)])
        await world.service.add_partitions(
            [world.assignment(world.release(T0), 1, 0, **{"segment.bytes": "4096"})]
        )
        await until(lambda: world.replica(T0)["log_end_offset"] == 2)
        followed = world.service._partitions[T0].log.log
        assert followed.config.segment_bytes == 4096
        new = LogConfig(segment_bytes=2048, retention_ms=1000, max_message_bytes=777)
        body = {
            "partitions": [
                {"topic": "t", "partition": 0, "log_config": new.to_properties()},
                {"topic": "other", "partition": 0, "log_config": new.to_properties()},
            ]
        }
        assert await handler(UPDATE_LOG_CONFIGS, body) == {"updated": [["t", 0]]}
        assert world.service._partitions[T0].log.log.config == new
    finally:
        await world.close()
