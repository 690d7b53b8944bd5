"""Topic-name rules, as Kafka's ``Topic`` class states them.

A topic name becomes a directory name (``<topic>-<partition>``) and part of metric names, so Kafka
restricts it: ASCII letters, digits, ``.``, ``_`` and ``-``; at most 249 characters (so that the
directory name, with a partition number and the deletion suffix, still fits in 255); never ``.`` or
``..``. Metric systems turn ``.`` into ``_``, so two topics whose names differ only there would share
metrics: Kafka refuses to create the second one (INVALID_TOPIC_EXCEPTION, "collides").
"""

from __future__ import annotations

import re

from protocol.error_codes import ErrorCode, KafkaError

MAX_NAME_LENGTH = 249
_LEGAL = re.compile(r"[a-zA-Z0-9._-]+")

GROUP_METADATA_TOPIC = "__consumer_offsets"
TRANSACTION_STATE_TOPIC = "__transaction_state"
CLUSTER_METADATA_TOPIC = "__cluster_metadata"
INTERNAL_TOPICS = frozenset({GROUP_METADATA_TOPIC, TRANSACTION_STATE_TOPIC})
"""The topics Kafka reports with ``is_internal`` (Topic.isInternal)."""


def invalid_reason(name: str | None) -> str | None:
    """Why ``name`` is not a legal topic name (Kafka's wording), or None if it is legal."""
    if not name:
        return "Topic name is illegal, it can't be empty"
    if name in (".", ".."):
        return 'Topic name cannot be "." or ".."'
    if len(name) > MAX_NAME_LENGTH:
        return (
            f"Topic name is illegal, it can't be longer than {MAX_NAME_LENGTH} characters, topic name: {name}"
        )
    if not _LEGAL.fullmatch(name):
        return (
            f'Topic name "{name}" is illegal, it contains a character other than '
            "ASCII alphanumerics, '.', '_' and '-'"
        )
    return None


def is_valid(name: str | None) -> bool:
    return invalid_reason(name) is None


def validate(name: str | None) -> None:
    """Raise INVALID_TOPIC_EXCEPTION with Kafka's message if ``name`` is not a legal topic name."""
    reason = invalid_reason(name)
    if reason is not None:
        raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, reason)


def is_internal(name: str | None) -> bool:
    return name in INTERNAL_TOPICS


def has_collision_chars(name: str) -> bool:
    """True if ``name`` holds a character that metric names confuse with another ('.' or '_')."""
    return "." in name or "_" in name


def unify_collision_chars(name: str) -> str:
    """The form under which two colliding names are equal ('.' read as '_')."""
    return name.replace(".", "_")


def has_collision(first: str, second: str) -> bool:
    """True if the two names would share metric names."""
    return unify_collision_chars(first) == unify_collision_chars(second)
