"""A block of producer ids, the unit in which the controller hands them out (Kafka's ProducerIdsBlock)."""

from __future__ import annotations

from dataclasses import dataclass

BLOCK_SIZE = 1000
"""Kafka's ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE."""
MAX_PRODUCER_ID = 2**63 - 1


@dataclass(frozen=True, slots=True)
class ProducerIdBlock:
    """The ids [first_id, first_id + size), reserved for this broker."""

    first_id: int
    size: int

    @property
    def next_block_first_id(self) -> int:
        return self.first_id + self.size
