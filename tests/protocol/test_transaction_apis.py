"""The transaction APIs, declared as data: AddPartitionsToTxn, AddOffsetsToTxn, EndTxn,
WriteTxnMarkers, TxnOffsetCommit, DescribeProducers, DescribeTransactions, ListTransactions.

Every declared version of each request and response carries a representative body through encode
and decode (compiled and interpreted codecs alike); hand-assembled bodies pin the wire layout of
at least one version per API: field order, where a version turns flexible, nullable strings, and
the fields that come and go between versions. The schema oracle checks the same declarations
against the JSON that kafka-python ships.
"""

from __future__ import annotations

from typing import Any

import pytest

from protocol.api_keys import ApiKey
from protocol.data import to_plain
from protocol.messages import REQUESTS, RESPONSES
from protocol.schema import MessageSpec
from tests.protocol.strategies import with_defaults

DECLARED = {
    # api key: (declared versions, flexible versions), request and response alike
    ApiKey.ADD_PARTITIONS_TO_TXN: ("0-5", "3+"),
    ApiKey.ADD_OFFSETS_TO_TXN: ("0-4", "3+"),
    ApiKey.END_TXN: ("0-5", "3+"),
    ApiKey.WRITE_TXN_MARKERS: ("1-2", "1+"),  # Kafka 4 removed v0 (KIP-896)
    ApiKey.TXN_OFFSET_COMMIT: ("0-4", "3+"),
    ApiKey.DESCRIBE_PRODUCERS: ("0", "0+"),
    ApiKey.DESCRIBE_TRANSACTIONS: ("0", "0+"),
    ApiKey.LIST_TRANSACTIONS: ("0-1", "0+"),
}

TXN = "txn"
PID = 4242
EPOCH = 3


def _i8(value: int) -> bytes:
    return value.to_bytes(1, "big", signed=True)


def _i16(value: int) -> bytes:
    return value.to_bytes(2, "big", signed=True)


def _i32(value: int) -> bytes:
    return value.to_bytes(4, "big", signed=True)


def _i64(value: int) -> bytes:
    return value.to_bytes(8, "big", signed=True)


def _str(text: str) -> bytes:
    """Classic string: int16 length, then the bytes."""
    return _i16(len(text)) + text.encode()


def _cstr(text: str) -> bytes:
    """Compact string: unsigned varint length + 1 (every length here fits one byte)."""
    return bytes([len(text) + 1]) + text.encode()


NULL_STR = _i16(-1)
NULL_CSTR = b"\x00"
TAGS = b"\x00"  # an empty tag buffer


def _array(items: list[bytes]) -> bytes:
    return _i32(len(items)) + b"".join(items)


def _carray(items: list[bytes]) -> bytes:
    return bytes([len(items) + 1]) + b"".join(items)


# -- representative bodies: every field of every version, none at its default --------------------

_TOPIC = {"name": "orders", "partitions": [0, 3]}
_TOPIC_RESULT = {
    "name": "orders",
    "results_by_partition": [
        {"partition_index": 0, "partition_error_code": 0},
        {"partition_index": 3, "partition_error_code": 51},
    ],
}

