"""`kipling topics`: list, describe, create, alter and delete topics, as Kafka's kafka-topics.sh does.

The output follows kafka-topics.sh (3.6) so that people and scripts used to it read it unchanged:
``--list`` prints one name per line, ``--describe`` a tab-separated topic line (TopicId in Kafka's
base64 form, ``Configs:`` with every entry whose source is not the built-in default) and one line per
partition with Leader, Replicas and Isr, ``--create`` prints ``Created topic T.``, ``--alter
--partitions N`` raises the partition count (CreatePartitions) and prints nothing. A failure prints
``Error while executing topic command : <ERROR_NAME>: <message>`` on stderr and exits with status 1,
as Kafka's tool does (with the protocol error's name added, since there is no Java exception class to
name). As in kafka-topics.sh, ``--topic`` is a regular expression for --describe, --list, --alter and
--delete.

This module is also where the three client tools (topics, produce, consume) share what they all need:
parsing ``--bootstrap-server``, :class:`ClusterConnections` (the bootstrap connection, metadata, and one
connection per broker for leaders), quiet logging on stderr, and running a coroutine on uvloop.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import logging
import re
import sys
import time
import uuid
from collections.abc import Coroutine, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TextIO, TypeVar

import structlog

from client.admin import AdminClient, ClusterMetadata, NewTopic, TopicDescription
from client.connection import KafkaConnection
from client.connection_pool import ConnectionPool
from client.errors import (
    ClientError,
    ConnectError,
    ConnectionClosedError,
    KafkaResponseError,
    ProtocolViolationError,
    RequestTimeoutError,
    UnsupportedApiVersionError,
    error_code,
)
from client.logs import configure_stderr_logging
from client.security import ClientSecurity
from protocol.api_keys import ApiKey
from protocol.error_codes import ErrorCode
from tools.commands.arguments import add_command_config_argument, command_security

T = TypeVar("T")

CONNECT_TIMEOUT_S = 10.0
REQUEST_TIMEOUT_S = 30.0
RETRY_BACKOFF_S = 0.1
"""Kafka's ``retry.backoff.ms`` default: the first pause before asking for metadata again."""
RETRY_BACKOFF_MAX_S = 1.0
"""Kafka's ``retry.backoff.max.ms`` default: the longest pause between retries."""
AUTO_CREATE_WAIT_S = 60.0
"""Kafka's ``max.block.ms`` default: how long a tool waits for an auto-created topic's leaders."""
TOPIC_RESOURCE_TYPE = 2
"""Kafka's ConfigResource.Type.TOPIC."""
DEFAULT_CONFIG_SOURCE = 5
"""Kafka's ConfigSource DEFAULT_CONFIG: kafka-topics.sh lists every config entry but these."""
TOOLS_LOG_LEVEL = logging.WARNING
"""Kafka's tools log at WARN (tools-log4j.properties), on stderr: stdout is the tool's output."""

_log = structlog.get_logger("kipling.commands")


# == shared by the client tools ===================================================================


@dataclass(frozen=True, slots=True, order=True)
class BrokerAddress:
    host: str
    port: int

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"


def bootstrap_servers(text: str) -> list[BrokerAddress]:
    """Parse ``HOST:PORT[,HOST:PORT...]`` (IPv6 hosts in brackets); an argparse ``type``."""
    out = []
    for item in text.split(","):
        item = item.strip()
        host, sep, port = item.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {item!r}")
        out.append(BrokerAddress(host.strip("[]"), int(port)))
    if not out:
        raise argparse.ArgumentTypeError("no bootstrap server given")
    return out


def add_bootstrap_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--bootstrap-server",
        required=True,
        type=bootstrap_servers,
        metavar="HOST:PORT[,...]",
        help="brokers to connect to first; the first reachable one answers metadata requests",
    )
    add_command_config_argument(parser)


