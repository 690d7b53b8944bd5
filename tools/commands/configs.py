"""`kipling configs`: describe and alter dynamic configs of topics, brokers and groups, as Kafka's
kafka-configs.sh (``ConfigCommand``) does.

``--describe`` prints, per entity, Kafka's header and one line per config::

    Dynamic configs for topic t are:
      retention.ms=1000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=1000}

(``All configs for ...`` with ``--all``; ``Default configs for brokers in the cluster are:`` for
``--entity-default``). Without ``--all`` only the entity's own dynamic overrides are listed.
Without ``--entity-name`` every topic, or every broker and then the cluster defaults, or every
consumer group, is described.

``--entity-type groups`` (Kafka 4.0) holds a consumer group's group configs
(``consumer.session.timeout.ms``, ``consumer.heartbeat.interval.ms``); the group need not exist,
and ``Dynamic configs for group g are:`` lists its overrides (GROUP_CONFIG).

``--alter`` sends IncrementalAlterConfigs: ``--add-config 'k1=v1,k2=[a,b]'`` (a value with commas
in brackets) and ``--add-config-file FILE`` (a properties file) are SETs, ``--delete-config k1,k2``
DELETEs; it prints ``Completed updating config for topic t.`` (``... for broker 1.``, ``Completed
updating default config for brokers in the cluster.``). A per-broker change is sent to that broker,
as Kafka's admin client does. Deleting a key the entity does not override is refused first with
``Invalid config(s): k``, as Kafka's tool does.

``--entity-type clients`` / ``users`` (client quotas) go to ``kipling client-quotas``' module when
it is installed; a users alteration naming a SCRAM mechanism (``--add-config
'SCRAM-SHA-256=[iterations=8192,password=secret]'``, ``--delete-config SCRAM-SHA-256``) goes to
:mod:`tools.commands.scram_credentials`, which also adds the users' SCRAM credentials to a users
describe. ``broker-loggers`` is not served by kipling.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from client.admin import (
    BROKER_RESOURCE,
    OP_DELETE,
    OP_SET,
    TOPIC_RESOURCE,
    AdminClient,
    AlterConfigOp,
    ConfigEntryDescription,
    ConfigResource,
)
from client.connection import KafkaConnection
from client.errors import ClientError, KafkaResponseError
from protocol.error_codes import ErrorCode
from server_common.config.properties import PropertiesError, read_properties_file
from tools.commands.arguments import add_command_config_argument, command_security
from tools.commands.groups import GroupAdmin
from tools.commands.scram_credentials import (
    describes_scram,
    run_scram_alter,
    run_scram_describe,
    wants_scram_alter,
)
from tools.commands.topics import (
    ClusterConnections,
    bootstrap_servers,
    configure_tool_logging,
    error_text,
    run_async,
)

SOURCE_NAMES = {
    0: "UNKNOWN",
    1: "DYNAMIC_TOPIC_CONFIG",
    2: "DYNAMIC_BROKER_CONFIG",
    3: "DYNAMIC_DEFAULT_BROKER_CONFIG",
    4: "STATIC_BROKER_CONFIG",
    5: "DEFAULT_CONFIG",
    6: "DYNAMIC_BROKER_LOGGER_CONFIG",
    7: "CLIENT_METRICS_CONFIG",
    8: "GROUP_CONFIG",
}
"""Kafka's ConfigEntry.ConfigSource names, by DescribeConfigs' source id."""
GROUP_RESOURCE = 32
"""Kafka's ConfigResource.Type.GROUP (4.0)."""
RESOURCE_TYPES = {"topics": TOPIC_RESOURCE, "brokers": BROKER_RESOURCE, "groups": GROUP_RESOURCE}
DYNAMIC_SOURCE = {TOPIC_RESOURCE: 1, BROKER_RESOURCE: 2, GROUP_RESOURCE: 8}
DEFAULT_SOURCE = 3
QUOTA_ENTITY_TYPES = ("clients", "users")
QUOTA_MODULE = "tools.commands.client_quotas"


class ConfigCommandError(Exception):
    """A failure printed as one line on stderr, with status 1."""


