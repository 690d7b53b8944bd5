"""librdkafka's admin regression test (tests/0081-admin.c, v2.15.0) against one kipling node, through
confluent-kafka's AdminClient (librdkafka underneath): each sub-test's calls and checks, in its order.

The node runs an authorizer with ``super.users=User:ANONYMOUS``, as 0081 needs one for its ACL
sub-tests and the PLAINTEXT client must still administer; a super user's authorized operations are
every operation the resource supports, what 0081 expects with authorized operations asked for. The
sub-tests that need a SASL login (authorized operations after an ACL change) are not mirrored.

Where the Python binding lacks a call 0081 makes, the closest client does it: DeleteConsumerGroupOffsets
(OffsetDelete) through kafka-python, as confluent-kafka 2.16 has no ``delete_consumer_group_offsets``.
0081's version-dependent expectations are taken for a Kafka 4.0 broker as far as group configs go: a
GROUP config resource (KIP-848's consumer.session.timeout.ms) is altered and described without error,
the group need not exist.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import pytest
from confluent_kafka import (
    OFFSET_END,
    OFFSET_INVALID,
    Consumer,
    ConsumerGroupState,
    ConsumerGroupTopicPartitions,
    ConsumerGroupType,
    ElectionType,
    IsolationLevel,
    KafkaException,
    Producer,
    TopicCollection,
    TopicPartition,
)
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
    OffsetSpec,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from kafka import KafkaAdminClient
from kafka.errors import GroupSubscribedToTopicError, NoError
from kafka.structs import TopicPartition as KpTopicPartition

from tests.integration.broker_process import BrokerProcess

pytestmark = [pytest.mark.timeout(180)]

TIMEOUT_S = 30
NODE_ID = 1
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    process = BrokerProcess(
        tmp_path_factory.mktemp("librdkafka-0081"),
        overrides=[
            f"authorizer.class.name={AUTHORIZER}",
            "super.users=User:ANONYMOUS",
            "group.initial.rebalance.delay.ms=0",
        ],
    ).start()
    yield process
    process.stop()


@pytest.fixture(scope="module")
def admin(broker: BrokerProcess) -> AdminClient:
    """One handle for the module, as 0081 uses one: a future outlives its call only while it lives."""
    return AdminClient({"bootstrap.servers": broker.bootstrap, "socket.timeout.ms": 10000})


def names(prefix: str, count: int) -> list[str]:
    """0081's ``test_mk_topic_name(..., 1)``: unique names for one sub-test."""
    tag = uuid.uuid4().hex[:8]
    return [f"rdkafkatest_{prefix}_{tag}_{i}" for i in range(count)]


def outcome(future: Any) -> tuple[str, Any]:
    """``("OK", result)`` or ``(error name, KafkaError)`` of an admin future."""
    try:
        return "OK", future.result(timeout=TIMEOUT_S)
    except KafkaException as exc:
        return exc.args[0].name(), exc.args[0]


def create_topics(admin: AdminClient, topics: Sequence[str], partitions: int) -> None:
    """0081's ``test_CreateTopics_simple``: every topic must be created."""
    futures = admin.create_topics([NewTopic(t, partitions, 1) for t in topics], operation_timeout=15)
    assert {t: outcome(f)[0] for t, f in futures.items()} == dict.fromkeys(topics, "OK")


def wait_metadata(
    admin: AdminClient, present: dict[str, int] | None = None, absent: Iterable[str] = ()
) -> None:
    """0081's ``test_wait_metadata_update``: the topics with their partition counts, and not the others."""
    present = present or {}
    absent = set(absent)
    deadline = time.monotonic() + TIMEOUT_S
    while True:
        topics = admin.list_topics(timeout=10).topics
        seen = {t: len(topics[t].partitions) for t in present if t in topics and topics[t].error is None}
        if seen == present and not absent & set(topics):
            return
        assert time.monotonic() < deadline, f"metadata shows {seen} and {absent & set(topics)}"
        time.sleep(0.2)


def produce(broker: BrokerProcess, topic: str, partition: int, count: int) -> None:
    """0081's ``test_produce_msgs_easy``."""
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
    for i in range(count):
        producer.produce(topic, b"msg-%d" % i, partition=partition)
    assert producer.flush(TIMEOUT_S) == 0


def consumer(broker: BrokerProcess, group: str, **conf: str) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": "false",
            **conf,
        }
    )


def consume(subscriber: Consumer, topic: str, count: int) -> None:
    """0081's ``test_consume_msgs_easy`` / ``test_consumer_poll``: ``count`` messages, committed."""
    subscriber.subscribe([topic])
    got = 0
    deadline = time.monotonic() + TIMEOUT_S
    while got < count:
        assert time.monotonic() < deadline, f"consumed {got} of {count}"
        message = subscriber.poll(0.5)
        if message is not None and message.error() is None:
            got += 1
    subscriber.commit(asynchronous=False)


def wait_assignment(subscriber: Consumer, topics: Sequence[str]) -> None:
    """0081's ``test_consumer_wait_assignment``."""
    subscriber.subscribe(list(topics))
    deadline = time.monotonic() + TIMEOUT_S
    while not subscriber.assignment():
        assert time.monotonic() < deadline, "no assignment"
        subscriber.poll(0.2)


