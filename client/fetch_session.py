"""The client side of KIP-227 incremental fetch sessions (kafka-behaviour.md §3.9).

A :class:`FetchSessionHandler` tracks one fetch session with one broker: which partitions the broker's
session holds, with which fetch parameters, and the (session id, epoch) the next request must carry.
Each fetch round is ``build()`` → send → ``handle_response()``, or ``handle_error()`` whenever the built
request got no response, for whatever reason; one request per handler may be in flight.

Two ways to say what the next request fetches:

* **Kafka's way** — :meth:`FetchSessionHandler.new_builder`: add every partition wanted this round; the
  builder diffs them against the session. Costs O(partitions in the session), like Kafka's
  ``FetchSessionHandler.Builder``.
* **The follower's way** (DESIGN.md, "The follower side too") — :meth:`FetchSessionHandler.mark_changed`
  and :meth:`FetchSessionHandler.remove` as fetch states change (records received, partition added,
  reset, removed), then :meth:`FetchSessionHandler.build`. An incremental ``build()`` touches only the
  marked partitions: O(changed), whatever the session's size. A full request sends every partition, so
  it costs O(N) either way.

Both produce the same request semantics: a full request (epoch 0 or -1) carries the whole session; an
incremental one carries new partitions first, then altered or replaced ones (the Builder lists altered
ones in its add order, not session order; the broker keeps a re-sent partition's position anyway), and
forgets removed ones. Partitions marked with unchanged parameters are implied, not sent. Every rule of
§3.9 for responses is in :meth:`FetchSessionHandler.handle_response`.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, NamedTuple, NewType

import structlog

from protocol.data import MessageData
from protocol.error_codes import ErrorCode
from protocol.sentinels import NO_LEADER_EPOCH, UNKNOWN_OFFSET, ZERO_UUID, IsolationLevel

SessionId = NewType("SessionId", int)
SessionEpoch = NewType("SessionEpoch", int)

INVALID_SESSION_ID = SessionId(0)
"""No session: the request is sessionless or asks the broker to create one."""
INITIAL_EPOCH = SessionEpoch(0)
"""A full request that creates a new session (closing the given one, if any)."""
FINAL_EPOCH = SessionEpoch(-1)
"""A full request that closes the given session and creates none."""
MAX_EPOCH = 2**31 - 1

TOPIC_IDS_MIN_FETCH_VERSION = 13
SESSIONS_MIN_FETCH_VERSION = 7

_log = structlog.get_logger("kipling.client.fetch_session")


def next_epoch(epoch: int) -> SessionEpoch:
    """The epoch after ``epoch``: +1, wrapping from 2**31-1 to 1 (0 is never reused); negative → -1."""
    if epoch < 0:
        return FINAL_EPOCH
    if epoch == MAX_EPOCH:
        return SessionEpoch(1)
    return SessionEpoch(epoch + 1)


class FetchMetadata(NamedTuple):
    """The (SessionId, SessionEpoch) pair a Fetch request carries."""

    session_id: int
    epoch: int

    @property
    def is_full(self) -> bool:
        """Epoch 0 or -1: the request lists every partition it wants."""
        return self.epoch in (INITIAL_EPOCH, FINAL_EPOCH)

    def next_close_existing(self) -> FetchMetadata:
        """A full request that drops this session (if any) and asks for a new one."""
        return FetchMetadata(self.session_id, INITIAL_EPOCH)

    def next_incremental(self) -> FetchMetadata:
        return FetchMetadata(self.session_id, next_epoch(self.epoch))

    @classmethod
    def new_incremental(cls, session_id: int) -> FetchMetadata:
        """The first incremental request of a session the broker just created: epoch 1."""
        return cls(session_id, next_epoch(INITIAL_EPOCH))


INITIAL = FetchMetadata(INVALID_SESSION_ID, INITIAL_EPOCH)
LEGACY = FetchMetadata(INVALID_SESSION_ID, FINAL_EPOCH)


class TopicPartition(NamedTuple):
    topic: str
    partition: int


class TopicIdPartition(NamedTuple):
    """A partition with its topic id: what a forget (or replace) list needs for v13+ requests."""

    topic_id: uuid.UUID
    topic: str
    partition: int

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


class PartitionData(NamedTuple):
    """The fetch parameters of one partition (Kafka's ``FetchRequest.PartitionData``).

    Equality decides whether a partition is re-sent in an incremental request, so every field the broker
    caches is here.
    """

    fetch_offset: int
    max_bytes: int
    log_start_offset: int = UNKNOWN_OFFSET
    current_leader_epoch: int = NO_LEADER_EPOCH
    last_fetched_epoch: int = NO_LEADER_EPOCH
    topic_id: uuid.UUID = ZERO_UUID


@dataclass(frozen=True, slots=True)
class FetchRequestData:
    """What one ``build()`` decided: the partitions to send and forget, and the session metadata."""

    to_send: dict[TopicPartition, PartitionData]
    """In request order. Full request: the whole session. Incremental: new, then altered/replaced."""
    to_forget: list[TopicIdPartition]
    """Partitions removed from the session (incremental requests only)."""
    to_replace: list[TopicIdPartition]
    """The old topic ids of partitions whose topic id changed; forgotten too in v13+ requests only."""
    session_partitions: Mapping[TopicPartition, PartitionData]
    """A read-only live view of the session after this build."""
    metadata: FetchMetadata
    can_use_topic_ids: bool
    """Every session partition (and every forgotten one) has a topic id: v13+ may be used."""

    @property
    def session_id(self) -> int:
        return self.metadata.session_id

    @property
    def epoch(self) -> int:
        return self.metadata.epoch

    @property
    def is_full(self) -> bool:
        return self.metadata.is_full


class FetchSessionHandler:
    """The client's view of one fetch session with one broker (Kafka's ``FetchSessionHandler``)."""

    def __init__(self, node: int | str = -1) -> None:
        self._log = _log.bind(node=node)
        self._next = INITIAL
        self._session: dict[TopicPartition, PartitionData] = {}
        self._view = MappingProxyType(self._session)
        self._pending: dict[TopicPartition, PartitionData | None] = {}
        self._zero_id_partitions = 0
        self._topic_names: dict[uuid.UUID, tuple[str, int]] = {}  # id → (name, session partitions with it)

    # -- state -------------------------------------------------------------------------------------

    @property
    def next_metadata(self) -> FetchMetadata:
        """The (session id, epoch) the next built request will carry."""
        return self._next

    @property
    def session_id(self) -> int:
        return self._next.session_id

    @property
    def session_partitions(self) -> Mapping[TopicPartition, PartitionData]:
        """The partitions the broker's session holds (as of the last build), in session order."""
        return self._view

    @property
    def pending_changes(self) -> int:
        """Partitions marked changed or removed since the last build."""
        return len(self._pending)

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        """The name of a topic id some session partition carries (to read v13+ responses)."""
        entry = self._topic_names.get(topic_id)
        return entry[0] if entry is not None else None

    # -- the follower's way: O(changed) --------------------------------------------------------------

    def mark_changed(self, tp: TopicPartition, data: PartitionData) -> None:
        """Fetch ``tp`` with ``data`` from the next request on (added, new offset, reset...). O(1)."""
        self._pending[tp] = data

    def remove(self, tp: TopicPartition) -> None:
        """Stop fetching ``tp``: the next incremental request forgets it. O(1)."""
        self._pending[tp] = None

    def build(self) -> FetchRequestData:
        """The next request's partitions; applies the marked changes to the session.

        Incremental: O(marked partitions). Full: O(session), since every partition is sent.
        """
        pending, self._pending = self._pending, {}
        session = self._session
        if self._next.is_full:
            for tp, data in pending.items():
                if data is None:
                    prev = session.get(tp)
                    if prev is not None:
                        self._drop(tp, prev)
                else:
                    self._put(tp, data)
            return self._full_request()
        added: list[TopicPartition] = []
        altered: list[TopicPartition] = []
        removed: list[TopicIdPartition] = []
        replaced: list[TopicIdPartition] = []
        for tp, data in pending.items():
            prev = session.get(tp)
            if data is None:
                if prev is not None:
                    self._drop(tp, prev)
                    removed.append(TopicIdPartition(prev.topic_id, tp.topic, tp.partition))
            elif prev is None:
                self._put(tp, data)
                added.append(tp)
            elif prev.topic_id != data.topic_id and prev.topic_id != ZERO_UUID and data.topic_id != ZERO_UUID:
                replaced.append(TopicIdPartition(prev.topic_id, tp.topic, tp.partition))
                self._put(tp, data)
                altered.append(tp)
            elif prev != data:
                self._put(tp, data)
                altered.append(tp)
        to_send = {tp: session[tp] for tp in added}
        for tp in altered:
            to_send[tp] = session[tp]
        can_use_topic_ids = self._zero_id_partitions == 0 and all(r.topic_id != ZERO_UUID for r in removed)
        return FetchRequestData(to_send, removed, replaced, self._view, self._next, can_use_topic_ids)

    # -- Kafka's way: O(session) ---------------------------------------------------------------------

    def new_builder(self) -> FetchRequestBuilder:
        """A builder to which the caller adds every partition wanted in the next request."""
        return FetchRequestBuilder(self)

    def _build_from(self, wanted: dict[TopicPartition, PartitionData]) -> FetchRequestData:
        """Turn a whole wanted set into changes (discarding marked ones), then build."""
        if self._next.is_full:
            self._pending = {}
            self._session.clear()
            self._topic_names.clear()
            self._zero_id_partitions = 0
            for tp, data in wanted.items():
                self._put(tp, data)
            return self._full_request()
        changes: dict[TopicPartition, PartitionData | None] = {
            tp: None for tp in self._session if tp not in wanted
        }
        changes.update(wanted)
        self._pending = changes
        return self.build()

    # -- responses -----------------------------------------------------------------------------------

    def handle_response(self, response: MessageData, version: int | None = None) -> bool:
        """Validate a Fetch response to the last built request and advance the session metadata.

        Returns False when the response must not be used (top-level error, invalid partitions, a
        throttled empty full response); the next request is then full. ``version`` (of the request)
        says whether topics are named by id (v13+); without it, a topic with a non-zero id is read by id.
        """
        sent = self._next
        code = response.error_code
        if code:
            self._next = (
                INITIAL if code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND else sent.next_close_existing()
            )
            self._log.info(
                "fetch session error",
                error=ErrorCode.for_code(code).name,
                session_id=sent.session_id,
                epoch=sent.epoch,
            )
            return False
        keys = self._response_keys(response, version)
        if sent.is_full:
            if not keys and response.throttle_time_ms > 0:
                self._next = INITIAL
                return False
            problem = self._full_response_problem(keys)
            if problem is not None:
                self._log.info("invalid full fetch response", problem=problem, session_id=sent.session_id)
                self._next = INITIAL
                return False
            self._next = (
                INITIAL
                if response.session_id == INVALID_SESSION_ID
                else FetchMetadata.new_incremental(response.session_id)
            )
            return True
        problem = self._incremental_response_problem(keys)
        if problem is not None:
            self._log.info("invalid incremental fetch response", problem=problem, session_id=sent.session_id)
            self._next = sent.next_close_existing()
            return False
        if response.session_id == INVALID_SESSION_ID:
            self._log.info("fetch session closed by the broker", session_id=sent.session_id)
            self._next = INITIAL
        else:
            self._next = sent.next_incremental()
        return True

    def handle_error(self) -> None:
        """The built request got no response (connection error, timeout, cancelled, never sent).

        The next request is full and drops the session. This matters beyond Kafka's reasons: ``build()``
        moved the marked changes into the session, and only a full request is sure to carry them again.
        """
        self._next = self._next.next_close_existing()

    def close(self) -> FetchMetadata:
        """Ask to close the session: the next request carries (session id, -1). Returns that metadata."""
        self._next = FetchMetadata(self._next.session_id, FINAL_EPOCH)
        return self._next

    def response_partitions(
        self, response: MessageData, version: int | None = None
    ) -> Iterator[tuple[TopicPartition, MessageData]]:
        """The response's partitions keyed by topic name (v13+ ids resolved through the session);
        partitions of unknown topic ids are skipped (:meth:`handle_response` rejects them anyway)."""
        for topic in response.responses:
            name = self._topic_of(topic, version)
            if name is None:
                continue
            for partition in topic.partitions:
                yield TopicPartition(name, partition.partition_index), partition

    # -- internals -----------------------------------------------------------------------------------

    def _full_request(self) -> FetchRequestData:
        session = self._session
        self._log.debug(
            "full fetch request",
            session_id=self._next.session_id,
            epoch=self._next.epoch,
            partitions=len(session),
        )
        return FetchRequestData(dict(session), [], [], self._view, self._next, self._zero_id_partitions == 0)

    def _put(self, tp: TopicPartition, data: PartitionData) -> None:
        prev = self._session.get(tp)
        if prev is not None:
            self._unref(prev.topic_id)
        self._session[tp] = data
        self._ref(data.topic_id, tp.topic)

    def _drop(self, tp: TopicPartition, prev: PartitionData) -> None:
        del self._session[tp]
        self._unref(prev.topic_id)

    def _ref(self, topic_id: uuid.UUID, name: str) -> None:
        if topic_id == ZERO_UUID:
            self._zero_id_partitions += 1
            return
        entry = self._topic_names.get(topic_id)
        self._topic_names[topic_id] = (name, 1) if entry is None else (entry[0], entry[1] + 1)

    def _unref(self, topic_id: uuid.UUID) -> None:
        if topic_id == ZERO_UUID:
            self._zero_id_partitions -= 1
            return
        name, count = self._topic_names[topic_id]
        if count == 1:
            del self._topic_names[topic_id]
        else:
            self._topic_names[topic_id] = (name, count - 1)

    def _topic_of(self, topic: MessageData, version: int | None) -> str | None:
        if version is None:
            by_id = topic.get("topic_id", ZERO_UUID) != ZERO_UUID
        else:
            by_id = version >= TOPIC_IDS_MIN_FETCH_VERSION
        return self.topic_name(topic.topic_id) if by_id else topic.topic

    def _response_keys(self, response: MessageData, version: int | None) -> list[TopicPartition | None]:
        """Every partition of the response; None for one whose topic id the session does not know."""
        keys: list[TopicPartition | None] = []
        for topic in response.responses:
            name = self._topic_of(topic, version)
            if name is None:
                keys.extend(None for _ in topic.partitions)
            else:
                keys.extend(TopicPartition(name, p.partition_index) for p in topic.partitions)
        return keys

    def _full_response_problem(self, keys: list[TopicPartition | None]) -> str | None:
        """A full response must hold exactly the session's partitions: none omitted, extra or unknown."""
        session = self._session
        unknown_ids = sum(1 for k in keys if k is None)
        seen = {k for k in keys if k is not None}
        extra = [k for k in seen if k not in session]
        omitted = len(session) - (len(seen) - len(extra))
        if not unknown_ids and not extra and not omitted:
            return None
        missing = _sample(tp for tp in session if tp not in seen) if omitted else []
        return f"omitted {omitted} {missing}, extra {len(extra)} {extra[:5]}, unknown topic ids {unknown_ids}"

    def _incremental_response_problem(self, keys: list[TopicPartition | None]) -> str | None:
        """An incremental response may hold only session partitions, all with known topic ids."""
        session = self._session
        unknown_ids = sum(1 for k in keys if k is None)
        extra = [k for k in keys if k is not None and k not in session]
        if not unknown_ids and not extra:
            return None
        return f"extra {len(extra)} {extra[:5]}, unknown topic ids {unknown_ids}"


