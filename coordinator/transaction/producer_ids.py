"""Where new producer ids come from (Kafka's ``ProducerIdManager``, blocks of ids from the controller).

:meth:`ProducerIdSource.generate_producer_id` returns the next unused id, or raises
:class:`ProducerIdUnavailableError` when none is at hand (no block yet, the controller unreachable):
the request is answered COORDINATOR_LOAD_IN_PROGRESS and the client retries, as in Kafka.
"""

from __future__ import annotations

from typing import Protocol


class ProducerIdUnavailableError(Exception):
    """No producer id can be handed out now (answered COORDINATOR_LOAD_IN_PROGRESS)."""


class ProducerIdSource(Protocol):
    def generate_producer_id(self) -> int: ...


class InMemoryProducerIdSource:
    """Consecutive ids from ``start``; ``unavailable`` makes it raise, for tests."""

    def __init__(self, start: int = 1000) -> None:
        self.next_id = start
        self.unavailable = False

    def generate_producer_id(self) -> int:
        if self.unavailable:
            raise ProducerIdUnavailableError("no producer id block")
        producer_id = self.next_id
        self.next_id += 1
        return producer_id
