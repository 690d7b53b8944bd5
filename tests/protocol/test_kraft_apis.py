"""The metadata quorum's APIs, byte by byte: Vote, BeginQuorumEpoch, EndQuorumEpoch,
DescribeQuorum, FetchSnapshot.

kafka-python ships DescribeQuorum's JSON (the schema oracle checks it) but not the others', so
these hand-assembled bodies pin what Apache Kafka 4.x's message files say: field order, where a
version turns flexible, the uint16 ports, which fields are tagged and under which tag, and the
fields that come and go between versions. Every version of each is also swept by the generic
round-trip, truncation and unknown-key tests.
"""

from __future__ import annotations

import uuid

import pytest

from protocol.api_keys import ApiKey
from protocol.data import to_plain
from protocol.errors import DecodeError
from protocol.messages import REQUESTS, RESPONSES
from protocol.sentinels import ZERO_UUID

KRAFT_APIS = (
    ApiKey.VOTE,
    ApiKey.BEGIN_QUORUM_EPOCH,
    ApiKey.END_QUORUM_EPOCH,
    ApiKey.DESCRIBE_QUORUM,
    ApiKey.FETCH_SNAPSHOT,
)
KAFKA_4_VERSIONS = {
    # api key: (valid versions, flexible versions), request and response alike
    ApiKey.VOTE: ("0-2", "0+"),
    ApiKey.BEGIN_QUORUM_EPOCH: ("0-1", "1+"),
    ApiKey.END_QUORUM_EPOCH: ("0-1", "1+"),
    ApiKey.DESCRIBE_QUORUM: ("0-2", "0+"),
    ApiKey.FETCH_SNAPSHOT: ("0-1", "0+"),
}

TOPIC = "__cluster_metadata"
TOPIC_WIRE = bytes([len(TOPIC) + 1]) + TOPIC.encode()  # compact string: length + 1
CANDIDATE_DIR = uuid.UUID("00112233-4455-6677-8899-aabbccddeeff")
VOTER_DIR = uuid.UUID("ffeeddcc-bbaa-9988-7766-554433221100")


def _i16(value: int) -> bytes:
    return value.to_bytes(2, "big", signed=True)


def _i32(value: int) -> bytes:
    return value.to_bytes(4, "big", signed=True)


def _i64(value: int) -> bytes:
    return value.to_bytes(8, "big", signed=True)


@pytest.mark.parametrize("api_key", KRAFT_APIS, ids=lambda key: key.message_name)
def test_every_kafka_4_version_is_declared(api_key: ApiKey) -> None:
    valid, flexible = KAFKA_4_VERSIONS[api_key]
    for spec in (REQUESTS[api_key], RESPONSES[api_key]):
        assert (spec.valid_versions, spec.flexible_versions) == (valid, flexible), spec.name
        assert spec.name.startswith(api_key.message_name)


# -- Vote ------------------------------------------------------------------------------------------

VOTE = REQUESTS[ApiKey.VOTE]
VOTE_RESPONSE = RESPONSES[ApiKey.VOTE]


def _pre_vote(**partition: object) -> dict[str, object]:
    """Node 1, at epoch 4 with a log ending at offset 100 in epoch 4, asks voter 2 whether it would
    vote for it in epoch 5."""
    return {
        "cluster_id": "c",
        "voter_id": 2,
        "topics": [
            {
                "topic_name": TOPIC,
                "partitions": [
                    {
                        "partition_index": 0,
                        "replica_epoch": 5,
                        "replica_id": 1,
                        "replica_directory_id": CANDIDATE_DIR,
                        "voter_directory_id": VOTER_DIR,
                        "last_offset_epoch": 4,
                        "last_offset": 100,
                        "pre_vote": True,
                        **partition,
                    }
                ],
            }
        ],
    }


