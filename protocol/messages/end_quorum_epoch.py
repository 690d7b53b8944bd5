"""EndQuorumEpoch (key 54): a metadata-quorum leader that is stepping down asks for an election now.

A leader that shuts down gracefully tells the voters its epoch is over, so they need not wait out
their election timeouts before electing a successor. It lists the voters it prefers as successors,
those whose logs it knows are most caught up; a voter backs off less the earlier it is named, so
the likeliest winner stands first.

Version 1 (KIP-853) is the first flexible one: it names the preferred successors by id and
directory id (the plain id list of version 0 is gone) and carries the resigning leader's
endpoints by listener name; the response adds the endpoints of the leaders it names, as a tagged
field.
"""

from protocol.messages.quorum_fields import LEADER_ENDPOINTS, NODE_ENDPOINTS, quorum_topics
from protocol.schema import Field, request, response

END_QUORUM_EPOCH_REQUEST = request(
    54,
    "EndQuorumEpoch",
    "0-1",
    "1+",
    Field("cluster_id", "string", "0+", nullable_versions="0+", default=None),
    quorum_topics(
        Field("partition_index", "int32", "0+"),
        Field("leader_id", "int32", "0+"),
        Field("leader_epoch", "int32", "0+"),
        Field("preferred_successors", "[]int32", "0"),
        Field(
            "preferred_candidates",
            "[]ReplicaInfo",
            "1+",
            fields=(
                Field("candidate_id", "int32", "1+"),
                Field("candidate_directory_id", "uuid", "1+"),
            ),
        ),
    ),
    LEADER_ENDPOINTS,
)

END_QUORUM_EPOCH_RESPONSE = response(
    54,
    "EndQuorumEpoch",
    "0-1",
    "1+",
    Field("error_code", "int16", "0+"),
    quorum_topics(
        Field("partition_index", "int32", "0+"),
        Field("error_code", "int16", "0+"),
        Field("leader_id", "int32", "0+"),
        Field("leader_epoch", "int32", "0+"),
    ),
    NODE_ENDPOINTS,
)
