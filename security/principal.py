"""Who a connection is: Kafka principals, TLS client certificate names, and the mapping rules.

A principal is ``User:<name>``: the SASL username, or for a TLS client certificate the name that
``ssl.principal.mapping.rules`` makes of the certificate's subject. Kafka hands those rules the
subject as Java's ``X500Principal.getName()`` writes it (RFC 2253); :func:`distinguished_name`
writes Python's ``getpeercert()["subject"]`` the same way, so rules written for a Kafka cluster
(and the ACLs naming their results) keep working unchanged.
"""

from __future__ import annotations

import re
import ssl
from collections.abc import Sequence
from dataclasses import dataclass

USER_TYPE = "User"


@dataclass(frozen=True, slots=True)
class KafkaPrincipal:
    """A principal as ACLs name it: ``User:alice``."""

    principal_type: str
    name: str

    def __str__(self) -> str:
        return f"{self.principal_type}:{self.name}"

    @classmethod
    def parse(cls, text: str) -> KafkaPrincipal:
        """``User:alice`` as a principal (Kafka's SecurityUtils.parseKafkaPrincipal).

        The type ends at the first ``:``; the name is the rest and may contain ``:`` itself.
        """
        principal_type, sep, name = text.partition(":")
        if not text or not sep:
            raise ValueError(f"expected a string in format principalType:principalName but got {text}")
        return cls(principal_type, name)


ANONYMOUS = KafkaPrincipal(USER_TYPE, "ANONYMOUS")
"""The principal of an unauthenticated (PLAINTEXT, or TLS without a client certificate) connection."""


# --- the subject of a certificate as X500Principal.getName() writes it ----------------------------

# The keywords Java writes in RFC 2253 form, by OpenSSL's long name (which getpeercert() reports).
_KEYWORDS = {
    "commonName": "CN",
    "countryName": "C",
    "localityName": "L",
    "stateOrProvinceName": "ST",
    "organizationName": "O",
    "organizationalUnitName": "OU",
    "streetAddress": "STREET",
    "domainComponent": "DC",
    "userId": "UID",
}

_UTF8STRING, _PRINTABLESTRING, _IA5STRING = 0x0C, 0x13, 0x16

# Other attributes Java writes as ``OID=#<hex of the DER value>``. getpeercert() has lost the
# value's ASN.1 string type, so it is the type the standards fix (IA5String for an e-mail address,
# PrintableString for serial numbers and country codes) or else UTF8String, which OpenSSL writes
# by default (string_mask utf8only).
_OIDS = {
    "emailAddress": ("1.2.840.113549.1.9.1", _IA5STRING),
    "serialNumber": ("2.5.4.5", _PRINTABLESTRING),
    "dnQualifier": ("2.5.4.46", _PRINTABLESTRING),
    "jurisdictionCountryName": ("1.3.6.1.4.1.311.60.2.1.3", _PRINTABLESTRING),
    "jurisdictionStateOrProvinceName": ("1.3.6.1.4.1.311.60.2.1.2", _UTF8STRING),
    "jurisdictionLocalityName": ("1.3.6.1.4.1.311.60.2.1.1", _UTF8STRING),
    "surname": ("2.5.4.4", _UTF8STRING),
    "title": ("2.5.4.12", _UTF8STRING),
    "description": ("2.5.4.13", _UTF8STRING),
    "businessCategory": ("2.5.4.15", _UTF8STRING),
    "postalCode": ("2.5.4.17", _UTF8STRING),
    "name": ("2.5.4.41", _UTF8STRING),
    "givenName": ("2.5.4.42", _UTF8STRING),
    "initials": ("2.5.4.43", _UTF8STRING),
    "generationQualifier": ("2.5.4.44", _UTF8STRING),
    "pseudonym": ("2.5.4.65", _UTF8STRING),
    "organizationIdentifier": ("2.5.4.97", _UTF8STRING),
    "unstructuredName": ("1.2.840.113549.1.9.2", _IA5STRING),
}

_ESCAPED = ',=+<>#;"\\'
_DOTTED_OID = re.compile(r"[0-9]+(\.[0-9]+)+")


def distinguished_name(subject: Sequence[Sequence[tuple[str, str]]]) -> str:
    """The RFC 2253 name Java's ``X500Principal.getName()`` gives for a certificate subject.

    ``subject`` is ``ssl.SSLSocket.getpeercert()["subject"]``: the RDNs in certificate order, each
    a sequence of (attribute, value) pairs. Java writes the RDNs last first, joins the attributes
    of a multi-valued RDN with ``+``, uses the keywords CN, C, L, ST, O, OU, STREET, DC and UID,
    and writes any other attribute as its OID with the value's DER encoding in hex.
    """
    return ",".join("+".join(_attribute(name, value) for name, value in rdn) for rdn in reversed(subject))


