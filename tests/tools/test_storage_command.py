"""`kipling storage` (tools/commands/storage.py, tools/commands/scram_arguments.py) without a broker:
the ``--add-scram`` syntax with Kafka's ScramParserTest cases and messages, the arguments, which
cluster id a format uses, and what it writes where. On a real node:
tests/integration/test_storage_format.py."""

from __future__ import annotations

import argparse
import base64
import io
from pathlib import Path

import pytest

from broker.meta_properties import META_PROPERTIES, ensure_meta_properties, new_cluster_id
from metadata.bootstrap import BOOTSTRAP_FILE, read_bootstrap
from metadata.records import UserScramCredentialRecord
from security.scram import (
    ScramClient,
    ScramCredential,
    ScramMechanism,
    ScramServer,
    credential_from_password,
    credential_from_salted_password,
)
from server_common.config import BrokerConfig, load_config
from tools.cli import build_parser
from tools.commands.scram_arguments import ScramArgumentError, parse_scram_argument, scram_records
from tools.commands.storage import FormatError, format_storage, resolve_cluster_id, storage_command

pytestmark = pytest.mark.timeout(60)

SHA256, SHA512 = ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512
TEST_SALT = b"1lv4pdnw4fwq7notcxm0yy1k7q"
"""Kafka's ScramParserTest.TEST_SALT (its bytes 49, 108, 118, ...)."""
TEST_SALTED_PASSWORD = bytes.fromhex("993d32c945319e525a0bdf475e045349895bbaa6b81521ad24225f4ccbe36021")
"""Kafka's ScramParserTest.TEST_SALTED_PASSWORD (its bytes -103, 61, 50, ...)."""