def offsets(partitions: Iterable[TopicPartition]) -> list[tuple[str, int, int, int | None]]:
    """0081's ``test_partition_list_and_offsets_cmp``: topic, partition, offset, leader epoch, sorted."""
    return sorted((tp.topic, tp.partition, tp.offset, tp.leader_epoch) for tp in partitions)


def errors(partitions: Iterable[TopicPartition]) -> set[str | None]:
    return {tp.error.name() if tp.error else None for tp in partitions}


# -- CreateTopics, DeleteTopics, CreatePartitions ------------------------------------------------


@pytest.mark.parametrize(
    ("operation_timeout", "validate_only"), [(15, False), (0.3, True), (9, True), (None, False)]
)
def test_create_topics(admin: AdminClient, operation_timeout: float | None, validate_only: bool) -> None:
    """do_test_CreateTopics: seven topics, every odd one with compression.type=lz4 and
    delete.retention.ms=900, the second also with an unknown key (INVALID_CONFIG), every third with
    a replica assignment, the seventh with the broker's defaults (-1 partitions). Results come in
    request order; validate_only creates nothing."""
    topics = names("CreateTopics", 7)
    new_topics = []
    for i, topic in enumerate(topics):
        use_defaults = i == 6
        partitions = -1 if use_defaults else i * 7 + 1
        config = {"compression.type": "lz4", "delete.retention.ms": "900"} if i & 1 else {}
        if i == 1:
            config["dummy.doesntexist"] = "broker is verifying this"
        if not use_defaults and i % 3 == 0:
            new_topics.append(
                NewTopic(topic, partitions, replica_assignment=[[NODE_ID]] * partitions, config=config)
            )
        else:
            new_topics.append(NewTopic(topic, partitions, 1, config=config))
    options: dict[str, Any] = {"validate_only": validate_only}
    if operation_timeout is not None:
        options["operation_timeout"] = operation_timeout
    futures = admin.create_topics(new_topics, **options)
    assert list(futures) == topics
    results = {topic: outcome(future) for topic, future in futures.items()}
    assert {t: code for t, (code, _) in results.items()} == {
        t: "INVALID_CONFIG" if i == 1 else "OK" for i, t in enumerate(topics)
    }
    assert results[topics[1]][1].str() == "Unknown topic config name: dummy.doesntexist"
    created = (
        {} if validate_only else {t: (1 if i == 6 else i * 7 + 1) for i, t in enumerate(topics) if i != 1}
    )
    if validate_only:
        time.sleep(2)  # 0081 gives a wrong creation time to show up
    wait_metadata(admin, created, [t for t in topics if t not in created])


@pytest.mark.parametrize("codec", ["uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"])
def test_create_topics_takes_every_compression_type(admin: AdminClient, codec: str) -> None:
    [topic] = names(f"compression_{codec}", 1)
    create_topics_with = admin.create_topics([NewTopic(topic, 1, 1, config={"compression.type": codec})])
    assert outcome(create_topics_with[topic])[0] == "OK"
    described = admin.describe_configs([ConfigResource(ResourceType.TOPIC, topic)])
    [entries] = [outcome(f)[1] for f in described.values()]
    assert entries["compression.type"].value == codec


def test_create_topics_refuses_an_unknown_compression_type(admin: AdminClient) -> None:
    [topic] = names("compression_bogus", 1)
    futures = admin.create_topics([NewTopic(topic, 1, 1, config={"compression.type": "bogus"})])
    code, error = outcome(futures[topic])
    assert code == "INVALID_CONFIG" and "compression.type" in error.str()


def test_delete_topics(admin: AdminClient) -> None:
    """do_test_DeleteTopics: nine topics, the last two never created (UNKNOWN_TOPIC_OR_PARTITION),
    with an operation timeout of 1.5 s; results in request order, then none left in metadata."""
    topics = names("DeleteTopics", 9)
    create_topics(admin, topics[:7], 2)
    wait_metadata(admin, dict.fromkeys(topics[:7], 2))
    futures = admin.delete_topics(topics, operation_timeout=1.5)
    assert list(futures) == topics
    assert [outcome(f)[0] for f in futures.values()] == ["OK"] * 7 + ["UNKNOWN_TOPIC_OR_PART"] * 2
    wait_metadata(admin, absent=topics)


def test_create_partitions(admin: AdminClient) -> None:
    """do_test_CreatePartitions: topic i has 1 + 2i partitions and grows by 1 + i/2; the even ones
    with explicit replica assignments, for the old partitions and the new."""
    topics = names("CreatePartitions", 9)
    new_topics, new_partitions, final = [], [], {}
    for i, topic in enumerate(topics):
        initial, added = 1 + i * 2, 1 + i // 2
        final[topic] = initial + added
        if i % 2 == 0:
            new_topics.append(NewTopic(topic, initial, replica_assignment=[[NODE_ID]] * initial))
            new_partitions.append(
                NewPartitions(topic, initial + added, replica_assignment=[[NODE_ID]] * added)
            )
        else:
            new_topics.append(NewTopic(topic, initial, 1))
            new_partitions.append(NewPartitions(topic, initial + added))
    created = admin.create_topics(new_topics, operation_timeout=6.5)
    assert {t: outcome(f)[0] for t, f in created.items()} == dict.fromkeys(topics, "OK")
    grown = admin.create_partitions(new_partitions, operation_timeout=6.5)
    assert {t: outcome(f)[0] for t, f in grown.items()} == dict.fromkeys(topics, "OK")
    wait_metadata(admin, final)
    topic_metadata = admin.list_topics(timeout=10).topics
    for topic in topics:
        assert all(p.replicas == [NODE_ID] for p in topic_metadata[topic].partitions.values())


