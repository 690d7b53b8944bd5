"""The decoded form of a message or nested struct."""

from __future__ import annotations

from typing import Any


class MessageData(dict[str, Any]):
    """A decoded struct: a dict of field name to value that also allows attribute access.

    Fields absent from the decoded version hold their declared defaults, so handlers read one
    shape whatever version the client spoke. Two slots carry what a byte-identical re-encode
    needs and equality must ignore: the tags that were present on the wire (some encoders
    write tagged fields that hold their default value) and tagged fields this schema does not
    know (kept as raw bytes and written back unchanged).
    """

    # Class-level defaults, so creating a struct (once per array element on decode) costs
    # nothing extra; a decoder overrides them per instance only when the wire had tags.
    present_tags: frozenset[int] = frozenset()
    unknown_tags: dict[int, bytes] | None = None
    _META = frozenset(("present_tags", "unknown_tags"))

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None

    def __setattr__(self, name: str, value: Any) -> None:
        if name in MessageData._META:
            object.__setattr__(self, name, value)
        else:
            self[name] = value

    def __repr__(self) -> str:
        inner = ", ".join(f"{k}={v!r}" for k, v in self.items())
        return f"MessageData({inner})"


def to_plain(value: Any) -> Any:
    """Nested MessageData/list → plain dicts and lists (for JSON output and comparisons)."""
    if isinstance(value, dict):
        return {k: to_plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [to_plain(v) for v in value]
    return value
