"""`kipling transactions`: inspect transactions and abort hanging ones, like kafka-transactions.sh (KIP-664).

The sub-commands, their options and their output are kafka-transactions.sh's (tables as Kafka's
``ToolsUtils.prettyPrintTable``: each cell padded to its column's width and followed by a tab):

* ``list [--duration-filter MS]``: ListTransactions to every broker (each answers for the
  transactional ids it coordinates); ``TransactionalId Coordinator ProducerId TransactionState``.
* ``describe --transactional-id X``: FindCoordinator (key type 1, transaction), then
  DescribeTransactions there; ``CoordinatorId TransactionalId ProducerId ProducerEpoch
  TransactionState TransactionTimeoutMs CurrentTransactionStartTimeMs TransactionDurationMs
  TopicPartitions`` (start time and duration ``None`` when no transaction ran).
* ``describe-producers --topic T --partition P [--broker-id N]``: DescribeProducers at the
  partition's leader (or broker N); ``ProducerId ProducerEpoch LatestCoordinatorEpoch LastSequence
  LastTimestamp CurrentTransactionStartOffset`` (``None`` when no transaction is open).
* ``find-hanging (--broker-id N | --topic T [--partition P]) [--max-transaction-timeout MIN]``:
  Kafka's FindHangingTransactionsCommand. The open transactions of the partitions searched whose
  producer last wrote more than MIN minutes (15 by default) ago are candidates; ListTransactions
  (filtered by their producer ids, at every broker) names their transactional ids, and
  DescribeTransactions their coordinator's view. A candidate is hanging when no transactional id
  has its producer id, the id is not found, or the id's transaction does not include the
  partition. ``Topic Partition ProducerId ProducerEpoch CoordinatorEpoch StartOffset LastTimestamp
  Duration(min)``. Kafka searches every replica of broker N; here only the partitions N leads
  (a follower's producer state lives in its follower process, and DescribeProducers is answered by
  leaders only).
* ``abort --topic T --partition P (--start-offset O | --producer-id I --producer-epoch E
  --coordinator-epoch C)``: Kafka's AbortTransactionCommand. With ``--start-offset``,
  DescribeProducers at the leader finds the producer whose open transaction starts at O; then
  WriteTxnMarkers writes an ABORT marker for that producer id and epoch with its coordinator epoch
  (0 when the producer never saw a marker, -1) at the partition's leader. Prints nothing on success.

Failures print one line on stderr (Kafka's wording, with the protocol error's name) and exit 1.
Coordinator and leader lookups are retried while they are retriable (a coordinator loading, a
leader moving), for at most :data:`RETRY_ATTEMPTS` rounds.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TextIO

from client.admin import (
    AbortTransactionSpec,
    AdminClient,
    CoordinatorNode,
    PartitionProducers,
    ProducerState,
    TopicPartitionKey,
    TransactionDescription,
    TransactionListing,
)
from client.errors import ClientError, KafkaResponseError
from protocol.error_codes import ErrorCode
from tools.commands.arguments import add_command_config_argument, command_security
from tools.commands.metadata_quorum import pretty_table
from tools.commands.topics import (
    BrokerAddress,
    ClusterConnections,
    bootstrap_servers,
    configure_tool_logging,
    error_text,
    run_async,
)

RETRY_ATTEMPTS = 25
RETRY_BACKOFF_S = 0.2
"""Retriable answers (a coordinator loading, a leader moving) are retried for about 5 s."""
DEFAULT_MAX_TRANSACTION_TIMEOUT_MIN = 15
MAX_BATCH_SIZE = 500
"""Kafka's FindHangingTransactionsCommand asks about at most this many partitions per request."""
NONE = "None"

