"""AddOffsetsToTxn (key 25): a transactional producer tells its transaction coordinator that the
transaction will also commit offsets for a consumer group, so the group's offsets partition joins it."""

from protocol.schema import Field, request, response

ADD_OFFSETS_TO_TXN_REQUEST = request(
    25,
    "AddOffsetsToTxn",
    "0-4",
    "3+",
    Field("transactional_id", "string", "0+"),
    Field("producer_id", "int64", "0+"),
    Field("producer_epoch", "int16", "0+"),
    Field("group_id", "string", "0+"),
)

ADD_OFFSETS_TO_TXN_RESPONSE = response(
    25,
    "AddOffsetsToTxn",
    "0-4",
    "3+",
    Field("throttle_time_ms", "int32", "0+"),
    Field("error_code", "int16", "0+"),
)
