"""SASL/PLAIN: Kafka's PlainSaslServer rules and messages, and kafka-python's token accepted."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from security.errors import IllegalSaslStateError, SaslAuthenticationError
from security.plain import INVALID_USERNAME_OR_PASSWORD, PlainServer, plain_token

USERS = {"alice": "alice-secret", "admin": "admin-secret"}


def _server(users: dict[str, str] = USERS) -> PlainServer:
    return PlainServer(users.get)


def _refused(token: bytes, message: str, server: PlainServer | None = None) -> SaslAuthenticationError:
    server = server or _server()
    with pytest.raises(SaslAuthenticationError) as info:
        server.evaluate(token)
    assert str(info.value) == message
    assert "secret" not in str(info.value)
    assert not server.complete
    with pytest.raises(IllegalSaslStateError):
        server.evaluate(token)
    return info.value


def test_plain_token_is_rfc4616() -> None:
    assert plain_token("alice", "pw") == b"\x00alice\x00pw"
    assert plain_token("alice", "pw", authzid="alice") == b"alice\x00alice\x00pw"
    assert plain_token("zoë", "pässword") == "\x00zoë\x00pässword".encode()
    with pytest.raises(ValueError):
        plain_token("al\x00ice", "pw")


def test_valid_credentials_complete_the_exchange() -> None:
    server = _server()
    with pytest.raises(IllegalSaslStateError):
        _ = server.username
    assert server.evaluate(plain_token("alice", "alice-secret")) == b""
    assert server.complete and server.username == "alice"


def test_authzid_equal_to_the_username_is_accepted() -> None:
    server = _server()
    server.evaluate(plain_token("admin", "admin-secret", authzid="admin"))
    assert server.username == "admin"


def test_kafka_python_token_is_accepted() -> None:
    """kafka-python sends the username as authzid too."""
    from kafka.net.sasl.plain import SaslMechanismPlain

    mechanism = SaslMechanismPlain(sasl_plain_username="alice", sasl_plain_password="alice-secret")
    server = _server()
    mechanism.receive(server.evaluate(mechanism.auth_bytes()))
    assert mechanism.is_authenticated() and server.username == "alice"


@given(
    username=st.text(st.characters(blacklist_characters="\x00"), min_size=1),
    password=st.text(st.characters(blacklist_characters="\x00"), min_size=1),
)
def test_any_username_and_password_round_trip(username: str, password: str) -> None:
    server = PlainServer({username: password}.get)
    server.evaluate(plain_token(username, password))
    assert server.username == username
    wrong = PlainServer({username: password + "x"}.get)
    with pytest.raises(SaslAuthenticationError, match="Invalid username or password"):
        wrong.evaluate(plain_token(username, password))


def test_wrong_password_and_unknown_user_are_refused_alike() -> None:
    _refused(plain_token("alice", "admin-secret"), INVALID_USERNAME_OR_PASSWORD)
    _refused(plain_token("mallory", "alice-secret"), INVALID_USERNAME_OR_PASSWORD)
    _refused(plain_token("alice", "alice-secre"), INVALID_USERNAME_OR_PASSWORD)
    _refused(plain_token("Alice", "alice-secret"), INVALID_USERNAME_OR_PASSWORD)


def test_empty_username_or_password_is_refused() -> None:
    _refused(b"\x00\x00alice-secret", "Authentication failed: username not specified")
    _refused(b"\x00alice\x00", "Authentication failed: password not specified")


@pytest.mark.parametrize(
    ("token", "count"),
    [(b"", 1), (b"alice", 1), (b"alice\x00alice-secret", 2), (b"\x00alice\x00alice\x00secret", 4)],
)
def test_token_must_have_exactly_three_parts(token: bytes, count: int) -> None:
    _refused(token, f"Invalid SASL/PLAIN response: expected 3 tokens, got {count}")


def test_token_must_be_utf8() -> None:
    _refused(b"\x00alice\x00\xff", "Invalid SASL/PLAIN response: not UTF-8")


def test_authzid_other_than_the_username_is_refused() -> None:
    _refused(
        plain_token("alice", "alice-secret", authzid="admin"),
        "Authentication failed: Client requested an authorization id that is different from username",
    )
    # With a wrong password the authzid is not looked at: the client learns nothing more.
    _refused(plain_token("alice", "wrong", authzid="admin"), INVALID_USERNAME_OR_PASSWORD)


def test_lookup_failure_is_refused_without_detail() -> None:
    def broken(username: str) -> str | None:
        raise OSError("password file alice-secret unreadable")

    error = _refused(
        plain_token("alice", "alice-secret"),
        "Authentication failed: credentials for user could not be verified",
        PlainServer(broken),
    )
    assert isinstance(error.__cause__, OSError)


def test_a_second_token_fails_a_completed_exchange() -> None:
    server = _server()
    server.evaluate(plain_token("alice", "alice-secret"))
    with pytest.raises(IllegalSaslStateError, match="Unexpected challenge in Sasl server state COMPLETE"):
        server.evaluate(plain_token("admin", "admin-secret"))
    assert not server.complete
    with pytest.raises(IllegalSaslStateError):
        _ = server.username
