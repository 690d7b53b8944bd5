"""KIP-227 fetch sessions, broker side: pure domain logic (no sockets, no asyncio, no storage).

``FetchManager.new_context`` turns a Fetch request's session fields into a ``FetchContext``; the
Fetch handler reads the partitions the context lists and hands back one ``PartitionFetchResult``
each; the context builds the session-dependent part of the response. ``FetchSessionCache`` holds
the sessions (8 shards, Kafka's eviction rules) and the index of which sessions watch which
partition, so that an incremental fetch costs O(changed partitions), not O(session size).
"""

from broker.fetch_session.cache import (
    DEFAULT_EVICTION_MS,
    DEFAULT_MAX_SLOTS,
    NUM_SHARDS,
    FetchSessionCache,
    FetchSessionCacheShard,
    RandomSource,
)
from broker.fetch_session.context import (
    FetchContext,
    FetchManager,
    FetchResponseParts,
    FullFetchContext,
    IncrementalFetchContext,
    SessionErrorContext,
    SessionlessFetchContext,
)
from broker.fetch_session.metrics import FetchSessionCacheMetrics
from broker.fetch_session.partition import (
    CachedPartition,
    PartitionFetchParams,
    PartitionFetchResult,
    TopicPartitionKey,
)
from broker.fetch_session.session import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    INVALID_SESSION_ID,
    Epoch,
    FetchSession,
    SessionId,
    next_epoch,
)
from protocol.messages.fetch import FETCH_TOPIC_ID_VERSION as TOPIC_ID_VERSION

__all__ = [
    "DEFAULT_EVICTION_MS",
    "DEFAULT_MAX_SLOTS",
    "FINAL_EPOCH",
    "INITIAL_EPOCH",
    "INVALID_SESSION_ID",
    "NUM_SHARDS",
    "TOPIC_ID_VERSION",
    "CachedPartition",
    "Epoch",
    "FetchContext",
    "FetchManager",
    "FetchResponseParts",
    "FetchSession",
    "FetchSessionCache",
    "FetchSessionCacheMetrics",
    "FetchSessionCacheShard",
    "FullFetchContext",
    "IncrementalFetchContext",
    "PartitionFetchParams",
    "PartitionFetchResult",
    "RandomSource",
    "SessionErrorContext",
    "SessionId",
    "SessionlessFetchContext",
    "TopicPartitionKey",
    "next_epoch",
]
