"""SCRAM-SHA-256/512: the RFC 7677 exchange byte for byte, round trips, and every refusal.

The client-final messages of the refusal tests are computed here from RFC 5802's formulas with
hashlib and hmac, independently of security/scram.py, so a wrong formula there cannot pass.
"""

from __future__ import annotations

import base64
import hashlib
import hmac

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from security.errors import IllegalSaslStateError, SaslAuthenticationError
from security.scram import (
    INVALID_CREDENTIALS,
    MAX_ITERATIONS,
    ScramClient,
    ScramCredential,
    ScramMechanism,
    ScramServer,
    check_iterations,
    credential_from_password,
    credential_from_salted_password,
    escape_username,
    random_nonce,
    random_salt,
    salted_password,
    unescape_username,
)

SHA256 = ScramMechanism.SCRAM_SHA_256
SHA512 = ScramMechanism.SCRAM_SHA_512

# RFC 7677 section 3: user "user", password "pencil".
RFC_CLIENT_NONCE = "rOprNGfwEbeRWgbNEkqO"
RFC_SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
RFC_SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
RFC_CLIENT_FIRST = b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
RFC_SERVER_FIRST = b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
RFC_CLIENT_FINAL = (
    b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
    b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
)
RFC_SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="

PASSWORD = "alice-secret"


def _server(
    mechanism: ScramMechanism = SHA256, users: dict[str, ScramCredential] | None = None
) -> ScramServer:
    if users is None:
        users = {"alice": credential_from_password(mechanism, PASSWORD)}
    return ScramServer(mechanism, users.get)


def _proof_final(
    mechanism: ScramMechanism,
    password: str,
    client_first: bytes,
    server_first: bytes,
    cbind: bytes,
    nonce_prefix: bytes = b"",
) -> bytes:
    """A client-final message computed straight from RFC 5802 section 3 (``nonce_prefix`` before
    the nonce, as librdkafka up to 2.0 sends its own nonce twice)."""
    gs2_end = client_first.index(b",", client_first.index(b",") + 1) + 1
    bare = client_first[gs2_end:]
    attrs = dict(part.split(b"=", 1) for part in server_first.split(b","))
    salted = hashlib.pbkdf2_hmac(
        mechanism.hash_name, password.encode(), base64.b64decode(attrs[b"s"]), int(attrs[b"i"])
    )
    client_key = hmac.new(salted, b"Client Key", mechanism.hash_name).digest()
    stored_key = hashlib.new(mechanism.hash_name, client_key).digest()
    without_proof = b"c=" + base64.b64encode(cbind) + b",r=" + nonce_prefix + attrs[b"r"]
    auth_message = bare + b"," + server_first + b"," + without_proof
    signature = hmac.new(stored_key, auth_message, mechanism.hash_name).digest()
    proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
    return without_proof + b",p=" + base64.b64encode(proof)


def _refused(server: ScramServer, token: bytes, message: str) -> SaslAuthenticationError:
    with pytest.raises(SaslAuthenticationError) as info:
        server.evaluate(token)
    assert str(info.value) == message
    assert PASSWORD not in str(info.value)
    assert not server.complete
    with pytest.raises(IllegalSaslStateError):
        server.evaluate(token)  # a failed exchange takes no further token
    return info.value


# --- the RFC 7677 example --------------------------------------------------------------------


def test_rfc7677_exchange_byte_for_byte() -> None:
    credential = credential_from_password(SHA256, "pencil", salt=RFC_SALT, iterations=4096)
    server = ScramServer(SHA256, {"user": credential}.get, nonce=RFC_SERVER_NONCE)
    client = ScramClient(SHA256, "user", "pencil", nonce=RFC_CLIENT_NONCE)

    assert client.first_message() == RFC_CLIENT_FIRST
    assert server.evaluate(RFC_CLIENT_FIRST) == RFC_SERVER_FIRST
    assert client.evaluate(RFC_SERVER_FIRST) == RFC_CLIENT_FINAL
    assert not server.complete
    assert server.evaluate(RFC_CLIENT_FINAL) == RFC_SERVER_FINAL
    client.verify(RFC_SERVER_FINAL)
    assert server.complete and client.complete
    assert server.username == "user"


def test_rfc7677_credential_from_the_salted_password() -> None:
    salted = salted_password(SHA256, "pencil", RFC_SALT, 4096)
    assert salted == hashlib.pbkdf2_hmac("sha256", b"pencil", RFC_SALT, 4096)
    from_salted = credential_from_salted_password(SHA256, RFC_SALT, salted, 4096)
    assert from_salted == credential_from_password(SHA256, "pencil", salt=RFC_SALT)
    client_key = hmac.new(salted, b"Client Key", "sha256").digest()
    assert from_salted.stored_key == hashlib.sha256(client_key).digest()
    assert from_salted.server_key == hmac.new(salted, b"Server Key", "sha256").digest()