SAMPLES: dict[int, tuple[dict[str, Any], dict[str, Any]]] = {
    ApiKey.ADD_PARTITIONS_TO_TXN: (
        {
            "transactions": [
                {
                    "transactional_id": TXN,
                    "producer_id": PID,
                    "producer_epoch": EPOCH,
                    "verify_only": True,
                    "topics": [_TOPIC, {"name": "audit", "partitions": []}],
                },
                {
                    "transactional_id": "other",
                    "producer_id": 7,
                    "producer_epoch": 0,
                    "verify_only": False,
                    "topics": [],
                },
            ],
            "v3_and_below_transactional_id": TXN,
            "v3_and_below_producer_id": PID,
            "v3_and_below_producer_epoch": EPOCH,
            "v3_and_below_topics": [_TOPIC],
        },
        {
            "throttle_time_ms": 5,
            "error_code": 48,
            "results_by_transaction": [{"transactional_id": TXN, "topic_results": [_TOPIC_RESULT]}],
            "results_by_topic_v3_and_below": [_TOPIC_RESULT],
        },
    ),
    ApiKey.ADD_OFFSETS_TO_TXN: (
        {"transactional_id": TXN, "producer_id": PID, "producer_epoch": EPOCH, "group_id": "readers"},
        {"throttle_time_ms": 5, "error_code": 51},
    ),
    ApiKey.END_TXN: (
        {"transactional_id": TXN, "producer_id": PID, "producer_epoch": EPOCH, "committed": True},
        {"throttle_time_ms": 5, "error_code": 0, "producer_id": PID, "producer_epoch": EPOCH + 1},
    ),
    ApiKey.WRITE_TXN_MARKERS: (
        {
            "markers": [
                {
                    "producer_id": PID,
                    "producer_epoch": EPOCH,
                    "transaction_result": True,
                    "topics": [{"name": "orders", "partition_indexes": [0, 3]}],
                    "coordinator_epoch": 7,
                    "transaction_version": 2,
                }
            ]
        },
        {
            "markers": [
                {
                    "producer_id": PID,
                    "topics": [
                        {
                            "name": "orders",
                            "partitions": [
                                {"partition_index": 0, "error_code": 0},
                                {"partition_index": 3, "error_code": 6},
                            ],
                        }
                    ],
                }
            ]
        },
    ),
    ApiKey.TXN_OFFSET_COMMIT: (
        {
            "transactional_id": TXN,
            "group_id": "readers",
            "producer_id": PID,
            "producer_epoch": EPOCH,
            "generation_id": 12,
            "member_id": "member-1",
            "group_instance_id": "instance-1",
            "topics": [
                {
                    "name": "orders",
                    "partitions": [
                        {
                            "partition_index": 0,
                            "committed_offset": 100,
                            "committed_leader_epoch": 4,
                            "committed_metadata": "meta",
                        },
                        {
                            "partition_index": 3,
                            "committed_offset": 7,
                            "committed_leader_epoch": 4,
                            "committed_metadata": None,
                        },
                    ],
                }
            ],
        },
        {
            "throttle_time_ms": 5,
            "topics": [{"name": "orders", "partitions": [{"partition_index": 0, "error_code": 22}]}],
        },
    ),
    ApiKey.DESCRIBE_PRODUCERS: (
        {"topics": [{"name": "orders", "partition_indexes": [0, 3]}]},
        {
            "throttle_time_ms": 5,
            "topics": [
                {
                    "name": "orders",
                    "partitions": [
                        {
                            "partition_index": 0,
                            "error_code": 0,
                            "error_message": None,
                            "active_producers": [
                                {
                                    "producer_id": PID,
                                    "producer_epoch": 70000,  # an int32 here
                                    "last_sequence": 99,
                                    "last_timestamp": 1_700_000_000_000,
                                    "coordinator_epoch": 2,
                                    "current_txn_start_offset": 40,
                                }
                            ],
                        },
                        {
                            "partition_index": 3,
                            "error_code": 6,
                            "error_message": "not the leader",
                            "active_producers": [],
                        },
                    ],
                }
            ],
        },
    ),
    ApiKey.DESCRIBE_TRANSACTIONS: (
        {"transactional_ids": [TXN, "other"]},
        {
            "throttle_time_ms": 5,
            "transaction_states": [
                {
                    "error_code": 0,
                    "transactional_id": TXN,
                    "transaction_state": "Ongoing",
                    "transaction_timeout_ms": 60000,
                    "transaction_start_time_ms": 1_700_000_000_000,
                    "producer_id": PID,
                    "producer_epoch": EPOCH,
                    "topics": [{"topic": "orders", "partitions": [0, 3]}],
                }
            ],
        },
    ),
    ApiKey.LIST_TRANSACTIONS: (
        {"state_filters": ["Ongoing"], "producer_id_filters": [PID, 7], "duration_filter": 60000},
        {
            "throttle_time_ms": 5,
            "error_code": 0,
            "unknown_state_filters": ["Bogus"],
            "transaction_states": [
                {"transactional_id": TXN, "producer_id": PID, "transaction_state": "PrepareCommit"}
            ],
        },
    ),
}

