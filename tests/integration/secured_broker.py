"""One kipling broker process with a listener of every security protocol, for tests of secured clients.

Started by :func:`start_secured_broker` (a module-scoped fixture calls it and stops the process): a
PLAINTEXT listener (for setup), SSL (mutual TLS requested), MTLS (mutual TLS required), SASL_SSL
(PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512) and SASL_PLAINTEXT (PLAIN only). TLS material is a throwaway
CA from :mod:`security.dev_certs`, written as PEM files under ``pki``. PLAIN users come from the
listeners' JAAS configuration (:data:`PLAIN_JAAS`: admin and alice); the SCRAM user carol is created
through AlterUserScramCredentials.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from security.dev_certs import issue, new_authority
from tests.integration.broker_process import BrokerProcess, free_port

PLAIN_JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";'
)
PLAIN_USERS = {"admin": "admin-secret", "alice": "alice-secret"}
SCRAM_USER = "carol"
SCRAM_PASSWORD = "carol-secret"
REAUTH_MS = 2000
"""``connections.max.reauth.ms`` of the SASL_PLAINTEXT listener."""
AUTHENTICATION_TIMEOUT_MS = 3000
LISTENERS = ("SSL", "MTLS", "SASL_SSL", "SASL_PLAINTEXT")


@dataclass
class SecuredBroker:
    process: BrokerProcess
    ports: dict[str, int]
    pki: Path

    def address(self, listener: str) -> str:
        return f"127.0.0.1:{self.ports[listener]}"

    @property
    def ca(self) -> str:
        return str(self.pki / "ca.pem")

    def pem(self, name: str) -> str:
        """A PEM keystore (key and certificate): ``broker``, ``alice`` (both signed by the CA),
        ``expired`` (signed by it, out of date) and ``stranger`` (signed by ``stranger-ca``)."""
        return str(self.pki / f"{name}.pem")

    def scram_properties(self, password: str = SCRAM_PASSWORD) -> dict[str, str]:
        """Kafka client properties (as a ``--command-config`` file holds them) for the SASL_SSL
        listener: the CA as a PEM truststore and carol's SCRAM-SHA-512 login with ``password``."""
        return {
            "security.protocol": "SASL_SSL",
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": self.ca,
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule required "
            f'username="{SCRAM_USER}" password="{password}";',
        }


def start_secured_broker(tmp_path_factory: pytest.TempPathFactory) -> SecuredBroker:
    """Write the PKI, start the broker and create the SCRAM user; the caller stops ``.process``."""
    from confluent_kafka.admin import (
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    pki = tmp_path_factory.mktemp("pki")
    ca = new_authority()
    (pki / "ca.pem").write_text(ca.pem)
    for name in ("broker", "alice"):
        (pki / f"{name}.pem").write_text(issue(ca, name).keystore_pem)
    (pki / "expired.pem").write_text(issue(ca, "mallory", expired=True).keystore_pem)
    stranger = new_authority("stranger CA")
    (pki / "stranger.pem").write_text(issue(stranger, "eve").keystore_pem)
    (pki / "stranger-ca.pem").write_text(stranger.pem)
    ports = {name: free_port() for name in LISTENERS}
    process = BrokerProcess(tmp_path_factory.mktemp("secured"))
    listeners = ",".join(
        [
            f"PLAINTEXT://127.0.0.1:{process.port}",
            *(f"{name}://127.0.0.1:{port}" for name, port in ports.items()),
        ]
    )
    process.overrides = [
        f"listeners={listeners}",
        "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SSL:SSL,MTLS:SSL,SASL_SSL:SASL_SSL,"
        "SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
        "ssl.keystore.type=PEM",
        f"ssl.keystore.location={pki / 'broker.pem'}",
        "ssl.truststore.type=PEM",
        f"ssl.truststore.location={pki / 'ca.pem'}",
        "ssl.client.auth=requested",
        "listener.name.mtls.ssl.client.auth=required",
        "listener.name.mtls.ssl.principal.mapping.rules=RULE:^CN=([^,]*),.*$/$1/U,DEFAULT",
        "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "listener.name.sasl_plaintext.sasl.enabled.mechanisms=PLAIN",
        f"listener.name.sasl_ssl.plain.sasl.jaas.config={PLAIN_JAAS}",
        f"listener.name.sasl_plaintext.plain.sasl.jaas.config={PLAIN_JAAS}",
        "num.partitions=2",
        f"listener.name.sasl_plaintext.connections.max.reauth.ms={REAUTH_MS}",
        f"kipling.authentication.timeout.ms={AUTHENTICATION_TIMEOUT_MS}",
    ]
    process.start()
    try:
        admin = AdminClient({"bootstrap.servers": process.bootstrap})
        password = SCRAM_PASSWORD.encode()
        upserts = [
            UserScramCredentialUpsertion(
                SCRAM_USER, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192), password
            ),
            UserScramCredentialUpsertion(
                SCRAM_USER, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), password
            ),
        ]
        for future in admin.alter_user_scram_credentials(upserts).values():
            future.result(timeout=30)
    except BaseException:
        process.stop()
        raise
    return SecuredBroker(process, ports, pki)
