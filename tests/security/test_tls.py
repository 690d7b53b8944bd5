"""TLS contexts from Kafka's ssl.* settings: the formats read, what is refused, and real handshakes
(in memory, between a listener's context and a client's)."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.serialization import BestAvailableEncryption, pkcs12

from security.dev_certs import Authority, Issued, issue, new_authority, write_dev_pki
from security.tls import SslSettings, TlsConfigError, openssl_cipher_name, protocol_range


@pytest.fixture(scope="module")
def ca() -> Authority:
    return new_authority()


@pytest.fixture(scope="module")
def server_cert(ca: Authority) -> Issued:
    return issue(ca, "broker")


def _handshake(server: ssl.SSLContext, client: ssl.SSLContext, hostname: str = "localhost") -> ssl.SSLObject:
    """Run a TLS handshake between the two contexts in memory; returns the server's end."""
    s_in, s_out, c_in, c_out = ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO()
    server_end = server.wrap_bio(s_in, s_out, server_side=True)
    client_end = client.wrap_bio(c_in, c_out, server_hostname=hostname)
    done = {"server": False, "client": False}
    for _ in range(20):
        for name, end in (("client", client_end), ("server", server_end)):
            if done[name]:
                continue
            try:
                end.do_handshake()
                done[name] = True
            except ssl.SSLWantReadError:
                pass
        s_in.write(c_out.read())
        c_in.write(s_out.read())
        if all(done.values()):
            return server_end
    raise AssertionError("handshake did not finish")


def _pem_settings(tmp_path: Path, issued: Issued, ca: Authority, **extra: object) -> SslSettings:
    keystore = tmp_path / "broker.pem"
    keystore.write_text(issued.keystore_pem)
    truststore = tmp_path / "ca.pem"
    truststore.write_text(ca.pem)
    return SslSettings(
        keystore_type="PEM",
        keystore_location=str(keystore),
        truststore_type="PEM",
        truststore_location=str(truststore),
        **extra,  # type: ignore[arg-type]
    )


def test_a_pem_keystore_file_serves_a_client_that_trusts_the_ca(
    tmp_path: Path, ca: Authority, server_cert: Issued
) -> None:
    settings = _pem_settings(tmp_path, server_cert, ca)
    server_end = _handshake(settings.server_context(), settings.client_context())
    assert server_end.version() == "TLSv1.3"
    assert server_end.getpeercert() is None  # ssl.client.auth=none


def test_inline_pem_chain_and_key(ca: Authority, server_cert: Issued) -> None:
    settings = SslSettings(
        keystore_type="PEM",
        keystore_certificate_chain=server_cert.certificate_pem,
        keystore_key=server_cert.key_pem,
        truststore_type="PEM",
        truststore_certificates=ca.pem,
    )
    _handshake(settings.server_context(), settings.client_context())
    assert "key" not in repr(settings).replace("keystore_type", "").replace("keystore_location", "")


def test_pkcs12_keystore_with_a_password(tmp_path: Path, ca: Authority, server_cert: Issued) -> None:
    path = tmp_path / "broker.p12"
    path.write_bytes(
        pkcs12.serialize_key_and_certificates(
            b"broker", server_cert.key, server_cert.certificate, None, BestAvailableEncryption(b"secret")
        )
    )
    settings = SslSettings(keystore_type="PKCS12", keystore_location=str(path), keystore_password="secret")
    client = SslSettings(truststore_type="PEM", truststore_certificates=ca.pem)
    _handshake(settings.server_context(), client.client_context())
    wrong = SslSettings(keystore_type="PKCS12", keystore_location=str(path), keystore_password="nope")
    with pytest.raises(TlsConfigError, match=r"not a PKCS12 file this password opens"):
        wrong.server_context()


def test_mutual_tls_hands_the_server_the_client_certificate(
    tmp_path: Path, ca: Authority, server_cert: Issued
) -> None:
    server = _pem_settings(tmp_path, server_cert, ca, client_auth="required")
    alice = issue(ca, "alice")
    client = SslSettings(
        keystore_type="PEM",
        keystore_certificate_chain=alice.certificate_pem,
        keystore_key=alice.key_pem,
        truststore_type="PEM",
        truststore_certificates=ca.pem,
    )
    server_end = _handshake(server.server_context(), client.client_context())
    subject = dict(pair[0] for pair in server_end.getpeercert()["subject"])  # type: ignore[index,misc]
    assert subject["commonName"] == "alice"


def test_required_client_auth_refuses_a_client_without_a_certificate(
    tmp_path: Path, ca: Authority, server_cert: Issued
) -> None:
    server = _pem_settings(tmp_path, server_cert, ca, client_auth="required")
    client = SslSettings(truststore_type="PEM", truststore_certificates=ca.pem)
    with pytest.raises(ssl.SSLError):
        end = _handshake(server.server_context(), client.client_context())
        end.read(1)  # TLS 1.3: the server's refusal reaches the client after its handshake


