"""A real broker process: ApiVersions, bad input, metrics, graceful shutdown."""

from __future__ import annotations

import os
import random
import signal

from protocol.api_keys import ApiKey
from protocol.error_codes import ErrorCode
from protocol.framing import encode_frame
from tests.integration.broker_process import BrokerProcess
from tests.integration.wire_client import WireClient


def _advertised(response) -> dict[int, tuple[int, int]]:  # type: ignore[no-untyped-def]
    return {k.api_key: (k.min_version, k.max_version) for k in response.body.api_keys}


def test_api_versions_every_version(broker: BrokerProcess) -> None:
    with WireClient(broker.port) as client:
        for version in range(5):
            body = {"client_software_name": "kipling-tests", "client_software_version": "1.0"}
            response = client.request(ApiKey.API_VERSIONS, version, body)
            assert response.body.error_code == 0
            ranges = _advertised(response)
            assert ranges[ApiKey.API_VERSIONS] == (0, 4)
            assert response.body.supported_features == []


def test_api_versions_from_the_future_gets_v0_answer(broker: BrokerProcess) -> None:
    """A client speaking a newer ApiVersions gets UNSUPPORTED_VERSION in the v0 format."""
    with WireClient(broker.port) as client:
        frame = bytearray(_api_versions_frame(version=3, correlation_id=5))
        frame[6:8] = (99).to_bytes(2, "big")  # after the size prefix: api key, then version
        client.send_raw(bytes(frame))
        from protocol.api import decode_response

        response = decode_response(client.read_frame(), ApiKey.API_VERSIONS, 0)
        assert response.header.correlation_id == 5
        assert response.body.error_code == ErrorCode.UNSUPPORTED_VERSION
        assert ApiKey.API_VERSIONS in _advertised(response)


def _api_versions_frame(version: int, correlation_id: int) -> bytes:
    from protocol.api import encode_request

    body = {"client_software_name": "x", "client_software_version": "1"}
    return encode_frame(encode_request(ApiKey.API_VERSIONS, version, correlation_id, "c", body))


def test_bad_input_closes_only_that_connection(broker: BrokerProcess) -> None:
    healthy = WireClient(broker.port)
    cases = [
        b"\x7f\xff\xff\xff",  # a 2 GiB size prefix
        b"\xff\xff\xff\xfe",  # a negative size
        encode_frame(b"\x7f\x00\x00\x00\x00\x00\x00\x01\x00\x00"),  # unknown api key 32512
        encode_frame(b"\x00"),  # shorter than a header
    ]
    rng = random.Random(7)
    cases += [encode_frame(bytes(rng.randrange(256) for _ in range(rng.randrange(1, 64)))) for _ in range(20)]
    for payload in cases:
        with WireClient(broker.port, timeout_s=5) as client:
            client.send_raw(payload)
            try:
                frame = client.read_frame()
            except (ConnectionError, TimeoutError):
                continue
            assert len(frame) >= 4  # some random frames decode into a real request and get an answer
    response = healthy.request(ApiKey.API_VERSIONS, 0, {})
    assert response.body.error_code == 0
    healthy.close()


def test_truncated_frame_then_close_keeps_broker_serving(broker: BrokerProcess) -> None:
    with WireClient(broker.port) as client:
        client.send_raw(_api_versions_frame(3, 1)[:-3])
    with WireClient(broker.port) as client:
        assert client.request(
            ApiKey.API_VERSIONS, 3, {"client_software_name": "a", "client_software_version": "b"}
        )


def test_pipelined_requests_answered_in_order(broker: BrokerProcess) -> None:
    with WireClient(broker.port) as client:
        client.send_raw(b"".join(_api_versions_frame(0, cid) for cid in range(1, 41)))
        for cid in range(1, 41):
            frame = client.read_frame()
            assert int.from_bytes(frame[:4], "big") == cid


