"""max.connections, max.connections.per.ip and its overrides: counting, refusing, and logging
refusals without flooding; the keys' parsing."""

from __future__ import annotations

import pytest
import structlog

from broker.server.connection_quotas import (
    MAX_CONNECTIONS,
    MAX_CONNECTIONS_PER_IP,
    ConnectionQuotas,
    RefusalLog,
    normalize_ip,
    resolve_overrides,
)
from server_common.config import load_config
from server_common.config.definitions import ConfigError

pytestmark = pytest.mark.timeout(10)


def quotas(**kwargs: object) -> ConnectionQuotas:
    settings: dict[str, object] = {
        "max_connections": 2**31 - 1,
        "max_connections_per_ip": 2**31 - 1,
        "per_ip_overrides": {},
    }
    settings.update(kwargs)
    return ConnectionQuotas(**settings)  # type: ignore[arg-type]


def test_per_ip_limit_refuses_the_next_connection_and_frees_a_slot_on_release() -> None:
    q = quotas(max_connections_per_ip=5)
    assert [q.admit("PLAINTEXT", "10.0.0.1") for _ in range(5)] == [None] * 5
    assert q.admit("PLAINTEXT", "10.0.0.1") == MAX_CONNECTIONS_PER_IP
    assert q.admit("PLAINTEXT", "10.0.0.2") is None  # another address has its own count
    assert q.count("10.0.0.1") == 5 and q.total == 6
    q.release("10.0.0.1")
    assert q.admit("PLAINTEXT", "10.0.0.1") is None


def test_overrides_raise_or_lower_the_limit_for_their_address() -> None:
    q = quotas(max_connections_per_ip=2, per_ip_overrides={"10.0.0.9": 4, "10.0.0.8": 0})
    assert [q.admit("PLAINTEXT", "10.0.0.9") for _ in range(5)][-2:] == [None, MAX_CONNECTIONS_PER_IP]
    assert q.admit("PLAINTEXT", "10.0.0.8") == MAX_CONNECTIONS_PER_IP
    assert q.limit_for("10.0.0.7") == 2


def test_ipv4_mapped_peers_count_as_their_ipv4_address() -> None:
    q = quotas(max_connections_per_ip=1, per_ip_overrides={"127.0.0.1": 2})
    assert normalize_ip("::ffff:127.0.0.1") == "127.0.0.1"
    assert normalize_ip("[::1]") == "::1"
    assert q.admit("PLAINTEXT", "::ffff:127.0.0.1") is None
    assert q.admit("PLAINTEXT", "127.0.0.1") is None
    assert q.admit("PLAINTEXT", "127.0.0.1") == MAX_CONNECTIONS_PER_IP


def test_broker_wide_limit_exempts_the_inter_broker_listener_only_beside_others() -> None:
    q = quotas(max_connections=2, listeners=["CLIENT", "INTERNAL"], inter_broker_listener="INTERNAL")
    assert q.admit("CLIENT", "10.0.0.1") is None
    assert q.admit("CLIENT", "10.0.0.2") is None
    assert q.admit("CLIENT", "10.0.0.3") == MAX_CONNECTIONS
    assert q.admit("INTERNAL", "10.0.0.4") is None  # replication is not locked out by clients
    alone = quotas(max_connections=1, listeners=["PLAINTEXT"], inter_broker_listener="PLAINTEXT")
    assert alone.admit("PLAINTEXT", "10.0.0.1") is None
    assert alone.admit("PLAINTEXT", "10.0.0.2") == MAX_CONNECTIONS


def test_per_ip_limit_applies_on_the_inter_broker_listener_too() -> None:
    q = quotas(max_connections_per_ip=1, listeners=["A", "B"], inter_broker_listener="B")
    assert q.admit("B", "10.0.0.1") is None
    assert q.admit("B", "10.0.0.1") == MAX_CONNECTIONS_PER_IP