VOTE_PARTITION_V0 = _i32(0) + _i32(5) + _i32(1)  # partition_index, replica_epoch, replica_id
VOTE_LAST_OFFSET = _i32(4) + _i64(100)  # last_offset_epoch, last_offset
VOTE_V2 = b"".join(
    [
        b"\x02c",  # cluster_id: compact nullable string
        _i32(2),  # voter_id
        b"\x02" + TOPIC_WIRE,  # topics: compact array of 1, topic_name
        b"\x02",  # partitions: compact array of 1
        VOTE_PARTITION_V0,
        CANDIDATE_DIR.bytes,  # replica_directory_id
        VOTER_DIR.bytes,  # voter_directory_id
        VOTE_LAST_OFFSET,
        b"\x01",  # pre_vote
        b"\x00\x00\x00",  # tag buffers: partition, topic, request
    ]
)


def test_vote_v2_pre_vote_request_bytes() -> None:
    codec = VOTE.codec(2)
    assert codec.encode(_pre_vote()) == VOTE_V2
    decoded = codec.decode(VOTE_V2)
    assert to_plain(decoded) == _pre_vote()
    assert codec.encode(decoded) == VOTE_V2


def test_vote_versions_0_and_1_carry_no_pre_vote_flag() -> None:
    v1 = VOTE.codec(1).encode(_pre_vote())
    assert v1 == VOTE_V2.replace(VOTE_LAST_OFFSET + b"\x01", VOTE_LAST_OFFSET)
    v0 = VOTE.codec(0).encode(_pre_vote())
    assert (
        v0
        == b"\x02c" + b"\x02" + TOPIC_WIRE + b"\x02" + VOTE_PARTITION_V0 + VOTE_LAST_OFFSET + b"\x00\x00\x00"
    )
    partition = VOTE.codec(0).decode(v0).topics[0].partitions[0]
    assert (partition.replica_directory_id, partition.voter_directory_id) == (ZERO_UUID, ZERO_UUID)
    assert partition.pre_vote is False
    assert VOTE.codec(0).decode(v0).voter_id == -1  # absent before v1: the declared default


def test_vote_request_without_cluster_id() -> None:
    encoded = VOTE.codec(2).encode({**_pre_vote(), "cluster_id": None})
    assert encoded == b"\x00" + VOTE_V2[2:]
    assert VOTE.codec(2).decode(encoded).cluster_id is None


def _vote_answer(granted: bool) -> dict[str, object]:
    partition = {
        "partition_index": 0,
        "error_code": 0,
        "leader_id": 3,
        "leader_epoch": 4,
        "vote_granted": granted,
    }
    return {
        "error_code": 0,
        "topics": [{"topic_name": TOPIC, "partitions": [partition]}],
        "node_endpoints": [{"node_id": 3, "host": "c3", "port": 9093}],
    }


def _vote_answer_head(granted: bool) -> bytes:
    """The response up to its own tag buffer."""
    return b"".join(
        [
            _i16(0),  # error_code
            b"\x02" + TOPIC_WIRE + b"\x02",  # one topic, one partition
            _i32(0) + _i16(0) + _i32(3) + _i32(4),  # partition_index, error_code, leader_id, leader_epoch
            b"\x01" if granted else b"\x00",  # vote_granted
            b"\x00\x00",  # tag buffers: partition, topic
        ]
    )


NODE_3 = _i32(3) + b"\x03c3" + (9093).to_bytes(2, "big") + b"\x00"  # id, host, uint16 port, tags


def test_vote_response_names_the_leader_endpoint_under_tag_0() -> None:
    endpoints = b"\x02" + NODE_3  # compact array of 1
    tagged = b"\x01" + b"\x00" + bytes([len(endpoints)]) + endpoints  # 1 field, tag 0, size
    v1 = VOTE_RESPONSE.codec(1).encode(_vote_answer(False))
    assert v1 == _vote_answer_head(False) + tagged
    assert VOTE_RESPONSE.codec(2).encode(_vote_answer(False)) == v1  # v2 added no field
    assert VOTE_RESPONSE.codec(0).encode(_vote_answer(False)) == _vote_answer_head(False) + b"\x00"
    decoded = VOTE_RESPONSE.codec(2).decode(v1)
    assert decoded.present_tags == frozenset({0})
    assert [(n.node_id, n.host, n.port) for n in decoded.node_endpoints] == [(3, "c3", 9093)]