LIST_HEADERS = ("TransactionalId", "Coordinator", "ProducerId", "TransactionState")
DESCRIBE_HEADERS = (
    "CoordinatorId",
    "TransactionalId",
    "ProducerId",
    "ProducerEpoch",
    "TransactionState",
    "TransactionTimeoutMs",
    "CurrentTransactionStartTimeMs",
    "TransactionDurationMs",
    "TopicPartitions",
)
PRODUCERS_HEADERS = (
    "ProducerId",
    "ProducerEpoch",
    "LatestCoordinatorEpoch",
    "LastSequence",
    "LastTimestamp",
    "CurrentTransactionStartOffset",
)
HANGING_HEADERS = (
    "Topic",
    "Partition",
    "ProducerId",
    "ProducerEpoch",
    "CoordinatorEpoch",
    "StartOffset",
    "LastTimestamp",
    "Duration(min)",
)
RETRY_ON_LEADER = frozenset(
    {
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.REPLICA_NOT_AVAILABLE,
        ErrorCode.BROKER_NOT_AVAILABLE,
        ErrorCode.LEADER_NOT_AVAILABLE,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    }
)
"""Errors after which a leader's request is sent again to the leader new metadata names (Kafka's
AbortTransactionHandler and PartitionLeaderStrategy)."""
RETRY_ON_COORDINATOR = frozenset(
    {ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS}
)


class TransactionsCommandError(Exception):
    """A failure printed as one line on stderr, with status 1."""


def _failure(
    message: str, error: ClientError | ErrorCode, detail: str | None = None
) -> TransactionsCommandError:
    """Kafka's ``printErrorAndExit(message, cause)``: ``message: cause.`` on one line."""
    if isinstance(error, ErrorCode):
        cause = f"{error.name}: {detail or error.description}"
    else:
        cause = error_text(error)
    return TransactionsCommandError(f"{message}: {cause.rstrip('.')}.")


# -- talking to the cluster ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class OpenTransaction:
    """A producer's open transaction on a partition (a find-hanging candidate)."""

    partition: TopicPartitionKey
    producer: ProducerState


