"""Consumer-protocol groups (KIP-848, Kafka 4's ``group.protocol=consumer``), as a pure domain.

The coordinator computes every member's assignment itself: :mod:`~.member` (members and their
assignments), :mod:`~.group` (the group, built by records), :mod:`~.records` (the changes, and
their form in ``__consumer_offsets``), :mod:`~.assignors` (uniform and range),
:mod:`~.target_assignment`, :mod:`~.reconciliation` (a member's safe steps towards its target),
:mod:`~.timers` and :mod:`~.service` (ConsumerGroupHeartbeat and ConsumerGroupDescribe).
:class:`~coordinator.group.coordinator.GroupCoordinator` holds these groups beside the classic
ones and serves their offsets like any group's.
"""
