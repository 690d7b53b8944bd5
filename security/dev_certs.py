"""Certificates for local use: a throwaway certificate authority and the certificates it signs.

A secured dev cluster and the tests need TLS material without asking the operator to run
``openssl``: :func:`write_dev_pki` writes a CA and one PEM keystore (key + chain) per name, which a
listener reads with ``ssl.keystore.type=PEM`` and a client with ``ssl.ca.location``. Nothing here is
fit for production: keys are unencrypted and the CA key is kept beside the certificates.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

DAY = datetime.timedelta(days=1)


@dataclass(frozen=True)
class Authority:
    """A CA: its key and self-signed certificate."""

    key: ec.EllipticCurvePrivateKey
    certificate: x509.Certificate

    @property
    def pem(self) -> str:
        return self.certificate.public_bytes(serialization.Encoding.PEM).decode()


@dataclass(frozen=True)
class Issued:
    """A key and the certificate a CA issued for it, with the chain up to (not including) the CA."""

    key: ec.EllipticCurvePrivateKey
    certificate: x509.Certificate

    @property
    def key_pem(self) -> str:
        return self.key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        ).decode()

    @property
    def certificate_pem(self) -> str:
        return self.certificate.public_bytes(serialization.Encoding.PEM).decode()

    @property
    def keystore_pem(self) -> str:
        """What ``ssl.keystore.location`` points to for ``ssl.keystore.type=PEM``: key, then chain."""
        return self.key_pem + self.certificate_pem


def _name(common_name: str, organization: str = "kipling dev") -> x509.Name:
    return x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization),
            x509.NameAttribute(NameOID.COMMON_NAME, common_name),
        ]
    )


def new_authority(common_name: str = "kipling dev CA", *, days: int = 365) -> Authority:
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    name = _name(common_name)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - DAY)
        .not_valid_after(now + days * DAY)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .sign(key, hashes.SHA256())
    )
    return Authority(key, certificate)


def issue(
    authority: Authority,
    subject: x509.Name | str,
    *,
    hosts: tuple[str, ...] = ("localhost", "127.0.0.1"),
    days: int = 365,
    expired: bool = False,
) -> Issued:
    """A certificate for a server and client alike (both extended key usages), naming ``hosts``
    (DNS names or IP addresses) as subject alternative names; ``expired`` dates it in the past."""
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    start, end = (now - 10 * DAY, now - DAY) if expired else (now - DAY, now + days * DAY)
    names: list[x509.GeneralName] = []
    for host in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(subject) if isinstance(subject, str) else subject)
        .issuer_name(authority.certificate.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]),
            critical=False,
        )
    )
    if names:
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    return Issued(key, builder.sign(authority.key, hashes.SHA256()))


@dataclass(frozen=True)
class DevPki:
    """Where :func:`write_dev_pki` put things."""

    ca: Path
    keystores: dict[str, Path]
    """name → PEM keystore (key and certificate)."""


def write_dev_pki(directory: Path, names: tuple[str, ...], *, hosts: tuple[str, ...] = ()) -> DevPki:
    """A CA (``ca.pem``) and one keystore per name (``<name>.pem``, readable by this user only),
    each certificate valid for ``localhost``, ``127.0.0.1`` and ``hosts``."""
    directory.mkdir(parents=True, exist_ok=True)
    authority = new_authority()
    ca = directory / "ca.pem"
    ca.write_text(authority.pem)
    keystores: dict[str, Path] = {}
    for name in names:
        issued = issue(authority, name, hosts=("localhost", "127.0.0.1", *hosts))
        path = directory / f"{name}.pem"
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "w") as handle:
            handle.write(issued.keystore_pem)
        keystores[name] = path
    return DevPki(ca, keystores)