class TransactionsAdmin:
    """The requests of the transactions tool, over a :class:`ClusterConnections`."""

    def __init__(self, cluster: ClusterConnections, *, backoff_s: float = RETRY_BACKOFF_S) -> None:
        self.cluster = cluster
        self._backoff_s = backoff_s

    async def _pause(self) -> None:
        await asyncio.sleep(self._backoff_s)

    async def broker_ids(self) -> list[int]:
        metadata = await self.cluster.metadata([])
        return sorted(b.node_id for b in metadata.brokers)

    async def list_transactions(
        self, *, producer_ids: Sequence[int] = (), duration_filter_ms: int = -1
    ) -> dict[int, list[TransactionListing]]:
        """Every broker's transactions, by broker id (a broker whose coordinator loads is asked
        again; COORDINATOR_NOT_AVAILABLE and other errors fail the listing, as Kafka's admin does)."""
        out: dict[int, list[TransactionListing]] = {}
        for broker_id in await self.broker_ids():
            for _ in range(RETRY_ATTEMPTS):
                admin = AdminClient(await self.cluster.broker(broker_id))
                listed = await admin.list_transactions(
                    producer_ids=producer_ids, duration_filter_ms=duration_filter_ms
                )
                if listed.error is not ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
                    break
                await self._pause()
            if listed.error is not ErrorCode.NONE:
                raise KafkaResponseError(listed.error, context=f"ListTransactions at broker {broker_id}")
            out[broker_id] = list(listed.transactions)
        return out

    async def find_coordinator(self, transactional_id: str) -> CoordinatorNode:
        """The coordinator of ``transactional_id``, retried while it is not available (the first
        FindCoordinator of a cluster creates ``__transaction_state``)."""
        last: KafkaResponseError | None = None
        for _ in range(RETRY_ATTEMPTS):
            try:
                return await AdminClient(await self.cluster.any_connection()).find_coordinator(
                    transactional_id
                )
            except KafkaResponseError as exc:
                if not exc.retriable:
                    raise
                last = exc
            await self._pause()
        assert last is not None
        raise last

    async def describe_transaction(self, transactional_id: str) -> tuple[int, TransactionDescription]:
        """The coordinator's id and its description of ``transactional_id``, retried (with a new
        FindCoordinator) on NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE and while it loads."""
        described = TransactionDescription(transactional_id, ErrorCode.COORDINATOR_NOT_AVAILABLE)
        coordinator = CoordinatorNode(-1, "", 0)
        for _ in range(RETRY_ATTEMPTS):
            coordinator = await self.find_coordinator(transactional_id)
            connection = await self.cluster.connection_to(BrokerAddress(coordinator.host, coordinator.port))
            [described] = await AdminClient(connection).describe_transactions([transactional_id])
            if described.error not in RETRY_ON_COORDINATOR:
                break
            await self._pause()
        return coordinator.node_id, described

    async def leaders(self, partitions: Iterable[TopicPartitionKey]) -> dict[TopicPartitionKey, int]:
        """Each partition's leader from fresh metadata (-1 for none); a missing topic or partition is
        UNKNOWN_TOPIC_OR_PARTITION."""
        partitions = list(partitions)
        metadata = await self.cluster.metadata(sorted({tp.topic for tp in partitions}))
        out = {}
        for tp in partitions:
            topic = metadata.topics.get(tp.topic)
            if topic is None or topic.error is not ErrorCode.NONE:
                code = topic.error if topic is not None else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                raise KafkaResponseError(code, context=f"metadata of {tp.topic}")
            info = next((p for p in topic.partitions if p.partition == tp.partition), None)
            if info is None:
                raise KafkaResponseError(
                    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Partition {tp} does not exist", context="metadata"
                )
            out[tp] = info.leader
        return out

    async def describe_producers(
        self, partitions: Sequence[TopicPartitionKey], broker_id: int | None = None
    ) -> dict[TopicPartitionKey, PartitionProducers]:
        """Each partition's active producers, asked of ``broker_id`` or else of its leader (asked
        again when the leader moved). A partition that still has an error is returned with it."""
        wanted = list(dict.fromkeys(partitions))
        out: dict[TopicPartitionKey, PartitionProducers] = {}
        for attempt in range(RETRY_ATTEMPTS):
            if broker_id is not None:
                await self.cluster.metadata([])
                by_broker = {broker_id: wanted}
            else:
                by_broker = {}
                for tp, leader in (await self.leaders(wanted)).items():
                    if leader < 0:
                        out[tp] = PartitionProducers(ErrorCode.LEADER_NOT_AVAILABLE)
                    else:
                        by_broker.setdefault(leader, []).append(tp)
            for broker, tps in sorted(by_broker.items()):
                admin = AdminClient(await self.cluster.broker(broker))
                for start in range(0, len(tps), MAX_BATCH_SIZE):
                    out.update(await admin.describe_producers(tps[start : start + MAX_BATCH_SIZE]))
            retry = [tp for tp in wanted if out.get(tp) is None or out[tp].error in RETRY_ON_LEADER]
            if broker_id is not None or not retry or attempt == RETRY_ATTEMPTS - 1:
                break
            wanted = retry
            await self._pause()
        return out

    async def abort(self, spec: AbortTransactionSpec) -> ErrorCode:
        """WriteTxnMarkers ABORT at the partition's leader (again at a new leader when it moved)."""
        tp = TopicPartitionKey(spec.topic, spec.partition)
        code = ErrorCode.LEADER_NOT_AVAILABLE
        for _ in range(RETRY_ATTEMPTS):
            leader = (await self.leaders([tp]))[tp]
            if leader >= 0:
                code = await AdminClient(await self.cluster.broker(leader)).abort_transaction(spec)
                if code not in RETRY_ON_LEADER:
                    return code
            await self._pause()
        return code


# -- the sub-commands ----------------------------------------------------------------------------


def list_rows(listings: Mapping[int, Sequence[TransactionListing]]) -> list[list[str]]:
    return [
        [t.transactional_id, str(broker_id), str(t.producer_id), t.state]
        for broker_id, transactions in sorted(listings.items())
        for t in transactions
    ]


async def list_command(admin: TransactionsAdmin, args: argparse.Namespace, out: TextIO) -> None:
    duration = args.duration_filter if args.duration_filter is not None else -1
    try:
        listings = await admin.list_transactions(duration_filter_ms=duration)
    except ClientError as exc:
        raise _failure("Failed to list transactions", exc) from None
    out.write(pretty_table(LIST_HEADERS, list_rows(listings)))


