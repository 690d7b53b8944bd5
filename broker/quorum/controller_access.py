"""Who may use the controller listener, and how a single node's own broker logs in to it.

Only nodes have business on the controller listener: brokers register, heartbeat, fetch the
metadata log and forward admin requests there, voters run the quorum. Kafka's ControllerApis
therefore asks CLUSTER_ACTION on the cluster for nearly every API; kipling asks it for every API
(DESCRIBE for DescribeQuorum, as Kafka), once an authorizer is configured. A forwarded admin
request arrives with the broker's principal (kipling has no Envelope), and the broker has already
checked the client's own permissions before forwarding it, so CLUSTER_ACTION is the whole rule.
A cluster's brokers therefore log in as super users or hold CLUSTER_ACTION, as in Kafka.

A single node with no controller listener configured serves its controller on an internal
loopback listener. With an authorizer, any local process could otherwise reach it, so it becomes a
SASL_PLAINTEXT listener whose one PLAIN user and random password exist only in this process's
memory: the node's broker side logs in with them and that user is the controller's super user.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field

from broker.handlers.base import RequestContext
from broker.server.authentication import AUTHENTICATION_APIS
from client.security import ClientSecurityConfig
from metadata.authorizer import Authorizer
from protocol.acl_types import AclOperation, ResourceType
from protocol.api_keys import ApiKey
from security.jaas import PLAIN_LOGIN_MODULE
from server_common.config.listener_security import PLAIN, SASL_PLAINTEXT, ListenerSecurity

CLUSTER_RESOURCE = "kafka-cluster"
INTERNAL_CONTROLLER_USER = "kipling-internal-controller"


class ControllerAccess:
    """The controller listener's check of each request, before its handler runs."""

    def __init__(self, authorizer: Authorizer) -> None:
        self._authorizer = authorizer

    def allowed(self, ctx: RequestContext) -> bool:
        if not self._authorizer.enabled or ctx.api_key in AUTHENTICATION_APIS:
            return True
        operation = (
            AclOperation.DESCRIBE if ctx.api_key == ApiKey.DESCRIBE_QUORUM else AclOperation.CLUSTER_ACTION
        )
        return self._authorizer.authorize(
            ctx.principal, ctx.client_host, operation, ResourceType.CLUSTER, CLUSTER_RESOURCE
        )


@dataclass(frozen=True)
class InternalControllerLogin:
    """The in-memory PLAIN login of a single node's internal controller listener."""

    password: str = field(default_factory=lambda: secrets.token_urlsafe(32), repr=False)

    @property
    def principal(self) -> str:
        return f"User:{INTERNAL_CONTROLLER_USER}"

    def listener_security(self, listener: str) -> ListenerSecurity:
        jaas = (
            f'{PLAIN_LOGIN_MODULE} required username="{INTERNAL_CONTROLLER_USER}" '
            f'password="{self.password}" user_{INTERNAL_CONTROLLER_USER}="{self.password}";'
        )
        return ListenerSecurity(listener, SASL_PLAINTEXT, None, (PLAIN,), {PLAIN: jaas})

    def client_security(self) -> ClientSecurityConfig:
        return ClientSecurityConfig(
            protocol=SASL_PLAINTEXT,
            sasl_mechanism=PLAIN,
            username=INTERNAL_CONTROLLER_USER,
            password=self.password,
        )
