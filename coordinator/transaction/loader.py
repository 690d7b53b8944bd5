"""Rebuilding the transactional ids of one partition of ``__transaction_state`` from its records.

Records are read in log order: the last record of each key wins and a tombstone removes the id.
Keys of an unknown version are skipped (Kafka's loader does the same); a corrupt key or value raises
:class:`~protocol.errors.DecodeError`.
"""

from __future__ import annotations

from collections.abc import Iterable

import structlog

from coordinator.transaction.log import LoggedRecord
from coordinator.transaction.metadata import TransactionMetadata
from coordinator.transaction.records import read_metadata
from protocol import transaction_log as tl
from protocol.errors import DecodeError

_log = structlog.get_logger("kipling.transactions.loader")


def rebuild_transactions(records: Iterable[LoggedRecord]) -> dict[str, TransactionMetadata]:
    values: dict[str, tl.TransactionLogValue] = {}
    for record in records:
        key = tl.decode_key(record.key)
        if isinstance(key, tl.UnknownTransactionLogKey):
            _log.warning(
                "skipping a record with an unknown key version", version=key.version, offset=record.offset
            )
            continue
        value = tl.decode_value(record.value)
        if value is None:
            values.pop(key.transactional_id, None)
        else:
            values[key.transactional_id] = value
    try:
        return {tid: read_metadata(tid, value) for tid, value in values.items()}
    except ValueError as e:  # an unknown state id
        raise DecodeError(str(e)) from e
