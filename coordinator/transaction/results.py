"""What the transaction coordinator answers: small frozen values the handlers encode."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from protocol.error_codes import ErrorCode
from protocol.transaction_log import NO_PRODUCER_EPOCH, NO_PRODUCER_ID


@dataclass(frozen=True, slots=True)
class InitProducerIdResult:
    error: ErrorCode
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH


@dataclass(frozen=True, slots=True)
class EndTxnResult:
    """``producer_id`` / ``producer_epoch``: what a version-2 client continues with (EndTxn v5+);
    -1 otherwise."""

    error: ErrorCode
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH


@dataclass(frozen=True, slots=True)
class DescribedTransaction:
    """One entry of DescribeTransactions; on an error only the id and the error are meaningful."""

    transactional_id: str
    error: ErrorCode
    state: str = ""
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    transaction_timeout_ms: int = 0
    transaction_start_time_ms: int = -1
    topics: tuple[tuple[str, tuple[int, ...]], ...] = ()


@dataclass(frozen=True, slots=True)
class ListedTransaction:
    transactional_id: str
    producer_id: int
    state: str


@dataclass(frozen=True, slots=True)
class ListTransactionsResult:
    error: ErrorCode
    transactions: tuple[ListedTransaction, ...] = ()
    unknown_state_filters: tuple[str, ...] = ()


# The first version of each API that knows PRODUCER_FENCED; older clients get INVALID_PRODUCER_EPOCH
# instead (Kafka's KafkaApis converts it per request version).
PRODUCER_FENCED_SINCE: Mapping[str, int] = {
    "InitProducerId": 4,
    "AddPartitionsToTxn": 2,
    "AddOffsetsToTxn": 2,
    "EndTxn": 2,
}


def error_for_version(api: str, version: int, error: ErrorCode) -> ErrorCode:
    """``error`` as a client of ``api`` at ``version`` understands it: PRODUCER_FENCED becomes
    INVALID_PRODUCER_EPOCH below the version that introduced it."""
    if error is ErrorCode.PRODUCER_FENCED and version < PRODUCER_FENCED_SINCE[api]:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    return error
