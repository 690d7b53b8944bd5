"""connection_creation_rate (KIP-612) on a real broker: with a quota on the IP 127.0.0.1, a
connection over its rate is not served and is closed once its throttle time has passed (Kafka's
acceptor's delayed close); with the quota removed, new connections are served again.

Rates are measured over 11 windows of one second, a young one over ten: at 2 connections/s the
21st connection within the first seconds is over the rate.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from kafka import KafkaAdminClient
from kafka.protocol.admin.client_quotas import AlterClientQuotasRequest

from protocol.api_keys import ApiKey
from tests.integration.broker_process import BrokerProcess
from tests.integration.wire_client import WireClient

pytestmark = [pytest.mark.timeout(180)]


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    process = BrokerProcess(tmp_path_factory.mktemp("connection-rate")).start()
    yield process
    process.stop()


def ip_quota(admin: KafkaAdminClient, rate: float | None) -> Any:
    entry = AlterClientQuotasRequest.EntryData
    request = AlterClientQuotasRequest(
        entries=[
            entry(
                entity=[entry.EntityData(entity_type="ip", entity_name="127.0.0.1")],
                ops=[entry.OpData(key="connection_creation_rate", value=rate or 0.0, remove=rate is None)],
            )
        ],
        validate_only=False,
    )
    return admin._manager.run(admin._manager.send, request)


def served(client: WireClient) -> bool:
    """Whether an ApiVersions request on this connection is answered (False: closed unanswered)."""
    try:
        body = {"client_software_name": "t", "client_software_version": "1"}
        return client.request(int(ApiKey.API_VERSIONS), 3, body).body.error_code == 0
    except (ConnectionError, OSError):
        return False


def test_connections_over_the_ip_rate_are_held_then_closed(node: BrokerProcess) -> None:
    admin = KafkaAdminClient(bootstrap_servers=node.bootstrap, client_id="quota-admin")
    try:
        assert ip_quota(admin, 2.0).entries[0].error_code == 0
        # (the broker answers AlterClientQuotas once its own image holds the quota)
        throttled_after_s = None
        for _ in range(60):
            with WireClient(node.port, timeout_s=10) as client:
                started = time.monotonic()
                if not served(client):
                    throttled_after_s = time.monotonic() - started
                    break
        assert throttled_after_s is not None, "no connection was throttled"
        assert 0.05 <= throttled_after_s <= 5  # held for its throttle time (at most a window), then closed
        assert (
            node.metric(
                "kafka_server_socketservermetrics_connection_close_total", reason="connection_rate_throttled"
            )
            >= 1
        )
        assert ip_quota(admin, None).entries[0].error_code == 0
    finally:
        admin.close()
    deadline = time.monotonic() + 30
    while True:  # the removal reaches the image: connections are served again
        with WireClient(node.port, timeout_s=10) as client:
            if served(client):
                break
        assert time.monotonic() < deadline
        time.sleep(0.2)


def test_connections_over_the_broker_wide_rate_wait_and_are_all_served(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """max.connection.creation.rate=2: in the first seconds (a young rate measured over ten) the
    21st connection is over it; the connections over it wait, as behind Kafka's blocked acceptor,
    and are served."""
    process = BrokerProcess(
        tmp_path_factory.mktemp("broker-connection-rate"), overrides=["max.connection.creation.rate=2"]
    ).start()
    try:
        clients = [WireClient(process.port, timeout_s=60) for _ in range(25)]
        try:
            started = time.monotonic()
            assert all(served(client) for client in clients)  # none refused
            assert time.monotonic() - started >= 0.5  # the last ones waited their turn
        finally:
            for client in clients:
                client.close()
    finally:
        process.stop()
