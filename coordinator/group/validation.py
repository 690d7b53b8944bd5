"""The member check every membership and commit path makes (Kafka's ``validateCurrentMember``)."""

from __future__ import annotations

import structlog

from coordinator.group.group import GroupMetadata
from protocol.error_codes import ErrorCode

_log = structlog.get_logger("kipling.groups")


def validate_current_member(
    group: GroupMetadata, member_id: str, group_instance_id: str | None
) -> ErrorCode | None:
    """Kafka's ``validateCurrentMember``: a static member's instance id must map to this member id
    (another id means this one was replaced: FENCED_INSTANCE_ID; no mapping: UNKNOWN_MEMBER_ID); any
    member must be in the group (UNKNOWN_MEMBER_ID)."""
    if group_instance_id is not None:
        current = group.current_static_member_id(group_instance_id)
        if current is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if current != member_id:
            _log.info(
                "fenced static member", group=group.group_id, member=member_id, instance=group_instance_id
            )
            return ErrorCode.FENCED_INSTANCE_ID
        return None
    return None if group.has(member_id) else ErrorCode.UNKNOWN_MEMBER_ID
