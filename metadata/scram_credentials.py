"""Users' SCRAM credentials as the metadata image holds them (Kafka's ``ScramImage``).

Replayed from UserScramCredentialRecord and RemoveUserScramCredentialRecord, and read by the
broker's SASL/SCRAM authenticator (:meth:`ScramCredentials.get`) and by DescribeUserScramCredentials
(:func:`describe_credentials`). What is held is what the records carry, a
:class:`~security.scram.ScramCredential` per user and mechanism (salt, StoredKey, ServerKey,
iterations): enough to verify a login, never a password. A describe lists mechanisms and
iteration counts only.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from metadata.records import RemoveUserScramCredentialRecord, UserScramCredentialRecord
from protocol.error_codes import ErrorCode
from security.scram import ScramCredential, ScramMechanism

__all__ = [
    "DESCRIBE_DUPLICATE_USER",
    "DESCRIBE_USER_THAT_DOES_NOT_EXIST",
    "ScramCredentials",
    "UserCredentialsDescription",
    "describe_credentials",
]

DESCRIBE_DUPLICATE_USER = "Cannot describe SCRAM credentials for the same user twice in a single request: "
DESCRIBE_USER_THAT_DOES_NOT_EXIST = "Attempt to describe a user credential that does not exist: "
"""Kafka's messages (``ScramImage``), followed by the user's name."""


class ScramCredentials:
    """Every user's credentials, by user and mechanism: one part of a
    :class:`~metadata.image.MetadataImage`, changed only by replaying records."""

    def __init__(self) -> None:
        self._by_user: dict[str, dict[ScramMechanism, ScramCredential]] = {}

    def get(self, mechanism: ScramMechanism, user: str) -> ScramCredential | None:
        """``user``'s credential for ``mechanism``, None when it has none."""
        credentials = self._by_user.get(user)
        return None if credentials is None else credentials.get(mechanism)

    def users(self) -> list[str]:
        """Every user with at least one credential, sorted."""
        return sorted(self._by_user)

    def of_user(self, user: str) -> dict[ScramMechanism, ScramCredential]:
        """``user``'s credentials by mechanism, in mechanism order (a copy; empty when none)."""
        credentials = self._by_user.get(user, {})
        return {mechanism: credentials[mechanism] for mechanism in sorted(credentials, key=_type_id)}

    def __bool__(self) -> bool:
        return bool(self._by_user)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ScramCredentials):
            return NotImplemented
        return self._by_user == other._by_user

    __hash__ = None  # type: ignore[assignment]  # unhashable, like the image that holds it

    def __repr__(self) -> str:
        return f"ScramCredentials(users={self.users()})"

    # -- replay: check first, then change; return why not, or None ----------------------------------

    def upsert(self, record: UserScramCredentialRecord) -> str | None:
        mechanism = _mechanism(record.mechanism)
        if mechanism is None:
            return f"unknown SCRAM mechanism type {record.mechanism}"
        self._by_user.setdefault(record.name, {})[mechanism] = ScramCredential(
            salt=record.salt,
            stored_key=record.stored_key,
            server_key=record.server_key,
            iterations=record.iterations,
        )
        return None

    def remove(self, record: RemoveUserScramCredentialRecord) -> str | None:
        """Kafka's replay refuses to remove a credential that does not exist: the controller
        checks that before it writes the record, so such a log is not this image's."""
        mechanism = _mechanism(record.mechanism)
        if mechanism is None:
            return f"unknown SCRAM mechanism type {record.mechanism}"
        credentials = self._by_user.get(record.name, {})
        if mechanism not in credentials:
            return f"user {record.name!r} has no {mechanism.mechanism_name} credential"
        del credentials[mechanism]
        if not credentials:
            del self._by_user[record.name]
        return None


def _mechanism(type_id: int) -> ScramMechanism | None:
    try:
        return ScramMechanism.from_type(type_id)
    except ValueError:
        return None


def _type_id(mechanism: ScramMechanism) -> int:
    return mechanism.type_id


@dataclass(frozen=True, slots=True)
class UserCredentialsDescription:
    """One result of DescribeUserScramCredentials: the user's (mechanism, iterations), or an error."""

    user: str
    error: ErrorCode = ErrorCode.NONE
    message: str | None = None
    credentials: tuple[tuple[ScramMechanism, int], ...] = ()


def describe_credentials(
    credentials: ScramCredentials, users: Sequence[str] | None
) -> list[UserCredentialsDescription]:
    """Kafka's ``ScramImage.describe``: ``users`` None or empty describes every user with
    credentials (by name); otherwise each distinct name once, in request order, a name given twice
    DUPLICATE_RESOURCE and a user without credentials RESOURCE_NOT_FOUND."""
    if not users:
        names, duplicates = credentials.users(), set[str]()
    else:
        counts = Counter(users)
        names, duplicates = list(counts), {name for name, count in counts.items() if count > 1}
    results = []
    for name in names:
        if name in duplicates:
            results.append(
                UserCredentialsDescription(name, ErrorCode.DUPLICATE_RESOURCE, DESCRIBE_DUPLICATE_USER + name)
            )
            continue
        held = credentials.of_user(name)
        if not held:
            results.append(
                UserCredentialsDescription(
                    name, ErrorCode.RESOURCE_NOT_FOUND, DESCRIBE_USER_THAT_DOES_NOT_EXIST + name
                )
            )
            continue
        infos = tuple((mechanism, credential.iterations) for mechanism, credential in held.items())
        results.append(UserCredentialsDescription(name, credentials=infos))
    return results
