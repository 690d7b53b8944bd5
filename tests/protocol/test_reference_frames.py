"""Every frame real clients sent (and the answers they got) decodes and re-encodes byte-identical."""

from __future__ import annotations

import pytest

from protocol.api import decode_request, decode_response, reencode_request, reencode_response
from tests.protocol.frames import captured_frames

FRAMES = captured_frames()


def test_there_are_frames_to_check() -> None:
    assert len(FRAMES) > 300


@pytest.mark.parametrize("captured", FRAMES, ids=str)
def test_frame_roundtrip(captured) -> None:  # type: ignore[no-untyped-def]
    frame = captured.frame
    if captured.is_response:
        response = decode_response(frame, captured.api_key, captured.api_version)
        assert response.trailing == b""
        assert reencode_response(response, captured.api_key, captured.api_version) == frame
    else:
        request = decode_request(frame)
        assert (request.api_key, request.api_version) == (captured.api_key, captured.api_version)
        assert request.trailing == b""
        assert reencode_request(request) == frame


def test_kafka_python_produce_frame_content() -> None:
    """Spot-check decoded values, not just the byte round trip."""
    produce = next(f for f in FRAMES if f.path.name == "00012-Produce-v9-req.bin")
    request = decode_request(produce.frame)
    assert request.header.client_id == "kp-producer"
    assert request.body.acks == -1
    topic = request.body.topic_data[0]
    assert topic.name == "kp-topic"
    records = topic.partition_data[0].records
    assert isinstance(records, memoryview)  # a view of the frame, not a copy
    assert records.obj is not None and len(records) > 61