def test_vote_response_without_endpoints_writes_no_tag() -> None:
    answer = {**_vote_answer(True), "node_endpoints": []}
    encoded = VOTE_RESPONSE.codec(2).encode(answer)
    assert encoded == _vote_answer_head(True) + b"\x00"
    assert VOTE_RESPONSE.codec(2).decode(encoded).topics[0].partitions[0].vote_granted is True


# -- BeginQuorumEpoch ------------------------------------------------------------------------------

BEGIN = REQUESTS[ApiKey.BEGIN_QUORUM_EPOCH]
LEADER_DIR = uuid.UUID(int=0x51)


def _begin(voter_directory_id: uuid.UUID = VOTER_DIR) -> dict[str, object]:
    partition = {
        "partition_index": 0,
        "voter_directory_id": voter_directory_id,
        "leader_id": 1,
        "leader_epoch": 5,
    }
    return {
        "cluster_id": None,
        "voter_id": 2,
        "topics": [{"topic_name": TOPIC, "partitions": [partition]}],
        "leader_endpoints": [{"name": "CONTROLLER", "host": "c1", "port": 9093}],
    }


def test_begin_quorum_epoch_v0_is_not_flexible() -> None:
    v0 = BEGIN.codec(0).encode(_begin())
    assert v0 == b"".join(
        [
            _i16(-1),  # cluster_id: null, int16 length
            _i32(1) + _i16(len(TOPIC)) + TOPIC.encode(),  # topics: int32 count, int16-length name
            _i32(1) + _i32(0) + _i32(1) + _i32(5),  # partitions: count, index, leader_id, leader_epoch
        ]
    )
    decoded = BEGIN.codec(0).decode(v0)
    assert decoded.voter_id == -1
    assert decoded.leader_endpoints == []


def test_begin_quorum_epoch_v1_adds_voter_key_and_leader_endpoints() -> None:
    v1 = BEGIN.codec(1).encode(_begin())
    assert v1 == b"".join(
        [
            b"\x00",  # cluster_id: null compact string
            _i32(2),  # voter_id
            b"\x02" + TOPIC_WIRE + b"\x02",
            _i32(0) + VOTER_DIR.bytes + _i32(1) + _i32(5),
            b"\x00\x00",  # tag buffers: partition, topic
            b"\x02" + b"\x0bCONTROLLER" + b"\x03c1" + (9093).to_bytes(2, "big") + b"\x00",  # not tagged
            b"\x00",
        ]
    )
    assert to_plain(BEGIN.codec(1).decode(v1)) == _begin()


def test_begin_quorum_epoch_response_v0_and_v1() -> None:
    codec0 = RESPONSES[ApiKey.BEGIN_QUORUM_EPOCH].codec(0)
    codec1 = RESPONSES[ApiKey.BEGIN_QUORUM_EPOCH].codec(1)
    partition = {"partition_index": 0, "error_code": 0, "leader_id": 1, "leader_epoch": 5}
    body = {
        "error_code": 0,
        "topics": [{"topic_name": TOPIC, "partitions": [partition]}],
        "node_endpoints": [{"node_id": 1, "host": "c1", "port": 9093}],
    }
    fields = _i32(0) + _i16(0) + _i32(1) + _i32(5)
    assert codec0.encode(body) == _i16(0) + _i32(1) + _i16(len(TOPIC)) + TOPIC.encode() + _i32(1) + fields
    v1 = codec1.encode(body)
    endpoints = b"\x02" + _i32(1) + b"\x03c1" + (9093).to_bytes(2, "big") + b"\x00"
    tagged = b"\x01\x00" + bytes([len(endpoints)]) + endpoints  # 1 field, tag 0, size
    assert v1 == _i16(0) + b"\x02" + TOPIC_WIRE + b"\x02" + fields + b"\x00\x00" + tagged
    assert to_plain(codec1.decode(v1)) == body


