"""Kafka's rules for CreateTopics and CreatePartitions: validation, replica placement, new partitions.

These are pure functions of the request, the topic names in use and the brokers there are, used by
:class:`~metadata.controller.replication_control.ReplicationControl` to answer with the same checks,
in the same order, with the same error codes and messages as Kafka's controller
(ReplicationControlManager), so admin tools print what they print against Kafka.

Brokers come as a :class:`ClusterBrokers`: a manual assignment may name any *registered* broker,
automatic placement uses only *usable* ones (registered and unfenced), as KRaft does, and the initial
ISR holds only usable replicas so that a new partition never starts with a dead leader.

Placement is Kafka's rack-unaware scheme when no broker has a rack: the leaders of consecutive
partitions go round-robin over the usable brokers (sorted by id) from a start index, and each
partition's followers are the brokers after its leader. When brokers have racks (``broker.rack``) it
is Kafka's rack-aware scheme, which keeps a partition's replicas in different racks. Kafka picks the
start index at random; callers here pass it, so that placement is deterministic and a caller can
rotate it across topics (the controller starts where the cluster's partition count points). Unlike
KRaft's StripedReplicaPlacer, fenced brokers are never used, even as followers: fewer usable brokers
than the replication factor is INVALID_REPLICATION_FACTOR.

New partitions are described as :class:`NewPartition` values that the caller turns into records.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Collection, Container, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from metadata import topic_names
from protocol.error_codes import ErrorCode, KafkaError
from protocol.sentinels import ZERO_UUID
from server_common.config import ConfigError

MAX_PARTITIONS_PER_REQUEST = 10_000
"""Kafka's MAX_PARTITIONS_PER_BATCH: more partitions than this in one request is a POLICY_VIOLATION."""
USE_DEFAULT = -1
"""A CreateTopics partition count or replication factor of -1 means the broker's default."""

ManualAssignment = tuple[int, Sequence[int]]
"""(partition index, replica broker ids) of CreateTopics' manual assignment."""
ConfigValidator = Callable[[Mapping[str, str | None]], dict[str, str]]
"""Checks and canonicalises topic-level config overrides, raising ConfigError."""


@dataclass(frozen=True, slots=True)
class ClusterBrokers:
    """The broker ids placement may use, each tuple sorted ascending, and their racks.

    ``registered`` is every registered broker (a manual assignment may name any of them);
    ``usable`` the registered, unfenced ones (automatic placement and the initial ISR use only those).
    ``racks`` maps each broker registered with a ``broker.rack`` to it; brokers without one are absent.
    """

    registered: tuple[int, ...]
    usable: tuple[int, ...]
    racks: Mapping[int, str] = field(default_factory=dict)

    @classmethod
    def of(
        cls, registered: Iterable[int], usable: Iterable[int], racks: Mapping[int, str | None] | None = None
    ) -> ClusterBrokers:
        known = {broker: rack for broker, rack in (racks or {}).items() if rack is not None}
        return cls(tuple(sorted(registered)), tuple(sorted(usable)), known)

    @classmethod
    def single(cls, broker_id: int) -> ClusterBrokers:
        """A one-broker cluster, where the only broker is always usable."""
        return cls((broker_id,), (broker_id,))


@dataclass(frozen=True, slots=True)
class TopicDefaults:
    """num.partitions and default.replication.factor: what -1 means in CreateTopics."""

    num_partitions: int = 1
    replication_factor: int = 1


@dataclass(frozen=True, slots=True)
class NewPartition:
    """A partition to create: its replicas and its initial ISR, led by the first ISR member.

    Leader epoch and partition epoch start at 0 (``INITIAL_LEADER_EPOCH``/``INITIAL_PARTITION_EPOCH``
    of :mod:`metadata.topics`).
    """

    index: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]

    @property
    def leader(self) -> int:
        return self.isr[0]


@dataclass(frozen=True, slots=True)
class TopicPlan:
    """A validated CreateTopics entry: the canonical config overrides and the partitions to create."""

    name: str
    configs: dict[str, str]
    partitions: tuple[NewPartition, ...]


