"""DescribeAcls (29), CreateAcls (30) and DeleteAcls (31) handlers through the codecs: the
controller's CreateAcls and DeleteAcls, the broker's DescribeAcls from its image, SECURITY_DISABLED
without an authorizer, CLUSTER_AUTHORIZATION_FAILED for principals without the cluster
permission, and a broker forwarding the changes and waiting for its image to show them."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable
from typing import Any

import pytest

from broker.handlers.acls import (
    AuthorizedAclForwarding,
    CreateAclsHandler,
    DeleteAclsHandler,
    DescribeAclsHandler,
    created_acls_shown,
    deleted_acls_gone,
)
from broker.handlers.base import Handler, RequestContext
from broker.handlers.forwarding import ForwardingHandler
from broker.server.authentication import ConnectionSession
from metadata.authorizer import AllowEverything, Authorizer, StandardAuthorizer
from metadata.controller.active import ActiveController
from metadata.image import MetadataImage
from protocol.acl_types import AclOperation, AclPermissionType, PatternType, ResourceType
from protocol.api_keys import ApiKey
from protocol.data import MessageData
from protocol.error_codes import ErrorCode
from protocol.messages import REQUESTS
from security.principal import KafkaPrincipal
from tests.broker.cluster_admin_support import call, ctx, decoded, encoded
from tests.metadata.controller.helpers import Cluster

pytestmark = pytest.mark.timeout(60)

TOPIC, GROUP, CLUSTER = int(ResourceType.TOPIC), int(ResourceType.GROUP), int(ResourceType.CLUSTER)
LITERAL, PREFIXED, MATCH, ANY = (
    int(p) for p in (PatternType.LITERAL, PatternType.PREFIXED, PatternType.MATCH, PatternType.ANY)
)
READ, WRITE, ALTER, ALL = (
    int(o) for o in (AclOperation.READ, AclOperation.WRITE, AclOperation.ALTER, AclOperation.ALL)
)
ALLOW, DENY = int(AclPermissionType.ALLOW), int(AclPermissionType.DENY)


@pytest.fixture
def cluster() -> Cluster:
    cluster = Cluster()
    cluster.join(1)
    return cluster


def standard(
    cluster: Cluster, super_users: frozenset[str] = frozenset({"User:ANONYMOUS"})
) -> StandardAuthorizer:
    return StandardAuthorizer(lambda: cluster.image.acls, super_users=super_users)


def creation(
    name: str,
    operation: int = READ,
    permission: int = ALLOW,
    *,
    resource_type: int = TOPIC,
    pattern: int = LITERAL,
    principal: str = "User:alice",
    host: str = "*",
) -> dict[str, Any]:
    return {
        "resource_type": resource_type,
        "resource_name": name,
        "resource_pattern_type": pattern,
        "principal": principal,
        "host": host,
        "operation": operation,
        "permission_type": permission,
    }


def acl_filter(
    resource_type: int = int(ResourceType.ANY),
    name: str | None = None,
    pattern: int = ANY,
    principal: str | None = None,
    host: str | None = None,
    operation: int = int(AclOperation.ANY),
    permission: int = int(AclPermissionType.ANY),
) -> dict[str, Any]:
    return {
        "resource_type_filter": resource_type,
        "resource_name_filter": name,
        "pattern_type_filter": pattern,
        "principal_filter": principal,
        "host_filter": host,
        "operation": operation,
        "permission_type": permission,
    }


def as_user(handler: Handler, version: int, user: str) -> RequestContext:
    session = ConnectionSession("SSL", tls_principal=KafkaPrincipal("User", user))
    return dataclasses.replace(ctx(handler, version), session=session)


def listed(response: MessageData) -> list[tuple[Any, ...]]:
    return [
        (
            r.resource_type,
            r.resource_name,
            r.pattern_type,
            a.principal,
            a.host,
            a.operation,
            a.permission_type,
        )
        for r in response.resources
        for a in r.acls
    ]


def test_handler_versions_match_the_schemas() -> None:
    for handler in (DescribeAclsHandler, CreateAclsHandler, DeleteAclsHandler):
        versions = REQUESTS[int(handler.api_key)].versions
        assert (handler.min_version, handler.max_version) == (versions.low, versions.high) == (1, 3)


@pytest.mark.parametrize("version", [1, 2, 3])
async def test_create_describe_delete(cluster: Cluster, version: int) -> None:
    create = CreateAclsHandler(cluster.controller, enabled=True)
    body = {
        "creations": [
            creation("orders"),
            creation("orders", WRITE, DENY, principal="User:bob", host="10.0.0.1"),
            creation("ord", READ, pattern=PREFIXED, principal="User:*"),
            creation("app", resource_type=GROUP),
            creation("x", resource_type=int(ResourceType.ANY)),
        ]
    }
    response = await call(create, version, body)
    assert [(r.error_code, r.error_message) for r in response.results] == [(0, None)] * 4 + [
        (int(ErrorCode.INVALID_REQUEST), "Invalid resourceType ANY")
    ]
    describe = DescribeAclsHandler(standard(cluster))
    everything = await call(describe, version, acl_filter())
    assert (everything.error_code, everything.error_message) == (0, None)
    assert listed(everything) == [
        (TOPIC, "ord", PREFIXED, "User:*", "*", READ, ALLOW),
        (TOPIC, "orders", LITERAL, "User:alice", "*", READ, ALLOW),
        (TOPIC, "orders", LITERAL, "User:bob", "10.0.0.1", WRITE, DENY),
        (GROUP, "app", LITERAL, "User:alice", "*", READ, ALLOW),
    ]
    assert [len(r.acls) for r in everything.resources] == [1, 2, 1]  # grouped by resource pattern
    matching = await call(describe, version, acl_filter(TOPIC, "orders", MATCH, operation=READ))
    assert [row[1] for row in listed(matching)] == ["ord", "orders"]

    delete = DeleteAclsHandler(cluster.controller, enabled=True)
    deleted = await call(delete, version, {"filters": [acl_filter(TOPIC, "orders", LITERAL), acl_filter(0)]})
    first, unknown = deleted.filter_results
    assert (first.error_code, first.error_message) == (0, None)
    assert [(m.error_code, m.resource_name, m.principal, m.operation) for m in first.matching_acls] == [
        (0, "orders", "User:alice", READ),
        (0, "orders", "User:bob", WRITE),
    ]
    assert (unknown.error_code, unknown.error_message, unknown.matching_acls) == (
        int(ErrorCode.INVALID_REQUEST),
        "Unknown patternFilter.",
        [],
    )
    assert [row[1] for row in listed(await call(describe, version, acl_filter()))] == ["ord", "app"]


async def test_describe_refuses_an_unknown_filter(cluster: Cluster) -> None:
    describe = DescribeAclsHandler(standard(cluster))
    response = await call(describe, 2, acl_filter(operation=int(AclOperation.UNKNOWN)))
    assert (response.error_code, response.resources) == (int(ErrorCode.INVALID_REQUEST), [])


async def test_without_an_authorizer_every_acl_api_is_security_disabled(cluster: Cluster) -> None:
    describe = await call(DescribeAclsHandler(AllowEverything(lambda: cluster.image.acls)), 3, acl_filter())
    assert (describe.error_code, describe.error_message) == (
        int(ErrorCode.SECURITY_DISABLED),
        "No Authorizer is configured on the broker",
    )
    disabled = (int(ErrorCode.SECURITY_DISABLED), "No Authorizer is configured.")
    create = await call(
        CreateAclsHandler(cluster.controller, enabled=False), 3, {"creations": [creation("t")] * 2}
    )
    assert [(r.error_code, r.error_message) for r in create.results] == [disabled, disabled]
    delete = await call(DeleteAclsHandler(cluster.controller, enabled=False), 3, {"filters": [acl_filter()]})
    assert [(r.error_code, r.error_message, r.matching_acls) for r in delete.filter_results] == [
        (*disabled, [])
    ]
    assert len(cluster.image.acls) == 0
    # a broker without an authorizer answers so itself, without forwarding
    channel = _ControllerChannel(cluster)
    for api in (CreateAclsHandler, DeleteAclsHandler):
        forwarding = _forwarding(api, channel, cluster, AllowEverything())
        body = {"creations": [creation("t")]} if api is CreateAclsHandler else {"filters": [acl_filter()]}
        response = encoded(
            forwarding, 3, await forwarding.handle(ctx(forwarding, 3), decoded(forwarding, 3, body))
        )
        results = response.results if api is CreateAclsHandler else response.filter_results
        assert [(r.error_code, r.error_message) for r in results] == [disabled]
    assert channel.sent == []


async def test_the_cluster_permission_is_checked(cluster: Cluster) -> None:
    await call(
        CreateAclsHandler(cluster.controller, enabled=True),
        3,
        {
            "creations": [
                creation("kafka-cluster", ALTER, resource_type=CLUSTER, principal="User:ops"),
                creation(
                    "kafka-cluster",
                    int(AclOperation.DESCRIBE),
                    resource_type=CLUSTER,
                    principal="User:viewer",
                ),
            ]
        },
    )
    authorizer = standard(cluster, super_users=frozenset({"User:admin"}))
    describe = DescribeAclsHandler(authorizer)
    for user, code in (
        ("admin", 0),
        ("ops", 0),
        ("viewer", 0),
        ("alice", int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)),
    ):
        response = encoded(
            describe, 3, await describe.handle(as_user(describe, 3, user), decoded(describe, 3, acl_filter()))
        )
        assert response.error_code == code, user
    channel = _ControllerChannel(cluster)
    create = _forwarding(CreateAclsHandler, channel, cluster, authorizer)
    body = {"creations": [creation("t"), creation("u")]}
    for user, code in (("viewer", int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)), ("ops", 0), ("admin", 0)):
        response = encoded(create, 3, await create.handle(as_user(create, 3, user), decoded(create, 3, body)))
        assert [r.error_code for r in response.results] == [code, code], user
    assert channel.sent == [(ApiKey.CREATE_ACLS, 3)] * 2
    delete = _forwarding(DeleteAclsHandler, channel, cluster, authorizer)
    anonymous = encoded(
        delete, 3, await delete.handle(ctx(delete, 3), decoded(delete, 3, {"filters": [acl_filter()]}))
    )
    assert [r.error_code for r in anonymous.filter_results] == [int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)]
    assert len(cluster.image.acls) == 4


async def test_a_broker_forwards_and_waits_for_its_image(cluster: Cluster) -> None:
    channel = _ControllerChannel(cluster)
    loader = _Loader(cluster.image)
    create = _forwarding(CreateAclsHandler, channel, cluster, standard(cluster), loader)
    assert (create.api_key, create.min_version, create.max_version) == (ApiKey.CREATE_ACLS, 1, 3)
    body = {"creations": [creation("t"), creation("", WRITE)]}
    response = encoded(create, 2, await create.handle(ctx(create, 2), decoded(create, 2, body)))
    assert [r.error_code for r in response.results] == [0, int(ErrorCode.INVALID_REQUEST)]
    delete = _forwarding(DeleteAclsHandler, channel, cluster, standard(cluster), loader)
    body = {"filters": [acl_filter(TOPIC)]}
    response = encoded(delete, 2, await delete.handle(ctx(delete, 2), decoded(delete, 2, body)))
    assert [m.resource_name for m in response.filter_results[0].matching_acls] == ["t"]
    assert channel.sent == [(ApiKey.CREATE_ACLS, 2), (ApiKey.DELETE_ACLS, 2)] and loader.waited == [
        True,
        True,
    ]
    assert len(cluster.image.acls) == 0


async def test_the_forwarding_effects(cluster: Cluster) -> None:
    create = CreateAclsHandler(cluster.controller, enabled=True)
    body = {"creations": [creation("t"), creation("u", resource_type=int(ResourceType.ANY))]}
    before = MetadataImage()
    response = await call(create, 3, body)
    shown = created_acls_shown(decoded(create, 3, body), response)
    assert shown(cluster.image) and not shown(before)  # "u" failed: nothing to wait for there
    delete = DeleteAclsHandler(cluster.controller, enabled=True)
    body = {"filters": [acl_filter(TOPIC, "t", LITERAL)]}
    response = await call(delete, 3, body)
    gone = deleted_acls_gone(decoded(delete, 3, body), response)
    assert gone(cluster.image) and not gone(_image_before_last_batch(cluster))


async def test_without_a_controller_every_creation_is_not_controller() -> None:
    create = CreateAclsHandler(ActiveController(1), enabled=True)
    response = await call(create, 3, {"creations": [creation("a"), creation("b")]})
    assert [r.error_code for r in response.results] == [int(ErrorCode.NOT_CONTROLLER)] * 2
    delete = DeleteAclsHandler(ActiveController(1), enabled=True)
    response = await call(delete, 3, {"filters": [acl_filter()]})
    assert [r.error_code for r in response.filter_results] == [int(ErrorCode.NOT_CONTROLLER)]


def test_error_responses() -> None:
    describe = DescribeAclsHandler(AllowEverything())
    body = encoded(
        describe, 3, describe.error_response(ctx(describe, 3), None, ErrorCode.UNSUPPORTED_VERSION)
    )
    assert (body.error_code, body.resources) == (int(ErrorCode.UNSUPPORTED_VERSION), [])
    create = CreateAclsHandler(ActiveController(1), enabled=True)
    request = decoded(create, 3, {"creations": [creation("a")] * 3})
    body = encoded(
        create, 3, create.error_response(ctx(create, 3), request, ErrorCode.THROTTLING_QUOTA_EXCEEDED)
    )
    assert [r.error_code for r in body.results] == [int(ErrorCode.THROTTLING_QUOTA_EXCEEDED)] * 3
    delete = DeleteAclsHandler(ActiveController(1), enabled=True)
    assert (
        encoded(
            delete, 3, delete.error_response(ctx(delete, 3), None, ErrorCode.UNKNOWN_SERVER_ERROR)
        ).filter_results
        == []
    )


def test_client_host_is_the_peer_without_its_port() -> None:
    describe = DescribeAclsHandler(AllowEverything())
    assert ctx(describe, 3).client_host == "127.0.0.1"
    assert dataclasses.replace(ctx(describe, 3), peer="::1:5555").client_host == "::1"
    assert dataclasses.replace(ctx(describe, 3), peer="?").client_host == "?"


def _image_before_last_batch(cluster: Cluster) -> MetadataImage:
    image = MetadataImage()
    entries = cluster.log.read()
    for offset, epoch, record in entries[:-1]:
        image.apply(record, offset, epoch)
    return image


class _ControllerChannel:
    """The controller listener, in process: the forwarded body goes to the controller's handler."""

    def __init__(self, cluster: Cluster) -> None:
        self._handlers: dict[ApiKey, Handler] = {
            ApiKey.CREATE_ACLS: CreateAclsHandler(cluster.controller, enabled=True),
            ApiKey.DELETE_ACLS: DeleteAclsHandler(cluster.controller, enabled=True),
        }
        self.sent: list[tuple[ApiKey, int]] = []

    async def forward(self, api_key: ApiKey, version: int, body: MessageData, timeout_s: float) -> Any:
        self.sent.append((api_key, version))
        handler = self._handlers[api_key]
        return encoded(handler, version, await handler.handle(ctx(handler, version), body))


class _Loader:
    """A broker's metadata loader that has caught up with the controller."""

    def __init__(self, image: MetadataImage) -> None:
        self.image = image
        self.waited: list[bool] = []

    async def wait_for(self, predicate: Callable[[MetadataImage], bool], timeout_s: float) -> bool:
        self.waited.append(predicate(self.image))
        await asyncio.sleep(0)
        return self.waited[-1]


def _forwarding(
    api: type[CreateAclsHandler] | type[DeleteAclsHandler],
    channel: _ControllerChannel,
    cluster: Cluster,
    authorizer: Authorizer,
    loader: _Loader | None = None,
) -> AuthorizedAclForwarding:
    effect = created_acls_shown if api is CreateAclsHandler else deleted_acls_gone
    forwarding = ForwardingHandler(
        api,
        channel,  # type: ignore[arg-type]
        loader or _Loader(cluster.image),  # type: ignore[arg-type]
        effect,
    )
    return AuthorizedAclForwarding(api, forwarding, authorizer)
