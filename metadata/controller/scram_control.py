"""AlterUserScramCredentials on the controller (Kafka's ``ScramControlManager``).

Each deletion and upsertion names a user and a mechanism (Kafka's type byte). An upsertion carries
the client's salt and salted password, SaltedPassword = Hi(password, salt, iterations); the
controller derives StoredKey and ServerKey from it
(:func:`security.scram.credential_from_salted_password`) and writes only those, with the salt and
the iteration count, in a UserScramCredentialRecord: neither the password nor the salted password
reaches the log.

Errors are per user, with Kafka's codes and messages:

* an empty user name: UNACCEPTABLE_CREDENTIAL ``Username must not be empty``;
* an unknown mechanism: UNSUPPORTED_SASL_MECHANISM ``Unknown SCRAM mechanism``;
* iterations below the mechanism's minimum (4096) or above 16384: UNACCEPTABLE_CREDENTIAL
  ``Too few iterations`` / ``Too many iterations``;
* deleting a credential the user does not have: RESOURCE_NOT_FOUND;
* the same user and mechanism twice in one request (deleted and upserted, or named twice):
  DUPLICATE_RESOURCE ``A user credential cannot be altered twice in the same request``.

A user is altered as a whole: one failing alteration and none of that user's are written. Unlike
Kafka's KRaft controller, which counts any second alteration of a user as a duplicate, a user may
have several mechanisms altered in one request (ZooKeeper-mode Kafka's rule): that is how
kafka-configs.sh sends ``--add-config 'SCRAM-SHA-256=[...],SCRAM-SHA-512=[...]'``. Results come
one per user, in the order users first appear in the request (deletions first, as Kafka reads them).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from metadata.records import RemoveUserScramCredentialRecord, UserScramCredentialRecord
from metadata.scram_credentials import ScramCredentials
from protocol.error_codes import ErrorCode, KafkaError
from security.scram import ScramMechanism, check_iterations, credential_from_salted_password

__all__ = [
    "DUPLICATE_ALTERATION",
    "ScramAlterationResult",
    "ScramDeletion",
    "ScramUpsertion",
    "plan_scram_alterations",
]

DUPLICATE_ALTERATION = "A user credential cannot be altered twice in the same request"
DELETE_MISSING = "Attempt to delete a user credential that does not exist"

ScramRecord = UserScramCredentialRecord | RemoveUserScramCredentialRecord


@dataclass(frozen=True, slots=True)
class ScramDeletion:
    """Delete ``user``'s credential for the mechanism with type byte ``mechanism``."""

    user: str
    mechanism: int


@dataclass(frozen=True, slots=True)
class ScramUpsertion:
    """Set ``user``'s credential for ``mechanism`` from a salted password (kept out of ``repr``)."""

    user: str
    mechanism: int
    iterations: int
    salt: bytes
    salted_password: bytes = field(repr=False)


@dataclass(frozen=True, slots=True)
class ScramAlterationResult:
    """One user's outcome."""

    user: str
    error: ErrorCode = ErrorCode.NONE
    message: str | None = None


def plan_scram_alterations(
    credentials: ScramCredentials,
    deletions: Sequence[ScramDeletion],
    upsertions: Sequence[ScramUpsertion],
) -> tuple[list[ScramAlterationResult], list[ScramRecord]]:
    """Validate the request against the current ``credentials``: one result per user and the
    records of the users whose every alteration is valid (removals first, then upsertions)."""
    errors: dict[str, KafkaError] = {}
    records: dict[str, list[ScramRecord]] = {}
    seen: set[tuple[str, int]] = set()
    alterations: list[ScramDeletion | ScramUpsertion] = [*deletions, *upsertions]
    for alteration in alterations:
        user = alteration.user
        records.setdefault(user, [])
        if user in errors:
            continue
        key = (user, alteration.mechanism)
        if key in seen:
            errors[user] = KafkaError(ErrorCode.DUPLICATE_RESOURCE, DUPLICATE_ALTERATION)
            continue
        seen.add(key)
        try:
            records[user].append(_record(credentials, alteration))
        except KafkaError as exc:
            errors[user] = exc
    results = [
        ScramAlterationResult(user, errors[user].code, errors[user].message)
        if user in errors
        else ScramAlterationResult(user)
        for user in records
    ]
    written = [record for user, planned in records.items() if user not in errors for record in planned]
    written.sort(key=lambda record: isinstance(record, UserScramCredentialRecord))  # stable: removals first
    return results, written


def _record(credentials: ScramCredentials, alteration: ScramDeletion | ScramUpsertion) -> ScramRecord:
    """The record of one valid alteration; KafkaError with Kafka's code and message otherwise."""
    mechanism = _mechanism(alteration.user, alteration.mechanism)
    if isinstance(alteration, ScramDeletion):
        if credentials.get(mechanism, alteration.user) is None:
            raise KafkaError(ErrorCode.RESOURCE_NOT_FOUND, DELETE_MISSING)
        return RemoveUserScramCredentialRecord(alteration.user, mechanism.type_id)
    try:
        check_iterations(mechanism, alteration.iterations)
    except ValueError as exc:
        raise KafkaError(ErrorCode.UNACCEPTABLE_CREDENTIAL, str(exc)) from None
    if not alteration.salt or not alteration.salted_password:
        # An empty salt makes the stored keys the same for every user with that password.
        raise KafkaError(ErrorCode.UNACCEPTABLE_CREDENTIAL, "Salt and salted password must not be empty")
    credential = credential_from_salted_password(
        mechanism, alteration.salt, alteration.salted_password, alteration.iterations
    )
    return UserScramCredentialRecord(
        alteration.user,
        mechanism.type_id,
        credential.salt,
        credential.stored_key,
        credential.server_key,
        credential.iterations,
    )


def _mechanism(user: str, type_id: int) -> ScramMechanism:
    """Kafka's validateScramUsernameAndMechanism: a user name, and a mechanism it knows."""
    if not user:
        raise KafkaError(ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty")
    try:
        return ScramMechanism.from_type(type_id)
    except ValueError:
        raise KafkaError(ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism") from None
