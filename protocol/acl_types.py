"""The int8 codes of Kafka's ACL vocabulary: resource types, pattern types, operations and
permission types.

These are the numbers the ACL APIs (DescribeAcls, CreateAcls, DeleteAcls), the authorized-operations
bit fields of Metadata and DescribeGroups, and the AccessControlEntryRecord of the metadata log carry.
The names and numbers are Apache Kafka's (``ResourceType``, ``PatternType``, ``AclOperation`` and
``AclPermissionType`` in ``org.apache.kafka.common``), and a number is never reused.

``UNKNOWN`` stands for a code this side does not know (a newer peer's); Kafka's clients map an
unknown code to it rather than failing. ``ANY`` (and, for patterns, ``MATCH``) only make sense in a
filter, never in a stored ACL.
"""

from __future__ import annotations

from enum import IntEnum


class ResourceType(IntEnum):
    """The kind of resource an ACL protects."""

    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7  # the ACL APIs accept it from v3 on


class PatternType(IntEnum):
    """How an ACL's resource name matches resource names (KIP-290).

    ``MATCH`` (filters only) matches every ACL that applies to the filter's name: literal, prefixed
    and the wildcard ``*``.
    """

    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(IntEnum):
    """What an ACL allows or denies doing to its resource; ``ALL`` covers every operation."""

    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14
    TWO_PHASE_COMMIT = 15  # Kafka 4.1 (KIP-939), on transactional ids


class AclPermissionType(IntEnum):
    """Whether an ACL grants or refuses its operation; a matching DENY wins over any ALLOW."""

    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3