def test_refusals_are_logged_once_per_interval_with_the_count_since() -> None:
    now = [0.0]
    refusals = RefusalLog(interval_s=10.0, clock=lambda: now[0])
    with structlog.testing.capture_logs() as logs:
        logged = [refusals.refused(MAX_CONNECTIONS_PER_IP, "10.0.0.1", 5) for _ in range(2000)]
        now[0] = 10.0
        refusals.refused(MAX_CONNECTIONS_PER_IP, "10.0.0.1", 5)
    assert sum(logged) == 1
    assert len(logs) == 2
    assert logs[1]["refused_since_last_line"] == 1999
    assert logs[0]["reason"] == MAX_CONNECTIONS_PER_IP and logs[0]["limit"] == 5


def test_resolve_overrides_keeps_addresses_and_resolves_names() -> None:
    resolved = resolve_overrides({"127.0.0.1": 3, "[::1]": 4, "localhost": 7})
    assert resolved["::1"] in (4, 7)
    assert resolved["127.0.0.1"] == 7  # localhost resolves to it (later entries win)


def test_resolve_overrides_skips_unresolvable_names() -> None:
    assert resolve_overrides({"no-such-host.invalid": 3}) == {}


# -- configuration -------------------------------------------------------------------------------


def test_defaults_are_kafkas_except_the_bounded_memory_pool() -> None:
    cfg, _ = load_config(None, [])
    assert cfg.max_connections == 2**31 - 1
    assert cfg.max_connections_per_ip == 2**31 - 1
    assert cfg.max_connections_per_ip_overrides == {}
    assert cfg.queued_max_request_bytes == 100 * 1024 * 1024
    assert cfg.kipling_request_receive_timeout_ms == 30_000


def test_overrides_parse_hosts_addresses_and_bracketed_ipv6() -> None:
    cfg, warnings = load_config(
        None,
        [
            "max.connections.per.ip=10",
            "max.connections.per.ip.overrides= 10.0.0.1:200 , broker1.example.com:5,[::1]:3 ",
            "queued.max.request.bytes=-1",
            "kipling.request.receive.timeout.ms=0",
        ],
    )
    assert warnings == []
    assert cfg.max_connections_per_ip_overrides == {"10.0.0.1": 200, "broker1.example.com": 5, "::1": 3}
    assert cfg.queued_max_request_bytes == -1
    assert cfg.kipling_request_receive_timeout_ms == 0


@pytest.mark.parametrize(
    "override",
    [
        "max.connections.per.ip.overrides=10.0.0.1",
        "max.connections.per.ip.overrides=10.0.0.1:many",
        "max.connections.per.ip.overrides=:5",
        "max.connections.per.ip.overrides=10.0.0.1:-1",
        "max.connections.per.ip.overrides=10.0.0.1:99999999999",
        "max.connections.per.ip.overrides=a:1,a:2",
    ],
)
def test_bad_overrides_are_refused_in_one_line_naming_the_key(override: str) -> None:
    with pytest.raises(ConfigError) as raised:
        load_config(None, [override])
    assert raised.value.key == "max.connections.per.ip.overrides"
    message = str(raised.value)
    assert "max.connections.per.ip.overrides" in message and "\n" not in message


@pytest.mark.parametrize(
    ("override", "key"),
    [
        ("max.connections.per.ip=-1", "max.connections.per.ip"),
        ("max.connections.per.ip=0", "max.connections.per.ip"),
        ("kipling.request.receive.timeout.ms=-5", "kipling.request.receive.timeout.ms"),
        ("queued.max.request.bytes=lots", "queued.max.request.bytes"),
    ],
)
def test_bad_values_are_refused_naming_the_key(override: str, key: str) -> None:
    with pytest.raises(ConfigError) as raised:
        load_config(None, [override])
    assert raised.value.key == key


def test_zero_per_ip_is_allowed_with_overrides() -> None:
    cfg, _ = load_config(None, ["max.connections.per.ip=0", "max.connections.per.ip.overrides=10.0.0.1:5"])
    assert cfg.max_connections_per_ip == 0
