"""Kafka's error codes, as one ``IntEnum``, and the exception domain code raises to return one.

Every response field named ``ErrorCode`` carries one of these int16 values. The numbers are part of
the wire protocol and never change; the names are Apache Kafka's (``Errors.java``) so that logs and
code read the same as Kafka's. ``retriable`` mirrors whether Kafka's exception for the code extends
``RetriableException`` (directly or through ``InvalidMetadataException``): a client that sees a
retriable code may send the same request again, usually after refreshing metadata, and expect it to
succeed eventually. Kafka's own protocol documentation prints the same flag.

The table covers every code up to SHARE_SESSION_LIMIT_REACHED (133, Kafka 4.x). A peer that sends a
code this table does not know gets :meth:`ErrorCode.for_code`'s fallback, UNKNOWN_SERVER_ERROR, as
Kafka's clients do.
"""

from __future__ import annotations

from enum import IntEnum


class ErrorCode(IntEnum):
    """A Kafka protocol error code, with its retriability and a one-line description."""

    _retriable: bool
    _description: str

    def __new__(cls, code: int, retriable: bool = False, description: str = "") -> ErrorCode:
        # Builds the members from the tuples below. ``ErrorCode(code)`` looks a member up instead:
        # the enum machinery never calls this then, and the defaults let type checkers accept it.
        member = int.__new__(cls, code)
        member._value_ = code
        member._retriable = retriable
        member._description = description
        return member

    @property
    def retriable(self) -> bool:
        """True when Kafka classifies the error as transient, so the same request may be retried."""
        return self._retriable

    @property
    def description(self) -> str:
        """A short human-readable explanation, used as the default error message."""
        return self._description

    @classmethod
    def for_code(cls, code: int) -> ErrorCode:
        """The member for ``code``, or UNKNOWN_SERVER_ERROR for a code newer than this table.

        Decoding a response must not fail just because a newer broker used a newer code.
        """
        member = cls._value2member_map_.get(code)
        return member if isinstance(member, ErrorCode) else cls.UNKNOWN_SERVER_ERROR

    UNKNOWN_SERVER_ERROR = (-1, False, "An unexpected error occurred on the server.")
    NONE = (0, False, "No error.")
    OFFSET_OUT_OF_RANGE = (1, False, "The offset is outside the range the partition's log holds.")
    CORRUPT_MESSAGE = (2, True, "A record batch failed its CRC, has an invalid size or is otherwise corrupt.")
    UNKNOWN_TOPIC_OR_PARTITION = (3, True, "This broker does not host the topic-partition.")
    INVALID_FETCH_SIZE = (4, False, "The requested fetch size is invalid.")
    LEADER_NOT_AVAILABLE = (5, True, "The partition has no leader right now (an election is in progress).")
    NOT_LEADER_OR_FOLLOWER = (
        6,
        True,
        "This broker is not the leader (or, for a replica request, not a replica) of the partition.",
    )
    REQUEST_TIMED_OUT = (7, True, "The request did not complete within its timeout.")
    BROKER_NOT_AVAILABLE = (8, False, "The broker is not available.")
    REPLICA_NOT_AVAILABLE = (9, True, "A replica of the partition is not available.")
    MESSAGE_TOO_LARGE = (10, False, "A record batch is larger than the maximum size the server accepts.")
    STALE_CONTROLLER_EPOCH = (11, False, "The controller has moved to another broker.")
    OFFSET_METADATA_TOO_LARGE = (12, False, "The metadata string of an offset commit is too long.")
    NETWORK_EXCEPTION = (13, True, "The connection closed before a response arrived.")
    COORDINATOR_LOAD_IN_PROGRESS = (14, True, "The coordinator is still loading its state.")
    COORDINATOR_NOT_AVAILABLE = (15, True, "The coordinator is not available.")
    NOT_COORDINATOR = (16, True, "This broker is not the coordinator for the group or transaction.")
    INVALID_TOPIC_EXCEPTION = (17, False, "The topic name is invalid or the topic may not be used this way.")
    RECORD_LIST_TOO_LARGE = (18, False, "A batch is larger than the configured segment size.")
    NOT_ENOUGH_REPLICAS = (19, True, "Fewer replicas are in sync than min.insync.replicas requires.")
    NOT_ENOUGH_REPLICAS_AFTER_APPEND = (
        20,
        True,
        "The records were appended, but fewer replicas are in sync than required.",
    )
    INVALID_REQUIRED_ACKS = (21, False, "The produce request's acks value is not -1, 0 or 1.")
    ILLEGAL_GENERATION = (22, False, "The group generation id is not the current one.")
    INCONSISTENT_GROUP_PROTOCOL = (23, False, "The member's protocols do not match those of the group.")
    INVALID_GROUP_ID = (24, False, "The group id is invalid.")
    UNKNOWN_MEMBER_ID = (25, False, "The coordinator does not know this member id.")
    INVALID_SESSION_TIMEOUT = (26, False, "The session timeout is outside the range the broker allows.")
    REBALANCE_IN_PROGRESS = (27, False, "The group is rebalancing; the member must rejoin.")
    INVALID_COMMIT_OFFSET_SIZE = (28, False, "The offset commit data has an invalid size.")
    TOPIC_AUTHORIZATION_FAILED = (29, False, "Not authorized for the topic.")
    GROUP_AUTHORIZATION_FAILED = (30, False, "Not authorized for the group.")
    CLUSTER_AUTHORIZATION_FAILED = (31, False, "Not authorized for the cluster operation.")
    INVALID_TIMESTAMP = (32, False, "A record timestamp is outside the accepted range.")
    UNSUPPORTED_SASL_MECHANISM = (33, False, "The broker does not support the SASL mechanism.")
    ILLEGAL_SASL_STATE = (34, False, "The request is not valid in the current SASL state.")
    UNSUPPORTED_VERSION = (35, False, "The API version is not supported.")
    TOPIC_ALREADY_EXISTS = (36, False, "A topic with this name already exists.")
    INVALID_PARTITIONS = (37, False, "The number of partitions is invalid.")
    INVALID_REPLICATION_FACTOR = (38, False, "The replication factor is invalid.")
    INVALID_REPLICA_ASSIGNMENT = (39, False, "The replica assignment is invalid.")
    INVALID_CONFIG = (40, False, "The configuration is invalid.")
    NOT_CONTROLLER = (41, True, "This broker is not the active controller.")
    INVALID_REQUEST = (42, False, "The request is malformed or not valid for this broker.")
    UNSUPPORTED_FOR_MESSAGE_FORMAT = (43, False, "The message format does not support this request.")
    POLICY_VIOLATION = (44, False, "The request violates a configured policy.")
    OUT_OF_ORDER_SEQUENCE_NUMBER = (45, False, "The producer sequence number is out of order.")
    DUPLICATE_SEQUENCE_NUMBER = (46, False, "The producer sequence number is a duplicate.")
    INVALID_PRODUCER_EPOCH = (47, False, "The producer epoch is older than the current one.")
    INVALID_TXN_STATE = (48, False, "The transactional operation is not valid in the current state.")
    INVALID_PRODUCER_ID_MAPPING = (
        49,
        False,
        "The producer id is not the one assigned to this transactional id.",
    )
    INVALID_TRANSACTION_TIMEOUT = (50, False, "The transaction timeout exceeds the broker's maximum.")
    CONCURRENT_TRANSACTIONS = (51, True, "Another operation on the same transaction is in progress.")
    TRANSACTION_COORDINATOR_FENCED = (52, False, "The transaction coordinator sending markers was fenced.")
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED = (53, False, "Not authorized for the transactional id.")
    SECURITY_DISABLED = (54, False, "Security features are disabled.")
    OPERATION_NOT_ATTEMPTED = (55, False, "The broker did not attempt this operation of a batched request.")
    KAFKA_STORAGE_ERROR = (56, True, "A disk error occurred while accessing the log.")
    LOG_DIR_NOT_FOUND = (57, False, "The log directory is not in the broker's configuration.")
    SASL_AUTHENTICATION_FAILED = (58, False, "SASL authentication failed.")
    UNKNOWN_PRODUCER_ID = (59, False, "The broker has no state for this producer id.")
    REASSIGNMENT_IN_PROGRESS = (60, False, "A partition reassignment is in progress.")
    DELEGATION_TOKEN_AUTH_DISABLED = (61, False, "Delegation tokens are disabled.")
    DELEGATION_TOKEN_NOT_FOUND = (62, False, "The delegation token does not exist.")
    DELEGATION_TOKEN_OWNER_MISMATCH = (63, False, "The principal is not the token's owner or renewer.")
    DELEGATION_TOKEN_REQUEST_NOT_ALLOWED = (
        64,
        False,
        "Delegation token requests are not allowed on this kind of connection.",
    )
    DELEGATION_TOKEN_AUTHORIZATION_FAILED = (65, False, "Not authorized for the delegation token.")
    DELEGATION_TOKEN_EXPIRED = (66, False, "The delegation token has expired.")
    INVALID_PRINCIPAL_TYPE = (67, False, "The principal type is not supported.")
    NON_EMPTY_GROUP = (68, False, "The group still has members.")
    GROUP_ID_NOT_FOUND = (69, False, "The group does not exist.")
    FETCH_SESSION_ID_NOT_FOUND = (70, True, "The fetch session does not exist (evicted or never created).")
    INVALID_FETCH_SESSION_EPOCH = (71, True, "The fetch session epoch is not the expected one.")
    LISTENER_NOT_FOUND = (72, True, "The leader has no listener matching the one the request came on.")
    TOPIC_DELETION_DISABLED = (73, False, "Topic deletion is disabled.")
    FENCED_LEADER_EPOCH = (74, True, "The request's leader epoch is older than the broker's.")
    UNKNOWN_LEADER_EPOCH = (75, True, "The request's leader epoch is newer than the broker's.")
    UNSUPPORTED_COMPRESSION_TYPE = (76, False, "The client cannot read the partition's compression type.")
    STALE_BROKER_EPOCH = (77, False, "The broker epoch is stale.")
    OFFSET_NOT_AVAILABLE = (
        78,
        True,
        "The new leader's high watermark has not caught up, so the offset is not available yet.",
    )
    MEMBER_ID_REQUIRED = (79, False, "The member must rejoin with the member id it was given.")
    PREFERRED_LEADER_NOT_AVAILABLE = (80, True, "The preferred leader is not available.")
    GROUP_MAX_SIZE_REACHED = (81, False, "The group has reached its maximum size.")
    FENCED_INSTANCE_ID = (82, False, "Another member with the same group.instance.id fenced this one.")
    ELIGIBLE_LEADERS_NOT_AVAILABLE = (83, True, "No eligible leader is available for the partition.")
    ELECTION_NOT_NEEDED = (84, True, "The partition already has the requested leader.")
    NO_REASSIGNMENT_IN_PROGRESS = (85, False, "No partition reassignment is in progress.")
    GROUP_SUBSCRIBED_TO_TOPIC = (86, False, "The group is subscribed to the topic whose offsets would go.")
    INVALID_RECORD = (87, False, "A record failed the broker's validation.")
    UNSTABLE_OFFSET_COMMIT = (88, True, "Pending transactional offsets must complete first.")
    THROTTLING_QUOTA_EXCEEDED = (89, True, "The throttling quota has been exceeded.")
    PRODUCER_FENCED = (90, False, "A newer producer with the same transactional id fenced this one.")
    RESOURCE_NOT_FOUND = (91, False, "The request refers to a resource that does not exist.")
    DUPLICATE_RESOURCE = (92, False, "The request refers to the same resource twice.")
    UNACCEPTABLE_CREDENTIAL = (93, False, "The credential does not meet the acceptance criteria.")
    INCONSISTENT_VOTER_SET = (94, False, "The sender or receiver is not one of the expected voters.")
    INVALID_UPDATE_VERSION = (95, False, "The update version is invalid.")
    FEATURE_UPDATE_FAILED = (96, False, "Updating the finalized features failed.")
    PRINCIPAL_DESERIALIZATION_FAILURE = (97, False, "The forwarded request's principal could not be read.")
    SNAPSHOT_NOT_FOUND = (98, False, "The snapshot does not exist.")
    POSITION_OUT_OF_RANGE = (99, False, "The position is outside the snapshot.")
    UNKNOWN_TOPIC_ID = (100, True, "This broker does not host the topic id.")
    DUPLICATE_BROKER_REGISTRATION = (101, False, "The broker id is already registered.")
    BROKER_ID_NOT_REGISTERED = (102, False, "The broker id is not registered.")
    INCONSISTENT_TOPIC_ID = (103, True, "The log's topic id does not match the request's.")
    INCONSISTENT_CLUSTER_ID = (104, False, "The cluster id does not match the server's.")
    TRANSACTIONAL_ID_NOT_FOUND = (105, False, "The transactional id does not exist.")
    FETCH_SESSION_TOPIC_ID_ERROR = (106, True, "The fetch session mixed requests with and without topic ids.")
    INELIGIBLE_REPLICA = (107, False, "The new ISR contains a replica that is not eligible.")
    NEW_LEADER_ELECTED = (108, False, "The partition state was updated but the leader has changed.")
    OFFSET_MOVED_TO_TIERED_STORAGE = (109, False, "The offset is only in tiered storage.")
    FENCED_MEMBER_EPOCH = (110, False, "The member epoch was fenced; the member must rejoin.")
    UNRELEASED_INSTANCE_ID = (111, False, "Another member still uses this instance id.")
    UNSUPPORTED_ASSIGNOR = (112, False, "The group does not support the assignor or its versions.")
    STALE_MEMBER_EPOCH = (113, False, "The member epoch is stale.")
    MISMATCHED_ENDPOINT_TYPE = (114, False, "The request was sent to the wrong kind of endpoint.")
    UNSUPPORTED_ENDPOINT_TYPE = (115, False, "The endpoint type is not supported.")
    UNKNOWN_CONTROLLER_ID = (116, False, "The controller id is not known.")
    UNKNOWN_SUBSCRIPTION_ID = (117, False, "The telemetry subscription id is unknown or outdated.")
    TELEMETRY_TOO_LARGE = (118, False, "The telemetry push is larger than the broker accepts.")
    INVALID_REGISTRATION = (119, False, "The controller rejected the broker registration.")
    TRANSACTION_ABORTABLE = (120, False, "The transaction failed; aborting it lets the producer continue.")
    INVALID_RECORD_STATE = (121, False, "The record state does not allow the acknowledgement.")
    SHARE_SESSION_NOT_FOUND = (122, True, "The share session does not exist.")
    INVALID_SHARE_SESSION_EPOCH = (123, True, "The share session epoch is not the expected one.")
    FENCED_STATE_EPOCH = (124, False, "The share-group state epoch does not match.")
    INVALID_VOTER_KEY = (125, False, "The voter key does not match the receiving replica's.")
    DUPLICATE_VOTER = (126, False, "The voter is already in the voter set.")
    VOTER_NOT_FOUND = (127, False, "The voter is not in the voter set.")
    INVALID_REGULAR_EXPRESSION = (128, False, "The regular expression is invalid.")
    REBOOTSTRAP_REQUIRED = (129, False, "The client's metadata is stale; it must bootstrap again.")
    STREAMS_INVALID_TOPOLOGY = (130, False, "The streams topology is invalid.")
    STREAMS_INVALID_TOPOLOGY_EPOCH = (131, False, "The streams topology epoch is invalid.")
    STREAMS_TOPOLOGY_FENCED = (132, False, "The streams topology epoch is outdated.")
    SHARE_SESSION_LIMIT_REACHED = (133, True, "The broker's share session limit has been reached.")


class KafkaError(Exception):
    """Raised by domain code to answer with a specific Kafka error code.

    Handlers catch it and put ``code`` into the response (top level or per partition), so code deep
    in the broker can say *which* Kafka error applies without knowing the response layout.
    """

    def __init__(self, code: ErrorCode, message: str | None = None) -> None:
        if code is ErrorCode.NONE:
            raise ValueError("KafkaError needs an error code other than NONE")
        self.code = code
        self.message = message if message is not None else code.description
        super().__init__(code, self.message)

    @property
    def retriable(self) -> bool:
        """Whether the client may retry the request that failed with this error."""
        return self.code.retriable

    def __str__(self) -> str:
        return f"{self.code.name} ({self.code.value}): {self.message}"

    def __repr__(self) -> str:
        return f"KafkaError(ErrorCode.{self.code.name}, {self.message!r})"