# --- round trips -----------------------------------------------------------------------------


def _round_trip(mechanism: ScramMechanism, username: str, password: str) -> ScramServer:
    credential = credential_from_password(mechanism, password)
    server = ScramServer(mechanism, {username: credential}.get)
    client = ScramClient(mechanism, username, password)
    server_first = server.evaluate(client.first_message())
    server_final = server.evaluate(client.evaluate(server_first))
    client.verify(server_final)
    assert server.complete and client.complete
    return server


@pytest.mark.parametrize("mechanism", list(ScramMechanism))
def test_round_trip(mechanism: ScramMechanism) -> None:
    assert _round_trip(mechanism, "alice", PASSWORD).username == "alice"


@settings(max_examples=40, deadline=None)
@given(
    mechanism=st.sampled_from(list(ScramMechanism)),
    username=st.text(st.characters(blacklist_characters="\x00"), min_size=1).flatmap(
        lambda s: st.sampled_from([s, f"{s},=", f"={s}=2C", f"a,{s}=3D"])
    ),
    password=st.text(),
)
def test_round_trip_any_username_and_password(
    mechanism: ScramMechanism, username: str, password: str
) -> None:
    assert _round_trip(mechanism, username, password).username == username


@given(st.text(st.characters(blacklist_characters="\x00")))
def test_username_escaping_round_trips(username: str) -> None:
    escaped = escape_username(username)
    assert "," not in escaped
    assert unescape_username(escaped) == username


def test_username_escaping_matches_rfc5802() -> None:
    assert escape_username("a,b=c") == "a=2Cb=3Dc"
    assert unescape_username("=3D2C") == "=2C"
    for bad in ("a=", "a=2", "a=2D", "a,b", "a\x00"):
        with pytest.raises(ValueError):
            unescape_username(bad)


@pytest.mark.parametrize("mechanism", list(ScramMechanism))
def test_kafka_python_client_authenticates(mechanism: ScramMechanism) -> None:
    """kafka-python's SCRAM client (a test-only oracle) against this server."""
    from kafka.net.sasl.scram import ScramClient as KafkaPythonScramClient

    server = _server(mechanism)
    client = KafkaPythonScramClient("alice", PASSWORD, mechanism.mechanism_name)
    client.process_server_first_message(server.evaluate(client.first_message()))
    client.process_server_final_message(server.evaluate(client.final_message()))
    assert server.complete and server.username == "alice"

    wrong = KafkaPythonScramClient("alice", "not-it", mechanism.mechanism_name)
    server = _server(mechanism)
    wrong.process_server_first_message(server.evaluate(wrong.first_message()))
    _refused(server, wrong.final_message(), INVALID_CREDENTIALS)


# --- refusals by the server ------------------------------------------------------------------


def test_wrong_password_and_unknown_user_are_refused_alike() -> None:
    server = _server()
    client = ScramClient(SHA256, "alice", "wrong")
    final = client.evaluate(server.evaluate(client.first_message()))
    _refused(server, final, INVALID_CREDENTIALS)

    # An unknown user gets a server-first too (a salt derived from the name) and fails at the
    # proof, with the same message, so the step that fails does not tell the two apart.
    server = _server()
    client = ScramClient(SHA256, "mallory", PASSWORD)
    server_first = server.evaluate(client.first_message())
    final = client.evaluate(server_first)
    _refused(server, final, INVALID_CREDENTIALS)

    again = _server()
    second_first = again.evaluate(ScramClient(SHA256, "mallory", PASSWORD).first_message())
    assert _salt_of(second_first) == _salt_of(server_first)  # the same salt each time for a name
    other = _server().evaluate(ScramClient(SHA256, "trudy", PASSWORD).first_message())
    assert _salt_of(other) != _salt_of(server_first)


def _salt_of(server_first: bytes) -> bytes:
    return server_first.split(b",")[1]


def test_a_proof_for_the_unknown_users_mock_salt_is_still_refused() -> None:
    server = _server()
    first = b"n,,n=mallory,r=abc"
    server_first = server.evaluate(first)
    _refused(server, _proof_final(SHA256, "", first, server_first, b"n,,"), INVALID_CREDENTIALS)


