"""MetadataImage: replay of every record type, the delta of each batch, replay errors, idempotence."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Sequence

import pytest

from metadata.image import (
    NO_EPOCH,
    NO_OFFSET,
    BrokerRegistration,
    MetadataDelta,
    MetadataImage,
    MetadataReplayError,
)
from metadata.records import (
    RECORD_CLASSES,
    BrokerEndpointRecord,
    ConfigRecord,
    ConfigResourceType,
    FenceBrokerRecord,
    MetadataRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    RemoveTopicRecord,
    TopicRecord,
    UnfenceBrokerRecord,
    UnregisterBrokerRecord,
)
from metadata.topics import NO_LEADER, PartitionState
from protocol.sentinels import ZERO_UUID

EPOCH = 3
T1 = uuid.UUID(int=1)
T2 = uuid.UUID(int=2)
ENDPOINTS = (BrokerEndpointRecord("PLAINTEXT", "host", 9092, 0),)


def register(broker_id: int, epoch: int, *, fenced: bool = True, generation: int = 1) -> RegisterBrokerRecord:
    return RegisterBrokerRecord(
        broker_id, uuid.UUID(int=broker_id * 100 + generation), epoch, ENDPOINTS, None, fenced
    )


def partition(
    index: int = 0,
    topic_id: uuid.UUID = T1,
    replicas: Sequence[int] = (1, 2),
    isr: Sequence[int] | None = None,
    leader: int = 1,
    leader_epoch: int = 0,
    partition_epoch: int = 0,
) -> PartitionRecord:
    isr = replicas if isr is None else isr
    return PartitionRecord(
        index, topic_id, tuple(replicas), tuple(isr), leader, leader_epoch, partition_epoch
    )


def change(
    index: int = 0,
    topic_id: uuid.UUID = T1,
    replicas: Sequence[int] = (1, 2),
    isr: Sequence[int] = (1, 2),
    leader: int = 1,
    leader_epoch: int = 0,
    partition_epoch: int = 1,
) -> PartitionChangeRecord:
    return PartitionChangeRecord(
        index, topic_id, tuple(replicas), tuple(isr), leader, leader_epoch, partition_epoch
    )


def topic_config(topic: str, name: str, value: str | None) -> ConfigRecord:
    return ConfigRecord(ConfigResourceType.TOPIC, topic, name, value)


class Feeder:
    """Feeds batches at consecutive offsets, as the log would deliver them."""

    def __init__(self, image: MetadataImage | None = None) -> None:
        self.image = image or MetadataImage()
        self.next_offset = self.image.offset + 1

    def batch(self, *records: MetadataRecord, epoch: int = EPOCH) -> MetadataDelta:
        pairs = [(self.next_offset + i, record) for i, record in enumerate(records)]
        self.next_offset += len(records)
        return self.image.apply_batch(pairs, epoch)


@pytest.fixture
def feed() -> Feeder:
    return Feeder()


@pytest.fixture
def with_topic(feed: Feeder) -> Feeder:
    """Brokers 1 and 2 unfenced, topic "orders" (T1) with partitions 0 and 1 on both."""
    feed.batch(register(1, 0), register(2, 1))
    feed.batch(UnfenceBrokerRecord(1, 0), UnfenceBrokerRecord(2, 1))
    feed.batch(TopicRecord("orders", T1), partition(0), partition(1, leader=2, replicas=(2, 1)))
    return feed


# -- records ---------------------------------------------------------------------------------------


def test_record_type_ids_are_kafkas() -> None:
    assert {k: v.__name__ for k, v in RECORD_CLASSES.items()} == {
        0: "RegisterBrokerRecord",
        1: "UnregisterBrokerRecord",
        2: "TopicRecord",
        3: "PartitionRecord",
        4: "ConfigRecord",
        5: "PartitionChangeRecord",
        7: "FenceBrokerRecord",
        8: "UnfenceBrokerRecord",
        9: "RemoveTopicRecord",
        11: "UserScramCredentialRecord",
        14: "ClientQuotaRecord",
        15: "ProducerIdsRecord",
        18: "AccessControlEntryRecord",
        19: "RemoveAccessControlEntryRecord",
        22: "RemoveUserScramCredentialRecord",
    }
    assert all(type_id == cls.RECORD_TYPE for type_id, cls in RECORD_CLASSES.items())


def test_records_are_frozen_and_slotted() -> None:
    record = TopicRecord("t", T1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        record.name = "u"  # type: ignore[misc]
    assert not hasattr(record, "__dict__")
    assert [f.name for f in dataclasses.fields(PartitionChangeRecord)] == [
        "partition_id",
        "topic_id",
        "replicas",
        "isr",
        "leader",
        "leader_epoch",
        "partition_epoch",
        "removing_replicas",
        "adding_replicas",
    ]


# -- brokers ---------------------------------------------------------------------------------------


def test_a_new_image_is_empty() -> None:
    image = MetadataImage()
    assert (image.offset, image.epoch) == (NO_OFFSET, NO_EPOCH)
    assert image.all() == [] and image.brokers() == [] and image.broker_ids() == []
    assert image.next_producer_id == 0


def test_registration_is_fenced_until_unfenced(feed: Feeder) -> None:
    delta = feed.batch(register(1, 0), register(2, 1))
    assert [b.broker_id for b in delta.brokers_registered] == [1, 2]
    assert delta.brokers_unfenced == () and delta.brokers_fenced == ()
    assert feed.image.broker(1) == BrokerRegistration(1, uuid.UUID(int=101), 0, ENDPOINTS, None, fenced=True)
    assert feed.image.broker_ids() == [1, 2]
    assert feed.image.live_broker_ids() == []
    assert feed.image.registration_offset(2) == 1

    delta = feed.batch(UnfenceBrokerRecord(2, 1))
    assert delta.brokers_unfenced == (2,)
    assert feed.image.live_broker_ids() == [2]

    delta = feed.batch(FenceBrokerRecord(2, 1))
    assert delta.brokers_fenced == (2,)
    assert feed.image.live_broker_ids() == []


def test_an_unfenced_registration_is_usable_at_once(feed: Feeder) -> None:
    delta = feed.batch(register(4, 0, fenced=False))
    assert delta.brokers_unfenced == (4,)
    assert feed.image.live_broker_ids() == [4]


def test_unregistration_removes_the_broker(feed: Feeder) -> None:
    feed.batch(register(1, 0))
    delta = feed.batch(UnregisterBrokerRecord(1, 0))
    assert [b.broker_id for b in delta.brokers_unregistered] == [1]
    assert feed.image.broker(1) is None
    assert feed.image.registration_offset(1) is None


def test_a_new_incarnation_replaces_an_unfenced_one(feed: Feeder) -> None:
    feed.batch(register(1, 0), UnfenceBrokerRecord(1, 0))
    delta = feed.batch(register(1, 5, generation=2))
    assert [b.broker_epoch for b in delta.brokers_registered] == [5]
    assert delta.brokers_fenced == (1,)
    registration = feed.image.broker(1)
    assert registration is not None and registration.incarnation_id == uuid.UUID(int=102)
    assert feed.image.registration_offset(1) == 2


def test_broker_configs_are_kept_apart_from_topics(feed: Feeder) -> None:
    delta = feed.batch(ConfigRecord(ConfigResourceType.BROKER, "1", "log.retention.ms", "5"))
    assert delta.broker_configs_changed == ("1",)
    assert feed.image.broker_configs("1") == {"log.retention.ms": "5"}
    feed.batch(ConfigRecord(ConfigResourceType.BROKER, "1", "log.retention.ms", None))
    assert feed.image.broker_configs("1") == {}


# -- topics and partitions -------------------------------------------------------------------------


def test_a_created_topic_is_reported_once_with_its_partitions_and_configs(feed: Feeder) -> None:
    feed.batch(register(1, 0), register(2, 1))
    delta = feed.batch(
        TopicRecord("orders", T1),
        topic_config("orders", "retention.ms", "1000"),
        partition(0),
        partition(1, leader=2, replicas=(2, 1)),
    )
    [topic] = delta.topics_created
    assert topic is feed.image.get("orders") is feed.image.get_by_id(T1)
    assert topic.configs == {"retention.ms": "1000"}
    assert topic.partitions[0] == PartitionState(0, 1, 0, 0, [1, 2], [1, 2])
    assert topic.partitions[1] == PartitionState(1, 2, 0, 0, [2, 1], [2, 1])
    assert delta.partitions_created == () and delta.partitions_changed == ()
    assert delta.topic_configs_changed == ()


def test_all_lists_topics_by_name(feed: Feeder) -> None:
    feed.batch(TopicRecord("b", T1), TopicRecord("a", T2))
    assert [t.name for t in feed.image.all()] == ["a", "b"]


def test_new_partitions_of_an_existing_topic(with_topic: Feeder) -> None:
    delta = with_topic.batch(partition(3), partition(2))
    [added] = delta.partitions_created
    assert added.topic.name == "orders"
    assert [p.partition for p in added.partitions] == [2, 3]
    assert sorted(with_topic.image.get("orders").partitions) == [0, 1, 2, 3]  # type: ignore[union-attr]


def test_partition_change_reports_old_and_new_and_keeps_the_old_object(with_topic: Feeder) -> None:
    before = with_topic.image.partition(T1, 0)
    delta = with_topic.batch(change(isr=(2,), leader=2, leader_epoch=1))
    [changed] = delta.partitions_changed
    assert changed.topic_name == "orders" and changed.topic_id == T1
    assert changed.old is before and changed.old == PartitionState(0, 1, 0, 0, [1, 2], [1, 2])
    assert changed.new == PartitionState(0, 2, 1, 1, [1, 2], [2])
    assert with_topic.image.partition(T1, 0) == changed.new


def test_changes_that_cancel_out_are_not_reported(with_topic: Feeder) -> None:
    delta = with_topic.batch(
        change(isr=(1,), leader=1, partition_epoch=1), change(isr=(1, 2), leader=1, partition_epoch=2)
    )
    [changed] = delta.partitions_changed
    assert changed.old.isr == changed.new.isr == [1, 2]
    assert changed.new.partition_epoch == 2


def test_topic_config_set_and_delete(with_topic: Feeder) -> None:
    delta = with_topic.batch(topic_config("orders", "retention.ms", "5"))
    assert delta.topic_configs_changed == ("orders",)
    assert with_topic.image.get("orders").configs == {"retention.ms": "5"}  # type: ignore[union-attr]
    delta = with_topic.batch(topic_config("orders", "retention.ms", None))
    assert delta.topic_configs_changed == ("orders",)
    assert with_topic.image.get("orders").configs == {}  # type: ignore[union-attr]


def test_removed_topic_is_reported_in_its_last_state(with_topic: Feeder) -> None:
    with_topic.batch(topic_config("orders", "retention.ms", "5"))
    delta = with_topic.batch(change(isr=(1,)), RemoveTopicRecord(T1))
    [deleted] = delta.topics_deleted
    assert deleted.name == "orders" and deleted.configs == {"retention.ms": "5"}
    assert deleted.partitions[0].isr == [1]
    assert delta.partitions_changed == ()
    assert with_topic.image.get("orders") is None and with_topic.image.get_by_id(T1) is None
    assert with_topic.image.all() == []


def test_a_topic_created_and_removed_in_one_batch_leaves_no_trace(feed: Feeder) -> None:
    feed.batch(register(1, 0))
    delta = feed.batch(TopicRecord("t", T1), partition(0, replicas=(1,), leader=1), RemoveTopicRecord(T1))
    assert delta.is_empty
    assert feed.image.all() == []


def test_a_name_can_be_reused_by_a_new_topic_id(with_topic: Feeder) -> None:
    delta = with_topic.batch(RemoveTopicRecord(T1), TopicRecord("orders", T2), partition(0, topic_id=T2))
    assert [t.topic_id for t in delta.topics_deleted] == [T1]
    assert [t.topic_id for t in delta.topics_created] == [T2]


def test_producer_id_blocks(feed: Feeder) -> None:
    delta = feed.batch(ProducerIdsRecord(1, 0, 1000))
    assert delta.next_producer_id == 1000
    assert feed.image.next_producer_id == 1000
    assert feed.batch(ProducerIdsRecord(1, 0, 2000)).next_producer_id == 2000


def test_partition_without_a_leader_is_allowed(with_topic: Feeder) -> None:
    with_topic.batch(change(isr=(1,), leader=NO_LEADER, leader_epoch=1))
    assert with_topic.image.partition(T1, 0).leader_id == NO_LEADER  # type: ignore[union-attr]


# -- offsets, epochs, idempotence ------------------------------------------------------------------


def test_offset_and_epoch_follow_the_last_record(with_topic: Feeder) -> None:
    assert with_topic.image.offset == with_topic.next_offset - 1 == 6
    assert with_topic.image.epoch == EPOCH
    with_topic.batch(change(), epoch=EPOCH + 2)
    assert (with_topic.image.offset, with_topic.image.epoch) == (7, EPOCH + 2)


def test_replaying_records_again_changes_nothing(with_topic: Feeder) -> None:
    before_state = repr(with_topic.image), with_topic.image.all()
    again = Feeder()
    again.batch(register(1, 0), register(2, 1))
    again.batch(UnfenceBrokerRecord(1, 0), UnfenceBrokerRecord(2, 1))
    again.batch(TopicRecord("orders", T1), partition(0), partition(1, leader=2, replicas=(2, 1)))
    assert again.image == with_topic.image
    # the same three batches at the same offsets, fed a second time
    delta = with_topic.image.apply_batch([(4, TopicRecord("orders", T1)), (5, partition(0))], EPOCH)
    assert delta.is_empty
    assert not with_topic.image.apply(partition(1), 6, EPOCH)
    assert (repr(with_topic.image), with_topic.image.all()) == before_state
    assert with_topic.image == again.image


def test_images_differ_when_their_logs_differ(with_topic: Feeder) -> None:
    other = Feeder()
    other.batch(register(1, 0), register(2, 1))
    assert other.image != with_topic.image


def test_an_older_epoch_is_refused(with_topic: Feeder) -> None:
    with pytest.raises(MetadataReplayError, match="epoch 2 is older than the image's epoch 3"):
        with_topic.batch(change(), epoch=EPOCH - 1)


# -- replay errors ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("record", "reason"),
    [
        (partition(0, topic_id=T2), "unknown topic id"),
        (partition(0), "already exists"),
        (partition(5, replicas=()), "non-empty list of distinct"),
        (partition(5, replicas=(1, 1)), "non-empty list of distinct"),
        (partition(5, isr=(3,)), "must be a non-empty set of replicas"),
        (partition(5, isr=()), "must be a non-empty set of replicas"),
        (partition(5, isr=(2,), leader=1), "leader 1 is not in the ISR"),
        (partition(-1), "negative partition id"),
        (change(index=7), "unknown partition orders-7"),
        (change(topic_id=T2), "unknown topic id"),
        (change(partition_epoch=0), "partition epoch 0 does not advance past 0"),
        (change(leader=2, leader_epoch=0), "without a new leader epoch"),
        (TopicRecord("orders", T2), "already exists"),
        (TopicRecord("other", T1), "already used by 'orders'"),
        (TopicRecord("other", ZERO_UUID), "zero UUID"),
        (RemoveTopicRecord(T2), "unknown topic id"),
        (topic_config("missing", "retention.ms", "1"), "unknown topic 'missing'"),
        (ConfigRecord(99, "x", "a", "b"), "unsupported config resource type 99"),
        (FenceBrokerRecord(9, 0), "broker 9 is not registered"),
        (UnfenceBrokerRecord(1, 7), "registered at epoch 0, not 7"),
        (UnregisterBrokerRecord(2, 0), "registered at epoch 1, not 0"),
        (ProducerIdsRecord(1, 0, 0), "not above the current next producer id 0"),
    ],
)
def test_records_that_make_no_sense_are_refused(
    with_topic: Feeder, record: MetadataRecord, reason: str
) -> None:
    image = with_topic.image
    before = (
        image.offset,
        repr(image),
        [dataclasses.replace(p) for t in image.all() for p in t.sorted_partitions()],
    )
    with pytest.raises(MetadataReplayError) as info:
        with_topic.batch(record)
    assert reason in str(info.value)
    assert f"{type(record).__name__} at offset 7" in str(info.value)
    assert info.value.offset == 7 and info.value.record == record
    assert (image.offset, repr(image), [p for t in image.all() for p in t.sorted_partitions()]) == before


def test_leader_epoch_must_not_go_back(with_topic: Feeder) -> None:
    with_topic.batch(change(leader=2, isr=(2,), leader_epoch=4, partition_epoch=1))
    with pytest.raises(MetadataReplayError, match="leader epoch 3 is older than 4"):
        with_topic.batch(change(leader=2, isr=(2,), leader_epoch=3, partition_epoch=2))
