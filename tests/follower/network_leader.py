"""A FakeLeader served over TCP, so real follower code (and real follower processes) can replicate from it.

tests/follower/fake_leader.py implements the leader's rules over in-memory logs; this puts them
behind tests/fake_broker.py, which speaks kipling's real codecs. It answers ApiVersions, Fetch (up
to v12: topic names, sessionless — every response closes the session, so each request is full),
OffsetForLeaderEpoch and ListOffsets. A Fetch that finds no records waits a little, as a leader's
purgatory would, so an idle follower does not spin.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from follower.fetch_state import LeaderEpoch, Offset, TopicPartition
from follower.leader_endpoint import FetchPartitionData, FetchPartitionParams, full_fetch_request
from protocol.api import Request
from protocol.api_keys import ApiKey
from protocol.error_codes import KafkaError
from tests.fake_broker import CLOSE, FakeBroker, Reply
from tests.follower.fake_leader import FakeLeader, FakeLeaderLog

API_RANGES = [
    {"api_key": ApiKey.API_VERSIONS, "min_version": 0, "max_version": 3},
    {"api_key": ApiKey.FETCH, "min_version": 4, "max_version": 12},
    {"api_key": ApiKey.LIST_OFFSETS, "min_version": 1, "max_version": 9},
    {"api_key": ApiKey.OFFSET_FOR_LEADER_EPOCH, "min_version": 0, "max_version": 4},
]


class NetworkLeader:
    """The logs of one leader broker, reachable at ``host:port``."""

    def __init__(self, leader: FakeLeader | None = None, *, idle_wait_s: float = 0.05) -> None:
        self.leader = leader if leader is not None else FakeLeader()
        self.idle_wait_s = idle_wait_s
        self.broker = FakeBroker(self._script)
        self.host = "127.0.0.1"
        self._stopping = asyncio.Event()
        self.drop_next_fetches = 0
        """Close the connection instead of answering this many Fetch requests (a leader restarting)."""

    @property
    def port(self) -> int:
        return self.broker.port

    async def start(self) -> NetworkLeader:
        await self.broker.start()
        return self

    async def stop(self, grace_s: float = 1.0) -> None:
        """End idle waits and let connections their clients closed finish before cancelling the rest.

        (Python 3.11's stream server logs a cancelled connection handler as an unhandled error.)
        """
        self._stopping.set()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + grace_s
        while self.broker._tasks and loop.time() < deadline:
            await asyncio.sleep(0.01)
        await self.broker.stop()

    def log(
        self, tp: TopicPartition, batches: list[tuple[int, int]] = (), leader_epoch: int = 0
    ) -> FakeLeaderLog:
        """A leader log of ``tp`` with batches (epoch, records) from offset 0, now in ``leader_epoch``."""
        log = self.leader.add_log(tp, batches[0][0] if batches else leader_epoch)
        for epoch, records in batches:
            log.append(records, epoch)
        log.become_leader(leader_epoch)
        return log

    def fetches(self) -> list[Request]:
        return self.broker.of(ApiKey.FETCH)

    # -- serving -------------------------------------------------------------------------------------

    async def _script(self, request: Request) -> Reply:
        if request.api_key == ApiKey.FETCH and self.drop_next_fetches > 0:
            self.drop_next_fetches -= 1
            return CLOSE
        handlers = {
            ApiKey.API_VERSIONS: self._api_versions,
            ApiKey.FETCH: self._fetch,
            ApiKey.OFFSET_FOR_LEADER_EPOCH: self._epochs,
            ApiKey.LIST_OFFSETS: self._list_offsets,
        }
        body = await handlers[ApiKey(request.api_key)](request)
        return request.api_version, body, None

    async def _api_versions(self, request: Request) -> dict[str, Any]:
        return {"error_code": 0, "api_keys": API_RANGES, "throttle_time_ms": 0}

    async def _fetch(self, request: Request) -> dict[str, Any]:
        params: dict[TopicPartition, FetchPartitionParams] = {}
        for topic in request.body.topics:
            for p in topic.partitions:
                last = p.last_fetched_epoch
                params[(topic.topic, p.partition)] = FetchPartitionParams(
                    Offset(p.fetch_offset),
                    Offset(p.log_start_offset),
                    LeaderEpoch(p.current_leader_epoch),
                    LeaderEpoch(last) if last >= 0 else None,
                )
        request_data = full_fetch_request(params)
        data = await self.leader.fetch(request_data) if request_data is not None else {}
        if not any(d.records for d in data.values()) and not self._stopping.is_set():
            with contextlib.suppress(TimeoutError):
                wait_s = min(self.idle_wait_s, request.body.max_wait_ms / 1000)
                await asyncio.wait_for(self._stopping.wait(), wait_s)
        topics: dict[str, list[dict[str, Any]]] = {}
        for (topic, partition), result in data.items():
            topics.setdefault(topic, []).append(_partition(partition, result))
        responses = [{"topic": topic, "partitions": parts} for topic, parts in topics.items()]
        return {"throttle_time_ms": 0, "error_code": 0, "session_id": 0, "responses": responses}

    async def _epochs(self, request: Request) -> dict[str, Any]:
        asked = {
            (topic.topic, p.partition): (LeaderEpoch(p.current_leader_epoch), LeaderEpoch(p.leader_epoch))
            for topic in request.body.topics
            for p in topic.partitions
        }
        results = await self.leader.fetch_epoch_end_offsets(asked)
        topics: dict[str, list[dict[str, Any]]] = {}
        for (topic, partition), result in results.items():
            topics.setdefault(topic, []).append(
                {
                    "partition": partition,
                    "error_code": result.error.value,
                    "leader_epoch": result.leader_epoch,
                    "end_offset": result.end_offset,
                }
            )
        return {"throttle_time_ms": 0, "topics": [{"topic": t, "partitions": ps} for t, ps in topics.items()]}

    async def _list_offsets(self, request: Request) -> dict[str, Any]:
        topics = []
        for topic in request.body.topics:
            partitions = []
            for p in topic.partitions:
                tp = (topic.name, p.partition_index)
                answer: dict[str, Any] = {"partition_index": p.partition_index, "timestamp": -1}
                try:
                    if p.timestamp == -2:
                        found = await self.leader.fetch_earliest_offset(
                            tp, LeaderEpoch(p.current_leader_epoch)
                        )
                    else:
                        found = await self.leader.fetch_latest_offset(tp, LeaderEpoch(p.current_leader_epoch))
                    answer.update(error_code=0, offset=found.offset, leader_epoch=found.leader_epoch)
                except KafkaError as exc:
                    answer.update(error_code=exc.code.value, offset=-1, leader_epoch=-1)
                partitions.append(answer)
            topics.append({"name": topic.name, "partitions": partitions})
        return {"throttle_time_ms": 0, "topics": topics}


def _partition(partition: int, data: FetchPartitionData) -> dict[str, Any]:
    out: dict[str, Any] = {
        "partition_index": partition,
        "error_code": data.error.value,
        "high_watermark": data.high_watermark,
        "last_stable_offset": data.high_watermark,
        "log_start_offset": data.log_start_offset,
        "aborted_transactions": [],
        "preferred_read_replica": -1,
        "records": bytes(data.records) or None,
    }
    if data.diverging_epoch is not None:
        out["diverging_epoch"] = {
            "epoch": data.diverging_epoch.leader_epoch,
            "end_offset": data.diverging_epoch.end_offset,
        }
    return out