def test_nonce_mismatch_is_refused() -> None:
    server = _server()
    client = ScramClient(SHA256, "alice", PASSWORD, nonce="clientnonce")
    server_first = server.evaluate(client.first_message())
    final = client.evaluate(server_first).replace(b"r=clientnonce", b"r=clientnonce-x")
    _refused(server, final, "Invalid client nonce in the final client message.")


def test_a_final_nonce_that_ends_with_the_servers_is_accepted_as_kafka_does() -> None:
    """librdkafka 2.0 (Debian's kcat) repeats its nonce in front: Kafka checks endsWith."""
    server = _server()
    first = b"n,,n=alice,r=clientnonce"
    server_first = server.evaluate(first)
    final = _proof_final(SHA256, PASSWORD, first, server_first, b"n,,", nonce_prefix=b"clientnonce")
    assert final.startswith(b"c=biws,r=clientnonceclientnonce")
    assert server.evaluate(final).startswith(b"v=")
    assert server.complete and server.username == "alice"


@pytest.mark.parametrize("header", [b"y,,", b"p=tls-unique,,", b"p=tls-server-end-point,a=alice,"])
def test_channel_binding_is_refused(header: bytes) -> None:
    _refused(
        _server(),
        header + b"n=alice,r=abc",
        "Invalid SCRAM client first message: channel binding is not supported (the gs2 header must be 'n')",
    )


def test_final_channel_binding_must_repeat_the_gs2_header() -> None:
    server = _server()
    first = b"n,,n=alice,r=abc"
    server_first = server.evaluate(first)
    _refused(
        server,
        _proof_final(SHA256, PASSWORD, first, server_first, b"y,,"),
        "Invalid SCRAM client final message: channel binding does not match the gs2 header",
    )


def test_authzid_equal_to_the_username_is_accepted() -> None:
    server = _server()
    first = b"n,a=alice,n=alice,r=abc"
    server_first = server.evaluate(first)
    server.evaluate(_proof_final(SHA256, PASSWORD, first, server_first, b"n,a=alice,"))
    assert server.complete and server.username == "alice"


def test_escaped_authzid_is_compared_unescaped() -> None:
    users = {"a,b": credential_from_password(SHA256, PASSWORD)}
    server = _server(users=users)
    first = b"n,a=a=2Cb,n=a=2Cb,r=abc"
    server_first = server.evaluate(first)
    server.evaluate(_proof_final(SHA256, PASSWORD, first, server_first, b"n,a=a=2Cb,"))
    assert server.username == "a,b"


def test_authzid_other_than_the_username_is_refused() -> None:
    message = "Authentication failed: Client requested an authorization id that is different from username"
    _refused(_server(), b"n,a=admin,n=alice,r=abc", message)
    _refused(_server(), b"n,a=admin,n=mallory,r=abc", message)  # the same for an unknown user


def test_tokenauth_is_refused_and_other_extensions_are_ignored() -> None:
    _refused(
        _server(),
        b"n,,n=alice,r=abc,tokenauth=true",
        "Authentication failed: delegation token authentication (tokenauth) is not supported",
    )
    _refused(
        _server(),
        b"n,,n=alice,r=abc,tokenauth=TRUE",
        "Authentication failed: delegation token authentication (tokenauth) is not supported",
    )
    server = _server()
    first = b"n,,n=alice,r=abc,tokenauth=false,foo=bar"
    server_first = server.evaluate(first)
    server.evaluate(_proof_final(SHA256, PASSWORD, first, server_first, b"n,,"))
    assert server.complete


def test_mandatory_extension_is_refused() -> None:
    _refused(
        _server(),
        b"n,,m=ext,n=alice,r=abc",
        "Invalid SCRAM client first message: mandatory extensions are not supported",
    )


def test_credential_below_the_minimum_iterations_is_refused() -> None:
    weak = credential_from_password(SHA256, PASSWORD, iterations=4095)
    _refused(_server(users={"alice": weak}), b"n,,n=alice,r=abc", INVALID_CREDENTIALS)


def test_credential_lookup_failure_is_refused_without_detail() -> None:
    def broken(username: str) -> ScramCredential | None:
        raise RuntimeError(f"database down, password of {username} is {PASSWORD}")

    error = _refused(
        ScramServer(SHA256, broken),
        b"n,,n=alice,r=abc",
        "Authentication failed: Credentials could not be obtained",
    )
    assert isinstance(error.__cause__, RuntimeError)  # kept for the broker's log


