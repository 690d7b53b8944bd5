"""ListTransactions (key 66): an admin client lists the transactions a coordinator knows,
optionally filtered by state, producer id and (v1+) how long they have been running."""

from protocol.schema import Field, request, response

LIST_TRANSACTIONS_REQUEST = request(
    66,
    "ListTransactions",
    "0-1",
    "0+",
    Field("state_filters", "[]string", "0+"),
    Field("producer_id_filters", "[]int64", "0+"),
    Field("duration_filter", "int64", "1+", default=-1),
)

LIST_TRANSACTIONS_RESPONSE = response(
    66,
    "ListTransactions",
    "0-1",
    "0+",
    Field("throttle_time_ms", "int32", "0+"),
    Field("error_code", "int16", "0+"),
    Field("unknown_state_filters", "[]string", "0+"),
    Field(
        "transaction_states",
        "[]TransactionState",
        "0+",
        fields=(
            Field("transactional_id", "string", "0+"),
            Field("producer_id", "int64", "0+"),
            Field("transaction_state", "string", "0+"),
        ),
    ),
)