CASES = [
    (spec, sample, version)
    for key, samples in SAMPLES.items()
    for spec, sample in zip((REQUESTS[key], RESPONSES[key]), samples)
    for version in spec.version_list()
]
IDS = [f"{spec.name}-v{version}" for spec, _, version in CASES]


@pytest.mark.parametrize("api_key", list(DECLARED), ids=lambda key: key.message_name)
def test_declared_versions(api_key: ApiKey) -> None:
    valid, flexible = DECLARED[api_key]
    for spec in (REQUESTS[api_key], RESPONSES[api_key]):
        assert spec.api_key == api_key
        assert (spec.valid_versions, spec.flexible_versions) == (valid, flexible), spec.name


@pytest.mark.parametrize(("spec", "sample", "version"), CASES, ids=IDS)
def test_representative_body_round_trips(spec: MessageSpec, sample: dict[str, Any], version: int) -> None:
    compiled = spec.codec(version)
    interpreted = spec.codec(version, compiled=False)
    encoded = compiled.encode(sample)
    assert interpreted.encode(sample) == encoded
    expected = to_plain(with_defaults(spec.fields, version, sample))
    assert to_plain(compiled.decode(encoded)) == expected
    assert to_plain(interpreted.decode(encoded)) == expected
    assert compiled.encode(compiled.decode(encoded)) == encoded


def _check(spec: MessageSpec, version: int, data: dict[str, Any], wire: bytes) -> Any:
    """``data`` encodes to exactly ``wire`` (both codecs) and ``wire`` decodes back to it."""
    assert spec.codec(version).encode(data) == wire
    assert spec.codec(version, compiled=False).encode(data) == wire
    decoded = spec.codec(version).decode(wire)
    assert to_plain(spec.codec(version, compiled=False).decode(wire)) == to_plain(decoded)
    return decoded


# -- AddPartitionsToTxn ---------------------------------------------------------------------------


def test_add_partitions_to_txn_v0_request_bytes() -> None:
    data = {
        "v3_and_below_transactional_id": TXN,
        "v3_and_below_producer_id": PID,
        "v3_and_below_producer_epoch": EPOCH,
        "v3_and_below_topics": [{"name": "a", "partitions": [0, 3]}],
    }
    wire = _str(TXN) + _i64(PID) + _i16(EPOCH) + _array([_str("a") + _array([_i32(0), _i32(3)])])
    decoded = _check(REQUESTS[ApiKey.ADD_PARTITIONS_TO_TXN], 0, data, wire)
    assert decoded.transactions == []  # the v4+ batch form is absent


def test_add_partitions_to_txn_v4_request_is_the_batched_form() -> None:
    data = {
        "transactions": [
            {
                "transactional_id": TXN,
                "producer_id": PID,
                "producer_epoch": EPOCH,
                "verify_only": True,
                "topics": [{"name": "a", "partitions": [0, 3]}],
            }
        ]
    }
    topic = _cstr("a") + _carray([_i32(0), _i32(3)]) + TAGS
    transaction = _cstr(TXN) + _i64(PID) + _i16(EPOCH) + b"\x01" + _carray([topic]) + TAGS
    wire = _carray([transaction]) + TAGS
    decoded = _check(REQUESTS[ApiKey.ADD_PARTITIONS_TO_TXN], 4, data, wire)
    assert decoded.v3_and_below_transactional_id == ""
    assert decoded.v3_and_below_topics == []


