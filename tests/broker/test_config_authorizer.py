"""The authorization keys: authorizer.class.name (Kafka's two names of the standard authorizer,
nothing else), super.users and allow.everyone.if.no.acl.found, and the authorizer they build."""

from __future__ import annotations

import pytest

from metadata.authorizer import AllowEverything, StandardAuthorizer, build_authorizer
from metadata.image import MetadataImage
from protocol.acl_types import AclOperation, ResourceType
from server_common.config import BrokerConfig, ConfigError, load_config

STANDARD = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


def config(*overrides: str) -> BrokerConfig:
    cfg, warnings = load_config(None, overrides)
    assert warnings == []
    return cfg


def test_defaults_authorize_nothing() -> None:
    cfg = config()
    assert (cfg.authorizer_class_name, cfg.super_users, cfg.allow_everyone_if_no_acl_found) == ("", "", False)
    authorizer = build_authorizer(cfg, MetadataImage())
    assert isinstance(authorizer, AllowEverything) and not authorizer.enabled
    assert authorizer.authorize("User:x", "10.0.0.1", AclOperation.WRITE, ResourceType.TOPIC, "t")


@pytest.mark.parametrize("name", [STANDARD, "kafka.security.authorizer.AclAuthorizer", f"  {STANDARD} "])
def test_both_names_of_the_standard_authorizer(name: str) -> None:
    cfg = config(
        f"authorizer.class.name={name}",
        "super.users=User:admin;User:ANONYMOUS",
        "allow.everyone.if.no.acl.found=true",
    )
    authorizer = build_authorizer(cfg, MetadataImage())
    assert isinstance(authorizer, StandardAuthorizer) and authorizer.enabled
    assert authorizer.super_users == {"User:admin", "User:ANONYMOUS"}
    assert authorizer.authorize("User:bob", "10.0.0.1", AclOperation.READ, ResourceType.TOPIC, "t")  # no ACL
    strict = build_authorizer(config(f"authorizer.class.name={name}"), MetadataImage())
    assert not strict.authorize("User:bob", "10.0.0.1", AclOperation.READ, ResourceType.TOPIC, "t")


def test_other_authorizers_are_refused_naming_the_key() -> None:
    with pytest.raises(ConfigError, match=r"authorizer\.class\.name") as refused:
        load_config(None, ["authorizer.class.name=com.example.MyAuthorizer"])
    assert STANDARD in str(refused.value) and refused.value.key == "authorizer.class.name"


def test_super_users_must_be_principals() -> None:
    with pytest.raises(ConfigError, match=r"super\.users") as refused:
        load_config(None, ["super.users=User:admin;alice"])
    assert "'alice' is not a principal of the form Type:name" in str(refused.value)
    assert config("super.users= User:a ; ;User:b:c").super_users == "User:a ; ;User:b:c"


def test_allow_everyone_is_a_boolean() -> None:
    with pytest.raises(ConfigError, match=r"allow\.everyone\.if\.no\.acl\.found"):
        load_config(None, ["allow.everyone.if.no.acl.found=yes"])


def test_describe_configs_lists_the_keys() -> None:
    described = {entry.name: entry for entry in config("super.users=User:admin").describe()}
    assert described["super.users"].value == "User:admin"
    assert described["authorizer.class.name"].value == ""
    assert described["allow.everyone.if.no.acl.found"].value == "false"