def configure_tool_logging() -> None:
    """Warnings and errors on stderr, whatever was configured before: a tool's stdout carries only
    its output (records, topic lists), so that it can be piped."""
    configure_stderr_logging(TOOLS_LOG_LEVEL)


def run_async(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` on a fresh event loop, uvloop's when installed (as the broker does).

    A loop factory rather than ``uvloop.install()``: the tools also run in-process (tests), where
    changing the global event loop policy would leak into everything that runs afterwards.
    """
    try:
        import uvloop

        factory: Any = uvloop.new_event_loop
    except ImportError:  # pragma: no cover - uvloop is a dependency on every supported platform
        factory = None
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(coro)


class ClusterConnections:
    """Connections to one cluster's brokers, opened on demand, and the broker addresses from metadata.

    Metadata is asked of any open connection, else of the brokers known from earlier metadata, else of
    the bootstrap servers in order; a broker that fails is dropped and the next one is tried, so one
    dead bootstrap server or a restarted broker does not stop a tool.
    """

    def __init__(
        self,
        bootstrap: Sequence[BrokerAddress],
        *,
        client_id: str,
        connect_timeout_s: float = CONNECT_TIMEOUT_S,
        request_timeout_s: float = REQUEST_TIMEOUT_S,
        security: ClientSecurity | None = None,
    ) -> None:
        """``security``: TLS and SASL of every connection (``--command-config``); None: PLAINTEXT."""
        self.bootstrap = list(bootstrap)
        self.brokers: dict[int, BrokerAddress] = {}
        self.pool = ConnectionPool(
            client_id=client_id,
            connect_timeout_s=connect_timeout_s,
            request_timeout_s=request_timeout_s,
            security=security,
        )

    async def connection_to(self, address: BrokerAddress) -> KafkaConnection:
        """An open connection to ``address`` (a new one when the cached one closed)."""
        return await self.pool.shared(address.host, address.port)

    async def broker(self, node_id: int) -> KafkaConnection:
        """An open connection to broker ``node_id`` (known from the last metadata)."""
        return await self.connection_to(self._address(node_id))

    async def dedicated(self, node_id: int) -> KafkaConnection:
        """A new connection to broker ``node_id`` that no other caller gets (closed by :meth:`close`).

        For long polls: a broker answers one connection's requests in order, so a metadata or
        ListOffsets request sent behind a parked fetch would wait out the fetch's ``max_wait_ms``.
        """
        address = self._address(node_id)
        return await self.pool.dedicated(address.host, address.port)

    def _address(self, node_id: int) -> BrokerAddress:
        address = self.brokers.get(node_id)
        if address is None:
            raise KafkaResponseError(ErrorCode.LEADER_NOT_AVAILABLE, f"broker {node_id} is not in metadata")
        return address

    async def any_connection(self) -> KafkaConnection:
        """An open connection to some broker of the cluster; raises ConnectError-like ClientError."""
        connection = self.pool.any_open()
        if connection is not None:
            return connection
        errors = []
        for address in self._candidates():
            try:
                return await self.connection_to(address)
            except ClientError as exc:
                errors.append(f"{address}: {exc}")
        raise ClientError(f"no broker reachable ({'; '.join(errors)})")

    async def metadata(
        self, topics: Sequence[str] | None, *, allow_auto_topic_creation: bool = False
    ) -> ClusterMetadata:
        """Metadata of ``topics`` (all when None) from the first broker that answers; a broker that
        allows it auto-creates a missing topic when ``allow_auto_topic_creation``."""
        last: ClientError | None = None
        for _ in range(len(self._candidates()) + 1):
            connection = await self.any_connection()
            try:
                metadata = await AdminClient(connection).metadata(
                    topics, allow_auto_topic_creation=allow_auto_topic_creation
                )
            except ClientError as exc:
                last = exc
                self.forget(connection)
                continue
            self.brokers = {b.node_id: BrokerAddress(b.host, b.port) for b in metadata.brokers}
            return metadata
        assert last is not None
        raise last

    def forget(self, connection: KafkaConnection) -> None:
        """Close and drop ``connection`` (it failed), so the next call opens a new one."""
        self.pool.forget(connection)

    async def close(self) -> None:
        await self.pool.close()

    def _candidates(self) -> list[BrokerAddress]:
        return list(dict.fromkeys([*self.bootstrap, *self.brokers.values()]))


class PartitionLeaders:
    """The partitions of one topic and their leaders, refreshed when a request finds a leader moved.

    Refreshes are single-flight: every sender or fetcher that saw NOT_LEADER_OR_FOLLOWER for the same
    metadata asks for a refresh with the ``generation`` it used, and only the first one goes to the
    broker; the others find a newer generation and return at once. The pause before a refresh doubles
    with each failure since the last success (Kafka's ``retry.backoff.ms`` 100 up to
    ``retry.backoff.max.ms`` 1000), and only the first failure of a streak is logged as a warning, so a
    broker that is down for a minute costs a few requests a second and a few log lines, not a flood.
    """

    def __init__(
        self,
        cluster: ClusterConnections,
        topic: str,
        *,
        backoff_s: float = RETRY_BACKOFF_S,
        backoff_max_s: float = RETRY_BACKOFF_MAX_S,
    ) -> None:
        self.cluster = cluster
        self.topic = topic
        self.backoff_s = backoff_s
        self.backoff_max_s = backoff_max_s
        self.generation = 0
        self.description: TopicDescription | None = None
        self.failures = 0
        """Refreshes since the last :meth:`succeeded` (each one followed a failure)."""
        self._lock = asyncio.Lock()

    async def load(
        self, *, auto_create: bool = False, wait_s: float = AUTO_CREATE_WAIT_S
    ) -> TopicDescription:
        """Read the topic's metadata; raises KafkaResponseError when the topic is not there.

        With ``auto_create`` the request allows auto-creation, as the metadata requests of Kafka's
        producer and of a consumer's subscription do (so kafka-console-producer.sh, the console
        consumer and kcat create a missing topic on a broker with auto.create.topics.enable=true).
        A topic that is being created is answered with a retriable error (LEADER_NOT_AVAILABLE) or
        without leaders for a while: it is asked for again, with backoff, for at most ``wait_s``.
        A broker that does not auto-create answers UNKNOWN_TOPIC_OR_PARTITION, raised at once with a
        message saying so.
        """
        if not auto_create:
            return self._loaded(await self.cluster.metadata([self.topic]))
        deadline = time.monotonic() + wait_s
        attempts = 0
        creating = False
        while True:
            metadata = await self.cluster.metadata([self.topic], allow_auto_topic_creation=True)
            topic = metadata.topics.get(self.topic)
            code = topic.error if topic is not None else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            if code is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                servers = ",".join(str(a) for a in self.cluster.bootstrap)
                raise KafkaResponseError(
                    code,
                    f"Topic {self.topic} does not exist and the broker does not create topics on demand "
                    f"(auto.create.topics.enable=false); create it first: kipling topics --bootstrap-server "
                    f"{servers} --create --topic {self.topic}",
                )
            remaining = deadline - time.monotonic()
            if code is ErrorCode.NONE:
                # Kafka answers an auto-created topic with LEADER_NOT_AVAILABLE first: wait for its leaders
                led = (
                    topic is not None
                    and bool(topic.partitions)
                    and all(p.leader >= 0 for p in topic.partitions)
                )
                if led or not creating or remaining <= 0:
                    return self._loaded(metadata)
            elif not code.retriable:
                return self._loaded(metadata)
            elif remaining <= 0:
                raise KafkaResponseError(
                    code, f"Topic {self.topic} not present in metadata after {round(wait_s * 1000)} ms"
                )
            creating = True
            await asyncio.sleep(max(min(self._backoff_s(attempts), remaining), 0))
            attempts += 1

    def _loaded(self, metadata: ClusterMetadata) -> TopicDescription:
        topic = metadata.topics.get(self.topic)
        code = topic.error if topic is not None else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        if topic is None or code is not ErrorCode.NONE:
            raise KafkaResponseError(code, f"Topic {self.topic} not present in metadata")
        self.description = topic
        self.generation += 1
        return topic

    async def refresh(self, seen_generation: int) -> None:
        """Reload after the backoff unless someone already did since ``seen_generation``."""
        async with self._lock:
            if self.generation != seen_generation:
                return
            delay = self._backoff_s(self.failures)
            self.failures += 1
            await asyncio.sleep(delay)
            try:
                await self.load()
            except ClientError as exc:
                self.warn("metadata refresh failed", error=str(exc))

    def _backoff_s(self, attempt: int) -> float:
        """Kafka's exponential retry backoff: ``retry.backoff.ms`` doubling up to its max."""
        return float(min(self.backoff_s * 2**attempt, self.backoff_max_s))

    def succeeded(self) -> None:
        """A request went through: the next failure starts a new streak (short backoff, logged)."""
        self.failures = 0

    def warn(self, event: str, **fields: object) -> None:
        """Log ``event`` as a warning at the start of a failure streak, as debug after that."""
        log = _log.warning if self.failures <= 1 else _log.debug
        log(event, topic=self.topic, **fields)

    @property
    def partitions(self) -> list[int]:
        return [p.partition for p in self.description.partitions] if self.description is not None else []

    def leader(self, partition: int) -> int:
        """The leader's node id (-1 when the partition has none or is unknown)."""
        if self.description is not None:
            for p in self.description.partitions:
                if p.partition == partition:
                    return p.leader
        return -1

    async def connection(self, partition: int) -> KafkaConnection:
        """An open connection to ``partition``'s leader; LEADER_NOT_AVAILABLE (retriable) when none."""
        leader = self.leader(partition)
        if leader < 0:
            raise KafkaResponseError(
                ErrorCode.LEADER_NOT_AVAILABLE, f"no leader for {self.topic}-{partition} in metadata"
            )
        return await self.cluster.broker(leader)


RETRIABLE_CONNECTION_ERRORS = (
    ConnectError,
    ConnectionClosedError,
    RequestTimeoutError,
    ProtocolViolationError,
)
"""Client errors after which the same request may be sent again on a new connection."""


def is_retriable(exc: ClientError) -> bool:
    """Whether a failed request may be repeated (after a metadata refresh): Kafka's classification."""
    if isinstance(exc, KafkaResponseError):
        return exc.retriable
    return isinstance(exc, RETRIABLE_CONNECTION_ERRORS)


def error_text(exc: ClientError) -> str:
    """``ERROR_NAME: message`` for a broker error, the client's own text otherwise."""
    if isinstance(exc, KafkaResponseError):
        return f"{exc.code.name}: {exc.message}"
    return str(exc)


# == kafka-topics.sh ==============================================================================


class TopicCommandError(Exception):
    """A failure kafka-topics.sh reports in its own words (e.g. a topic that does not exist)."""


TOPICS_DESCRIPTION = """\
Create, alter, delete, describe or list topics, as Kafka's kafka-topics.sh does, with the same
output: --list prints one name per line; --describe a line per topic (TopicId, PartitionCount,
ReplicationFactor, Configs that are not built-in defaults) and a line per partition (Leader,
Replicas, Isr); --create prints "Created topic T."; --alter --partitions N adds partitions up to N
(a partition count is never decreased). --topic is a regular expression matched against whole names
for --list, --describe, --alter and --delete.

Errors print "Error while executing topic command : ERROR_NAME: message" on stderr and exit with
status 1 (TOPIC_ALREADY_EXISTS, INVALID_REPLICATION_FACTOR, INVALID_PARTITIONS, ...; --if-not-exists
and --if-exists turn the expected ones off).
"""

TOPICS_EPILOG = """\
Examples:
  kipling topics --bootstrap-server 127.0.0.1:9092 --create --topic t --partitions 3 \\
      --replication-factor 3 --config retention.ms=3600000
  kipling topics --bootstrap-server 127.0.0.1:9092 --describe --topic t
  kipling topics --bootstrap-server 127.0.0.1:9092 --alter --topic t --partitions 6
  kipling topics --bootstrap-server 127.0.0.1:9092 --list --exclude-internal
"""


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "topics",
        help="list, describe, create, alter and delete topics (like kafka-topics.sh)",
        description=TOPICS_DESCRIPTION,
        epilog=TOPICS_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_bootstrap_argument(p)
    action = p.add_mutually_exclusive_group(required=True)
    action.add_argument("--list", action="store_true", help="list the topics' names")
    action.add_argument("--describe", action="store_true", help="partitions, leaders, replicas, ISR, configs")
    action.add_argument("--create", action="store_true", help="create a topic (--topic)")
    action.add_argument(
        "--alter", action="store_true", help="add partitions to topics (--topic, --partitions)"
    )
    action.add_argument("--delete", action="store_true", help="delete topics (--topic)")
    p.add_argument(
        "--topic", metavar="TOPIC", help="the topic (a regex for --list, --describe, --alter, --delete)"
    )
    p.add_argument(
        "--partitions",
        type=int,
        metavar="N",
        help="partitions of a new topic (default: num.partitions), or the new partition count of a topic "
        "with --alter (only an increase)",
    )
    p.add_argument(
        "--replication-factor",
        type=int,
        metavar="R",
        help="replicas per partition of a new topic (default: default.replication.factor)",
    )
    p.add_argument(
        "--config",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a topic config of a new topic (repeatable), e.g. cleanup.policy=compact",
    )
    p.add_argument(
        "--replica-assignment",
        metavar="B:B,B:B",
        help="replicas of each partition of a new topic: partitions separated by ',', broker ids by "
        "':' (the first is the preferred leader); excludes --partitions and --replication-factor",
    )
    p.add_argument("--if-not-exists", action="store_true", help="--create: no error if the topic exists")
    p.add_argument(
        "--if-exists", action="store_true", help="--describe/--alter/--delete: no error if none matches"
    )
    p.add_argument("--exclude-internal", action="store_true", help="leave internal topics out")
    p.add_argument(
        "--under-replicated-partitions",
        action="store_true",
        help="--describe: only partitions whose ISR is smaller than their replica set",
    )
    p.add_argument(
        "--unavailable-partitions", action="store_true", help="--describe: only partitions without a leader"
    )
    p.set_defaults(func=run, topics_parser=p)


@dataclass(frozen=True, slots=True)
class DescribeFilter:
    """Which partitions ``--describe`` prints (all, or only the unhealthy ones)."""

    under_replicated: bool = False
    unavailable: bool = False

    @property
    def partitions_only(self) -> bool:
        """kafka-topics.sh prints only partition lines when filtering on partition health."""
        return self.under_replicated or self.unavailable

    def wants(self, replicas: Sequence[int], isr: Sequence[int], leader: int) -> bool:
        if not self.partitions_only:
            return True
        return (self.under_replicated and len(isr) < len(replicas)) or (self.unavailable and leader < 0)


def kafka_uuid(value: uuid.UUID) -> str:
    """Kafka's ``Uuid.toString()``: URL-safe base64 of the 16 bytes, without padding."""
    return base64.urlsafe_b64encode(value.bytes).rstrip(b"=").decode()


def matching(names: Iterable[str], pattern: str | None) -> list[str]:
    """``names`` whose whole name matches ``pattern`` (all when None), sorted."""
    if pattern is None:
        return sorted(names)
    try:
        regex = re.compile(pattern)
    except re.error as exc:
        raise TopicCommandError(f"Invalid topic pattern {pattern!r}: {exc}") from None
    return sorted(name for name in names if regex.fullmatch(name))


def _listed(metadata: ClusterMetadata, exclude_internal: bool) -> dict[str, TopicDescription]:
    return {
        name: topic
        for name, topic in metadata.topics.items()
        if topic.error is ErrorCode.NONE and not (exclude_internal and topic.is_internal)
    }


async def list_topics(
    admin: AdminClient, out: TextIO, *, pattern: str | None = None, exclude_internal: bool = False
) -> int:
    """Print the cluster's topic names (matching ``pattern``), one per line."""
    topics = _listed(await admin.metadata(), exclude_internal)
    for name in matching(topics, pattern):
        out.write(f"{name}\n")
    return 0


async def describe_topics(
    admin: AdminClient,
    connection: KafkaConnection,
    out: TextIO,
    *,
    pattern: str | None = None,
    exclude_internal: bool = False,
    if_exists: bool = False,
    health: DescribeFilter = DescribeFilter(),
) -> int:
    """Print kafka-topics.sh's description of every topic matching ``pattern`` (all when None)."""
    topics = _listed(await admin.metadata(), exclude_internal)
    names = matching(topics, pattern)
    if not names and pattern is not None and not if_exists:
        raise TopicCommandError(f"Topic '{pattern}' does not exist as expected")
    configs = {} if health.partitions_only else await topic_configs(connection, names)
    for name in names:
        topic = topics[name]
        if not health.partitions_only:
            rf = len(topic.partitions[0].replicas) if topic.partitions else 0
            shown = ",".join(f"{k}={v}" for k, v in configs.get(name, {}).items())
            topic_id = f"\tTopicId: {kafka_uuid(topic.topic_id)}" if topic.topic_id.int else ""
            out.write(
                f"Topic: {name}{topic_id}\tPartitionCount: {len(topic.partitions)}\t"
                f"ReplicationFactor: {rf}\tConfigs: {shown}\n"
            )
        for p in topic.partitions:
            if not health.wants(p.replicas, p.isr, p.leader):
                continue
            leader = str(p.leader) if p.leader >= 0 else "none"
            line = (
                f"\tTopic: {name}\tPartition: {p.partition}\tLeader: {leader}\t"
                f"Replicas: {_ids(p.replicas)}\tIsr: {_ids(p.isr)}"
            )
            if p.offline_replicas:
                line += f"\tOffline: {_ids(p.offline_replicas)}"
            out.write(line + "\n")
    return 0


def _ids(ids: Iterable[int]) -> str:
    return ",".join(str(i) for i in ids)


async def topic_configs(connection: KafkaConnection, names: Sequence[str]) -> dict[str, dict[str, str]]:
    """Each topic's config entries that are not built-in defaults (what kafka-topics.sh shows).

    A broker without DescribeConfigs, or an error for one topic, leaves that topic's configs empty:
    the description of partitions is what --describe is mostly for.
    """
    if not names:
        return {}
    try:
        version = connection.version_for(ApiKey.DESCRIBE_CONFIGS)
    except UnsupportedApiVersionError:
        return {}
    body = {
        "resources": [
            {"resource_type": TOPIC_RESOURCE_TYPE, "resource_name": n, "configuration_keys": None}
            for n in names
        ],
        "include_synonyms": False,
        "include_documentation": False,
    }
    response = await connection.request(ApiKey.DESCRIBE_CONFIGS, version, body)
    out: dict[str, dict[str, str]] = {}
    for result in response.results:
        if error_code(result.error_code) is not ErrorCode.NONE:
            _log.warning("cannot describe topic configs", topic=result.resource_name, error=result.error_code)
            continue
        out[result.resource_name] = {
            c.name: "" if c.value is None else c.value
            for c in sorted(result.configs, key=lambda c: c.name)
            if c.config_source != DEFAULT_CONFIG_SOURCE
        }
    return out


def parse_configs(items: Sequence[str]) -> dict[str, str | None]:
    """``--config k=v`` items as a mapping; a malformed item is a TopicCommandError."""
    out: dict[str, str | None] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise TopicCommandError(
                f"Invalid topic config: all configs must be in the format 'key=val', got '{item}'"
            )
        out[key.strip()] = value.strip()
    return out


def parse_replica_assignment(text: str) -> dict[int, list[int]]:
    """``1:2:3,2:3:1`` → {0: [1, 2, 3], 1: [2, 3, 1]} (kafka-topics.sh's --replica-assignment)."""
    out: dict[int, list[int]] = {}
    for index, part in enumerate(text.split(",")):
        try:
            ids = [int(b) for b in part.strip().split(":")]
        except ValueError:
            raise TopicCommandError(
                f"Invalid replica assignment '{text}': broker ids must be integers"
            ) from None
        if len(set(ids)) != len(ids):
            raise TopicCommandError(f"Partition replica lists may not contain duplicate entries: {part}")
        if out and len(ids) != len(out[0]):
            raise TopicCommandError(
                f"Partition {index} has different replication factor: {ids} (expected {len(out[0])})"
            )
        out[index] = ids
    return out


async def create_topic(
    admin: AdminClient, out: TextIO, topic: NewTopic, *, if_not_exists: bool = False
) -> int:
    """Create ``topic``; ``Created topic T.`` (or nothing, when it exists and ``if_not_exists``)."""
    if "." in topic.name or "_" in topic.name:
        out.write(
            "WARNING: Due to limitations in metric names, topics with a period ('.') or underscore ('_') "
            "could collide. To avoid issues it is best to use either, but not both.\n"
        )
    result = (await admin.create_topics([topic]))[topic.name]
    if result.error is ErrorCode.TOPIC_ALREADY_EXISTS and if_not_exists:
        return 0
    if result.error is not ErrorCode.NONE:
        raise KafkaResponseError(result.error, result.message)
    out.write(f"Created topic {topic.name}.\n")
    return 0


async def alter_topics(admin: AdminClient, pattern: str, partitions: int, *, if_exists: bool = False) -> int:
    """Raise the partition count of every topic matching ``pattern`` to ``partitions``, as
    kafka-topics.sh --alter does (silently on success). A count that is not an increase is refused by
    the broker with INVALID_PARTITIONS and Kafka's message."""
    _, names = await _matching_topics(admin, pattern, if_exists)
    if names:
        results = await admin.create_partitions({name: partitions for name in names})
        _check_topic_results(names, results, if_exists)
    return 0


async def delete_topics(admin: AdminClient, pattern: str, *, if_exists: bool = False) -> int:
    """Delete every topic matching ``pattern``; kafka-topics.sh prints nothing on success."""
    topics, names = await _matching_topics(admin, pattern, if_exists)
    internal = [n for n in names if topics[n].is_internal]
    if internal:
        raise TopicCommandError(
            f"Topic {internal[0]} is a kafka internal topic and is not allowed to be marked for deletion."
        )
    if names:
        _check_topic_results(names, await admin.delete_topics(names), if_exists)
    return 0


async def _matching_topics(
    admin: AdminClient, pattern: str, if_exists: bool
) -> tuple[dict[str, TopicDescription], list[str]]:
    """The cluster's topics and the names matching ``pattern``; kafka-topics.sh's error when none
    does, unless ``--if-exists`` (then no names)."""
    topics = _listed(await admin.metadata(), exclude_internal=False)
    names = matching(topics, pattern)
    if not names and not if_exists:
        raise TopicCommandError(f"Topic '{pattern}' does not exist as expected")
    return topics, names


def _check_topic_results(names: Sequence[str], results: Mapping[str, Any], if_exists: bool) -> None:
    """Raise the first topic's error; a topic gone meanwhile is skipped with ``--if-exists``."""
    for name in names:
        result = results.get(name)
        if result is None:
            raise KafkaResponseError(ErrorCode.UNKNOWN_SERVER_ERROR, f"no result for topic {name}")
        if result.error is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
            if if_exists:
                continue
            raise TopicCommandError(f"Topic '{name}' does not exist as expected")
        if result.error is not ErrorCode.NONE:
            raise KafkaResponseError(result.error, result.message)


def new_topic(args: argparse.Namespace) -> NewTopic:
    """The topic ``--create`` asks for; -1 leaves the count or factor to the broker's defaults."""
    configs = parse_configs(args.config)
    if args.replica_assignment is not None:
        if args.partitions is not None or args.replication_factor is not None:
            raise TopicCommandError(
                'Option "[replica-assignment]" can\'t be used with option "[partitions]" or '
                '"[replication-factor]"'
            )
        assignments: Mapping[int, Sequence[int]] | None = parse_replica_assignment(args.replica_assignment)
        return NewTopic(args.topic, -1, -1, configs, assignments)
    partitions = -1 if args.partitions is None else args.partitions
    rf = -1 if args.replication_factor is None else args.replication_factor
    return NewTopic(args.topic, partitions, rf, configs)


async def topics_command(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Run one kafka-topics.sh action against the cluster; returns the exit status."""
    cluster = ClusterConnections(
        args.bootstrap_server, client_id="kipling-topics", security=command_security(args)
    )
    try:
        connection = await cluster.any_connection()
        admin = AdminClient(connection)
        if args.list:
            return await list_topics(admin, out, pattern=args.topic, exclude_internal=args.exclude_internal)
        if args.describe:
            health = DescribeFilter(args.under_replicated_partitions, args.unavailable_partitions)
            return await describe_topics(
                admin,
                connection,
                out,
                pattern=args.topic,
                exclude_internal=args.exclude_internal,
                if_exists=args.if_exists,
                health=health,
            )
        if args.create:
            return await create_topic(admin, out, new_topic(args), if_not_exists=args.if_not_exists)
        if args.alter:
            return await alter_topics(admin, args.topic, args.partitions, if_exists=args.if_exists)
        return await delete_topics(admin, args.topic, if_exists=args.if_exists)
    except TopicCommandError as exc:
        err.write(f"Error while executing topic command : {exc}\n")
        return 1
    except ClientError as exc:
        err.write(f"Error while executing topic command : {error_text(exc)}\n")
        return 1
    finally:
        await cluster.close()


def run(args: argparse.Namespace) -> int:
    parser: argparse.ArgumentParser = args.topics_parser
    if (args.create or args.alter or args.delete) and not args.topic:
        parser.error('Missing required argument "[topic]"')
    if args.alter:
        if args.partitions is None:
            parser.error('Missing required argument "[partitions]"')
        if args.config:
            parser.error(
                'Option "[config]" can\'t be used with option "[alter]": kipling topics does not alter '
                "topic configs"
            )
    if not (args.create or args.alter) and args.partitions is not None:
        parser.error('Option "[partitions]" can only be used with "[create]" or "[alter]"')
    if not args.create:
        for option in ("replication_factor", "replica_assignment"):
            if getattr(args, option) is not None:
                parser.error(f'Option "[{option.replace("_", "-")}]" can only be used with "[create]"')
    configure_tool_logging()
    return run_async(topics_command(args, sys.stdout, sys.stderr))


__all__ = [
    "BrokerAddress",
    "ClusterConnections",
    "DescribeFilter",
    "PartitionLeaders",
    "TopicCommandError",
    "alter_topics",
    "bootstrap_servers",
    "configure_tool_logging",
    "create_topic",
    "delete_topics",
    "describe_topics",
    "error_text",
    "is_retriable",
    "kafka_uuid",
    "list_topics",
    "register",
    "run",
    "run_async",
    "topics_command",
]