# -- ACLs ---------------------------------------------------------------------------------------


def acl_filter(name: str, pattern: ResourcePatternType) -> AclBindingFilter:
    """Every binding of a topic name matching ``pattern``."""
    return AclBindingFilter(
        ResourceType.TOPIC, name, pattern, None, None, AclOperation.ANY, AclPermissionType.ANY
    )


def bindings(found: Iterable[AclBinding]) -> list[tuple[str, str, str, str, str, str]]:
    return sorted(
        (b.name, b.resource_pattern_type.name, b.principal, b.host, b.operation.name, b.permission_type.name)
        for b in found
    )


def test_create_acls(admin: AdminClient) -> None:
    """do_test_CreateAcls (v1 broker): a PREFIXED READ for User:test1 and a LITERAL WRITE for
    User:test2, both created."""
    base = names("CreateAcls", 1)[0]
    created = admin.create_acls(
        [
            AclBinding(
                ResourceType.TOPIC,
                f"{base}_1",
                ResourcePatternType.PREFIXED,
                "User:test1",
                "*",
                AclOperation.READ,
                AclPermissionType.ALLOW,
            ),
            AclBinding(
                ResourceType.TOPIC,
                f"{base}_2",
                ResourcePatternType.LITERAL,
                "User:test2",
                "*",
                AclOperation.WRITE,
                AclPermissionType.ALLOW,
            ),
        ],
        request_timeout=10,
    )
    assert [outcome(f)[0] for f in created.values()] == ["OK", "OK"]
    admin.delete_acls([acl_filter(base, ResourcePatternType.PREFIXED)])


def test_describe_and_delete_acls(admin: AdminClient) -> None:
    """do_test_DescribeAcls and do_test_DeleteAcls: a MATCH filter finds both bindings of a topic
    (its PREFIXED and LITERAL ones), a LITERAL filter the literal one; a MATCH delete removes both
    and leaves another topic's, which a LITERAL delete then removes."""
    base = names("DeleteAcls", 1)[0]
    topic1, topic2 = f"{base}_1", f"{base}_2"
    read = (AclOperation.READ, AclPermissionType.ALLOW)
    write = (AclOperation.WRITE, AclPermissionType.ALLOW)
    created = admin.create_acls(
        [
            AclBinding(ResourceType.TOPIC, topic1, ResourcePatternType.PREFIXED, "User:test1", "*", *read),
            AclBinding(ResourceType.TOPIC, topic1, ResourcePatternType.LITERAL, "User:test2", "*", *write),
            AclBinding(ResourceType.TOPIC, topic2, ResourcePatternType.LITERAL, "User:test2", "*", *write),
        ]
    )
    assert [outcome(f)[0] for f in created.values()] == ["OK"] * 3

    def described(name: str, pattern: ResourcePatternType) -> list[tuple[str, str, str, str, str, str]]:
        found = admin.describe_acls(acl_filter(name, pattern))
        return bindings(found.result(timeout=TIMEOUT_S))

    prefixed = (topic1, "PREFIXED", "User:test1", "*", "READ", "ALLOW")
    literal1 = (topic1, "LITERAL", "User:test2", "*", "WRITE", "ALLOW")
    assert described(topic1, ResourcePatternType.MATCH) == sorted([prefixed, literal1])
    assert described(topic1, ResourcePatternType.LITERAL) == [literal1]
    deleted = admin.delete_acls(
        [acl_filter(topic1, ResourcePatternType.MATCH)],
        request_timeout=10,
    )
    [matching] = [f.result(timeout=TIMEOUT_S) for f in deleted.values()]
    assert bindings(matching) == sorted([prefixed, literal1])
    assert described(topic1, ResourcePatternType.MATCH) == []
    deleted = admin.delete_acls([acl_filter(topic2, ResourcePatternType.LITERAL)])
    [matching] = [f.result(timeout=TIMEOUT_S) for f in deleted.values()]
    assert bindings(matching) == [(topic2, "LITERAL", "User:test2", "*", "WRITE", "ALLOW")]


# -- configs ------------------------------------------------------------------------------------


def config_errors(futures: dict[ConfigResource, Any]) -> list[tuple[str, str, str]]:
    """Each resource's (type, name, error), in request order."""
    return [(r.restype.name, r.name, outcome(f)[0]) for r, f in futures.items()]


