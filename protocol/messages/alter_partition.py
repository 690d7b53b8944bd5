"""AlterPartition (key 56): a partition leader asks the controller to change its ISR (KIP-497).

Only the controller changes the ISR, so that every change gets a new partition epoch and reaches
all brokers through the metadata log; the leader proposes, citing the partition epoch it knows,
and applies the result. Version 2 names topics by id instead of by name (KIP-841); version 3
sends each ISR member's broker epoch (KIP-903), so a replica that restarted and lost data since
it was caught up cannot be added back on the strength of its old state. Apache Kafka 4.0 dropped
versions 0-1; kipling still declares them, as Kafka 3.x does, since they cost nothing.
"""

from protocol.schema import Field, request, response

ALTER_PARTITION_REQUEST = request(
    56,
    "AlterPartition",
    "0-3",
    "0+",
    Field("broker_id", "int32", "0+"),
    Field("broker_epoch", "int64", "0+", default=-1),
    Field(
        "topics",
        "[]TopicData",
        "0+",
        fields=(
            Field("topic_name", "string", "0-1"),
            Field("topic_id", "uuid", "2+"),
            Field(
                "partitions",
                "[]PartitionData",
                "0+",
                fields=(
                    Field("partition_index", "int32", "0+"),
                    Field("leader_epoch", "int32", "0+"),
                    Field("new_isr", "[]int32", "0-2"),
                    Field(
                        "new_isr_with_epochs",
                        "[]BrokerState",
                        "3+",
                        fields=(
                            Field("broker_id", "int32", "3+"),
                            Field("broker_epoch", "int64", "3+", default=-1),
                        ),
                    ),
                    Field("leader_recovery_state", "int8", "1+", default=0),
                    Field("partition_epoch", "int32", "0+"),
                ),
            ),
        ),
    ),
)

ALTER_PARTITION_RESPONSE = response(
    56,
    "AlterPartition",
    "0-3",
    "0+",
    Field("throttle_time_ms", "int32", "0+"),
    Field("error_code", "int16", "0+"),
    Field(
        "topics",
        "[]TopicData",
        "0+",
        fields=(
            Field("topic_name", "string", "0-1"),
            Field("topic_id", "uuid", "2+"),
            Field(
                "partitions",
                "[]PartitionData",
                "0+",
                fields=(
                    Field("partition_index", "int32", "0+"),
                    Field("error_code", "int16", "0+"),
                    Field("leader_id", "int32", "0+"),
                    Field("leader_epoch", "int32", "0+"),
                    Field("isr", "[]int32", "0+"),
                    Field("leader_recovery_state", "int8", "1+", default=0),
                    Field("partition_epoch", "int32", "0+"),
                ),
            ),
        ),
    ),
)