def test_metrics_endpoint(broker: BrokerProcess) -> None:
    with WireClient(broker.port) as client:
        client.request(ApiKey.API_VERSIONS, 3, {"client_software_name": "a", "client_software_version": "b"})
    text = broker.metrics()
    assert 'kafka_network_requestmetrics_requests_total{listener="PLAINTEXT",request="ApiVersions"}' in text
    assert "kafka_server_socketservermetrics_connection_count" in text
    # the node's controller listener (its broker's heartbeats and metadata fetches) is on /metrics too
    requests = "kafka_network_requestmetrics_requests_total"
    assert broker.metric(requests, request="BrokerHeartbeat", listener="CONTROLLER") >= 1
    assert broker.metric("kafka_server_socketservermetrics_connection_count", listener="CONTROLLER") >= 1


def test_sigterm_shuts_down_cleanly(fresh_broker: BrokerProcess) -> None:
    fresh_broker.start()
    with WireClient(fresh_broker.port) as client:
        client.request(ApiKey.API_VERSIONS, 0, {})
    assert fresh_broker.stop(signal.SIGTERM) == 0
    assert os.path.exists(fresh_broker.data_dir / "logs" / ".kafka_cleanshutdown")


def test_api_without_a_handler_answers_unsupported_version(broker: BrokerProcess) -> None:
    """The classic group APIs and KIP-848's are served (group.coordinator.rebalance.protocols
    defaults to classic,consumer), and an API this listener does not serve (BrokerHeartbeat is for
    a controller) is answered with error 35 without closing the connection."""
    with WireClient(broker.port) as client:
        advertised = _advertised(client.request(ApiKey.API_VERSIONS, 0, {}))
        assert {ApiKey.FIND_COORDINATOR, ApiKey.JOIN_GROUP, ApiKey.OFFSET_COMMIT} <= set(advertised)
        assert {ApiKey.CONSUMER_GROUP_HEARTBEAT, ApiKey.CONSUMER_GROUP_DESCRIBE} <= set(advertised)
        assert ApiKey.BROKER_HEARTBEAT not in advertised
        body = {
            "broker_id": 1,
            "broker_epoch": 1,
            "current_metadata_offset": 0,
            "want_fence": False,
            "want_shut_down": False,
        }
        response = client.request(ApiKey.BROKER_HEARTBEAT, 0, body)
        assert response.body.error_code == ErrorCode.UNSUPPORTED_VERSION
        assert client.request(ApiKey.API_VERSIONS, 0, {}).body.error_code == 0


def test_corrupt_batch_is_refused_and_the_log_is_unchanged(broker: BrokerProcess) -> None:
    from protocol.records import Record, build_batch

    with WireClient(broker.port) as client:
        topic = {
            "name": "corrupt-test",
            "num_partitions": 1,
            "replication_factor": 1,
            "assignments": [],
            "configs": [],
        }
        client.request(ApiKey.CREATE_TOPICS, 7, {"topics": [topic], "timeout_ms": 5000})

        def produce(records: bytes) -> int:
            partition = {"index": 0, "records": records}
            body = {
                "acks": -1,
                "timeout_ms": 5000,
                "topic_data": [{"name": "corrupt-test", "partition_data": [partition]}],
            }
            response = client.request(ApiKey.PRODUCE, 9, body)
            return int(response.body.responses[0].partition_responses[0].error_code)

        good = build_batch([Record(b"value-1", b"key-1")])
        assert produce(good) == 0
        log_file = broker.data_dir / "logs" / "corrupt-test-0" / "00000000000000000000.log"
        before = log_file.read_bytes()
        corrupt = bytearray(good)
        corrupt[-3] ^= 0xFF
        assert produce(bytes(corrupt)) == ErrorCode.CORRUPT_MESSAGE
        assert produce(good[:-5]) in (ErrorCode.CORRUPT_MESSAGE, ErrorCode.INVALID_RECORD)
        assert log_file.read_bytes() == before
        assert produce(good) == 0  # the connection and the partition keep working


