"""DeleteTopics (key 20): delete topics by name (v1-5) or by name or topic id (v6+)."""

from protocol.schema import Field, request, response

DELETE_TOPICS_REQUEST = request(
    20,
    "DeleteTopics",
    "1-6",
    "4+",
    Field(
        "topics",
        "[]DeleteTopicState",
        "6+",
        fields=(
            Field("name", "string", "6+", nullable_versions="6+", default=None),
            Field("topic_id", "uuid", "6+"),
        ),
    ),
    Field("topic_names", "[]string", "0-5"),
    Field("timeout_ms", "int32", "0+"),
)

DELETE_TOPICS_RESPONSE = response(
    20,
    "DeleteTopics",
    "1-6",
    "4+",
    Field("throttle_time_ms", "int32", "1+"),
    Field(
        "responses",
        "[]DeletableTopicResult",
        "0+",
        fields=(
            Field("name", "string", "0+", nullable_versions="6+"),
            Field("topic_id", "uuid", "6+"),
            Field("error_code", "int16", "0+"),
            Field("error_message", "string", "5+", nullable_versions="5+", default=None),
        ),
    ),
)
