"""TLS contexts from Kafka's ``ssl.*`` settings, for listeners and for kipling's own clients.

Kafka configures TLS with Java keystores; kipling reads the formats Python's ``ssl`` module can
serve: PEM (``ssl.keystore.type=PEM``: a file with the private key and certificate chain, or both
inline in ``ssl.keystore.key``/``ssl.keystore.certificate.chain``) and PKCS12 (read with the
``cryptography`` package and handed to OpenSSL as PEM). JKS cannot be read outside a JVM, so it is
refused with a message naming the key, not ignored.

Cipher suites are given the way Kafka takes them (IANA names such as
``TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256``); they are translated to OpenSSL's names, which are
accepted too. A listener's context is built once and its keystore can be loaded again in place
(:meth:`SslSettings.load_keystore`): OpenSSL gives connections accepted afterwards the new
certificate while open connections keep theirs, which is how Kafka's dynamic keystore update
behaves.
"""

from __future__ import annotations

import os
import re
import ssl
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

CLIENT_AUTH_NONE = "none"
CLIENT_AUTH_REQUESTED = "requested"
CLIENT_AUTH_REQUIRED = "required"
CLIENT_AUTH_MODES = (CLIENT_AUTH_NONE, CLIENT_AUTH_REQUESTED, CLIENT_AUTH_REQUIRED)

PEM = "PEM"
PKCS12 = "PKCS12"
JKS = "JKS"
STORE_TYPES = (JKS, PKCS12, PEM)

_PROTOCOLS = {
    "TLSv1": ssl.TLSVersion.TLSv1,
    "TLSv1.1": ssl.TLSVersion.TLSv1_1,
    "TLSv1.2": ssl.TLSVersion.TLSv1_2,
    "TLSv1.3": ssl.TLSVersion.TLSv1_3,
}
_ORDER = list(_PROTOCOLS)

_VERIFY = {
    CLIENT_AUTH_NONE: ssl.CERT_NONE,
    CLIENT_AUTH_REQUESTED: ssl.CERT_OPTIONAL,
    CLIENT_AUTH_REQUIRED: ssl.CERT_REQUIRED,
}

_IANA_SUITE = re.compile(
    r"TLS_(?P<kx>ECDHE|DHE)_(?P<auth>RSA|ECDSA)_WITH_(?P<enc>AES_128_GCM|AES_256_GCM|AES_128_CBC|"
    r"AES_256_CBC|CHACHA20_POLY1305)_(?P<mac>SHA256|SHA384|SHA)"
)
_ENC = {
    "AES_128_GCM": "AES128-GCM",
    "AES_256_GCM": "AES256-GCM",
    "AES_128_CBC": "AES128",
    "AES_256_CBC": "AES256",
    "CHACHA20_POLY1305": "CHACHA20-POLY1305",
}
_TLS13_SUITES = ("TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256")


class TlsConfigError(ValueError):
    """A TLS setting that cannot be used; ``key`` names the setting (without a listener prefix)."""

    def __init__(self, key: str, reason: str) -> None:
        super().__init__(f"Invalid configuration {key}: {reason}")
        self.key = key


