"""Spark data sources for kipling (pyspark >= 4.2, ``pyspark.sql.datasource``).

``import pipeline; pipeline.register(spark)`` makes the ``kipling`` format available on a session:
batch and streaming reads with the options and schema of Spark's Kafka source, and batch and
streaming writes. This package is the only one that imports pyspark (DESIGN.md §2), and only when
:func:`register` or :mod:`pipeline.source`/:mod:`pipeline.sink` are used: option parsing and offset
planning import without Spark, so they are tested without it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

FORMATS = ("kipling",)
"""Formats :func:`register` installs. The offline ``kipling-segments`` reader is not written yet."""


def register(spark: SparkSession) -> None:
    """Register every kipling format on ``spark`` (once per session; Spark refuses a second time)."""
    from pipeline.source import KiplingDataSource

    for source in (KiplingDataSource,):
        spark.dataSource.register(source)


__all__ = ["FORMATS", "register"]
