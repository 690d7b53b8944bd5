"""The SASL state of one connection (Kafka's SaslServerAuthenticator), on a fake clock: which
requests each state admits, the handshake, PLAIN and SCRAM exchanges, KIP-368 re-authentication
and session expiry."""

from __future__ import annotations

import pytest

from broker.server.authentication import (
    ConnectionSession,
    SaslServerAuthenticator,
    SaslStateViolation,
)
from protocol.api_keys import ApiKey
from protocol.error_codes import ErrorCode, KafkaError
from security.errors import AuthenticationError, SaslAuthenticationError
from security.plain import plain_token
from security.principal import ANONYMOUS, KafkaPrincipal
from security.scram import ScramClient, ScramCredential, ScramMechanism, credential_from_password
from server_common.config.listener_security import ListenerSecurity

SHA512 = ScramMechanism.SCRAM_SHA_512


class FakeCredentials:
    def __init__(self) -> None:
        self.scram: dict[str, ScramCredential] = {"carol": credential_from_password(SHA512, "carol-secret")}

    def plain_password(self, listener: str, user: str) -> str | None:
        return {"alice": "alice-secret", "bob": "bob-secret"}.get(user)

    def scram_credential(self, mechanism: ScramMechanism, user: str) -> ScramCredential | None:
        return self.scram.get(user) if mechanism is SHA512 else None


class Clock:
    def __init__(self) -> None:
        self.ms = 1_000

    def __call__(self) -> int:
        return self.ms


def authenticator(reauth_ms: int = 0, clock: Clock | None = None) -> SaslServerAuthenticator:
    security = ListenerSecurity(
        "SASL_PLAINTEXT", "SASL_PLAINTEXT", None, ("PLAIN", "SCRAM-SHA-512"), {}, max_reauth_ms=reauth_ms
    )
    return SaslServerAuthenticator(security, FakeCredentials(), clock or Clock())


def test_before_the_handshake_only_api_versions_and_the_handshake_are_admitted() -> None:
    auth = authenticator()
    with pytest.raises(SaslStateViolation, match="unexpected request METADATA during SASL handshake or"):
        auth.admit(ApiKey.METADATA)
    auth.admit(ApiKey.API_VERSIONS)
    auth.admit(ApiKey.API_VERSIONS)  # again: a client told UNSUPPORTED_VERSION retries lower
    with pytest.raises(SaslStateViolation):
        auth.admit(ApiKey.SASL_AUTHENTICATE)  # not before the handshake
    auth.admit(ApiKey.SASL_HANDSHAKE)


def test_plain_exchange_yields_the_user_principal() -> None:
    auth = authenticator()
    assert auth.handshake("PLAIN") == (ErrorCode.NONE, ["PLAIN", "SCRAM-SHA-512"])
    auth.admit(ApiKey.SASL_AUTHENTICATE)
    with pytest.raises(SaslStateViolation):
        auth.admit(ApiKey.PRODUCE)
    result = auth.authenticate(plain_token("alice", "alice-secret"))
    assert auth.authenticated and auth.principal == KafkaPrincipal("User", "alice")
    assert result.session_lifetime_ms == 0
    auth.admit(ApiKey.PRODUCE)


def test_an_unsupported_mechanism_fails_the_handshake() -> None:
    auth = authenticator()
    assert auth.handshake("SCRAM-SHA-256") == (
        ErrorCode.UNSUPPORTED_SASL_MECHANISM,
        ["PLAIN", "SCRAM-SHA-512"],
    )
    with pytest.raises(SaslStateViolation):
        auth.admit(ApiKey.SASL_AUTHENTICATE)


def test_a_wrong_password_fails_and_the_state_stays_failed() -> None:
    auth = authenticator()
    auth.handshake("PLAIN")
    with pytest.raises(SaslAuthenticationError, match="Invalid username or password"):
        auth.authenticate(plain_token("alice", "nope"))
    assert not auth.authenticated and auth.principal is None
    with pytest.raises(SaslStateViolation):
        auth.admit(ApiKey.SASL_AUTHENTICATE)
    with pytest.raises(AuthenticationError):
        auth.authenticate(plain_token("alice", "alice-secret"))


def test_scram_exchange_in_two_steps() -> None:
    auth = authenticator()
    auth.handshake("SCRAM-SHA-512")
    client = ScramClient(SHA512, "carol", "carol-secret")
    first = auth.authenticate(client.first_message())
    assert not auth.authenticated
    final = auth.authenticate(client.evaluate(first.token))
    client.verify(final.token)
    assert auth.principal == KafkaPrincipal("User", "carol")


def test_reauthentication_within_the_session_lifetime() -> None:
    clock = Clock()
    auth = authenticator(reauth_ms=60_000, clock=clock)
    auth.handshake("PLAIN")
    assert auth.authenticate(plain_token("alice", "alice-secret")).session_lifetime_ms == 60_000
    clock.ms += 59_000
    auth.admit(ApiKey.FETCH)
    auth.admit(ApiKey.SASL_HANDSHAKE)
    assert auth.handshake("PLAIN")[0] is ErrorCode.NONE
    with pytest.raises(SaslStateViolation):
        auth.admit(ApiKey.FETCH)  # nothing but the exchange while re-authenticating
    auth.authenticate(plain_token("alice", "alice-secret"))
    clock.ms += 59_000  # the new session started at the re-authentication
    auth.admit(ApiKey.FETCH)


def test_an_expired_session_closes_on_the_next_request_but_may_still_reauthenticate() -> None:
    clock = Clock()
    auth = authenticator(reauth_ms=1_000, clock=clock)
    auth.handshake("PLAIN")
    auth.authenticate(plain_token("alice", "alice-secret"))
    clock.ms += 1_000
    with pytest.raises(SaslStateViolation, match="expired"):
        auth.admit(ApiKey.PRODUCE)
    auth.admit(ApiKey.SASL_HANDSHAKE)


def test_reauthentication_may_not_change_principal_or_mechanism() -> None:
    auth = authenticator(reauth_ms=60_000)
    auth.handshake("PLAIN")
    auth.authenticate(plain_token("alice", "alice-secret"))
    auth.handshake("PLAIN")
    with pytest.raises(SaslAuthenticationError, match="Cannot change principals"):
        auth.authenticate(plain_token("bob", "bob-secret"))
    other = authenticator(reauth_ms=60_000)
    other.handshake("PLAIN")
    other.authenticate(plain_token("alice", "alice-secret"))
    assert other.handshake("SCRAM-SHA-512")[0] is ErrorCode.ILLEGAL_SASL_STATE


def test_v0_handshake_expects_raw_tokens() -> None:
    auth = authenticator()
    auth.handshake("PLAIN", raw_tokens=True)
    assert auth.expects_raw_token
    auth.authenticate(plain_token("alice", "alice-secret"))
    assert not auth.expects_raw_token and auth.authenticated


def test_session_principal_prefers_sasl_then_certificate_then_anonymous() -> None:
    session = ConnectionSession("SASL_SSL")
    assert session.principal == ANONYMOUS
    session.tls_principal = KafkaPrincipal("User", "CN=alice")
    assert session.principal == KafkaPrincipal("User", "CN=alice")
    session.authenticator = authenticator()
    session.authenticator.handshake("PLAIN")
    session.authenticator.authenticate(plain_token("bob", "bob-secret"))
    assert session.principal == KafkaPrincipal("User", "bob")
    with pytest.raises(KafkaError) as failure:
        ConnectionSession("PLAINTEXT").require_authenticator()
    assert failure.value.code is ErrorCode.ILLEGAL_SASL_STATE
