"""DeleteRecords (key 21) v0-2: a request and a response survive encode → decode at every version,
and v2 is flexible (compact strings, tag buffers) where v0-1 are not."""

from __future__ import annotations

import pytest

from protocol.data import to_plain
from protocol.messages import REQUESTS, RESPONSES

REQUEST = {
    "topics": [
        {
            "name": "orders",
            "partitions": [{"partition_index": 0, "offset": 42}, {"partition_index": 3, "offset": -1}],
        }
    ],
    "timeout_ms": 30000,
}
RESPONSE = {
    "throttle_time_ms": 0,
    "topics": [
        {
            "name": "orders",
            "partitions": [
                {"partition_index": 0, "low_watermark": 42, "error_code": 0},
                {"partition_index": 3, "low_watermark": -1, "error_code": 1},
            ],
        }
    ],
}


@pytest.mark.parametrize("version", [0, 1, 2])
def test_round_trip(version: int) -> None:
    for spec, body in ((REQUESTS[21], REQUEST), (RESPONSES[21], RESPONSE)):
        codec = spec.codec(version)
        encoded = codec.encode(body)
        assert to_plain(codec.decode(encoded)) == body
        assert spec.codec(version, compiled=False).encode(body) == encoded


def test_versions_and_flexibility() -> None:
    assert REQUESTS[21].version_list() == RESPONSES[21].version_list() == [0, 1, 2]
    v1 = REQUESTS[21].codec(1).encode(REQUEST)
    v2 = REQUESTS[21].codec(2).encode(REQUEST)
    assert v1[:4] == b"\x00\x00\x00\x01" and v1[4:6] == b"\x00\x06"  # int32 array length, int16 string length
    assert v2[:2] == b"\x02\x07"  # compact array (n+1), compact string (n+1)