class TopicNames:
    """The topic names in use, indexed for Kafka's collision rule.

    Metric names turn '.' into '_', so Kafka refuses a topic whose name differs from an existing one
    only in those characters. Only names holding one of them can collide, so only those are indexed.
    """

    def __init__(self, names: Iterable[str] = ()) -> None:
        self._names: set[str] = set()
        self._colliding: dict[str, set[str]] = {}
        for name in names:
            self.add(name)

    def __contains__(self, name: object) -> bool:
        return name in self._names

    def __len__(self) -> int:
        return len(self._names)

    def add(self, name: str) -> None:
        self._names.add(name)
        if topic_names.has_collision_chars(name):
            self._colliding.setdefault(topic_names.unify_collision_chars(name), set()).add(name)

    def discard(self, name: str) -> None:
        self._names.discard(name)
        key = topic_names.unify_collision_chars(name)
        names = self._colliding.get(key)
        if names is not None:
            names.discard(name)
            if not names:
                del self._colliding[key]

    def collision_with(self, name: str) -> str | None:
        """The existing name ``name`` would collide with (the smallest, for a stable message), if any."""
        colliding = self._colliding.get(topic_names.unify_collision_chars(name))
        return min(colliding) if colliding else None

    def copy(self) -> TopicNames:
        """An independent copy, to validate a request's topics against each other before committing."""
        return TopicNames(self._names)


# -- whole requests --------------------------------------------------------------------------------


def plan_topic(
    name: str,
    num_partitions: int,
    replication_factor: int,
    configs: Mapping[str, str | None],
    *,
    assignments: Sequence[ManualAssignment],
    names: TopicNames,
    brokers: ClusterBrokers,
    defaults: TopicDefaults,
    config_validator: ConfigValidator,
    start_index: int = 0,
) -> TopicPlan:
    """Validate one CreateTopics entry and place its replicas (Kafka's check order).

    Raises KafkaError with INVALID_REQUEST, INVALID_TOPIC_EXCEPTION, TOPIC_ALREADY_EXISTS,
    INVALID_CONFIG, INVALID_REPLICATION_FACTOR, INVALID_PARTITIONS, INVALID_REPLICA_ASSIGNMENT or
    POLICY_VIOLATION.
    """
    check_new_name(name, names)
    overrides = checked_configs(configs, config_validator)
    if assignments:
        replica_lists = manual_replicas(num_partitions, replication_factor, assignments, brokers)
    else:
        replica_lists = placed_replicas(num_partitions, replication_factor, brokers, defaults, start_index)
    return TopicPlan(name, overrides, new_partitions(replica_lists, 0, brokers))


def plan_new_partitions(
    name: str,
    current_count: int,
    replication_factor: int,
    total_count: int,
    *,
    assignments: Sequence[Sequence[int]] | None,
    brokers: ClusterBrokers,
    start_index: int = 0,
) -> tuple[NewPartition, ...]:
    """Validate a CreatePartitions entry for an existing topic; returns the partitions to add.

    Raises INVALID_PARTITIONS (not an increase, Kafka's messages), INVALID_REPLICA_ASSIGNMENT,
    INVALID_REPLICATION_FACTOR or POLICY_VIOLATION.
    """
    if total_count < current_count:
        raise KafkaError(
            ErrorCode.INVALID_PARTITIONS,
            f"The topic {name} currently has {current_count} partition(s); "
            f"{total_count} would not be an increase.",
        )
    if total_count == current_count:
        raise KafkaError(ErrorCode.INVALID_PARTITIONS, f"Topic already has {current_count} partition(s).")
    replica_lists = additional_replicas(
        current_count, total_count - current_count, replication_factor, assignments, brokers, start_index
    )
    return new_partitions(replica_lists, current_count, brokers)


def new_topic_id(in_use: Container[uuid.UUID]) -> uuid.UUID:
    """A random id, never the zero UUID (it means "no id" on the wire) nor one in use."""
    while True:
        candidate = uuid.uuid4()
        if candidate != ZERO_UUID and candidate not in in_use:
            return candidate


# -- the individual checks -------------------------------------------------------------------------


def check_new_name(name: str, names: TopicNames) -> None:
    """Kafka's name checks for a new topic: reserved, legal, not taken, no '.'/'_' collision."""
    if name == topic_names.CLUSTER_METADATA_TOPIC:
        raise KafkaError(ErrorCode.INVALID_REQUEST, f"Creation of internal topic {name} is prohibited.")
    topic_names.validate(name)
    if name in names:
        raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
    colliding = names.collision_with(name)
    if colliding is not None:
        raise KafkaError(
            ErrorCode.INVALID_TOPIC_EXCEPTION, f"Topic '{name}' collides with existing topic: {colliding}"
        )