def parse_config_list(text: str) -> dict[str, str]:
    """Kafka's ``--add-config`` syntax: ``k1=v1,k2=[v2a,v2b]`` (brackets protect commas)."""
    result: dict[str, str] = {}
    depth = 0
    current = ""
    items: list[str] = []
    for ch in text:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth = max(0, depth - 1)
        if ch == "," and depth == 0:
            items.append(current)
            current = ""
        else:
            current += ch
    items.append(current)
    for item in (i.strip() for i in items):
        if not item:
            continue
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise argparse.ArgumentTypeError(
                f'Invalid entity config: all configs to be added must be in the format "key=val": {item!r}'
            )
        value = value.strip()
        if value.startswith("[") and value.endswith("]"):
            value = value[1:-1]
        result[key.strip()] = value
    return result


def parse_key_list(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]


def format_entry(entry: ConfigEntryDescription) -> str:
    """Kafka's line: ``  name=value sensitive=false synonyms={SOURCE:name=value, ...}``."""
    synonyms = ", ".join(f"{SOURCE_NAMES.get(s.source, s.source)}:{s.name}={s.value}" for s in entry.synonyms)
    value = "" if entry.value is None else entry.value
    return f"  {entry.name}={value} sensitive={str(entry.is_sensitive).lower()} synonyms={{{synonyms}}}"


def header(entity_type: str, name: str, describe_all: bool) -> str:
    kind = "All" if describe_all else "Dynamic"
    if entity_type == "brokers" and name == "":
        return f"{'All' if describe_all else 'Default'} configs for brokers in the cluster are:"
    return f"{kind} configs for {entity_type[:-1]} {name} are:"


def completed(entity_type: str, name: str) -> str:
    if entity_type == "brokers" and name == "":
        return "Completed updating default config for brokers in the cluster."
    return f"Completed updating config for {entity_type[:-1]} {name}."


class ConfigTool:
    """The connections and requests of one run."""

    def __init__(self, cluster: ClusterConnections, entity_type: str) -> None:
        self._cluster = cluster
        self._entity_type = entity_type
        self._resource_type = RESOURCE_TYPES[entity_type]

    async def _admin_for(self, name: str) -> AdminClient:
        """A per-broker resource goes to that broker; the rest to any broker."""
        metadata = await self._cluster.metadata([])
        if self._resource_type == BROKER_RESOURCE and name != "":
            broker_id = int(name)
            if broker_id not in {b.node_id for b in metadata.brokers}:
                raise ConfigCommandError(f"The broker {name} is not in the cluster.")
            connection: KafkaConnection = await self._cluster.broker(broker_id)
        else:
            connection = await self._cluster.broker(metadata.brokers[0].node_id)
        return AdminClient(connection)

    async def entities(self, name: str | None) -> list[str]:
        """The entity named, else every topic, internal ones included as Kafka's tool lists them
        (or every broker, then the cluster defaults)."""
        if name is not None:
            return [name]
        if self._entity_type == "groups":
            return await GroupAdmin(self._cluster).list_groups()
        metadata = await self._cluster.metadata(None if self._entity_type == "topics" else [])
        if self._entity_type == "topics":
            return sorted(t.name for t in metadata.topics.values())
        return [str(b.node_id) for b in sorted(metadata.brokers, key=lambda b: b.node_id)] + [""]

    async def entries(self, name: str, describe_all: bool) -> list[ConfigEntryDescription]:
        admin = await self._admin_for(name)
        resource = ConfigResource(self._resource_type, name)
        described = (await admin.describe_configs([resource], include_synonyms=True))[resource]
        if described.error is not ErrorCode.NONE:
            raise KafkaResponseError(described.error, described.message)
        entries = list(described.entries)
        if not describe_all:
            wanted = DEFAULT_SOURCE if name == "" else DYNAMIC_SOURCE[self._resource_type]
            entries = [e for e in entries if e.source == wanted]
        return sorted(entries, key=lambda e: e.name)

    async def describe(self, name: str | None, describe_all: bool, out: TextIO) -> None:
        for entity in await self.entities(name):
            out.write(header(self._entity_type, entity, describe_all) + "\n")
            for entry in await self.entries(entity, describe_all):
                out.write(format_entry(entry) + "\n")

    async def alter(self, name: str, add: dict[str, str], delete: Sequence[str], out: TextIO) -> None:
        if delete:
            current = {e.name for e in await self.entries(name, describe_all=False)}
            invalid = [key for key in delete if key not in current]
            if invalid:
                raise ConfigCommandError(f"Invalid config(s): {','.join(invalid)}")
        ops = [AlterConfigOp(k, v, OP_SET) for k, v in add.items()]
        ops += [AlterConfigOp(k, None, OP_DELETE) for k in delete]
        admin = await self._admin_for(name)
        resource = ConfigResource(self._resource_type, name)
        result = (await admin.incremental_alter_configs({resource: ops}))[resource]
        if result.error is not ErrorCode.NONE:
            raise KafkaResponseError(result.error, result.message)
        out.write(completed(self._entity_type, name) + "\n")


