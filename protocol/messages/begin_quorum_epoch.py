"""BeginQuorumEpoch (key 53): a newly elected metadata-quorum leader announces itself (KIP-595).

Voters learn of a new leader by fetching from it, but one that lost the election would otherwise
wait out its own election timeout first; the winner tells every voter its id and epoch at once, so
they become its followers and start fetching. Answers carry the leader each voter now knows.

Version 1 (KIP-853) is the first flexible one: it names the receiving voter by id and directory id,
so a voter that was replaced does not follow the leader as if it still were one, and carries the
leader's endpoints by listener name, since voters no longer all share a static list of controller
addresses; the response adds the endpoints of the leaders it names, as a tagged field.
"""

from protocol.messages.quorum_fields import LEADER_ENDPOINTS, NODE_ENDPOINTS, quorum_topics
from protocol.schema import Field, request, response

BEGIN_QUORUM_EPOCH_REQUEST = request(
    53,
    "BeginQuorumEpoch",
    "0-1",
    "1+",
    Field("cluster_id", "string", "0+", nullable_versions="0+", default=None),
    Field("voter_id", "int32", "1+", default=-1),
    quorum_topics(
        Field("partition_index", "int32", "0+"),
        Field("voter_directory_id", "uuid", "1+"),
        Field("leader_id", "int32", "0+"),
        Field("leader_epoch", "int32", "0+"),
    ),
    LEADER_ENDPOINTS,
)

BEGIN_QUORUM_EPOCH_RESPONSE = response(
    53,
    "BeginQuorumEpoch",
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
