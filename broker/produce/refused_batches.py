"""Batches this broker refused without appending them, remembered so that the gap they leave is
answered with their error rather than OUT_OF_ORDER_SEQUENCE_NUMBER.

An idempotent producer keeps up to five requests in flight per connection. When the first is refused
with a retriable error that leaves nothing in the log (NOT_LEADER_OR_FOLLOWER while this broker is
still taking the lead, NOT_ENOUGH_REPLICAS while the ISR is short, KAFKA_STORAGE_ERROR...), the next
one may reach the partition after the cause went away: its first sequence then skips the refused
batch, and the sequence check answers OUT_OF_ORDER_SEQUENCE_NUMBER. Kafka answers the same, and
librdkafka reacts to it by bumping its producer epoch and renumbering every batch it has not had
acknowledged, on every partition: a batch another leader had written but not yet answered (after a
restart of every broker, most of them) is then written a second time under the new numbers
(librdkafka issue 4953). The refused batch is the whole gap, so the later batch is answered what the
refused one was: the producer retries both, in order, and nothing is duplicated.

Only an exact gap is explained: same producer and epoch, and the refused batch's first sequence is
the one the partition expects next. Anything else is a real sequence error and stays one. A
successful append of the producer on the partition forgets its refusal; so do age
(:data:`REFUSAL_TTL_MS`, librdkafka's default message timeout) and the capacity bound.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from protocol.error_codes import ErrorCode
from protocol.records.batch import RecordBatchHeader
from storage.producer_state import ProducerStateEntry, in_sequence

__all__ = ["GAP_EXPLAINING_ERRORS", "REFUSAL_TTL_MS", "RefusedBatches"]

GAP_EXPLAINING_ERRORS = frozenset(
    {
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.LEADER_NOT_AVAILABLE,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.NOT_ENOUGH_REPLICAS,
        ErrorCode.KAFKA_STORAGE_ERROR,
    }
)
"""Refusals that leave nothing in the log and that every client retries."""

REFUSAL_TTL_MS = 300_000
"""How long a refusal may explain a gap: librdkafka's default message.timeout.ms, after which the
producer has given the refused batch up."""

DEFAULT_CAPACITY = 16_384
"""At most this many (partition, producer) refusals are kept; the oldest go first."""


@dataclass(frozen=True, slots=True)
class _Refusal:
    producer_epoch: int
    first_sequence: int
    error: ErrorCode
    at_ms: int


class RefusedBatches:
    """The first refused, not yet retried batch of each producer on each partition."""

    def __init__(self, capacity: int = DEFAULT_CAPACITY, ttl_ms: int = REFUSAL_TTL_MS) -> None:
        self._refusals: OrderedDict[tuple[str, int, int], _Refusal] = OrderedDict()
        self._capacity = capacity
        self._ttl_ms = ttl_ms

    def __len__(self) -> int:
        return len(self._refusals)

    def refused(
        self, topic: str, index: int, header: RecordBatchHeader, error: ErrorCode, now_ms: int
    ) -> None:
        """``header``'s batch was refused with ``error`` and not appended."""
        if error not in GAP_EXPLAINING_ERRORS or not _sequenced(header):
            return
        key = (topic, index, header.producer_id)
        known = self._refusals.get(key)
        if (
            known is not None
            and known.producer_epoch == header.producer_epoch
            and _before(known.first_sequence, header.base_sequence)
            and now_ms - known.at_ms <= self._ttl_ms
        ):
            return  # a later batch of the same gap: the gap starts at the earlier refusal
        self._refusals[key] = _Refusal(header.producer_epoch, header.base_sequence, error, now_ms)
        self._refusals.move_to_end(key)
        while len(self._refusals) > self._capacity:
            self._refusals.popitem(last=False)

    def appended(self, topic: str, index: int, header: RecordBatchHeader) -> None:
        """``header``'s batch is in the log: the producer's gap there, if any, is filled."""
        if header.producer_id >= 0:
            self._refusals.pop((topic, index, header.producer_id), None)

    def explain_gap(
        self,
        topic: str,
        index: int,
        header: RecordBatchHeader,
        entry: ProducerStateEntry | None,
        now_ms: int,
    ) -> tuple[ErrorCode, str] | None:
        """The error to answer instead of OUT_OF_ORDER_SEQUENCE_NUMBER for ``header``'s batch, when the
        sequences it skips are exactly a batch refused here; None for a real sequence error."""
        if entry is None or not _sequenced(header):
            return None
        key = (topic, index, header.producer_id)
        refusal = self._refusals.get(key)
        if refusal is None:
            return None
        if now_ms - refusal.at_ms > self._ttl_ms:
            del self._refusals[key]
            return None
        if refusal.producer_epoch != header.producer_epoch:
            return None
        if entry.producer_epoch == header.producer_epoch:
            expected = in_sequence(entry.last_seq, refusal.first_sequence)
        else:  # the epoch's first batch must start at 0: the refused one did
            expected = refusal.first_sequence == 0
        if not expected or not _before(refusal.first_sequence, header.base_sequence):
            return None
        message = (
            f"sequence {refusal.first_sequence} of producer {header.producer_id} was refused here "
            f"({refusal.error.name}) and not appended; this batch (from {header.base_sequence}) "
            "waits for it"
        )
        return refusal.error, message


def _sequenced(header: RecordBatchHeader) -> bool:
    return header.producer_id >= 0 and header.base_sequence >= 0


def _before(first: int, later: int) -> bool:
    """``first`` comes before ``later`` in a sequence that wraps at 2**31 (within half the range)."""
    return 0 < (later - first) % (1 << 31) < (1 << 30)