def test_add_partitions_to_txn_v3_and_v4_response_bytes() -> None:
    spec = RESPONSES[ApiKey.ADD_PARTITIONS_TO_TXN]
    result = {"name": "a", "results_by_partition": [{"partition_index": 3, "partition_error_code": 51}]}
    topic_wire = _cstr("a") + _carray([_i32(3) + _i16(51) + TAGS]) + TAGS
    v3 = _check(
        spec,
        3,
        {"throttle_time_ms": 0, "results_by_topic_v3_and_below": [result]},
        _i32(0) + _carray([topic_wire]) + TAGS,
    )
    assert v3.error_code == 0
    assert v3.results_by_transaction == []
    v4 = {
        "throttle_time_ms": 0,
        "error_code": 0,
        "results_by_transaction": [{"transactional_id": TXN, "topic_results": [result]}],
    }
    _check(spec, 4, v4, _i32(0) + _i16(0) + _carray([_cstr(TXN) + _carray([topic_wire]) + TAGS]) + TAGS)


# -- AddOffsetsToTxn ------------------------------------------------------------------------------


def test_add_offsets_to_txn_v0_and_v3_bytes() -> None:
    data = {"transactional_id": TXN, "producer_id": PID, "producer_epoch": EPOCH, "group_id": "g"}
    request = REQUESTS[ApiKey.ADD_OFFSETS_TO_TXN]
    _check(request, 0, data, _str(TXN) + _i64(PID) + _i16(EPOCH) + _str("g"))
    _check(request, 3, data, _cstr(TXN) + _i64(PID) + _i16(EPOCH) + _cstr("g") + TAGS)
    response = RESPONSES[ApiKey.ADD_OFFSETS_TO_TXN]
    _check(response, 0, {"throttle_time_ms": 1, "error_code": 51}, _i32(1) + _i16(51))
    _check(response, 4, {"throttle_time_ms": 1, "error_code": 51}, _i32(1) + _i16(51) + TAGS)


# -- EndTxn ---------------------------------------------------------------------------------------

END_TXN_V0 = bytes.fromhex(
    "0003 74786e"  # transactional_id "txn"
    "0000000000001092"  # producer_id 4242
    "0003"  # producer_epoch
    "01"  # committed
)


def test_end_txn_v0_request_bytes() -> None:
    data = {"transactional_id": TXN, "producer_id": PID, "producer_epoch": EPOCH, "committed": True}
    _check(REQUESTS[ApiKey.END_TXN], 0, data, END_TXN_V0)
    flexible = bytes.fromhex("04 74786e 0000000000001092 0003 01 00")
    for version in (3, 4, 5):
        _check(REQUESTS[ApiKey.END_TXN], version, data, flexible)


def test_end_txn_v5_response_carries_the_next_producer_id_and_epoch() -> None:
    spec = RESPONSES[ApiKey.END_TXN]
    data = {"throttle_time_ms": 0, "error_code": 0, "producer_id": PID, "producer_epoch": EPOCH + 1}
    _check(spec, 5, data, _i32(0) + _i16(0) + _i64(PID) + _i16(EPOCH + 1) + TAGS)
    v4 = _check(spec, 4, data, _i32(0) + _i16(0) + TAGS)
    assert (v4.producer_id, v4.producer_epoch) == (-1, -1)  # absent before v5: Kafka's defaults
    _check(spec, 0, data, _i32(0) + _i16(0))


# -- WriteTxnMarkers ------------------------------------------------------------------------------


def test_write_txn_markers_v1_and_v2_request_bytes() -> None:
    marker = {
        "producer_id": PID,
        "producer_epoch": EPOCH,
        "transaction_result": True,
        "topics": [{"name": "a", "partition_indexes": [0]}],
        "coordinator_epoch": 7,
        "transaction_version": 2,
    }
    head = _i64(PID) + _i16(EPOCH) + b"\x01" + _carray([_cstr("a") + _carray([_i32(0)]) + TAGS]) + _i32(7)
    spec = REQUESTS[ApiKey.WRITE_TXN_MARKERS]
    v1 = _check(spec, 1, {"markers": [marker]}, _carray([head + TAGS]) + TAGS)
    assert v1.markers[0].transaction_version == 0
    _check(spec, 2, {"markers": [marker]}, _carray([head + _i8(2) + TAGS]) + TAGS)