# -- EndQuorumEpoch --------------------------------------------------------------------------------

END = REQUESTS[ApiKey.END_QUORUM_EPOCH]


def _end() -> dict[str, object]:
    partition = {
        "partition_index": 0,
        "leader_id": 1,
        "leader_epoch": 5,
        "preferred_successors": [3, 2],
        "preferred_candidates": [
            {"candidate_id": 3, "candidate_directory_id": CANDIDATE_DIR},
            {"candidate_id": 2, "candidate_directory_id": VOTER_DIR},
        ],
    }
    return {
        "cluster_id": "c",
        "topics": [{"topic_name": TOPIC, "partitions": [partition]}],
        "leader_endpoints": [{"name": "CONTROLLER", "host": "c1", "port": 9093}],
    }


def test_end_quorum_epoch_v0_lists_successor_ids() -> None:
    v0 = END.codec(0).encode(_end())
    head = _i16(1) + b"c" + _i32(1) + _i16(len(TOPIC)) + TOPIC.encode() + _i32(1)
    assert v0 == head + _i32(0) + _i32(1) + _i32(5) + _i32(2) + _i32(3) + _i32(2)
    partition = END.codec(0).decode(v0).topics[0].partitions[0]
    assert (partition.preferred_successors, partition.preferred_candidates) == ([3, 2], [])


def test_end_quorum_epoch_v1_lists_candidates_by_replica_key() -> None:
    v1 = END.codec(1).encode(_end())
    candidates = b"\x03" + _i32(3) + CANDIDATE_DIR.bytes + b"\x00" + _i32(2) + VOTER_DIR.bytes + b"\x00"
    endpoints = b"\x02" + b"\x0bCONTROLLER" + b"\x03c1" + (9093).to_bytes(2, "big") + b"\x00"
    partition = _i32(0) + _i32(1) + _i32(5) + candidates + b"\x00"
    assert v1 == b"\x02c" + b"\x02" + TOPIC_WIRE + b"\x02" + partition + b"\x00" + endpoints + b"\x00"
    decoded = END.codec(1).decode(v1).topics[0].partitions[0]
    assert decoded.preferred_successors == []
    assert [c.candidate_id for c in decoded.preferred_candidates] == [3, 2]


def test_end_quorum_epoch_response_matches_begin_quorum_epoch_response() -> None:
    """Kafka declares the two responses alike, field for field and tag for tag."""
    partition = {"partition_index": 0, "error_code": 6, "leader_id": 2, "leader_epoch": 6}
    body = {
        "error_code": 0,
        "topics": [{"topic_name": TOPIC, "partitions": [partition]}],
        "node_endpoints": [{"node_id": 2, "host": "c2", "port": 65535}],
    }
    for version in (0, 1):
        end = RESPONSES[ApiKey.END_QUORUM_EPOCH].codec(version).encode(body)
        assert end == RESPONSES[ApiKey.BEGIN_QUORUM_EPOCH].codec(version).encode(body)


# -- DescribeQuorum --------------------------------------------------------------------------------

DESCRIBE = REQUESTS[ApiKey.DESCRIBE_QUORUM]
DESCRIBE_RESPONSE = RESPONSES[ApiKey.DESCRIBE_QUORUM]
DIRS = {1: uuid.UUID(int=0x11), 2: uuid.UUID(int=0x22), 3: uuid.UUID(int=0x33), 4: uuid.UUID(int=0x44)}


