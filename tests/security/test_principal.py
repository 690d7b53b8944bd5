"""Principals, certificate subjects as Java names them, and ssl.principal.mapping.rules.

The expected distinguished names were printed by Java 17's ``X500Principal.getName()`` for
certificates whose subjects ``ssl._ssl._test_decode_cert`` reported as the tuples below (the form
``getpeercert()["subject"]`` takes). The mapping cases are Kafka's SslPrincipalMapperTest and the
examples of its security documentation.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from security.principal import (
    ANONYMOUS,
    KafkaPrincipal,
    NoMatchingRuleError,
    SslPrincipalMapper,
    distinguished_name,
)

# --- KafkaPrincipal ----------------------------------------------------------------------------


def test_principal_string_form() -> None:
    assert str(KafkaPrincipal("User", "alice")) == "User:alice"
    assert str(ANONYMOUS) == "User:ANONYMOUS"
    assert KafkaPrincipal.parse("User:alice") == KafkaPrincipal("User", "alice")
    assert KafkaPrincipal.parse("User:CN=a:b,O=c") == KafkaPrincipal("User", "CN=a:b,O=c")
    assert KafkaPrincipal.parse("User:*").name == "*"


@pytest.mark.parametrize("text", ["", "alice", "User"])
def test_principal_parse_needs_a_type(text: str) -> None:
    with pytest.raises(ValueError, match="expected a string in format principalType:principalName"):
        KafkaPrincipal.parse(text)


@given(st.text(st.characters(blacklist_characters=":")), st.text())
def test_principal_round_trips(principal_type: str, name: str) -> None:
    principal = KafkaPrincipal(principal_type, name)
    assert KafkaPrincipal.parse(str(principal)) == principal


# --- distinguished_name -------------------------------------------------------------------------

JAVA_NAMES = [
    (
        (
            (("countryName", "US"),),
            (("organizationName", "acme"),),
            (("organizationalUnitName", "eng"),),
            (("commonName", "client"),),
        ),
        "CN=client,OU=eng,O=acme,C=US",
    ),
    (
        (
            (("domainComponent", "com"),),
            (("domainComponent", "example"),),
            (("countryName", "DE"),),
            (("stateOrProvinceName", "Bayern"),),
            (("localityName", "München"),),
            (("streetAddress", "Main St 1"),),
            (("organizationName", "Zoë & Co"),),
            (("userId", "u123"),),
            (("commonName", "zoë"),),
        ),
        "CN=zoë,UID=u123,O=Zoë & Co,STREET=Main St 1,L=München,ST=Bayern,C=DE,DC=example,DC=com",
    ),
    (
        (
            (("organizationName", 'a,b+c"d\\e<f>g;h=i#j'),),
            (("organizationalUnitName", " lead and trail  "),),
            (("commonName", "#hash"),),
        ),
        'CN=\\#hash,OU=\\ lead and trail\\ \\ ,O=a\\,b\\+c\\"d\\\\e\\<f\\>g\\;h\\=i\\#j',
    ),
    (
        ((("commonName", "client"),), (("emailAddress", "john@example.com"),)),
        "1.2.840.113549.1.9.1=#16106a6f686e406578616d706c652e636f6d,CN=client",
    ),
    (
        ((("countryName", "US"),), (("organizationalUnitName", "eng"), ("commonName", "client"))),
        "OU=eng+CN=client,C=US",
    ),
    (
        (
            (("serialNumber", "1234"),),
            (("surname", "Doe"),),
            (("givenName", "John"),),
            (("title", "Dr"),),
            (("1.2.3.4.5", "custom"),),
            (("description", "x" * 200),),
            (("commonName", "o"),),
        ),
        "CN=o,2.5.4.13=#0c81c8" + "78" * 200 + ",1.2.3.4.5=#0c06637573746f6d,2.5.4.12=#0c024472,"
        "2.5.4.42=#0c044a6f686e,2.5.4.4=#0c03446f65,2.5.4.5=#130431323334",
    ),
    ((), ""),
]


@pytest.mark.parametrize(("subject", "java_name"), JAVA_NAMES)
def test_distinguished_name_is_what_java_writes(
    subject: tuple[tuple[tuple[str, str], ...], ...], java_name: str
) -> None:
    assert distinguished_name(subject) == java_name


def test_distinguished_name_escapes_nul_and_carriage_return() -> None:
    assert distinguished_name([[("commonName", "a\x00b")]]) == "CN=a\\00b"
    assert distinguished_name([[("commonName", "\ra\r")]]) == "CN=\\\ra\\\r"
    assert distinguished_name([[("commonName", " ")]]) == "CN=\\ "


def test_an_attribute_openssl_knows_by_name_is_written_as_its_oid() -> None:
    assert distinguished_name([[("pseudonym", "p")]]) == "2.5.4.65=#0c0170"
    assert distinguished_name([[("houseIdentifier", "h")]]) == "2.5.4.51=#0c0168"  # from OpenSSL's table


# --- SslPrincipalMapper --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rules", "rendered"),
    [
        ("", "[]"),
        ("DEFAULT", "[DEFAULT]"),
        ("RULE://", "[RULE:/]"),
        ("RULE:/.*/", "[RULE:/.*]"),
        ("RULE:/.*/L", "[RULE:/.*/L]"),
        ("RULE://,DEFAULT", "[RULE:/, DEFAULT]"),
        ("  RULE:// ,  DEFAULT  ", "[RULE:/, DEFAULT]"),
        ("  RULE:   /     / ,  DEFAULT  ", "[RULE:   /     , DEFAULT]"),
        ("  RULE:  /     /U   ,DEFAULT  ", "[RULE:  /     /U, DEFAULT]"),
        (
            "  RULE:([A-Z]*)/$1/U   ,RULE:([a-z]+)/$1/,   DEFAULT  ",
            "[RULE:([A-Z]*)/$1/U, RULE:([a-z]+)/$1, DEFAULT]",
        ),
        (",   , , ,      , , ,   ", "[]"),
        (",,RULE://,,,DEFAULT,,", "[RULE:/, DEFAULT]"),
        (",  , RULE: /   /    ,,,   DEFAULT, ,   ", "[RULE: /   , DEFAULT]"),
        ("     ,  , RULE:   /  /U    ,,  ,DEFAULT, ,", "[RULE:   /  /U, DEFAULT]"),
        (r"RULE:\/\\\(\)\n\t/\/\//", r"[RULE:\/\\\(\)\n\t/\/\/]"),
        (r"RULE:\**\/+/*/L,RULE:\/*\**/**/", r"[RULE:\**\/+/*/L, RULE:\/*\**/**]"),
        (
            r"RULE:,RULE:,/,RULE:,\//U,RULE:,/RULE:,/,RULE:,RULE:,/L,RULE:,/L,"
            r"RULE:, DEFAULT, /DEFAULT/,DEFAULT",
            r"[RULE:,RULE:,/,RULE:,\//U, RULE:,/RULE:,, RULE:,RULE:,/L,RULE:,/L, "
            r"RULE:, DEFAULT, /DEFAULT, DEFAULT]",
        ),
        (
            "RULE:^CN=(.*?)$/$1/L\nRULE:^(.*)$/$1/\n DEFAULT",
            "[RULE:^CN=(.*?)$/$1/L, RULE:^(.*)$/$1, DEFAULT]",
        ),
    ],
)
def test_rules_split_as_kafka_splits_them(rules: str, rendered: str) -> None:
    assert repr(SslPrincipalMapper.from_rules(rules)) == f"SslPrincipalMapper(rules = {rendered})"


@pytest.mark.parametrize(
    "rules",
    [
        "DEFAULT",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, DEFAULT",
        "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/",
        "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L",
        "RULE:^cn=(.?),ou=(.?),dc=(.?),dc=(.?)$/$1@$2/U",
        "RULE:^CN=([^,ADEFLTU,]+)(,.*|$)/$1/",
        "RULE:^CN=([^,DEFAULT,]+)(,.*|$)/$1/",
    ],
)
def test_kafkas_valid_rules(rules: str) -> None:
    SslPrincipalMapper.from_rules(rules)


@pytest.mark.parametrize(
    "rules",
    [
        "default",
        "DEFAUL",
        "DEFAULT/L",
        "DEFAULT/U",
        "RULE:CN=(.*?),OU=ServiceUsers.*/$1",
        "rule:^CN=(.*?),OU=ServiceUsers.*$/$1/",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L/U",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/L",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/U",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/LU",
        "RULE:^CN=((.*$/$1/",  # not a regular expression
        "RULE:^CN=(.*)$/$x/",  # a $ that is no group reference
        "RULE:^CN=(.*)$/${nope}/",
    ],
)
def test_kafkas_invalid_rules(rules: str) -> None:
    with pytest.raises(ValueError, match=r"^Invalid rule: `"):
        SslPrincipalMapper.from_rules(rules)


def test_kafkas_mapping_examples() -> None:
    mapper = SslPrincipalMapper.from_rules(
        ", ".join(
            [
                "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L",
                "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L",
                "RULE:^cn=(.*?),ou=(.*?),dc=(.*?),dc=(.*?)$/$1@$2/U",
                "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U",
                "DEFAULT",
            ]
        )
    )
    assert mapper.name("CN=Duke,OU=ServiceUsers,O=Org,C=US") == "duke"
    assert mapper.name("CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US") == "duke@sme"
    assert mapper.name("cn=duke,ou=sme,dc=mycp,dc=com") == "DUKE@SME"
    assert mapper.name("cN=duke,OU=JavaSoft,O=Sun Microsystems") == "DUKE"
    assert mapper.name("OU=JavaSoft,O=Sun Microsystems,C=US") == "OU=JavaSoft,O=Sun Microsystems,C=US"


def test_kafka_documentation_example() -> None:
    mapper = SslPrincipalMapper.from_rules(
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,\n"
        "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,\n"
        "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L,\n"
        "DEFAULT"
    )
    dn = "CN=serviceuser,OU=ServiceUsers,O=Unknown,L=Unknown,ST=Unknown,C=Unknown"
    assert mapper.name(dn) == "serviceuser"
    dn = "CN=adminUser,OU=Admin,O=Unknown,L=Unknown,ST=Unknown,C=Unknown"
    assert mapper.name(dn) == "adminuser@admin"


def test_comma_with_whitespace_in_the_pattern() -> None:
    mapper = SslPrincipalMapper.from_rules(r"RULE:^CN=((\\, *|\w)+)(,.*|$)/$1/,DEFAULT")
    assert mapper.name(r"CN=Tkac\, Adam,OU=ITZ,DC=geodis,DC=cz") == r"Tkac\, Adam"


def test_default_rules_keep_the_name() -> None:
    assert SslPrincipalMapper.from_rules().name("CN=client,OU=eng") == "CN=client,OU=eng"
    assert SslPrincipalMapper.from_rules("DEFAULT").rules == ("DEFAULT",)


def test_no_matching_rule() -> None:
    mapper = SslPrincipalMapper.from_rules("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/")
    with pytest.raises(NoMatchingRuleError) as info:
        mapper.name("CN=x,OU=Other")
    assert str(info.value) == "No rules apply to CN=x,OU=Other, rules [RULE:^CN=(.*?),OU=ServiceUsers.*$/$1]"
    assert isinstance(info.value, ValueError)
    with pytest.raises(NoMatchingRuleError, match="rules \\[\\]"):
        SslPrincipalMapper.from_rules("").name("CN=x")


@pytest.mark.parametrize(
    ("rule", "dn", "name"),
    [
        ("RULE:^CN=(.*)$/\\$1 is $1/", "CN=a", "$1 is a"),  # \$ is a literal $
        ("RULE:^CN=(.*)$/$2-$1/", "CN=a", "$2-a"),  # Kafka makes a missing group literal
        ("RULE:^CN=(.*)$/$12/", "CN=a", "a2"),  # Java reads digits while they name a group
        ("RULE:^CN=(.*)$/$0!/", "CN=a", "CN=a!"),  # group 0 is the whole name
        ("RULE:^CN=(?<user>.*)$/${user}@x/", "CN=a", "a@x"),  # Java's named groups
        ("RULE:^CN=(a)?(.*)$/[$1]$2/", "CN=b", "[]b"),  # a group that took no part is empty
        ("RULE:^CN=x$/\\/slash\\\\/", "CN=x", "/slash\\"),
        ("RULE:.*/[$0]/", "CN=x", "[CN=x][]"),  # replaceAll also replaces the empty match at the end
        ("RULE:^CN=(.*)$/\\u$1/U", "CN=ab", "UAB"),
    ],
)
def test_replacement_as_java_reads_it(rule: str, dn: str, name: str) -> None:
    assert SslPrincipalMapper.from_rules(rule).name(dn) == name


def test_rules_see_the_name_distinguished_name_gives() -> None:
    subject = (
        (("countryName", "US"),),
        (("organizationalUnitName", "ServiceUsers"),),
        (("commonName", "Svc"),),
    )
    mapper = SslPrincipalMapper.from_rules("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, DEFAULT")
    assert KafkaPrincipal("User", mapper.name(distinguished_name(subject))) == KafkaPrincipal("User", "svc")
