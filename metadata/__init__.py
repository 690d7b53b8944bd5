"""Cluster metadata as KRaft keeps it: a log of metadata records and the image they replay into.

:mod:`~metadata.records` declares the records (what the controller writes to the
``__cluster_metadata`` log); :mod:`~metadata.image` replays them, in log order, into a
:class:`~metadata.image.MetadataImage` that both the controller and every broker query.
Neither module does I/O: the controller writes through
``metadata.controller.metadata_log.MetadataLog`` and brokers feed their image from fetched batches.
"""
