"""kipling's asyncio Kafka client: connection, fetch sessions, and a small admin/producer/consumer.

Used by the follower processes, the Spark pipeline, the CLI and the tests. Imports only ``protocol``
and ``security`` (the SASL mechanisms and TLS contexts of :mod:`client.security`; DESIGN.md section
2). Everything talks to one broker through a :class:`KafkaConnection`, over TLS and SASL when given
a ``ClientSecurity``; reconnecting is the caller's choice (:class:`ReconnectingConnection`).
"""

from client.admin import AdminClient, NewTopic, TopicDescription, TopicResult
from client.connection import ApiVersionRange, KafkaConnection, ReconnectingConnection
from client.consumer import Consumer, FetchedPartition, FetchResult
from client.errors import (
    ClientError,
    ConnectError,
    ConnectionClosedError,
    KafkaResponseError,
    ProtocolViolationError,
    RequestTimeoutError,
    UnsupportedApiVersionError,
    raise_for_error,
)
from client.fetch_session import (
    FetchMetadata,
    FetchRequestData,
    FetchSessionHandler,
    PartitionData,
    TopicIdPartition,
    TopicPartition,
    fetch_request_body,
)
from client.producer import Producer

__all__ = [
    "AdminClient",
    "ApiVersionRange",
    "ClientError",
    "ConnectError",
    "ConnectionClosedError",
    "Consumer",
    "FetchMetadata",
    "FetchRequestData",
    "FetchResult",
    "FetchSessionHandler",
    "FetchedPartition",
    "KafkaConnection",
    "KafkaResponseError",
    "NewTopic",
    "PartitionData",
    "Producer",
    "ProtocolViolationError",
    "ReconnectingConnection",
    "RequestTimeoutError",
    "TopicDescription",
    "TopicIdPartition",
    "TopicPartition",
    "TopicResult",
    "UnsupportedApiVersionError",
    "fetch_request_body",
    "raise_for_error",
]
