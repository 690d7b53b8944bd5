"""Spark data sources for kipling (pyspark >= 4.2, ``pyspark.sql.datasource``).

``import pipeline; pipeline.register(spark)`` makes the ``kipling`` format available on a session:
batch and streaming reads with the options and schema of Spark's Kafka source, and batch and
streaming writes; and the ``kipling-segments`` format: batch reads of a broker's log directories
straight from disk (:mod:`pipeline.segments`), with the same options and schema where they apply.
This package is the only one that imports pyspark (DESIGN.md §2), and only when :func:`register` or
:mod:`pipeline.source`/:mod:`pipeline.sink`/:mod:`pipeline.segments` are used: option parsing, offset
and segment planning import without Spark, so they are tested without it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

FORMATS = ("kipling", "kipling-segments")
"""Formats :func:`register` installs."""


def register(spark: SparkSession) -> None:
    """Register every kipling format on ``spark`` (once per session; Spark refuses a second time)."""
    from pipeline.segments import KiplingSegmentsDataSource
    from pipeline.source import KiplingDataSource

    for source in (KiplingDataSource, KiplingSegmentsDataSource):
        spark.dataSource.register(source)


__all__ = ["FORMATS", "register"]
