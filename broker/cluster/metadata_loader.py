"""The broker's copy of the cluster metadata: fetch the controller's metadata log, replay, publish.

KRaft brokers are observers of the ``__cluster_metadata`` log: they fetch it from the controller
with ordinary Fetch requests (long-polled, so a change reaches every broker within one round
trip), replay each batch into their :class:`~metadata.image.MetadataImage`, and act on what
changed (become leader or follower of a partition, create or delete logs). The
:class:`MetadataLoader` is that loop.

Ordering rules that keep a broker from acting on stale metadata:

* Deltas are published one at a time, in log order, and the next batch is not applied before the
  previous delta's publication finished (a leadership change awaits the handover of the
  partition's files between the broker and its follower processes).
* Until it has caught up, the loader applies batches to the image without publishing them; it
  then publishes the whole image once (``publish_initial``), so that start-up acts on the current
  leaders rather than replaying every past leadership change, and only then publishes deltas.
* The loader reports itself caught up (:meth:`wait_caught_up`) only once it has applied
  everything below the controller's high watermark as of one fetch. The broker opens its client
  listener after that, as a Kafka broker starts serving only after its initial metadata catch-up:
  until then it could answer with leaders from an old image.

At start-up the loader first replays this node's local copy of the committed log
(:mod:`metadata.local_copy`: its newest snapshot, then the batches after it), then fetches from
where it ends. Brokers fetch from the quorum's leader (a voter that does not lead answers with the
leader's id, which moves every channel of this node there) and get committed batches only. A
fetch below the leader's log start is answered with a snapshot to load instead (FetchSnapshot,
KIP-630). A broker that cannot reach the quorum keeps retrying with a backoff and keeps serving
with the image it has.
"""

from __future__ import annotations

import asyncio
import os
import pathlib
from collections.abc import Awaitable, Callable

import structlog

from broker.cluster.background import BackgroundTask
from broker.cluster.controller_channel import ControllerChannel, ControllerUnavailableError, MetadataFetch
from metadata.image import MetadataDelta, MetadataImage, MetadataReplayError
from metadata.local_copy import LocalMetadataCopy, ReplayPosition, replay_committed
from metadata.serde import decode_metadata_batches
from metadata.snapshot import (
    CorruptSnapshotError,
    SnapshotId,
    SnapshotPositionError,
    finish_fetched_snapshot,
    load_snapshot,
    snapshot_path,
    write_snapshot_chunk,
)
from protocol.error_codes import ErrorCode
from protocol.errors import ProtocolError
from protocol.sentinels import NO_LEADER_EPOCH
from storage.checkpoint import fsync_directory
from storage.errors import StorageError

__all__ = ["MetadataLoader"]

DEFAULT_FETCH_MAX_WAIT_MS = 500
RETRY_BACKOFF_S = 0.2
SNAPSHOT_CHUNK_BYTES = 1 << 20
SNAPSHOT_STAGING_DIR = "broker-snapshot-download"
"""Where the loader assembles a fetched snapshot, inside the metadata log's directory (the storage
layer leaves subdirectories alone) and apart from a voter fetching into the directory itself."""

Publisher = Callable[[MetadataDelta, MetadataImage], Awaitable[None]]
InitialPublisher = Callable[[MetadataImage], Awaitable[None]]

_log = structlog.get_logger("kipling.metadata_loader")