def test_describe_quorum_request_is_the_same_in_every_version() -> None:
    body = {"topics": [{"topic_name": TOPIC, "partitions": [{"partition_index": 0}]}]}
    wire = b"\x02" + TOPIC_WIRE + b"\x02" + _i32(0) + b"\x00\x00\x00"
    assert {DESCRIBE.codec(v).encode(body) for v in (0, 1, 2)} == {wire}


def _replica(node: int, end: int, fetched: int, caught_up: int) -> dict[str, object]:
    return {
        "replica_id": node,
        "replica_directory_id": DIRS[node],
        "log_end_offset": end,
        "last_fetch_timestamp": fetched,
        "last_caught_up_timestamp": caught_up,
    }


def _quorum() -> dict[str, object]:
    """Leader 1 of epoch 7 with voters 2 and 3 (3 behind) and broker 4 observing."""
    partition = {
        "partition_index": 0,
        "error_code": 0,
        "error_message": None,
        "leader_id": 1,
        "leader_epoch": 7,
        "high_watermark": 120,
        "current_voters": [
            _replica(1, 130, -1, 1_700_000_000_000),
            _replica(2, 130, 1_700_000_000_000, 1_700_000_000_000),
            _replica(3, 90, 1_699_999_999_000, 1_699_999_990_000),
        ],
        "observers": [_replica(4, 125, 1_700_000_000_000, 1_699_999_999_500)],
    }
    return {
        "error_code": 0,
        "error_message": None,
        "topics": [{"topic_name": TOPIC, "partitions": [partition]}],
        "nodes": [
            {"node_id": node, "listeners": [{"name": "CONTROLLER", "host": f"c{node}", "port": 9093}]}
            for node in (1, 2, 3)
        ],
    }


def _replica_wire(node: int, end: int, fetched: int, caught_up: int, version: int) -> bytes:
    wire = _i32(node) + (DIRS[node].bytes if version >= 2 else b"") + _i64(end)
    if version >= 1:
        wire += _i64(fetched) + _i64(caught_up)
    return wire + b"\x00"


def _quorum_wire(version: int) -> bytes:
    voters = [(1, 130, -1, 1_700_000_000_000), (2, 130, 1_700_000_000_000, 1_700_000_000_000)]
    voters.append((3, 90, 1_699_999_999_000, 1_699_999_990_000))
    observer = (4, 125, 1_700_000_000_000, 1_699_999_999_500)
    message = b"\x00" if version >= 2 else b""  # error_message: null compact string
    partition = b"".join(
        [
            _i32(0) + _i16(0) + message + _i32(1) + _i32(7) + _i64(120),
            b"\x04" + b"".join(_replica_wire(*voter, version) for voter in voters),
            b"\x02" + _replica_wire(*observer, version),
            b"\x00",
        ]
    )
    nodes = b""
    if version >= 2:
        listener = b"\x0bCONTROLLER"
        nodes = b"\x04" + b"".join(
            _i32(n)
            + b"\x02"
            + listener
            + bytes([3])
            + f"c{n}".encode()
            + (9093).to_bytes(2, "big")
            + b"\x00\x00"
            for n in (1, 2, 3)
        )
    return _i16(0) + message + b"\x02" + TOPIC_WIRE + b"\x02" + partition + b"\x00" + nodes + b"\x00"


def test_describe_quorum_v2_response_with_nodes_and_listeners() -> None:
    codec = DESCRIBE_RESPONSE.codec(2)
    wire = _quorum_wire(2)
    assert codec.encode(_quorum()) == wire
    decoded = codec.decode(wire)
    assert to_plain(decoded) == _quorum()
    assert [(n.node_id, [(lst.name, lst.host, lst.port) for lst in n.listeners]) for n in decoded.nodes] == [
        (1, [("CONTROLLER", "c1", 9093)]),
        (2, [("CONTROLLER", "c2", 9093)]),
        (3, [("CONTROLLER", "c3", 9093)]),
    ]
    assert codec.encode(decoded) == wire


