"""ACLs on the controller (Kafka's AclControlManager with AclApis' checks) and in the image: the
rules and messages of CreateAcls and DeleteAcls, the records written, replay, a controller restart
and snapshots."""

from __future__ import annotations

import pathlib
import uuid
from collections.abc import Iterator

import pytest

from metadata.authorizer import StandardAuthorizer
from metadata.authorizer.acl_cache import AclCache, acl_record
from metadata.controller.acl_control import plan_acl_creations
from metadata.image import MetadataImage, MetadataReplayError
from metadata.records import AccessControlEntryRecord, RemoveAccessControlEntryRecord
from metadata.snapshot import image_records, load_image, read_snapshot, snapshot_path, write_snapshot
from protocol.acl_bindings import (
    AccessControlEntryFilter,
    AclBinding,
    AclBindingFilter,
    ResourcePatternFilter,
)
from protocol.acl_types import AclOperation, AclPermissionType, PatternType, ResourceType
from protocol.error_codes import ErrorCode
from tests.metadata.controller.helpers import Cluster, replayed

pytestmark = pytest.mark.timeout(60)

ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
LITERAL, PREFIXED = PatternType.LITERAL, PatternType.PREFIXED
TOPIC, GROUP, CLUSTER = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
READ, WRITE = AclOperation.READ, AclOperation.WRITE


def acl(
    name: str = "orders",
    operation: AclOperation = READ,
    permission: AclPermissionType = ALLOW,
    *,
    principal: str = "User:alice",
    host: str = "*",
    pattern: PatternType = LITERAL,
    resource_type: ResourceType = TOPIC,
) -> AclBinding:
    return AclBinding.of(resource_type, name, pattern, principal, host, operation, permission)


@pytest.fixture
def cluster() -> Cluster:
    cluster = Cluster()
    cluster.join(1)
    return cluster


def create(cluster: Cluster, *bindings: AclBinding) -> list[tuple[ErrorCode, str | None]]:
    return [(r.error, r.message) for r in cluster.controller.create_acls(bindings)]


def test_creations_write_one_record_per_new_acl(cluster: Cluster) -> None:
    start = cluster.log.end_offset
    a, b = acl(), acl("app", READ, resource_type=GROUP, principal="User:*", host="10.0.0.1")
    assert create(cluster, a, b, a) == [(ErrorCode.NONE, None)] * 3  # a repeated: one record
    records = [
        record for _, _, record in cluster.log.read(start) if isinstance(record, AccessControlEntryRecord)
    ]
    assert len(records) == len(cluster.log.read(start)) == 2
    assert records[0] == AccessControlEntryRecord(records[0].id, 2, "orders", 3, "User:alice", "*", 3, 3)
    assert records[0].id != records[1].id
    assert cluster.image.acls.id_of(a) == records[0].id and b in cluster.image.acls
    # creating what exists succeeds and writes nothing
    end = cluster.log.end_offset
    assert create(cluster, b) == [(ErrorCode.NONE, None)]
    assert cluster.log.end_offset == end


@pytest.mark.parametrize(
    ("binding", "message"),
    [
        (
            acl("my-cluster", resource_type=CLUSTER),
            "The only valid name for the CLUSTER resource is kafka-cluster",
        ),
        (acl(""), "Invalid empty resource name"),
        (acl(resource_type=ResourceType.ANY), "Invalid resourceType ANY"),
        (acl(resource_type=ResourceType.UNKNOWN), "Invalid resourceType UNKNOWN"),
        (acl(pattern=PatternType.MATCH), "Invalid patternType MATCH"),
        (acl(pattern=PatternType.ANY), "Invalid patternType ANY"),
        (acl(pattern=PatternType.UNKNOWN), "Invalid patternType UNKNOWN"),
        (acl(operation=AclOperation.ANY), "Invalid operation ANY"),
        (acl(operation=AclOperation.UNKNOWN), "Invalid operation UNKNOWN"),
        (acl(permission=AclPermissionType.ANY), "Invalid permissionType ANY"),
        (acl(permission=AclPermissionType.UNKNOWN), "Invalid permissionType UNKNOWN"),
        (
            acl(principal="alice"),
            "Could not parse principal from `alice` (no colon is present separating the principal "
            "type from the principal name)",
        ),
    ],
)
def test_invalid_creations_are_invalid_request(cluster: Cluster, binding: AclBinding, message: str) -> None:
    end = cluster.log.end_offset
    assert create(cluster, binding, acl("ok")) == [
        (ErrorCode.INVALID_REQUEST, message),
        (ErrorCode.NONE, None),
    ]
    assert cluster.log.end_offset == end + 1 and len(cluster.image.acls) == 1


def test_valid_oddities_are_accepted(cluster: Cluster) -> None:
    odd = [
        acl("*", pattern=PREFIXED),  # names starting with "*"
        acl("kafka-cluster", AclOperation.ALTER, resource_type=CLUSTER),
        acl("tx", AclOperation.TWO_PHASE_COMMIT, resource_type=ResourceType.TRANSACTIONAL_ID),
        acl("t", AclOperation.CLUSTER_ACTION),  # Kafka does not check operations per resource type
    ]
    assert create(cluster, *odd) == [(ErrorCode.NONE, None)] * 4


