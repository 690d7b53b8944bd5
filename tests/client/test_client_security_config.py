"""Kafka's client security properties (a tool's --command-config) and the JSON form a follower
process receives over IPC: what each key becomes, defaults as Kafka's, refusals naming the key and
never quoting a secret."""

from __future__ import annotations

from pathlib import Path

import pytest

from client.security import ClientSecurityConfig, from_properties
from security.dev_certs import issue, new_authority

pytestmark = pytest.mark.timeout(30)

JAAS = (
    'org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" password="p4ss-w0rd";'
)


@pytest.fixture(scope="module")
def pem(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("pki")
    authority = new_authority()
    (root / "ca.pem").write_text(authority.pem)
    (root / "client.pem").write_text(issue(authority, "client").keystore_pem)
    return root / "ca.pem", root / "client.pem"


def test_plaintext_by_default() -> None:
    config = from_properties({})
    assert config.protocol == "PLAINTEXT" and config.build() is None


def test_sasl_ssl_properties(pem: tuple[Path, Path]) -> None:
    ca, client = pem
    config = from_properties(
        {
            "security.protocol": "sasl_ssl",
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(ca),
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(client),
            "ssl.endpoint.identification.algorithm": "",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.jaas.config": JAAS,
        }
    )
    assert (config.protocol, config.sasl_mechanism, config.username) == ("SASL_SSL", "SCRAM-SHA-512", "alice")
    assert "p4ss-w0rd" not in repr(config)
    security = config.build()
    assert security is not None and security.ssl_context is not None
    assert not security.ssl_context.check_hostname  # endpoint identification off
    assert security.protocol == "SASL_SSL" and "p4ss-w0rd" not in repr(security)


def test_json_round_trip_rebuilds_the_same_settings(pem: tuple[Path, Path]) -> None:
    ca, _ = pem
    config = from_properties(
        {
            "security.protocol": "SASL_SSL",
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(ca),
            "ssl.enabled.protocols": "TLSv1.3",
            "sasl.mechanism": "PLAIN",
            "sasl.jaas.config": JAAS.replace("scram.ScramLoginModule", "plain.PlainLoginModule"),
        }
    )
    again = ClientSecurityConfig.from_json(config.to_json())
    assert again == config
    assert again.ssl is not None and again.ssl.enabled_protocols == ("TLSv1.3",)


@pytest.mark.parametrize(
    ("props", "message"),
    [
        ({"security.protocol": "TLS"}, "security.protocol"),
        ({"security.protocol": "SASL_PLAINTEXT"}, "sasl.mechanism: kipling supports"),  # GSSAPI default
        ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN"}, "sasl.jaas.config: not set"),
        (
            {
                "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "PLAIN",
                "sasl.jaas.config": 'x required password="p4ss-w0rd";',
            },
            "sasl.jaas.config: JAAS config for x has no username",
        ),
        ({"security.protocol": "SSL", "ssl.truststore.location": "/x.jks"}, "ssl.truststore.type"),
        (
            {
                "security.protocol": "SSL",
                "ssl.truststore.type": "PEM",
                "ssl.truststore.location": "/nope.pem",
            },
            "ssl.truststore.location",
        ),
    ],
)
def test_refusals_name_the_key(props: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError) as failure:
        from_properties(props)
    assert message in str(failure.value)
    assert "p4ss-w0rd" not in str(failure.value)