@pytest.mark.parametrize("version", [0, 1])
def test_describe_quorum_older_responses_drop_what_later_versions_added(version: int) -> None:
    wire = _quorum_wire(version)
    assert DESCRIBE_RESPONSE.codec(version).encode(_quorum()) == wire
    decoded = DESCRIBE_RESPONSE.codec(version).decode(wire)
    assert decoded.nodes == []
    assert decoded.error_message == ""  # absent before v2, and Kafka declares no default
    voter = decoded.topics[0].partitions[0].current_voters[2]
    assert voter.replica_directory_id == ZERO_UUID
    assert voter.log_end_offset == 90
    expected = (-1, -1) if version == 0 else (1_699_999_999_000, 1_699_999_990_000)
    assert (voter.last_fetch_timestamp, voter.last_caught_up_timestamp) == expected


# -- FetchSnapshot ---------------------------------------------------------------------------------

SNAPSHOT = REQUESTS[ApiKey.FETCH_SNAPSHOT]
SNAPSHOT_RESPONSE = RESPONSES[ApiKey.FETCH_SNAPSHOT]


def _snapshot_request(**partition: object) -> dict[str, object]:
    """Observer 4 reads the snapshot ending at offset 1000 (epoch 6) from byte 4096 on."""
    return {
        "cluster_id": "c",
        "replica_id": 4,
        "max_bytes": 8192,
        "topics": [
            {
                "name": TOPIC,
                "partitions": [
                    {
                        "partition": 0,
                        "current_leader_epoch": 7,
                        "snapshot_id": {"end_offset": 1000, "epoch": 6},
                        "position": 4096,
                        "replica_directory_id": DIRS[4],
                        **partition,
                    }
                ],
            }
        ],
    }


SNAPSHOT_ID = _i64(1000) + _i32(6) + b"\x00"  # end_offset, epoch, the struct's tag buffer
SNAPSHOT_PARTITION = _i32(0) + _i32(7) + SNAPSHOT_ID + _i64(4096)
SNAPSHOT_HEAD = _i32(4) + _i32(8192) + b"\x02" + TOPIC_WIRE + b"\x02"
CLUSTER_ID_TAG = b"\x01" + b"\x00" + b"\x02" + b"\x02c"  # 1 field, tag 0, 2 bytes: compact "c"


def test_fetch_snapshot_v1_request_tags_cluster_id_and_directory_id() -> None:
    v1 = SNAPSHOT.codec(1).encode(_snapshot_request())
    directory_tag = b"\x01" + b"\x00" + b"\x10" + DIRS[4].bytes  # 1 field, tag 0, 16 bytes
    assert v1 == SNAPSHOT_HEAD + SNAPSHOT_PARTITION + directory_tag + b"\x00" + CLUSTER_ID_TAG
    decoded = SNAPSHOT.codec(1).decode(v1)
    assert to_plain(decoded) == _snapshot_request()
    assert decoded.topics[0].partitions[0].present_tags == frozenset({0})
    assert SNAPSHOT.codec(1).encode(decoded) == v1


def test_fetch_snapshot_v0_request_has_no_directory_id() -> None:
    v0 = SNAPSHOT.codec(0).encode(_snapshot_request())
    assert v0 == SNAPSHOT_HEAD + SNAPSHOT_PARTITION + b"\x00" + b"\x00" + CLUSTER_ID_TAG
    assert SNAPSHOT.codec(1).encode(_snapshot_request(replica_directory_id=ZERO_UUID)) == v0


def test_fetch_snapshot_request_defaults() -> None:
    """Nothing tagged and every default: replica -1, max bytes 2^31 - 1, no cluster id."""
    decoded = SNAPSHOT.codec(1).decode(_i32(-1) + _i32(0x7FFFFFFF) + b"\x01" + b"\x00")
    assert (decoded.cluster_id, decoded.replica_id, decoded.max_bytes, decoded.topics) == (
        None,
        -1,
        2**31 - 1,
        [],
    )
    assert SNAPSHOT.codec(1).encode({"topics": []}) == _i32(-1) + _i32(0x7FFFFFFF) + b"\x01" + b"\x00"


