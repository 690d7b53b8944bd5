"""Real client requests, and seeded mutations of them, for the mutated-frames fault.

The seeds are requests as clients send them: encoded with kipling's protocol codec (the same codec
the round-trip tests prove byte-identical to what kafka-python and librdkafka send), plus, when the
shared reference captures are on this machine, the request frames those clients really sent
(``shared/reference/frames``). Requests that change cluster state on purpose (CreateTopics,
DeleteTopics, config changes...) are left out: a mutation that keeps one valid would be an
operator's act, not a malformed frame. Produce seeds write to a topic of their own, never to the
workload's.

:func:`mutate` turns a seed into the bytes one frame puts on the wire, size prefix included, with
one of the classic fuzzing moves (bit flips, byte garbage, truncation, a lying size prefix,
boundary values in integer fields, a changed api key or version, bad varints, splices of two
frames). Everything comes from a seeded :class:`random.Random`, so a failing run can be replayed.
"""

from __future__ import annotations

import random
import struct
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from protocol.api import decode_request, encode_request
from protocol.api_keys import ApiKey
from protocol.framing import DEFAULT_MAX_FRAME_SIZE
from protocol.records.builder import Record, build_batch

FUZZ_TOPIC = "fault-fuzz"
CAPTURES = Path(__file__).resolve().parents[3] / "shared" / "reference" / "frames"
"""Frames that kafka-python and kcat (librdkafka) sent, when this checkout sits next to shared/."""
MAX_CAPTURED_SEED = 16_384

SAFE_APIS = frozenset(
    {
        ApiKey.PRODUCE,
        ApiKey.FETCH,
        ApiKey.LIST_OFFSETS,
        ApiKey.METADATA,
        ApiKey.OFFSET_COMMIT,
        ApiKey.OFFSET_FETCH,
        ApiKey.FIND_COORDINATOR,
        ApiKey.JOIN_GROUP,
        ApiKey.HEARTBEAT,
        ApiKey.LEAVE_GROUP,
        ApiKey.SYNC_GROUP,
        ApiKey.DESCRIBE_GROUPS,
        ApiKey.LIST_GROUPS,
        ApiKey.API_VERSIONS,
        ApiKey.INIT_PRODUCER_ID,
        ApiKey.DESCRIBE_CONFIGS,
    }
)
"""APIs whose requests read, or write only to the fuzz topic and to groups of their own."""

_INTERESTING_16 = (0, 1, -1, 0x7FFF, -0x8000, 0x100)
_INTERESTING_32 = (0, 1, -1, 0x7FFFFFFF, -0x80000000, 0x10000, DEFAULT_MAX_FRAME_SIZE)
_INTERESTING_64 = (0, -1, 2**63 - 1, -(2**63))


def _batch(count: int) -> bytes:
    records = [Record(b"fuzz-%d" % i, key=b"k%d" % i, headers=(("h", b"v"),)) for i in range(count)]
    return build_batch(records)


def codec_seeds(topic: str = FUZZ_TOPIC) -> list[bytes]:
    """Request frames (without the size prefix), encoded with the codec as the clients build them."""
    group = "fault-fuzz-group"
    bodies: list[tuple[int, int, dict[str, Any]]] = [
        (ApiKey.API_VERSIONS, 0, {}),
        (ApiKey.API_VERSIONS, 3, {"client_software_name": "rdkafka", "client_software_version": "2.16"}),
        (ApiKey.METADATA, 1, {"topics": None}),
        (
            ApiKey.METADATA,
            12,
            {"topics": [{"topic_id": uuid.UUID(int=0), "name": topic}], "allow_auto_topic_creation": False},
        ),
        (ApiKey.METADATA, 9, {"topics": [{"name": topic}], "allow_auto_topic_creation": False}),
        *(
            (
                ApiKey.PRODUCE,
                version,
                {
                    "transactional_id": None,
                    "acks": acks,
                    "timeout_ms": 5000,
                    "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": _batch(n)}]}],
                },
            )
            for version, acks, n in ((3, 1, 1), (7, 1, 5), (9, -1, 20), (9, 0, 3))
        ),
        *(
            (
                ApiKey.FETCH,
                version,
                {
                    "max_wait_ms": 100,
                    "min_bytes": 1,
                    "topics": [
                        {
                            "topic": topic,
                            "partitions": [
                                {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}
                            ],
                        }
                    ],
                    "forgotten_topics_data": [],
                    "rack_id": "",
                },
            )
            for version in (4, 11, 12)
        ),
        (
            ApiKey.LIST_OFFSETS,
            7,
            {
                "replica_id": -1,
                "isolation_level": 0,
                "topics": [{"name": topic, "partitions": [{"partition_index": 0, "timestamp": -1}]}],
            },
        ),
        (ApiKey.FIND_COORDINATOR, 3, {"key": group, "key_type": 0}),
        (ApiKey.FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": [group]}),
        (ApiKey.INIT_PRODUCER_ID, 4, {"transactional_id": None, "transaction_timeout_ms": 60000}),
        (
            ApiKey.JOIN_GROUP,
            7,
            {
                "group_id": group,
                "session_timeout_ms": 10000,
                "rebalance_timeout_ms": 10000,
                "member_id": "",
                "group_instance_id": None,
                "protocol_type": "consumer",
                "protocols": [{"name": "range", "metadata": b"\x00\x01\x00\x00\x00\x01\x00\x0afault-fuzz"}],
            },
        ),
        (
            ApiKey.SYNC_GROUP,
            5,
            {
                "group_id": group,
                "generation_id": 1,
                "member_id": "m",
                "protocol_type": "consumer",
                "protocol_name": "range",
                "assignments": [{"member_id": "m", "assignment": b"\x00\x01\x00\x00\x00\x00"}],
            },
        ),
        (ApiKey.HEARTBEAT, 4, {"group_id": group, "generation_id": 1, "member_id": "m"}),
        (
            ApiKey.OFFSET_COMMIT,
            8,
            {
                "group_id": group,
                "generation_id_or_member_epoch": -1,
                "member_id": "",
                "topics": [
                    {
                        "name": topic,
                        "partitions": [
                            {"partition_index": 0, "committed_offset": 1, "committed_metadata": ""}
                        ],
                    }
                ],
            },
        ),
        (
            ApiKey.OFFSET_FETCH,
            8,
            {"groups": [{"group_id": group, "topics": [{"name": topic, "partition_indexes": [0]}]}]},
        ),
        (ApiKey.LEAVE_GROUP, 5, {"group_id": group, "members": [{"member_id": "m", "reason": "bye"}]}),
        (ApiKey.DESCRIBE_GROUPS, 5, {"groups": [group], "include_authorized_operations": True}),
        (ApiKey.LIST_GROUPS, 4, {"states_filter": []}),
        (
            ApiKey.DESCRIBE_CONFIGS,
            4,
            {"resources": [{"resource_type": 2, "resource_name": topic, "configuration_keys": None}]},
        ),
    ]
    return [
        encode_request(key, version, i, "fault-fuzz", body) for i, (key, version, body) in enumerate(bodies)
    ]


