"""TransactionMetadata to and from the records of ``__transaction_state``."""

from __future__ import annotations

from coordinator.transaction.metadata import TransactionMetadata, TxnTransitMetadata
from coordinator.transaction.state import TransactionState
from protocol import transaction_log as tl
from protocol.transaction_log import NO_PRODUCER_EPOCH


def transit_value(
    transit: TxnTransitMetadata,
    transaction_version_level: int,
    producer_ids: tuple[int, int] | None = None,
) -> bytes:
    """The value Kafka's ``valueToBytes`` writes for ``transit`` (partitions null when Empty).

    Version 1 also carries the previous and next producer ids as tagged fields when they are set
    (Kafka declares them but its writer leaves them out); that way a coordinator that loads the
    log resumes a version-2 transaction whose epoch ran out with the producer id it was moving to.
    ``producer_ids``: the (previous, next) producer ids the id will hold once ``transit`` is applied
    (:meth:`TransactionMetadata.producer_ids_after`); the transit's own by default.
    """
    previous, following = producer_ids or (transit.previous_producer_id, transit.next_producer_id)
    if transit.state is TransactionState.EMPTY and transit.topic_partitions:
        raise ValueError(f"an Empty transaction has no partitions: {transit}")
    partitions = (
        None if transit.state is TransactionState.EMPTY else tl.group_partitions(transit.topic_partitions)
    )
    value = tl.TransactionLogValue(
        producer_id=transit.producer_id,
        producer_epoch=transit.producer_epoch,
        transaction_timeout_ms=transit.txn_timeout_ms,
        transaction_status=int(transit.state),
        partitions=partitions,
        last_update_timestamp_ms=transit.txn_last_update_timestamp,
        start_timestamp_ms=transit.txn_start_timestamp,
        previous_producer_id=previous,
        next_producer_id=following,
        client_transaction_version=transit.client_transaction_version,
    )
    return tl.encode_value(value, tl.value_version_for(transaction_version_level))


def read_metadata(transactional_id: str, value: tl.TransactionLogValue) -> TransactionMetadata:
    """Kafka's ``readTxnRecordValue``: the last epoch is not stored (-1 after a load), nor is a
    pending state; an Empty transaction's partitions are ignored."""
    state = TransactionState.from_id(value.transaction_status)
    return TransactionMetadata(
        transactional_id,
        value.producer_id,
        value.producer_epoch,
        value.transaction_timeout_ms,
        state,
        value.last_update_timestamp_ms,
        previous_producer_id=value.previous_producer_id,
        next_producer_id=value.next_producer_id,
        last_producer_epoch=NO_PRODUCER_EPOCH,
        topic_partitions=() if state is TransactionState.EMPTY else value.topic_partitions(),
        txn_start_timestamp=value.start_timestamp_ms,
        client_transaction_version=value.client_transaction_version,
    )
