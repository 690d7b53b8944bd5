"""Produce JSON events to a kipling topic, with out-of-order, late and a few malformed ones.

    python -m pipeline.jobs.generate_events --bootstrap 127.0.0.1:9092 --topic events \\
        --events 3000 --rate 10 [--late-fraction 0.05] [--malformed-fraction 0.01] \\
        [--partitions 3] [--realtime] [--seed 7]

The input of :mod:`pipeline.jobs.event_aggregates`: values such as
``{"event_time": "2024-05-01T12:00:05.250Z", "user": "user-007", "kind": "click", "amount": 0.35}``,
keyed by user. ``--rate`` is events per second of *event time*: the events cover ``events / rate``
seconds that end now, so a demo gets minutes of event time, and windows the watermark closes, in a few
seconds of producing. With ``--realtime`` they are also sent at that rate, with event times from now on:
a live feed for a job running with a processing-time trigger.

What makes the stream realistic for a watermark:

- every event's time jitters up to three seconds back (clocks and network paths differ), and
  ``event_time`` comes in several spellings: ISO-8601 with ``Z``, with milliseconds, with a ``+02:00``
  offset, and epoch milliseconds as a JSON number or a string;
- ``--late-fraction`` of the events are late: their time is 10 s to ``--max-lateness`` seconds behind
  their position in the stream, so some fall within a 2-minute watermark (counted) and some behind it
  (dropped by the job, if their window was already emitted);
- ``--malformed-fraction`` of the values are broken: not JSON, a JSON array, an unreadable or missing
  ``event_time``, a missing ``kind``, a non-numeric ``amount``, an empty value.

It uses kipling's own client (``client.AdminClient`` creates the topic if it is missing, then one
``client.Producer`` per partition leader, acks=all), so producing needs nothing beyond kipling.
Keyed events go where Kafka's default partitioner puts them (murmur2 of the key).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, timezone

import structlog

from client.admin import AdminClient, NewTopic
from client.errors import KafkaResponseError
from client.fetch_session import TopicPartition
from client.partitioner import partition_for_key
from client.producer import Producer
from pipeline.cluster import ClusterClient
from pipeline.options import BrokerAddress, ConnectionSettings, parse_bootstrap
from protocol.error_codes import ErrorCode
from protocol.records import Record

_log = structlog.get_logger("kipling.pipeline.jobs.generate_events")

KINDS = ("view", "click", "purchase")
KIND_WEIGHTS = (6, 3, 1)
JITTER_MS = 3000
MIN_LATENESS_MS = 10_000
DEFAULT_MAX_LATENESS_S = 300.0
BATCH_RECORDS = 500
"""Records per produce request and partition when not pacing: big enough to be quick, small enough
to keep requests well under the broker's limits."""
REALTIME_TICK_S = 0.1
CLIENT_ID = "kipling-generate-events"
PLUS_TWO = timezone(timedelta(hours=2))


@dataclass(frozen=True, slots=True)
class EventSettings:
    """What to generate (the CLI's flags)."""

    events: int
    rate: float = 10.0
    """Events per second of event time (and of wall-clock time with ``realtime``)."""
    late_fraction: float = 0.05
    malformed_fraction: float = 0.01
    max_lateness_s: float = DEFAULT_MAX_LATENESS_S
    users: int = 50
    seed: int | None = None

    @property
    def span_ms(self) -> int:
        return round(self.events / self.rate * 1000)


@dataclass(frozen=True, slots=True)
class GeneratedEvent:
    """One record to produce, and what it is (for the summary and for tests)."""

    key: bytes | None
    value: bytes
    send_at_s: float
    """When to send it, in seconds from the first event (used with ``realtime``)."""
    event_time_ms: int | None
    """The event time it carries; None for a malformed event."""
    late: bool = False
    malformed: bool = False