def _attribute(name: str, value: str) -> str:
    keyword = _KEYWORDS.get(name)
    if keyword is not None:
        return f"{keyword}={_escape(value)}"
    oid, tag = _OIDS.get(name, (_oid_of(name), _UTF8STRING))
    return f"{oid}=#{_der_string(tag, value).hex()}"


def _oid_of(name: str) -> str:
    """The dotted OID of an attribute OpenSSL names ``name`` (it reports unknown ones dotted)."""
    if _DOTTED_OID.fullmatch(name):
        return name
    try:
        return ssl._ASN1Object.fromname(name).oid
    except ValueError:
        return name


def _der_string(tag: int, value: str) -> bytes:
    data = value.encode("utf-8")
    length = len(data)
    if length < 0x80:
        return bytes([tag, length]) + data
    size = length.to_bytes((length.bit_length() + 7) // 8)
    return bytes([tag, 0x80 | len(size)]) + size + data


def _escape(value: str) -> str:
    """RFC 2253 escaping as Java does it: ``, = + < > # ; " \\`` anywhere, NUL as ``\\00``, and
    leading and trailing spaces (and carriage returns)."""
    chars = ["\\00" if c == "\x00" else f"\\{c}" if c in _ESCAPED else c for c in value]
    lead = 0
    while lead < len(chars) and chars[lead] in (" ", "\r"):
        chars[lead] = "\\" + chars[lead]
        lead += 1
    trail = len(chars) - 1
    while trail >= lead and chars[trail] in (" ", "\r"):
        chars[trail] = "\\" + chars[trail]
        trail -= 1
    return "".join(chars)


# --- ssl.principal.mapping.rules ------------------------------------------------------------------

DEFAULT_RULES = "DEFAULT"


class NoMatchingRuleError(ValueError):
    """No rule maps a name (Kafka's SslPrincipalMapper.NoMatchingRule): the connection is refused."""


@dataclass(frozen=True, slots=True)
class _Rule:
    pattern: re.Pattern[str] | None  # None for DEFAULT
    source: str  # the pattern as written
    replacement: str
    parts: tuple[str | int, ...]  # the replacement: literal text, or a group number
    case: str  # "", "L" or "U"

    def apply(self, name: str) -> str | None:
        if self.pattern is None:
            return name
        if self.pattern.fullmatch(name) is None:
            return None
        # Java's String.replaceAll: every match, not only the whole-name one (a pattern that also
        # matches the empty string at the end replaces twice, in Java as in Python 3.7+).
        result = self.pattern.sub(self._expand, name)
        if self.case == "L":
            return result.lower()
        if self.case == "U":
            return result.upper()
        return result

    def _expand(self, match: re.Match[str]) -> str:
        return "".join(part if isinstance(part, str) else match.group(part) or "" for part in self.parts)

    def __str__(self) -> str:
        """Kafka's rendering of a rule (SslPrincipalMapper.Rule.toString)."""
        if self.pattern is None:
            return "DEFAULT"
        flag = f"/{self.case}" if self.case else ""
        return f"RULE:{self.source}/{self.replacement}{flag}"


class SslPrincipalMapper:
    """Kafka's ``ssl.principal.mapping.rules``: the first rule that applies names the principal.

    Rules are separated by commas (a newline separates them too; Kafka would drop the rules before
    it). ``DEFAULT`` keeps the distinguished name as it is. ``RULE:pattern/replacement/`` applies
    when the regular expression matches the whole name and replaces it, with ``$1`` (or ``${name}``)
    for groups and ``\\`` escaping ``/``, ``$`` and ``\\``; ``/L`` or ``/U`` after the last ``/``
    lower- or upper-cases the result. Patterns are Python's ``re``, which agrees with Java's regular
    expressions on what these rules use (``(?<name>...)`` is translated).
    """

    def __init__(self, rules: Sequence[_Rule]) -> None:
        self._rules = tuple(rules)

    @classmethod
    def from_rules(cls, rules: str | None = None) -> SslPrincipalMapper:
        """The mapper for the text of ``ssl.principal.mapping.rules`` (None means ``DEFAULT``)."""
        return cls(_parse_rules(DEFAULT_RULES if rules is None else rules))

    @property
    def rules(self) -> tuple[str, ...]:
        """The rules in Kafka's rendering, in the order they are tried."""
        return tuple(str(rule) for rule in self._rules)

    def name(self, dn: str) -> str:
        """The principal name for the distinguished name ``dn``; NoMatchingRuleError if no rule applies."""
        for rule in self._rules:
            result = rule.apply(dn)
            if result is not None:
                return result
        raise NoMatchingRuleError(f"No rules apply to {dn}, rules [{', '.join(self.rules)}]")

    def __repr__(self) -> str:
        return f"SslPrincipalMapper(rules = [{', '.join(self.rules)}])"


def _parse_rules(text: str) -> list[_Rule]:
    rules = []
    i, end = 0, len(text)
    while i < end:
        if text[i].isspace() or text[i] == ",":
            i += 1  # an empty rule is ignored, as in Kafka
            continue
        start = i
        if text.startswith("RULE:", i):
            source, i = _until_slash(text, i + len("RULE:"), start)
            replacement, i = _until_slash(text, i, start)
            case = text[i] if i < end and text[i] in "LU" else ""
            i += len(case)
            rule = _rule(text[start:i], source, replacement, case)
        elif text.startswith("DEFAULT", i):
            i += len("DEFAULT")
            rule = _Rule(None, "", "", (), "")
        else:
            i = _rule_end(text, i)
            raise ValueError(f"Invalid rule: `{text[start:i].strip()}`")
        after = _rule_end(text, i)
        if text[i:after].strip():
            whole = text[start:after].strip()
            raise ValueError(f"Invalid rule: `{whole}`, unmatched substring: `{text[i:after].strip()}`")
        rules.append(rule)
        i = after
    return rules


def _rule_end(text: str, i: int) -> int:
    """The index of the comma or newline that ends the rule at ``i`` (or the end of the text)."""
    while i < len(text) and text[i] not in ",\n\r":
        i += 1
    return i


def _until_slash(text: str, i: int, start: int) -> tuple[str, int]:
    """The text up to the next unescaped ``/`` (escapes kept), and the index after the slash."""
    begin = i
    while i < len(text):
        if text[i] == "\\":
            i += 2
        elif text[i] == "/":
            return text[begin:i], i + 1
        else:
            i += 1
    written = text[start : _rule_end(text, start)].strip()
    raise ValueError(f"Invalid rule: `{written}`: expected RULE:pattern/replacement/")


def _rule(written: str, source: str, replacement: str, case: str) -> _Rule:
    try:
        pattern = re.compile(re.sub(r"(?<!\\)\(\?<(?=[A-Za-z])", "(?P<", source))
    except re.error as e:
        raise ValueError(f"Invalid rule: `{written}`: {e}") from None
    return _Rule(pattern, source, replacement, _replacement_parts(written, replacement, pattern), case)


def _replacement_parts(written: str, replacement: str, pattern: re.Pattern[str]) -> tuple[str | int, ...]:
    """The replacement as literal text and group numbers, as Java's Matcher reads it.

    ``$12`` is group 12 if the pattern has 12 groups, else group 1 followed by "2" (Java reads
    digits while the number stays a group); a ``$n`` whose first digit already names no group stays
    literal (Kafka escapes it); a ``$`` followed by anything else is an error.
    """
    groups = pattern.groups
    parts: list[str | int] = []
    literal: list[str] = []
    i = 0
    while i < len(replacement):
        char = replacement[i]
        if char == "\\":
            literal.append(replacement[i + 1 : i + 2])
            i += 2
            continue
        if char != "$":
            literal.append(char)
            i += 1
            continue
        digits = re.match(r"[0-9]+", replacement[i + 1 :])
        named = re.match(r"\{([A-Za-z][A-Za-z0-9]*)\}", replacement[i + 1 :])
        if digits and digits.group()[0] != "0" and int(digits.group()[0]) > groups:
            literal.append("$")  # Kafka escapes a reference to a group the pattern lacks
            i += 1
            continue
        if digits:
            count = _java_digits(digits.group(), groups)
            ref = int(digits.group()[:count])
            i += 1 + count
        elif named and named.group(1) in pattern.groupindex:
            ref = pattern.groupindex[named.group(1)]
            i += 1 + len(named.group())
        else:
            raise ValueError(f"Invalid rule: `{written}`: illegal group reference in the replacement")
        parts.append("".join(literal))
        literal = []
        parts.append(ref)
    parts.append("".join(literal))
    return tuple(part for part in parts if part != "")


def _java_digits(digits: str, groups: int) -> int:
    """How many digits Java's Matcher reads as the group number: while the number stays a group."""
    count, number = 1, int(digits[0])
    while count < len(digits) and number * 10 + int(digits[count]) <= groups:
        number = number * 10 + int(digits[count])
        count += 1
    return count


__all__ = [
    "ANONYMOUS",
    "DEFAULT_RULES",
    "USER_TYPE",
    "KafkaPrincipal",
    "NoMatchingRuleError",
    "SslPrincipalMapper",
    "distinguished_name",
]
