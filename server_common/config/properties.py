"""The Java ``.properties`` text format, as ``java.util.Properties.load`` reads it, plus ``KEY=VALUE``.

Operators copy ``server.properties`` files from Kafka installations, so kipling must read them exactly
as Kafka does (Kafka hands the file to ``java.util.Properties``). The rules implemented here:

- Natural lines end at ``\\n``, ``\\r`` or ``\\r\\n``. Leading white space (space, tab, form feed) is
  skipped; a line that is then empty is ignored, and one whose first character is ``#`` or ``!`` is a
  comment. A comment line never continues onto the next line, whatever it ends with.
- A line ending in an odd number of backslashes continues on the next natural line: the backslash
  and the line break are dropped and so is the leading white space of the continuation line (which
  is never a comment, even if it then starts with ``#``).
- The key runs up to the first unescaped ``=``, ``:`` or white space. White space after the key is
  skipped, then at most one ``=`` or ``:``, then white space again; the rest is the value. Trailing
  white space is part of the value (Kafka trims it when it converts the value to a type).
- In keys and values, ``\\t \\n \\r \\f`` are control characters, ``\\uXXXX`` is a UTF-16 code unit
  (surrogate pairs combine into one character), and a backslash before any other character stands for
  that character.
- A key given twice keeps its last value.

Java reads property files as ISO-8859-1; kipling reads UTF-8 (what editors write today) and falls back
to ISO-8859-1 only for bytes that are not UTF-8, so both kinds of file load.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from pathlib import Path

_WHITESPACE = " \t\f"
_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_SIMPLE_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
_HEX_DIGITS = frozenset("0123456789abcdefABCDEF")


class PropertiesError(ValueError):
    """A malformed properties text or override; ``line`` is 1-based when it comes from a file."""

    def __init__(self, message: str, line: int | None = None) -> None:
        super().__init__(message if line is None else f"line {line}: {message}")
        self.line = line


def parse_properties(text: str) -> dict[str, str]:
    """Parse properties text into a dict of keys to values, in file order, last duplicate winning."""
    result: dict[str, str] = {}
    for line_no, logical in _logical_lines(text):
        raw_key, raw_value = _split_key_value(logical)
        key = unescape(raw_key, line_no)
        # Re-insert so the key's position reflects its last definition, as its value does.
        result.pop(key, None)
        result[key] = unescape(raw_value, line_no)
    return result


def read_properties_file(path: Path) -> dict[str, str]:
    """Read and parse a properties file (UTF-8, or ISO-8859-1 when the bytes are not UTF-8)."""
    data = path.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = data.decode("iso-8859-1")
    return parse_properties(text.removeprefix("\ufeff"))


def parse_override(text: str) -> tuple[str, str]:
    """Split one command-line override ``KEY=VALUE`` at its first ``=``.

    No escapes apply (the shell already did the quoting); the key is stripped of surrounding white
    space and must not be empty, the value is kept as given and may be empty.
    """
    key, sep, value = text.partition("=")
    key = key.strip()
    if not sep or not key:
        raise PropertiesError(f"invalid override {text!r}: expected KEY=VALUE")
    return key, value


def parse_overrides(items: Sequence[str]) -> dict[str, str]:
    """Parse overrides in order; a key given twice keeps its last value, as on a command line."""
    result: dict[str, str] = {}
    for item in items:
        key, value = parse_override(item)
        result.pop(key, None)
        result[key] = value
    return result


def unescape(text: str, line: int | None = None) -> str:
    """Resolve the backslash escapes of a key or value (see the module docstring)."""
    if "\\" not in text:
        return text
    out: list[str] = []
    i = 0
    n = len(text)
    while i < n:
        ch = text[i]
        if ch != "\\":
            out.append(ch)
            i += 1
            continue
        if i + 1 >= n:
            # Only reachable for text not produced by the line reader; a lone backslash means nothing.
            i += 1
            continue
        nxt = text[i + 1]
        if nxt == "u":
            digits = text[i + 2 : i + 6]
            if len(digits) != 4 or not set(digits) <= _HEX_DIGITS:
                raise PropertiesError(f"malformed \\uXXXX escape {text[i : i + 6]!r}", line)
            out.append(chr(int(digits, 16)))
            i += 6
        else:
            out.append(_SIMPLE_ESCAPES.get(nxt, nxt))
            i += 2
    joined = "".join(out)
    # \uD83D\uDE00 arrives as two surrogate code units; Java strings hold UTF-16, so join the pair.
    return joined.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def _logical_lines(text: str) -> Iterator[tuple[int, str]]:
    """Yield (first natural line number, logical line) with continuations joined, comments dropped."""
    pending: list[str] | None = None
    start = 0
    for line_no, natural in enumerate(_LINE_BREAK.split(text), start=1):
        stripped = natural.lstrip(_WHITESPACE)
        if pending is None:
            if not stripped or stripped[0] in "#!":
                continue
            pending = []
            start = line_no
        trailing = len(stripped) - len(stripped.rstrip("\\"))
        if trailing % 2 == 1:
            pending.append(stripped[:-1])
            continue
        pending.append(stripped)
        yield start, "".join(pending)
        pending = None
    if pending is not None:
        # The text ended right after a continuation backslash: the backslash is simply dropped.
        yield start, "".join(pending)


def _split_key_value(line: str) -> tuple[str, str]:
    """Split a logical line (no leading white space) into its still-escaped key and value."""
    n = len(line)
    i = 0
    while i < n:
        ch = line[i]
        if ch == "\\":
            i += 2
            continue
        if ch in "=:" or ch in _WHITESPACE:
            break
        i += 1
    key_end = min(i, n)
    j = key_end
    while j < n and line[j] in _WHITESPACE:
        j += 1
    if j < n and line[j] in "=:":
        j += 1
        while j < n and line[j] in _WHITESPACE:
            j += 1
    return line[:key_end], line[j:]