class FetchRequestBuilder:
    """Kafka's ``FetchSessionHandler.Builder``: add every partition wanted this round, then build."""

    def __init__(self, handler: FetchSessionHandler) -> None:
        self._handler = handler
        self._wanted: dict[TopicPartition, PartitionData] = {}

    def add(self, tp: TopicPartition, data: PartitionData) -> FetchRequestBuilder:
        self._wanted[tp] = data
        return self

    def build(self) -> FetchRequestData:
        """Diff against the session (O(session)) and build; marked changes are superseded."""
        return self._handler._build_from(self._wanted)


def fetch_request_body(
    data: FetchRequestData,
    version: int,
    *,
    max_wait_ms: int,
    min_bytes: int,
    max_bytes: int = 0x7FFFFFFF,
    isolation_level: IsolationLevel = IsolationLevel.READ_UNCOMMITTED,
    replica_id: int = -1,
    replica_epoch: int = -1,
    rack_id: str = "",
) -> dict[str, Any]:
    """The Fetch request body (v4-17) for ``data``.

    Topics are grouped where consecutive partitions share a topic, so request order is session order.
    v13+ names topics by id (``data.can_use_topic_ids`` must hold) and forgets replaced topic ids too;
    below v13 replaced partitions are not forgotten, because the broker applies additions before removals
    and would drop the re-sent partition (kafka-behaviour.md §3.2).
    """
    by_id = version >= TOPIC_IDS_MIN_FETCH_VERSION
    if by_id and not data.can_use_topic_ids:
        raise ValueError(f"Fetch v{version} needs topic ids, but some partitions have none")
    topics: list[dict[str, Any]] = []
    last: object = None
    for tp, pd in data.to_send.items():
        key = pd.topic_id if by_id else tp.topic
        if not topics or key != last:
            topics.append({"topic": tp.topic, "topic_id": pd.topic_id, "partitions": []})
            last = key
        topics[-1]["partitions"].append(
            {
                "partition": tp.partition,
                "current_leader_epoch": pd.current_leader_epoch,
                "fetch_offset": pd.fetch_offset,
                "last_fetched_epoch": pd.last_fetched_epoch,
                "log_start_offset": pd.log_start_offset,
                "partition_max_bytes": pd.max_bytes,
            }
        )
    forget: Iterable[TopicIdPartition] = data.to_forget + data.to_replace if by_id else data.to_forget
    forgotten: dict[object, dict[str, Any]] = {}
    for tip in forget:
        key = tip.topic_id if by_id else tip.topic
        entry = forgotten.get(key)
        if entry is None:
            entry = forgotten[key] = {"topic": tip.topic, "topic_id": tip.topic_id, "partitions": []}
        entry["partitions"].append(tip.partition)
    return {
        "cluster_id": None,
        "replica_id": replica_id,
        "replica_state": {"replica_id": replica_id, "replica_epoch": replica_epoch},
        "max_wait_ms": max_wait_ms,
        "min_bytes": min_bytes,
        "max_bytes": max_bytes,
        "isolation_level": isolation_level,
        "session_id": data.metadata.session_id,
        "session_epoch": data.metadata.epoch,
        "topics": topics,
        "forgotten_topics_data": list(forgotten.values()),
        "rack_id": rack_id,
    }


def _sample(items: Iterable[TopicPartition], limit: int = 5) -> list[TopicPartition]:
    out: list[TopicPartition] = []
    for item in items:
        out.append(item)
        if len(out) == limit:
            break
    return out


__all__ = [
    "FINAL_EPOCH",
    "INITIAL",
    "INITIAL_EPOCH",
    "INVALID_SESSION_ID",
    "LEGACY",
    "FetchMetadata",
    "FetchRequestBuilder",
    "FetchRequestData",
    "FetchSessionHandler",
    "PartitionData",
    "SessionEpoch",
    "SessionId",
    "TopicIdPartition",
    "TopicPartition",
    "fetch_request_body",
    "next_epoch",
]
