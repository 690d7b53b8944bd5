"""FetchResponse bodies: partitions grouped into topics, records left in their segment files.

The response lists partitions in the order the fetch context gives them; adjacent partitions of one
topic share a FetchableTopicResponse, so the same topic may appear more than once (Kafka does the
same). Topics are named for v12 and older and identified by topic id from v13.

Records are encoded as :class:`~protocol.wire.ExternalBytes`: only their length goes into the
encoded message, and the connection writes the file slice itself next to the encoded pieces, so a
fetch never copies record bytes into Python objects before the socket write. A partition without
records gets an empty (not null) records field, as Kafka's MemoryRecords.EMPTY.

Fields Kafka fills in a way that is easy to get wrong:

- AbortedTransactions: null for read_uncommitted and for partitions whose read failed; for a
  successful read_committed read, the aborted transactions of the range read (from the
  transaction index), possibly empty; an empty list for erroneous partitions (Kafka builds those
  from the message defaults).
- CurrentLeader and NodeEndpoints (v16+): only for NOT_LEADER_OR_FOLLOWER and FENCED_LEADER_EPOCH,
  with the endpoints of the leaders named there that the broker can resolve.
- ThrottleTimeMs: 0, there are no quotas.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from broker.fetch.service import PartitionPayload
from broker.fetch_session import FetchResponseParts, PartitionFetchResult, TopicPartitionKey
from broker.handlers.base import EncodedResponse
from protocol.api_keys import ApiKey
from protocol.error_codes import ErrorCode
from protocol.messages import RESPONSES
from protocol.messages.fetch import FETCH_NODE_ENDPOINTS_VERSION as NODE_ENDPOINTS_VERSION
from protocol.messages.fetch import FETCH_TOPIC_ID_VERSION as TOPIC_ID_VERSION
from protocol.wire import ExternalBytes
from storage.slices import FileSlice

_NO_TOPIC = object()


class NodeEndpoint(Protocol):
    """A broker's advertised address (``broker.handlers.metadata.BrokerEndpoint`` is one)."""

    @property
    def node_id(self) -> int: ...

    @property
    def host(self) -> str: ...

    @property
    def port(self) -> int: ...

    @property
    def rack(self) -> str | None: ...


BrokerList = Callable[[], Iterable[NodeEndpoint]]


def response_body(
    version: int,
    parts: FetchResponseParts,
    *,
    read_committed: bool,
    brokers: BrokerList | None = None,
) -> dict[str, Any]:
    """The FetchResponse as a mapping for the codec of ``version`` (records possibly external)."""
    leaders: set[int] = set()
    body: dict[str, Any] = {
        "throttle_time_ms": 0,
        "error_code": parts.error_code,
        "session_id": parts.session_id,
        "responses": _topic_responses(version, parts.partitions, read_committed, leaders),
    }
    if leaders and version >= NODE_ENDPOINTS_VERSION and brokers is not None:
        body["node_endpoints"] = _node_endpoints(leaders, brokers)
    return body


def encode_response(version: int, body: dict[str, Any]) -> EncodedResponse:
    """Encode ``body`` into buffers: encoded bytes interleaved with the records' file slices."""
    pieces, size = RESPONSES[ApiKey.FETCH].codec(version).encode_parts(body)
    return EncodedResponse(pieces, size)


def _topic_responses(
    version: int,
    partitions: Iterable[tuple[TopicPartitionKey, PartitionFetchResult]],
    read_committed: bool,
    leaders: set[int],
) -> list[dict[str, Any]]:
    """Group adjacent partitions of one topic (by id from v13, by name before).

    Adds to ``leaders`` the node ids named in CurrentLeader fields.
    """
    by_id = version >= TOPIC_ID_VERSION
    topics: list[dict[str, Any]] = []
    current: object = _NO_TOPIC
    members: list[dict[str, Any]] = []
    for key, result in partitions:
        topic: str | uuid.UUID | None = key.topic_id if by_id else key.topic_name
        if topic != current:
            current = topic
            members = []
            topics.append({"topic": key.topic_name or "", "topic_id": key.topic_id, "partitions": members})
        members.append(_partition_data(key, result, read_committed, leaders))
    return topics


def _partition_data(
    key: TopicPartitionKey, result: PartitionFetchResult, read_committed: bool, leaders: set[int]
) -> dict[str, Any]:
    payload = result.payload if isinstance(result.payload, PartitionPayload) else None
    data: dict[str, Any] = {
        "partition_index": key.partition,
        "error_code": result.error_code,
        "high_watermark": result.high_watermark,
        "last_stable_offset": result.last_stable_offset,
        "log_start_offset": result.log_start_offset,
        "aborted_transactions": _aborted_transactions(result, read_committed),
        "preferred_read_replica": result.preferred_read_replica,
        "records": b"" if payload is None else _records(payload.records),
    }
    if result.diverging_epoch >= 0 and payload is not None:
        end_offset = payload.diverging_end_offset
        data["diverging_epoch"] = {"epoch": result.diverging_epoch, "end_offset": end_offset}
    if payload is not None and payload.snapshot_id is not None:
        end_offset, epoch = payload.snapshot_id
        data["snapshot_id"] = {"end_offset": end_offset, "epoch": epoch}
    if payload is not None and payload.current_leader is not None:
        leader_id, leader_epoch = payload.current_leader
        data["current_leader"] = {"leader_id": leader_id, "leader_epoch": leader_epoch}
        if leader_id >= 0:
            leaders.add(leader_id)
    return data


def _aborted_transactions(result: PartitionFetchResult, read_committed: bool) -> list[Any] | None:
    if result.erroneous:
        return []
    if result.error_code != ErrorCode.NONE or not read_committed:
        return None
    return [
        {"producer_id": aborted.producer_id, "first_offset": aborted.first_offset}
        for aborted in result.aborted_transactions
    ]


def _records(records: FileSlice | bytes | None) -> bytes | ExternalBytes:
    """Plain bytes as they are; a file slice as external bytes the connection writes itself."""
    if records is None:
        return b""
    if isinstance(records, bytes):
        return records
    return ExternalBytes(records.length, records) if records.length > 0 else b""


def _node_endpoints(leaders: set[int], brokers: BrokerList) -> list[dict[str, Any]]:
    """The endpoints of ``leaders`` that the broker list knows, by node id."""
    return [
        {"node_id": node.node_id, "host": node.host, "port": node.port, "rack": node.rack}
        for node in sorted(brokers(), key=lambda node: node.node_id)
        if node.node_id in leaders
    ]