def test_write_txn_markers_v1_response_bytes() -> None:
    data = {
        "markers": [
            {
                "producer_id": PID,
                "topics": [{"name": "a", "partitions": [{"partition_index": 0, "error_code": 6}]}],
            }
        ]
    }
    partition = _i32(0) + _i16(6) + TAGS
    wire = _carray([_i64(PID) + _carray([_cstr("a") + _carray([partition]) + TAGS]) + TAGS]) + TAGS
    _check(RESPONSES[ApiKey.WRITE_TXN_MARKERS], 1, data, wire)
    _check(RESPONSES[ApiKey.WRITE_TXN_MARKERS], 2, data, wire)


# -- TxnOffsetCommit ------------------------------------------------------------------------------


def _txn_offset_commit(**extra: Any) -> dict[str, Any]:
    return {
        "transactional_id": TXN,
        "group_id": "g",
        "producer_id": PID,
        "producer_epoch": EPOCH,
        "topics": [
            {
                "name": "a",
                "partitions": [
                    {
                        "partition_index": 0,
                        "committed_offset": 10,
                        "committed_leader_epoch": 2,
                        "committed_metadata": None,
                    }
                ],
            }
        ],
        **extra,
    }


def test_txn_offset_commit_v0_request_bytes() -> None:
    partition = _i32(0) + _i64(10) + NULL_STR
    wire = _str(TXN) + _str("g") + _i64(PID) + _i16(EPOCH) + _array([_str("a") + _array([partition])])
    decoded = _check(REQUESTS[ApiKey.TXN_OFFSET_COMMIT], 0, _txn_offset_commit(), wire)
    assert decoded.generation_id == -1
    assert decoded.member_id == ""
    assert decoded.group_instance_id is None
    assert decoded.topics[0].partitions[0].committed_leader_epoch == -1


def test_txn_offset_commit_v3_request_adds_the_member() -> None:
    data = _txn_offset_commit(generation_id=5, member_id="m", group_instance_id=None)
    partition = _i32(0) + _i64(10) + _i32(2) + NULL_CSTR + TAGS
    wire = b"".join(
        [
            _cstr(TXN),
            _cstr("g"),
            _i64(PID),
            _i16(EPOCH),
            _i32(5),  # generation_id
            _cstr("m"),  # member_id
            NULL_CSTR,  # group_instance_id
            _carray([_cstr("a") + _carray([partition]) + TAGS]),
            TAGS,
        ]
    )
    _check(REQUESTS[ApiKey.TXN_OFFSET_COMMIT], 3, data, wire)
    with_instance = _check(
        REQUESTS[ApiKey.TXN_OFFSET_COMMIT],
        4,
        {**data, "group_instance_id": "i"},
        wire.replace(_cstr("m") + NULL_CSTR, _cstr("m") + _cstr("i"), 1),
    )
    assert with_instance.group_instance_id == "i"


def test_txn_offset_commit_v0_response_bytes() -> None:
    data = {
        "throttle_time_ms": 0,
        "topics": [{"name": "a", "partitions": [{"partition_index": 0, "error_code": 22}]}],
    }
    _check(
        RESPONSES[ApiKey.TXN_OFFSET_COMMIT],
        0,
        data,
        _i32(0) + _array([_str("a") + _array([_i32(0) + _i16(22)])]),
    )


# -- DescribeProducers ----------------------------------------------------------------------------


