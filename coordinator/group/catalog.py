"""Which groups this coordinator holds, and for which partitions of ``__consumer_offsets``.

A group belongs to partition ``abs(java_hash(group_id)) % offsets.topic.num.partitions`` of
``__consumer_offsets`` (Kafka's ``partitionFor``); the broker leading that partition is its
coordinator. A partition is *loading* while its records are being read back, then *owned* until
leadership moves away. The catalog answers the checks every group request starts with (Kafka's
``validateGroupStatus``).

It holds classic groups (:class:`~coordinator.group.group.GroupMetadata`) and consumer-protocol
groups (:class:`~coordinator.group.consumer.group.ConsumerGroup`, KIP-848) in one namespace: a group
id names at most one group of either kind. :meth:`GroupCatalog.get` answers classic groups only, so
the classic paths see a consumer group's id as no classic group and check
:meth:`GroupCatalog.consumer_group` where that matters.
"""

from __future__ import annotations

from collections.abc import Iterator
from enum import Enum

from coordinator.group.consumer.group import ConsumerGroup
from coordinator.group.group import GroupMetadata
from coordinator.group.state import GroupState
from protocol.error_codes import ErrorCode
from server_common.java_hash import java_string_hash, utils_abs


def partition_for(group_id: str, num_partitions: int) -> int:
    """Kafka's ``Utils.abs(groupId.hashCode) % offsets.topic.num.partitions``; ``Utils.abs`` maps
    Integer.MIN_VALUE to 0, where Math.abs would leave it negative."""
    if num_partitions < 1:
        raise ValueError(f"offsets.topic.num.partitions must be at least 1, got {num_partitions}")
    return utils_abs(java_string_hash(group_id)) % num_partitions


class GroupApi(Enum):
    """The APIs whose group id is checked; the value says whether "" is a valid group id.

    Kafka accepts the empty group id for offset commits and fetches (backwards compatibility) and
    for DescribeGroups and DeleteGroups (so that such a group can be seen and removed); the
    membership APIs and OffsetDelete need a real group id.
    """

    JOIN_GROUP = False
    SYNC_GROUP = False
    HEARTBEAT = False
    LEAVE_GROUP = False
    OFFSET_COMMIT = True
    OFFSET_FETCH = True
    DESCRIBE_GROUPS = True
    DELETE_GROUPS = True
    OFFSET_DELETE = False
    CONSUMER_GROUP = False
    """ConsumerGroupHeartbeat and ConsumerGroupDescribe."""

    def __init__(self, allows_empty_group_id: bool) -> None:
        self.allows_empty_group_id = allows_empty_group_id


