"""How a node connects to other nodes: the inter-broker and controller listeners' protocol, TLS and
SASL login (BrokerConfig.inter_broker_security and controller_security), and the one-line
refusals at load when a SASL listener this node logs in to lacks a mechanism or a login."""

from __future__ import annotations

from pathlib import Path

import pytest

from server_common.config import ConfigError, load_config
from server_common.config.broker_config import BrokerConfig

SECRET = "s3cret-admin"
PLAIN_SERVER_JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    f'username="admin" password="{SECRET}" user_admin="{SECRET}";'
)
PLAIN_USERS_ONLY = f'org.apache.kafka.common.security.plain.PlainLoginModule required user_admin="{SECRET}";'
PLAIN_LOGIN_ONLY = (
    f'org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="{SECRET}";'
)


def config(*overrides: str) -> BrokerConfig:
    cfg, _ = load_config(None, overrides)
    return cfg


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    from security.dev_certs import write_dev_pki

    written = write_dev_pki(tmp_path_factory.mktemp("pki"), ("broker",))
    return written.ca, written.keystores["broker"]


def sasl_ssl_node(pki: tuple[Path, Path], *extra: str) -> list[str]:
    ca, keystore = pki
    return [
        "listeners=INTERNAL://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
        "controller.listener.names=CONTROLLER",
        "controller.quorum.voters=1@127.0.0.1:9093",
        "inter.broker.listener.name=INTERNAL",
        "listener.security.protocol.map=INTERNAL:SASL_SSL,CONTROLLER:SASL_SSL",
        "ssl.keystore.type=PEM",
        f"ssl.keystore.location={keystore}",
        "ssl.truststore.type=PEM",
        f"ssl.truststore.location={ca}",
        "sasl.enabled.mechanisms=PLAIN",
        "sasl.mechanism.inter.broker.protocol=PLAIN",
        "sasl.mechanism.controller.protocol=PLAIN",
        f"listener.name.internal.plain.sasl.jaas.config={PLAIN_SERVER_JAAS}",
        f"listener.name.controller.plain.sasl.jaas.config={PLAIN_SERVER_JAAS}",
        *extra,
    ]


def test_plaintext_nodes_connect_in_plaintext() -> None:
    cfg = config()
    assert cfg.inter_broker_security().protocol == "PLAINTEXT"
    assert cfg.controller_security().protocol == "PLAINTEXT"


def test_a_sasl_ssl_node_logs_in_with_its_listeners_jaas(pki: tuple[Path, Path]) -> None:
    cfg = config(*sasl_ssl_node(pki))
    inter, controller = cfg.inter_broker_security(), cfg.controller_security()
    for outbound, listener in ((inter, "INTERNAL"), (controller, "CONTROLLER")):
        assert outbound.listener == listener and outbound.protocol == "SASL_SSL"
        assert (outbound.sasl_mechanism, outbound.username, outbound.password) == ("PLAIN", "admin", SECRET)
        assert outbound.ssl is not None and outbound.ssl.truststore_location == str(pki[0])
        assert SECRET not in repr(outbound)


def test_a_broker_only_node_reads_the_controller_listener_it_does_not_bind(pki: tuple[Path, Path]) -> None:
    """A broker connects to the controllers' listener with listener.name.controller.* keys; it needs
    a truststore and a login, no keystore and no users."""
    ca, _ = pki
    cfg = config(
        "process.roles=broker",
        "node.id=2",
        "listeners=PLAINTEXT://127.0.0.1:9092",
        "controller.listener.names=CONTROLLER",
        "controller.quorum.voters=1@127.0.0.1:9093",
        "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:SASL_SSL",
        "listener.name.controller.ssl.truststore.type=PEM",
        f"listener.name.controller.ssl.truststore.location={ca}",
        "sasl.mechanism.controller.protocol=PLAIN",
        f"listener.name.controller.plain.sasl.jaas.config={PLAIN_LOGIN_ONLY}",
    )
    outbound = cfg.controller_security()
    assert (outbound.protocol, outbound.username, outbound.password) == ("SASL_SSL", "admin", SECRET)
    assert outbound.ssl is not None and outbound.ssl.truststore_location == str(ca)
    assert cfg.inter_broker_security().protocol == "PLAINTEXT"


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            ["sasl.mechanism.inter.broker.protocol=GSSAPI"],
            "Invalid configuration sasl.mechanism.inter.broker.protocol: SASL mechanism GSSAPI is not "
            "supported",
        ),
        (
            ["sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512"],
            "Invalid configuration sasl.mechanism.inter.broker.protocol: SCRAM-SHA-512 must be included in "
            "sasl.enabled.mechanisms of listener INTERNAL",
        ),
        (
            [f"listener.name.internal.plain.sasl.jaas.config={PLAIN_USERS_ONLY}"],
            "Invalid configuration listener.name.internal.plain.sasl.jaas.config: JAAS config for "
            "org.apache.kafka.common.security.plain.PlainLoginModule has no username or password",
        ),
        (
            [
                "listener.name.controller.sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256",
                "sasl.mechanism.controller.protocol=SCRAM-SHA-256",
            ],
            "Invalid configuration listener.name.controller.scram-sha-256.sasl.jaas.config: not set",
        ),
    ],
)
def test_a_missing_login_is_refused_in_one_line_naming_the_key(
    pki: tuple[Path, Path], extra: list[str], message: str
) -> None:
    with pytest.raises(ConfigError) as failure:
        config(*sasl_ssl_node(pki, *extra))
    text = str(failure.value)
    assert message in text and "\n" not in text
    assert SECRET not in text


def test_a_broker_only_node_needs_the_controller_listener_in_the_protocol_map() -> None:
    with pytest.raises(ConfigError, match=r"listener\.security\.protocol\.map: controller listener CTRL"):
        config(
            "process.roles=broker",
            "node.id=2",
            "controller.listener.names=CTRL",
            "controller.quorum.voters=1@127.0.0.1:9093",
        )


def test_a_broker_only_node_refuses_a_sasl_controller_listener_without_login() -> None:
    with pytest.raises(ConfigError, match=r"listener\.name\.controller\.plain\.sasl\.jaas\.config: not set"):
        config(
            "process.roles=broker",
            "node.id=2",
            "controller.listener.names=CONTROLLER",
            "controller.quorum.voters=1@127.0.0.1:9093",
            "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:SASL_PLAINTEXT",
            "sasl.mechanism.controller.protocol=PLAIN",
        )
