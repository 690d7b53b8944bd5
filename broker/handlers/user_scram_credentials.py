"""DescribeUserScramCredentials (50, v0) and AlterUserScramCredentials (51, v0): users' SCRAM
credentials (KIP-554), kept in the cluster metadata.

DescribeUserScramCredentials is served by brokers from their metadata image (Kafka's
``ScramImage.describe``): each user's mechanisms and iteration counts, never a salt or a key.
AlterUserScramCredentials is the controller's (:mod:`metadata.controller.scram_control`): brokers
forward it and answer once their own metadata shows the change (broker/handlers/forwarding.py), so
a client that logs in with the new password right after the answer finds its credential on the
broker that answered. Each distinct user of the request gets one result.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from broker.handlers.authorization import ALLOW_EVERYTHING, cluster_allowed
from broker.handlers.base import Handler, RequestContext
from metadata.authorizer.standard import Authorizer
from metadata.controller.active import ControllerRef, resolve_controller
from metadata.controller.scram_control import ScramAlterationResult, ScramDeletion, ScramUpsertion
from metadata.image import MetadataImage
from metadata.scram_credentials import describe_credentials
from protocol.acl_types import AclOperation
from protocol.api_keys import ApiKey
from protocol.data import MessageData
from protocol.error_codes import ErrorCode, KafkaError
from security.scram import ScramMechanism

__all__ = [
    "AlterUserScramCredentialsHandler",
    "DescribeUserScramCredentialsHandler",
    "altered_credentials_shown",
]


class DescribeUserScramCredentialsHandler(Handler):
    api_key = ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS
    min_version = 0
    max_version = 0

    def __init__(self, image: MetadataImage, authorizer: Authorizer = ALLOW_EVERYTHING) -> None:
        """With an authorizer the requester needs DESCRIBE on the cluster (else
        CLUSTER_AUTHORIZATION_FAILED), as in Kafka."""
        self._image = image
        self._authorizer = authorizer

    async def handle(self, ctx: RequestContext, request: MessageData) -> Any:
        if self._authorizer.enabled and not cluster_allowed(self._authorizer, ctx, AclOperation.DESCRIBE):
            raise KafkaError(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
        users = None if request.users is None else [user.name for user in request.users]
        results = [
            {
                "user": d.user,
                "error_code": int(d.error),
                "error_message": d.message,
                "credential_infos": [
                    {"mechanism": mechanism.type_id, "iterations": iterations}
                    for mechanism, iterations in d.credentials
                ],
            }
            for d in describe_credentials(self._image.scram_credentials, users)
        ]
        return {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "results": results}

    def error_response(self, ctx: RequestContext, request: MessageData | None, code: ErrorCode) -> Any:
        """Kafka's getErrorResponse: the error at the top and for each user named."""
        names = [] if request is None or request.users is None else [u.name for u in request.users]
        results = [
            {"user": name, "error_code": int(code), "error_message": None, "credential_infos": []}
            for name in dict.fromkeys(names)
        ]
        return {"throttle_time_ms": 0, "error_code": int(code), "error_message": None, "results": results}


class AlterUserScramCredentialsHandler(Handler):
    """The controller's side; a broker forwards the request here unchanged."""

    api_key = ApiKey.ALTER_USER_SCRAM_CREDENTIALS
    min_version = 0
    max_version = 0

    def __init__(self, controller: ControllerRef) -> None:
        self._controller = controller

    async def handle(self, ctx: RequestContext, request: MessageData) -> Any:
        deletions = [ScramDeletion(d.name, d.mechanism) for d in request.deletions]
        upsertions = [
            ScramUpsertion(u.name, u.mechanism, u.iterations, bytes(u.salt), bytes(u.salted_password))
            for u in request.upsertions
        ]
        try:
            results = resolve_controller(self._controller).alter_user_scram_credentials(deletions, upsertions)
        except KafkaError as exc:
            return self.error_body(ctx, request, exc.code)
        return {"throttle_time_ms": 0, "results": [_result(r) for r in results]}

    def error_response(self, ctx: RequestContext, request: MessageData | None, code: ErrorCode) -> Any:
        return self.error_body(ctx, request, code)

    @staticmethod
    def error_body(ctx: RequestContext, request: MessageData | None, code: ErrorCode) -> Any:
        """Every user of the request carries ``code``."""
        users = _users(request) if request is not None else []
        return {"throttle_time_ms": 0, "results": [_result(ScramAlterationResult(u, code)) for u in users]}


def _users(request: MessageData) -> list[str]:
    """The distinct users of an alteration, in the order they first appear (deletions first)."""
    return list(dict.fromkeys([d.name for d in request.deletions] + [u.name for u in request.upsertions]))


def _result(result: ScramAlterationResult) -> dict[str, Any]:
    return {"user": result.user, "error_code": int(result.error), "error_message": result.message}


def altered_credentials_shown(request: MessageData, response: MessageData) -> Callable[[MetadataImage], bool]:
    """The effect a broker forwarding AlterUserScramCredentials waits for: every user answered
    NONE lacks the credentials deleted and has those upserted (their salt and iterations)."""
    ok = {r.user for r in response.results if r.error_code == ErrorCode.NONE}
    deleted = [
        (d.name, mechanism)
        for d in request.deletions
        if d.name in ok and (mechanism := _mechanism(d.mechanism)) is not None
    ]
    upserted = [
        (u.name, mechanism, bytes(u.salt), u.iterations)
        for u in request.upsertions
        if u.name in ok and (mechanism := _mechanism(u.mechanism)) is not None
    ]

    def effect(image: MetadataImage) -> bool:
        if any(image.scram_credential(mechanism, user) is not None for user, mechanism in deleted):
            return False
        for user, mechanism, salt, iterations in upserted:
            credential = image.scram_credential(mechanism, user)
            if credential is None or (credential.salt, credential.iterations) != (salt, iterations):
                return False
        return True

    return effect


def _mechanism(type_id: int) -> ScramMechanism | None:
    try:
        return ScramMechanism.from_type(type_id)
    except ValueError:
        return None