@dataclass(frozen=True)
class SslSettings:
    """One listener's (or one client's) ``ssl.*`` settings, as Kafka names them.

    Secrets (passwords, inline keys) are excluded from ``repr`` so that a logged config never shows
    them.
    """

    keystore_type: str = JKS
    keystore_location: str | None = None
    keystore_password: str | None = field(default=None, repr=False)
    key_password: str | None = field(default=None, repr=False)
    keystore_certificate_chain: str | None = field(default=None, repr=False)
    keystore_key: str | None = field(default=None, repr=False)
    truststore_type: str = JKS
    truststore_location: str | None = None
    truststore_password: str | None = field(default=None, repr=False)
    truststore_certificates: str | None = field(default=None, repr=False)
    client_auth: str = CLIENT_AUTH_NONE
    enabled_protocols: tuple[str, ...] = ("TLSv1.2", "TLSv1.3")
    cipher_suites: tuple[str, ...] = ()
    endpoint_identification_algorithm: str = "https"

    @property
    def has_keystore(self) -> bool:
        return bool(self.keystore_location or self.keystore_certificate_chain or self.keystore_key)

    @property
    def has_truststore(self) -> bool:
        return bool(self.truststore_location or self.truststore_certificates)

    def check(self, *, server: bool) -> None:
        """Refuse what cannot work, before any socket is opened (a context is built and dropped)."""
        context = self.server_context() if server else self.client_context()
        del context

    def server_context(self) -> ssl.SSLContext:
        """The context of a TLS listener: its certificate, and the peer verification
        ``ssl.client.auth`` asks for."""
        if not self.has_keystore:
            raise TlsConfigError(
                "ssl.keystore.location",
                "a TLS listener needs a keystore (ssl.keystore.location, "
                "or ssl.keystore.certificate.chain and ssl.keystore.key with ssl.keystore.type=PEM)",
            )
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self._common(context)
        self.load_keystore(context)
        if self.client_auth not in _VERIFY:
            raise TlsConfigError("ssl.client.auth", f"expected one of {', '.join(CLIENT_AUTH_MODES)}")
        if self.client_auth != CLIENT_AUTH_NONE:
            if not self.has_truststore:
                raise TlsConfigError(
                    "ssl.truststore.location",
                    f"ssl.client.auth={self.client_auth} needs a truststore to verify client certificates",
                )
            self._load_truststore(context)
        context.verify_mode = _VERIFY[self.client_auth]
        return context

    def client_context(self) -> ssl.SSLContext:
        """The context of a connection kipling makes (to another broker or a controller): the
        server's certificate verified against the truststore (the system's when none is given),
        its host name too unless ``ssl.endpoint.identification.algorithm`` is empty, and a client
        certificate when a keystore is given."""
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        self._common(context)
        if self.has_truststore:
            self._load_truststore(context)
        else:
            context.load_default_certs(ssl.Purpose.SERVER_AUTH)
        context.check_hostname = bool(self.endpoint_identification_algorithm)
        context.verify_mode = ssl.CERT_REQUIRED
        if self.has_keystore:
            self.load_keystore(context)
        return context

    # -- pieces --------------------------------------------------------------------------------

    def _common(self, context: ssl.SSLContext) -> None:
        low, high = protocol_range(self.enabled_protocols)
        context.minimum_version = low
        context.maximum_version = high
        if self.cipher_suites:
            openssl_names = [openssl_cipher_name(name) for name in self.cipher_suites]
            tls12 = [name for name in openssl_names if name not in _TLS13_SUITES]
            try:
                # TLS 1.3 suites cannot be narrowed through Python's ssl module; OpenSSL's defaults
                # for it are the three AEAD suites, all of them strong.
                context.set_ciphers(":".join(tls12) if tls12 else "!ALL")
            except ssl.SSLError as exc:
                raise TlsConfigError("ssl.cipher.suites", f"no usable cipher suite ({exc})") from exc

    def load_keystore(self, context: ssl.SSLContext) -> None:
        """Load this keystore's key and certificate chain into ``context``: also how a listener
        takes a replaced certificate without a restart."""
        kind = self.keystore_type.upper()
        if kind == JKS:
            raise TlsConfigError(
                "ssl.keystore.type",
                "JKS keystores can only be read by a JVM; use PEM or PKCS12 "
                "(keytool -importkeystore -deststoretype PKCS12 converts one)",
            )
        if kind not in (PEM, PKCS12):
            raise TlsConfigError("ssl.keystore.type", f"expected one of {', '.join(STORE_TYPES)}")
        if kind == PKCS12:
            key_pem, chain_pem = _read_pkcs12(
                _required(self.keystore_location, "ssl.keystore.location"), self.keystore_password
            )
            _load_chain(context, chain_pem, key_pem, None)
            return
        if self.keystore_certificate_chain or self.keystore_key:
            if self.keystore_location:
                raise TlsConfigError(
                    "ssl.keystore.location",
                    "set either ssl.keystore.location or ssl.keystore.certificate.chain and "
                    "ssl.keystore.key, not both",
                )
            chain = _required(self.keystore_certificate_chain, "ssl.keystore.certificate.chain")
            key = _required(self.keystore_key, "ssl.keystore.key")
            _load_chain(context, chain, key, self.key_password)
            return
        location = _required(self.keystore_location, "ssl.keystore.location")
        try:
            context.load_cert_chain(location, password=self.key_password or self.keystore_password)
        except FileNotFoundError as exc:
            raise TlsConfigError("ssl.keystore.location", f"{location} does not exist") from exc
        except (ssl.SSLError, OSError) as exc:
            raise TlsConfigError(
                "ssl.keystore.location",
                f"{location} does not hold a usable PEM private key and certificate chain ({_reason(exc)})",
            ) from exc

    def _load_truststore(self, context: ssl.SSLContext) -> None:
        kind = self.truststore_type.upper()
        if kind == JKS:
            raise TlsConfigError(
                "ssl.truststore.type", "JKS truststores can only be read by a JVM; use PEM or PKCS12"
            )
        if kind not in (PEM, PKCS12):
            raise TlsConfigError("ssl.truststore.type", f"expected one of {', '.join(STORE_TYPES)}")
        if kind == PKCS12:
            location = _required(self.truststore_location, "ssl.truststore.location")
            _, certificates = _read_pkcs12(location, self.truststore_password, need_key=False)
            context.load_verify_locations(cadata=certificates)
            return
        try:
            if self.truststore_certificates:
                context.load_verify_locations(cadata=self.truststore_certificates)
            else:
                context.load_verify_locations(cafile=self.truststore_location)
        except FileNotFoundError as exc:
            raise TlsConfigError(
                "ssl.truststore.location", f"{self.truststore_location} does not exist"
            ) from exc
        except (ssl.SSLError, OSError, ValueError) as exc:
            key = "ssl.truststore.certificates" if self.truststore_certificates else "ssl.truststore.location"
            raise TlsConfigError(key, f"no usable PEM certificates ({_reason(exc)})") from exc


