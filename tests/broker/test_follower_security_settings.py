"""A follower process connects to leaders as its broker does on the inter-broker listener: the
broker's TLS settings and SASL login travel in the ``configure`` IPC message (JSON), the follower
rebuilds the same client settings from them, and the password shows in no repr."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from broker.client_security import controller_client_security, inter_broker_client_security
from broker.replication.followers.settings import follower_settings
from client.replica_messages import FollowerSettings
from follower.source_fetcher import leader_security
from security.dev_certs import write_dev_pki
from server_common.config import load_config

pytestmark = pytest.mark.timeout(30)

SECRET = "inter-broker-S3cret"
JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    f'username="broker" password="{SECRET}" user_broker="{SECRET}";'
)


def test_the_inter_broker_login_reaches_the_follower_over_ipc(tmp_path: Path) -> None:
    pki = write_dev_pki(tmp_path / "pki", ("broker",))
    config, _ = load_config(
        None,
        [
            f"log.dirs={tmp_path / 'logs'}",
            "listeners=SASL_SSL://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
            "controller.listener.names=CONTROLLER",
            "inter.broker.listener.name=SASL_SSL",
            "ssl.keystore.type=PEM",
            f"ssl.keystore.location={pki.keystores['broker']}",
            "ssl.truststore.type=PEM",
            f"ssl.truststore.location={pki.ca}",
            "sasl.enabled.mechanisms=PLAIN",
            "sasl.mechanism.inter.broker.protocol=PLAIN",
            f"listener.name.sasl_ssl.plain.sasl.jaas.config={JAAS}",
        ],
    )
    settings = follower_settings(config)
    assert SECRET not in repr(settings)
    received = FollowerSettings.from_json(json.loads(json.dumps(settings.to_json())))
    security = leader_security(received)
    assert security is not None and security.ssl_context is not None
    assert (security.protocol, security.sasl_mechanism, security.username) == ("SASL_SSL", "PLAIN", "broker")
    assert security.password == SECRET and SECRET not in repr(security)
    assert security is leader_security(received)  # one TLS context per process
    assert inter_broker_client_security(config).protocol == "SASL_SSL"
    assert controller_client_security(config).protocol == "PLAINTEXT"  # the default map's CONTROLLER


def test_a_plaintext_broker_sends_no_security(tmp_path: Path) -> None:
    config, _ = load_config(None, [f"log.dirs={tmp_path}"])
    settings = follower_settings(config)
    assert leader_security(FollowerSettings.from_json(settings.to_json())) is None
