"""DescribeUserScramCredentials (50) and AlterUserScramCredentials (51) handlers through the codecs,
the effect a broker forwarding AlterUserScramCredentials waits for, and the forwarding itself."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from broker.handlers.forwarding import ForwardingHandler, effect_of
from broker.handlers.user_scram_credentials import (
    AlterUserScramCredentialsHandler,
    DescribeUserScramCredentialsHandler,
)
from metadata.controller.active import ActiveController
from metadata.image import MetadataImage
from protocol.api_keys import ApiKey
from protocol.data import MessageData
from protocol.error_codes import ErrorCode
from protocol.messages import REQUESTS, RESPONSES
from security.scram import ScramMechanism, credential_from_password, salted_password
from tests.broker.cluster_admin_support import call, ctx, decoded, encoded, three_brokers
from tests.metadata.controller.helpers import Cluster

pytestmark = pytest.mark.timeout(60)

SHA256, SHA512 = ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512


@pytest.fixture
def cluster() -> Cluster:
    return three_brokers()


def upsertion(
    user: str,
    mechanism: ScramMechanism,
    *,
    iterations: int = 4096,
    salt: bytes = b"salt",
    password: str = "pw",
) -> dict[str, Any]:
    return {
        "name": user,
        "mechanism": mechanism.type_id,
        "iterations": iterations,
        "salt": salt,
        "salted_password": salted_password(mechanism, password, salt, iterations),
    }


def deletion(user: str, mechanism: ScramMechanism | int) -> dict[str, Any]:
    return {"name": user, "mechanism": mechanism if isinstance(mechanism, int) else mechanism.type_id}


def alter_body(
    upsertions: list[dict[str, Any]] | None = None, deletions: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    return {"deletions": deletions or [], "upsertions": upsertions or []}


def results(response: MessageData) -> list[tuple[str, int, str | None]]:
    return [(r.user, r.error_code, r.error_message) for r in response.results]


def test_handler_versions_match_the_schemas() -> None:
    for handler in (DescribeUserScramCredentialsHandler, AlterUserScramCredentialsHandler):
        versions = REQUESTS[int(handler.api_key)].versions
        assert (handler.min_version, handler.max_version) == (versions.low, versions.high) == (0, 0)


async def test_alter_then_describe(cluster: Cluster) -> None:
    alter = AlterUserScramCredentialsHandler(cluster.controller)
    body = alter_body(
        [
            upsertion("alice", SHA256, iterations=8192, password="alice-secret"),
            upsertion("alice", SHA512, password="alice-secret"),
            upsertion("bob", SHA256, iterations=100),
        ]
    )
    assert results(await call(alter, 0, body)) == [
        ("alice", 0, None),
        ("bob", int(ErrorCode.UNACCEPTABLE_CREDENTIAL), "Too few iterations"),
    ]
    stored = cluster.image.scram_credential(SHA256, "alice")
    assert stored == credential_from_password(SHA256, "alice-secret", iterations=8192, salt=b"salt")

    describe = DescribeUserScramCredentialsHandler(cluster.image)
    response = await call(describe, 0, {"users": None})
    assert (response.error_code, response.error_message) == (0, None)
    assert [
        (r.user, r.error_code, [(c.mechanism, c.iterations) for c in r.credential_infos])
        for r in response.results
    ] == [("alice", 0, [(1, 8192), (2, 4096)])]
    # a describe never carries a salt or a key: the response has no field for them
    raw = await describe.handle(ctx(describe, 0), decoded(describe, 0, {"users": None}))
    assert set(raw["results"][0]["credential_infos"][0]) == {"mechanism", "iterations"}
    wire = RESPONSES[int(describe.api_key)].codec(0).encode(raw)
    assert b"salt" not in wire and stored is not None and stored.stored_key not in wire


async def test_describe_named_users(cluster: Cluster) -> None:
    alter = AlterUserScramCredentialsHandler(cluster.controller)
    await call(alter, 0, alter_body([upsertion("alice", SHA512), upsertion("bob", SHA256)]))
    describe = DescribeUserScramCredentialsHandler(cluster.image)
    named = await call(describe, 0, {"users": [{"name": n} for n in ("nobody", "bob", "alice", "bob")]})
    assert results(named) == [
        (
            "nobody",
            int(ErrorCode.RESOURCE_NOT_FOUND),
            "Attempt to describe a user credential that does not exist: nobody",
        ),
        (
            "bob",
            int(ErrorCode.DUPLICATE_RESOURCE),
            "Cannot describe SCRAM credentials for the same user twice in a single request: bob",
        ),
        ("alice", 0, None),
    ]
    assert [(c.mechanism, c.iterations) for c in named.results[2].credential_infos] == [(2, 4096)]
    assert [r.user for r in (await call(describe, 0, {"users": []})).results] == ["alice", "bob"]


async def test_deletions_and_their_errors(cluster: Cluster) -> None:
    alter = AlterUserScramCredentialsHandler(cluster.controller)
    await call(alter, 0, alter_body([upsertion(u, m) for u in ("alice", "carol") for m in (SHA256, SHA512)]))
    response = await call(
        alter,
        0,
        alter_body(
            [upsertion("carol", SHA256)],
            [
                deletion("alice", SHA512),
                deletion("bob", SHA256),
                deletion("carol", SHA256),
                deletion("dan", 3),
            ],
        ),
    )
    assert results(response) == [
        ("alice", 0, None),
        ("bob", int(ErrorCode.RESOURCE_NOT_FOUND), "Attempt to delete a user credential that does not exist"),
        (
            "carol",
            int(ErrorCode.DUPLICATE_RESOURCE),
            "A user credential cannot be altered twice in the same request",
        ),
        ("dan", int(ErrorCode.UNSUPPORTED_SASL_MECHANISM), "Unknown SCRAM mechanism"),
    ]
    assert cluster.image.scram_credentials.of_user("alice").keys() == {SHA256}
    assert cluster.image.scram_credentials.users() == ["alice", "carol"]  # carol untouched
    assert cluster.image.scram_credentials.of_user("carol").keys() == {SHA256, SHA512}


async def test_alter_without_a_controller_is_not_controller_for_every_user() -> None:
    alter = AlterUserScramCredentialsHandler(ActiveController(1))
    body = alter_body([upsertion("a", SHA256), upsertion("b", SHA256)], [deletion("a", SHA512)])
    assert [(r.user, r.error_code) for r in (await call(alter, 0, body)).results] == [
        ("a", int(ErrorCode.NOT_CONTROLLER)),
        ("b", int(ErrorCode.NOT_CONTROLLER)),
    ]


def test_error_responses_name_every_user() -> None:
    describe = DescribeUserScramCredentialsHandler(MetadataImage())
    request = decoded(describe, 0, {"users": [{"name": "a"}, {"name": "a"}, {"name": "b"}]})
    body = encoded(
        describe,
        0,
        describe.error_response(ctx(describe, 0), request, ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
    )
    assert body.error_code == int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    assert [(r.user, r.error_code) for r in body.results] == [("a", 31), ("b", 31)]
    assert (
        encoded(
            describe, 0, describe.error_response(ctx(describe, 0), None, ErrorCode.UNKNOWN_SERVER_ERROR)
        ).results
        == []
    )


async def test_the_forwarding_effect_waits_for_upserts_and_deletions(cluster: Cluster) -> None:
    alter = AlterUserScramCredentialsHandler(cluster.controller)
    effect = effect_of(ApiKey.ALTER_USER_SCRAM_CREDENTIALS)
    body = alter_body([upsertion("a", SHA256), upsertion("z", SHA256, iterations=1)])
    before = MetadataImage()
    response = await call(alter, 0, body)
    shown = effect(decoded(alter, 0, body), response)
    assert shown(cluster.image) and not shown(before)  # "z" failed: nothing to wait for there
    body = alter_body(deletions=[deletion("a", SHA256)])
    response = await call(alter, 0, body)
    gone = effect(decoded(alter, 0, body), response)
    assert gone(cluster.image) and not gone(_image_with_a(cluster))


def _image_with_a(cluster: Cluster) -> MetadataImage:
    """The image before the deletion: replay the log up to the last upsertion."""
    image = MetadataImage()
    entries = cluster.log.read()
    for offset, epoch, record in entries[:-1]:
        image.apply(record, offset, epoch)
    return image


class _ControllerChannel:
    """The controller listener, in process: the forwarded body goes to the controller's handler."""

    def __init__(self, handler: AlterUserScramCredentialsHandler) -> None:
        self._handler = handler
        self.sent: list[tuple[ApiKey, int]] = []

    async def forward(self, api_key: ApiKey, version: int, body: MessageData, timeout_s: float) -> Any:
        self.sent.append((api_key, version))
        return encoded(self._handler, version, await self._handler.handle(ctx(self._handler, version), body))


