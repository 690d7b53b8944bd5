"""DescribeLogDirs (key 35): an admin client asks one broker about its log directories: each
directory's error, the partitions held there with their size on disk and lag, the total and usable
bytes of the volume the directory is on (v4, KIP-827) and whether it is cordoned (v5, KIP-1066).

v2 turns flexible, v3 adds the top-level error code. Kafka 4 removed v0 (KIP-896): v1, the same
layout, is the baseline.
"""

from protocol.schema import Field, request, response

DESCRIBE_LOG_DIRS_REQUEST = request(
    35,
    "DescribeLogDirs",
    "1-5",
    "2+",
    # null asks about every partition the broker holds
    Field(
        "topics",
        "[]DescribableLogDirTopic",
        "0+",
        nullable_versions="0+",
        fields=(
            Field("topic", "string", "0+"),
            Field("partitions", "[]int32", "0+"),
        ),
    ),
)

DESCRIBE_LOG_DIRS_RESPONSE = response(
    35,
    "DescribeLogDirs",
    "1-5",
    "2+",
    Field("throttle_time_ms", "int32", "0+"),
    Field("error_code", "int16", "3+", ignorable=True),
    Field(
        "results",
        "[]DescribeLogDirsResult",
        "0+",
        fields=(
            Field("error_code", "int16", "0+"),
            Field("log_dir", "string", "0+"),
            Field(
                "topics",
                "[]DescribeLogDirsTopic",
                "0+",
                fields=(
                    Field("name", "string", "0+"),
                    Field(
                        "partitions",
                        "[]DescribeLogDirsPartition",
                        "0+",
                        fields=(
                            Field("partition_index", "int32", "0+"),
                            Field("partition_size", "int64", "0+"),
                            Field("offset_lag", "int64", "0+"),
                            Field("is_future_key", "bool", "0+"),
                        ),
                    ),
                ),
            ),
            Field("total_bytes", "int64", "4+", ignorable=True, default=-1),
            Field("usable_bytes", "int64", "4+", ignorable=True, default=-1),
            Field("is_cordoned", "bool", "5+", ignorable=True, default=False),
        ),
    ),
)
