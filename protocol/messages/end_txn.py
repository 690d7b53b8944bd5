"""EndTxn (key 26): a transactional producer asks its coordinator to commit or abort the open
transaction; from v5 (transactions v2) the epoch is bumped every time and the answer carries the
producer id and epoch to use next."""

from protocol.schema import Field, request, response

END_TXN_REQUEST = request(
    26,
    "EndTxn",
    "0-5",
    "3+",
    Field("transactional_id", "string", "0+"),
    Field("producer_id", "int64", "0+"),
    Field("producer_epoch", "int16", "0+"),
    Field("committed", "bool", "0+"),
)

END_TXN_RESPONSE = response(
    26,
    "EndTxn",
    "0-5",
    "3+",
    Field("throttle_time_ms", "int32", "0+"),
    Field("error_code", "int16", "0+"),
    Field("producer_id", "int64", "5+", default=-1),
    Field("producer_epoch", "int16", "5+", default=-1),
)