def generate_events(settings: EventSettings, *, end_ms: int) -> list[GeneratedEvent]:
    """The events, in sending order; their nominal times are evenly spread over the span ending at ``end_ms``.

    Deterministic for a given ``seed`` and ``end_ms``.
    """
    if settings.events < 0 or settings.rate <= 0:
        raise ValueError("events must be >= 0 and rate > 0")
    rng = random.Random(settings.seed)
    users = [f"user-{i:03d}" for i in range(settings.users)]
    user_weights = [1 / (i + 1) for i in range(settings.users)]  # a few busy users, a long tail
    start_ms = end_ms - settings.span_ms
    out: list[GeneratedEvent] = []
    for i in range(settings.events):
        send_at_s = i / settings.rate
        nominal_ms = start_ms + round(send_at_s * 1000)
        user = rng.choices(users, user_weights)[0]
        if rng.random() < settings.malformed_fraction:
            out.append(
                GeneratedEvent(user.encode(), _malformed(rng, nominal_ms, user), send_at_s, None, False, True)
            )
            continue
        late = rng.random() < settings.late_fraction
        lateness_ms = rng.randint(
            MIN_LATENESS_MS, max(MIN_LATENESS_MS, round(settings.max_lateness_s * 1000))
        )
        event_ms = nominal_ms - (lateness_ms if late else rng.randint(0, JITTER_MS))
        kind = rng.choices(KINDS, KIND_WEIGHTS)[0]
        event = {
            "event_time": _event_time(rng, event_ms),
            "user": user,
            "kind": kind,
            "amount": _amount(rng, kind),
        }
        out.append(GeneratedEvent(user.encode(), json.dumps(event).encode(), send_at_s, event_ms, late))
    return out


def _event_time(rng: random.Random, ms: int) -> str | int:
    """One of the spellings the job accepts, chosen at random."""
    moment = datetime.fromtimestamp(ms / 1000, UTC)
    choice = rng.random()
    if choice < 0.4:
        return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")
    if choice < 0.6:
        return moment.replace(microsecond=0).isoformat().replace("+00:00", "Z")
    if choice < 0.7:
        return moment.astimezone(PLUS_TWO).isoformat(timespec="milliseconds")
    if choice < 0.9:
        return ms
    return str(ms)


def _amount(rng: random.Random, kind: str) -> float:
    if kind == "purchase":
        return round(rng.uniform(5, 250), 2)
    if kind == "click":
        return round(rng.uniform(0.05, 0.5), 2)
    return 0.0


def _malformed(rng: random.Random, nominal_ms: int, user: str) -> bytes:
    iso = datetime.fromtimestamp(nominal_ms / 1000, UTC).isoformat(timespec="milliseconds")
    iso = iso.replace("+00:00", "Z")
    variants: list[object] = [
        f'{{"event_time": "{iso}", "user": "{user}", "kind": "cli',  # truncated
        "user=alice kind=click",
        [iso, user, "click", 1.0],
        {"event_time": "yesterday", "user": user, "kind": "view", "amount": 0.0},
        {"user": user, "kind": "view", "amount": 0.0},
        {"event_time": iso, "user": user, "amount": 1.0},
        {"event_time": iso, "user": user, "kind": "purchase", "amount": "12,50"},
        "",
    ]
    chosen = rng.choice(variants)
    return (chosen if isinstance(chosen, str) else json.dumps(chosen)).encode()


# -- producing -------------------------------------------------------------------------------------


@dataclass(slots=True)
class ProduceSummary:
    """What was produced: the CLI prints it, the demo logs it."""

    topic: str
    records: int = 0
    late: int = 0
    malformed: int = 0
    by_partition: dict[int, int] = field(default_factory=dict)
    seconds: float = 0.0

    def describe(self) -> str:
        return (
            f"produced {self.records} events to {self.topic} ({len(self.by_partition)} partitions) "
            f"in {self.seconds:.1f} s: {self.late} late, {self.malformed} malformed"
        )


async def ensure_topic(client: ClusterClient, topic: str, partitions: int) -> int:
    """Create ``topic`` with ``partitions`` if it does not exist; returns its partition count.

    Waits (with the client's retries) until the topic is known and every partition has a leader, so
    producing right after creation does not fail.
    """
    existing = (await client.metadata([topic])).topics.get(topic)
    if existing is None or existing.error is not ErrorCode.NONE:
        connection = await client.any_connection()
        result = (await AdminClient(connection).create_topics([NewTopic(topic, partitions)]))[topic]
        if result.error not in (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS):
            raise KafkaResponseError(result.error, result.message, context=f"create topic {topic}")
        if result.error is ErrorCode.NONE:
            _log.info("topic created", topic=topic, partitions=partitions)

    async def ready() -> int:
        description = (await client.metadata([topic])).topics.get(topic)
        if description is None or description.error is not ErrorCode.NONE:
            code = description.error if description is not None else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            raise KafkaResponseError(code, context=f"metadata of topic {topic}")
        await client.leaders([TopicPartition(topic, p.partition) for p in description.partitions])
        return len(description.partitions)

    return await client.with_retries("metadata", ready)


def ensure_topics(bootstrap: str, topics: dict[str, int]) -> dict[str, int]:
    """Synchronous :func:`ensure_topic` for several topics (name → partitions when created)."""

    async def run() -> dict[str, int]:
        client = ClusterClient(ConnectionSettings(parse_bootstrap(bootstrap), client_id=CLIENT_ID))
        try:
            return {topic: await ensure_topic(client, topic, count) for topic, count in topics.items()}
        finally:
            await client.close()

    return asyncio.run(run())


