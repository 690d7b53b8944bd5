"""SCRAM credentials on the controller (Kafka's ScramControlManager) and in the image (ScramImage):
the rules and messages of AlterUserScramCredentials, the records written (keys, never the password),
replay, the authenticator's lookup, snapshots, and DescribeUserScramCredentials."""

from __future__ import annotations

import pathlib
from collections.abc import Sequence

import pytest

from metadata.controller.scram_control import ScramDeletion, ScramUpsertion
from metadata.image import MetadataImage, MetadataReplayError
from metadata.records import MetadataRecord, RemoveUserScramCredentialRecord, UserScramCredentialRecord
from metadata.scram_credentials import describe_credentials
from metadata.serde import metadata_record_value
from metadata.snapshot import image_records, load_image, read_snapshot, snapshot_path, write_snapshot
from protocol.error_codes import ErrorCode
from security.scram import (
    MAX_ITERATIONS,
    ScramClient,
    ScramMechanism,
    ScramServer,
    credential_from_password,
    credential_from_salted_password,
    salted_password,
)
from tests.metadata.controller.helpers import Cluster, replayed

pytestmark = pytest.mark.timeout(60)

SHA256, SHA512 = ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512
PASSWORD = "alice-secret"


@pytest.fixture
def cluster() -> Cluster:
    cluster = Cluster()
    cluster.join(1)
    return cluster


def upsertion(
    user: str = "alice",
    mechanism: ScramMechanism | int = SHA256,
    *,
    iterations: int = 4096,
    password: str = PASSWORD,
    salt: bytes = b"some-salt",
) -> ScramUpsertion:
    """What a client sends: the salt and the salted password, never the password."""
    type_id = mechanism if isinstance(mechanism, int) else mechanism.type_id
    salted = (
        salted_password(mechanism, password, salt, iterations)
        if isinstance(mechanism, ScramMechanism)
        else b"\x00" * 32
    )
    return ScramUpsertion(user, type_id, iterations, salt, salted)


def alter(
    cluster: Cluster,
    *,
    deletions: tuple[ScramDeletion, ...] = (),
    upsertions: tuple[ScramUpsertion, ...] = (),
) -> list[tuple[str, ErrorCode, str | None]]:
    results = cluster.controller.alter_user_scram_credentials(deletions, upsertions)
    return [(r.user, r.error, r.message) for r in results]


def test_an_upsertion_stores_keys_derived_from_the_salted_password(cluster: Cluster) -> None:
    start = cluster.log.end_offset
    assert alter(cluster, upsertions=(upsertion(iterations=8192),)) == [("alice", ErrorCode.NONE, None)]
    [(_, _, record)] = cluster.log.read(start)
    expected = credential_from_password(SHA256, PASSWORD, iterations=8192, salt=b"some-salt")
    assert record == UserScramCredentialRecord(
        "alice", 1, b"some-salt", expected.stored_key, expected.server_key, 8192
    )
    salted = salted_password(SHA256, PASSWORD, b"some-salt", 8192)
    value = metadata_record_value(record)
    assert PASSWORD.encode() not in value and salted not in value  # only salt, keys and iterations
    assert "stored_key" not in repr(record) and expected.stored_key.hex() not in repr(record)
    assert cluster.image.scram_credential(SHA256, "alice") == expected
    assert cluster.image.scram_credential(SHA512, "alice") is None
    assert cluster.image.scram_credential(SHA256, "bob") is None
    assert replayed(cluster.log) == cluster.image


def test_the_stored_credential_authenticates_a_scram_client(cluster: Cluster) -> None:
    """The lookup the broker's authenticator makes: a client with the password logs in."""
    alter(cluster, upsertions=(upsertion(mechanism=SHA512),))
    image = replayed(cluster.log)
    server = ScramServer(SHA512, lambda user: image.scram_credential(SHA512, user))
    client = ScramClient(SHA512, "alice", PASSWORD)
    server_first = server.evaluate(client.first_message())
    client.verify(server.evaluate(client.evaluate(server_first)))
    assert server.complete and client.complete and server.username == "alice"


def test_several_mechanisms_of_one_user_and_a_replacement(cluster: Cluster) -> None:
    assert alter(cluster, upsertions=(upsertion(mechanism=SHA256), upsertion(mechanism=SHA512))) == [
        ("alice", ErrorCode.NONE, None)
    ]
    assert cluster.image.scram_credentials.of_user("alice").keys() == {SHA256, SHA512}
    alter(cluster, upsertions=(upsertion(mechanism=SHA256, iterations=MAX_ITERATIONS, salt=b"new"),))
    credential = cluster.image.scram_credential(SHA256, "alice")
    assert credential is not None and (credential.salt, credential.iterations) == (b"new", MAX_ITERATIONS)
    assert replayed(cluster.log) == cluster.image