def test_alter_configs(admin: AdminClient) -> None:
    """do_test_AlterConfigs: a topic's compression.type and flush.ms, the broker's
    sasl.kerberos.min.time.before.relogin (a Kafka dynamic key kipling has no use for: stored, as
    Kafka stores it), and a topic that does not exist (UNKNOWN_TOPIC_OR_PARTITION, Kafka 2.7+)."""
    topics = names("AlterConfigs", 3)
    create_topics(admin, topics[:1], 1)
    resources = [
        ConfigResource(
            ResourceType.TOPIC, topics[0], set_config={"compression.type": "gzip", "flush.ms": "12345678"}
        ),
        ConfigResource(
            ResourceType.BROKER, str(NODE_ID), set_config={"sasl.kerberos.min.time.before.relogin": "58000"}
        ),
        ConfigResource(
            ResourceType.TOPIC,
            topics[2],
            set_config={"compression.type": "lz4", "max.compaction.lag.ms": "3600000"},
        ),
    ]
    with pytest.warns(DeprecationWarning):
        futures = admin.alter_configs(resources, request_timeout=10)
    assert config_errors(futures) == [
        ("TOPIC", topics[0], "OK"),
        ("BROKER", str(NODE_ID), "OK"),
        ("TOPIC", topics[2], "UNKNOWN_TOPIC_OR_PART"),
    ]
    [entries] = [
        f.result() for f in admin.describe_configs([ConfigResource(ResourceType.TOPIC, topics[0])]).values()
    ]
    assert (entries["compression.type"].value, entries["flush.ms"].value) == ("gzip", "12345678")


def incremental(restype: ResourceType, name: str, *ops: tuple[str, str, str]) -> ConfigResource:
    entries = [ConfigEntry(key, value, incremental_operation=AlterConfigOpType[op]) for key, op, value in ops]
    return ConfigResource(restype, name, incremental_configs=entries)


def test_incremental_alter_configs(admin: AdminClient) -> None:
    """do_test_IncrementalAlterConfigs, with its test-helper round first: SET/APPEND then
    DELETE/SUBTRACT on a topic and on the broker (background.threads, a Kafka key kipling stores
    without use, and log.cleanup.policy), and on a GROUP (SET then DELETE of
    consumer.session.timeout.ms, as 0081 expects at Kafka 4.0). Then a topic, the broker, a missing
    topic and a group at once."""
    topics = names("IncrementalAlterConfigs", 4)
    create_topics(admin, topics[:1], 1)
    broker_id = str(NODE_ID)
    helper_rounds = [
        (
            incremental(
                ResourceType.TOPIC,
                topics[0],
                ("compression.type", "SET", "lz4"),
                ("cleanup.policy", "APPEND", "compact"),
            ),
            "OK",
        ),
        (
            incremental(
                ResourceType.TOPIC,
                topics[0],
                ("compression.type", "DELETE", "lz4"),
                ("cleanup.policy", "SUBTRACT", "compact"),
            ),
            "OK",
        ),
        (
            incremental(
                ResourceType.BROKER,
                broker_id,
                ("background.threads", "SET", "9"),
                ("log.cleanup.policy", "APPEND", "compact"),
            ),
            "OK",
        ),
        (
            incremental(
                ResourceType.BROKER,
                broker_id,
                ("background.threads", "DELETE", ""),
                ("log.cleanup.policy", "SUBTRACT", "compact"),
            ),
            "OK",
        ),
        (
            incremental(ResourceType.GROUP, topics[0], ("consumer.session.timeout.ms", "SET", "50000")),
            "OK",
        ),
        (
            incremental(ResourceType.GROUP, topics[0], ("consumer.session.timeout.ms", "DELETE", "")),
            "OK",
        ),
    ]
    for resource, expected in helper_rounds:
        [(_, _, code)] = config_errors(admin.incremental_alter_configs([resource]))
        assert code == expected, resource
    [entries] = [
        f.result() for f in admin.describe_configs([ConfigResource(ResourceType.TOPIC, topics[0])]).values()
    ]
    assert entries["cleanup.policy"].value == "delete"  # appended, then subtracted
    futures = admin.incremental_alter_configs(
        [
            incremental(
                ResourceType.TOPIC,
                topics[0],
                ("compression.type", "SET", "gzip"),
                ("flush.ms", "SET", "12345678"),
            ),
            incremental(
                ResourceType.BROKER, broker_id, ("sasl.kerberos.min.time.before.relogin", "SET", "58000")
            ),
            incremental(
                ResourceType.TOPIC,
                topics[2],
                ("compression.type", "SET", "lz4"),
                ("max.compaction.lag.ms", "SET", "3600000"),
            ),
            incremental(ResourceType.GROUP, "my-group", ("consumer.session.timeout.ms", "SET", "50000")),
        ],
        request_timeout=10,
    )
    assert config_errors(futures) == [
        ("TOPIC", topics[0], "OK"),
        ("BROKER", broker_id, "OK"),
        ("TOPIC", topics[2], "UNKNOWN_TOPIC_OR_PART"),
        ("GROUP", "my-group", "OK"),
    ]


