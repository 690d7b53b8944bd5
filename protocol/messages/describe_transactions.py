"""DescribeTransactions (key 65): an admin client asks a transaction coordinator for the state,
timeout, start time, producer and partitions of the transactions of some transactional ids."""

from protocol.schema import Field, request, response

DESCRIBE_TRANSACTIONS_REQUEST = request(
    65,
    "DescribeTransactions",
    "0",
    "0+",
    Field("transactional_ids", "[]string", "0+"),
)

DESCRIBE_TRANSACTIONS_RESPONSE = response(
    65,
    "DescribeTransactions",
    "0",
    "0+",
    Field("throttle_time_ms", "int32", "0+"),
    Field(
        "transaction_states",
        "[]TransactionState",
        "0+",
        fields=(
            Field("error_code", "int16", "0+"),
            Field("transactional_id", "string", "0+"),
            Field("transaction_state", "string", "0+"),
            Field("transaction_timeout_ms", "int32", "0+"),
            Field("transaction_start_time_ms", "int64", "0+"),
            Field("producer_id", "int64", "0+"),
            Field("producer_epoch", "int16", "0+"),
            Field(
                "topics",
                "[]TopicData",
                "0+",
                fields=(
                    Field("topic", "string", "0+"),
                    Field("partitions", "[]int32", "0+"),
                ),
            ),
        ),
    ),
)
