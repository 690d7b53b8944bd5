"""InitProducerId (key 22): allocate a producer id and epoch for an idempotent or
transactional producer, or bump the epoch of an existing one (v3+)."""

from protocol.schema import Field, request, response

INIT_PRODUCER_ID_REQUEST = request(
    22,
    "InitProducerId",
    "0-5",
    "2+",
    Field("transactional_id", "string", "0+", nullable_versions="0+"),
    Field("transaction_timeout_ms", "int32", "0+"),
    Field("producer_id", "int64", "3+", default=-1),
    Field("producer_epoch", "int16", "3+", default=-1),
    Field("enable2_pc", "bool", "6+", default=False),
    Field("keep_prepared_txn", "bool", "6+", default=False),
)

INIT_PRODUCER_ID_RESPONSE = response(
    22,
    "InitProducerId",
    "0-5",
    "2+",
    Field("throttle_time_ms", "int32", "0+"),
    Field("error_code", "int16", "0+"),
    Field("producer_id", "int64", "0+", default=-1),
    Field("producer_epoch", "int16", "0+"),
    Field("ongoing_txn_producer_id", "int64", "6+", default=-1),
    Field("ongoing_txn_producer_epoch", "int16", "6+", default=-1),
)
