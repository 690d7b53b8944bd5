"""WriteTxnMarkers (key 27): a transaction coordinator asks partition leaders to append the
commit or abort control records that close a transaction on each of its partitions.

Apache Kafka 4 no longer accepts v0 (KIP-896), so kipling declares v1 (the first flexible
version) and v2, which adds the transaction version of each marker.
"""

from protocol.schema import Field, request, response

WRITE_TXN_MARKERS_REQUEST = request(
    27,
    "WriteTxnMarkers",
    "1-2",
    "1+",
    Field(
        "markers",
        "[]WritableTxnMarker",
        "0+",
        fields=(
            Field("producer_id", "int64", "0+"),
            Field("producer_epoch", "int16", "0+"),
            Field("transaction_result", "bool", "0+"),
            Field(
                "topics",
                "[]WritableTxnMarkerTopic",
                "0+",
                fields=(
                    Field("name", "string", "0+"),
                    Field("partition_indexes", "[]int32", "0+"),
                ),
            ),
            Field("coordinator_epoch", "int32", "0+"),
            Field("transaction_version", "int8", "2+", default=0),
        ),
    ),
)

WRITE_TXN_MARKERS_RESPONSE = response(
    27,
    "WriteTxnMarkers",
    "1-2",
    "1+",
    Field(
        "markers",
        "[]WritableTxnMarkerResult",
        "0+",
        fields=(
            Field("producer_id", "int64", "0+"),
            Field(
                "topics",
                "[]WritableTxnMarkerTopicResult",
                "0+",
                fields=(
                    Field("name", "string", "0+"),
                    Field(
                        "partitions",
                        "[]WritableTxnMarkerPartitionResult",
                        "0+",
                        fields=(
                            Field("partition_index", "int32", "0+"),
                            Field("error_code", "int16", "0+"),
                        ),
                    ),
                ),
            ),
        ),
    ),
)
