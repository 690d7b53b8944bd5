"""The read_committed consumer's walk over a fetched slice (Kafka's CompletedFetch rules)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from protocol.records import Record, build_batch, iter_batches
from protocol.records.aborted import AbortedTransactionFilter
from protocol.records.control import build_end_txn_marker_batch


def data(offset: int, count: int, producer_id: int = -1, transactional: bool = False) -> bytes:
    records = [Record(f"{offset + i}".encode()) for i in range(count)]
    return build_batch(
        records,
        base_offset=offset,
        producer_id=producer_id,
        producer_epoch=0 if producer_id >= 0 else -1,
        base_sequence=0 if producer_id >= 0 else -1,
        is_transactional=transactional,
    )


def marker(offset: int, producer_id: int, commit: bool) -> bytes:
    return build_end_txn_marker_batch(
        commit=commit,
        producer_id=producer_id,
        producer_epoch=0,
        coordinator_epoch=0,
        timestamp=0,
        base_offset=offset,
    )


def kept(slice_: bytes, aborted: list[tuple[int, int]]) -> list[int]:
    """Base offsets of the batches the filter keeps."""
    walk = AbortedTransactionFilter(aborted)
    view = memoryview(slice_)
    return [h.base_offset for pos, h in iter_batches(view) if not walk.skip(h, view[pos : pos + h.size])]


def test_an_aborted_transaction_is_skipped_and_its_producer_read_again_after_the_marker() -> None:
    slice_ = b"".join(
        [
            data(0, 3, producer_id=1, transactional=True),
            data(3, 2, producer_id=2, transactional=True),
            data(5, 1),
            marker(6, 1, commit=False),
            marker(7, 2, commit=True),
            data(8, 1, producer_id=1, transactional=True),
            marker(9, 1, commit=True),
        ]
    )
    assert kept(slice_, [(1, 0)]) == [3, 5, 8]
    assert kept(slice_, []) == [0, 3, 5, 8]


def test_two_aborted_transactions_of_one_producer() -> None:
    slice_ = b"".join(
        [
            data(0, 1, producer_id=1, transactional=True),
            marker(1, 1, commit=False),
            data(2, 1, producer_id=1, transactional=True),
            marker(3, 1, commit=True),
            data(4, 1, producer_id=1, transactional=True),
            marker(5, 1, commit=False),
        ]
    )
    assert kept(slice_, [(1, 0), (1, 4)]) == [2]


def test_idempotent_batches_of_a_producer_are_never_skipped() -> None:
    slice_ = data(0, 2, producer_id=1) + marker(2, 1, commit=False)
    assert kept(slice_, [(1, 0)]) == [0]


@given(st.lists(st.tuples(st.integers(0, 2), st.booleans()), min_size=1, max_size=12))
def test_kept_batches_are_exactly_the_committed_ones(txns: list[tuple[int, bool]]) -> None:
    """Transactions of three producers, each one batch then its marker, laid out one after the
    other; the aborted list is what the broker's index would hold."""
    parts: list[bytes] = []
    aborted: list[tuple[int, int]] = []
    committed: list[tuple[int, int]] = []
    offset = 0
    for producer_id, commit in txns:
        parts.append(data(offset, 1, producer_id=producer_id, transactional=True))
        (committed if commit else aborted).append((producer_id, offset))
        parts.append(marker(offset + 1, producer_id, commit))
        offset += 2
    assert kept(b"".join(parts), aborted) == [first for _, first in committed]