def test_garbage_bodies_for_every_served_api(broker: BrokerProcess) -> None:
    """A valid header with a random body: answered with an error or closed, never a crash."""
    from protocol.headers import REQUEST_HEADER, request_header_version
    from protocol.messages import REQUESTS

    rng = random.Random(11)
    with WireClient(broker.port) as client:
        served = _advertised(client.request(ApiKey.API_VERSIONS, 0, {}))
    for api_key, (low, high) in served.items():
        for version in {low, high}:
            spec = REQUESTS[api_key]
            header = REQUEST_HEADER.codec(
                request_header_version(api_key, version, spec.flexible_versions)
            ).encode(
                {
                    "request_api_key": api_key,
                    "request_api_version": version,
                    "correlation_id": 77,
                    "client_id": "f",
                }
            )
            garbage = bytes(rng.randrange(256) for _ in range(rng.randrange(0, 40)))
            with WireClient(broker.port, timeout_s=5) as client:
                client.send_raw(encode_frame(header + garbage))
                try:
                    frame = client.read_frame()
                except (ConnectionError, TimeoutError):
                    continue
                assert int.from_bytes(frame[:4], "big") == 77
    with WireClient(broker.port) as client:
        assert client.request(ApiKey.API_VERSIONS, 0, {}).body.error_code == 0


def test_closing_a_connection_releases_its_parked_fetch(broker: BrokerProcess) -> None:
    import re
    import time

    def parked() -> float:
        match = re.search(r'purgatorysize\{delayedOperation="Fetch"\} ([0-9.]+)', broker.metrics())
        return float(match.group(1)) if match else -1.0

    with WireClient(broker.port) as client:
        topic = {
            "name": "parked",
            "num_partitions": 1,
            "replication_factor": 1,
            "assignments": [],
            "configs": [],
        }
        client.request(ApiKey.CREATE_TOPICS, 7, {"topics": [topic], "timeout_ms": 5000})
    from protocol.api import encode_request

    client = WireClient(broker.port)
    partition = {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}
    body = {"max_wait_ms": 30_000, "min_bytes": 1, "topics": [{"topic": "parked", "partitions": [partition]}]}
    client.send_raw(encode_frame(encode_request(ApiKey.FETCH, 11, 1, "c", body)))
    deadline = time.monotonic() + 5
    while parked() < 1 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert parked() == 1
    client.close()
    deadline = time.monotonic() + 5
    while parked() > 0 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert parked() == 0


def test_idle_connections_are_closed(fresh_broker: BrokerProcess) -> None:
    import time

    fresh_broker.overrides.append("connections.max.idle.ms=300")
    fresh_broker.start()
    with WireClient(fresh_broker.port, timeout_s=5) as idle, WireClient(fresh_broker.port) as busy:
        idle.request(ApiKey.API_VERSIONS, 0, {})
        deadline = time.monotonic() + 1.5
        while time.monotonic() < deadline:
            busy.request(ApiKey.API_VERSIONS, 0, {})  # activity keeps this one open
            time.sleep(0.1)
        assert idle.is_closed_by_peer()
        assert busy.request(ApiKey.API_VERSIONS, 0, {}).body.error_code == 0


def test_invalid_config_refuses_to_start(fresh_broker: BrokerProcess) -> None:
    import pytest

    fresh_broker.overrides.append("num.partitions=many")
    with pytest.raises(RuntimeError, match="exited with 2"):
        fresh_broker.start(timeout_s=10)
    assert "num.partitions" in fresh_broker.output()
    assert "many" in fresh_broker.output()


def test_connection_close_reasons_are_counted(broker: BrokerProcess) -> None:
    with WireClient(broker.port) as client:
        client.send_raw(b"\x7f\xff\xff\xff")
        client.is_closed_by_peer()
    with WireClient(broker.port) as client:
        client.request(ApiKey.API_VERSIONS, 0, {})
    import time

    deadline = time.monotonic() + 5
    text = broker.metrics()
    while 'reason="client"' not in text and time.monotonic() < deadline:
        time.sleep(0.05)
        text = broker.metrics()
    assert 'kafka_server_socketservermetrics_connection_close_total{reason="frame_too_large"}' in text
    assert 'kafka_server_socketservermetrics_connection_close_total{reason="client"}' in text
