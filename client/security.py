"""How a connection kipling makes proves who it is: TLS and SASL on the client's side.

Two shapes of the same thing:

* :class:`ClientSecurityConfig` is the *description*, as Kafka's client keys give it
  (``security.protocol``, ``ssl.*``, ``sasl.mechanism`` and the ``username``/``password`` of
  ``sasl.jaas.config``). It is plain data: it crosses the broker-follower IPC channel as JSON
  (:meth:`to_json`), and the CLI reads it from a ``--command-config`` file (:func:`from_properties`).
* :class:`ClientSecurity` is what a :class:`~client.connection.KafkaConnection` uses: a built
  :class:`ssl.SSLContext` (building one reads the truststore and keystore files, so it is built
  once and shared by every connection) and the SASL credentials.

Neither ``repr`` shows the password, and no error message quotes it.
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from security.jaas import login_credentials, parse_jaas
from security.tls import SslSettings, TlsConfigError

PLAINTEXT = "PLAINTEXT"
SSL = "SSL"
SASL_PLAINTEXT = "SASL_PLAINTEXT"
SASL_SSL = "SASL_SSL"
SECURITY_PROTOCOLS = (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL)

PLAIN = "PLAIN"
SCRAM_SHA_256 = "SCRAM-SHA-256"
SCRAM_SHA_512 = "SCRAM-SHA-512"
CLIENT_MECHANISMS = (PLAIN, SCRAM_SHA_256, SCRAM_SHA_512)
"""The SASL mechanisms kipling's client speaks."""

DEFAULT_SASL_MECHANISM = "GSSAPI"
"""Kafka's client default for ``sasl.mechanism``: refused here, as kipling has no Kerberos."""


@dataclass(frozen=True)
class ClientSecurity:
    """What a connection needs to reach a TLS and/or SASL listener.

    ``ssl_context`` None: plain TCP. ``server_hostname`` is the name the server's certificate must
    carry (and the SNI sent); None means the host connected to, as Kafka's clients check it.
    ``sasl_mechanism`` None: no SASL exchange after ApiVersions.
    """

    ssl_context: ssl.SSLContext | None = None
    server_hostname: str | None = None
    sasl_mechanism: str | None = None
    username: str | None = None
    password: str | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.sasl_mechanism is not None:
            if self.sasl_mechanism not in CLIENT_MECHANISMS:
                raise ValueError(
                    f"SASL mechanism {self.sasl_mechanism} is not supported by kipling's client "
                    f"(supported: {', '.join(CLIENT_MECHANISMS)})"
                )
            if not self.username or self.password is None:
                raise ValueError(f"SASL mechanism {self.sasl_mechanism} needs a username and a password")

    @property
    def protocol(self) -> str:
        """Kafka's name for this combination (SASL_SSL, SSL, ...)."""
        if self.sasl_mechanism is not None:
            return SASL_SSL if self.ssl_context is not None else SASL_PLAINTEXT
        return SSL if self.ssl_context is not None else PLAINTEXT


