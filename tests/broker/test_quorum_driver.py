"""The quorum's driver on one voter, in process: the RaftManager elects itself, the ControllerRole
activates the controller once its epoch commits, the CommitGate releases answers once committed,
and the metadata Fetch handler parks an observer's empty fetch until the log grows."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

import pytest

from broker.cluster.controller_channel import metadata_fetch_body, parse_metadata_fetch
from broker.handlers.base import RequestContext
from broker.handlers.metadata_fetch import MetadataFetchHandler
from broker.handlers.quorum import FetchSnapshotHandler
from broker.quorum.controller_role import CommitGate, ControllerRole, RaftMetadataLog
from broker.quorum.peers import QuorumPeers
from broker.quorum.raft_manager import RaftManager
from broker.quorum.snapshots import MetadataSnapshots
from metadata.controller.active import ActiveController
from metadata.controller.controller import QuorumController
from metadata.controller.partition_log import read_metadata_log
from metadata.log_topic import METADATA_TOPIC
from metadata.raft.config import RaftConfig
from metadata.raft.quorum import RaftNode
from metadata.raft.segment_log import SegmentRaftLog, batch_entries
from metadata.raft.store import FileQuorumStateStore
from metadata.records import ProducerIdsRecord
from metadata.serde import metadata_record_value
from protocol.api_keys import ApiKey
from protocol.error_codes import ErrorCode, KafkaError
from protocol.messages import REQUESTS, RESPONSES
from storage.clock import SystemClock
from storage.config import LogConfig
from storage.log import PartitionLog

pytestmark = pytest.mark.timeout(30)

NODE = 1
FETCH_VERSION = 12


class OneVoter:
    def __init__(self, root: Path, snapshot_every_bytes: int | None = None) -> None:
        clock = SystemClock()
        self.partition_log = PartitionLog.open(root / f"{METADATA_TOPIC}-0", LogConfig(), clock)
        self.log = SegmentRaftLog(self.partition_log, clock)
        voters = frozenset({NODE})
        node = RaftNode(
            NODE,
            voters,
            self.log,
            FileQuorumStateStore(root, voters),
            clock,
            random.Random(1),
            RaftConfig(empty_fetch_backoff_ms=0),
        )
        peers = QuorumPeers(
            NODE,
            [NODE],
            lambda voter: ("127.0.0.1", 1),
            cluster_id="c",
            fetch_max_wait_ms=500,
            request_timeout_ms=2000,
            leader_endpoints=list,
        )
        snapshots = (
            None if snapshot_every_bytes is None else MetadataSnapshots(self.log, clock, snapshot_every_bytes)
        )
        self.raft = RaftManager(node, self.log, peers, clock, snapshots=snapshots)
        self.active = ActiveController(NODE)

        def build(epoch: int) -> QuorumController:
            records = [
                (offset, batch.epoch, record)
                for batch in read_metadata_log(self.partition_log)
                for offset, record in batch.records
            ]
            return QuorumController(
                RaftMetadataLog(self.raft),
                clock,
                epoch,
                "c",
                records=records,
                log_end_offset=self.partition_log.log_end_offset,
            )

        self.role = ControllerRole(self.raft, self.active, build)
        self.gate = CommitGate(self.raft, self.active, max_wait_s=4.0)

    async def until_active(self) -> QuorumController:
        async with asyncio.timeout(10):
            while self.active.current is None:
                await self.raft.wait_for_change(0.1)
        return self.active.get()


async def _fetch(handler: MetadataFetchHandler, offset: int, last_epoch: int, max_wait_ms: int) -> object:
    body = metadata_fetch_body(
        broker_id=9,
        replica_id=-1,
        fetch_offset=offset,
        last_fetched_epoch=last_epoch,
        current_leader_epoch=-1,
        max_wait_ms=max_wait_ms,
        max_bytes=1 << 20,
    )
    request = (
        REQUESTS[ApiKey.FETCH]
        .codec(FETCH_VERSION)
        .decode(REQUESTS[ApiKey.FETCH].codec(FETCH_VERSION).encode(body))
    )
    ctx = RequestContext(int(ApiKey.FETCH), FETCH_VERSION, 1, "test", "127.0.0.1:1", 1, 0)
    encoded = await handler.handle(ctx, request)
    wire = b"".join(
        bytes(part) if not hasattr(part, "read_bytes") else part.read_bytes() for part in encoded.parts
    )
    return parse_metadata_fetch(RESPONSES[ApiKey.FETCH].codec(FETCH_VERSION).decode(wire))


async def test_a_single_voter_leads_activates_its_controller_and_commits_at_once(tmp_path: Path) -> None:
    voter = OneVoter(tmp_path)
    voter.raft.start()
    try:
        controller = await voter.until_active()
        assert voter.raft.is_leader and controller.controller_epoch == voter.raft.epoch == 1
        assert controller.image.offset == voter.raft.log.end_offset - 1  # read up to its LeaderChange
        await voter.gate.wait()  # nothing pending: released at once
        with pytest.raises(KafkaError) as refused:
            RaftMetadataLog(voter.raft).append([], epoch=voter.raft.epoch + 1)
        assert refused.value.code == ErrorCode.NOT_CONTROLLER
    finally:
        await voter.raft.stop()
        voter.partition_log.close()


async def test_an_observer_fetch_is_parked_until_a_commit_and_names_the_leader(tmp_path: Path) -> None:
    voter = OneVoter(tmp_path)
    voter.raft.start()
    try:
        await voter.until_active()
        handler = MetadataFetchHandler(voter.raft)
        end = voter.raft.log.end_offset
        caught_up = await _fetch(handler, 0, 0, 0)
        assert caught_up.current_leader == (NODE, 1) and caught_up.high_watermark == end
        parked = asyncio.create_task(_fetch(handler, end, 1, 5_000))
        await asyncio.sleep(0.2)
        assert not parked.done()  # nothing new: the fetch waits
        voter.raft.append([b"x"])  # a new committed batch (one voter: committed at once)
        fetched = await asyncio.wait_for(parked, 2)
        assert fetched.high_watermark == end + 1
        assert [entry.offset for entry in batch_entries(fetched.records)] == [end]
    finally:
        await voter.raft.stop()
        voter.partition_log.close()


async def test_a_snapshot_lets_the_log_be_cleaned_and_an_observer_is_pointed_to_it(tmp_path: Path) -> None:
    voter = OneVoter(tmp_path, snapshot_every_bytes=1)
    voter.raft.start()
    try:
        await voter.until_active()
        voter.raft.append([metadata_record_value(ProducerIdsRecord(1, 0, 1000))])
        snapshot = voter.log.latest_snapshot_id
        assert snapshot is not None and snapshot[0] == voter.raft.log.end_offset
        assert voter.log.start_offset == snapshot[0]  # one voter: nobody else needs the log
        handler = MetadataFetchHandler(voter.raft)
        pointed = await _fetch(handler, 0, 0, 0)
        assert pointed.snapshot_id == snapshot and pointed.records == b""
        serving = FetchSnapshotHandler(voter.raft, "c")
        body = {
            "replica_id": -1,
            "max_bytes": 64,
            "topics": [
                {
                    "name": METADATA_TOPIC,
                    "partitions": [
                        {
                            "partition": 0,
                            "current_leader_epoch": -1,
                            "snapshot_id": {"end_offset": snapshot[0], "epoch": snapshot[1]},
                            "position": 0,
                        }
                    ],
                }
            ],
        }
        codec = REQUESTS[ApiKey.FETCH_SNAPSHOT].codec(0)
        ctx = RequestContext(int(ApiKey.FETCH_SNAPSHOT), 0, 1, "test", "127.0.0.1:1", 1, 0)
        answer = await serving.handle(ctx, codec.decode(codec.encode(body)))
        chunk = answer["topics"][0]["partitions"][0]
        assert chunk["error_code"] == 0 and len(chunk["unaligned_records"]) == 64 and chunk["size"] > 64
        body["topics"][0]["partitions"][0]["snapshot_id"]["end_offset"] = 1
        missing = await serving.handle(ctx, codec.decode(codec.encode(body)))
        assert missing["topics"][0]["partitions"][0]["error_code"] == ErrorCode.SNAPSHOT_NOT_FOUND
    finally:
        await voter.raft.stop()
        voter.partition_log.close()


async def test_a_controller_whose_metadata_append_fails_steps_down_and_is_rebuilt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A full metadata disk fails the active controller's append: it stops serving at once
    (NOT_CONTROLLER, not a failed controller answering UNKNOWN_SERVER_ERROR), and a single voter,
    with nobody to hand over to, builds a new one from the log, which the failed append left
    as it was."""
    voter = OneVoter(tmp_path)
    voter.raft.start()
    try:
        controller = await voter.until_active()
        end = voter.raft.log.end_offset
        append = voter.partition_log.append_as_leader

        def full(*args: object, **kwargs: object) -> object:
            raise OSError(28, "No space left on device")

        monkeypatch.setattr(voter.partition_log, "append_as_leader", full)
        with pytest.raises(KafkaError) as failed:
            controller.import_records([ProducerIdsRecord(1, 0, 1000)])
        assert failed.value.code == ErrorCode.NOT_CONTROLLER  # the caller retries with the next one
        assert voter.active.current is None
        with pytest.raises(KafkaError) as refused:
            voter.active.get()
        assert refused.value.code == ErrorCode.NOT_CONTROLLER
        monkeypatch.setattr(voter.partition_log, "append_as_leader", append)
        rebuilt = await voter.until_active()
        assert rebuilt is not controller and voter.raft.log.end_offset == end
        rebuilt.import_records([ProducerIdsRecord(1, 0, 1000)])
        assert voter.raft.log.end_offset == end + 1
    finally:
        await voter.raft.stop()
        voter.partition_log.close()