def test_an_untrusted_or_expired_server_certificate_is_refused_by_clients(
    tmp_path: Path, ca: Authority
) -> None:
    other = new_authority("someone else")
    client = SslSettings(truststore_type="PEM", truststore_certificates=ca.pem).client_context()
    for issued in (issue(other, "broker"), issue(ca, "broker", expired=True)):
        chain, key = issued.certificate_pem, issued.key_pem
        server = SslSettings(keystore_type="PEM", keystore_certificate_chain=chain, keystore_key=key)
        with pytest.raises(ssl.SSLCertVerificationError):
            _handshake(server.server_context(), client)


def test_the_host_name_is_checked_unless_endpoint_identification_is_off(ca: Authority) -> None:
    issued = issue(ca, "broker", hosts=("broker1.example.com",))
    server = SslSettings(
        keystore_type="PEM", keystore_certificate_chain=issued.certificate_pem, keystore_key=issued.key_pem
    ).server_context()
    checked = SslSettings(truststore_type="PEM", truststore_certificates=ca.pem)
    with pytest.raises(ssl.SSLCertVerificationError, match="Hostname mismatch"):
        _handshake(server, checked.client_context(), hostname="localhost")
    unchecked = SslSettings(
        truststore_type="PEM", truststore_certificates=ca.pem, endpoint_identification_algorithm=""
    )
    _handshake(server, unchecked.client_context(), hostname="localhost")


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (SslSettings(), "ssl.keystore.location: a TLS listener needs a keystore"),
        (SslSettings(keystore_location="/x.jks"), "JKS keystores can only be read by a JVM"),
        (SslSettings(keystore_type="PEM", keystore_location="/none.pem"), "/none.pem does not exist"),
        (
            SslSettings(keystore_type="PEM", keystore_certificate_chain="x"),
            "ssl.keystore.key: is required here",
        ),
    ],
)
def test_unusable_keystores_are_refused_naming_the_key(settings: SslSettings, message: str) -> None:
    with pytest.raises(TlsConfigError, match=message):
        settings.server_context()


def test_a_keystore_that_is_not_pem_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "junk.pem"
    path.write_text("not a key")
    with pytest.raises(TlsConfigError, match=r"ssl.keystore.location: .*junk.pem does not hold a usable PEM"):
        SslSettings(keystore_type="PEM", keystore_location=str(path)).server_context()


def test_client_auth_needs_a_truststore(tmp_path: Path, ca: Authority, server_cert: Issued) -> None:
    settings = _pem_settings(tmp_path, server_cert, ca, client_auth="requested")
    settings = SslSettings(
        keystore_type="PEM", keystore_location=settings.keystore_location, client_auth="requested"
    )
    with pytest.raises(TlsConfigError, match=r"ssl\.client\.auth=requested needs"):
        settings.server_context()


def test_enabled_protocols_become_a_version_range() -> None:
    assert protocol_range(("TLSv1.2", "TLSv1.3")) == (ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3)
    assert protocol_range(("TLSv1.3",)) == (ssl.TLSVersion.TLSv1_3, ssl.TLSVersion.TLSv1_3)
    with pytest.raises(TlsConfigError, match="unknown protocol SSLv3"):
        protocol_range(("SSLv3",))
    with pytest.raises(TlsConfigError, match="consecutive"):
        protocol_range(("TLSv1.1", "TLSv1.3"))


def test_tls12_only_listener_negotiates_tls12(tmp_path: Path, ca: Authority, server_cert: Issued) -> None:
    server = _pem_settings(tmp_path, server_cert, ca, enabled_protocols=("TLSv1.2",))
    client = _pem_settings(tmp_path, server_cert, ca)
    assert _handshake(server.server_context(), client.client_context()).version() == "TLSv1.2"


def test_cipher_suites_by_kafka_or_openssl_name(tmp_path: Path, ca: Authority, server_cert: Issued) -> None:
    assert openssl_cipher_name("TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256") == "ECDHE-ECDSA-AES128-GCM-SHA256"
    assert openssl_cipher_name("TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256") == "ECDHE-RSA-CHACHA20-POLY1305"
    assert openssl_cipher_name("TLS_DHE_RSA_WITH_AES_256_CBC_SHA256") == "DHE-RSA-AES256-SHA256"
    assert openssl_cipher_name("ECDHE-RSA-AES128-GCM-SHA256") == "ECDHE-RSA-AES128-GCM-SHA256"
    with pytest.raises(TlsConfigError, match=r"unknown or unsupported cipher suite BOGUS"):
        openssl_cipher_name("BOGUS")
    server = _pem_settings(
        tmp_path,
        server_cert,
        ca,
        enabled_protocols=("TLSv1.2",),
        cipher_suites=("TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",),
    )
    client = _pem_settings(tmp_path, server_cert, ca)
    end = _handshake(server.server_context(), client.client_context())
    assert end.cipher()[0] == "ECDHE-ECDSA-AES256-GCM-SHA384"  # type: ignore[index]


def test_write_dev_pki_keystores_load(tmp_path: Path) -> None:
    pki = write_dev_pki(tmp_path / "pki", ("broker", "alice"))
    assert (pki.keystores["alice"].stat().st_mode & 0o777) == 0o600
    server = SslSettings(keystore_type="PEM", keystore_location=str(pki.keystores["broker"]))
    client = SslSettings(truststore_type="PEM", truststore_location=str(pki.ca))
    _handshake(server.server_context(), client.client_context())
