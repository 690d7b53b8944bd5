"""Per-listener security settings: Kafka's listener.name.<listener>. prefixes, the mechanisms and
JAAS a SASL listener needs, and the errors that name the key (never a secret)."""

from __future__ import annotations

from pathlib import Path

import pytest

from security.dev_certs import issue, new_authority
from server_common.config import ConfigError, load_config
from server_common.config.broker_config import BrokerConfig

JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="admin" password="admin-secret" user_admin="admin-secret";'
)


def config(*overrides: str) -> BrokerConfig:
    cfg, _ = load_config(None, overrides)
    return cfg


@pytest.fixture(scope="module")
def keystore(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("tls") / "broker.pem"
    path.write_text(issue(new_authority(), "broker").keystore_pem)
    return path


def test_plaintext_listeners_have_no_tls_or_sasl() -> None:
    security = config().listener_security["PLAINTEXT"]
    assert security.protocol == "PLAINTEXT" and security.ssl is None and not security.sasl_mechanisms


def test_a_listener_prefix_wins_over_the_unprefixed_key(keystore: Path) -> None:
    cfg = config(
        "listeners=PLAINTEXT://127.0.0.1:9092,SSL://127.0.0.1:9093,SASL_SSL://127.0.0.1:9094",
        "ssl.keystore.type=PEM",
        f"ssl.keystore.location={keystore}",
        "listener.name.ssl.ssl.enabled.protocols=TLSv1.3",
        "sasl.enabled.mechanisms=SCRAM-SHA-512",
        "listener.name.sasl_ssl.sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256",
        f"listener.name.sasl_ssl.plain.sasl.jaas.config={JAAS}",
    )
    ssl_listener, sasl_listener = cfg.listener_security["SSL"], cfg.listener_security["SASL_SSL"]
    assert ssl_listener.ssl is not None and ssl_listener.ssl.enabled_protocols == ("TLSv1.3",)
    assert sasl_listener.ssl is not None and sasl_listener.ssl.enabled_protocols == ("TLSv1.2", "TLSv1.3")
    assert sasl_listener.sasl_mechanisms == ("PLAIN", "SCRAM-SHA-256")
    assert sasl_listener.uses_tls and sasl_listener.uses_sasl and not ssl_listener.uses_sasl
    assert set(sasl_listener.jaas) == {"PLAIN"}


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            ["listeners=SASL_PLAINTEXT://127.0.0.1:9093", "sasl.enabled.mechanisms=PLAIN"],
            "listener.name.sasl_plaintext.plain.sasl.jaas.config: listener SASL_PLAINTEXT offers PLAIN",
        ),
        (
            ["listeners=SASL_PLAINTEXT://127.0.0.1:9093", "sasl.enabled.mechanisms=OAUTHBEARER"],
            "sasl.enabled.mechanisms: SASL mechanism OAUTHBEARER is not supported",
        ),
        (
            [
                "listeners=SASL_PLAINTEXT://127.0.0.1:9093",
                "listener.name.sasl_plaintext.sasl.enabled.mechanisms=GSSAPI",
            ],
            "listener.name.sasl_plaintext.sasl.enabled.mechanisms: SASL mechanism GSSAPI",
        ),
        (
            ["listener.name.nosuch.ssl.keystore.location=/x"],
            "listener.name.nosuch.*: there is no listener NOSUCH",
        ),
        (
            [
                "listeners=SASL_PLAINTEXT://127.0.0.1:9093",
                "sasl.enabled.mechanisms=PLAIN",
                "listener.name.sasl_plaintext.plain.sasl.jaas.config="
                'PlainLoginModule required user_a="s3cret"',
            ],
            "listener.name.sasl_plaintext.plain.sasl.jaas.config:",
        ),
    ],
)
def test_unusable_sasl_settings_are_refused_naming_the_key(overrides: list[str], message: str) -> None:
    with pytest.raises(ConfigError) as failure:
        config(*overrides)
    assert message in str(failure.value)
    assert "s3cret" not in str(failure.value)


def test_a_bad_keystore_on_one_listener_names_the_prefixed_key(keystore: Path) -> None:
    with pytest.raises(ConfigError, match=r"listener\.name\.ssl\.ssl\.keystore\.location: .* does not exist"):
        config(
            "listeners=SSL://127.0.0.1:9093",
            "ssl.keystore.type=PEM",
            "listener.name.ssl.ssl.keystore.location=/nonexistent/broker.pem",
        )


def test_passwords_are_sensitive_in_describe_configs() -> None:
    cfg = config("ssl.keystore.password=hunter2")
    entries = {entry.name: entry for entry in cfg.describe()}
    assert entries["ssl.keystore.password"].is_sensitive
    assert entries["sasl.jaas.config"].is_sensitive
    assert not entries["ssl.keystore.location"].is_sensitive


def test_unknown_listener_scoped_keys_warn() -> None:
    _, warnings = load_config(None, ["listener.name.plaintext.num.partitions=3"])
    assert any("listener.name.plaintext.num.partitions" in w for w in warnings)