def test_describe_configs(admin: AdminClient) -> None:
    """do_test_DescribeConfigs and do_test_DescribeConfigs_groups: a topic and the broker with
    every key, a missing topic UNKNOWN_TOPIC_OR_PARTITION, a group that does not exist without
    error (Kafka 4.0: its group configs' defaults)."""
    [existing] = names("DescribeConfigs_exist", 1)
    [missing] = names("DescribeConfigs_notexist", 1)
    create_topics(admin, [existing], 1)
    futures = admin.describe_configs(
        [
            ConfigResource(ResourceType.TOPIC, existing),
            ConfigResource(ResourceType.BROKER, str(NODE_ID)),
            ConfigResource(ResourceType.TOPIC, missing),
        ],
        request_timeout=10,
    )
    assert config_errors(futures) == [
        ("TOPIC", existing, "OK"),
        ("BROKER", str(NODE_ID), "OK"),
        ("TOPIC", missing, "UNKNOWN_TOPIC_OR_PART"),
    ]
    topic_entries, broker_entries = (f.result() for f in list(futures.values())[:2])
    assert "compression.type" in topic_entries and "log.retention.ms" in broker_entries
    [group] = names("DescribeConfigs_groups", 1)
    assert config_errors(admin.describe_configs([ConfigResource(ResourceType.GROUP, group)])) == [
        ("GROUP", group, "OK")
    ]


# -- DeleteRecords ------------------------------------------------------------------------------


@pytest.mark.parametrize("operation_timeout", [0, 1.5])
def test_delete_records(admin: AdminClient, broker: BrokerProcess, operation_timeout: float) -> None:
    """do_test_DeleteRecords: 100 messages in each partition of three 3-partition topics; all of
    topic 0 and partition 0 of topic 1 deleted to the end, half of topic 1 partition 2; an offset
    left unset (-1001) and one past the end are OFFSET_OUT_OF_RANGE. Then the watermarks."""
    topics = names(f"DeleteRecords_{int(operation_timeout * 10)}", 3)
    create_topics(admin, topics, 3)
    wait_metadata(admin, dict.fromkeys(topics, 3))
    for topic in topics:
        for partition in range(3):
            produce(broker, topic, partition, 100)
    wanted = [TopicPartition(topics[0], p, OFFSET_END) for p in range(3)] + [
        TopicPartition(topics[1], 0, OFFSET_END),
        TopicPartition(topics[1], 2, 50),
        TopicPartition(topics[2], 0),
        TopicPartition(topics[2], 1, 101),
    ]
    assert wanted[5].offset == OFFSET_INVALID
    options = {"operation_timeout": operation_timeout} if operation_timeout else {}
    futures = admin.delete_records(wanted, **options)
    results = {(tp.topic, tp.partition): outcome(f) for tp, f in futures.items()}
    expected_low: dict[tuple[str, int], int] = {}
    for tp in wanted:
        code, result = results[(tp.topic, tp.partition)]
        if tp.offset == OFFSET_END or 0 <= tp.offset <= 100:
            assert code == "OK", tp
            low = 100 if tp.offset == OFFSET_END else tp.offset
            assert result.low_watermark == low
            expected_low[(tp.topic, tp.partition)] = low
        else:
            assert code == "OFFSET_OUT_OF_RANGE", tp
    reader = consumer(broker, names("watermarks", 1)[0])
    try:
        for topic in topics:
            for partition in range(3):
                low = expected_low.get((topic, partition), 0)
                watermarks = reader.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
                assert watermarks == (low, 100), (topic, partition)
    finally:
        reader.close()


# -- groups -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def group_topic(admin: AdminClient, broker: BrokerProcess) -> str:
    """One partition of 100 messages that the group sub-tests consume."""
    [topic] = names("groups", 1)
    create_topics(admin, [topic], 1)
    produce(broker, topic, 0, 100)
    return topic


def consumed_group(broker: BrokerProcess, topic: str, group: str) -> None:
    """A group that consumed ``topic`` and left (Empty, with committed offsets)."""
    member = consumer(broker, group)
    try:
        consume(member, topic, 100)
    finally:
        member.close()


def test_delete_groups(admin: AdminClient, broker: BrokerProcess, group_topic: str) -> None:
    """do_test_DeleteGroups: three groups that consumed and left are deleted, a fourth never
    existed (GROUP_ID_NOT_FOUND); results in request order."""
    groups = names("DeleteGroups", 4)
    for group in groups[:3]:
        consumed_group(broker, group_topic, group)
    futures = admin.delete_consumer_groups(groups, request_timeout=1.5)
    assert list(futures) == groups
    assert [outcome(f)[0] for f in futures.values()] == ["OK"] * 3 + ["GROUP_ID_NOT_FOUND"]


def test_list_consumer_groups(admin: AdminClient, broker: BrokerProcess, group_topic: str) -> None:
    """do_test_ListConsumerGroups: four groups that consumed and left, listed Empty and CLASSIC,
    normal (not simple) groups; filtered by state Empty, by type CLASSIC, both, and by type CONSUMER
    (none)."""
    groups = names("ListConsumerGroups", 4)
    for group in groups:
        consumed_group(broker, group_topic, group)

    def listed(**filters: Any) -> list[Any]:
        result = admin.list_consumer_groups(request_timeout=1.5, **filters).result(timeout=TIMEOUT_S)
        assert result.errors == []
        return [g for g in result.valid if g.group_id in groups]

    for filters in (
        {},
        {"states": {ConsumerGroupState.EMPTY}},
        {"types": {ConsumerGroupType.CLASSIC}},
        {"states": {ConsumerGroupState.EMPTY}, "types": {ConsumerGroupType.CLASSIC}},
    ):
        found = listed(**filters)
        assert sorted(g.group_id for g in found) == groups, filters
        assert all(not g.is_simple_consumer_group for g in found)
        assert {(g.state, g.type) for g in found} == {(ConsumerGroupState.EMPTY, ConsumerGroupType.CLASSIC)}
    assert listed(types={ConsumerGroupType.CONSUMER}) == []
    deleted = admin.delete_consumer_groups(groups)
    assert [outcome(f)[0] for f in deleted.values()] == ["OK"] * 4


