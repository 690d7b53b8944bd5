"""The JAAS text of sasl.jaas.config: Kafka's documented forms, tokenizer details, and errors that
name what is wrong without echoing a value (values are passwords)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from security.jaas import (
    PLAIN_LOGIN_MODULE,
    SCRAM_LOGIN_MODULE,
    JaasConfig,
    login_credentials,
    parse_jaas,
    plain_users,
)

KAFKA_DOCS_PLAIN = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";'
)


def test_kafka_documented_plain_broker_config() -> None:
    config = parse_jaas(KAFKA_DOCS_PLAIN)
    assert config.login_module == PLAIN_LOGIN_MODULE
    assert config.control_flag == "required"
    assert dict(config.options) == {
        "username": "admin",
        "password": "admin-secret",
        "user_admin": "admin-secret",
        "user_alice": "alice-secret",
    }
    assert plain_users(config) == {"admin": "admin-secret", "alice": "alice-secret"}
    assert login_credentials(config) == ("admin", "admin-secret")


def test_kafka_documented_scram_client_config_across_lines() -> None:
    config = parse_jaas(
        "org.apache.kafka.common.security.scram.ScramLoginModule required\n"
        '    username="alice"\n'
        '    password="alice-secret";\n'
    )
    assert config.login_module == SCRAM_LOGIN_MODULE
    assert login_credentials(config) == ("alice", "alice-secret")
    with pytest.raises(ValueError, match="SASL/PLAIN users are options of"):
        plain_users(config)


def test_values_quoted_unquoted_and_escaped() -> None:
    config = parse_jaas(
        'M Required a=bare b=\'single "q"\' c="with spaces; and = signs" '
        'd="esc \\" \\\\ \\n \\t \\101\\7" e=12;'
    )
    assert config.control_flag == "required"
    assert dict(config.options) == {
        "a": "bare",
        "b": 'single "q"',
        "c": "with spaces; and = signs",
        "d": 'esc " \\ \n \t A\x07',
        "e": "12",
    }


def test_comments_and_whitespace_are_skipped() -> None:
    config = parse_jaas(
        "// a broker's PLAIN users\n"
        "org.apache.kafka.common.security.plain.PlainLoginModule /* flag: */ optional\n"
        '\tuser_bob="bob/secret" // bob\n'
        "  ;  "
    )
    assert config.control_flag == "optional"
    assert plain_users(config) == {"bob": "bob/secret"}


@pytest.mark.parametrize("flag", ["required", "REQUISITE", "Sufficient", "optional"])
def test_control_flags_are_case_insensitive(flag: str) -> None:
    assert parse_jaas(f"M {flag};").control_flag == flag.lower()


def test_options_are_read_only_and_repr_hides_values() -> None:
    config = parse_jaas(KAFKA_DOCS_PLAIN)
    with pytest.raises(TypeError):
        config.options["user_eve"] = "x"  # type: ignore[index]
    assert "secret" not in repr(config)
    assert "user_alice" in repr(config)
    assert isinstance(config, JaasConfig)


def test_last_duplicate_option_wins_as_in_kafka() -> None:
    assert parse_jaas('M required a="1" a="2";').options["a"] == "2"


def test_plain_users_skip_an_empty_name() -> None:
    assert plain_users(parse_jaas(f'{PLAIN_LOGIN_MODULE} required user_="x" user_a="y" users="z";')) == {
        "a": "y"
    }


def test_login_credentials_need_username_and_password() -> None:
    with pytest.raises(ValueError, match="has no password option"):
        login_credentials(parse_jaas('M required username="a";'))
    with pytest.raises(ValueError, match="has no username or password option"):
        login_credentials(parse_jaas("M required;"))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "Login module not specified in JAAS config"),
        ("  // nothing\n", "Login module not specified in JAAS config"),
        ("; M required;", "Login module not specified in JAAS config"),
        ("M", "Login module control flag not specified in JAAS config"),
        ("M ;", "Login module control flag is not available in the JAAS config"),
        ("M mandatory;", "Invalid login module control flag 'mandatory' in JAAS config"),
        ('M required password="s3cret"', "JAAS config entry not terminated by semi-colon"),
        ("M required; N required;", "JAAS config property contains 2 login modules, should be 1 module"),
        ('M required password="s3cret', "Unterminated quoted string in JAAS config"),
        ('M required password="s3cret\n";', "Unterminated quoted string in JAAS config"),
        ("M required password=s3/cret;", "Unquoted '/' in JAAS config: quote option values that contain '/'"),
        ("M required /* open", "Unterminated /* comment in JAAS config"),
        ("M required password=;", "Value not specified for key 'password' in JAAS config"),
        ("M required password==;", "Value not specified for key 'password' in JAAS config"),
        ("M required password", "Option name and '=' expected after the control flag in JAAS config"),
        (
            'M required username="a" password=my s3cret;',
            "Option name and '=' expected after option 'password' in JAAS config (quote values with spaces)",
        ),
        ('M required "s3cret";', "Option name and '=' expected after the control flag in JAAS config"),
    ],
)
def test_errors_say_what_is_wrong_without_values(text: str, message: str) -> None:
    with pytest.raises(ValueError) as info:
        parse_jaas(text)
    assert str(info.value).startswith(message)
    assert "s3cret" not in str(info.value) and "\n" not in str(info.value)


@given(
    options=st.dictionaries(
        st.from_regex(r"[A-Za-z_][A-Za-z0-9_.]*", fullmatch=True),
        st.text(st.characters(blacklist_characters="\n\r")),
        max_size=5,
    )
)
def test_double_quoted_values_round_trip(options: dict[str, str]) -> None:
    def quote(value: str) -> str:
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'

    text = "M required " + " ".join(f"{k}={quote(v)}" for k, v in options.items()) + ";"
    assert dict(parse_jaas(text).options) == options
