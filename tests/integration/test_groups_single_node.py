"""Consumer groups on one real broker process, through kafka-python, aiokafka and confluent-kafka.

The broker starts with ``group.initial.rebalance.delay.ms=0`` (a lone member is assigned at once),
6 partitions per topic and 5 partitions of ``__consumer_offsets`` (cheap to create and load).

- Each client, with auto commit and with manual commits, subscribes with a group, consumes
  everything once, has it committed and closes; a second member of the group with the same client
  then receives exactly the records produced since, from the committed offsets on.
- kafka-python's KafkaAdminClient lists, describes and deletes groups and fetches their offsets.
- Committed offsets survive a restart of the broker (SIGTERM and SIGKILL, same data directory), and a
  member of another client resumes from them.
"""

from __future__ import annotations

import signal
from collections import Counter
from collections.abc import Callable, Iterator, Sequence

import pytest
from kafka import KafkaAdminClient

from tests.integration.broker_process import BrokerProcess
from tests.integration.group_members import (
    MEMBERS,
    GroupMember,
    committed_offsets,
    create_topic,
    produce,
    wait_for,
)

PARTITIONS = 6
OVERRIDES = (
    "group.initial.rebalance.delay.ms=0",
    f"num.partitions={PARTITIONS}",
    "offsets.topic.num.partitions=5",
)
TIMEOUT_S = 30


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """One broker for the module's tests (named ``broker`` so that a failure shows its log tail)."""
    process = BrokerProcess(tmp_path_factory.mktemp("groups"), overrides=list(OVERRIDES)).start()
    try:
        yield process
    finally:
        process.stop()


@pytest.fixture
def admin(broker: BrokerProcess) -> Iterator[KafkaAdminClient]:
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=15_000)
    try:
        yield client
    finally:
        client.close()


def _values(prefix: str, count: int) -> list[bytes]:
    return [f"{prefix}-{i}".encode() for i in range(count)]


def _consume(member: GroupMember, expected: Sequence[bytes]) -> None:
    """Run ``member`` until it has every expected value (it keeps running: the caller stops it)."""
    wanted = set(expected)
    wait_for(
        lambda: wanted <= set(member.values()),
        TIMEOUT_S,
        f"{member.name} to consume {len(wanted)} values",
        [member],
    )


def _assert_exactly(member: GroupMember, expected: Sequence[bytes]) -> None:
    counts = Counter(member.values())
    duplicates = {v: n for v, n in counts.items() if n > 1}
    assert not duplicates, f"{member.name} consumed values more than once: {list(duplicates.items())[:5]}"
    assert set(counts) == set(expected), (
        f"{member.name} consumed {len(set(counts) - set(expected))} unexpected values, "
        f"e.g. {sorted(set(counts) - set(expected))[:5]}"
    )


def _state(broker: BrokerProcess, group: str) -> str:
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=15_000)
    try:
        return str(admin.describe_groups([group])[group]["group_state"])
    finally:
        admin.close()


def _wait_committed(
    broker: BrokerProcess, group: str, topic: str, ends: dict[int, int], members: Sequence[GroupMember] = ()
) -> None:
    wait_for(
        lambda: committed_offsets(broker.bootstrap, group, topic) == ends,
        TIMEOUT_S,
        f"group {group} to have committed {ends}",
        list(members),
        interval_s=0.2,
    )


@pytest.mark.parametrize("commit", ["auto", "manual"])
@pytest.mark.parametrize("client", list(MEMBERS))
def test_a_member_resumes_after_the_offsets_its_group_committed(
    broker: BrokerProcess, client: str, commit: str
) -> None:
    """Auto commit: the offsets are committed while the member still runs (the periodic commit, not
    only the one on close). Manual: the member commits after each batch. Either way the next member
    of the group starts exactly at the committed offsets: it gets every new record and no old one."""
    topic = group = f"resume-{client}-{commit}"
    create_topic(broker.bootstrap, topic, PARTITIONS)
    make = MEMBERS[client]
    first = _values(f"{topic}-first", 60)
    ends = produce(broker.bootstrap, topic, first, PARTITIONS)
    assert ends == dict.fromkeys(range(PARTITIONS), 10)

    member = make(f"{client}-1", broker.bootstrap, topic, group, auto_commit=commit == "auto").start()
    try:
        _consume(member, first)
        _wait_committed(broker, group, topic, ends, [member])
    finally:
        member.stop()
    _assert_exactly(member, first)
    assert ("assign", frozenset(range(PARTITIONS))) in member.events
    assert (member.commits > 0) == (commit == "manual")  # auto: only the client committed

    second = _values(f"{topic}-second", 60)
    new_ends = produce(broker.bootstrap, topic, second, PARTITIONS)
    again = make(f"{client}-2", broker.bootstrap, topic, group, auto_commit=commit == "auto").start()
    try:
        _consume(again, second)
        _wait_committed(broker, group, topic, new_ends, [again])
    finally:
        again.stop()
    _assert_exactly(again, second)
    records = again.snapshot()
    starts = {p: min(r.offset for r in records if r.partition == p) for p in range(PARTITIONS)}
    assert starts == ends, "the second member did not start at the committed offsets"


