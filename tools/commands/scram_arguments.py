"""``kipling storage format --add-scram``: Kafka's ``ScramParser``, SCRAM credentials given at format time.

Each argument is one credential, in Kafka's syntax::

    SCRAM-SHA-256=[name=alice,password=alice-secret]
    SCRAM-SHA-512=[name=alice,iterations=8192,salt="N3E=",saltedpassword="YCE="]

The mechanism (``SCRAM-SHA-256`` or ``SCRAM-SHA-512``), ``=``, then ``[...]`` holding comma-separated
``key=value`` components: ``name`` (required), ``password`` or ``saltedpassword`` with ``salt`` (both
base64), ``iterations`` (4096 when left out, at most 16384) and ``salt`` (base64; a fresh Kafka-style
salt when left out). A value may be in double quotes, which are removed; a component cannot hold a
comma, so neither can a password given here. When both ``password`` and ``saltedpassword`` are
given, the password is used, as Kafka does. Each becomes one UserScramCredentialRecord: the salt,
StoredKey, ServerKey and iteration count, never the password or the salted password.

Kafka's messages are kept, with two differences: a component without ``=`` and a salted password
that is not base64 are refused without echoing their text (Kafka's messages repeat it, and either
may be part of a secret), and an empty name or salt is refused, as AlterUserScramCredentials
refuses them (Kafka's format command would write such a record).
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Sequence

from metadata.records import UserScramCredentialRecord
from security.scram import (
    MAX_ITERATIONS,
    ScramMechanism,
    credential_from_salted_password,
    random_salt,
    salted_password,
)

__all__ = ["DEFAULT_ITERATIONS", "ScramArgumentError", "parse_scram_argument", "scram_records"]

DEFAULT_ITERATIONS = 4096
_BASE64 = re.compile(r"[A-Za-z0-9+/]*={0,2}")
_INT32 = re.compile(r"[+-]?[0-9]+")


class ScramArgumentError(Exception):
    """An ``--add-scram`` argument Kafka's format command would refuse (its FormatterException)."""


def scram_records(arguments: Sequence[str]) -> list[UserScramCredentialRecord]:
    """One record per argument, in order (a later one for the same user and mechanism wins)."""
    return [parse_scram_argument(argument) for argument in arguments]


def parse_scram_argument(argument: str) -> UserScramCredentialRecord:
    """The record of one ``--add-scram`` argument; raises :class:`ScramArgumentError`."""
    mechanism, config = _per_mechanism(argument)
    components = _components(config)
    name = components.pop("name", None)
    if name is None:
        raise ScramArgumentError("You must supply 'name' to add-scram")
    if not name:
        raise ScramArgumentError("Username must not be empty")
    salt = None if (text := components.pop("salt", None)) is None else _salt(text)
    iterations = DEFAULT_ITERATIONS
    if (text := components.pop("iterations", None)) is not None:
        iterations = _iterations(text)
    password = components.pop("password", None)
    salted = components.pop("saltedpassword", None)
    given_salted: bytes | None = None
    if password is None:
        if salted is None:
            raise ScramArgumentError("You must supply one of 'password' or 'saltedpassword' to add-scram")
        if salt is None:
            raise ScramArgumentError("You must supply 'salt' with 'saltedpassword' to add-scram")
        given_salted = _decode(salted)
        if given_salted is None:
            raise ScramArgumentError("Failed to decode given saltedPassword: not base64")
    if components:
        raise ScramArgumentError(f"Unknown SCRAM configurations: {', '.join(sorted(components))}")
    if iterations < mechanism.min_iterations:
        raise ScramArgumentError(
            f"The 'iterations' value must be >= {mechanism.min_iterations} "
            f"for add-scram using {mechanism.name}"
        )
    if iterations > MAX_ITERATIONS:
        raise ScramArgumentError(
            f"The 'iterations' value must be <= {MAX_ITERATIONS} for add-scram using {mechanism.name}"
        )
    if salt is None:
        salt = random_salt()
    if given_salted is None:
        assert password is not None  # one of the two, checked above
        given_salted = salted_password(mechanism, password, salt, iterations)
    credential = credential_from_salted_password(mechanism, salt, given_salted, iterations)
    return UserScramCredentialRecord(
        name, mechanism.type_id, credential.salt, credential.stored_key, credential.server_key, iterations
    )


def _per_mechanism(argument: str) -> tuple[ScramMechanism, str]:
    """Kafka's parsePerMechanismArgument: the mechanism and the text inside the brackets."""
    argument = argument.strip()
    mechanism_name, equals, config = argument.partition("=")
    if not equals:
        raise ScramArgumentError(f"Failed to find equals sign in SCRAM argument '{argument}'")
    try:
        mechanism = ScramMechanism.from_name(mechanism_name)
    except ValueError:
        raise ScramArgumentError(f"The add-scram mechanism {mechanism_name} is not supported.") from None
    if not config.startswith("["):
        raise ScramArgumentError("Expected configuration string to start with [")
    if not config.endswith("]"):
        raise ScramArgumentError("Expected configuration string to end with ]")
    return mechanism, config[1:-1]


def _components(config: str) -> dict[str, str]:
    """``key=value`` pairs split at commas as Java's ``String.split(",")`` does (trailing empty
    parts dropped); a later key wins; a value in double quotes loses them."""
    parts = config.split(",")
    while len(parts) > 1 and parts[-1] == "":
        parts.pop()
    components: dict[str, str] = {}
    for part in parts:
        key, equals, value = part.partition("=")
        if not equals:
            raise ScramArgumentError("No equals sign found in SCRAM component (a component is key=value)")
        if len(value) >= 2 and value.startswith('"') and value.endswith('"'):
            value = value[1:-1]
        components[key] = value
    return components


def _salt(text: str) -> bytes:
    salt = _decode(text)
    if salt is None:
        raise ScramArgumentError(f"Failed to decode given salt: {text}")
    if not salt:
        raise ScramArgumentError("The salt must not be empty")
    return salt


def _iterations(text: str) -> int:
    if _INT32.fullmatch(text) is None or not -(2**31) <= int(text) < 2**31:
        raise ScramArgumentError(f"Failed to parse iterations count: {text}")
    return int(text)


def _decode(text: str) -> bytes | None:
    """Java's ``Base64.getDecoder().decode``: the standard alphabet, padding optional; None if not."""
    if _BASE64.fullmatch(text) is None:
        return None
    padded = text if "=" in text else text + "=" * (-len(text) % 4)
    try:
        return base64.b64decode(padded, validate=True)
    except (binascii.Error, ValueError):
        return None
