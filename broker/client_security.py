"""The security of a node's own connections to other nodes, from its configuration.

In Kafka, a broker's connections to other brokers and to the controllers "authenticate like any
client, on the listener named by inter.broker.listener.name / controller.listener.names": that
listener's TLS settings (``listener.name.<l>.ssl.*`` over ``ssl.*``), the mechanism of
sasl.mechanism.inter.broker.protocol or sasl.mechanism.controller.protocol, and the username and
password of ``listener.name.<l>.<mech>.sasl.jaas.config``. Which listener and which login is
decided once, by :meth:`BrokerConfig.inter_broker_security` and
:meth:`BrokerConfig.controller_security` (the config check at load refuses a node that could not
log in); this module turns that into the client's settings. Every place a node connects from
uses these two functions:

* inter-broker: the follower processes (the settings travel in their ``configure`` IPC message,
  :func:`broker.replication.followers.settings.follower_settings`), and the transaction markers'
  connection pool (:func:`broker.assembly.build_transaction_coordination`);
* controller: the broker's two :class:`~broker.cluster.controller_channel.ControllerChannel`
  connections and the quorum's connections to the other voters
  (:class:`~broker.quorum.peers.QuorumPeers`).
"""

from __future__ import annotations

from client.security import ClientSecurityConfig
from server_common.config.broker_config import BrokerConfig
from server_common.config.listener_security import OutboundSecurity


def _client_config(outbound: OutboundSecurity) -> ClientSecurityConfig:
    return ClientSecurityConfig(
        protocol=outbound.protocol,
        ssl=outbound.ssl,
        sasl_mechanism=outbound.sasl_mechanism,
        username=outbound.username,
        password=outbound.password,
    )


def inter_broker_client_security(config: BrokerConfig) -> ClientSecurityConfig:
    """How this node connects to the other brokers' inter-broker listener."""
    return _client_config(config.inter_broker_security())


def controller_client_security(config: BrokerConfig) -> ClientSecurityConfig:
    """How this node connects to the controllers' listener (first of controller.listener.names)."""
    return _client_config(config.controller_security())


__all__ = ["controller_client_security", "inter_broker_client_security"]
