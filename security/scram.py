"""SASL/SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677) as Kafka speaks them.

Both sides are sans-IO state machines: the broker feeds :class:`ScramServer` the tokens of each
SaslAuthenticate request and answers with what ``evaluate`` returns; kipling's client does the same
with :class:`ScramClient`. The credential helpers compute what Kafka stores for a user
(``UserScramCredentialRecord``: salt, StoredKey, ServerKey, iterations), so a credential made here
authenticates a Java client and the other way round.

Kafka's choices, kept here:

* no SASLprep: a password is hashed as its UTF-8 bytes (Kafka's ``ScramFormatter.normalize``);
* only the gs2 header ``n`` (no channel binding); an authzid, if sent, must equal the username;
* the extension ``tokenauth`` selects delegation-token authentication, which kipling does not
  implement, so ``tokenauth=true`` is refused; other extensions are ignored, as Kafka ignores them;
* a credential below the mechanism's 4096 iterations is refused;
* salts and nonces are a random 130-bit number written in base 36 (``ScramFormatter``'s
  ``secureRandomString``, and the salt ``UserScramCredentialUpsertion`` generates).

Where Kafka is looser than the RFC, this follows the RFC: the AuthMessage is built from the bytes
the client sent (Kafka rebuilds it from parsed fields), the final message's channel binding must
repeat the gs2 header, a mandatory extension (``m=``) fails the exchange, and usernames may be any
UTF-8 (Kafka's parser takes ASCII only). An unknown user is not refused at once: the server answers
with a salt derived from the name and refuses the proof, so a client cannot tell an unknown user
from a wrong password by the step that fails (RFC 5802 section 5.1 suggests this; Kafka refuses
at the first message).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum, auto

import structlog

from security.errors import IllegalSaslStateError, SaslAuthenticationError

_log = structlog.get_logger("kipling.security.scram")

MAX_ITERATIONS = 16384
"""The most iterations AlterUserScramCredentials accepts (Kafka's ScramControlManager)."""

TOKEN_AUTH_EXTENSION = "tokenauth"
"""The one SCRAM extension Kafka acts on: the username is a delegation token id."""

INVALID_CREDENTIALS = "Authentication failed: Invalid user credentials"
"""What a client is told for an unknown user and for a wrong password alike."""

_GS2_HEADER = "n,,"


class ScramMechanism(Enum):
    """A SCRAM mechanism; the value is the type byte Kafka stores and sends for it."""

    SCRAM_SHA_256 = 1
    SCRAM_SHA_512 = 2

    @property
    def type_id(self) -> int:
        """Kafka's mechanism byte (``UserScramCredentialRecord.mechanism``, DescribeUserScram...)."""
        return self.value

    @property
    def mechanism_name(self) -> str:
        """The SASL mechanism name, as in SaslHandshake and ``sasl.enabled.mechanisms``."""
        return self.name.replace("_", "-")

    @property
    def hash_name(self) -> str:
        """The :mod:`hashlib` name of the hash function."""
        return "sha256" if self is ScramMechanism.SCRAM_SHA_256 else "sha512"

    @property
    def digest_size(self) -> int:
        """Bytes in a key, a signature and a proof."""
        return 32 if self is ScramMechanism.SCRAM_SHA_256 else 64

    @property
    def min_iterations(self) -> int:
        """The fewest iterations a credential may have (RFC 7677 asks for at least 4096)."""
        return 4096

    @classmethod
    def from_name(cls, name: str) -> ScramMechanism:
        """The mechanism called ``name`` ("SCRAM-SHA-256"); ValueError for any other name."""
        for mechanism in cls:
            if mechanism.mechanism_name == name:
                return mechanism
        raise ValueError(f"Unsupported SCRAM mechanism {name!r}: supported are {_names()}")

    @classmethod
    def from_type(cls, type_id: int) -> ScramMechanism:
        """The mechanism with Kafka's type byte ``type_id``; ValueError for an unknown byte."""
        for mechanism in cls:
            if mechanism.value == type_id:
                return mechanism
        raise ValueError(f"Unknown SCRAM mechanism type {type_id}: supported are {_names()}")


def _names() -> str:
    return ", ".join(f"{m.mechanism_name} ({m.type_id})" for m in ScramMechanism)


@dataclass(frozen=True, slots=True)
class ScramCredential:
    """What the broker stores for a user and mechanism: enough to verify, not to impersonate.

    StoredKey and ServerKey stay out of ``repr``: with a captured exchange they let an attacker
    authenticate, so they never reach a log line.
    """

    salt: bytes
    stored_key: bytes = field(repr=False)
    server_key: bytes = field(repr=False)
    iterations: int


def check_iterations(mechanism: ScramMechanism, iterations: int) -> None:
    """Refuse an iteration count AlterUserScramCredentials would refuse, with Kafka's message."""
    if iterations < mechanism.min_iterations:
        raise ValueError("Too few iterations")
    if iterations > MAX_ITERATIONS:
        raise ValueError("Too many iterations")


def random_nonce() -> str:
    """A fresh nonce in Kafka's form: a random 130-bit number in base 36 (at most 26 characters)."""
    return _base36(secrets.randbits(130))


def random_salt() -> bytes:
    """A fresh salt in Kafka's form: the ASCII of :func:`random_nonce`, as Kafka's tools make it."""
    return random_nonce().encode("ascii")


def _base36(number: int) -> str:
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    if number == 0:
        return "0"
    out = []
    while number:
        number, digit = divmod(number, 36)
        out.append(digits[digit])
    return "".join(reversed(out))


def salted_password(mechanism: ScramMechanism, password: str, salt: bytes, iterations: int) -> bytes:
    """SaltedPassword = Hi(password, salt, i), which is PBKDF2 with HMAC of the mechanism's hash."""
    if iterations < 1:
        raise ValueError(f"iterations must be positive, got {iterations}")
    return hashlib.pbkdf2_hmac(mechanism.hash_name, password.encode("utf-8"), salt, iterations)


def credential_from_salted_password(
    mechanism: ScramMechanism, salt: bytes, salted: bytes, iterations: int
) -> ScramCredential:
    """The stored credential for a salted password.

    AlterUserScramCredentials carries the salted password, never the password, so the controller
    derives the stored keys with this.
    """
    client_key = _hmac(mechanism, salted, b"Client Key")
    return ScramCredential(
        salt=salt,
        stored_key=hashlib.new(mechanism.hash_name, client_key).digest(),
        server_key=_hmac(mechanism, salted, b"Server Key"),
        iterations=iterations,
    )


def credential_from_password(
    mechanism: ScramMechanism, password: str, *, iterations: int = 4096, salt: bytes | None = None
) -> ScramCredential:
    """The stored credential for ``password``, with a fresh Kafka-style salt unless one is given."""
    if salt is None:
        salt = random_salt()
    salted = salted_password(mechanism, password, salt, iterations)
    return credential_from_salted_password(mechanism, salt, salted, iterations)


def escape_username(username: str) -> str:
    """RFC 5802's saslname: ``=`` becomes ``=3D`` and ``,`` becomes ``=2C``."""
    return username.replace("=", "=3D").replace(",", "=2C")


def unescape_username(saslname: str) -> str:
    """The username a saslname stands for; ValueError for an ``=`` not starting ``=2C``/``=3D``."""
    out = []
    i = 0
    while i < len(saslname):
        char = saslname[i]
        if char == "=":
            code = saslname[i + 1 : i + 3]
            if code == "2C":
                out.append(",")
            elif code == "3D":
                out.append("=")
            else:
                raise ValueError("an '=' in a saslname must start =2C or =3D")
            i += 3
            continue
        if char in ",\x00":
            raise ValueError("a saslname may not contain ',' or NUL")
        out.append(char)
        i += 1
    return "".join(out)


def _hmac(mechanism: ScramMechanism, key: bytes, message: bytes) -> bytes:
    return hmac.new(key, message, mechanism.hash_name).digest()


def _xor(left: bytes, right: bytes) -> bytes:
    return bytes(a ^ b for a, b in zip(left, right, strict=True))


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(text: str) -> bytes:
    """Strict base64: ValueError for characters outside the alphabet or bad padding."""
    try:
        return base64.b64decode(text.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError) as e:
        raise ValueError("invalid base64") from e


def _is_printable(text: str) -> bool:
    """RFC 5802's ``printable``: ASCII 0x21-0x7E except ','; what a nonce is made of."""
    return bool(text) and all("\x21" <= c <= "\x7e" and c != "," for c in text)


def _decode(token: bytes, what: str) -> str:
    try:
        return token.decode("utf-8")
    except UnicodeDecodeError:
        raise SaslAuthenticationError(f"Invalid SCRAM {what} format: not UTF-8") from None


def _attributes(parts: list[str], what: str) -> list[tuple[str, str]]:
    """``a=value`` pairs; a mandatory extension (``m=``) fails the exchange (RFC 5802 5.1)."""
    pairs = []
    for part in parts:
        name, sep, value = part.partition("=")
        if not sep or not name.isascii() or not name.isalpha():
            raise SaslAuthenticationError(f"Invalid SCRAM {what} format")
        pairs.append((name, value))
    if pairs and pairs[0][0] == "m":
        raise SaslAuthenticationError(f"Invalid SCRAM {what}: mandatory extensions are not supported")
    return pairs


@dataclass(frozen=True, slots=True)
class _ClientFirst:
    gs2_header: str
    authzid: str
    username: str
    nonce: str
    bare: str
    extensions: dict[str, str]


def _parse_client_first(token: bytes) -> _ClientFirst:
    what = "client first message"
    text = _decode(token, what)
    parts = text.split(",")
    if len(parts) < 4:
        raise SaslAuthenticationError(f"Invalid SCRAM {what} format")
    cbind_flag, authz = parts[0], parts[1]
    if cbind_flag == "y" or cbind_flag.startswith("p="):
        raise SaslAuthenticationError(
            f"Invalid SCRAM {what}: channel binding is not supported (the gs2 header must be 'n')"
        )
    if cbind_flag != "n":
        raise SaslAuthenticationError(f"Invalid SCRAM {what} format")
    attributes = _attributes(parts[2:], what)
    try:
        authzid = ""
        if authz:
            if not authz.startswith("a=") or len(authz) == 2:
                raise ValueError("bad authzid")
            authzid = unescape_username(authz[2:])
        (n, saslname), (r, nonce), *extensions = attributes
        if n != "n" or r != "r" or not saslname:
            raise ValueError("expected n= and r=")
        username = unescape_username(saslname)
    except ValueError:
        raise SaslAuthenticationError(f"Invalid SCRAM {what} format") from None
    if not _is_printable(nonce):
        raise SaslAuthenticationError(f"Invalid SCRAM {what} format")
    return _ClientFirst(
        gs2_header=f"n,{authz},",
        authzid=authzid,
        username=username,
        nonce=nonce,
        bare=",".join(parts[2:]),
        extensions=dict(extensions),
    )


@dataclass(frozen=True, slots=True)
class _ClientFinal:
    channel_binding: bytes
    nonce: str
    proof: bytes
    without_proof: str


def _parse_client_final(token: bytes) -> _ClientFinal:
    what = "client final message"
    text = _decode(token, what)
    parts = text.split(",")
    attributes = _attributes(parts, what)
    if len(attributes) < 3 or attributes[0][0] != "c" or attributes[1][0] != "r":
        raise SaslAuthenticationError(f"Invalid SCRAM {what} format")
    if attributes[-1][0] != "p":
        raise SaslAuthenticationError(f"Invalid SCRAM {what} format")
    try:
        channel_binding = _unb64(attributes[0][1])
        proof = _unb64(attributes[-1][1])
    except ValueError:
        raise SaslAuthenticationError(f"Invalid SCRAM {what} format") from None
    return _ClientFinal(
        channel_binding=channel_binding,
        nonce=attributes[1][1],
        proof=proof,
        without_proof=",".join(parts[:-1]),
    )


class _State(Enum):
    RECEIVE_CLIENT_FIRST_MESSAGE = auto()
    RECEIVE_CLIENT_FINAL_MESSAGE = auto()
    COMPLETE = auto()
    FAILED = auto()


_MOCK_KEY = secrets.token_bytes(32)
"""Derives the salt shown for an unknown user: stable per name within a process, unguessable."""


def _mock_credential(mechanism: ScramMechanism, username: str) -> ScramCredential:
    """A credential no password matches, with a salt that is the same each time for ``username``.

    A fresh random salt per attempt would tell a client that asks twice that the user is unknown.
    """
    digest = hmac.new(_MOCK_KEY, f"{mechanism.mechanism_name}:{username}".encode(), "sha256").digest()
    salt = _base36(int.from_bytes(digest[:17]) >> 6).encode("ascii")  # 130 bits, like a real one
    return ScramCredential(
        salt=salt,
        stored_key=secrets.token_bytes(mechanism.digest_size),
        server_key=secrets.token_bytes(mechanism.digest_size),
        iterations=mechanism.min_iterations,
    )


class ScramServer:
    """The broker's side of one SCRAM exchange (Kafka's ScramSaslServer).

    ``evaluate`` takes the client-first message and returns the server-first, then takes the
    client-final and returns the server-final; the exchange is then ``complete`` and ``username``
    is the authenticated user. Any refusal raises :class:`SaslAuthenticationError` and leaves the
    exchange failed; a further token raises :class:`IllegalSaslStateError`.
    """

    def __init__(
        self,
        mechanism: ScramMechanism,
        lookup: Callable[[str], ScramCredential | None],
        *,
        nonce: str | None = None,
    ) -> None:
        """``lookup`` gives a user's credential for this mechanism, or None for an unknown user.

        ``nonce`` fixes the server's part of the nonce (tests reproduce RFC 7677 with it); it
        defaults to a fresh :func:`random_nonce`.
        """
        if nonce is not None and not _is_printable(nonce):
            raise ValueError("a SCRAM nonce is printable ASCII without ','")
        self.mechanism = mechanism
        self._lookup = lookup
        self._server_nonce = nonce if nonce is not None else random_nonce()
        self._state = _State.RECEIVE_CLIENT_FIRST_MESSAGE
        self._client_first: _ClientFirst | None = None
        self._server_first = ""
        self._credential: ScramCredential | None = None
        self._username: str | None = None

    @property
    def complete(self) -> bool:
        """Whether the client proved its password (and was sent the server's signature)."""
        return self._state is _State.COMPLETE

    @property
    def username(self) -> str:
        """The authenticated user; IllegalSaslStateError until the exchange has completed."""
        if self._state is not _State.COMPLETE or self._username is None:
            raise IllegalSaslStateError("Authentication exchange has not completed")
        return self._username

    def evaluate(self, token: bytes) -> bytes:
        """The response to the client's next message; raises when the exchange is refused."""
        try:
            if self._state is _State.RECEIVE_CLIENT_FIRST_MESSAGE:
                return self._receive_client_first(token)
            if self._state is _State.RECEIVE_CLIENT_FINAL_MESSAGE:
                return self._receive_client_final(token)
            raise IllegalSaslStateError(f"Unexpected challenge in Sasl server state {self._state.name}")
        except BaseException:
            # As Kafka: any refusal, even of a token after completion, ends the exchange failed.
            self._state = _State.FAILED
            self._clear()
            raise

    def _receive_client_first(self, token: bytes) -> bytes:
        first = _parse_client_first(token)
        if first.extensions.get(TOKEN_AUTH_EXTENSION, "").lower() == "true":
            raise SaslAuthenticationError(
                "Authentication failed: delegation token authentication (tokenauth) is not supported"
            )
        ignored = sorted(set(first.extensions) - {TOKEN_AUTH_EXTENSION})
        if ignored:
            _log.debug("scram_extensions_ignored", mechanism=self.mechanism.mechanism_name, names=ignored)
        # Checked before the lookup, so that the answer does not depend on whether the user exists.
        if first.authzid and first.authzid != first.username:
            raise SaslAuthenticationError(
                "Authentication failed: Client requested an authorization id that is different from username"
            )
        try:
            credential = self._lookup(first.username)
        except Exception as e:
            raise SaslAuthenticationError("Authentication failed: Credentials could not be obtained") from e
        if credential is None:
            credential = _mock_credential(self.mechanism, first.username)
            self._username = None
        else:
            self._username = first.username
        if credential.iterations < self.mechanism.min_iterations:
            _log.warning(
                "scram_credential_below_minimum_iterations",
                mechanism=self.mechanism.mechanism_name,
                user=first.username,
                iterations=credential.iterations,
                minimum=self.mechanism.min_iterations,
            )
            raise SaslAuthenticationError(INVALID_CREDENTIALS)
        self._client_first = first
        self._credential = credential
        self._server_first = (
            f"r={first.nonce}{self._server_nonce},s={_b64(credential.salt)},i={credential.iterations}"
        )
        self._state = _State.RECEIVE_CLIENT_FINAL_MESSAGE
        return self._server_first.encode("ascii")

    def _receive_client_final(self, token: bytes) -> bytes:
        first, credential = self._client_first, self._credential
        assert first is not None and credential is not None
        final = _parse_client_final(token)
        if final.channel_binding != first.gs2_header.encode("utf-8"):
            raise SaslAuthenticationError(
                "Invalid SCRAM client final message: channel binding does not match the gs2 header"
            )
        # Kafka's rule (ScramSaslServer): the final nonce must END with the server-first nonce. It
        # is laxer than RFC 5802's equality on purpose: librdkafka up to 2.0 sends its own nonce
        # again in front of it (Debian's kcat does), and Kafka accepts that; the proof still
        # covers the message as sent, so nothing is weakened.
        if not final.nonce.endswith(first.nonce + self._server_nonce):
            raise SaslAuthenticationError("Invalid client nonce in the final client message.")
        auth_message = f"{first.bare},{self._server_first},{final.without_proof}".encode()
        client_signature = _hmac(self.mechanism, credential.stored_key, auth_message)
        if len(final.proof) != len(client_signature):
            raise SaslAuthenticationError(INVALID_CREDENTIALS)
        client_key = _xor(final.proof, client_signature)
        computed_stored_key = hashlib.new(self.mechanism.hash_name, client_key).digest()
        if not hmac.compare_digest(computed_stored_key, credential.stored_key) or self._username is None:
            raise SaslAuthenticationError(INVALID_CREDENTIALS)
        server_signature = _hmac(self.mechanism, credential.server_key, auth_message)
        self._state = _State.COMPLETE
        self._credential = None
        self._client_first = None
        return f"v={_b64(server_signature)}".encode("ascii")

    def _clear(self) -> None:
        """Forget the credential, the messages and the user once the exchange has failed, as Kafka does."""
        self._credential = None
        self._client_first = None
        self._username = None


class _ClientState(Enum):
    SEND_CLIENT_FIRST_MESSAGE = auto()
    RECEIVE_SERVER_FIRST_MESSAGE = auto()
    RECEIVE_SERVER_FINAL_MESSAGE = auto()
    COMPLETE = auto()
    FAILED = auto()


class ScramClient:
    """The client's side of one SCRAM exchange (Kafka's ScramSaslClient).

    ``first_message`` starts it; ``evaluate`` answers the server-first with the client-final;
    ``verify`` checks the server-final, which proves the server knew the credential too.
    """

    def __init__(
        self, mechanism: ScramMechanism, username: str, password: str, *, nonce: str | None = None
    ) -> None:
        """``nonce`` fixes the client nonce (for tests); it defaults to a fresh one."""
        if "\x00" in username:
            raise ValueError("a SCRAM username may not contain NUL")
        if nonce is not None and not _is_printable(nonce):
            raise ValueError("a SCRAM nonce is printable ASCII without ','")
        self.mechanism = mechanism
        self.username = username
        self._password = password
        self._nonce = nonce if nonce is not None else random_nonce()
        self._state = _ClientState.SEND_CLIENT_FIRST_MESSAGE
        self._bare = f"n={escape_username(username)},r={self._nonce}"
        self._expected_server_signature = b""

    @property
    def complete(self) -> bool:
        """Whether the server's signature has been verified."""
        return self._state is _ClientState.COMPLETE

    def first_message(self) -> bytes:
        """The client-first message: gs2 header ``n,,`` and the escaped username and nonce."""
        self._expect(_ClientState.SEND_CLIENT_FIRST_MESSAGE)
        self._state = _ClientState.RECEIVE_SERVER_FIRST_MESSAGE
        return (_GS2_HEADER + self._bare).encode("utf-8")

    def evaluate(self, server_first: bytes) -> bytes:
        """The client-final message (with the proof) answering ``server_first``."""
        self._expect(_ClientState.RECEIVE_SERVER_FIRST_MESSAGE)
        try:
            return self._client_final(server_first)
        except BaseException:
            self._state = _ClientState.FAILED
            raise

    def verify(self, server_final: bytes) -> None:
        """Check the server-final message; SaslAuthenticationError for an error or bad signature."""
        self._expect(_ClientState.RECEIVE_SERVER_FINAL_MESSAGE)
        self._state = _ClientState.FAILED
        what = "server final message"
        (name, value), *_ = _attributes(_decode(server_final, what).split(","), what)
        if name == "e":
            raise SaslAuthenticationError(
                f"Sasl authentication using {self.mechanism.mechanism_name} failed with error: {value}"
            )
        if name != "v":
            raise SaslAuthenticationError(f"Invalid SCRAM {what} format")
        try:
            signature = _unb64(value)
        except ValueError:
            raise SaslAuthenticationError(f"Invalid SCRAM {what} format") from None
        if not hmac.compare_digest(signature, self._expected_server_signature):
            raise SaslAuthenticationError("Invalid server signature in server final message")
        self._state = _ClientState.COMPLETE

    def _client_final(self, server_first: bytes) -> bytes:
        what = "server first message"
        text = _decode(server_first, what)
        attributes = _attributes(text.split(","), what)
        if len(attributes) < 3 or [name for name, _ in attributes[:3]] != ["r", "s", "i"]:
            raise SaslAuthenticationError(f"Invalid SCRAM {what} format")
        nonce, salt_text, iterations_text = (value for _, value in attributes[:3])
        if not _is_printable(nonce) or not nonce.startswith(self._nonce):
            raise SaslAuthenticationError("Invalid server nonce: does not start with client nonce")
        try:
            salt = _unb64(salt_text)
            if not iterations_text.isascii() or not iterations_text.isdigit():
                raise ValueError("iterations")
            iterations = int(iterations_text)
        except ValueError:
            raise SaslAuthenticationError(f"Invalid SCRAM {what} format") from None
        if iterations < self.mechanism.min_iterations:
            raise SaslAuthenticationError(
                f"Requested iterations {iterations} is less than the minimum "
                f"{self.mechanism.min_iterations} for {self.mechanism.mechanism_name}"
            )
        if iterations > MAX_ITERATIONS:  # PBKDF2 runs on the caller's event loop: a hostile
            raise SaslAuthenticationError(  # server must not be able to stall it for minutes
                f"Requested iterations {iterations} is more than the maximum {MAX_ITERATIONS}"
            )
        salted = salted_password(self.mechanism, self._password, salt, iterations)
        without_proof = f"c={_b64(_GS2_HEADER.encode())},r={nonce}"
        auth_message = f"{self._bare},{text},{without_proof}".encode()
        client_key = _hmac(self.mechanism, salted, b"Client Key")
        stored_key = hashlib.new(self.mechanism.hash_name, client_key).digest()
        proof = _xor(client_key, _hmac(self.mechanism, stored_key, auth_message))
        server_key = _hmac(self.mechanism, salted, b"Server Key")
        self._expected_server_signature = _hmac(self.mechanism, server_key, auth_message)
        self._state = _ClientState.RECEIVE_SERVER_FINAL_MESSAGE
        return f"{without_proof},p={_b64(proof)}".encode("ascii")

    def _expect(self, state: _ClientState) -> None:
        if self._state is not state:
            raise IllegalSaslStateError(f"Unexpected challenge in Sasl client state {self._state.name}")


__all__ = [
    "INVALID_CREDENTIALS",
    "MAX_ITERATIONS",
    "TOKEN_AUTH_EXTENSION",
    "ScramClient",
    "ScramCredential",
    "ScramMechanism",
    "ScramServer",
    "check_iterations",
    "credential_from_password",
    "credential_from_salted_password",
    "escape_username",
    "random_nonce",
    "random_salt",
    "salted_password",
    "unescape_username",
]
