"""ACLs and the authorizer (Kafka's ``org.apache.kafka.metadata.authorizer``): the ACLs the
metadata image holds (:mod:`.acl_cache`) and the StandardAuthorizer over them (:mod:`.standard`)."""

from metadata.authorizer.acl_cache import AclCache
from metadata.authorizer.standard import (
    ACL_AUTHORIZER,
    STANDARD_AUTHORIZER,
    AllowEverything,
    Authorizer,
    StandardAuthorizer,
    authorizer_enabled,
    authorizer_over,
    build_authorizer,
)

__all__ = [
    "ACL_AUTHORIZER",
    "STANDARD_AUTHORIZER",
    "AclCache",
    "AllowEverything",
    "Authorizer",
    "StandardAuthorizer",
    "authorizer_enabled",
    "authorizer_over",
    "build_authorizer",
]
