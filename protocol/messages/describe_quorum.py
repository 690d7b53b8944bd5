"""DescribeQuorum (key 55): the state of the metadata quorum, for operators and tools (KIP-595).

The leader answers with its epoch, its high watermark and, for each voter and each observer (a
replica that fetches the metadata log without voting), how far its log reaches. This is what
``kafka-metadata-quorum describe`` shows; admin clients may send it to a broker, which forwards
it to the controllers.

The request never changed. Version 1 (KIP-836) adds each replica's last fetch time and the time it
last caught up with the leader, so lag can be read in time as well as in offsets. Version 2
(KIP-853) adds error messages, each replica's directory id, and the listeners of every node the
answer names, since a voter's address is now part of the replicated voter set.
"""

from protocol.messages.quorum_fields import quorum_topics
from protocol.schema import Field, request, response

DESCRIBE_QUORUM_REQUEST = request(
    55,
    "DescribeQuorum",
    "0-2",
    "0+",
    quorum_topics(Field("partition_index", "int32", "0+")),
)

_REPLICA_STATE = (
    Field("replica_id", "int32", "0+"),
    Field("replica_directory_id", "uuid", "2+"),
    Field("log_end_offset", "int64", "0+"),
    Field("last_fetch_timestamp", "int64", "1+", default=-1),
    Field("last_caught_up_timestamp", "int64", "1+", default=-1),
)
"""One replica's progress, for the voters and the observers alike (one struct in Kafka's spec)."""

DESCRIBE_QUORUM_RESPONSE = response(
    55,
    "DescribeQuorum",
    "0-2",
    "0+",
    Field("error_code", "int16", "0+"),
    Field("error_message", "string", "2+", nullable_versions="2+"),
    quorum_topics(
        Field("partition_index", "int32", "0+"),
        Field("error_code", "int16", "0+"),
        Field("error_message", "string", "2+", nullable_versions="2+"),
        Field("leader_id", "int32", "0+"),
        Field("leader_epoch", "int32", "0+"),
        Field("high_watermark", "int64", "0+"),
        Field("current_voters", "[]ReplicaState", "0+", fields=_REPLICA_STATE),
        Field("observers", "[]ReplicaState", "0+", fields=_REPLICA_STATE),
    ),
    Field(
        "nodes",
        "[]Node",
        "2+",
        fields=(
            Field("node_id", "int32", "2+"),
            Field(
                "listeners",
                "[]Listener",
                "2+",
                fields=(
                    Field("name", "string", "2+"),
                    Field("host", "string", "2+"),
                    Field("port", "uint16", "2+"),
                ),
            ),
        ),
    ),
)
