"""The bootstrap file (metadata/bootstrap.py): what ``kipling storage format`` leaves for a new
metadata log, read back whole or refused."""

from __future__ import annotations

import stat
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from metadata.bootstrap import BOOTSTRAP_FILE, BootstrapMetadataError, read_bootstrap, write_bootstrap
from metadata.records import TopicRecord, UserScramCredentialRecord
from metadata.serde import decode_metadata_batches
from security.scram import ScramMechanism, credential_from_password

pytestmark = pytest.mark.timeout(30)


def credential_record(user: str, password: str) -> UserScramCredentialRecord:
    mechanism = ScramMechanism.SCRAM_SHA_512
    credential = credential_from_password(mechanism, password, iterations=4096)
    return UserScramCredentialRecord(
        user, mechanism.type_id, credential.salt, credential.stored_key, credential.server_key, 4096
    )


def test_records_round_trip_in_order(tmp_path: Path) -> None:
    records = [credential_record("admin", "admin-secret"), credential_record("alice", "alice-secret")]
    path = write_bootstrap(tmp_path / "meta", records, timestamp_ms=1_700_000_000_000)
    assert path == tmp_path / "meta" / BOOTSTRAP_FILE
    bootstrap = read_bootstrap(tmp_path / "meta")
    assert bootstrap is not None and bootstrap.records == records and bootstrap.path == path


def test_the_file_is_one_metadata_batch_of_epoch_zero_without_the_password(tmp_path: Path) -> None:
    path = write_bootstrap(tmp_path, [credential_record("admin", "admin-secret")], timestamp_ms=5)
    data = path.read_bytes()
    assert b"admin-secret" not in data
    (batch,) = list(decode_metadata_batches(data))
    assert batch.epoch == 0 and [offset for offset, _ in batch.records] == [0]
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert [p.name for p in tmp_path.iterdir()] == [BOOTSTRAP_FILE]  # no .tmp left behind


def test_any_metadata_record_is_kept(tmp_path: Path) -> None:
    records = [TopicRecord("t", uuid.uuid4())]
    write_bootstrap(tmp_path, records, timestamp_ms=0)
    bootstrap = read_bootstrap(tmp_path)
    assert bootstrap is not None and bootstrap.records == records


def test_a_directory_without_one_has_none(tmp_path: Path) -> None:
    assert read_bootstrap(tmp_path) is None
    assert read_bootstrap(tmp_path / "missing") is None


def test_rewriting_replaces_the_file(tmp_path: Path) -> None:
    second = credential_record("b", "y")
    write_bootstrap(tmp_path, [credential_record("a", "x")], timestamp_ms=0)
    write_bootstrap(tmp_path, [second], timestamp_ms=0)
    bootstrap = read_bootstrap(tmp_path)
    assert bootstrap is not None and bootstrap.records == [second]


@pytest.mark.parametrize(
    "damage",
    [
        lambda data: data[:-3],  # torn: the batch is not whole
        lambda data: data[:-1] + bytes([data[-1] ^ 0xFF]),  # the CRC no longer holds
        lambda data: data + b"\x00" * 7,  # bytes after the last batch
        lambda data: b"not a record batch at all, just text" * 3,
    ],
)
def test_a_damaged_file_is_refused_naming_it(tmp_path: Path, damage: Callable[[bytes], bytes]) -> None:
    path = write_bootstrap(tmp_path, [credential_record("admin", "s")], timestamp_ms=0)
    path.write_bytes(damage(path.read_bytes()))
    with pytest.raises(BootstrapMetadataError, match=rf"^{path}: not bootstrap metadata: "):
        read_bootstrap(tmp_path)


def test_an_unreadable_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / BOOTSTRAP_FILE).mkdir()  # reading a directory fails with an OSError
    with pytest.raises(BootstrapMetadataError, match="cannot be read"):
        read_bootstrap(tmp_path)