class MetadataLoader:
    """Fetches the metadata log from the controller, replays it, and publishes each delta."""

    def __init__(
        self,
        channel: ControllerChannel,
        image: MetadataImage,
        publish: Publisher,
        publish_initial: InitialPublisher,
        *,
        broker_id: int,
        fetch_max_wait_ms: int = DEFAULT_FETCH_MAX_WAIT_MS,
        observer_id: int = -1,
        local: LocalMetadataCopy | None = None,
        publish_local_initial: InitialPublisher | None = None,
        delete_strays: Callable[[MetadataImage], None] | None = None,
    ) -> None:
        """``observer_id`` is the replica id the fetches name: a broker that is not a voter names
        itself, so the quorum's leader lists it among the observers (DescribeQuorum); a combined
        node's broker side sends -1, since its voter already fetches under that id."""
        self._observer_id = observer_id
        self._local = local
        self._publish_local_initial = publish_local_initial
        self._delete_strays = delete_strays
        self._published_locally = False
        self._published = False
        """The image was published (initially, then every delta): at catch-up, or earlier when the
        broker starts from its local copy because no controller answers."""
        self._channel = channel
        self.image = image
        self._publish = publish
        self._publish_initial = publish_initial
        self._broker_id = broker_id
        self._fetch_max_wait_ms = fetch_max_wait_ms
        self._next_offset = 0
        self._last_epoch = NO_LEADER_EPOCH
        self._caught_up = asyncio.Event()
        self._changed = asyncio.Event()
        self._task = BackgroundTask("metadata-loader", self._run)
        self._logger = _log.bind(broker_id=broker_id)

    # -- state -------------------------------------------------------------------------------------

    @property
    def next_offset(self) -> int:
        """The offset of the next metadata record to apply (what heartbeats report as caught up to)."""
        return self._next_offset

    @property
    def caught_up(self) -> bool:
        return self._caught_up.is_set()

    async def wait_caught_up(self) -> None:
        await self._caught_up.wait()

    async def wait_for(self, predicate: Callable[[MetadataImage], bool], timeout_s: float) -> bool:
        """Wait until ``predicate(image)`` holds after some applied batch; False on timeout.

        Forwarded admin requests use this to answer only once this broker's own metadata shows
        their effect (a created topic is then visible to the client's next Metadata request).
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while not predicate(self.image):
            remaining = deadline - loop.time()
            if remaining <= 0:
                return False
            self._changed.clear()
            try:
                async with asyncio.timeout(remaining):
                    await self._changed.wait()
            except TimeoutError:
                return predicate(self.image)
        return True

    # -- the local copy ------------------------------------------------------------------------------

    def load_local(self) -> int:
        """Replay this node's local copy of the committed log into the image (nothing published);
        the fetches then go on from where it ends. Returns that offset (0 without a copy)."""
        if self._local is None:
            return self._next_offset
        position = ReplayPosition(self._next_offset, self._last_epoch)
        try:
            replay_committed(self._local, self.image, position)
        finally:
            self._next_offset, self._last_epoch = position.next_offset, position.epoch
        if self._next_offset:
            self._logger.info("local metadata copy replayed", next_offset=self._next_offset)
        return self._next_offset

    async def publish_local(self) -> None:
        """Act on the image replayed from the local copy now, before catching up with the quorum
        (it cannot be reached): later batches are published as deltas as they arrive."""
        if not self._published:
            self._logger.warning(
                "no controller reachable: serving with the local metadata copy", offset=self._next_offset
            )
            await (self._publish_local_initial or self._publish_initial)(self.image)
            self._published = self._published_locally = True
            self._changed.set()

    # -- lifecycle ---------------------------------------------------------------------------------

    def start(self) -> None:
        self._task.start()

    async def stop(self) -> None:
        await self._task.stop()

    async def _run(self) -> None:
        while True:
            try:
                fetched = await self._channel.fetch_metadata(
                    broker_id=self._broker_id,
                    replica_id=self._observer_id,
                    fetch_offset=self._next_offset,
                    last_fetched_epoch=self._last_epoch,
                    max_wait_ms=0 if not self.caught_up else self._fetch_max_wait_ms,
                )
            except ControllerUnavailableError as exc:
                self._logger.warning("metadata fetch failed", error=str(exc))
                await asyncio.sleep(RETRY_BACKOFF_S)
                continue
            if not await self._handle(fetched):
                await asyncio.sleep(RETRY_BACKOFF_S)

    async def _handle(self, fetched: MetadataFetch) -> bool:
        """Apply one fetch; False when the caller should back off before the next one."""
        if fetched.error != ErrorCode.NONE:
            self._logger.warning("metadata fetch error", error=fetched.error.name)
            return False
        if fetched.snapshot_id is not None:
            return await self._install_snapshot(SnapshotId(*fetched.snapshot_id))
        if fetched.diverging_epoch is not None:
            # A broker is sent committed batches only, which no leader ever truncates: a diverging
            # epoch means the quorum lost committed entries (disks restored from old copies).
            # Applying anything more would mix two histories, so the broker stops and says so.
            self._logger.error(
                "the controller's metadata log diverged from the applied one; restart this broker",
                diverging_epoch=fetched.diverging_epoch,
                next_offset=self._next_offset,
            )
            return False
        if fetched.records:
            try:
                await self._apply(fetched.records)
                self._keep_locally(fetched.records)
            except ProtocolError as exc:
                self._logger.error("undecodable metadata batch", error=str(exc), offset=self._next_offset)
                return False
            except MetadataReplayError as exc:
                # The image refused a record (it contradicts what was applied): stop applying rather
                # than act on a history this broker cannot reconcile; the error names the record.
                self._logger.error("metadata batch refused by the image", error=str(exc), offset=exc.offset)
                return False
        # A HW of -1 is a leader that has not committed an entry of its epoch yet: the end of the
        # committed log is unknown, so nothing is caught up to (it would delete logs as strays).
        if not self.caught_up and 0 <= fetched.high_watermark <= self._next_offset:
            self._logger.info("metadata caught up", offset=self._next_offset)
            if not self._published:
                await self._publish_initial(self.image)
                self._published = True
            elif self._published_locally and self._delete_strays is not None:
                self._delete_strays(self.image)  # only now is the image complete
            self._caught_up.set()
            self._changed.set()
        return True

    async def _install_snapshot(self, snapshot: SnapshotId) -> bool:
        """The log before our fetch offset was cleaned: fetch its snapshot (FetchSnapshot, KIP-630)
        into the local copy's directory, unless a voter of this node has it there already, load it
        as the image and fetch on from its end."""
        if self._local is None:
            self._logger.error(
                "the metadata log was cleaned and this broker has no local copy to load a snapshot into"
            )
            return False
        directory = self._local.directory
        if not snapshot_path(directory, snapshot).exists() and not await self._download_snapshot(
            directory, snapshot
        ):
            return False
        try:
            image = load_snapshot(directory, snapshot)
        except (CorruptSnapshotError, OSError, ValueError) as exc:
            self._logger.error("the metadata snapshot is unusable", error=str(exc))
            return False
        self.image.replace_with(image)
        self._next_offset, self._last_epoch = snapshot.end_offset, snapshot.epoch
        self._local.snapshot_installed(snapshot)
        self._logger.info("metadata snapshot loaded", end_offset=snapshot.end_offset, topics=len(image.all()))
        if self._published:
            await self._publish_initial(self.image)  # everything again, strays included
        self._changed.set()
        return True

    async def _download_snapshot(self, directory: pathlib.Path, snapshot: SnapshotId) -> bool:
        """FetchSnapshot chunk after chunk into a staging directory of this loader's own (a voter of
        this node may be fetching the same snapshot into ``directory``), then the checked file is
        moved into ``directory``; False (logged) if it could not be had."""
        self._logger.info(
            "fetching a metadata snapshot", end_offset=snapshot.end_offset, epoch=snapshot.epoch
        )
        staging = directory / SNAPSHOT_STAGING_DIR
        position = 0
        try:
            staging.mkdir(exist_ok=True)
            while True:
                chunk = await self._channel.fetch_snapshot(
                    replica_id=self._observer_id,
                    snapshot_id=(snapshot.end_offset, snapshot.epoch),
                    position=position,
                    max_bytes=SNAPSHOT_CHUNK_BYTES,
                )
                if chunk.error != ErrorCode.NONE:
                    self._logger.warning("snapshot fetch error", error=chunk.error.name)
                    return False
                if not chunk.data:
                    break
                position = write_snapshot_chunk(staging, snapshot, position, chunk.data)
                if position >= chunk.size:
                    break
            fetched = finish_fetched_snapshot(staging, snapshot)
            os.replace(fetched, snapshot_path(directory, snapshot))
            fsync_directory(directory)
        except ControllerUnavailableError as exc:
            self._logger.warning("snapshot fetch failed", error=str(exc))
            return False
        except (CorruptSnapshotError, SnapshotPositionError, OSError, ValueError) as exc:
            self._logger.error("the fetched metadata snapshot is unusable", error=str(exc))
            return False
        return True

    def _keep_locally(self, records: bytes) -> None:
        if self._local is None:
            return
        try:
            self._local.append_committed(records)
        except (OSError, StorageError, ValueError) as exc:  # the copy only helps a later start
            self._logger.error("could not keep the metadata in the local copy", error=str(exc))

    async def _apply(self, records: bytes) -> None:
        for batch in decode_metadata_batches(records):
            if batch.last_offset < self._next_offset:
                continue
            delta = self.image.apply_batch(batch.records, batch.epoch)
            self._next_offset = batch.last_offset + 1
            self._last_epoch = batch.epoch
            if self._published:
                await self._publish(delta, self.image)
                self._changed.set()