def checked_configs(configs: Mapping[str, str | None], validator: ConfigValidator) -> dict[str, str]:
    """The overrides in canonical form; a null value or a bad key/value is INVALID_CONFIG."""
    nulls = [key for key, value in configs.items() if value is None]
    if nulls:
        raise KafkaError(
            ErrorCode.INVALID_CONFIG, "Null value not supported for topic configs: " + ",".join(nulls)
        )
    try:
        return validator(configs)
    except ConfigError as exc:
        raise KafkaError(ErrorCode.INVALID_CONFIG, str(exc)) from None


def placed_replicas(
    num_partitions: int,
    replication_factor: int,
    brokers: ClusterBrokers,
    defaults: TopicDefaults,
    start_index: int = 0,
) -> list[list[int]]:
    """Automatic placement of a new topic: -1 takes the defaults, non-positive values are refused."""
    if replication_factor < USE_DEFAULT or replication_factor == 0:
        raise KafkaError(
            ErrorCode.INVALID_REPLICATION_FACTOR,
            "Replication factor must be larger than 0, or -1 to use the default value.",
        )
    if num_partitions < USE_DEFAULT or num_partitions == 0:
        raise KafkaError(
            ErrorCode.INVALID_PARTITIONS, "Number of partitions was set to an invalid non-positive value."
        )
    count = defaults.num_partitions if num_partitions == USE_DEFAULT else num_partitions
    factor = defaults.replication_factor if replication_factor == USE_DEFAULT else replication_factor
    check_partition_budget(count)
    return place(count, factor, brokers.usable, start_index, brokers.racks)


def place(
    count: int,
    factor: int,
    usable: Sequence[int],
    start_index: int = 0,
    racks: Mapping[int, str] | None = None,
) -> list[list[int]]:
    """``count`` replica lists of ``factor`` brokers (``usable`` sorted by id).

    Without racks: leaders round-robin from ``start_index``, followers on the brokers after the
    leader. When any usable broker has a rack: Kafka's rack-aware assignment (:func:`place_rack_aware`).
    """
    if factor > len(usable):
        raise KafkaError(
            ErrorCode.INVALID_REPLICATION_FACTOR,
            f"Unable to replicate the partition {factor} time(s): The target replication factor of "
            f"{factor} cannot be reached because only {len(usable)} broker(s) are registered.",
        )
    if racks and any(broker in racks for broker in usable):
        return place_rack_aware(count, factor, {broker: racks.get(broker) for broker in usable}, start_index)
    size = len(usable)
    return [[usable[(start_index + p + r) % size] for r in range(factor)] for p in range(count)]


def place_rack_aware(
    count: int, factor: int, rack_of: Mapping[int, str | None], start_index: int = 0
) -> list[list[int]]:
    """Kafka's rack-aware assignment (AdminUtils): no two replicas of a partition share a rack while
    racks remain, and no broker holds two while brokers remain; leaders spread evenly.

    Brokers are arranged alternating racks (first of each rack, then second of each, ...), so that
    consecutive leaders land in different racks; followers are picked after the leader at a shift that
    grows once per round of the brokers, as in the rack-unaware scheme. Brokers without a rack count
    as one rack of their own (as KRaft's placer groups them).
    """
    arranged = rack_alternated(rack_of)
    size = len(arranged)
    rack_count = len(set(rack_of.values()))
    shift = start_index
    lists = []
    for partition in range(count):
        if partition > 0 and partition % size == 0:
            shift += 1
        first = (partition + start_index) % size
        replicas = [arranged[first]]
        racks_used = {rack_of[arranged[first]]}
        k = 0
        while len(replicas) < factor:
            candidate = arranged[(first + 1 + (shift * rack_count + k) % (size - 1)) % size]
            rack = rack_of[candidate]
            if (rack not in racks_used or len(racks_used) == rack_count) and candidate not in replicas:
                replicas.append(candidate)
                racks_used.add(rack)
            k += 1
        lists.append(replicas)
    return lists


def rack_alternated(rack_of: Mapping[int, str | None]) -> list[int]:
    """The brokers taken in turn from each rack (racks by name, brokers by id within a rack)."""
    by_rack: dict[str, list[int]] = {}
    for broker in sorted(rack_of):
        by_rack.setdefault(rack_of[broker] or "", []).append(broker)
    columns = [by_rack[rack] for rack in sorted(by_rack)]
    depth = max(len(column) for column in columns)
    return [column[row] for row in range(depth) for column in columns if row < len(column)]