def describe_row(coordinator_id: int, description: TransactionDescription, now_ms: int) -> list[str]:
    start = description.transaction_start_time_ms
    return [
        str(coordinator_id),
        description.transactional_id,
        str(description.producer_id),
        str(description.producer_epoch),
        description.state,
        str(description.transaction_timeout_ms),
        NONE if start < 0 else str(start),
        NONE if start < 0 else str(now_ms - start),
        ",".join(str(tp) for tp in description.partitions),
    ]


async def describe_command(
    admin: TransactionsAdmin, args: argparse.Namespace, out: TextIO, now_ms: Callable[[], int]
) -> None:
    transactional_id = args.transactional_id
    failed = f"Failed to describe transaction state of transactional-id `{transactional_id}`"
    try:
        coordinator_id, description = await admin.describe_transaction(transactional_id)
    except ClientError as exc:
        raise _failure(failed, exc) from None
    if description.error is ErrorCode.TRANSACTIONAL_ID_NOT_FOUND:
        raise _failure(
            failed,
            description.error,
            f"DescribeTransactions request for transactionalId `{transactional_id}` failed because the "
            "ID could not be found",
        )
    if description.error is not ErrorCode.NONE:
        raise _failure(failed, description.error)
    out.write(pretty_table(DESCRIBE_HEADERS, [describe_row(coordinator_id, description, now_ms())]))


def producer_rows(producers: Iterable[ProducerState]) -> list[list[str]]:
    return [
        [
            str(p.producer_id),
            str(p.producer_epoch),
            str(p.coordinator_epoch),
            str(p.last_sequence),
            str(p.last_timestamp),
            str(p.current_txn_start_offset) if p.has_open_transaction else NONE,
        ]
        for p in producers
    ]


async def describe_producers_command(admin: TransactionsAdmin, args: argparse.Namespace, out: TextIO) -> None:
    tp = TopicPartitionKey(args.topic, args.partition)
    where = "leader" if args.broker_id is None else f"broker {args.broker_id}"
    failed = f"Failed to describe producers for partition {tp} on {where}"
    try:
        result = (await admin.describe_producers([tp], args.broker_id)).get(tp)
    except ClientError as exc:
        raise _failure(failed, exc) from None
    if result is None:
        raise _failure(failed, ErrorCode.UNKNOWN_SERVER_ERROR, "the partition is missing from the response")
    if result.error is not ErrorCode.NONE:
        raise _failure(failed, result.error, result.message)
    out.write(pretty_table(PRODUCERS_HEADERS, producer_rows(result.producers)))


def candidate_transactions(
    producers: Mapping[TopicPartitionKey, PartitionProducers], now_ms: int, max_transaction_timeout_ms: int
) -> list[OpenTransaction]:
    """The open transactions whose producer last wrote more than the timeout ago (Kafka's
    ``collectCandidateOpenTransactions``)."""
    return [
        OpenTransaction(tp, p)
        for tp, result in producers.items()
        for p in result.producers
        if p.has_open_transaction and now_ms - p.last_timestamp > max_transaction_timeout_ms
    ]


def hanging_transactions(
    candidates: Sequence[OpenTransaction],
    transactional_ids: Mapping[int, str],
    descriptions: Mapping[str, TransactionDescription | None],
) -> list[OpenTransaction]:
    """Kafka's ``filterHangingTransactions``: a candidate hangs when no transactional id has its
    producer id, when that id is unknown to its coordinator, or when the coordinator's transaction
    does not include the partition (then no coordinator will ever write its marker)."""
    hanging = []
    for candidate in candidates:
        transactional_id = transactional_ids.get(candidate.producer.producer_id)
        description = None if transactional_id is None else descriptions.get(transactional_id)
        if description is None or candidate.partition not in description.partitions:
            hanging.append(candidate)
    return hanging