def test_describe_producers_v0_bytes() -> None:
    request = {"topics": [{"name": "a", "partition_indexes": [0, 1]}]}
    _check(
        REQUESTS[ApiKey.DESCRIBE_PRODUCERS],
        0,
        request,
        _carray([_cstr("a") + _carray([_i32(0), _i32(1)]) + TAGS]) + TAGS,
    )
    producer = {
        "producer_id": PID,
        "producer_epoch": EPOCH,
        "last_sequence": 9,
        "last_timestamp": 1000,
        "coordinator_epoch": 1,
        "current_txn_start_offset": -1,
    }
    response = {
        "throttle_time_ms": 0,
        "topics": [
            {
                "name": "a",
                "partitions": [
                    {
                        "partition_index": 0,
                        "error_code": 0,
                        "error_message": None,
                        "active_producers": [producer],
                    }
                ],
            }
        ],
    }
    producer_wire = _i64(PID) + _i32(EPOCH) + _i32(9) + _i64(1000) + _i32(1) + _i64(-1) + TAGS
    partition_wire = _i32(0) + _i16(0) + NULL_CSTR + _carray([producer_wire]) + TAGS
    wire = _i32(0) + _carray([_cstr("a") + _carray([partition_wire]) + TAGS]) + TAGS
    _check(RESPONSES[ApiKey.DESCRIBE_PRODUCERS], 0, response, wire)


# -- DescribeTransactions -------------------------------------------------------------------------


def test_describe_transactions_v0_bytes() -> None:
    _check(
        REQUESTS[ApiKey.DESCRIBE_TRANSACTIONS],
        0,
        {"transactional_ids": [TXN, "u"]},
        _carray([_cstr(TXN), _cstr("u")]) + TAGS,
    )
    state = {
        "error_code": 0,
        "transactional_id": TXN,
        "transaction_state": "Empty",
        "transaction_timeout_ms": 60000,
        "transaction_start_time_ms": -1,
        "producer_id": PID,
        "producer_epoch": EPOCH,
        "topics": [{"topic": "a", "partitions": [2]}],
    }
    state_wire = b"".join(
        [
            _i16(0),
            _cstr(TXN),
            _cstr("Empty"),
            _i32(60000),
            _i64(-1),
            _i64(PID),
            _i16(EPOCH),
            _carray([_cstr("a") + _carray([_i32(2)]) + TAGS]),
            TAGS,
        ]
    )
    _check(
        RESPONSES[ApiKey.DESCRIBE_TRANSACTIONS],
        0,
        {"throttle_time_ms": 0, "transaction_states": [state]},
        _i32(0) + _carray([state_wire]) + TAGS,
    )


# -- ListTransactions -----------------------------------------------------------------------------


def test_list_transactions_v0_and_v1_request_bytes() -> None:
    spec = REQUESTS[ApiKey.LIST_TRANSACTIONS]
    data = {"state_filters": ["Ongoing"], "producer_id_filters": [], "duration_filter": 60000}
    filters = _carray([_cstr("Ongoing")]) + _carray([])
    v0 = _check(spec, 0, data, filters + TAGS)
    assert v0.duration_filter == -1  # absent before v1: Kafka's default (no filter)
    _check(spec, 1, data, filters + _i64(60000) + TAGS)


def test_list_transactions_v0_response_bytes() -> None:
    data = {
        "throttle_time_ms": 0,
        "error_code": 0,
        "unknown_state_filters": [],
        "transaction_states": [{"transactional_id": TXN, "producer_id": PID, "transaction_state": "Ongoing"}],
    }
    state = _cstr(TXN) + _i64(PID) + _cstr("Ongoing") + TAGS
    wire = _i32(0) + _i16(0) + _carray([]) + _carray([state]) + TAGS
    for version in (0, 1):
        _check(RESPONSES[ApiKey.LIST_TRANSACTIONS], version, data, wire)


# -- FindCoordinator for transactional ids --------------------------------------------------------


def test_find_coordinator_carries_the_transaction_key_type() -> None:
    spec = REQUESTS[ApiKey.FIND_COORDINATOR]
    v1 = _check(spec, 1, {"key": TXN, "key_type": 1}, _str(TXN) + _i8(1))
    assert v1.key_type == 1
    _check(spec, 3, {"key": TXN, "key_type": 1}, _cstr(TXN) + _i8(1) + TAGS)
    _check(spec, 4, {"key_type": 1, "coordinator_keys": [TXN]}, _i8(1) + _carray([_cstr(TXN)]) + TAGS)
    assert spec.codec(0).decode(_str(TXN)).key_type == 0  # v0 knows only groups
