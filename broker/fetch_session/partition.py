"""One partition as a fetch session sees it: its key, the request's parameters, the read's result.

``TopicPartitionKey`` follows Kafka's ``CachedPartition`` equality (KIP-516): a key with a non-zero
topic id is identified by (id, partition) and its name is ignored, so a partition whose id the broker
could not resolve (name ``None``) is the same partition as the resolved one. A key without an id is
identified by (name, partition). The two kinds are never equal to each other, which is why the cache
indexes its watchers by :attr:`TopicPartitionKey.watch_key` and notifies both kinds (see
``FetchSessionCache.on_partition_changed``).

``CachedPartition`` is what a session remembers between requests: the last request parameters, and
the high watermark and log start offset it last reported (the baseline of the inclusion rules), plus
the bookkeeping that lets an incremental fetch cost O(changed): a sequence number for the session
order and a change counter for the dirty set.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field

from protocol.error_codes import ErrorCode
from protocol.sentinels import NO_LEADER_EPOCH, UNKNOWN_OFFSET, ZERO_UUID
from storage.txn_index import AbortedTxn

NO_PREFERRED_READ_REPLICA = -1


@dataclass(frozen=True, slots=True, eq=False)
class TopicPartitionKey:
    """A partition of a fetch request or session, with Kafka's id-first equality.

    ``topic_name`` is ``None`` for a v13+ partition whose topic id the broker could not resolve; such a
    key equals the resolved key of the same id, so resolving a name later never changes identity.
    """

    topic_id: uuid.UUID
    topic_name: str | None
    partition: int
    _hash: int = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_hash", hash(self.watch_key))

    @property
    def has_topic_id(self) -> bool:
        return self.topic_id != ZERO_UUID

    @property
    def watch_key(self) -> Hashable:
        """What identifies this key: (id, partition) when it has an id, else (name, partition)."""
        if self.topic_id != ZERO_UUID:
            return (self.topic_id, self.partition)
        return (self.topic_name, self.partition)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TopicPartitionKey):
            return NotImplemented
        if self is other:
            return True
        if self.partition != other.partition or self.topic_id != other.topic_id:
            return False
        return self.topic_id != ZERO_UUID or self.topic_name == other.topic_name

    def __hash__(self) -> int:
        return self._hash

    def with_name(self, topic_name: str) -> TopicPartitionKey:
        return TopicPartitionKey(self.topic_id, topic_name, self.partition)

    def resolved(self, resolve_topic_name: Callable[[uuid.UUID], str | None]) -> TopicPartitionKey:
        """This key with its name looked up if (and only if) it has an id and no name yet.

        A name, once known, is never looked up again: Kafka keeps a resolved name even after the
        metadata forgets the topic (testResolveUnknownPartitions).
        """
        if self.topic_name is not None or self.topic_id == ZERO_UUID:
            return self
        name = resolve_topic_name(self.topic_id)
        return self if name is None else self.with_name(name)

    def __str__(self) -> str:
        name = self.topic_name if self.topic_name is not None else f"<unknown {self.topic_id}>"
        return f"{name}-{self.partition}"


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionFetchParams:
    """What a Fetch request asks for one partition; a session caches the latest of these."""

    fetch_offset: int
    log_start_offset: int = UNKNOWN_OFFSET
    """The follower's own log start offset; -1 from consumers."""
    max_bytes: int
    current_leader_epoch: int = NO_LEADER_EPOCH
    last_fetched_epoch: int = NO_LEADER_EPOCH


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionFetchResult:
    """What the Fetch handler found for one partition, reduced to what the session logic needs.

    ``payload`` is opaque here (the handler's wire struct, record slices...): it is carried through
    to the response untouched.

    ``skipped_for_budget`` must be true whenever the partition had records readable past its fetch
    offset but returned none: the response byte budget ran out, or (v3+) the first batch did not
    fit the partition's limit. Such a partition stays dirty, because Kafka would read it again on
    the next fetch and might then return records.

    ``erroneous`` marks a partition that was not read from the log at all (unknown topic, topic id
    or partition; not authorized). Kafka lists those after the readable ones in every response.
    """

    error_code: int = ErrorCode.NONE
    high_watermark: int = UNKNOWN_OFFSET
    last_stable_offset: int = UNKNOWN_OFFSET
    log_start_offset: int = UNKNOWN_OFFSET
    records_size: int = 0
    diverging_epoch: int = NO_LEADER_EPOCH
    preferred_read_replica: int = NO_PREFERRED_READ_REPLICA
    skipped_for_budget: bool = False
    erroneous: bool = False
    payload: object = None
    aborted_transactions: tuple[AbortedTxn, ...] = ()
    """read_committed: the aborted transactions overlapping the records returned."""

    def fires_sticky_rule(self) -> bool:
        """True when Kafka includes this result whatever the cached baseline says (rules 1, 4, 5, 6).

        Records (the broker never advances a cached offset, so the same read returns them again), a
        preferred read replica, an error or a diverging epoch are reported on every read until the
        client's request or the partition changes.
        """
        return (
            self.records_size > 0
            or self.error_code != ErrorCode.NONE
            or self.diverging_epoch >= 0
            or self.preferred_read_replica != NO_PREFERRED_READ_REPLICA
        )

    def would_report_again(self) -> bool:
        """True when reading the partition again, with nothing changed, could put it in a response.

        That is a sticky rule, or readable records that this read left behind (budget skip). Such a
        partition must stay dirty; any other one may leave the dirty set once its baseline is set.
        """
        return self.skipped_for_budget or self.fires_sticky_rule()