@pytest.mark.parametrize(
    "first",
    [
        b"\xff,,n=alice,r=abc",
        b"n,,n=alice",
        b"n,n=alice,r=abc",
        b"x,,n=alice,r=abc",
        b"n,x=alice,n=alice,r=abc",
        b"n,a=,n=alice,r=abc",
        b"n,,n=,r=abc",
        b"n,,r=abc,n=alice",
        b"n,,n=al=2Dice,r=abc",
        b"n,,n=al\x00ice,r=abc",
        b"n,,n=alice,r=",
        b"n,,n=alice,r=a\xc3\xa9",
        b"n,,n=alice,r=abc,1x=y",
        b"n,,n=alice,r=abc,noequals",
        b"",
    ],
)
def test_malformed_client_first_is_refused(first: bytes) -> None:
    with pytest.raises(SaslAuthenticationError) as info:
        _server().evaluate(first)
    assert str(info.value).startswith("Invalid SCRAM client first message format")


@pytest.mark.parametrize(
    "mangle",
    [
        lambda final: final.replace(b",p=", b",x="),
        lambda final: final.replace(b"c=biws,", b""),
        lambda final: final.replace(b"c=biws", b"c=b!ws"),
        lambda final: final[: final.index(b",p=") + 4] + b"*" + final[final.index(b",p=") + 5 :],
        lambda final: final + b",x=1",
        lambda final: b"\xff" + final,
        lambda final: b"",
    ],
)
def test_malformed_client_final_is_refused(mangle: object) -> None:
    server = _server()
    client = ScramClient(SHA256, "alice", PASSWORD)
    final = client.evaluate(server.evaluate(client.first_message()))
    with pytest.raises(SaslAuthenticationError) as info:
        server.evaluate(mangle(final))  # type: ignore[operator]
    assert str(info.value).startswith("Invalid SCRAM client final message format")
    assert not server.complete


def test_proof_of_the_wrong_length_is_invalid_credentials() -> None:
    credential = credential_from_password(SHA256, PASSWORD)
    server = ScramServer(SHA256, {"alice": credential}.get, nonce="s1")
    server.evaluate(b"n,,n=alice,r=c1")
    _refused(server, b"c=biws,r=c1s1,p=" + base64.b64encode(b"x" * 16), INVALID_CREDENTIALS)


def test_extensions_in_the_final_message_are_part_of_the_auth_message() -> None:
    """RFC 5802: client-final-message-without-proof includes extensions; the proof covers them."""
    server = _server()
    first = b"n,,n=alice,r=abc"
    server_first = server.evaluate(first)
    final = _proof_final(SHA256, PASSWORD, first, server_first, b"n,,")
    final_with_extension = final.replace(b",p=", b",x=1,p=")  # proof made without x=1
    _refused(server, final_with_extension, INVALID_CREDENTIALS)


def test_server_state_machine() -> None:
    server = _server()
    with pytest.raises(IllegalSaslStateError):
        _ = server.username
    client = ScramClient(SHA256, "alice", PASSWORD)
    server_first = server.evaluate(client.first_message())
    with pytest.raises(IllegalSaslStateError):
        _ = server.username
    client.verify(server.evaluate(client.evaluate(server_first)))
    assert server.complete and server.username == "alice"
    with pytest.raises(IllegalSaslStateError, match="Unexpected challenge in Sasl server state COMPLETE"):
        server.evaluate(b"n,,n=alice,r=abc")
    assert not server.complete  # as Kafka: a token after completion fails the exchange


def test_server_nonce_must_be_printable() -> None:
    with pytest.raises(ValueError):
        ScramServer(SHA256, lambda username: None, nonce="a,b")


# --- refusals by the client ------------------------------------------------------------------


def _client_after_first(nonce: str = "cn") -> ScramClient:
    client = ScramClient(SHA256, "alice", PASSWORD, nonce=nonce)
    client.first_message()
    return client


@pytest.mark.parametrize(
    ("server_first", "message"),
    [
        (b"r=other,s=c2FsdA==,i=4096", "Invalid server nonce: does not start with client nonce"),
        (
            b"r=cnsn,s=c2FsdA==,i=4095",
            "Requested iterations 4095 is less than the minimum 4096 for SCRAM-SHA-256",
        ),
        (
            b"r=cnsn,s=c2FsdA==,i=2000000000",  # would stall the client's event loop for minutes
            "Requested iterations 2000000000 is more than the maximum 16384",
        ),
        (b"r=cnsn,s=c2FsdA=,i=4096", "Invalid SCRAM server first message format"),
        (b"r=cnsn,s=c2FsdA==,i=4k", "Invalid SCRAM server first message format"),
        (b"r=cnsn,i=4096,s=c2FsdA==", "Invalid SCRAM server first message format"),
        (b"r=cnsn,s=c2FsdA==", "Invalid SCRAM server first message format"),
        (
            b"m=x,r=cnsn,s=c2FsdA==,i=4096",
            "Invalid SCRAM server first message: mandatory extensions are not supported",
        ),
        (b"\xff", "Invalid SCRAM server first message format: not UTF-8"),
    ],
)
def test_client_refuses_a_bad_server_first(server_first: bytes, message: str) -> None:
    client = _client_after_first()
    with pytest.raises(SaslAuthenticationError) as info:
        client.evaluate(server_first)
    assert str(info.value) == message
    with pytest.raises(IllegalSaslStateError):
        client.evaluate(server_first)


