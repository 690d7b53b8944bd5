"""Each listener's security settings: its protocol, TLS material and SASL mechanisms.

Kafka scopes security keys to a listener with a prefix, ``listener.name.<listener>.<key>``, which
wins over the unprefixed key; SASL's JAAS configuration is scoped to a mechanism as well,
``listener.name.<listener>.<mechanism>.sasl.jaas.config``. This module is the one place that
resolves those prefixes, so the broker, its clients and DescribeConfigs agree on what a listener
uses.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from security.jaas import PLAIN_LOGIN_MODULE, login_credentials, parse_jaas, plain_users
from security.tls import SslSettings, TlsConfigError
from server_common.config.definitions import BY_NAME, ConfigError

PLAINTEXT = "PLAINTEXT"
SSL = "SSL"
SASL_PLAINTEXT = "SASL_PLAINTEXT"
SASL_SSL = "SASL_SSL"

PLAIN = "PLAIN"
SCRAM_SHA_256 = "SCRAM-SHA-256"
SCRAM_SHA_512 = "SCRAM-SHA-512"
SUPPORTED_MECHANISMS = (PLAIN, SCRAM_SHA_256, SCRAM_SHA_512)
"""The SASL mechanisms kipling implements (Kafka's GSSAPI and OAUTHBEARER are not among them)."""

SSL_KEYS = (
    "ssl.keystore.type",
    "ssl.keystore.location",
    "ssl.keystore.password",
    "ssl.key.password",
    "ssl.keystore.certificate.chain",
    "ssl.keystore.key",
    "ssl.truststore.type",
    "ssl.truststore.location",
    "ssl.truststore.password",
    "ssl.truststore.certificates",
    "ssl.client.auth",
    "ssl.enabled.protocols",
    "ssl.protocol",
    "ssl.cipher.suites",
    "ssl.endpoint.identification.algorithm",
    "ssl.principal.mapping.rules",
)
LISTENER_KEYS = frozenset(
    {*SSL_KEYS, "sasl.enabled.mechanisms", "connections.max.reauth.ms", "sasl.server.max.receive.size"}
)
"""Keys a ``listener.name.<listener>.`` prefix may scope."""
JAAS_KEY = "sasl.jaas.config"
"""Scoped to a listener and a mechanism: ``listener.name.<listener>.<mechanism>.sasl.jaas.config``."""

_PREFIXED = re.compile(r"listener\.name\.(?P<listener>[A-Za-z0-9_-]+)\.(?P<key>.+)")


@dataclass(frozen=True)
class ListenerOverrides:
    """The ``listener.name.`` keys of a config file, parsed: listener → key → typed value, and
    (listener, mechanism) → JAAS text."""

    keys: Mapping[str, Mapping[str, object]] = field(default_factory=dict)
    jaas: Mapping[tuple[str, str], str] = field(default_factory=dict, repr=False)

    @property
    def listeners(self) -> set[str]:
        return {*self.keys, *(listener for listener, _ in self.jaas)}


def is_listener_key(key: str) -> bool:
    return _PREFIXED.fullmatch(key) is not None


def parse_listener_overrides(props: Mapping[str, str]) -> tuple[ListenerOverrides, list[str]]:
    """The ``listener.name.*`` entries of ``props`` (others are ignored), with warnings for
    prefixed keys kipling does not scope per listener."""
    keys: dict[str, dict[str, object]] = {}
    jaas: dict[tuple[str, str], str] = {}
    warnings: list[str] = []
    for name, raw in props.items():
        match = _PREFIXED.fullmatch(name)
        if match is None:
            continue
        listener, key = match["listener"].upper(), match["key"]
        if key in LISTENER_KEYS:
            keys.setdefault(listener, {})[key] = BY_NAME[key].parse(raw, name)
            continue
        mechanism, dot, rest = key.partition(".")
        if dot and rest == JAAS_KEY:
            jaas[(listener, mechanism.upper())] = raw.strip()
            continue
        warnings.append(f"Unknown configuration {name!r} is ignored (no listener-scoped key {key})")
    return ListenerOverrides(keys, jaas), warnings


@dataclass(frozen=True)
class ListenerSecurity:
    """What one listener needs to accept (and kipling's clients to make) secure connections."""

    listener: str
    protocol: str
    ssl: SslSettings | None
    """TLS material for SSL and SASL_SSL listeners; None for the others."""
    sasl_mechanisms: tuple[str, ...] = ()
    """Mechanisms offered on SASL_PLAINTEXT and SASL_SSL listeners, in the configured order."""
    jaas: Mapping[str, str] = field(default_factory=dict, repr=False)
    """Mechanism → JAAS text (``listener.name.<listener>.<mechanism>.sasl.jaas.config``)."""
    principal_mapping_rules: str = "DEFAULT"
    max_reauth_ms: int = 0
    max_receive_size: int = 524288

    @property
    def uses_tls(self) -> bool:
        return self.protocol in (SSL, SASL_SSL)

    @property
    def uses_sasl(self) -> bool:
        return self.protocol in (SASL_PLAINTEXT, SASL_SSL)


def resolve_listener_security(
    listener: str,
    protocol: str,
    values: Mapping[str, object],
    overrides: ListenerOverrides,
    *,
    bound: bool = True,
    connects: bool = False,
) -> ListenerSecurity:
    """``listener``'s settings: its prefixed keys over the unprefixed ones, validated (TLS files are
    read now, so a bad keystore stops the node before it listens).

    ``bound`` False: a listener this node only connects to (a broker's view of the controllers'
    listener): it offers no mechanisms and needs no keystore. ``connects``: this node also
    connects to the listener (inter-broker, controller), so its TLS settings must make a client
    context as well (the truststore loads)."""
    scoped = overrides.keys.get(listener, {})

    def value(key: str) -> object:
        return scoped[key] if key in scoped else values[key]

    ssl_settings = _ssl_settings(value) if protocol in (SSL, SASL_SSL) else None
    if ssl_settings is not None:
        try:
            if bound:
                ssl_settings.check(server=True)
            if connects or not bound:
                ssl_settings.check(server=False)
        except TlsConfigError as exc:
            raise _tls_config_error(listener, exc, scoped) from exc
    mechanisms: tuple[str, ...] = ()
    jaas: dict[str, str] = {}
    if protocol in (SASL_PLAINTEXT, SASL_SSL):
        if bound:
            mechanisms = _mechanisms(listener, value("sasl.enabled.mechanisms"), scoped)
        jaas = {mech: text for (name, mech), text in overrides.jaas.items() if name == listener}
        _check_jaas(listener, mechanisms, jaas)
    reauth, receive = value("connections.max.reauth.ms"), value("sasl.server.max.receive.size")
    assert isinstance(reauth, int) and isinstance(receive, int)
    return ListenerSecurity(
        listener,
        protocol,
        ssl_settings,
        mechanisms,
        jaas,
        str(value("ssl.principal.mapping.rules")),
        reauth,
        receive,
    )


@dataclass(frozen=True)
class OutboundSecurity:
    """How this node connects to a listener of other nodes (inter-broker, controller), as Kafka's
    inter-broker and controller channel builders set up their clients: the listener's protocol
    and TLS settings, and for SASL the node's mechanism and login."""

    listener: str
    protocol: str
    ssl: SslSettings | None
    sasl_mechanism: str | None = None
    username: str | None = None
    password: str | None = field(default=None, repr=False)

    @property
    def uses_sasl(self) -> bool:
        return self.protocol in (SASL_PLAINTEXT, SASL_SSL)


def outbound_security(
    security: ListenerSecurity, mechanism: str, mechanism_key: str, *, offered: bool
) -> OutboundSecurity:
    """This node's way into ``security``'s listener (``mechanism`` and ``mechanism_key`` as for
    :func:`client_login`, used only when the listener uses SASL)."""
    if not security.uses_sasl:
        return OutboundSecurity(security.listener, security.protocol, security.ssl)
    username, password = client_login(security, mechanism, mechanism_key, offered=offered)
    return OutboundSecurity(security.listener, security.protocol, security.ssl, mechanism, username, password)


def client_login(
    security: ListenerSecurity, mechanism: str, mechanism_key: str, *, offered: bool
) -> tuple[str, str]:
    """The username and password this node logs in with on ``security``'s listener, using
    ``mechanism`` (chosen by ``mechanism_key``: sasl.mechanism.inter.broker.protocol or
    sasl.mechanism.controller.protocol): the ``username`` and ``password`` options of
    ``listener.name.<listener>.<mechanism>.sasl.jaas.config``, as Kafka's inter-broker login reads
    them. ``offered``: the node serves this listener, so the mechanism must be one it enables.

    Raises :class:`ConfigError` whose one-line message names the key at fault (never a value).
    """
    listener = security.listener
    if mechanism not in SUPPORTED_MECHANISMS:
        raise ConfigError(
            f"Invalid configuration {mechanism_key}: SASL mechanism {mechanism} is not supported by "
            f"kipling (supported: {', '.join(SUPPORTED_MECHANISMS)}); listener {listener} uses "
            f"{security.protocol}",
            key=mechanism_key,
        )
    if offered and mechanism not in security.sasl_mechanisms:
        raise ConfigError(
            f"Invalid configuration {mechanism_key}: {mechanism} must be included in "
            f"sasl.enabled.mechanisms of listener {listener} "
            f"(listener.name.{listener.lower()}.sasl.enabled.mechanisms), which enables "
            f"{', '.join(security.sasl_mechanisms)}",
            key=mechanism_key,
        )
    key = f"listener.name.{listener.lower()}.{mechanism.lower()}.{JAAS_KEY}"
    text = security.jaas.get(mechanism)
    if text is None:
        raise ConfigError(
            f"Invalid configuration {key}: not set; this node logs in to listener {listener} "
            f"({security.protocol}) with {mechanism} ({mechanism_key}) and needs the username and "
            f"password options of a login module here",
            key=key,
        )
    try:
        return login_credentials(parse_jaas(text))
    except ValueError as exc:
        raise ConfigError(f"Invalid configuration {key}: {exc}", key=key) from exc


def _tls_config_error(listener: str, exc: TlsConfigError, scoped: Mapping[str, object]) -> ConfigError:
    key = _scoped_name(listener, exc.key, scoped)
    return ConfigError(f"Invalid configuration {key}: {str(exc).split(': ', 1)[1]}", key=key)


def _ssl_settings(value: Callable[[str], object]) -> SslSettings:
    def text(key: str) -> str | None:
        found = value(key)
        return None if found is None or found == "" else str(found)

    def items(key: str) -> tuple[str, ...]:
        found = value(key)
        assert isinstance(found, list)
        return tuple(str(item) for item in found)

    return SslSettings(
        keystore_type=str(text("ssl.keystore.type")),
        keystore_location=text("ssl.keystore.location"),
        keystore_password=text("ssl.keystore.password"),
        key_password=text("ssl.key.password"),
        keystore_certificate_chain=text("ssl.keystore.certificate.chain"),
        keystore_key=text("ssl.keystore.key"),
        truststore_type=str(text("ssl.truststore.type")),
        truststore_location=text("ssl.truststore.location"),
        truststore_password=text("ssl.truststore.password"),
        truststore_certificates=text("ssl.truststore.certificates"),
        client_auth=str(text("ssl.client.auth")),
        enabled_protocols=items("ssl.enabled.protocols"),
        cipher_suites=items("ssl.cipher.suites"),
        endpoint_identification_algorithm=text("ssl.endpoint.identification.algorithm") or "",
    )


def _mechanisms(listener: str, raw: object, scoped: Mapping[str, object]) -> tuple[str, ...]:
    key = _scoped_name(listener, "sasl.enabled.mechanisms", scoped)
    assert isinstance(raw, list)
    mechanisms = tuple(str(item).upper() for item in raw)
    if not mechanisms:
        raise ConfigError(
            f"Invalid configuration {key}: a SASL listener needs at least one mechanism", key=key
        )
    for mechanism in mechanisms:
        if mechanism not in SUPPORTED_MECHANISMS:
            raise ConfigError(
                f"Invalid configuration {key}: SASL mechanism {mechanism} is not supported by kipling "
                f"(supported: {', '.join(SUPPORTED_MECHANISMS)}) on listener {listener}",
                key=key,
            )
    return mechanisms


def _check_jaas(listener: str, mechanisms: tuple[str, ...], jaas: Mapping[str, str]) -> None:
    """Every JAAS text must parse, and PLAIN needs its users from one (Kafka reads them there)."""
    for mechanism, text in jaas.items():
        key = f"listener.name.{listener.lower()}.{mechanism.lower()}.{JAAS_KEY}"
        try:
            parsed = parse_jaas(text)
            if mechanism == PLAIN:
                plain_users(parsed)
        except ValueError as exc:
            raise ConfigError(f"Invalid configuration {key}: {exc}", key=key) from exc
    if PLAIN in mechanisms and PLAIN not in jaas:
        key = f"listener.name.{listener.lower()}.plain.{JAAS_KEY}"
        raise ConfigError(
            f"Invalid configuration {key}: listener {listener} offers PLAIN, whose users are listed "
            f'in this key (user_<name>="<password>" options of {PLAIN_LOGIN_MODULE})',
            key=key,
        )


def _scoped_name(listener: str, key: str, scoped: Mapping[str, object]) -> str:
    """The key as the operator wrote it: with the listener prefix when the value came from there."""
    return f"listener.name.{listener.lower()}.{key}" if key in scoped else key