def protocol_range(names: tuple[str, ...]) -> tuple[ssl.TLSVersion, ssl.TLSVersion]:
    """``ssl.enabled.protocols`` as the lowest and highest version OpenSSL should allow; the
    versions must be contiguous, as OpenSSL has no way to leave one out in between."""
    if not names:
        raise TlsConfigError("ssl.enabled.protocols", "at least one protocol is needed")
    unknown = [name for name in names if name not in _PROTOCOLS]
    if unknown:
        raise TlsConfigError(
            "ssl.enabled.protocols", f"unknown protocol {unknown[0]}; expected some of {', '.join(_ORDER)}"
        )
    positions = sorted({_ORDER.index(name) for name in names})
    if positions != list(range(positions[0], positions[-1] + 1)):
        raise TlsConfigError("ssl.enabled.protocols", "the protocols must be consecutive versions")
    return _PROTOCOLS[_ORDER[positions[0]]], _PROTOCOLS[_ORDER[positions[-1]]]


def openssl_cipher_name(name: str) -> str:
    """A cipher suite as OpenSSL names it, from Kafka's (IANA) name or OpenSSL's own."""
    if name in _TLS13_SUITES:
        return name
    match = _IANA_SUITE.fullmatch(name)
    if match is not None:
        kx, auth, enc, mac = match["kx"], match["auth"], match["enc"], match["mac"]
        parts = [kx, auth, _ENC[enc]]
        if enc.endswith("CBC"):
            parts.append(mac)
        elif enc.endswith("GCM"):
            parts[-1] = f"{_ENC[enc]}-{mac}"
        candidate = "-".join(parts)
        if kx == "ECDHE" or auth == "RSA":
            return candidate
    known = {cipher["name"] for cipher in _all_ciphers()}
    if name in known:
        return name
    raise TlsConfigError("ssl.cipher.suites", f"unknown or unsupported cipher suite {name}")


def _all_ciphers() -> list[dict[str, object]]:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.set_ciphers("ALL")
    return context.get_ciphers()  # type: ignore[return-value]


def _required(value: str | None, key: str) -> str:
    if not value:
        raise TlsConfigError(key, "is required here and not set")
    return value


def _reason(exc: BaseException) -> str:
    if isinstance(exc, ssl.SSLError) and exc.reason:
        return str(exc.reason)
    return str(exc)


@contextmanager
def _private_file(text: str) -> Iterator[str]:
    """A file only this user can read, removed afterwards: OpenSSL loads chains from files."""
    descriptor, path = tempfile.mkstemp(prefix="kipling-tls-", suffix=".pem")
    try:
        with os.fdopen(descriptor, "w") as handle:
            handle.write(text)
        yield path
    finally:
        os.unlink(path)


def _load_chain(context: ssl.SSLContext, chain_pem: str, key_pem: str, password: str | None) -> None:
    with _private_file(chain_pem) as chain_path, _private_file(key_pem) as key_path:
        try:
            context.load_cert_chain(chain_path, key_path, password=password)
        except ssl.SSLError as exc:
            raise TlsConfigError(
                "ssl.keystore.key", f"the key and certificate chain do not load ({_reason(exc)})"
            ) from exc


def _read_pkcs12(location: str, password: str | None, *, need_key: bool = True) -> tuple[str, str]:
    """A PKCS12 file's private key and certificates, as PEM (the key unencrypted, in memory only)."""
    from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat, pkcs12

    key = "ssl.keystore.location" if need_key else "ssl.truststore.location"
    try:
        with open(location, "rb") as handle:
            data = handle.read()
    except FileNotFoundError as exc:
        raise TlsConfigError(key, f"{location} does not exist") from exc
    try:
        private_key, certificate, extra = pkcs12.load_key_and_certificates(
            data, password.encode() if password else None
        )
    except ValueError as exc:
        raise TlsConfigError(key, f"{location} is not a PKCS12 file this password opens") from exc
    certificates = [c for c in [certificate, *extra] if c is not None]
    if not certificates:
        raise TlsConfigError(key, f"{location} holds no certificate")
    chain = "".join(c.public_bytes(Encoding.PEM).decode() for c in certificates)
    if not need_key:
        return "", chain
    if private_key is None:
        raise TlsConfigError(key, f"{location} holds no private key")
    key_pem = private_key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption()).decode()
    return key_pem, chain