def test_client_accepts_server_first_extensions() -> None:
    client = _client_after_first()
    assert client.evaluate(b"r=cnsn,s=c2FsdA==,i=4096,x=y").startswith(b"c=biws,r=cnsn,p=")


@pytest.mark.parametrize(
    ("server_final", "message"),
    [
        (b"e=invalid-proof", "Sasl authentication using SCRAM-SHA-256 failed with error: invalid-proof"),
        (b"v=" + base64.b64encode(b"\x00" * 32), "Invalid server signature in server final message"),
        (b"v=!!", "Invalid SCRAM server final message format"),
        (b"x=1", "Invalid SCRAM server final message format"),
    ],
)
def test_client_refuses_a_bad_server_final(server_final: bytes, message: str) -> None:
    server = _server()
    client = ScramClient(SHA256, "alice", PASSWORD)
    server.evaluate(client.evaluate(server.evaluate(client.first_message())))
    with pytest.raises(SaslAuthenticationError) as info:
        client.verify(server_final)
    assert str(info.value) == message
    assert not client.complete


def test_client_state_machine() -> None:
    client = ScramClient(SHA256, "alice", PASSWORD)
    with pytest.raises(IllegalSaslStateError):
        client.evaluate(b"r=x,s=c2FsdA==,i=4096")
    with pytest.raises(IllegalSaslStateError):
        client.verify(b"v=x")
    client.first_message()
    with pytest.raises(IllegalSaslStateError):
        client.first_message()
    with pytest.raises(ValueError):
        ScramClient(SHA256, "al\x00ice", PASSWORD)


# --- mechanisms and credentials --------------------------------------------------------------


def test_mechanism_properties() -> None:
    assert (SHA256.type_id, SHA256.mechanism_name, SHA256.hash_name) == (1, "SCRAM-SHA-256", "sha256")
    assert (SHA512.type_id, SHA512.mechanism_name, SHA512.hash_name) == (2, "SCRAM-SHA-512", "sha512")
    assert SHA256.min_iterations == SHA512.min_iterations == 4096
    assert (SHA256.digest_size, SHA512.digest_size) == (32, 64)
    assert ScramMechanism.from_name("SCRAM-SHA-512") is SHA512
    assert ScramMechanism.from_type(1) is SHA256
    with pytest.raises(ValueError, match="Unsupported SCRAM mechanism 'SCRAM-SHA-1'"):
        ScramMechanism.from_name("SCRAM-SHA-1")
    with pytest.raises(ValueError, match="Unknown SCRAM mechanism type 0"):
        ScramMechanism.from_type(0)


def test_check_iterations_uses_kafkas_messages() -> None:
    check_iterations(SHA256, 4096)
    check_iterations(SHA512, MAX_ITERATIONS)
    with pytest.raises(ValueError, match=r"^Too few iterations$"):
        check_iterations(SHA256, 4095)
    with pytest.raises(ValueError, match=r"^Too many iterations$"):
        check_iterations(SHA256, MAX_ITERATIONS + 1)


def test_salt_and_nonce_take_kafkas_form() -> None:
    alphabet = set("0123456789abcdefghijklmnopqrstuvwxyz")
    for _ in range(50):
        salt = random_salt()
        assert 1 <= len(salt) <= 26 and set(salt.decode()) <= alphabet
        assert set(random_nonce()) <= alphabet
    credential = credential_from_password(SHA512, PASSWORD)
    assert len(credential.salt) <= 26
    assert len(credential.stored_key) == len(credential.server_key) == 64
    assert credential.iterations == 4096
    assert credential_from_password(SHA512, PASSWORD).salt != credential.salt


def test_credential_repr_hides_the_keys() -> None:
    credential = credential_from_password(SHA256, PASSWORD)
    text = repr(credential)
    assert "stored_key" not in text and "server_key" not in text
    assert repr(credential.stored_key) not in text
    with pytest.raises(ValueError):
        salted_password(SHA256, PASSWORD, b"salt", 0)