def test_describe_consumer_groups(admin: AdminClient, broker: BrokerProcess, group_topic: str) -> None:
    """do_test_DescribeConsumerGroups: three groups, each with one static member (client.id,
    group.instance.id) still subscribed, are Stable, normal groups of one member with an
    assignment; a fourth, never joined, is Dead without an error. No authorized operations unless
    asked for; asked for, a super user's are every group operation."""
    groups = names("DescribeConsumerGroups", 4)
    members = []
    try:
        for i, group in enumerate(groups[:3]):
            member = consumer(
                broker,
                group,
                **{
                    "client.id": f"client_id_{i}",
                    "group.instance.id": f"group_instance_id_{i}",
                    "session.timeout.ms": "6000",
                },
            )
            members.append(member)
            consume(member, group_topic, 100)
        futures = admin.describe_consumer_groups(groups, request_timeout=1.5)
        assert list(futures) == groups
        for i, future in enumerate(futures.values()):
            code, description = outcome(future)
            assert code == "OK"
            assert description.group_id == groups[i]
            assert description.authorized_operations is None
            if i == 3:
                assert description.state == ConsumerGroupState.DEAD
                continue
            assert description.state == ConsumerGroupState.STABLE
            assert not description.is_simple_consumer_group
            [member] = description.members
            assert (member.client_id, member.group_instance_id) == (
                f"client_id_{i}",
                f"group_instance_id_{i}",
            )
            assert [(tp.topic, tp.partition) for tp in member.assignment.topic_partitions] == [
                (group_topic, 0)
            ]
        with_ops = admin.describe_consumer_groups(groups[:1], include_authorized_operations=True)
        [(_, description)] = [outcome(f) for f in with_ops.values()]
        assert set(description.authorized_operations) >= {
            AclOperation.READ,
            AclOperation.DESCRIBE,
            AclOperation.DELETE,
        }
    finally:
        for member in members:
            member.close()
    # static members leave on close only after the session timeout: 0081 waits it out
    deadline = time.monotonic() + TIMEOUT_S
    while True:
        futures = admin.delete_consumer_groups(groups[:3])
        codes = [outcome(f)[0] for f in futures.values()]
        if codes == ["OK"] * 3:
            break
        assert time.monotonic() < deadline, codes
        time.sleep(1)


def test_describe_topics(admin: AdminClient) -> None:
    """do_test_DescribeTopics: an empty collection answers nothing; of three topics the one created
    is described (its id, its one partition 0), the others UNKNOWN_TOPIC_OR_PARTITION. Authorized
    operations only when asked for: then every topic operation."""
    topics = names("DescribeTopics", 3)
    create_topics(admin, topics[:1], 1)
    for with_ops in (False, True):
        empty = admin.describe_topics(TopicCollection([]), include_authorized_operations=with_ops)
        assert empty == {}
        futures = admin.describe_topics(
            TopicCollection(topics), request_timeout=15, include_authorized_operations=with_ops
        )
        results = [outcome(futures[t]) for t in topics]
        assert [code for code, _ in results] == ["OK", "UNKNOWN_TOPIC_OR_PART", "UNKNOWN_TOPIC_OR_PART"]
        description = results[0][1]
        assert description.name == topics[0] and description.topic_id is not None
        assert [p.id for p in description.partitions] == [0]
        if with_ops:
            assert set(description.authorized_operations) == {
                AclOperation.ALTER,
                AclOperation.ALTER_CONFIGS,
                AclOperation.CREATE,
                AclOperation.DELETE,
                AclOperation.DESCRIBE,
                AclOperation.DESCRIBE_CONFIGS,
                AclOperation.READ,
                AclOperation.WRITE,
            }
        else:
            assert description.authorized_operations is None
    deleted = admin.delete_topics(topics[:1])
    assert [outcome(f)[0] for f in deleted.values()] == ["OK"]


def test_describe_cluster(admin: AdminClient, broker: BrokerProcess) -> None:
    """do_test_DescribeCluster: a cluster id, a node with a host and port; authorized operations
    only when asked for: then every cluster operation."""
    for with_ops in (False, True):
        cluster = admin.describe_cluster(request_timeout=1.5, include_authorized_operations=with_ops).result(
            timeout=TIMEOUT_S
        )
        assert cluster.cluster_id
        assert [(n.id, n.host, n.port) for n in cluster.nodes] == [(NODE_ID, "127.0.0.1", broker.port)]
        if with_ops:
            assert set(cluster.authorized_operations) == {
                AclOperation.ALTER,
                AclOperation.ALTER_CONFIGS,
                AclOperation.CLUSTER_ACTION,
                AclOperation.CREATE,
                AclOperation.DESCRIBE,
                AclOperation.DESCRIBE_CONFIGS,
                AclOperation.IDEMPOTENT_WRITE,
            }
        else:
            assert cluster.authorized_operations is None


