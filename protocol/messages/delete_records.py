"""DeleteRecords (key 21, v0-2; flexible from v2): move partitions' log start offsets forward.

Offset -1 in a request means the partition's high watermark. The response answers each
partition's low watermark: the lowest log start offset among its live replicas.
"""

from protocol.schema import Field, request, response

DELETE_RECORDS_REQUEST = request(
    21,
    "DeleteRecords",
    "0-2",
    "2+",
    Field(
        "topics",
        "[]DeleteRecordsTopic",
        "0+",
        fields=(
            Field("name", "string", "0+"),
            Field(
                "partitions",
                "[]DeleteRecordsPartition",
                "0+",
                fields=(
                    Field("partition_index", "int32", "0+"),
                    Field("offset", "int64", "0+"),
                ),
            ),
        ),
    ),
    Field("timeout_ms", "int32", "0+"),
)

DELETE_RECORDS_RESPONSE = response(
    21,
    "DeleteRecords",
    "0-2",
    "2+",
    Field("throttle_time_ms", "int32", "0+"),
    Field(
        "topics",
        "[]DeleteRecordsTopicResult",
        "0+",
        fields=(
            Field("name", "string", "0+"),
            Field(
                "partitions",
                "[]DeleteRecordsPartitionResult",
                "0+",
                fields=(
                    Field("partition_index", "int32", "0+"),
                    Field("low_watermark", "int64", "0+"),
                    Field("error_code", "int16", "0+"),
                ),
            ),
        ),
    ),
)
