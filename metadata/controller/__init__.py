"""The active controller, KRaft style.

Its domain is pure and synchronous (no sockets, no asyncio, no files but through an injected log,
time from an injected clock): every operation validates against the
:class:`~metadata.image.MetadataImage`, turns the change into metadata records, appends them
as one batch through a :class:`~metadata.controller.metadata_log.MetadataLog`, applies them to the
image and returns a result. :class:`~metadata.controller.controller.QuorumController` composes the
parts: :mod:`~metadata.controller.cluster_control` (registration, heartbeats, fencing),
:mod:`~metadata.controller.replication_control` (topics, partitions, elections, ISR changes) and
:mod:`~metadata.controller.topic_rules` (CreateTopics / CreatePartitions validation and placement).
:mod:`~metadata.controller.admin` is the controller as the admin handlers see it. The adapters binding
the domain to the Raft quorum and to requests live in the broker (broker/quorum/,
broker/handler_sets.py).
"""