class GroupCatalog:
    def __init__(self, num_partitions: int) -> None:
        if num_partitions < 1:
            raise ValueError(f"offsets.topic.num.partitions must be at least 1, got {num_partitions}")
        self.num_partitions = num_partitions
        self.active = True
        self._groups: dict[str, GroupMetadata] = {}
        self._consumer_groups: dict[str, ConsumerGroup] = {}
        self._owned: set[int] = set()
        self._loading: set[int] = set()

    # -- partitions ---------------------------------------------------------------------------------

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.num_partitions)

    def resize(self, num_partitions: int) -> bool:
        """Map groups onto ``num_partitions`` from now on; True if that changed anything.

        Only before any partition is loaded: a group's partition is where its records are, so the
        count cannot change under groups already read back (ValueError then).
        """
        if num_partitions == self.num_partitions:
            return False
        if num_partitions < 1:
            raise ValueError(f"__consumer_offsets must have at least 1 partition, got {num_partitions}")
        if self._owned or self._loading or self._groups or self._consumer_groups:
            raise ValueError(
                f"cannot map groups onto {num_partitions} partitions: partitions of "
                f"{self.num_partitions} are loaded already"
            )
        self.num_partitions = num_partitions
        return True

    def owns(self, partition: int) -> bool:
        return partition in self._owned

    @property
    def any_loading(self) -> bool:
        return bool(self._loading)

    def is_loading(self, partition: int) -> bool:
        return partition in self._loading

    @property
    def owned_partitions(self) -> frozenset[int]:
        return frozenset(self._owned)

    def begin_loading(self, partition: int) -> None:
        self._check_partition(partition)
        if partition not in self._owned:
            self._loading.add(partition)

    def finish_loading(self, partition: int) -> None:
        self._loading.discard(partition)
        self._owned.add(partition)

    def release(self, partition: int) -> list[GroupMetadata]:
        """Stop coordinating ``partition``: forget its groups and return them."""
        self._owned.discard(partition)
        self._loading.discard(partition)
        released = [
            group for group in self._groups.values() if self.partition_for(group.group_id) == partition
        ]
        for group in released:
            del self._groups[group.group_id]
        return released

    def release_consumer_groups(self, partition: int) -> list[ConsumerGroup]:
        """Forget the consumer groups of ``partition`` (call before :meth:`release`)."""
        released = [g for g in self._consumer_groups.values() if self.partition_for(g.group_id) == partition]
        for group in released:
            del self._consumer_groups[group.group_id]
            group.dead = True
        return released

    def _check_partition(self, partition: int) -> None:
        if not 0 <= partition < self.num_partitions:
            raise ValueError(
                f"__consumer_offsets has no partition {partition} ({self.num_partitions} partitions)"
            )

    # -- groups -------------------------------------------------------------------------------------

    def get(self, group_id: str) -> GroupMetadata | None:
        return self._groups.get(group_id)

    def add(self, group: GroupMetadata) -> GroupMetadata:
        """Add ``group`` unless one with its id is there already; returns the one kept. A consumer
        group of that id is a bug of the caller (RuntimeError)."""
        if group.group_id in self._consumer_groups:
            raise RuntimeError(f"{group.group_id} is a consumer group, not a classic one")
        return self._groups.setdefault(group.group_id, group)

    def remove(self, group: GroupMetadata) -> bool:
        """Forget ``group`` if it is still the one held under its id."""
        if self._groups.get(group.group_id) is not group:
            return False
        del self._groups[group.group_id]
        return True

    def groups(self) -> list[GroupMetadata]:
        return list(self._groups.values())

    # -- consumer-protocol groups --------------------------------------------------------------------

    def consumer_group(self, group_id: str) -> ConsumerGroup | None:
        return self._consumer_groups.get(group_id)

    def create_consumer_group(self, group_id: str) -> ConsumerGroup:
        """A new, empty consumer group under ``group_id`` (RuntimeError if the id is taken)."""
        if group_id in self._groups or group_id in self._consumer_groups:
            raise RuntimeError(f"group {group_id} exists already")
        group = ConsumerGroup(group_id)
        self._consumer_groups[group_id] = group
        return group

    def add_consumer_group(self, group: ConsumerGroup) -> None:
        """Install a loaded consumer group (RuntimeError if the id is taken)."""
        if group.group_id in self._groups or group.group_id in self._consumer_groups:
            raise RuntimeError(f"group {group.group_id} exists already")
        self._consumer_groups[group.group_id] = group

    def remove_consumer_group(self, group: ConsumerGroup) -> None:
        """Forget ``group`` if it is still the one held under its id; it is Dead from now on."""
        if self._consumer_groups.get(group.group_id) is group:
            del self._consumer_groups[group.group_id]
        group.dead = True

    def consumer_groups(self) -> list[ConsumerGroup]:
        return list(self._consumer_groups.values())

    def __iter__(self) -> Iterator[GroupMetadata]:
        return iter(list(self._groups.values()))

    def group_not_exists(self, group_id: str) -> bool:
        """Kafka's ``groupNotExists``: the group is ours and there is no live group of that id."""
        if not self.owns(self.partition_for(group_id)):
            return False
        if group_id in self._consumer_groups:
            return False
        group = self._groups.get(group_id)
        return group is None or group.is_in(GroupState.DEAD)

    def validate(self, group_id: str | None, api: GroupApi) -> ErrorCode | None:
        """The first error of Kafka's checks, in Kafka's order, or None."""
        if group_id is None or (group_id == "" and not api.allows_empty_group_id):
            return ErrorCode.INVALID_GROUP_ID
        if not self.active:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        partition = self.partition_for(group_id)
        if partition in self._loading:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        if partition not in self._owned:
            return ErrorCode.NOT_COORDINATOR
        return None
