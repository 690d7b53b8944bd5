"""Where SASL mechanisms find users: PLAIN's in the listener's JAAS configuration, as Kafka's
``PlainServerCallbackHandler`` reads ``user_<name>="<password>"`` options, and SCRAM's salted
credentials in the cluster metadata (never a password)."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from security.jaas import parse_jaas, plain_users
from security.scram import ScramCredential, ScramMechanism
from server_common.config.listener_security import PLAIN, ListenerSecurity

ScramLookup = Callable[[ScramMechanism, str], ScramCredential | None]


class BrokerCredentials:
    """The :class:`~broker.server.authentication.Credentials` of a broker's listeners."""

    def __init__(self, listeners: Mapping[str, ListenerSecurity], scram: ScramLookup | None = None) -> None:
        """``scram`` reads the current metadata image; None: no SCRAM credentials exist here."""
        self._plain: dict[str, dict[str, str]] = {
            name: plain_users(parse_jaas(security.jaas[PLAIN]))
            for name, security in listeners.items()
            if PLAIN in security.jaas
        }
        self._scram = scram

    def plain_password(self, listener: str, user: str) -> str | None:
        return self._plain.get(listener, {}).get(user)

    def scram_credential(self, mechanism: ScramMechanism, user: str) -> ScramCredential | None:
        return None if self._scram is None else self._scram(mechanism, user)