def captured_seeds(directory: Path = CAPTURES) -> list[bytes]:
    """The captured request frames of real clients for the safe APIs (empty if not on this machine)."""
    seeds = []
    for path in sorted(directory.glob("*/*-req.bin")):
        frame = path.read_bytes()[4:]
        try:
            api_key = decode_request(frame).api_key
        except Exception:  # a capture the codec cannot read is no seed
            continue
        # Metadata captures would auto-create their topics; big Produce captures only slow the run
        if api_key in SAFE_APIS and api_key != ApiKey.METADATA and len(frame) <= MAX_CAPTURED_SEED:
            seeds.append(frame)
    return seeds


def seed_frames() -> list[bytes]:
    return codec_seeds() + captured_seeds()


def _prefix(length: int) -> bytes:
    return struct.pack(">i", length)


def _bit_flips(rng: random.Random, body: bytearray) -> None:
    for _ in range(rng.randint(1, 8)):
        i = rng.randrange(len(body))
        body[i] ^= 1 << rng.randrange(8)


def _garbage(rng: random.Random, body: bytearray) -> None:
    start = rng.randrange(len(body))
    length = min(rng.randint(1, 32), len(body) - start)
    body[start : start + length] = rng.randbytes(length)


def _boundary_int(rng: random.Random, body: bytearray) -> None:
    width, values = rng.choice(((2, _INTERESTING_16), (4, _INTERESTING_32), (8, _INTERESTING_64)))
    if len(body) < width:
        return
    start = rng.randrange(len(body) - width + 1)
    body[start : start + width] = rng.choice(values).to_bytes(width, "big", signed=True)


def _header(rng: random.Random, body: bytearray) -> None:
    if rng.random() < 0.5:
        body[0:2] = rng.randrange(-1, 80).to_bytes(2, "big", signed=True)  # api key
    else:
        body[2:4] = rng.randrange(-1, 40).to_bytes(2, "big", signed=True)  # api version


def _bad_varint(rng: random.Random, body: bytearray) -> None:
    start = rng.randrange(len(body))
    body[start:start] = b"\xff" * rng.randint(5, 12)


def _delete(rng: random.Random, body: bytearray) -> None:
    start = rng.randrange(len(body))
    del body[start : start + rng.randint(1, 64)]


_BODY_MOVES: tuple[Callable[[random.Random, bytearray], None], ...] = (
    _bit_flips,
    _bit_flips,
    _garbage,
    _boundary_int,
    _boundary_int,
    _header,
    _bad_varint,
    _delete,
)


def mutate(rng: random.Random, seeds: list[bytes]) -> bytes:
    """One mutated frame as it goes on the wire (size prefix included, truthful or not)."""
    body = bytearray(rng.choice(seeds))
    move = rng.random()
    if move < 0.12:  # truncated body, truthful prefix
        cut = body[: rng.randrange(len(body))]
        return _prefix(len(cut)) + cut
    if move < 0.22:  # a lying size prefix: a little off, negative, zero or huge
        claimed = rng.choice(
            (
                len(body) + rng.randint(-8, 8),
                -rng.randint(1, 2**31),
                0,
                rng.randint(len(body), DEFAULT_MAX_FRAME_SIZE + 10),
            )
        )
        return _prefix(max(min(claimed, 2**31 - 1), -(2**31))) + body
    if move < 0.28:  # a splice of two requests
        other = rng.choice(seeds)
        body = body[: rng.randrange(len(body))] + other[rng.randrange(len(other)) :]
        return _prefix(len(body)) + body
    for _ in range(rng.randint(1, 3)):
        if body:
            rng.choice(_BODY_MOVES)(rng, body)
    return _prefix(len(body)) + body


__all__ = ["FUZZ_TOPIC", "SAFE_APIS", "captured_seeds", "codec_seeds", "mutate", "seed_frames"]