def test_groups_are_listed_described_fetched_and_deleted_by_the_admin_client(
    broker: BrokerProcess, admin: KafkaAdminClient
) -> None:
    topic = group = "admin-groups"
    create_topic(broker.bootstrap, topic, PARTITIONS)
    values = _values(topic, 30)
    ends = produce(broker.bootstrap, topic, values, PARTITIONS)
    member = MEMBERS["kafka-python"]("admin-member", broker.bootstrap, topic, group).start()
    try:
        _consume(member, values)
        _wait_committed(broker, group, topic, ends, [member])
        listed = {g["group_id"]: g for g in admin.list_groups()}
        assert listed[group]["protocol_type"] == "consumer"
        assert listed[group]["group_state"] == "Stable"

        described = admin.describe_groups([group])[group]
        assert described["error"] is None
        assert described["group_state"] == "Stable"
        assert described["protocol_type"] == "consumer"
        assert described["protocol_data"] in ("range", "roundrobin", "sticky", "cooperative-sticky")
        [desc] = described["members"]
        assert desc["client_id"] == "admin-member"
        assert desc["member_metadata"]["topics"] == [topic]
        [assigned] = desc["member_assignment"]["assigned_partitions"]
        assert assigned == {"topic": topic, "partitions": list(range(PARTITIONS))}

        offsets = admin.list_group_offsets({group: None})[group]
        assert {tp.partition: om.offset for tp, om in offsets.items() if tp.topic == topic} == ends

        assert admin.delete_groups([group]) == {group: "NonEmptyGroupError"}
    finally:
        member.stop()

    wait_for(lambda: _state(broker, group) == "Empty", TIMEOUT_S, "the member to leave", interval_s=0.1)
    assert admin.describe_groups([group])[group]["members"] == []
    assert committed_offsets(broker.bootstrap, group, topic) == ends  # an Empty group keeps its offsets
    assert admin.delete_groups([group]) == {group: "OK"}
    assert group not in {g["group_id"] for g in admin.list_groups()}
    assert admin.describe_groups([group])[group]["group_state"] == "Dead"
    assert committed_offsets(broker.bootstrap, group) == {}
    assert admin.delete_groups([group]) == {group: "GroupIdNotFoundError"}


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_committed_offsets_survive_a_restart_of_the_broker(
    broker_factory: Callable[[Sequence[str]], BrokerProcess], sig: signal.Signals
) -> None:
    """confluent-kafka commits and leaves; the broker is stopped and started on the same data
    directory; the offsets are served again, the group is Empty, and an aiokafka member (another
    assignor: it could not join if the departed member had come back) resumes exactly after them."""
    server = broker_factory(OVERRIDES)
    topic = group = "restart"
    create_topic(server.bootstrap, topic, PARTITIONS)
    first = _values("before", 60)
    ends = produce(server.bootstrap, topic, first, PARTITIONS)
    member = MEMBERS["confluent-kafka"]("confluent", server.bootstrap, topic, group).start()
    try:
        _consume(member, first)
        _wait_committed(server, group, topic, ends, [member])
    finally:
        member.stop()
    # the member left (a dynamic member's close sends LeaveGroup): the group is Empty, and its
    # Empty generation is in the log before the coordinator says so
    wait_for(lambda: _state(server, group) == "Empty", TIMEOUT_S, "the group to be Empty", interval_s=0.1)

    server.restart(sig)
    wait_for(
        lambda: committed_offsets(server.bootstrap, group, topic) == ends,
        TIMEOUT_S,
        "the restarted broker to serve the committed offsets",
        interval_s=0.2,
    )
    assert _state(server, group) == "Empty"
    second = _values("after", 60)
    produce(server.bootstrap, topic, second, PARTITIONS)
    again = MEMBERS["aiokafka"]("aiokafka", server.bootstrap, topic, group).start()
    try:
        _consume(again, second)
    finally:
        again.stop()
    _assert_exactly(again, second)
    records = again.snapshot()
    assert {p: min(r.offset for r in records if r.partition == p) for p in range(PARTITIONS)} == ends