def test_a_deletion_writes_a_removal_and_the_last_one_forgets_the_user(cluster: Cluster) -> None:
    alter(cluster, upsertions=(upsertion(mechanism=SHA256), upsertion(mechanism=SHA512)))
    start = cluster.log.end_offset
    assert alter(cluster, deletions=(ScramDeletion("alice", 2),)) == [("alice", ErrorCode.NONE, None)]
    assert [r for _, _, r in cluster.log.read(start)] == [RemoveUserScramCredentialRecord("alice", 2)]
    assert cluster.image.scram_credential(SHA512, "alice") is None
    assert cluster.image.scram_credentials.users() == ["alice"]
    alter(cluster, deletions=(ScramDeletion("alice", 1),))
    assert cluster.image.scram_credentials.users() == []
    assert replayed(cluster.log) == cluster.image


@pytest.mark.parametrize(
    ("alteration", "error", "message"),
    [
        (upsertion(user=""), ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"),
        (ScramDeletion("", 1), ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"),
        (upsertion(mechanism=3), ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"),
        (upsertion(mechanism=0), ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"),
        (ScramDeletion("alice", 9), ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"),
        (upsertion(iterations=4095), ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations"),
        (upsertion(iterations=MAX_ITERATIONS + 1), ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations"),
        (
            upsertion(salt=b""),
            ErrorCode.UNACCEPTABLE_CREDENTIAL,
            "Salt and salted password must not be empty",
        ),
        (
            ScramDeletion("alice", 1),
            ErrorCode.RESOURCE_NOT_FOUND,
            "Attempt to delete a user credential that does not exist",
        ),
    ],
    ids=[
        "empty-user",
        "empty-user-deletion",
        "unknown-mechanism",
        "mechanism-zero",
        "unknown-mechanism-deletion",
        "too-few-iterations",
        "too-many-iterations",
        "empty-salt",
        "delete-missing",
    ],
)
def test_refusals_carry_kafkas_codes_and_messages(
    cluster: Cluster, alteration: ScramDeletion | ScramUpsertion, error: ErrorCode, message: str
) -> None:
    start = cluster.log.end_offset
    kind = "deletions" if isinstance(alteration, ScramDeletion) else "upsertions"
    assert alter(cluster, **{kind: (alteration,)}) == [(alteration.user, error, message)]  # type: ignore[arg-type]
    assert cluster.log.end_offset == start


def test_the_same_user_and_mechanism_twice_is_a_duplicate(cluster: Cluster) -> None:
    alter(cluster, upsertions=(upsertion("carol"),))
    start = cluster.log.end_offset
    duplicate = (
        ErrorCode.DUPLICATE_RESOURCE,
        "A user credential cannot be altered twice in the same request",
    )
    results = alter(
        cluster,
        deletions=(ScramDeletion("carol", 1),),
        upsertions=(
            upsertion("carol"),  # deleted and upserted
            upsertion("dave"),
            upsertion("dave", iterations=8192),  # upserted twice
            upsertion("erin"),
        ),
    )
    assert results == [("carol", *duplicate), ("dave", *duplicate), ("erin", ErrorCode.NONE, None)]
    assert [r for _, _, r in cluster.log.read(start)] == [_record_of(upsertion("erin"))]
    assert cluster.image.scram_credential(SHA256, "carol") is not None  # untouched
    assert cluster.image.scram_credential(SHA256, "dave") is None


def _record_of(upserted: ScramUpsertion) -> UserScramCredentialRecord:
    mechanism = ScramMechanism.from_type(upserted.mechanism)
    credential = credential_from_salted_password(
        mechanism, upserted.salt, upserted.salted_password, upserted.iterations
    )
    return UserScramCredentialRecord(
        upserted.user,
        upserted.mechanism,
        credential.salt,
        credential.stored_key,
        credential.server_key,
        credential.iterations,
    )


def test_one_bad_alteration_writes_nothing_for_that_user(cluster: Cluster) -> None:
    alter(cluster, upsertions=(upsertion("alice", SHA512),))
    start = cluster.log.end_offset
    results = alter(
        cluster,
        deletions=(ScramDeletion("alice", 2), ScramDeletion("bob", 1)),
        upsertions=(upsertion("alice", SHA256, iterations=100), upsertion("frank")),
    )
    assert results == [
        ("alice", ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations"),
        ("bob", ErrorCode.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist"),
        ("frank", ErrorCode.NONE, None),
    ]
    assert [type(r).__name__ for _, _, r in cluster.log.read(start)] == ["UserScramCredentialRecord"]
    assert cluster.image.scram_credential(SHA512, "alice") is not None  # its deletion was not written


def test_removals_are_written_before_upsertions_in_one_batch(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    alter(cluster, upsertions=(upsertion("alice", SHA512),))
    batches: list[list[str]] = []
    append = cluster.log.append

    def recording_append(records: Sequence[MetadataRecord], epoch: int) -> int:
        batches.append([type(record).__name__ for record in records])
        return append(records, epoch)

    monkeypatch.setattr(cluster.log, "append", recording_append)
    alter(cluster, deletions=(ScramDeletion("alice", 2),), upsertions=(upsertion("alice", SHA256),))
    assert batches == [["RemoveUserScramCredentialRecord", "UserScramCredentialRecord"]]
    assert cluster.image.scram_credentials.of_user("alice").keys() == {SHA256}


def test_replay_refuses_what_the_controller_never_writes() -> None:
    image = MetadataImage()
    with pytest.raises(MetadataReplayError, match="has no SCRAM-SHA-256 credential"):
        image.apply(RemoveUserScramCredentialRecord("alice", 1), 0, 1)
    with pytest.raises(MetadataReplayError, match="unknown SCRAM mechanism type 7"):
        image.apply(UserScramCredentialRecord("alice", 7, b"s", b"k", b"k", 4096), 0, 1)
    assert image.scram_credentials.users() == []


def test_credentials_survive_a_snapshot(cluster: Cluster, tmp_path: pathlib.Path) -> None:
    alter(
        cluster,
        upsertions=(
            upsertion("bob", SHA512, iterations=10_000),
            upsertion("alice", SHA256),
            upsertion("alice", SHA512, salt=b"other"),
        ),
    )
    image = replayed(cluster.log)
    records = [record for _, record in image_records(image) if isinstance(record, UserScramCredentialRecord)]
    assert [(r.name, r.mechanism) for r in records] == [("alice", 1), ("alice", 2), ("bob", 2)]
    assert MetadataImage.from_snapshot(image_records(image), offset=image.offset, epoch=image.epoch) == image
    snapshot_id = write_snapshot(
        tmp_path, image, end_offset=image.offset + 1, epoch=image.epoch, timestamp_ms=1
    )
    loaded = load_image(
        read_snapshot(snapshot_path(tmp_path, snapshot_id)), snapshot_id.end_offset, snapshot_id.epoch
    )
    assert loaded == image
    assert loaded.scram_credential(SHA512, "alice") == image.scram_credential(SHA512, "alice")
    credential = loaded.scram_credential(SHA512, "bob")
    assert credential is not None and credential.iterations == 10_000
    # an image differing only in one credential is a different image
    alter(cluster, deletions=(ScramDeletion("bob", 2),))
    assert replayed(cluster.log) != loaded


def test_describe_is_kafkas_scram_image_describe(cluster: Cluster) -> None:
    alter(
        cluster,
        upsertions=(
            upsertion("bob", SHA512, iterations=8192),
            upsertion("alice", SHA512),
            upsertion("alice", SHA256, iterations=10_000),
        ),
    )
    credentials = cluster.image.scram_credentials
    every = [(d.user, d.error, d.credentials) for d in describe_credentials(credentials, None)]
    assert every == [
        ("alice", ErrorCode.NONE, ((SHA256, 10_000), (SHA512, 4096))),
        ("bob", ErrorCode.NONE, ((SHA512, 8192),)),
    ]
    assert [d.user for d in describe_credentials(credentials, [])] == ["alice", "bob"]
    named = describe_credentials(credentials, ["bob", "nobody", "alice", "bob"])
    assert [(d.user, d.error, d.message) for d in named] == [
        (
            "bob",
            ErrorCode.DUPLICATE_RESOURCE,
            "Cannot describe SCRAM credentials for the same user twice in a single request: bob",
        ),
        (
            "nobody",
            ErrorCode.RESOURCE_NOT_FOUND,
            "Attempt to describe a user credential that does not exist: nobody",
        ),
        ("alice", ErrorCode.NONE, None),
    ]
    assert describe_credentials(MetadataImage().scram_credentials, None) == []
