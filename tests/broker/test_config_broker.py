"""BrokerConfig: defaults, precedence, aliases, validation messages, warnings and DescribeConfigs."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from server_common.config import (
    BrokerConfig,
    ConfigError,
    ConfigSource,
    ConfigType,
    Listener,
    QuorumVoter,
    load_config,
)
from server_common.config.broker_config import FOLDED_KEYS, SECURITY_KEYS
from server_common.config.definitions import BY_NAME, DEFINITIONS, LONG_MAX, ConfigSynonym


def config(*overrides: str) -> BrokerConfig:
    cfg, warnings = load_config(None, overrides)
    assert warnings == []
    return cfg


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "server.properties"
    path.write_text(text)
    return path


# -- defaults ------------------------------------------------------------------------------------


def test_builtin_defaults_run_a_single_node() -> None:
    cfg, warnings = load_config(None, [])
    assert warnings == []
    assert cfg.node_id == 1
    assert cfg.process_roles == ["broker", "controller"]
    assert cfg.is_broker and cfg.is_controller
    assert cfg.controller_quorum_voters == []
    assert cfg.listeners == [Listener("PLAINTEXT", "127.0.0.1", 9092)]
    assert cfg.advertised_listeners == cfg.listeners
    assert cfg.inter_broker_listener_name == "PLAINTEXT"
    assert cfg.inter_broker_listener == Listener("PLAINTEXT", "127.0.0.1", 9092)
    assert cfg.log_dirs == [Path("./kipling-data")]
    assert cfg.metrics_listener == ("127.0.0.1", 9404)
    assert cfg.cluster_id is None


def test_kafka_defaults() -> None:
    cfg = config()
    expected = {
        "num_partitions": 1,
        "default_replication_factor": 1,
        "auto_create_topics_enable": True,
        "delete_topic_enable": True,
        "socket_request_max_bytes": 104857600,
        "connections_max_idle_ms": 600000,
        "message_max_bytes": 1048588,
        "log_segment_bytes": 1073741824,
        "log_roll_ms": 168 * 3_600_000,
        "log_roll_jitter_ms": 0,
        "log_retention_ms": 168 * 3_600_000,
        "log_retention_bytes": -1,
        "log_retention_check_interval_ms": 300000,
        "log_flush_interval_messages": LONG_MAX,
        "log_flush_interval_ms": None,
        "log_flush_offset_checkpoint_interval_ms": 60000,
        "log_flush_start_offset_checkpoint_interval_ms": 60000,
        "log_index_interval_bytes": 4096,
        "log_index_size_max_bytes": 10485760,
        "log_message_timestamp_type": "CreateTime",
        "log_cleanup_policy": ["delete"],
        "log_segment_delete_delay_ms": 60000,
        "min_insync_replicas": 1,
        "unclean_leader_election_enable": False,
        "replica_lag_time_max_ms": 30000,
        "replica_fetch_wait_max_ms": 500,
        "replica_fetch_min_bytes": 1,
        "replica_fetch_max_bytes": 1048576,
        "replica_fetch_response_max_bytes": 10485760,
        "replica_fetch_backoff_ms": 1000,
        "replica_high_watermark_checkpoint_interval_ms": 5000,
        "num_replica_fetchers": 1,
        "replica_socket_timeout_ms": 30000,
        "broker_session_timeout_ms": 9000,
        "broker_heartbeat_interval_ms": 2000,
        "fetch_max_bytes": 57671680,
        "max_incremental_fetch_session_cache_slots": 1000,
        "min_incremental_fetch_session_eviction_ms": 120000,
        "fetch_purgatory_purge_interval_requests": 1000,
        "producer_purgatory_purge_interval_requests": 1000,
        "producer_id_expiration_ms": 86400000,
        "max_connections": 2**31 - 1,
        "offsets_topic_num_partitions": 50,
        "offsets_topic_replication_factor": 3,
        "group_initial_rebalance_delay_ms": 3000,
        "group_min_session_timeout_ms": 6000,
        "group_max_session_timeout_ms": 1800000,
        "offsets_retention_minutes": 10080,
    }
    assert {name: getattr(cfg, name) for name in expected} == expected


def test_every_defined_key_reaches_an_attribute() -> None:
    names = {f.name for f in dataclasses.fields(BrokerConfig)}
    for definition in DEFINITIONS:
        if definition.name not in FOLDED_KEYS | SECURITY_KEYS:
            assert definition.name.replace(".", "_") in names, definition.name


# -- precedence ----------------------------------------------------------------------------------


def test_overrides_win_over_the_file(tmp_path: Path) -> None:
    path = write(tmp_path, "num.partitions=3\nlog.segment.bytes=1000\n")
    cfg, _ = load_config(path, ["num.partitions=7"])
    assert cfg.num_partitions == 7
    assert cfg.log_segment_bytes == 1000
    assert cfg.source_of("num.partitions") is ConfigSource.STATIC_BROKER_CONFIG


def test_the_last_of_repeated_overrides_wins() -> None:
    assert config("num.partitions=2", "num.partitions=5").num_partitions == 5


def test_broker_id_is_an_alias_of_node_id(tmp_path: Path) -> None:
    assert config("broker.id=4").node_id == 4
    assert config("broker.id=4", "node.id=4").node_id == 4
    # An override under either name beats the file under the other.
    cfg, _ = load_config(write(tmp_path, "node.id=1\n"), ["broker.id=9"])
    assert cfg.node_id == 9
    cfg, _ = load_config(write(tmp_path, "broker.id=1\n"), ["node.id=9"])
    assert cfg.node_id == 9


def test_node_id_and_broker_id_that_disagree_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"node.id='1' and broker.id='2' disagree"):
        load_config(write(tmp_path, "node.id=1\nbroker.id=2\n"), [])


@pytest.mark.parametrize(
    ("settings", "expected_ms"),
    [
        ([], 168 * 3_600_000),
        (["log.retention.hours=1"], 3_600_000),
        (["log.retention.hours=1", "log.retention.minutes=5"], 300_000),
        (["log.retention.hours=1", "log.retention.minutes=5", "log.retention.ms=1234"], 1234),
        (["log.retention.minutes=5", "log.retention.ms=1234"], 1234),
        (["log.retention.ms=-1"], -1),
        (["log.retention.ms=-5"], -1),
        (["log.retention.hours=-3"], -1),
        (["log.retention.minutes=-1", "log.retention.hours=2"], -1),
    ],
)
def test_retention_ms_over_minutes_over_hours(settings: list[str], expected_ms: int) -> None:
    cfg = config(*settings)
    assert cfg.log_retention_ms == expected_ms
    assert cfg.topic_defaults()["retention.ms"] == str(expected_ms)


def test_roll_and_jitter_ms_over_hours() -> None:
    cfg = config("log.roll.hours=2", "log.roll.jitter.hours=1")
    assert (cfg.log_roll_ms, cfg.log_roll_jitter_ms) == (7_200_000, 3_600_000)
    cfg = config("log.roll.hours=2", "log.roll.ms=500", "log.roll.jitter.hours=1", "log.roll.jitter.ms=7")
    assert (cfg.log_roll_ms, cfg.log_roll_jitter_ms) == (500, 7)


def test_metadata_log_dir_defaults_to_the_first_log_dir_and_may_stand_apart() -> None:
    assert config("log.dirs=/a,/b").metadata_log_dir == Path("/a")
    assert config("log.dirs=/a,/b").all_log_dirs == [Path("/a"), Path("/b")]
    apart = config("log.dirs=/a,/b", "metadata.log.dir=/meta")
    assert apart.metadata_log_dir == Path("/meta")
    assert apart.all_log_dirs == [Path("/a"), Path("/b"), Path("/meta")]
    assert config("log.dirs=/a,/b", "metadata.log.dir=/b").all_log_dirs == [Path("/a"), Path("/b")]


def test_log_dirs_over_log_dir() -> None:
    assert config("log.dir=/var/one").log_dirs == [Path("/var/one")]
    assert config("log.dir=/var/one", "log.dirs= /a , /b ").log_dirs == [Path("/a"), Path("/b")]


# -- parsed values -------------------------------------------------------------------------------


def test_listeners_advertised_and_inter_broker() -> None:
    cfg = config(
        "listeners=plaintext://0.0.0.0:9092,INTERNAL://[::1]:9093,CONTROLLER://127.0.0.1:9094",
        "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "advertised.listeners=PLAINTEXT://kafka.example.com:9092,INTERNAL://[::1]:9093",
        "inter.broker.listener.name=internal",
        "controller.listener.names=CONTROLLER",
    )
    assert cfg.listeners == [
        Listener("PLAINTEXT", "0.0.0.0", 9092),
        Listener("INTERNAL", "::1", 9093),
        Listener("CONTROLLER", "127.0.0.1", 9094),
    ]
    assert [str(li) for li in cfg.advertised_listeners] == [
        "PLAINTEXT://kafka.example.com:9092",
        "INTERNAL://[::1]:9093",
    ]
    assert cfg.inter_broker_listener_name == "INTERNAL"
    assert cfg.listener("controller").port == 9094


def test_advertised_defaults_to_listeners_without_controller_listeners() -> None:
    cfg = config(
        "listeners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
        "controller.listener.names=CONTROLLER",
    )
    assert cfg.advertised_listeners == [Listener("PLAINTEXT", "127.0.0.1", 9092)]


def test_empty_host_binds_everywhere_and_advertises_the_host_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("socket.getfqdn", lambda *a: "node7.example.com")
    cfg = config("listeners=PLAINTEXT://:9092")
    assert cfg.listeners == [Listener("PLAINTEXT", "", 9092)]
    assert cfg.advertised_listeners == [Listener("PLAINTEXT", "node7.example.com", 9092)]


def test_port_zero_is_allowed_for_ephemeral_ports() -> None:
    assert config("listeners=PLAINTEXT://127.0.0.1:0").listeners[0].port == 0


def test_metrics_listener_forms() -> None:
    assert config("metrics.listener=").metrics_listener is None
    assert config("metrics.listener=0.0.0.0:9500").metrics_listener == ("0.0.0.0", 9500)
    assert config("metrics.listener=:9500").metrics_listener == ("", 9500)
    assert config("metrics.listener=[::1]:9500").metrics_listener == ("::1", 9500)


CONTROLLER_LISTENER = (
    "listeners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
    "controller.listener.names=CONTROLLER",
)


def test_quorum_voters() -> None:
    cfg = config("node.id=2", "controller.quorum.voters=2@[::1]:9093", *CONTROLLER_LISTENER)
    assert cfg.controller_quorum_voters == [QuorumVoter(2, "::1", 9093)]
    assert cfg.quorum_voters == cfg.controller_quorum_voters and cfg.is_voter
    assert not cfg.is_cluster_of_one
    assert cfg.controller_listener == Listener("CONTROLLER", "127.0.0.1", 9093)
    assert cfg.client_listeners() == [Listener("PLAINTEXT", "127.0.0.1", 9092)]
    broker_only = config("process.roles=broker", "node.id=5", "controller.quorum.voters=1@a:9093")
    assert not broker_only.is_controller and not broker_only.is_voter
    assert broker_only.controller_listener is None


def test_a_broker_may_find_the_controllers_through_bootstrap_servers() -> None:
    """Kafka 4's controller.quorum.bootstrap.servers: enough for a broker, not for a voter (no
    dynamic quorum, KIP-853)."""
    broker_only = config(
        "process.roles=broker", "node.id=5", "controller.quorum.bootstrap.servers=a:9093,[::1]:9094"
    )
    assert broker_only.controller_quorum_bootstrap_servers == [("a", 9093), ("::1", 9094)]
    assert broker_only.quorum_voters == [] and not broker_only.is_voter


def test_a_voter_needs_the_controller_role() -> None:
    with pytest.raises(ConfigError, match=r"node\.id 1 is a voter, so it needs the controller role"):
        config("process.roles=broker", "controller.quorum.voters=1@a:9093")


def test_a_single_node_is_its_own_only_voter_on_a_loopback_listener_of_its_own() -> None:
    cfg = config()
    assert cfg.is_cluster_of_one and cfg.is_voter
    assert cfg.controller_listener == Listener("CONTROLLER", "127.0.0.1", 0)
    assert cfg.quorum_voters == [QuorumVoter(1, "127.0.0.1", 0)]
    assert cfg.client_listeners() == cfg.listeners  # the internal listener is not among them
    named = config(*CONTROLLER_LISTENER)  # a configured controller listener is used instead
    assert named.quorum_voters == [QuorumVoter(1, "127.0.0.1", 9093)]
    ipv6 = config(
        "listeners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://[::]:9093", "controller.listener.names=CONTROLLER"
    )
    assert ipv6.quorum_voters == [QuorumVoter(1, "::1", 9093)]  # an IPv6 wildcard socket is IPv6-only
    every_interface = config(  # as the Docker image binds it: reached on loopback
        "listeners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://0.0.0.0:9093",
        "controller.listener.names=CONTROLLER",
    )
    assert every_interface.quorum_voters == [QuorumVoter(1, "127.0.0.1", 9093)]


def test_booleans_and_whitespace_are_read_as_kafka_does() -> None:
    cfg = config(
        "auto.create.topics.enable= FALSE ", "unclean.leader.election.enable=True", "num.partitions= 4 "
    )
    assert cfg.auto_create_topics_enable is False
    assert cfg.unclean_leader_election_enable is True
    assert cfg.num_partitions == 4


# -- invalid values ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("override", "fragments"),
    [
        ("num.partitions=abc", ["num.partitions", "'abc'", "32-bit integer", "at least 1"]),
        ("num.partitions=0", ["num.partitions", "'0'", "at least 1"]),
        ("num.partitions=1.5", ["num.partitions", "'1.5'"]),
        ("num.partitions=2147483648", ["num.partitions", "32-bit integer"]),
        ("log.segment.bytes=13", ["log.segment.bytes", "'13'", "at least 14"]),
        ("fetch.max.bytes=1023", ["fetch.max.bytes", "at least 1024"]),
        ("offsets.topic.replication.factor=40000", ["offsets.topic.replication.factor", "16-bit"]),
        ("log.retention.ms=1e3", ["log.retention.ms", "64-bit integer"]),
        ("auto.create.topics.enable=yes", ["auto.create.topics.enable", "'yes'", "true or false"]),
        (
            "log.message.timestamp.type=createtime",
            ["log.message.timestamp.type", "CreateTime, LogAppendTime"],
        ),
        ("log.cleanup.policy=delete,remove", ["log.cleanup.policy", "compact, delete"]),
        ("log.cleanup.policy=", ["log.cleanup.policy", "one or more"]),
        ("process.roles=broker,worker", ["process.roles", "'broker,worker'", "broker, controller"]),
        ("node.id=-1", ["node.id", "at least 0"]),
        ("listeners=localhost:9092", ["listeners", "NAME://host:port"]),
        ("listeners=PLAINTEXT://host:99999", ["listeners", "99999", "65535"]),
        ("listeners=PLAINTEXT://h:9092,PLAINTEXT://h:9093", ["listeners", "PLAINTEXT is used twice"]),
        ("listeners=A://h:9092,B://h:9092", ["listeners", "h:9092 is used by two"]),
        ("listeners=", ["listeners", "at least one listener"]),
        ("listeners=SSL://127.0.0.1:9093", ["ssl.keystore.location", "needs a keystore"]),
        ("listeners=SASL_PLAINTEXT://127.0.0.1:9093", ["sasl.enabled.mechanisms", "GSSAPI", "not supported"]),
        ("listeners=OTHER://127.0.0.1:9093", ["listeners", "OTHER", "listener.security.protocol.map"]),
        ("listener.security.protocol.map=PLAINTEXT:TLS", ["listener.security.protocol.map", "PLAINTEXT:TLS"]),
        ("listeners=PLAINTEXT://0.0.0.0:9092", ["listeners", "0.0.0.0", "advertised.listeners"]),
        ("advertised.listeners=PLAINTEXT://0.0.0.0:9092", ["advertised.listeners", "0.0.0.0"]),
        (
            "advertised.listeners=OTHER://h:9092",
            ["advertised.listeners", "OTHER is not one of the listeners"],
        ),
        ("inter.broker.listener.name=NOPE", ["inter.broker.listener.name", "'NOPE'", "PLAINTEXT"]),
        ("metrics.listener=9404", ["metrics.listener", "'9404'", "host:port"]),
        ("metrics.listener=h:70000", ["metrics.listener", "host:port"]),
        ("controller.quorum.voters=1@a", ["controller.quorum.voters", "id@host:port"]),
        ("controller.quorum.voters=2@a:9093", ["controller.quorum.voters", "node.id (1)"]),
        ("controller.quorum.voters=1@a:9093,1@b:9093", ["controller.quorum.voters", "twice"]),
        ("process.roles=broker", ["controller.quorum.voters", "find the controller"]),
        (
            "controller.quorum.bootstrap.servers=a:9093",
            ["controller.quorum.bootstrap.servers", "dynamic quorum", "controller.quorum.voters"],
        ),
        ("controller.quorum.bootstrap.servers=a", ["controller.quorum.bootstrap.servers", "host:port"]),
        ("process.roles=controller", ["controller.quorum.voters", "controller-only node needs the voters"]),
        ("controller.quorum.voters=1@a:9093", ["controller.listener.names", "name of the listener"]),
        ("controller.listener.names=CTL", ["controller.listener.names", "CTL"]),
        ("log.dirs=/a,/a/../a", ["log.dirs", "twice"]),
        ("log.dir= ", ["log.dir", "at least one directory"]),
        (
            "replica.fetch.wait.max.ms=40000",
            ["replica.socket.timeout.ms", "replica.fetch.wait.max.ms (40000)"],
        ),
    ],
)
def test_invalid_values_name_the_key_the_value_and_what_is_allowed(
    override: str, fragments: list[str]
) -> None:
    with pytest.raises(ConfigError) as exc:
        load_config(None, [override])
    for fragment in fragments:
        assert fragment in str(exc.value), (fragment, str(exc.value))


def test_fetch_wait_must_not_exceed_lag_time() -> None:
    with pytest.raises(ConfigError, match=r"replica.fetch.wait.max.ms \(2000\) must be at most replica.lag"):
        load_config(None, ["replica.fetch.wait.max.ms=2000", "replica.lag.time.max.ms=1000"])


def test_group_session_timeout_bounds_must_be_ordered() -> None:
    with pytest.raises(ConfigError, match=r"group\.min\.session\.timeout\.ms"):
        load_config(None, ["group.min.session.timeout.ms=10", "group.max.session.timeout.ms=5"])


def test_config_error_carries_key_and_value() -> None:
    with pytest.raises(ConfigError) as exc:
        load_config(None, ["num.partitions=x"])
    assert (exc.value.key, exc.value.value) == ("num.partitions", "x")


def test_a_tls_listener_without_a_keystore_is_refused_naming_the_key() -> None:
    with pytest.raises(ConfigError, match=r"ssl\.keystore\.location: a TLS listener needs a keystore"):
        load_config(None, ["listeners=SECURE://127.0.0.1:9093", "listener.security.protocol.map=SECURE:SSL"])


def test_unused_non_plaintext_entries_of_the_map_are_harmless() -> None:
    assert config(
        "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SSL:SSL"
    ).listener_security_protocol_map == {
        "PLAINTEXT": "PLAINTEXT",
        "SSL": "SSL",
    }


def test_malformed_file_and_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"Malformed configuration file .*line 1: malformed \\uXXXX"):
        load_config(write(tmp_path, "a=\\u00zz\n"), [])
    with pytest.raises(ConfigError, match="Cannot read configuration file"):
        load_config(tmp_path / "missing.properties", [])
    with pytest.raises(ConfigError, match="KEY=VALUE"):
        load_config(None, ["justakey"])


# -- warnings ------------------------------------------------------------------------------------


def test_unknown_keys_warn_and_are_ignored(tmp_path: Path) -> None:
    path = write(tmp_path, "zookeeper.connect=localhost:2181\nnum.partition=3\n")
    cfg, warnings = load_config(path, ["sasl.kerberos.service.name=kafka"])
    assert cfg.num_partitions == 1
    assert len(warnings) == 3
    assert "'zookeeper.connect'" in warnings[0]
    assert "'num.partition'" in warnings[1] and "did you mean num.partitions?" in warnings[1]
    assert "'sasl.kerberos.service.name'" in warnings[2]


def test_ignored_thread_pool_keys_warn() -> None:
    cfg, warnings = load_config(None, ["num.io.threads=16", "num.network.threads=4"])
    assert cfg.num_io_threads == 16
    assert len(warnings) == 2
    assert all("no effect" in w for w in warnings)


def test_compact_policy_and_cleaner_keys_are_acted_on() -> None:
    cfg, warnings = load_config(
        None,
        [
            "log.cleanup.policy=compact,delete",
            "log.cleaner.threads=2",
            "log.cleaner.backoff.ms=100",
            "log.cleaner.io.max.bytes.per.second=1e6",
        ],
    )
    assert cfg.log_cleanup_policy == ["compact", "delete"]
    assert (cfg.log_cleaner_threads, cfg.log_cleaner_backoff_ms) == (2, 100)
    assert cfg.log_cleaner_io_max_bytes_per_second == 1e6 and cfg.log_cleaner_enable
    assert warnings == []
    with pytest.raises(ConfigError, match=r"log\.cleaner\.threads"):
        load_config(None, ["log.cleaner.threads=-1"])


def test_compaction_and_tiering_keys_are_accepted_with_a_warning() -> None:
    cfg, warnings = load_config(
        None,
        [
            "log.cleaner.min.cleanable.ratio=0.3",
            "log.cleaner.delete.retention.ms=1000",
            "log.local.retention.ms=1000",
            "log.message.timestamp.after.max.ms=5",
            "log.preallocate=true",
            "compression.type=zstd",
            "compression.zstd.level=9",
        ],
    )
    assert (cfg.log_cleaner_min_cleanable_ratio, cfg.log_cleaner_delete_retention_ms) == (0.3, 1000)
    assert (cfg.log_local_retention_ms, cfg.log_message_timestamp_after_max_ms) == (1000, 5)
    assert cfg.log_preallocate and (cfg.compression_type, cfg.compression_zstd_level) == ("zstd", 9)
    # compression.type (broker-side recompression) and the timestamp bounds (produce refuses records
    # outside them) are acted on: no warning for them.
    assert sorted(w.split()[0] for w in warnings) == [
        "log.local.retention.ms",
        "log.preallocate",
    ]
    assert all("no effect" in w for w in warnings)


@pytest.mark.parametrize(
    ("setting", "fragment"),
    [
        ("log.cleaner.min.cleanable.ratio=1.5", "a number, between 0 and 1"),
        ("log.cleaner.min.cleanable.ratio=x", "a number"),
        ("compression.type=brotli", "one of uncompressed, zstd, lz4, snappy, gzip, producer"),
        ("compression.gzip.level=0", "-1 or between 1 and 9"),
        ("log.local.retention.bytes=-3", "at least -2"),
    ],
)
def test_new_broker_keys_are_validated(setting: str, fragment: str) -> None:
    key, _, value = setting.partition("=")
    with pytest.raises(ConfigError) as caught:
        load_config(None, [setting])
    assert key in str(caught.value) and repr(value) in str(caught.value) and fragment in str(caught.value)


# -- DescribeConfigs -----------------------------------------------------------------------------


def test_describe_lists_every_key_with_its_source() -> None:
    cfg = config("num.partitions=6", "log.retention.hours=24")
    entries = {entry.name: entry for entry in cfg.describe()}
    assert set(entries) == {d.name for d in DEFINITIONS} | {"broker.id"}
    assert [e.name for e in cfg.describe()] == sorted(entries)

    partitions = entries["num.partitions"]
    assert (partitions.value, partitions.source) == ("6", ConfigSource.STATIC_BROKER_CONFIG)
    assert partitions.source == "STATIC_BROKER_CONFIG" and partitions.source.code == 4
    assert partitions.type is ConfigType.INT and partitions.read_only and not partitions.is_sensitive
    assert partitions.doc == BY_NAME["num.partitions"].doc

    segment = entries["log.segment.bytes"]
    assert (segment.value, segment.source) == ("1073741824", ConfigSource.DEFAULT_CONFIG)
    assert segment.source.code == 5

    assert entries["log.retention.ms"].value is None
    assert entries["log.retention.ms"].source is ConfigSource.DEFAULT_CONFIG
    # Kafka lists synonyms from the key's own first entry on: log.retention.ms has none
    assert entries["log.retention.ms"].synonyms == ()
    assert entries["log.retention.hours"].synonyms == (
        ConfigSynonym("log.retention.hours", "24", ConfigSource.STATIC_BROKER_CONFIG),
        ConfigSynonym("log.retention.hours", "168", ConfigSource.DEFAULT_CONFIG),
    )
    assert entries["auto.create.topics.enable"].value == "true"
    assert entries["log.cleanup.policy"].value == "delete"
    assert entries["log.cleanup.policy"].type is ConfigType.LIST
    assert entries["listeners"].value == "PLAINTEXT://127.0.0.1:9092"
    assert entries["broker.id"].value == entries["node.id"].value == "1"


def test_describe_alias_follows_node_id() -> None:
    entries = {entry.name: entry for entry in config("broker.id=3").describe()}
    assert entries["node.id"].value == entries["broker.id"].value == "3"
    assert entries["node.id"].source is ConfigSource.STATIC_BROKER_CONFIG


def test_topic_defaults_follow_the_broker_keys() -> None:
    cfg = config(
        "message.max.bytes=2000000",
        "log.segment.bytes=1000",
        "log.roll.hours=1",
        "log.message.timestamp.type=LogAppendTime",
        "log.flush.interval.ms=10",
        "log.segment.delete.delay.ms=5",
        "min.insync.replicas=2",
        "log.cleanup.policy=delete",
    )
    defaults = cfg.topic_defaults()
    assert defaults["max.message.bytes"] == "2000000"
    assert defaults["segment.bytes"] == "1000"
    assert defaults["segment.ms"] == "3600000"
    assert defaults["message.timestamp.type"] == "LogAppendTime"
    assert defaults["flush.ms"] == "10"
    assert defaults["file.delete.delay.ms"] == "5"
    assert defaults["min.insync.replicas"] == "2"
    assert config().topic_defaults()["flush.ms"] == str(LONG_MAX)
