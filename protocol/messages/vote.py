"""Vote (key 52): a metadata-quorum candidate asks the other voters to elect it (KIP-595).

A voter whose election timeout fired bumps its epoch and asks every voter for its vote, citing the
epoch and offset of its last log entry; a voter grants at most one vote per epoch, and only to a
candidate whose log is at least as long as its own. The answer names the leader the voter knows,
so a candidate that lost learns who won.

Version 1 (KIP-853) names the receiving voter by id and directory id, and the sender by its
directory id, so that a vote cast for a replaced disk does not count; the response adds the
endpoints of the leaders it names, as a tagged field. Version 2 (KIP-996) adds the pre-vote flag:
a pre-vote asks whether the voter *would* grant a vote for the next epoch without anyone bumping
an epoch, so a partitioned node cannot disturb a healthy quorum. Kafka 4.0 renamed the sender's
fields from "candidate" to "replica" for every version (a pre-voter is not yet a candidate); the
bytes of versions 0 and 1 did not change. The response gained no field in version 2: a sender
tells a pre-vote answer from a vote by the request it answers.
"""

from protocol.messages.quorum_fields import NODE_ENDPOINTS, quorum_topics
from protocol.schema import Field, request, response

VOTE_REQUEST = request(
    52,
    "Vote",
    "0-2",
    "0+",
    Field("cluster_id", "string", "0+", nullable_versions="0+", default=None),
    Field("voter_id", "int32", "1+", default=-1),
    quorum_topics(
        Field("partition_index", "int32", "0+"),
        Field("replica_epoch", "int32", "0+"),
        Field("replica_id", "int32", "0+"),
        Field("replica_directory_id", "uuid", "1+"),
        Field("voter_directory_id", "uuid", "1+"),
        Field("last_offset_epoch", "int32", "0+"),
        Field("last_offset", "int64", "0+"),
        Field("pre_vote", "bool", "2+"),
    ),
)

VOTE_RESPONSE = response(
    52,
    "Vote",
    "0-2",
    "0+",
    Field("error_code", "int16", "0+"),
    quorum_topics(
        Field("partition_index", "int32", "0+"),
        Field("error_code", "int16", "0+"),
        Field("leader_id", "int32", "0+"),
        Field("leader_epoch", "int32", "0+"),
        Field("vote_granted", "bool", "0+"),
    ),
    NODE_ENDPOINTS,
)
