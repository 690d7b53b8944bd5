"""Fields the KRaft quorum messages share, declared once (Kafka's specs repeat them in each message).

:func:`quorum_topics` is the ``topics[].partitions[]`` wrapper of Vote, BeginQuorumEpoch,
EndQuorumEpoch and DescribeQuorum requests and responses.

``NODE_ENDPOINTS`` (tagged, v1+) tells a voter where the leader it names can be reached; Vote,
BeginQuorumEpoch, EndQuorumEpoch and FetchSnapshot responses carry it. ``LEADER_ENDPOINTS`` (v1+)
is the leader announcing its own listeners in BeginQuorumEpoch and EndQuorumEpoch requests. Both
use a 16-bit unsigned port, unlike the int32 ports of Fetch's and Produce's NodeEndpoints.
"""

from protocol.schema import Field


def quorum_topics(*partition_fields: Field) -> Field:
    """``topics[].partitions[]``, the wrapper every quorum message puts its one partition
    (``__cluster_metadata-0``) in: the topic by name, then ``partition_fields`` per partition."""
    return Field(
        "topics",
        "[]TopicData",
        "0+",
        fields=(
            Field("topic_name", "string", "0+"),
            Field("partitions", "[]PartitionData", "0+", fields=partition_fields),
        ),
    )


NODE_ENDPOINTS = Field(
    "node_endpoints",
    "[]NodeEndpoint",
    "1+",
    tagged_versions="1+",
    tag=0,
    fields=(
        Field("node_id", "int32", "1+"),
        Field("host", "string", "1+"),
        Field("port", "uint16", "1+"),
    ),
)

LEADER_ENDPOINTS = Field(
    "leader_endpoints",
    "[]LeaderEndpoint",
    "1+",
    fields=(
        Field("name", "string", "1+"),
        Field("host", "string", "1+"),
        Field("port", "uint16", "1+"),
    ),
)
