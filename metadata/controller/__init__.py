"""The active controller, KRaft style.

Its domain is pure and synchronous (no sockets, no asyncio, no files but through an injected log,
time from an injected clock): every operation validates against the
:class:`~metadata.image.MetadataImage`, turns the change into metadata records, appends them
as one batch through a :class:`~metadata.controller.metadata_log.MetadataLog`, applies them to the
image and returns a result. :class:`~metadata.controller.controller.QuorumController` composes the
parts: :mod:`~metadata.controller.cluster_control` (registration, heartbeats, fencing),
:mod:`~metadata.controller.replication_control` (topics, partitions, elections, ISR changes) and
:mod:`~metadata.controller.topic_rules` (CreateTopics / CreatePartitions validation and placement,
shared with the single-node :class:`~broker.topics.TopicStore`). Adapters binding the domain to a
disk log or to requests live beside these modules.

This package ``__init__`` imports nothing on purpose: ``broker.topics`` imports
``metadata.controller.topic_rules``, and the controller modules import ``broker.topics``.
"""
