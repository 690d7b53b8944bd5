"""A listener's certificate replaced without a restart: altering the broker's
``listener.name.<listener>.ssl.keystore.location`` makes new TLS connections get the new certificate,
and a keystore that does not load leaves the old one in place."""

from __future__ import annotations

import socket
import ssl
from pathlib import Path

from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType
from cryptography import x509

from security.dev_certs import issue, new_authority
from tests.integration.broker_process import BrokerProcess, free_port
from tests.integration.client_helpers import wait_until


def _served_serial(port: int, ca: Path) -> int:
    """The serial number of the certificate a new TLS connection to ``port`` is shown."""
    context = ssl.create_default_context(cafile=str(ca))
    with (
        socket.create_connection(("127.0.0.1", port), timeout=10) as raw,
        context.wrap_socket(raw, server_hostname="localhost") as tls,
    ):
        der = tls.getpeercert(binary_form=True)
    assert der is not None
    return x509.load_der_x509_certificate(der).serial_number


def _alter(admin: AdminClient, broker_id: str, key: str, value: str) -> None:
    entry = ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET)
    resource = ConfigResource(ResourceType.BROKER, broker_id, incremental_configs=[entry])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(timeout=30)


def test_a_new_certificate_is_served_without_a_restart(tmp_path: Path) -> None:
    ca = new_authority()
    (tmp_path / "ca.pem").write_text(ca.pem)
    first, second = issue(ca, "broker"), issue(ca, "broker")
    (tmp_path / "first.pem").write_text(first.keystore_pem)
    (tmp_path / "second.pem").write_text(second.keystore_pem)
    tls_port = free_port()
    broker = BrokerProcess(tmp_path / "broker")
    broker.overrides = [
        f"listeners=PLAINTEXT://127.0.0.1:{broker.port},SSL://127.0.0.1:{tls_port}",
        "ssl.keystore.type=PEM",
        f"ssl.keystore.location={tmp_path / 'first.pem'}",
    ]
    broker.start()
    try:
        assert _served_serial(tls_port, tmp_path / "ca.pem") == first.certificate.serial_number
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        key = "listener.name.ssl.ssl.keystore.location"
        _alter(admin, "1", key, str(tmp_path / "second.pem"))
        assert wait_until(
            lambda: _served_serial(tls_port, tmp_path / "ca.pem") == second.certificate.serial_number, 30
        )
        # A key and a certificate that do not go together: refused, the listener keeps serving.
        (tmp_path / "mismatched.pem").write_text(first.key_pem + second.certificate_pem)
        _alter(admin, "1", key, str(tmp_path / "mismatched.pem"))
        assert wait_until(lambda: "listener keystore not replaced" in broker.output(), 30)
        assert _served_serial(tls_port, tmp_path / "ca.pem") == second.certificate.serial_number
        _alter(admin, "1", key, str(tmp_path / "first.pem"))
        assert wait_until(
            lambda: _served_serial(tls_port, tmp_path / "ca.pem") == first.certificate.serial_number, 30
        )
    finally:
        broker.stop()