class CachedPartition:
    """A partition held by a ``FetchSession``.

    Identity-hashed on purpose: a session's dirty set holds these objects, and hashing by identity
    is cheaper than hashing a key with a UUID in it. Each session has its own copy of a partition.
    """

    __slots__ = ("change_count", "high_watermark", "key", "log_start_offset", "params", "seq")

    def __init__(
        self,
        key: TopicPartitionKey,
        params: PartitionFetchParams,
        seq: int,
        high_watermark: int = UNKNOWN_OFFSET,
        log_start_offset: int = UNKNOWN_OFFSET,
    ) -> None:
        self.key = key
        self.params = params
        self.seq = seq
        """Position in the session order: renewed when added or moved to the tail."""
        self.high_watermark = high_watermark
        self.log_start_offset = log_start_offset
        """Kafka's ``localLogStartOffset``: the log start offset last reported to the client."""
        self.change_count = 0
        """Bumped on every mark as dirty, so a response built from an older read cannot clean it."""

    def update_request_params(self, params: PartitionFetchParams) -> None:
        """Replace the cached request parameters; absent epochs in ``params`` clear cached ones."""
        self.params = params

    def maybe_resolve_name(self, resolve_topic_name: Callable[[uuid.UUID], str | None]) -> None:
        self.key = self.key.resolved(resolve_topic_name)

    def must_respond(self, result: PartitionFetchResult, update: bool) -> bool:
        """Kafka's inclusion rules 1-6 for an incremental response; ``update`` refreshes the baseline.

        A last-stable-offset change, aborted transactions or a current-leader hint alone never
        cause inclusion. On an error the cached high watermark becomes -1 so that the partition is
        reported again once the error clears.
        """
        respond = result.fires_sticky_rule()
        if self.high_watermark != result.high_watermark:
            respond = True
            if update:
                self.high_watermark = result.high_watermark
        if self.log_start_offset != result.log_start_offset:
            respond = True
            if update:
                self.log_start_offset = result.log_start_offset
        if update and result.error_code != ErrorCode.NONE:
            self.high_watermark = UNKNOWN_OFFSET
        return respond

    def __repr__(self) -> str:
        return (
            f"CachedPartition({self.key}, offset={self.params.fetch_offset}, hw={self.high_watermark}, "
            f"log_start={self.log_start_offset}, seq={self.seq})"
        )
