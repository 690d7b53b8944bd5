"""Producer ids for idempotent producers: unique for the life of the cluster, never reused.

A producer id identifies a producer's sequence space in every partition it writes to. If an id
were handed out twice, two producers would share sequence numbers: the second one's batches
would be refused as out of order, or worse, dropped as "duplicates" of the first one's. So ids only
go up: the controller hands them out in blocks recorded in the metadata log
(:class:`metadata.producer_id_block.ProducerIdBlock`, ProducerIdsRecord), and each broker fetches
its blocks ahead (:class:`broker.cluster.producer_id_blocks.ControllerProducerIdManager`).
"""

from __future__ import annotations

from typing import Protocol


class ProducerIdsUnavailableError(Exception):
    """No producer id at hand yet (the broker is waiting for its block): retriable."""


class ProducerIdGenerator(Protocol):
    """What InitProducerId needs: the next id, or ProducerIdsUnavailableError while none is at hand."""

    def generate_producer_id(self) -> int: ...