class _Loader:
    """A broker's metadata loader that has caught up with the controller."""

    def __init__(self, image: MetadataImage) -> None:
        self.image = image
        self.waited: list[bool] = []

    async def wait_for(self, predicate: Callable[[MetadataImage], bool], timeout_s: float) -> bool:
        self.waited.append(predicate(self.image))
        await asyncio.sleep(0)
        return self.waited[-1]


async def test_a_broker_forwards_the_alteration_and_waits_for_its_image(cluster: Cluster) -> None:
    channel = _ControllerChannel(AlterUserScramCredentialsHandler(cluster.controller))
    loader = _Loader(cluster.image)
    forwarding = ForwardingHandler(
        AlterUserScramCredentialsHandler,
        channel,  # type: ignore[arg-type]
        loader,  # type: ignore[arg-type]
        effect_of(ApiKey.ALTER_USER_SCRAM_CREDENTIALS),
    )
    assert (forwarding.api_key, forwarding.min_version, forwarding.max_version) == (
        ApiKey.ALTER_USER_SCRAM_CREDENTIALS,
        0,
        0,
    )
    body = alter_body([upsertion("alice", SHA512)])
    response = await forwarding.handle(ctx(forwarding, 0), decoded(forwarding, 0, body))
    assert results(encoded(forwarding, 0, response)) == [("alice", 0, None)]
    assert channel.sent == [(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0)] and loader.waited == [True]
    assert cluster.image.scram_credential(SHA512, "alice") is not None