def args(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(["storage", *argv])


def node_config(tmp_path: Path, *overrides: str) -> BrokerConfig:
    config, _ = load_config(None, [f"log.dirs={tmp_path / 'a'},{tmp_path / 'b'}", *overrides])
    return config


# -- --add-scram ------------------------------------------------------------------------------------


def test_the_salts_of_kafkas_tests_decode_as_kafka_decodes_them() -> None:
    assert base64.b64encode(TEST_SALT) == b"MWx2NHBkbnc0ZndxN25vdGN4bTB5eTFrN3E="
    assert base64.b64encode(TEST_SALTED_PASSWORD) == b"mT0yyUUxnlJaC99HXgRTSYlbuqa4FSGtJCJfTMvjYCE="


def test_a_password_becomes_the_credential_a_login_checks() -> None:
    record = parse_scram_argument("SCRAM-SHA-512=[name=scram-admin,password=scram-user-secret]")
    assert (record.name, record.mechanism, record.iterations) == ("scram-admin", SHA512.type_id, 4096)
    expected = credential_from_password(SHA512, "scram-user-secret", salt=record.salt, iterations=4096)
    assert (record.stored_key, record.server_key) == (expected.stored_key, expected.server_key)
    assert record.salt and record.salt.isascii()  # Kafka's salts: a random base-36 string's bytes
    assert "scram-user-secret" not in repr(record)


def test_iterations_and_a_quoted_salt() -> None:
    record = parse_scram_argument(
        "SCRAM-SHA-256=[name=bob,password=my pass,iterations=8192,"
        'salt="MWx2NHBkbnc0ZndxN25vdGN4bTB5eTFrN3E="]'
    )
    expected = credential_from_password(SHA256, "my pass", salt=TEST_SALT, iterations=8192)
    assert record == UserScramCredentialRecord(
        "bob", SHA256.type_id, TEST_SALT, expected.stored_key, expected.server_key, 8192
    )


def test_a_salted_password_with_its_salt_as_kafkas_to_record_test() -> None:
    record = parse_scram_argument(
        'SCRAM-SHA-512=[name=alice,salt="MWx2NHBkbnc0ZndxN25vdGN4bTB5eTFrN3E=",'
        'saltedpassword="mT0yyUUxnlJaC99HXgRTSYlbuqa4FSGtJCJfTMvjYCE="]'
    )
    expected = credential_from_salted_password(SHA512, TEST_SALT, TEST_SALTED_PASSWORD, 4096)
    assert record == UserScramCredentialRecord(
        "alice", SHA512.type_id, TEST_SALT, expected.stored_key, expected.server_key, 4096
    )


def test_random_salts_differ() -> None:
    first, second = scram_records(["SCRAM-SHA-256=[name=bob,password=p]"] * 2)
    assert first.salt != second.salt and first.stored_key != second.stored_key


def test_surrounding_blanks_unpadded_base64_and_a_trailing_comma() -> None:
    record = parse_scram_argument(
        "  SCRAM-SHA-256=[name=bob,password=p,salt=MWx2NHBkbnc0ZndxN25vdGN4bTB5eTFrN3E,] "
    )
    assert record.salt == TEST_SALT


def test_a_password_made_here_logs_in() -> None:
    """Through kipling's SCRAM exchange: the record is what the authenticator needs."""
    record = parse_scram_argument("SCRAM-SHA-256=[name=alice,password=alice-secret]")
    stored = ScramCredential(record.salt, record.stored_key, record.server_key, record.iterations)
    server = ScramServer(SHA256, lambda user: stored if user == "alice" else None)
    client = ScramClient(SHA256, "alice", "alice-secret")
    server_first = server.evaluate(client.first_message())
    client.verify(server.evaluate(client.evaluate(server_first)))
    assert server.complete and client.complete and server.username == "alice"


@pytest.mark.parametrize(
    ("argument", "message"),
    [
        ("SCRAM-SHA-512", "Failed to find equals sign in SCRAM argument 'SCRAM-SHA-512'"),
        (
            "SCRAM-SHA-UNSUPPORTED=[name=scram-admin,password=scram-user-secret]",
            "The add-scram mechanism SCRAM-SHA-UNSUPPORTED is not supported.",
        ),
        ("scram-sha-256=[name=a,password=b]", "The add-scram mechanism scram-sha-256 is not supported."),
        (
            "SCRAM-SHA-256=name=scram-admin,password=scram-user-secret",
            "Expected configuration string to start with [",
        ),
        (
            "SCRAM-SHA-256=[name=scram-admin,password=scram-user-secret",
            "Expected configuration string to end with ]",
        ),
        ("SCRAM-SHA-256=[password=mypass]", "You must supply 'name' to add-scram"),
        ("SCRAM-SHA-256=[name=bar]", "You must supply one of 'password' or 'saltedpassword' to add-scram"),
        (
            'SCRAM-SHA-256=[name=alice,saltedpassword="mT0yyUUxnlJaC99HXgRTSYlbuqa4FSGtJCJfTMvjYCE="]',
            "You must supply 'salt' with 'saltedpassword' to add-scram",
        ),
        (
            "SCRAM-SHA-256=[name=bob,password=mypass,unknown=something,unknown2=somethingelse]",
            "Unknown SCRAM configurations: unknown, unknown2",
        ),
        (
            "SCRAM-SHA-256=[name=bob,password=p,iterations=4095]",
            "The 'iterations' value must be >= 4096 for add-scram using SCRAM_SHA_256",
        ),
        (
            "SCRAM-SHA-512=[name=bob,password=p,iterations=16385]",
            "The 'iterations' value must be <= 16384 for add-scram using SCRAM_SHA_512",
        ),
        ("SCRAM-SHA-256=[name=bob,password=p,iterations=8k]", "Failed to parse iterations count: 8k"),
        (
            "SCRAM-SHA-256=[name=bob,password=p,iterations=99999999999]",
            "Failed to parse iterations count: 99999999999",
        ),
        ("SCRAM-SHA-256=[name=bob,password=p,salt=not*base64]", "Failed to decode given salt: not*base64"),
        ("SCRAM-SHA-256=[name=bob,password=p,salt=]", "The salt must not be empty"),
        ("SCRAM-SHA-256=[name=,password=p]", "Username must not be empty"),
        (
            "SCRAM-SHA-256=[name=bob,salt=MWx2,saltedpassword=s3cr*t]",
            "Failed to decode given saltedPassword: not base64",
        ),
        ("SCRAM-SHA-256=[]", "No equals sign found in SCRAM component (a component is key=value)"),
    ],
)
def test_kafkas_refusals(argument: str, message: str) -> None:
    with pytest.raises(ScramArgumentError) as refused:
        parse_scram_argument(argument)
    assert str(refused.value) == message


def test_a_password_with_a_comma_is_refused_without_echoing_it() -> None:
    with pytest.raises(ScramArgumentError) as refused:
        parse_scram_argument("SCRAM-SHA-256=[name=bob,password=top,secret]")
    assert "secret" not in str(refused.value) and "No equals sign" in str(refused.value)


def test_a_later_component_wins_and_a_password_beats_a_salted_password() -> None:
    record = parse_scram_argument(
        "SCRAM-SHA-256=[name=x,name=bob,password=p,saltedpassword=AAAA,salt=MWx2NHBkbnc0ZndxN25vdGN4bTB5eTFrN3E=]"
    )
    expected = credential_from_password(SHA256, "p", salt=TEST_SALT, iterations=4096)
    assert record.name == "bob" and record.stored_key == expected.stored_key


# -- the arguments ----------------------------------------------------------------------------------


def test_format_arguments_long_and_short() -> None:
    parsed = args(
        "format", "-c", "s.properties", "-t", "abc", "-S", "A=[x]", "--add-scram", "B=[y]", "-g", "-s"
    )
    assert parsed.storage_command == "format" and parsed.config == Path("s.properties")
    assert (parsed.cluster_id, parsed.add_scram) == ("abc", ["A=[x]", "B=[y]"])
    assert parsed.ignore_formatted and parsed.standalone and parsed.override == []
    plain = args("format", "--config", "s.properties", "--override", "node.id=4")
    assert plain.cluster_id is None and plain.add_scram == [] and not plain.standalone
    assert plain.override == ["node.id=4"] and not plain.ignore_formatted


def test_format_needs_a_config_and_storage_a_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        args("format", "-t", "abc")
    assert "--config" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        args()


def test_random_uuid_prints_a_cluster_id() -> None:
    out = io.StringIO()
    assert storage_command(args("random-uuid"), out, io.StringIO()) == 0
    text = out.getvalue().strip()
    assert len(text) == 22 and len(base64.urlsafe_b64decode(text + "==")) == 16 and "-" not in text


def test_new_cluster_ids_never_hold_a_dash() -> None:
    assert all("-" not in new_cluster_id() for _ in range(500))


# -- the cluster id ---------------------------------------------------------------------------------


def test_the_cluster_id_given_configured_formatted_or_new(tmp_path: Path) -> None:
    config = node_config(tmp_path)
    assert resolve_cluster_id(config, "given", None, standalone=False) == "given"
    assert resolve_cluster_id(config, None, "formatted", standalone=False) == "formatted"
    assert len(resolve_cluster_id(config, None, None, standalone=True)) == 22
    configured = node_config(tmp_path, "cluster.id=configured")
    assert resolve_cluster_id(configured, None, None, standalone=True) == "configured"
    assert resolve_cluster_id(configured, "configured", None, standalone=False) == "configured"


@pytest.mark.parametrize(
    ("given", "overrides", "standalone", "message"),
    [
        (None, (), False, "You must specify the cluster id"),
        ("", (), False, "The cluster id must not be empty."),
        ("other", ("cluster.id=configured",), False, "--cluster-id other differs from cluster.id=configured"),
        (
            None,
            (
                "process.roles=broker",
                "node.id=2",
                "controller.quorum.voters=1@127.0.0.1:9093",
                "controller.listener.names=CONTROLLER",
            ),
            True,
            "You cannot use --standalone on a broker node.",
        ),
        (
            None,
            (
                "controller.quorum.voters=1@127.0.0.1:19093",
                "controller.listener.names=CONTROLLER",
                "listeners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:19093",
                "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            ),
            True,
            "You cannot specify controller.quorum.voters and format the node with --standalone",
        ),
    ],
)
def test_cluster_id_refusals(
    tmp_path: Path, given: str | None, overrides: tuple[str, ...], standalone: bool, message: str
) -> None:
    with pytest.raises(FormatError) as refused:
        resolve_cluster_id(node_config(tmp_path, *overrides), given, None, standalone=standalone)
    assert str(refused.value).startswith(message)


# -- formatting -------------------------------------------------------------------------------------


def test_every_log_dir_and_the_metadata_log_dir_are_formatted_as_the_node_would(tmp_path: Path) -> None:
    config = node_config(tmp_path, "node.id=7", f"metadata.log.dir={tmp_path / 'meta'}")
    records = scram_records(["SCRAM-SHA-512=[name=admin,password=admin-secret]"])
    out = io.StringIO()
    formatted = format_storage(config, "MkU3OEVBNTcwNTJENDM2Qg", records, ignore_formatted=False, out=out)
    assert formatted == [tmp_path / "a", tmp_path / "b", tmp_path / "meta"]
    for directory in formatted:
        text = (directory / META_PROPERTIES).read_text()
        assert text == "version=1\ncluster.id=MkU3OEVBNTcwNTJENDM2Qg\nnode.id=7\n"
    assert out.getvalue() == (
        "Bootstrap metadata: 1 SCRAM credential (admin SCRAM-SHA-512).\n"
        f"Formatting data directory {tmp_path / 'a'} with cluster.id MkU3OEVBNTcwNTJENDM2Qg.\n"
        f"Formatting data directory {tmp_path / 'b'} with cluster.id MkU3OEVBNTcwNTJENDM2Qg.\n"
        f"Formatting metadata directory {tmp_path / 'meta'} with cluster.id MkU3OEVBNTcwNTJENDM2Qg.\n"
    )
    assert not (tmp_path / "a" / BOOTSTRAP_FILE).exists()
    bootstrap = read_bootstrap(tmp_path / "meta")
    assert bootstrap is not None and bootstrap.records == records
    # the node accepts what was formatted: same cluster, nothing rewritten
    assert ensure_meta_properties(config.all_log_dirs, 7, None) == "MkU3OEVBNTcwNTJENDM2Qg"


def test_without_credentials_no_bootstrap_file_is_written(tmp_path: Path) -> None:
    format_storage(node_config(tmp_path), "id", [], ignore_formatted=False, out=io.StringIO())
    assert (tmp_path / "a" / META_PROPERTIES).exists() and not (tmp_path / "a" / BOOTSTRAP_FILE).exists()


def test_formatted_dirs_are_refused_or_skipped(tmp_path: Path) -> None:
    config = node_config(tmp_path)
    format_storage(config, "id", [], ignore_formatted=False, out=io.StringIO())
    (tmp_path / "b" / META_PROPERTIES).unlink()
    with pytest.raises(FormatError) as refused:
        format_storage(config, "id", [], ignore_formatted=False, out=io.StringIO())
    assert str(refused.value) == (
        f"Log directory {tmp_path / 'a'} is already formatted. "
        "Use --ignore-formatted to ignore this directory and format the others."
    )
    records = scram_records(["SCRAM-SHA-256=[name=late,password=p]"])
    out = io.StringIO()
    assert format_storage(config, "id", records, ignore_formatted=True, out=out) == [tmp_path / "b"]
    assert f"The metadata directory {tmp_path / 'a'} is already formatted" in out.getvalue()
    assert read_bootstrap(tmp_path / "a") is None  # the metadata dir was formatted before
    out = io.StringIO()
    assert format_storage(config, "id", [], ignore_formatted=True, out=out) == []
    assert out.getvalue() == "All of the log directories are already formatted.\n"


def test_another_clusters_or_nodes_dirs_are_refused_even_when_ignored(tmp_path: Path) -> None:
    config = node_config(tmp_path, "node.id=1")
    format_storage(config, "one", [], ignore_formatted=False, out=io.StringIO())
    with pytest.raises(Exception, match=r"belongs to cluster one, not cluster\.id=two"):
        format_storage(config, "two", [], ignore_formatted=True, out=io.StringIO())
    with pytest.raises(Exception, match=r"belongs to node 1, not node\.id=2"):
        format_storage(
            node_config(tmp_path, "node.id=2"), "one", [], ignore_formatted=True, out=io.StringIO()
        )


def test_the_command_reports_one_line_and_status_1(tmp_path: Path) -> None:
    config_file = tmp_path / "server.properties"
    config_file.write_text(f"log.dirs={tmp_path / 'logs'}\n")
    out, err = io.StringIO(), io.StringIO()
    bad = args("format", "-c", str(config_file), "-t", "x", "-S", "SCRAM-SHA-256=[name=a]")
    assert storage_command(bad, out, err) == 1
    assert err.getvalue() == "You must supply one of 'password' or 'saltedpassword' to add-scram\n"
    assert not (tmp_path / "logs").exists()  # nothing written before every check passed
    err = io.StringIO()
    assert (
        storage_command(args("format", "-c", str(tmp_path / "missing.properties"), "-t", "x"), out, err) == 1
    )
    assert "missing.properties" in err.getvalue() and err.getvalue().count("\n") == 1
    afile = tmp_path / "afile"
    afile.write_text("")
    err = io.StringIO()
    assert (
        storage_command(
            args("format", "-c", str(config_file), "-t", "x", "--override", f"log.dirs={afile}"), out, err
        )
        == 1
    )
    assert err.getvalue() == f"{afile} is a file, not a directory\n"


def test_standalone_formats_with_a_new_id_then_keeps_it(tmp_path: Path) -> None:
    config_file = tmp_path / "server.properties"
    config_file.write_text(f"log.dirs={tmp_path / 'logs'}\n")
    out = io.StringIO()
    assert storage_command(args("format", "-c", str(config_file), "--standalone"), out, io.StringIO()) == 0
    cluster_id = out.getvalue().rsplit("with cluster.id ", 1)[1].rstrip(".\n")
    assert f"cluster.id={cluster_id}\n" in (tmp_path / "logs" / META_PROPERTIES).read_text()
    out, err = io.StringIO(), io.StringIO()
    assert storage_command(args("format", "-c", str(config_file), "--standalone", "-g"), out, err) == 0, err
    assert out.getvalue() == "All of the log directories are already formatted.\n"
    err = io.StringIO()
    assert storage_command(args("format", "-c", str(config_file), "--standalone"), out, err) == 1
    assert err.getvalue().startswith(f"Log directory {tmp_path / 'logs'} is already formatted.")
