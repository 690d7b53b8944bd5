"""The Java properties reader: the rules of java.util.Properties.load that server.properties files use."""

from __future__ import annotations

from pathlib import Path

import pytest

from server_common.config.properties import (
    PropertiesError,
    parse_override,
    parse_overrides,
    parse_properties,
    read_properties_file,
)


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("key=value", ("key", "value")),
        ("key = value", ("key", "value")),
        ("key:value", ("key", "value")),
        ("key : value", ("key", "value")),
        ("key value", ("key", "value")),
        ("key\tvalue", ("key", "value")),
        ("key\fvalue", ("key", "value")),
        ("   key=value", ("key", "value")),
        ("key", ("key", "")),
        ("key=", ("key", "")),
        ("key   ", ("key", "")),
        ("key==value", ("key", "=value")),
        ("key = = value", ("key", "= value")),
        ("key=a=b:c", ("key", "a=b:c")),
        ("key  :  value", ("key", "value")),
        ("key value with spaces", ("key", "value with spaces")),
        ("key=value   ", ("key", "value   ")),
        ("=value", ("", "value")),
    ],
)
def test_separators_and_whitespace(line: str, expected: tuple[str, str]) -> None:
    assert parse_properties(line) == dict([expected])


def test_comments_and_blank_lines_are_skipped() -> None:
    text = "# a comment\n! another\n   # indented comment\n\n   \t \na=1\n#b=2\n"
    assert parse_properties(text) == {"a": "1"}


def test_hash_inside_a_value_is_not_a_comment() -> None:
    assert parse_properties("a=1 # not a comment") == {"a": "1 # not a comment"}


@pytest.mark.parametrize("newline", ["\n", "\r\n", "\r"])
def test_every_line_terminator(newline: str) -> None:
    assert parse_properties(newline.join(["a=1", "b=2", "", "c=3"])) == {"a": "1", "b": "2", "c": "3"}


def test_continuation_joins_lines_and_drops_leading_whitespace() -> None:
    text = "listeners=PLAINTEXT://a:1,\\\n          PLAINTEXT2://b:2\nnext=x"
    assert parse_properties(text) == {"listeners": "PLAINTEXT://a:1,PLAINTEXT2://b:2", "next": "x"}


def test_continuation_line_starting_with_hash_is_not_a_comment() -> None:
    assert parse_properties("a=1\\\n  # part of a\nb=2") == {"a": "1# part of a", "b": "2"}


def test_comment_line_ending_in_backslash_does_not_continue() -> None:
    assert parse_properties("# comment \\\na=1") == {"a": "1"}


def test_even_number_of_backslashes_is_an_escaped_backslash_not_a_continuation() -> None:
    assert parse_properties("a=c:\\\\\nb=2") == {"a": "c:\\", "b": "2"}
    assert parse_properties("a=x\\\\\\\ny") == {"a": "x\\y"}


def test_continuation_at_end_of_text_drops_the_backslash() -> None:
    assert parse_properties("a=1\\") == {"a": "1"}


def test_continuation_into_blank_line_ends_the_value() -> None:
    assert parse_properties("a=1\\\n\nb=2") == {"a": "1", "b": "2"}


def test_continuation_inside_the_key() -> None:
    assert parse_properties("lo\\\n  ng=1") == {"long": "1"}


def test_escapes() -> None:
    text = r"a=tab\there" + "\n" + r"b=\n\r\f" + "\n" + r"c=\q\\\=\:\ x" + "\n" + r"d=caf\u00e9\u0041"
    assert parse_properties(text) == {"a": "tab\there", "b": "\n\r\f", "c": "q\\=: x", "d": "caféA"}


def test_escaped_separators_belong_to_the_key() -> None:
    assert parse_properties(r"a\=b\:c\ d=value") == {"a=b:c d": "value"}


def test_escaped_leading_space_of_value_is_kept() -> None:
    assert parse_properties(r"a=\  x") == {"a": "  x"}


def test_unicode_escape_surrogate_pair_joins_into_one_character() -> None:
    assert parse_properties(r"emoji=\uD83D\uDE00") == {"emoji": "\U0001f600"}


@pytest.mark.parametrize("bad", [r"a=\u12", r"a=\u12G4", r"a=\u"])
def test_malformed_unicode_escape_names_the_line(bad: str) -> None:
    with pytest.raises(PropertiesError, match=r"line 2: malformed \\uXXXX"):
        parse_properties("ok=1\n" + bad)


def test_duplicate_key_keeps_the_last_value() -> None:
    assert parse_properties("a=1\nb=2\na=3") == {"b": "2", "a": "3"}


def test_file_reading_utf8_latin1_and_bom(tmp_path: Path) -> None:
    utf8 = tmp_path / "utf8.properties"
    utf8.write_bytes("\ufeffname=café\n".encode())
    latin1 = tmp_path / "latin1.properties"
    latin1.write_bytes("name=café\n".encode("iso-8859-1"))
    assert read_properties_file(utf8) == {"name": "café"}
    assert read_properties_file(latin1) == {"name": "café"}


def test_override_splits_at_the_first_equals_sign() -> None:
    assert parse_override("log.dirs=/a,/b") == ("log.dirs", "/a,/b")
    assert parse_override("x=a=b") == ("x", "a=b")
    assert parse_override(" key =") == ("key", "")
    assert parse_override(r"k=\t") == ("k", r"\t")


@pytest.mark.parametrize("bad", ["novalue", "=value", "  =x", ""])
def test_malformed_override(bad: str) -> None:
    with pytest.raises(PropertiesError, match="KEY=VALUE"):
        parse_override(bad)


def test_later_override_wins() -> None:
    assert parse_overrides(["a=1", "b=2", "a=3"]) == {"b": "2", "a": "3"}
