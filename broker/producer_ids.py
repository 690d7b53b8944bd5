"""Producer ids for idempotent producers: unique for the life of the cluster, never reused.

A producer id identifies a producer's sequence space in every partition it writes to. If an id
were handed out twice, two producers would share sequence numbers: the second one's batches
would be refused as out of order, or worse, dropped as "duplicates" of the first one's. So ids only
go up, and the broker must never hand out an id it may have handed out before a crash.

Ids come in blocks of :data:`BLOCK_SIZE`, as in Kafka (the controller's ProducerIdControlManager).
:class:`LocalProducerIdBlockSource` records the end of each block in a small file in the first log
directory *before* any id of the block is used, so a restart starts at the next block and at
most one block of ids is skipped, never repeated. The file costs one atomic write per thousand ids.
In a cluster the controller allocates the blocks (AllocateProducerIds), fetched ahead by
:class:`broker.cluster.producer_id_blocks.ControllerProducerIdManager`.
"""

from __future__ import annotations

import pathlib
from typing import Protocol

import structlog

from metadata.producer_id_block import BLOCK_SIZE, MAX_PRODUCER_ID, ProducerIdBlock
from storage.checkpoint import write_atomically

PRODUCER_ID_BLOCK_FILE = "__kipling_producer_id_block"
"""The file, in the first log dir, holding the first id of the next block."""
FILE_VERSION = 0

_log = structlog.get_logger("kipling.producer_ids")


class ProducerIdStoreError(Exception):
    """The block file is unreadable: starting anyway could hand out ids already in use."""


class ProducerIdsUnavailableError(Exception):
    """No producer id at hand yet (a cluster broker waiting for its block): retriable."""


class ProducerIdGenerator(Protocol):
    """What InitProducerId needs: the next id, or ProducerIdsUnavailableError while none is at hand."""

    def generate_producer_id(self) -> int: ...


class ProducerIdsExhaustedError(Exception):
    """Every 64-bit producer id has been handed out (Kafka fails the same way)."""


class ProducerIdBlockSource(Protocol):
    """Reserves blocks of producer ids; a block is durable once returned."""

    def next_block(self) -> ProducerIdBlock: ...


class LocalProducerIdBlockSource:
    """Blocks reserved in a file (single node): the file holds the first id of the next block.

    The file is two lines, ``version: 0`` and ``next_block_start: <id>``, replaced atomically (temp
    file, fsync, rename, directory fsync). A missing file means no id was ever handed out.
    """

    def __init__(self, path: pathlib.Path, block_size: int = BLOCK_SIZE, first_id: int = 0) -> None:
        """``first_id`` is where a broker that never handed out an id starts."""
        if block_size < 1:
            raise ValueError(f"producer id block size must be positive, got {block_size}")
        self.path = pathlib.Path(path)
        self.block_size = block_size
        self._first_id = first_id
        self._next_start = self._read()

    @classmethod
    def in_log_dir(
        cls, log_dir: pathlib.Path, block_size: int = BLOCK_SIZE, first_id: int = 0
    ) -> LocalProducerIdBlockSource:
        return cls(pathlib.Path(log_dir) / PRODUCER_ID_BLOCK_FILE, block_size, first_id)

    def next_block(self) -> ProducerIdBlock:
        """Persist the end of a new block, then return it; raises OSError if the write fails."""
        start = self._next_start
        size = min(self.block_size, MAX_PRODUCER_ID - start + 1)
        if size <= 0:
            raise ProducerIdsExhaustedError("every producer id has been allocated")
        block = ProducerIdBlock(start, size)
        write_atomically(
            self.path, f"version: {FILE_VERSION}\nnext_block_start: {block.next_block_first_id}\n"
        )
        self._next_start = block.next_block_first_id
        _log.info("producer id block reserved", first_id=block.first_id, size=block.size)
        return block

    def _read(self) -> int:
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return self._first_id
        except OSError as exc:
            raise ProducerIdStoreError(f"{self.path}: {exc}") from exc
        lines = text.splitlines()
        if len(lines) != 2 or lines[0].strip() != f"version: {FILE_VERSION}":
            raise ProducerIdStoreError(f"{self.path}: not a producer id block file (version {FILE_VERSION})")
        name, _, value = lines[1].partition(":")
        value = value.strip()
        if name.strip() != "next_block_start" or not value.isdigit():
            raise ProducerIdStoreError(f"{self.path}: malformed line {lines[1]!r}")
        return int(value)


class ProducerIdManager:
    """Hands out producer ids one by one from the current block (Kafka's ProducerIdManager)."""

    def __init__(self, source: ProducerIdBlockSource) -> None:
        self._source = source
        self._next_id = 0
        self._block_end = 0  # no block yet: the first call reserves one

    def generate_producer_id(self) -> int:
        """A producer id never returned before, by this broker or, through the source, any other."""
        if self._next_id >= self._block_end:
            block = self._source.next_block()
            self._next_id, self._block_end = block.first_id, block.next_block_first_id
        producer_id = self._next_id
        self._next_id += 1
        return producer_id
