"""The client's TLS and SASL against the broker's own listener code, in process, on both event
loops: :class:`~client.connection.KafkaConnection` with a :class:`~client.security.ClientSecurity`
connecting to a :class:`~broker.server.listener.BrokerServer` that serves ApiVersions, SaslHandshake
and SaslAuthenticate with the real authenticator.

Covers PLAIN and SCRAM-SHA-256/512 logins over TLS and plain TCP, every refusal the client must
report as a clean :class:`ConnectError` (wrong password, unknown mechanism, a forged SCRAM server
signature, an untrusted certificate, a host name the certificate does not carry, plaintext to a
TLS port) without the password in the message, and KIP-368 re-authentication before a request
once the session lifetime is mostly spent. On TLS listeners a socket counts against the
connection quotas from the moment it is accepted, before its handshake, and a refused handshake
counts as a failed authentication.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import AsyncIterator, Callable, Coroutine
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
import uvloop
from prometheus_client import CollectorRegistry

from broker.handlers.api_versions import ApiVersionsHandler
from broker.handlers.registry import HandlerRegistry
from broker.handlers.sasl import SaslAuthenticateHandler, SaslHandshakeHandler
from broker.metrics.requests import RequestMetrics
from broker.server.connection_quotas import ConnectionQuotas
from broker.server.dispatcher import RequestDispatcher
from broker.server.listener import BrokerServer
from client.connection import KafkaConnection
from client.errors import AuthenticationFailedError, ConnectError
from client.security import ClientSecurity
from protocol.api_keys import ApiKey
from security.dev_certs import issue, new_authority
from security.scram import ScramCredential, ScramMechanism, credential_from_password
from security.tls import SslSettings
from server_common.config.listener_security import ListenerSecurity

pytestmark = pytest.mark.timeout(60)

LOOPS: dict[str, Callable[[], asyncio.AbstractEventLoop]] = {
    "asyncio": asyncio.new_event_loop,
    "uvloop": uvloop.new_event_loop,
}
PASSWORDS = {"alice": "alice-secret-1"}
SCRAM_PASSWORD = "carol-secret-2"
VERSIONS = {"client_software_name": "kipling-tests", "client_software_version": "1"}


@dataclass
class Pki:
    ca: Path
    broker: Path
    stranger_ca: Path

    def trust(self, *, verify_host: bool = True, ca: Path | None = None) -> Any:
        settings = SslSettings(
            truststore_type="PEM",
            truststore_location=str(ca or self.ca),
            endpoint_identification_algorithm="https" if verify_host else "",
        )
        return settings.client_context()


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    root = tmp_path_factory.mktemp("pki")
    authority = new_authority()
    (root / "ca.pem").write_text(authority.pem)
    issued = issue(authority, "broker", hosts=("localhost", "127.0.0.1"))
    (root / "broker.pem").write_text(issued.keystore_pem)
    (root / "stranger-ca.pem").write_text(new_authority("stranger CA").pem)
    return Pki(root / "ca.pem", root / "broker.pem", root / "stranger-ca.pem")


class Credentials:
    """PLAIN users and SCRAM credentials, counting the lookups (one per login)."""

    def __init__(self) -> None:
        self.scram = {
            mechanism: credential_from_password(mechanism, SCRAM_PASSWORD)
            for mechanism in (ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512)
        }
        self.logins = 0

    def plain_password(self, listener: str, user: str) -> str | None:
        self.logins += 1
        return PASSWORDS.get(user)

    def scram_credential(self, mechanism: ScramMechanism, user: str) -> ScramCredential | None:
        self.logins += 1
        return self.scram[mechanism] if user == "carol" else None


def on_both_loops(scenario: Callable[..., Coroutine[Any, Any, None]]) -> Callable[..., None]:
    @pytest.mark.parametrize("loop", sorted(LOOPS))
    def test(loop: str, pki: Pki) -> None:
        with asyncio.Runner(loop_factory=LOOPS[loop]) as runner:
            runner.run(scenario(pki))

    test.__name__ = scenario.__name__
    test.__doc__ = scenario.__doc__
    return test


@contextlib.asynccontextmanager
async def listener(
    pki: Pki | None,
    protocol: str,
    *,
    reauth_ms: int = 0,
    credentials: Credentials | None = None,
    mechanisms: tuple[str, ...] = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"),
    quotas: ConnectionQuotas | None = None,
    metrics_registry: CollectorRegistry | None = None,
    authentication_timeout_ms: int = 30_000,
) -> AsyncIterator[int]:
    """A BrokerServer with the SASL handlers on a loopback port (TLS when ``pki`` is given)."""
    registry = HandlerRegistry([])
    registry.register(ApiVersionsHandler(registry.api_ranges))
    registry.register(SaslHandshakeHandler())
    registry.register(SaslAuthenticateHandler())
    metrics = RequestMetrics(metrics_registry or CollectorRegistry())
    ssl_settings = (
        None if pki is None else SslSettings(keystore_type="PEM", keystore_location=str(pki.broker))
    )
    security = ListenerSecurity(
        protocol,
        protocol,
        ssl_settings,
        mechanisms if "SASL" in protocol else (),
        {},
        max_reauth_ms=reauth_ms,
    )
    server = BrokerServer(
        RequestDispatcher(registry, metrics, protocol),
        [("127.0.0.1", 0)],
        metrics,
        max_frame_size=1 << 20,
        idle_timeout_ms=60_000,
        listener=protocol,
        security=security,
        credentials=credentials or Credentials(),
        failed_authentication_delay_ms=0,
        quotas=quotas,
        authentication_timeout_ms=authentication_timeout_ms,
    )
    (_, port), *_ = await server.start()
    try:
        yield port
    finally:
        await server.stop(grace_s=1.0)


async def open_with(port: int, security: ClientSecurity | None, host: str = "127.0.0.1") -> KafkaConnection:
    return await KafkaConnection.open(host, port, security=security, connect_timeout_s=10)


async def ask(connection: KafkaConnection) -> Any:
    return await connection.request(ApiKey.API_VERSIONS, 3, VERSIONS)


async def works(connection: KafkaConnection) -> None:
    """An ordinary request goes through (the broker closes an unauthenticated one instead)."""
    version = connection.version_for(ApiKey.API_VERSIONS, 3)
    response = await connection.request(ApiKey.API_VERSIONS, version, VERSIONS)
    assert response.error_code == 0
    connection.close()
    await connection.wait_closed()


@on_both_loops
async def test_plain_and_scram_logins_over_tls(pki: Pki) -> None:
    """SASL_SSL: each mechanism logs in and the connection then serves requests (with uvloop,
    TLS under the client's BufferedProtocol)."""
    async with listener(pki, "SASL_SSL") as port:
        context = pki.trust()
        logins = [
            ClientSecurity(context, None, "PLAIN", "alice", PASSWORDS["alice"]),
            ClientSecurity(context, None, "SCRAM-SHA-256", "carol", SCRAM_PASSWORD),
            ClientSecurity(context, None, "SCRAM-SHA-512", "carol", SCRAM_PASSWORD),
        ]
        for security in logins:
            await works(await open_with(port, security))


@on_both_loops
async def test_tls_alone_and_sasl_over_plain_tcp(pki: Pki) -> None:
    async with listener(pki, "SSL") as port:
        await works(await open_with(port, ClientSecurity(pki.trust())))
    async with listener(None, "SASL_PLAINTEXT") as port:
        security = ClientSecurity(None, None, "SCRAM-SHA-512", "carol", SCRAM_PASSWORD)
        await works(await open_with(port, security))


@on_both_loops
async def test_large_responses_arrive_whole_over_tls(pki: Pki) -> None:
    """Many pipelined requests on one TLS connection: every response is matched in order."""
    async with listener(pki, "SSL") as port:
        connection = await open_with(port, ClientSecurity(pki.trust()))
        answers = await asyncio.gather(*(ask(connection) for _ in range(200)))
        assert all(answer.error_code == 0 for answer in answers)
        connection.close()
        await connection.wait_closed()


@on_both_loops
async def test_refused_logins_are_clean_errors_without_the_password(pki: Pki) -> None:
    async with listener(pki, "SASL_SSL") as port:
        context = pki.trust()
        wrong = "not-the-password-" + secrets.token_hex(4)
        cases = {
            "PLAIN": ClientSecurity(context, None, "PLAIN", "alice", wrong),
            "SCRAM-SHA-512": ClientSecurity(context, None, "SCRAM-SHA-512", "carol", wrong),
            "unknown user": ClientSecurity(context, None, "SCRAM-SHA-256", "mallory", wrong),
        }
        for case, security in cases.items():
            with pytest.raises(AuthenticationFailedError) as caught:
                await open_with(port, security)
            message = str(caught.value)
            assert "SASL_AUTHENTICATION_FAILED" in message, case
            assert wrong not in message and wrong not in repr(caught.value.__cause__), case
            assert wrong not in repr(security)


@on_both_loops
async def test_a_mechanism_the_listener_does_not_enable_is_named(pki: Pki) -> None:
    security = ClientSecurity(None, None, "PLAIN", "alice", PASSWORDS["alice"])
    async with listener(None, "SASL_PLAINTEXT", mechanisms=("SCRAM-SHA-512",)) as port:
        with pytest.raises(
            AuthenticationFailedError, match=r"does not enable SASL mechanism PLAIN .*SCRAM-SHA-512"
        ):
            await open_with(port, security)
    async with listener(None, "PLAINTEXT") as port:
        with pytest.raises(AuthenticationFailedError, match=r"does not use SASL"):
            await open_with(port, security)


@on_both_loops
async def test_a_forged_scram_server_signature_is_refused(pki: Pki) -> None:
    """A server that accepts the proof (it has the stored key) but not the server key, as an
    impostor holding only a leaked StoredKey would: the client must not trust it."""
    credentials = Credentials()
    real = credentials.scram[ScramMechanism.SCRAM_SHA_512]
    credentials.scram[ScramMechanism.SCRAM_SHA_512] = replace(real, server_key=secrets.token_bytes(64))
    async with listener(pki, "SASL_SSL", credentials=credentials) as port:
        security = ClientSecurity(pki.trust(), None, "SCRAM-SHA-512", "carol", SCRAM_PASSWORD)
        with pytest.raises(AuthenticationFailedError, match=r"Invalid server signature"):
            await open_with(port, security)


@on_both_loops
async def test_certificates_are_checked(pki: Pki) -> None:
    async with listener(pki, "SSL") as port:
        with pytest.raises(
            ConnectError, match=r"TLS handshake with 127\.0\.0\.1:\d+ failed: CERTIFICATE_VERIFY_FAILED"
        ):
            await open_with(port, ClientSecurity(pki.trust(ca=pki.stranger_ca)))
        # the certificate names localhost and 127.0.0.1, not this name
        with pytest.raises(ConnectError, match=r"TLS handshake .* failed: .*(mismatch|match)"):
            await open_with(port, ClientSecurity(pki.trust(), server_hostname="broker.example"))
        # without endpoint identification the name is not checked, the chain still is
        await works(await open_with(port, ClientSecurity(pki.trust(verify_host=False), "broker.example")))
        with pytest.raises(ConnectError, match=r"check security\.protocol"):
            await open_with(port, None)


@on_both_loops
async def test_tls_to_a_plaintext_port_fails_cleanly(pki: Pki) -> None:
    async with listener(None, "PLAINTEXT") as port:
        with pytest.raises(ConnectError, match=r"TLS"):
            await open_with(port, ClientSecurity(pki.trust()))


@on_both_loops
async def test_the_session_is_renewed_before_it_expires(pki: Pki) -> None:
    """connections.max.reauth.ms: the broker gives a lifetime; a request made after most of it
    passed re-authenticates first (the broker would close the connection after it ends)."""
    credentials = Credentials()
    async with listener(pki, "SASL_SSL", reauth_ms=600, credentials=credentials) as port:
        security = ClientSecurity(pki.trust(), None, "SCRAM-SHA-256", "carol", SCRAM_PASSWORD)
        connection = await open_with(port, security)
        assert credentials.logins == 1
        for _ in range(3):
            await asyncio.sleep(0.6)  # past the lifetime: without renewal the broker closes
            answers = await asyncio.gather(*(ask(connection) for _ in range(5)))
            assert all(answer.error_code == 0 for answer in answers)
        assert credentials.logins == 4
        assert not connection.closed
        connection.close()
        await connection.wait_closed()


async def idle_socket(port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A TCP connection that never starts its TLS handshake."""
    return await asyncio.open_connection("127.0.0.1", port)


async def closed_by_broker(reader: asyncio.StreamReader) -> bool:
    with contextlib.suppress(ConnectionError):
        return await asyncio.wait_for(reader.read(), 10) == b""
    return True


async def slots_in_use(quotas: ConnectionQuotas, count: int) -> None:
    async with asyncio.timeout(10):
        while quotas.total != count:
            await asyncio.sleep(0.01)


@on_both_loops
async def test_tls_handshakes_in_progress_count_against_the_connection_quotas(pki: Pki) -> None:
    """Two sockets that never start their handshake fill max.connections.per.ip=2: the third is
    closed at once, and closing one of the two frees its slot for a real TLS client."""
    quotas = ConnectionQuotas(max_connections=100, max_connections_per_ip=2, per_ip_overrides={})
    async with listener(pki, "SSL", quotas=quotas) as port:
        idle = [await idle_socket(port) for _ in range(2)]
        await slots_in_use(quotas, 2)
        reader, writer = await idle_socket(port)
        assert await closed_by_broker(reader)
        assert quotas.total == 2
        idle[0][1].close()
        await slots_in_use(quotas, 1)
        await works(await open_with(port, ClientSecurity(pki.trust())))
        await slots_in_use(quotas, 1)
        for _, w in (*idle[1:], (reader, writer)):
            w.close()


@on_both_loops
async def test_a_refused_tls_handshake_counts_as_a_failed_authentication(pki: Pki) -> None:
    """A plaintext Kafka request to a TLS port: the handshake fails, the connection closes, the
    failure is counted, and its quota slot is free again."""
    quotas = ConnectionQuotas(max_connections=100, max_connections_per_ip=1, per_ip_overrides={})
    registry = CollectorRegistry()
    async with listener(pki, "SSL", quotas=quotas, metrics_registry=registry) as port:
        reader, writer = await idle_socket(port)
        writer.write(bytes.fromhex("0000001500120003000000010007636c69656e7400000000"))
        assert await closed_by_broker(reader)
        failed = registry.get_sample_value(
            "kafka_server_socketservermetrics_failed_authentication_total", {"listener": "SSL"}
        )
        assert failed == 1
        await slots_in_use(quotas, 0)
        await works(await open_with(port, ClientSecurity(pki.trust())))
        writer.close()


@on_both_loops
async def test_a_handshake_never_started_is_closed_at_the_authentication_timeout(pki: Pki) -> None:
    quotas = ConnectionQuotas(max_connections=100, max_connections_per_ip=1, per_ip_overrides={})
    async with listener(pki, "SSL", quotas=quotas, authentication_timeout_ms=300) as port:
        reader, writer = await idle_socket(port)
        assert await closed_by_broker(reader)
        await slots_in_use(quotas, 0)
        writer.close()