@dataclass(frozen=True)
class ClientSecurityConfig:
    """Kafka's client security keys, parsed: what :class:`ClientSecurity` is built from.

    The follower processes get theirs from the broker over the IPC channel (:meth:`to_json`), so
    their TLS contexts and SASL logins are the broker's own, built from the same settings.
    """

    protocol: str = PLAINTEXT
    ssl: SslSettings | None = None
    """For SSL and SASL_SSL."""
    sasl_mechanism: str | None = None
    """For SASL_PLAINTEXT and SASL_SSL."""
    username: str | None = None
    password: str | None = field(default=None, repr=False)

    @property
    def uses_tls(self) -> bool:
        return self.protocol in (SSL, SASL_SSL)

    @property
    def uses_sasl(self) -> bool:
        return self.protocol in (SASL_PLAINTEXT, SASL_SSL)

    def build(self) -> ClientSecurity | None:
        """The connection settings (None for PLAINTEXT). Raises :class:`TlsConfigError` for TLS
        material that cannot be used and ValueError for SASL settings that cannot work."""
        if self.protocol not in SECURITY_PROTOCOLS:
            raise ValueError(
                f"security.protocol {self.protocol} is not one of {', '.join(SECURITY_PROTOCOLS)}"
            )
        if self.protocol == PLAINTEXT:
            return None
        context = None
        if self.uses_tls:
            context = (self.ssl or SslSettings()).client_context()
        if not self.uses_sasl:
            return ClientSecurity(context)
        return ClientSecurity(context, None, self.sasl_mechanism, self.username, self.password)

    def to_json(self) -> dict[str, Any]:
        """A JSON object with every setting, secrets included: for a private channel only."""
        return {
            "protocol": self.protocol,
            "ssl": None if self.ssl is None else asdict(self.ssl),
            "sasl_mechanism": self.sasl_mechanism,
            "username": self.username,
            "password": self.password,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ClientSecurityConfig:
        """Unknown keys are ignored (a newer broker may send more)."""
        raw_ssl = data.get("ssl")
        ssl_settings = None
        if raw_ssl is not None:
            known = {f.name for f in fields(SslSettings)}
            values: dict[str, Any] = {
                key: tuple(value) if isinstance(value, list) else value
                for key, value in dict(raw_ssl).items()
                if key in known
            }
            ssl_settings = SslSettings(**values)
        return cls(
            protocol=str(data.get("protocol", PLAINTEXT)),
            ssl=ssl_settings,
            sasl_mechanism=data.get("sasl_mechanism"),
            username=data.get("username"),
            password=data.get("password"),
        )


# -- client properties (--command-config) -------------------------------------------------------

_SSL_TEXT_KEYS = {
    "ssl.keystore.type": "keystore_type",
    "ssl.keystore.location": "keystore_location",
    "ssl.keystore.password": "keystore_password",
    "ssl.key.password": "key_password",
    "ssl.keystore.certificate.chain": "keystore_certificate_chain",
    "ssl.keystore.key": "keystore_key",
    "ssl.truststore.type": "truststore_type",
    "ssl.truststore.location": "truststore_location",
    "ssl.truststore.password": "truststore_password",
    "ssl.truststore.certificates": "truststore_certificates",
    "ssl.endpoint.identification.algorithm": "endpoint_identification_algorithm",
}
_SSL_LIST_KEYS = {"ssl.enabled.protocols": "enabled_protocols", "ssl.cipher.suites": "cipher_suites"}
_ACCEPTED_KEYS = frozenset({"ssl.protocol"})
"""Kafka client keys taken and not needed: OpenSSL negotiates the highest allowed version."""
SECURITY_PROPERTY_KEYS = frozenset(
    {
        "security.protocol",
        "sasl.mechanism",
        "sasl.jaas.config",
        *_SSL_TEXT_KEYS,
        *_SSL_LIST_KEYS,
        *_ACCEPTED_KEYS,
    }
)
"""The client properties :func:`from_properties` reads."""


def from_properties(props: Mapping[str, str]) -> ClientSecurityConfig:
    """The security settings of Kafka client properties (a ``--command-config`` file).

    Keys are Kafka's: ``security.protocol``, ``ssl.truststore.*``, ``ssl.keystore.*``,
    ``ssl.endpoint.identification.algorithm``, ``sasl.mechanism`` and ``sasl.jaas.config``, whose
    ``username`` and ``password`` options are the login. Defaults are Kafka's too (JKS stores,
    which are refused by name, and GSSAPI). Keys outside :data:`SECURITY_PROPERTY_KEYS` are left to
    the caller. Raises ValueError naming the key at fault, never quoting a secret.
    """
    protocol = props.get("security.protocol", PLAINTEXT).strip().upper()
    if protocol not in SECURITY_PROTOCOLS:
        raise ValueError(
            f"Invalid value {protocol} for configuration security.protocol: expected one of "
            f"{', '.join(SECURITY_PROTOCOLS)}"
        )
    ssl_settings = None
    if protocol in (SSL, SASL_SSL):
        values: dict[str, Any] = {}
        for key, name in _SSL_TEXT_KEYS.items():
            if key in props:
                values[name] = props[key].strip()
        for key, name in _SSL_LIST_KEYS.items():
            if key in props:
                values[name] = tuple(item.strip() for item in props[key].split(",") if item.strip())
        ssl_settings = SslSettings(**values)
        try:
            ssl_settings.check(server=False)
        except TlsConfigError as exc:
            raise ValueError(str(exc)) from None
    if protocol not in (SASL_PLAINTEXT, SASL_SSL):
        return ClientSecurityConfig(protocol, ssl_settings)
    mechanism = props.get("sasl.mechanism", DEFAULT_SASL_MECHANISM).strip().upper()
    if mechanism not in CLIENT_MECHANISMS:
        raise ValueError(
            f"Invalid value {mechanism} for configuration sasl.mechanism: kipling supports "
            f"{', '.join(CLIENT_MECHANISMS)}"
        )
    text = props.get("sasl.jaas.config")
    if text is None:
        raise ValueError(
            f"Invalid configuration sasl.jaas.config: not set; security.protocol={protocol} with "
            f"sasl.mechanism={mechanism} needs a login module with username and password options"
        )
    try:
        username, password = login_credentials(parse_jaas(text))
    except ValueError as exc:
        raise ValueError(f"Invalid configuration sasl.jaas.config: {exc}") from None
    return ClientSecurityConfig(protocol, ssl_settings, mechanism, username, password)


__all__ = [
    "CLIENT_MECHANISMS",
    "PLAIN",
    "PLAINTEXT",
    "SASL_PLAINTEXT",
    "SASL_SSL",
    "SCRAM_SHA_256",
    "SCRAM_SHA_512",
    "SECURITY_PROPERTY_KEYS",
    "SECURITY_PROTOCOLS",
    "SSL",
    "ClientSecurity",
    "ClientSecurityConfig",
    "from_properties",
]
