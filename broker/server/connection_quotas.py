"""Kafka's connection limits: ``max.connections`` and ``max.connections.per.ip`` (with overrides).

A connection over a limit is accepted and closed at once, the way Kafka treats one over its
per-IP limit. (Kafka's acceptor instead stops accepting at the broker-wide limit until a slot
frees; an asyncio server cannot stop accepting without closing its socket, so kipling closes the
extra connection there too, and the client retries after its reconnect backoff.)

As in Kafka, when the node has more than one client listener, connections on the inter-broker
listener are exempt from ``max.connections``, so that clients cannot lock out replication;
Kafka then closes the least recently used connection of another listener, which kipling does not.
The per-IP limit applies on every listener. The controller listener has no quota of its own
(a voter's peers and brokers are few and known).

An IP with a ``connection_creation_rate`` client quota (KIP-612) that opens connections faster
than it is throttled: the connection is refused with :data:`CONNECTION_RATE_THROTTLED` and
:attr:`ConnectionQuotas.throttle_ms` says for how long the listener holds it, unserved, before
closing it (Kafka's acceptor's delayed close; see :mod:`broker.quotas.connection_rate`).

``max.connection.creation.rate`` (broker-wide, the inter-broker listener exempt beside others as
for ``max.connections``): a connection over it is not refused but waits, unserved, for the time
Kafka's blocked acceptor would have made it wait (:attr:`ConnectionQuotas.accept_delay_ms`).

Not implemented: Kafka's per-listener ``listener.name.X.max.connections`` and
``listener.name.X.max.connection.creation.rate``.

Refusals are logged at most once per :data:`REFUSAL_LOG_INTERVAL_S`, with the count refused since
the last line, so 2,000 refused connections do not write 2,000 lines; the connection-close metric
counts each one (reasons :data:`MAX_CONNECTIONS` and :data:`MAX_CONNECTIONS_PER_IP`).
"""

from __future__ import annotations

import collections
import ipaddress
import socket
import time
from collections.abc import Callable, Mapping, Sequence

import structlog

from broker.quotas.connection_rate import BrokerConnectionRate, IpConnectionRates

log = structlog.get_logger("kipling.server")

MAX_CONNECTIONS = "max_connections"
MAX_CONNECTIONS_PER_IP = "max_connections_per_ip"
CONNECTION_RATE_THROTTLED = "connection_rate_throttled"
"""Refusal reasons, as the connection-close metric labels them."""

REFUSAL_LOG_INTERVAL_S = 10.0


def normalize_ip(host: str) -> str:
    """The canonical text of an address, an IPv4-mapped IPv6 one as plain IPv4 (a dual-stack
    listener reports IPv4 peers as ``::ffff:a.b.c.d``); anything else unchanged."""
    try:
        address = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return host
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return str(address.ipv4_mapped)
    return str(address)


def resolve_overrides(overrides: Mapping[str, int]) -> dict[str, int]:
    """``max.connections.per.ip.overrides`` by address: a host name counts for each address it
    resolves to now, as Kafka resolves it once (an unresolvable one is logged and left out)."""
    resolved: dict[str, int] = {}
    for host, count in overrides.items():
        try:
            ipaddress.ip_address(host.strip("[]"))
            resolved[normalize_ip(host)] = count
            continue
        except ValueError:
            pass
        try:
            infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
        except OSError as exc:
            log.warning("max.connections.per.ip.overrides: host not resolved", host=host, error=str(exc))
            continue
        for info in infos:
            resolved[normalize_ip(str(info[4][0]))] = count
    return resolved


class RefusalLog:
    """One log line per interval for refused connections, however many there were."""

    def __init__(
        self, interval_s: float = REFUSAL_LOG_INTERVAL_S, clock: Callable[[], float] = time.monotonic
    ):
        self._interval_s = interval_s
        self._clock = clock
        self._last: float | None = None
        self._suppressed = 0

    def refused(self, reason: str, ip: str, limit: int) -> bool:
        """Log this refusal unless one was logged within the interval; True if logged."""
        now = self._clock()
        if self._last is not None and now - self._last < self._interval_s:
            self._suppressed += 1
            return False
        log.warning(
            "connection refused: limit reached",
            reason=reason,
            ip=ip,
            limit=limit,
            refused_since_last_line=self._suppressed,
        )
        self._last = now
        self._suppressed = 0
        return True


class ConnectionQuotas:
    """Counts open connections per broker and per IP, and says whether a new one may stay."""

    def __init__(
        self,
        *,
        max_connections: int,
        max_connections_per_ip: int,
        per_ip_overrides: Mapping[str, int],
        listeners: Sequence[str] = (),
        inter_broker_listener: str | None = None,
        refusal_log: RefusalLog | None = None,
        ip_rates: IpConnectionRates | None = None,
        broker_rate: BrokerConnectionRate | None = None,
    ) -> None:
        """``per_ip_overrides`` by address (:func:`resolve_overrides`); ``listeners``: the names of
        the client listeners that share these quotas; ``ip_rates``: the IPs' connection_creation_rate."""
        self._max_connections = max_connections
        self._max_per_ip = max_connections_per_ip
        self._overrides = {normalize_ip(host): count for host, count in per_ip_overrides.items()}
        self._protected = inter_broker_listener if len(listeners) > 1 else None
        self._total = 0
        self._per_ip: collections.Counter[str] = collections.Counter()
        self._log = refusal_log if refusal_log is not None else RefusalLog()
        self._ip_rates = ip_rates
        self.throttle_ms = 0
        self._broker_rate = broker_rate
        self.accept_delay_ms = 0
        """How long the connection last admitted waits before it is served (the broker-wide rate)."""
        """How long to hold the connection last refused with CONNECTION_RATE_THROTTLED."""

    @property
    def total(self) -> int:
        return self._total

    def count(self, ip: str) -> int:
        return self._per_ip[normalize_ip(ip)]

    def limit_for(self, ip: str) -> int:
        return self._overrides.get(normalize_ip(ip), self._max_per_ip)

    def admit(self, listener: str, ip: str) -> str | None:
        """Count a new connection from ``ip`` on ``listener``, or say why it must be closed (then
        nothing is counted, and :meth:`release` must not be called for it)."""
        ip = normalize_ip(ip)
        self.accept_delay_ms = 0
        if self._broker_rate is not None and listener != self._protected:  # Kafka's waitForConnectionSlot
            self.accept_delay_ms = self._broker_rate.delay_ms()
        if self._ip_rates is not None:  # Kafka records the IP's rate before counting it
            self.throttle_ms = self._ip_rates.record_and_get_throttle_ms(ip)
            if self.throttle_ms > 0:
                return CONNECTION_RATE_THROTTLED
        per_ip_limit = self.limit_for(ip)
        if self._per_ip[ip] >= per_ip_limit:
            self._log.refused(MAX_CONNECTIONS_PER_IP, ip, per_ip_limit)
            return MAX_CONNECTIONS_PER_IP
        if self._total >= self._max_connections and listener != self._protected:
            self._log.refused(MAX_CONNECTIONS, ip, self._max_connections)
            return MAX_CONNECTIONS
        self._total += 1
        self._per_ip[ip] += 1
        return None

    def release(self, ip: str) -> None:
        """An admitted connection closed."""
        ip = normalize_ip(ip)
        self._total -= 1
        self._per_ip[ip] -= 1
        if self._per_ip[ip] <= 0:
            del self._per_ip[ip]