# -- committed offsets --------------------------------------------------------------------------


def committed_by(
    admin: AdminClient,
    broker: BrokerProcess,
    prefix: str,
    subscribed: bool,
    wanted: Callable[[list[str]], list[TopicPartition]],
) -> tuple[list[str], Consumer, list[TopicPartition]]:
    """0081's set-up of the offset sub-tests: three 3-partition topics, a consumer of the group
    named after the first (subscribed to all three and assigned, or not), the offsets ``wanted``
    committed by it and read back."""
    topics = names(prefix, 3)
    create_topics(admin, topics, 3)
    wait_metadata(admin, dict.fromkeys(topics, 3))
    member = consumer(broker, topics[0])
    if subscribed:
        wait_assignment(member, topics)
    committed = wanted(topics)
    member.commit(offsets=committed, asynchronous=False)
    assert offsets(member.committed(committed, timeout=10)) == offsets(committed)
    return topics, member, committed


@pytest.mark.parametrize("subscribed", [False, True])
def test_delete_consumer_group_offsets(admin: AdminClient, broker: BrokerProcess, subscribed: bool) -> None:
    """do_test_DeleteConsumerGroupOffsets (through kafka-python: confluent-kafka has no such call):
    the second half of six committed offsets is deleted, or, with the group subscribed to the
    topics, each answers GROUP_SUBSCRIBED_TO_TOPIC and nothing changes."""
    topics, member, committed = committed_by(
        admin,
        broker,
        "DCGO",
        subscribed,
        lambda topics: [TopicPartition(topics[i // 2], i % 3, (i + 1) * 10) for i in range(6)],
    )
    try:
        to_delete = [KpTopicPartition(tp.topic, tp.partition) for tp in committed[3:]]
        client = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10_000)
        try:
            result = client.delete_group_offsets(topics[0], to_delete)
        finally:
            client.close()
        expected_error = GroupSubscribedToTopicError if subscribed else NoError
        assert result == dict.fromkeys(to_delete, expected_error)
        left = member.committed(committed, timeout=10)
        expected = offsets(committed)
        if not subscribed:
            expected = offsets(
                committed[:3] + [TopicPartition(tp.topic, tp.partition) for tp in committed[3:]]
            )
        assert offsets(left) == expected
    finally:
        member.close()


@pytest.mark.parametrize(
    ("subscribed", "create"),
    [(False, True), (False, False), (True, True)],
    ids=["empty", "no-topics", "subscribed"],
)
def test_alter_consumer_group_offsets(
    admin: AdminClient, broker: BrokerProcess, subscribed: bool, create: bool
) -> None:
    """do_test_AlterConsumerGroupOffsets: nine offsets committed with leader epoch 1, the second
    half altered to offset 5, epoch 2. Topics that do not exist: UNKNOWN_TOPIC_OR_PARTITION; a
    group with a subscribed member: UNKNOWN_MEMBER_ID and nothing changes (Kafka refuses a commit
    without a generation then)."""

    def nine(topics: list[str]) -> list[TopicPartition]:
        return [TopicPartition(topics[i // 3], i % 3, (i + 1) * 10, leader_epoch=1) for i in range(9)]

    member = None
    if create:
        topics, member, committed = committed_by(admin, broker, "ACGO", subscribed, nine)
    else:
        topics = names("ACGO", 3)
        committed = nine(topics)
    try:
        to_alter = [TopicPartition(tp.topic, tp.partition, 5, leader_epoch=2) for tp in committed[4:]]
        futures = admin.alter_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(topics[0], to_alter)], request_timeout=1.5
        )
        [(code, result)] = [outcome(f) for f in futures.values()]
        assert code == "OK"
        assert offsets(result.topic_partitions) == offsets(to_alter)
        expected_error = (
            "UNKNOWN_TOPIC_OR_PART" if not create else "UNKNOWN_MEMBER_ID" if subscribed else None
        )
        assert errors(result.topic_partitions) == {expected_error}
        if member is not None:
            left = member.committed(committed, timeout=10)
            assert offsets(left) == offsets(committed if subscribed else committed[:4] + to_alter)
    finally:
        if member is not None:
            member.close()


@pytest.mark.parametrize("subscribed", [False, True])
@pytest.mark.parametrize("all_partitions", [False, True])
def test_list_consumer_group_offsets(
    admin: AdminClient, broker: BrokerProcess, subscribed: bool, all_partitions: bool
) -> None:
    """do_test_ListConsumerGroupOffsets: six offsets committed with leader epoch 2 are listed with
    their epochs, named or all of the group's (null partitions), without errors."""
    topics, member, committed = committed_by(
        admin,
        broker,
        "LCGO",
        subscribed,
        lambda t: [TopicPartition(t[i // 2], i % 3, (i + 1) * 10, leader_epoch=2) for i in range(6)],
    )
    try:
        asked = None if all_partitions else [TopicPartition(tp.topic, tp.partition) for tp in committed]
        futures = admin.list_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(topics[0], asked)], request_timeout=1.5
        )
        [(code, result)] = [outcome(f) for f in futures.values()]
        assert code == "OK"
        assert offsets(result.topic_partitions) == offsets(committed)
        assert errors(result.topic_partitions) == {None}
    finally:
        member.close()


# -- SCRAM credentials, ListOffsets, ElectLeaders ------------------------------------------------


@pytest.mark.parametrize("null_bytes", [False, True])
def test_user_scram_credentials(admin: AdminClient, null_bytes: bool) -> None:
    """do_test_UserScramCredentials: an unknown user is RESOURCE_NOT_FOUND with no credentials; an
    upserted SCRAM-SHA-256 credential of 10,000 iterations is described; once deleted the user is
    RESOURCE_NOT_FOUND again. Salt and password may hold NUL bytes."""
    [user] = names("testuserforscram", 1)
    password, salt = (b"\0as\0word", b"s\0l\0") if null_bytes else (b"password", b"salt")

    def described() -> tuple[str, Any]:
        futures = admin.describe_user_scram_credentials([user], request_timeout=30)
        assert isinstance(futures, dict)
        [(name, future)] = futures.items()
        assert name == user
        return outcome(future)

    assert described()[0] == "RESOURCE_NOT_FOUND"
    upsert = UserScramCredentialUpsertion(
        user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 10000), password, salt
    )
    assert {u: outcome(f)[0] for u, f in admin.alter_user_scram_credentials([upsert]).items()} == {user: "OK"}
    code, description = described()
    assert code == "OK"
    assert [(c.mechanism, c.iterations) for c in description.scram_credential_infos] == [
        (ScramMechanism.SCRAM_SHA_256, 10000)
    ]
    deletion = UserScramCredentialDeletion(user, ScramMechanism.SCRAM_SHA_256)
    assert {u: outcome(f)[0] for u, f in admin.alter_user_scram_credentials([deletion]).items()} == {
        user: "OK"
    }
    assert described()[0] == "RESOURCE_NOT_FOUND"


def test_list_offsets(admin: AdminClient, broker: BrokerProcess) -> None:
    """do_test_ListOffsets: three records with timestamps base+100, base+400, base+250 (1970, in one
    batch), read_committed: earliest 0, latest 3, max timestamp 1 (the record's offset, KAFKA-16310),
    and by timestamp base+50 → 0, base+300 → 1, base+150 → 1. An empty request answers nothing."""
    [topic] = names("ListOffsets", 1)
    create_topics(admin, [topic], 1)
    base = 10_000_000
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 100})
    for timestamp in (base + 100, base + 400, base + 250):
        producer.produce(topic, b"Message", timestamp=timestamp)
    assert producer.flush(TIMEOUT_S) == 0
    read_committed = IsolationLevel.READ_COMMITTED
    assert admin.list_offsets({}, isolation_level=read_committed, request_timeout=30) == {}
    for spec, expected in (
        (OffsetSpec.earliest(), 0),  # type: ignore[no-untyped-call]
        (OffsetSpec.latest(), 3),  # type: ignore[no-untyped-call]
        (OffsetSpec.max_timestamp(), 1),  # type: ignore[no-untyped-call]
        (OffsetSpec.for_timestamp(base + 50), 0),
        (OffsetSpec.for_timestamp(base + 300), 1),
        (OffsetSpec.for_timestamp(base + 150), 1),
    ):
        futures = admin.list_offsets(
            {TopicPartition(topic, 0): spec}, isolation_level=read_committed, request_timeout=30
        )
        [(code, info)] = [outcome(f) for f in futures.values()]
        assert (code, info.offset) == ("OK", expected), spec
    deleted = admin.delete_topics([topic])
    assert [outcome(f)[0] for f in deleted.values()] == ["OK"]


def test_elect_leaders_on_one_node(admin: AdminClient) -> None:
    """Not in 0081 (its cluster tests elect), but the same handle's call: a partition led by its
    only replica needs no election, preferred or unclean (ELECTION_NOT_NEEDED); a partition that
    does not exist is UNKNOWN_TOPIC_OR_PARTITION; all partitions at once answers none, as Kafka
    leaves out the partitions that needed nothing. confluent-kafka 2.16's binding fails on a
    ``request_timeout`` keyword here (SystemError), so the defaults are used."""
    [topic] = names("ElectLeaders", 1)
    create_topics(admin, [topic], 2)
    wait_metadata(admin, {topic: 2})
    for election in (ElectionType.PREFERRED, ElectionType.UNCLEAN):
        wanted = [TopicPartition(topic, 0), TopicPartition(topic, 5), TopicPartition(f"{topic}-missing", 0)]
        result = admin.elect_leaders(election, wanted).result(timeout=TIMEOUT_S)
        assert {(tp.topic, tp.partition): error.name() for tp, error in result.items()} == {
            (topic, 0): "ELECTION_NOT_NEEDED",
            (topic, 5): "UNKNOWN_TOPIC_OR_PART",
            (f"{topic}-missing", 0): "UNKNOWN_TOPIC_OR_PART",
        }
    assert admin.elect_leaders(ElectionType.PREFERRED, None).result(timeout=TIMEOUT_S) == {}