def _entity_name(args: argparse.Namespace) -> str | None:
    if args.entity_default:
        return ""
    name: str | None = args.entity_name
    if name is None and args.entity_type == "topics" and args.topic is not None:
        name = args.topic
    if name is None and args.entity_type == "brokers" and args.broker is not None:
        name = args.broker
    if name is not None and args.entity_type == "brokers":
        try:
            int(name)
        except ValueError:
            raise ConfigCommandError(
                f"The entity name for brokers must be a valid integer broker id, but it is: {name}"
            ) from None
    return name


def _resolve_entity_type(args: argparse.Namespace) -> None:
    if args.entity_type is None:
        quota_shortcuts = ("user", "client", "user_defaults", "client_defaults")
        if any(getattr(args, flag, None) not in (None, False) for flag in quota_shortcuts):
            user = getattr(args, "user", None) is not None or getattr(args, "user_defaults", False)
            args.entity_type = "users" if user else "clients"
        elif args.topic is not None:
            args.entity_type = "topics"
        elif args.broker is not None or args.broker_defaults:
            args.entity_type = "brokers"
            args.entity_default = args.entity_default or args.broker_defaults
    if args.entity_type is None:
        raise ConfigCommandError("--entity-type must be specified")


async def configs_command(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Run ``kipling configs`` with parsed arguments; the exit status."""
    try:
        _resolve_entity_type(args)
        if args.entity_type in QUOTA_ENTITY_TYPES:
            return await _users_and_clients(args, out, err)
        if args.entity_type not in RESOURCE_TYPES:
            raise ConfigCommandError(f"Entity type {args.entity_type} is not supported by kipling")
        if args.describe == args.alter:
            raise ConfigCommandError("Command must include exactly one action: --describe, --alter")
        name = _entity_name(args)
        if args.entity_type in ("topics", "groups") and name == "":
            raise ConfigCommandError(f"--entity-default is not supported for {args.entity_type}")
        add = dict(args.add_config or {})
        if args.add_config_file is not None:
            try:
                add.update(read_properties_file(Path(args.add_config_file)))
            except (OSError, PropertiesError) as exc:
                raise ConfigCommandError(f"Cannot read {args.add_config_file}: {exc}") from None
        delete = list(args.delete_config or [])
        both = sorted(set(add) & set(delete))
        if both:
            raise ConfigCommandError(f"Invalid config(s): {','.join(both)} are both added and deleted")
    except ConfigCommandError as exc:
        err.write(f"{exc}\n")
        return 1
    cluster = ClusterConnections(
        args.bootstrap_server, client_id="configs-tool", security=command_security(args)
    )
    tool = ConfigTool(cluster, args.entity_type)
    try:
        if args.describe:
            await tool.describe(name, args.all, out)
        else:
            if name is None:
                raise ConfigCommandError(
                    "an entity name must be specified with --alter (or --entity-default)"
                )
            if not add and not delete:
                raise ConfigCommandError("--alter needs --add-config, --add-config-file or --delete-config")
            await tool.alter(name, add, delete, out)
        return 0
    except ConfigCommandError as exc:
        err.write(f"{exc}\n")
        return 1
    except ClientError as exc:
        err.write(f"Error while executing config command: {error_text(exc)}\n")
        return 1
    finally:
        out.flush()
        await cluster.close()


async def _users_and_clients(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Users' SCRAM credentials and client quotas, as ConfigCommand splits them: an alteration is
    one or the other, a users describe lists the quotas and then the SCRAM credentials."""
    if wants_scram_alter(args):
        return await run_scram_alter(args, out, err)
    status = await _client_quotas(args, out, err)
    if status == 0 and describes_scram(args):
        status = await run_scram_describe(args, out, err)
    return status


async def _client_quotas(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Hand client-quota entity types to the client quotas module when it exists."""
    try:
        module: Any = importlib.import_module(QUOTA_MODULE)
    except ModuleNotFoundError:
        err.write(f"Entity type {args.entity_type} (client quotas) is not supported by this kipling\n")
        return 1
    result = module.run_client_quotas(args, out, err)
    if hasattr(result, "__await__"):
        result = await result
    return int(result or 0)


CONFIGS_DESCRIPTION = """\
Describe or alter the dynamic configs of topics, brokers and groups, client quotas and users' SCRAM
credentials, as Kafka's kafka-configs.sh does.
Changes are stored in the cluster metadata and take effect on every broker without a restart.
"""

CONFIGS_EPILOG = """\
Examples:
  kipling configs --bootstrap-server 127.0.0.1:9092 --entity-type topics --entity-name t --describe
  kipling configs --bootstrap-server 127.0.0.1:9092 --entity-type topics --entity-name t --alter \\
      --add-config retention.ms=60000,cleanup.policy=[delete,compact]
  kipling configs --bootstrap-server 127.0.0.1:9092 --entity-type brokers --entity-default --alter \\
      --add-config log.retention.ms=3600000
  kipling configs --bootstrap-server 127.0.0.1:9092 --entity-type brokers --entity-name 1 --alter \\
      --delete-config message.max.bytes
  kipling configs --bootstrap-server 127.0.0.1:9092 --entity-type groups --entity-name g --alter \\
      --add-config consumer.session.timeout.ms=50000
  kipling configs --bootstrap-server 127.0.0.1:9092 --entity-type users --entity-name alice --alter \\
      --add-config 'SCRAM-SHA-256=[iterations=8192,password=alice-secret]'
  kipling configs --bootstrap-server 127.0.0.1:9092 --entity-type users --describe
"""


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "configs",
        help="describe or alter dynamic configs of topics, brokers and groups (like kafka-configs.sh)",
        description=CONFIGS_DESCRIPTION,
        epilog=CONFIGS_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--bootstrap-server",
        required=True,
        type=bootstrap_servers,
        metavar="HOST:PORT[,...]",
        help="REQUIRED: the server(s) to connect to",
    )
    add_command_config_argument(p)
    p.add_argument(
        "--entity-type",
        choices=("topics", "brokers", "groups", "broker-loggers", *QUOTA_ENTITY_TYPES),
        help="type of entity (topics, brokers, groups; clients and users: client quotas, users' SCRAM "
        "credentials)",
    )
    p.add_argument("--entity-name", help="name of entity (topic name, broker id, group id, user, client id)")
    p.add_argument("--entity-default", action="store_true", help="the cluster-wide default (brokers)")
    p.add_argument("--topic", help="the topic's name (--entity-type topics --entity-name TOPIC)")
    p.add_argument("--broker", help="the broker's id (--entity-type brokers --entity-name ID)")
    p.add_argument("--broker-defaults", action="store_true", help="--entity-type brokers --entity-default")
    p.add_argument("--describe", action="store_true", help="list configs for the given entity")
    p.add_argument("--alter", action="store_true", help="alter the configuration for the entity")
    p.add_argument(
        "--all", action="store_true", help="with --describe: list all configs, not only dynamic ones"
    )
    p.add_argument(
        "--add-config",
        type=parse_config_list,
        metavar="K1=V1,K2=[V2A,V2B]",
        help="key=value pairs to set; a list value goes in brackets",
    )
    p.add_argument("--add-config-file", metavar="FILE", help="a properties file of configs to set")
    p.add_argument("--delete-config", type=parse_key_list, metavar="K1,K2", help="config keys to remove")
    p.set_defaults(func=run)
    add_quota_arguments(p)


def add_quota_arguments(parser: argparse.ArgumentParser) -> None:
    """The client quotas module's own arguments, when it is installed (its options that this parser
    already declares, --entity-type and the like, stay as declared here)."""
    try:
        module: Any = importlib.import_module(QUOTA_MODULE)
    except ModuleNotFoundError:
        return
    adder = getattr(module, "add_client_quota_arguments", None)
    if adder is None:
        return
    with contextlib.suppress(argparse.ArgumentError):  # a same-named option: the one here serves both
        adder(parser)


def run(args: argparse.Namespace) -> int:
    configure_tool_logging()
    return run_async(configs_command(args, sys.stdout, sys.stderr))