async def produce_events(
    bootstrap: str,
    topic: str,
    events: Sequence[GeneratedEvent],
    *,
    partitions: int = 3,
    realtime: bool = False,
) -> ProduceSummary:
    """Produce ``events`` to ``topic`` (created with ``partitions`` if missing), acks=all."""
    client = ClusterClient(ConnectionSettings(parse_bootstrap(bootstrap), client_id=CLIENT_ID))
    summary = ProduceSummary(topic)
    started = time.monotonic()
    try:
        count = await ensure_topic(client, topic, partitions)
        leaders = await client.with_retries(
            "metadata", lambda: client.leaders([TopicPartition(topic, p) for p in range(count)])
        )
        producers: dict[BrokerAddress, Producer] = {}

        async def send(partition: int, records: list[Record]) -> None:
            address = leaders[TopicPartition(topic, partition)]
            if address not in producers:
                producers[address] = Producer(await client.connection(address), acks=-1)
            await producers[address].send(topic, partition, records)

        unkeyed = 0
        for chunk in _chunks(events, realtime):
            if realtime:
                await asyncio.sleep(max(0.0, started + chunk[0].send_at_s - time.monotonic()))
            now_ms = int(time.time() * 1000)
            by_partition: dict[int, list[Record]] = {}
            for event in chunk:
                if event.key is not None:
                    partition = partition_for_key(event.key, count)
                else:
                    partition, unkeyed = unkeyed % count, unkeyed + 1
                by_partition.setdefault(partition, []).append(Record(event.value, event.key, (), now_ms))
            await asyncio.gather(*(send(p, records) for p, records in by_partition.items()))
            for partition, records in by_partition.items():
                summary.by_partition[partition] = summary.by_partition.get(partition, 0) + len(records)
            summary.records += len(chunk)
            summary.late += sum(e.late for e in chunk)
            summary.malformed += sum(e.malformed for e in chunk)
    finally:
        await client.close()
    summary.seconds = time.monotonic() - started
    _log.info("events produced", topic=topic, records=summary.records, seconds=round(summary.seconds, 2))
    return summary


def _chunks(events: Sequence[GeneratedEvent], realtime: bool) -> list[list[GeneratedEvent]]:
    """Groups sent together: the events due in one tick when pacing, else runs of BATCH_RECORDS."""
    if not realtime:
        return [list(events[i : i + BATCH_RECORDS]) for i in range(0, len(events), BATCH_RECORDS)]
    chunks: list[list[GeneratedEvent]] = []
    for event in events:
        if chunks and event.send_at_s - chunks[-1][0].send_at_s < REALTIME_TICK_S:
            chunks[-1].append(event)
        else:
            chunks.append([event])
    return chunks


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--bootstrap", required=True, help="host:port[,host:port]")
    parser.add_argument("--topic", required=True)
    parser.add_argument("--events", type=int, required=True, help="how many events")
    parser.add_argument("--rate", type=float, default=10.0, help="events per second of event time")
    parser.add_argument("--late-fraction", type=float, default=0.05)
    parser.add_argument("--malformed-fraction", type=float, default=0.01)
    parser.add_argument("--max-lateness", type=float, default=DEFAULT_MAX_LATENESS_S, help="seconds")
    parser.add_argument("--users", type=int, default=50)
    parser.add_argument("--partitions", type=int, default=3, help="partitions if the topic is created")
    parser.add_argument("--realtime", action="store_true", help="send at --rate, event times from now on")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--log-level", default="INFO")
    return parser.parse_args(argv)


def settings_from_args(args: argparse.Namespace) -> EventSettings:
    return EventSettings(
        events=args.events,
        rate=args.rate,
        late_fraction=args.late_fraction,
        malformed_fraction=args.malformed_fraction,
        max_lateness_s=args.max_lateness,
        users=args.users,
        seed=args.seed,
    )


def main(argv: Sequence[str] | None = None) -> int:
    from pipeline.logs import configure_logging

    args = parse_args(argv)
    configure_logging(args.log_level)
    settings = settings_from_args(args)
    now_ms = int(time.time() * 1000)
    events = generate_events(settings, end_ms=now_ms + settings.span_ms if args.realtime else now_ms)
    try:
        summary = asyncio.run(
            produce_events(
                args.bootstrap, args.topic, events, partitions=args.partitions, realtime=args.realtime
            )
        )
    except KeyboardInterrupt:
        return 130
    print(summary.describe())
    return 0


if __name__ == "__main__":
    sys.exit(main())