def test_a_fresh_id_is_drawn_until_unused() -> None:
    existing = uuid.UUID(int=1)
    cache = AclCache()
    assert cache.add(acl_record(existing, acl("x"))) is None
    drawn: Iterator[uuid.UUID] = iter([existing, uuid.UUID(int=2), uuid.UUID(int=2), uuid.UUID(int=3)])
    results, records = plan_acl_creations(cache, [acl("a"), acl("b")], lambda: next(drawn))
    assert [r.error for r in results] == [ErrorCode.NONE, ErrorCode.NONE]
    assert [r.id for r in records] == [uuid.UUID(int=2), uuid.UUID(int=3)]


def test_deletions_list_what_each_filter_matched(cluster: Cluster) -> None:
    alice_read, alice_write = acl("orders"), acl("orders", WRITE)
    bob_prefixed = acl("ord", READ, DENY, principal="User:bob", pattern=PREFIXED)
    group = acl("app", resource_type=GROUP)
    create(cluster, alice_read, alice_write, bob_prefixed, group)
    start = cluster.log.end_offset
    results = cluster.controller.delete_acls(
        [
            AclBindingFilter(ResourcePatternFilter(TOPIC, "orders", PatternType.MATCH)),
            AclBindingFilter(entry=AccessControlEntryFilter(principal="User:alice", operation=WRITE)),
            AclBindingFilter(ResourcePatternFilter(TOPIC, "nothing", LITERAL)),
            AclBindingFilter(ResourcePatternFilter(ResourceType.UNKNOWN)),
            AclBindingFilter(entry=AccessControlEntryFilter(permission_type=AclPermissionType.UNKNOWN)),
        ]
    )
    assert [(r.error, r.message, set(r.deleted)) for r in results] == [
        (ErrorCode.NONE, None, {alice_read, alice_write, bob_prefixed}),
        (ErrorCode.NONE, None, {alice_write}),  # listed by both filters, removed once
        (ErrorCode.NONE, None, set()),
        (ErrorCode.INVALID_REQUEST, "Unknown patternFilter.", set()),
        (ErrorCode.INVALID_REQUEST, "Unknown entryFilter.", set()),
    ]
    batch = [record for _, _, record in cluster.log.read(start)]
    assert len(batch) == 3 and all(isinstance(r, RemoveAccessControlEntryRecord) for r in batch)
    assert cluster.image.acls.acls(AclBindingFilter()) == [group]
    # nothing matched: no batch
    end = cluster.log.end_offset
    assert cluster.controller.delete_acls([AclBindingFilter(ResourcePatternFilter(TOPIC))])[0].deleted == ()
    assert cluster.log.end_offset == end


def test_replay_refuses_what_the_controller_never_writes() -> None:
    image = MetadataImage()
    record = acl_record(uuid.UUID(int=7), acl())
    image.apply(record, 0, 1)
    with pytest.raises(MetadataReplayError, match="already exists"):
        image.apply(record, 1, 1)
    with pytest.raises(MetadataReplayError, match="already exists with id"):
        image.apply(acl_record(uuid.UUID(int=8), acl()), 2, 1)
    with pytest.raises(MetadataReplayError, match="no ACL has id"):
        image.apply(RemoveAccessControlEntryRecord(uuid.UUID(int=9)), 3, 1)
    image.apply(RemoveAccessControlEntryRecord(uuid.UUID(int=7)), 4, 1)
    assert len(image.acls) == 0 and acl() not in image.acls


def test_acls_survive_a_controller_restart_and_a_snapshot(cluster: Cluster, tmp_path: pathlib.Path) -> None:
    bindings = [
        acl("orders"),
        acl("ord", WRITE, DENY, pattern=PREFIXED, principal="User:*", host="10.0.0.1"),
        acl("app", resource_type=GROUP),
        acl("kafka-cluster", AclOperation.IDEMPOTENT_WRITE, resource_type=CLUSTER),
    ]
    create(cluster, *bindings)
    cluster.controller.delete_acls([AclBindingFilter(ResourcePatternFilter(GROUP))])
    assert cluster.restart().image.acls == cluster.image.acls
    image = replayed(cluster.log)
    assert image == cluster.image
    records = [r for _, r in image_records(image) if isinstance(r, AccessControlEntryRecord)]
    assert [r.id for r in records] == sorted((r.id for r in records), key=lambda i: i.bytes)
    assert {image.acls.get(r.id) for r in records} == set(bindings) - {bindings[2]}
    assert MetadataImage.from_snapshot(image_records(image), offset=image.offset, epoch=image.epoch) == image
    snapshot_id = write_snapshot(
        tmp_path, image, end_offset=image.offset + 1, epoch=image.epoch, timestamp_ms=1
    )
    loaded = load_image(
        read_snapshot(snapshot_path(tmp_path, snapshot_id)), snapshot_id.end_offset, snapshot_id.epoch
    )
    assert loaded == image and loaded.acls.items() == image.acls.items()
    authorizer = StandardAuthorizer(lambda: loaded.acls)
    assert authorizer.authorize("User:alice", "10.0.0.2", READ, TOPIC, "orders")
    assert not authorizer.authorize("User:alice", "10.0.0.1", WRITE, TOPIC, "orders")
    # an image that differs in one ACL is a different image
    cluster.controller.delete_acls([AclBindingFilter(ResourcePatternFilter(CLUSTER))])
    assert replayed(cluster.log) != loaded