def test_offsets_stay_found_when_offsets_topic_num_partitions_changes(
    broker_factory: Callable[[Sequence[str]], BrokerProcess],
) -> None:
    """The broker restarts with another offsets.topic.num.partitions: __consumer_offsets keeps the
    partitions it was created with, the coordinator spreads groups over those (as Kafka does), and
    every offset committed before the change is served after it."""
    from coordinator.group import partition_for

    server = broker_factory(OVERRIDES)  # offsets.topic.num.partitions=5
    groups = [
        f"resized-{i}"
        for i in range(40)
        if partition_for(f"resized-{i}", 5) != partition_for(f"resized-{i}", 2)
    ]
    topic = "resized"
    create_topic(server.bootstrap, topic, 1)
    admin = KafkaAdminClient(bootstrap_servers=server.bootstrap, request_timeout_ms=15_000)
    try:
        from kafka.errors import CoordinatorNotAvailableError
        from kafka.structs import OffsetAndMetadata, TopicPartition

        def commit(group: str, offset: int) -> bool:
            try:  # the first lookup creates __consumer_offsets and is answered "not available"
                admin.alter_group_offsets(
                    group, {TopicPartition(topic, 0): OffsetAndMetadata(offset, "", -1)}
                )
            except CoordinatorNotAvailableError:
                return False
            return True

        for n, group in enumerate(groups[:3]):
            wait_for(lambda: commit(group, n + 10), TIMEOUT_S, f"a commit of {group}", interval_s=0.2)  # noqa: B023
    finally:
        admin.close()
    server.overrides = [*OVERRIDES[:-1], "offsets.topic.num.partitions=2"]
    server.restart()
    for n, group in enumerate(groups[:3]):
        wait_for(
            lambda group=group, n=n: committed_offsets(server.bootstrap, group, topic) == {0: n + 10},  # type: ignore[misc]
            TIMEOUT_S,
            f"the offsets of {group} after the restart",
            interval_s=0.2,
        )


def test_a_broker_wide_compression_type_leaves_the_offsets_topic_as_the_coordinator_writes_it(
    broker_factory: Callable[[Sequence[str]], BrokerProcess],
) -> None:
    """As in Kafka, __consumer_offsets is created with compression.type=producer: a broker-wide
    compression.type=gzip recompresses client batches, never the coordinator's own, and commits
    are read back."""
    from kafka.admin import ConfigResource, ConfigResourceType
    from kafka.errors import CoordinatorNotAvailableError
    from kafka.structs import OffsetAndMetadata, TopicPartition

    from protocol.records import CompressionType, iter_batches

    server = broker_factory((*OVERRIDES, "compression.type=gzip"))
    create_topic(server.bootstrap, "gzipped", 1)
    admin = KafkaAdminClient(bootstrap_servers=server.bootstrap, request_timeout_ms=15_000)
    try:

        def commit() -> bool:
            try:  # the first lookup creates __consumer_offsets and is answered "not available"
                offsets = {TopicPartition("gzipped", 0): OffsetAndMetadata(7, "", -1)}
                admin.alter_group_offsets("compressed", offsets)
            except CoordinatorNotAvailableError:
                return False
            return True

        wait_for(commit, TIMEOUT_S, "a commit", interval_s=0.2)
        resource = ConfigResource(ConfigResourceType.TOPIC, "__consumer_offsets")
        described = admin.describe_configs([resource])
    finally:
        admin.close()
    (by_name,) = described.values()  # {resource type: {name: {key: entry}}}
    entry = by_name["__consumer_offsets"]["compression.type"]
    assert (entry["value"], entry["config_source"]) == ("producer", "DYNAMIC_TOPIC_CONFIG")
    assert committed_offsets(server.bootstrap, "compressed", "gzipped") == {0: 7}
    codecs = [
        header.compression
        for segment in (server.data_dir / "logs").glob("__consumer_offsets-*/*.log")
        for _, header in iter_batches(segment.read_bytes())
    ]
    assert codecs and set(codecs) == {CompressionType.NONE}