def hanging_rows(hanging: Iterable[OpenTransaction], now_ms: int) -> list[list[str]]:
    return [
        [
            t.partition.topic,
            str(t.partition.partition),
            str(t.producer.producer_id),
            str(t.producer.producer_epoch),
            str(t.producer.coordinator_epoch),
            str(t.producer.current_txn_start_offset),
            str(t.producer.last_timestamp),
            str((now_ms - t.producer.last_timestamp) // 60_000),
        ]
        for t in hanging
    ]


async def partitions_to_search(admin: TransactionsAdmin, args: argparse.Namespace) -> list[TopicPartitionKey]:
    """``--topic T --partition P``; else the partitions of ``--topic`` or of every topic (internal
    ones too), those led by ``--broker-id`` when given."""
    if args.topic is not None and args.partition is not None:
        return [TopicPartitionKey(args.topic, args.partition)]
    try:
        metadata = await admin.cluster.metadata(None if args.topic is None else [args.topic])
    except ClientError as exc:
        raise _failure("Failed to list topics", exc) from None
    out: list[TopicPartitionKey] = []
    for name, topic in sorted(metadata.topics.items()):
        if topic.error is not ErrorCode.NONE:
            raise _failure(f"Failed to describe topic {name}", topic.error)
        out.extend(
            TopicPartitionKey(name, p.partition)
            for p in topic.partitions
            if args.broker_id is None or p.leader == args.broker_id
        )
    return out


async def find_hanging_command(
    admin: TransactionsAdmin, args: argparse.Namespace, out: TextIO, now_ms: Callable[[], int]
) -> None:
    if args.topic is None and args.broker_id is None:
        raise TransactionsCommandError(
            "The `find-hanging` command requires either --topic or --broker-id to limit the scope of "
            "the search"
        )
    if args.partition is not None and args.topic is None:
        raise TransactionsCommandError("The --partition argument requires --topic to be provided")
    max_timeout_ms = args.max_transaction_timeout * 60_000
    partitions = await partitions_to_search(admin, args)
    try:
        producers = await admin.describe_producers(partitions, args.broker_id) if partitions else {}
    except ClientError as exc:
        raise _failure(
            f"Failed to describe producers for {len(partitions)} partitions on broker {args.broker_id}", exc
        ) from None
    for tp, result in producers.items():
        if result.error is not ErrorCode.NONE:
            raise _failure(
                f"Failed to describe producers for {len(partitions)} partitions on broker {args.broker_id}",
                result.error,
                f"partition {tp}: {result.message or result.error.description}",
            )
    candidates = candidate_transactions(producers, now_ms(), max_timeout_ms)
    hanging: list[OpenTransaction] = []
    if candidates:
        producer_ids = sorted({c.producer.producer_id for c in candidates})
        try:
            listings = await admin.list_transactions(producer_ids=producer_ids)
        except ClientError as exc:
            raise _failure(f"Failed to list transactions for {len(producer_ids)} producers", exc) from None
        transactional_ids = {
            t.producer_id: t.transactional_id
            for transactions in listings.values()
            for t in transactions
            if t.producer_id in producer_ids
        }
        descriptions: dict[str, TransactionDescription | None] = {}
        for transactional_id in sorted(set(transactional_ids.values())):
            failed = f"Failed to describe {len(set(transactional_ids.values()))} transactions"
            try:
                _, description = await admin.describe_transaction(transactional_id)
            except ClientError as exc:
                raise _failure(failed, exc) from None
            if description.error is ErrorCode.TRANSACTIONAL_ID_NOT_FOUND:
                descriptions[transactional_id] = None
            elif description.error is not ErrorCode.NONE:
                raise _failure(failed, description.error)
            else:
                descriptions[transactional_id] = description
        hanging = hanging_transactions(candidates, transactional_ids, descriptions)
    out.write(pretty_table(HANGING_HEADERS, hanging_rows(hanging, now_ms())))


async def abort_spec_for(
    admin: TransactionsAdmin, tp: TopicPartitionKey, start_offset: int
) -> AbortTransactionSpec:
    """Kafka's ``buildAbortSpec``: the producer whose open transaction starts at ``start_offset``."""
    failed = f"Failed to validate producer state for partition {tp}"
    try:
        result = (await admin.describe_producers([tp])).get(tp)
    except ClientError as exc:
        raise _failure(failed, exc) from None
    if result is None:
        raise _failure(failed, ErrorCode.UNKNOWN_SERVER_ERROR, "the partition is missing from the response")
    if result.error is not ErrorCode.NONE:
        raise _failure(failed, result.error, result.message)
    found = next((p for p in result.producers if p.current_txn_start_offset == start_offset), None)
    if found is None or start_offset < 0:
        raise TransactionsCommandError(
            f"Could not find any open transactions starting at offset {start_offset} on partition {tp}"
        )
    return AbortTransactionSpec(
        tp.topic, tp.partition, found.producer_id, found.producer_epoch, max(found.coordinator_epoch, 0)
    )


async def abort_command(admin: TransactionsAdmin, args: argparse.Namespace) -> None:
    tp = TopicPartitionKey(args.topic, args.partition)
    if args.start_offset is None and args.producer_id is None:
        raise TransactionsCommandError(
            "The transaction to abort must be identified either with --start-offset (for brokers on 3.0 or "
            "above) or with --producer-id, --producer-epoch, and --coordinator-epoch (for older brokers)"
        )
    if args.start_offset is None:
        if args.producer_epoch is None:
            raise TransactionsCommandError("Missing required argument --producer-epoch")
        if args.coordinator_epoch is None:
            raise TransactionsCommandError("Missing required argument --coordinator-epoch")
        # A producer that never saw a marker has coordinator epoch -1; 0 is at most any leader epoch.
        spec = AbortTransactionSpec(
            tp.topic, tp.partition, args.producer_id, args.producer_epoch, max(args.coordinator_epoch, 0)
        )
    else:
        spec = await abort_spec_for(admin, tp, args.start_offset)
    try:
        code = await admin.abort(spec)
    except ClientError as exc:
        raise _failure(f"Failed to abort transaction {spec}", exc) from None
    if code is not ErrorCode.NONE:
        raise _failure(f"Failed to abort transaction {spec}", code)


# -- the command ---------------------------------------------------------------------------------


TRANSACTIONS_DESCRIPTION = """\
This tool is used to analyze the transactional state of producers in the cluster. It can be used to
detect and recover from hanging transactions (as kafka-transactions.sh, KIP-664): list and describe
transactions at their coordinators, describe the producers of a partition at its leader, find the
open transactions no coordinator will end, and abort one by writing its ABORT marker.
"""

TRANSACTIONS_EPILOG = """\
Examples:
  kipling transactions --bootstrap-server 127.0.0.1:9092 list
  kipling transactions --bootstrap-server 127.0.0.1:9092 describe --transactional-id my-app-0
  kipling transactions --bootstrap-server 127.0.0.1:9092 describe-producers --topic t --partition 0
  kipling transactions --bootstrap-server 127.0.0.1:9092 find-hanging --broker-id 1
  kipling transactions --bootstrap-server 127.0.0.1:9092 abort --topic t --partition 0 --start-offset 42
"""


BOOTSTRAP_HELP = (
    "hostname and port for the broker to connect to (multiple comma-separated entries can be given)"
)


def _bootstrap(parser: argparse.ArgumentParser, *, default: object = None) -> None:
    """``--bootstrap-server``, before the sub-command as in Kafka's tool; a sub-command takes it too
    (``default`` SUPPRESS there, so that it does not hide the one given before)."""
    parser.add_argument(
        "--bootstrap-server",
        type=bootstrap_servers,
        metavar="HOST:PORT[,...]",
        help=BOOTSTRAP_HELP,
        default=default,
    )


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "transactions",
        help="list, describe and abort transactions, find hanging ones (like kafka-transactions.sh)",
        description=TRANSACTIONS_DESCRIPTION,
        epilog=TRANSACTIONS_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _bootstrap(p)
    add_command_config_argument(p)
    commands = p.add_subparsers(dest="transactions_command", metavar="COMMAND", required=True)

    listing = commands.add_parser("list", help="list transactions")
    listing.add_argument(
        "--duration-filter",
        type=int,
        metavar="MS",
        help="if >= 0, only transactions running longer than this many milliseconds",
    )

    describe = commands.add_parser("describe", help="describe the state of an active transactional-id")
    describe.add_argument("--transactional-id", required=True, help="transactional id")

    producers = commands.add_parser(
        "describe-producers", help="describe the states of active producers for a topic partition"
    )
    producers.add_argument("--broker-id", type=int, help="ask this broker rather than the partition's leader")
    producers.add_argument("--topic", required=True, help="topic name")
    producers.add_argument("--partition", type=int, required=True, help="partition number")

    abort = commands.add_parser(
        "abort", help="abort a hanging transaction (requires administrative privileges)"
    )
    abort.add_argument("--topic", required=True, help="topic name")
    abort.add_argument("--partition", type=int, required=True, help="partition number")
    newer = abort.add_argument_group(
        "Brokers on versions 3.0 and above",
        "For newer brokers, only the start offset of the transaction to be aborted is required",
    )
    newer.add_argument("--start-offset", type=int, help="start offset of the transaction to abort")
    older = abort.add_argument_group(
        "Brokers on versions older than 3.0", "For older brokers, you must provide all of these arguments"
    )
    older.add_argument("--producer-id", type=int, help="producer id")
    older.add_argument("--producer-epoch", type=int, help="producer epoch")
    older.add_argument("--coordinator-epoch", type=int, help="coordinator epoch")

    hanging = commands.add_parser("find-hanging", help="find hanging transactions")
    hanging.add_argument("--broker-id", type=int, help="broker id to search for hanging transactions")
    hanging.add_argument(
        "--max-transaction-timeout",
        type=int,
        default=DEFAULT_MAX_TRANSACTION_TIMEOUT_MIN,
        metavar="MINUTES",
        help="maximum transaction timeout in minutes to limit the scope of the search "
        "(15 minutes by default)",
    )
    hanging.add_argument(
        "--topic", help="topic name to limit search to (required if --partition is specified)"
    )
    hanging.add_argument("--partition", type=int, help="partition number")

    for child in (listing, describe, producers, abort, hanging):
        _bootstrap(child, default=argparse.SUPPRESS)
    p.set_defaults(func=run, transactions_parser=p)


def _wall_clock_ms() -> int:
    return int(time.time() * 1000)


async def transactions_command(
    args: argparse.Namespace, out: TextIO, err: TextIO, *, now_ms: Callable[[], int] = _wall_clock_ms
) -> int:
    """Run ``kipling transactions`` with parsed arguments; the exit status."""
    cluster = ClusterConnections(
        args.bootstrap_server, client_id="kipling-transactions", security=command_security(args)
    )
    admin = TransactionsAdmin(cluster)
    try:
        command = args.transactions_command
        if command == "list":
            await list_command(admin, args, out)
        elif command == "describe":
            await describe_command(admin, args, out, now_ms)
        elif command == "describe-producers":
            await describe_producers_command(admin, args, out)
        elif command == "find-hanging":
            await find_hanging_command(admin, args, out, now_ms)
        else:
            await abort_command(admin, args)
        return 0
    except TransactionsCommandError as exc:
        err.write(f"{exc}\n")
        return 1
    except ClientError as exc:
        err.write(f"Transactions command failed: {error_text(exc)}\n")
        return 1
    finally:
        out.flush()
        await cluster.close()


def run(args: argparse.Namespace) -> int:
    if getattr(args, "bootstrap_server", None) is None:
        args.transactions_parser.error("the following arguments are required: --bootstrap-server")
    configure_tool_logging()
    return run_async(transactions_command(args, sys.stdout, sys.stderr))


__all__ = [
    "OpenTransaction",
    "TransactionsAdmin",
    "TransactionsCommandError",
    "candidate_transactions",
    "describe_row",
    "hanging_rows",
    "hanging_transactions",
    "list_rows",
    "producer_rows",
    "register",
    "run",
    "transactions_command",
]
