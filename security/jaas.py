"""The JAAS text Kafka accepts in ``sasl.jaas.config`` and ``listener.name.<l>.<mech>.sasl.jaas.config``.

The grammar is Kafka's ``JaasConfig`` (a ``java.io.StreamTokenizer`` set up for it)::

    <loginModuleClass> <controlFlag> (<optionName>=<optionValue>)*;

Whitespace separates tokens; values are single- or double-quoted (with the tokenizer's backslash
escapes) or bare words; ``//`` and ``/* */`` are comments; the ``;`` is required; exactly one
login module entry (Kafka refuses more for these keys). Option values are usually passwords, so an
error names options, never values: it only quotes a token followed by ``=`` (an option name).

Two departures, both refusals where Kafka would silently read something else: a lone ``/`` (which
the tokenizer takes as the start of a line comment) and a quote left open at the end of a line.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType

PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"

CONTROL_FLAGS = ("required", "requisite", "sufficient", "optional")

_USER_PREFIX = "user_"
_SPECIAL = ";=\"'/"
_ESCAPES = {"a": "\x07", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\x0b"}


@dataclass(frozen=True)
class JaasConfig:
    """One login module entry: its class, control flag (lower case) and options.

    ``repr`` lists the option names only: the values are passwords.
    """

    login_module: str
    control_flag: str
    options: Mapping[str, str]

    def __repr__(self) -> str:
        names = ", ".join(sorted(self.options))
        return (
            f"JaasConfig(login_module={self.login_module!r}, control_flag={self.control_flag!r}, "
            f"options=[{names}])"
        )


@dataclass(frozen=True, slots=True)
class _Token:
    kind: str  # "word", "quoted", "=" or ";"
    text: str

    @property
    def is_value(self) -> bool:
        return self.kind in ("word", "quoted")


def _tokens(text: str) -> Iterator[_Token]:
    """The tokens of ``text`` as Kafka's StreamTokenizer settings split it."""
    i, end = 0, len(text)
    while i < end:
        char = text[i]
        if char <= " ":
            i += 1
        elif char == "/":
            i = _skip_comment(text, i)
        elif char in ";=":
            yield _Token(char, char)
            i += 1
        elif char in "\"'":
            value, i = _quoted(text, i)
            yield _Token("quoted", value)
        else:
            start = i
            while i < end and text[i] > " " and text[i] not in _SPECIAL:
                i += 1
            yield _Token("word", text[start:i])


def _skip_comment(text: str, i: int) -> int:
    """The index after the comment starting at ``text[i]`` (a ``/``)."""
    following = text[i + 1 : i + 2]
    if following == "/":
        newline = min((p for p in (text.find("\n", i), text.find("\r", i)) if p >= 0), default=len(text))
        return newline
    if following == "*":
        close = text.find("*/", i + 2)
        if close < 0:
            raise ValueError("Unterminated /* comment in JAAS config")
        return close + 2
    raise ValueError("Unquoted '/' in JAAS config: quote option values that contain '/'")


def _quoted(text: str, i: int) -> tuple[str, int]:
    """The value of the quoted string starting at ``text[i]`` and the index after it."""
    quote = text[i]
    out: list[str] = []
    i += 1
    while i < len(text):
        char = text[i]
        if char == quote:
            return "".join(out), i + 1
        if char in "\n\r":
            break
        if char == "\\" and i + 1 < len(text):
            i += 1
            char = text[i]
            if "0" <= char <= "7":
                digits = 3 if char <= "3" else 2
                j = i
                while j < len(text) and j - i < digits and "0" <= text[j] <= "7":
                    j += 1
                out.append(chr(int(text[i:j], 8)))
                i = j
                continue
            out.append(_ESCAPES.get(char, char))
            i += 1
            continue
        out.append(char)
        i += 1
    raise ValueError("Unterminated quoted string in JAAS config")


def parse_jaas(text: str) -> JaasConfig:
    """The one login module entry of ``text``; ValueError saying what is wrong otherwise."""
    tokens = list(_tokens(text))
    entries = []
    pos = 0
    while pos < len(tokens):
        entry, pos = _entry(tokens, pos)
        entries.append(entry)
    if not entries:
        raise ValueError("Login module not specified in JAAS config")
    if len(entries) != 1:
        raise ValueError(f"JAAS config property contains {len(entries)} login modules, should be 1 module")
    return entries[0]


def _entry(tokens: list[_Token], pos: int) -> tuple[JaasConfig, int]:
    module = tokens[pos]
    if not module.is_value or not module.text:
        raise ValueError("Login module not specified in JAAS config")
    pos += 1
    if pos == len(tokens):
        raise ValueError("Login module control flag not specified in JAAS config")
    flag = tokens[pos]
    if not flag.is_value:
        raise ValueError("Login module control flag is not available in the JAAS config")
    if flag.text.lower() not in CONTROL_FLAGS:
        shown = f" '{flag.text}'" if flag.kind == "word" else ""
        raise ValueError(f"Invalid login module control flag{shown} in JAAS config")
    pos += 1
    options: dict[str, str] = {}
    previous = None
    while pos < len(tokens) and tokens[pos].kind != ";":
        key = tokens[pos]
        if not _is_name(tokens, pos) or not key.is_value:
            where = f"after option '{previous}'" if previous else "after the control flag"
            raise ValueError(
                f"Option name and '=' expected {where} in JAAS config (quote values with spaces)"
            )
        value = tokens[pos + 2] if pos + 2 < len(tokens) else None
        if value is None or not value.is_value:
            raise ValueError(f"Value not specified for key '{key.text}' in JAAS config")
        options[key.text] = value.text
        previous = key.text
        pos += 3
    if pos == len(tokens):
        raise ValueError("JAAS config entry not terminated by semi-colon")
    config = JaasConfig(module.text, flag.text.lower(), MappingProxyType(options))
    return config, pos + 1


def _is_name(tokens: list[_Token], pos: int) -> bool:
    """Whether ``tokens[pos]`` is followed by ``=``: then it is an option name, safe to quote."""
    return pos + 1 < len(tokens) and tokens[pos + 1].kind == "="


def plain_users(config: JaasConfig) -> dict[str, str]:
    """The PLAIN users of a broker's PlainLoginModule entry: ``user_<name>="<password>"`` options.

    Kafka's PlainServerCallbackHandler reads these from the PlainLoginModule entry only; another
    module is a configuration error here rather than a listener on which nobody can log in.
    """
    if config.login_module != PLAIN_LOGIN_MODULE:
        raise ValueError(f"SASL/PLAIN users are options of {PLAIN_LOGIN_MODULE}, not {config.login_module}")
    return {
        key[len(_USER_PREFIX) :]: value
        for key, value in config.options.items()
        if key.startswith(_USER_PREFIX) and len(key) > len(_USER_PREFIX)
    }


def login_credentials(config: JaasConfig) -> tuple[str, str]:
    """The ``username`` and ``password`` options: what a client (or an inter-broker link) logs in with."""
    missing = [name for name in ("username", "password") if name not in config.options]
    if missing:
        raise ValueError(f"JAAS config for {config.login_module} has no {' or '.join(missing)} option")
    return config.options["username"], config.options["password"]


__all__ = [
    "CONTROL_FLAGS",
    "PLAIN_LOGIN_MODULE",
    "SCRAM_LOGIN_MODULE",
    "JaasConfig",
    "login_credentials",
    "parse_jaas",
    "plain_users",
]