def manual_replicas(
    num_partitions: int,
    replication_factor: int,
    assignments: Sequence[ManualAssignment],
    brokers: ClusterBrokers,
) -> list[list[int]]:
    """A CreateTopics manual assignment, checked as Kafka does; returns the lists by partition index."""
    if replication_factor != USE_DEFAULT:
        raise KafkaError(
            ErrorCode.INVALID_REQUEST,
            "A manual partition assignment was specified, but replication factor was not set to -1.",
        )
    if num_partitions != USE_DEFAULT:
        raise KafkaError(
            ErrorCode.INVALID_REQUEST,
            "A manual partition assignment was specified, but numPartitions was not set to -1.",
        )
    check_partition_budget(len(assignments))
    by_index: dict[int, list[int]] = {}
    expected: int | None = None
    for index, replicas in assignments:
        if index in by_index:
            raise KafkaError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"Found multiple manual partition assignments for partition {index}",
            )
        by_index[index] = checked_replicas(replicas, expected, brokers.registered)
        check_some_usable(index, replicas, brokers.usable)
        expected = len(replicas)
    if set(by_index) != set(range(len(by_index))):
        raise KafkaError(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            "partitions should be a consecutive 0-based integer sequence",
        )
    return [by_index[index] for index in range(len(by_index))]


def additional_replicas(
    current_count: int,
    additional: int,
    replication_factor: int,
    assignments: Sequence[Sequence[int]] | None,
    brokers: ClusterBrokers,
    start_index: int = 0,
) -> list[list[int]]:
    """Replica lists for CreatePartitions: placed with the topic's factor, or the given ones checked."""
    check_partition_budget(additional)
    if assignments is None:
        return place(additional, replication_factor, brokers.usable, start_index, brokers.racks)
    if len(assignments) != additional:
        raise KafkaError(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            f"Attempted to add {additional} additional partition(s), but only {len(assignments)} "
            "assignment(s) were specified.",
        )
    checked = []
    for offset, replicas in enumerate(assignments):
        checked.append(checked_replicas(replicas, replication_factor, brokers.registered))
        check_some_usable(current_count + offset, replicas, brokers.usable)
    return checked


def checked_replicas(replicas: Sequence[int], expected: int | None, registered: Collection[int]) -> list[int]:
    """Kafka's validateManualPartitionAssignment: brokers checked in ascending id order."""
    if not replicas:
        raise KafkaError(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            "The manual partition assignment includes an empty replica list.",
        )
    known = set(registered)
    previous: int | None = None
    for broker in sorted(replicas):
        if broker not in known:
            raise KafkaError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"The manual partition assignment includes broker {broker}, "
                "but no such broker is registered.",
            )
        if broker == previous:
            raise KafkaError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"The manual partition assignment includes the broker {broker} more than once.",
            )
        previous = broker
    if expected is not None and len(replicas) != expected:
        raise KafkaError(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            f"The manual partition assignment includes a partition with {len(replicas)} replica(s), but "
            f"this is not consistent with previous partitions, which have {expected} replica(s).",
        )
    return list(replicas)


def check_some_usable(index: int, replicas: Sequence[int], usable: Collection[int]) -> None:
    """A manually assigned partition needs one usable replica to lead it (KRaft's check)."""
    if not any(broker in usable for broker in replicas):
        raise KafkaError(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            f"All brokers specified in the manual partition assignment for partition {index} "
            "are fenced or in controlled shutdown.",
        )


def check_partition_budget(count: int) -> None:
    if count > MAX_PARTITIONS_PER_REQUEST:
        raise KafkaError(ErrorCode.POLICY_VIOLATION, "Excessively large number of partitions per request.")


def new_partitions(
    replica_lists: Sequence[Sequence[int]], first_index: int, brokers: ClusterBrokers
) -> tuple[NewPartition, ...]:
    """Partitions numbered from ``first_index``; the ISR is the usable replicas, in assignment order.

    Automatic placement uses only usable brokers, so there the ISR is every replica; a manual
    assignment may name fenced brokers, which then start outside the ISR (as in KRaft).
    """
    usable = set(brokers.usable)
    return tuple(
        NewPartition(
            index=first_index + offset,
            replicas=tuple(replicas),
            isr=tuple(broker for broker in replicas if broker in usable),
        )
        for offset, replicas in enumerate(replica_lists)
    )