def _snapshot_chunk(leader: dict[str, int] | None) -> dict[str, object]:
    partition: dict[str, object] = {
        "index": 0,
        "error_code": 0,
        "snapshot_id": {"end_offset": 1000, "epoch": 6},
        "size": 10_000,
        "position": 4096,
        "unaligned_records": b"\x00\x01\x02",
    }
    if leader is not None:
        partition["current_leader"] = leader
    return {
        "throttle_time_ms": 0,
        "error_code": 0,
        "topics": [{"name": TOPIC, "partitions": [partition]}],
        "node_endpoints": [{"node_id": 1, "host": "c1", "port": 9093}],
    }


CHUNK_PARTITION = _i32(0) + _i16(0) + SNAPSHOT_ID + _i64(10_000) + _i64(4096) + b"\x04\x00\x01\x02"
CHUNK_HEAD = _i32(0) + _i16(0) + b"\x02" + TOPIC_WIRE + b"\x02"
NODE_1 = b"\x02" + _i32(1) + b"\x03c1" + (9093).to_bytes(2, "big") + b"\x00"  # an array of 1
NODE_1_TAG = b"\x01\x00" + bytes([len(NODE_1)]) + NODE_1  # 1 field, tag 0, size


def test_fetch_snapshot_response_tags_current_leader_and_endpoints() -> None:
    v1 = SNAPSHOT_RESPONSE.codec(1).encode(_snapshot_chunk({"leader_id": 1, "leader_epoch": 7}))
    leader_tag = b"\x01\x00\x09" + _i32(1) + _i32(7) + b"\x00"  # tag 0: the struct and its tag buffer
    assert v1 == CHUNK_HEAD + CHUNK_PARTITION + leader_tag + b"\x00" + NODE_1_TAG
    decoded = SNAPSHOT_RESPONSE.codec(1).decode(v1)
    partition = decoded.topics[0].partitions[0]
    assert (partition.current_leader.leader_id, partition.current_leader.leader_epoch) == (1, 7)
    assert partition.unaligned_records == b"\x00\x01\x02"
    assert SNAPSHOT_RESPONSE.codec(1).encode(decoded) == v1
    v0 = SNAPSHOT_RESPONSE.codec(0).encode(_snapshot_chunk({"leader_id": 1, "leader_epoch": 7}))
    assert v0 == CHUNK_HEAD + CHUNK_PARTITION + leader_tag + b"\x00" + b"\x00"  # no endpoints before v1


def test_fetch_snapshot_response_current_leader_at_its_default_is_not_written() -> None:
    """Kafka gives LeaderIdAndEpoch no explicit defaults here, so (0, 0) is the default."""
    plain = SNAPSHOT_RESPONSE.codec(1).encode(_snapshot_chunk(None))
    assert plain == SNAPSHOT_RESPONSE.codec(1).encode(_snapshot_chunk({"leader_id": 0, "leader_epoch": 0}))
    assert plain == CHUNK_HEAD + CHUNK_PARTITION + b"\x00" + b"\x00" + NODE_1_TAG


@pytest.mark.parametrize("compiled", [True, False])
def test_truncated_quorum_bodies_are_decode_errors(compiled: bool) -> None:
    """Including the cuts that remove only a trailing tag buffer or a tagged field."""
    for spec, version, encoded in [
        (VOTE, 2, VOTE_V2),
        (BEGIN, 0, BEGIN.codec(0).encode(_begin())),
        (DESCRIBE_RESPONSE, 2, _quorum_wire(2)),
        (SNAPSHOT, 1, SNAPSHOT.codec(1).encode(_snapshot_request())),
    ]:
        for cut in range(len(encoded)):
            with pytest.raises(DecodeError):
                spec.codec(version, compiled=compiled).decode(encoded[:cut])
