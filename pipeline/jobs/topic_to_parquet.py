"""Copy a kipling topic into parquet files, exactly once, with Structured Streaming.

    python -m pipeline.jobs.topic_to_parquet --bootstrap 127.0.0.1:9092 --topic events \\
        --output /data/events --checkpoint /data/events-checkpoint [--available-now]

The same code as a Kafka job, with ``format("kipling")`` instead of ``format("kafka")``. Offsets live in
the checkpoint: stop the job (or kill it) and start it again with the same ``--checkpoint`` and it
continues where it stopped, with no duplicates and no gaps in ``--output`` when that is read through
Spark (``spark.read.parquet``), whose ``_spark_metadata`` log hides files of an unfinished batch.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

import structlog

from pipeline.logs import configure_logging

_log = structlog.get_logger("kipling.pipeline.jobs.topic_to_parquet")


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--bootstrap", required=True, help="kafka.bootstrap.servers, host:port[,host:port]")
    parser.add_argument("--topic", required=True, help="topic(s) to subscribe to, comma-separated")
    parser.add_argument("--output", required=True, help="directory of the parquet output")
    parser.add_argument("--checkpoint", required=True, help="the query's checkpoint directory")
    parser.add_argument("--starting-offsets", default="earliest", help="earliest, latest or Kafka JSON")
    parser.add_argument("--max-offsets-per-trigger", type=int, default=None)
    parser.add_argument(
        "--available-now", action="store_true", help="read what is there now, then stop (default: run on)"
    )
    parser.add_argument("--trigger-seconds", type=int, default=5, help="processing-time trigger interval")
    parser.add_argument("--master", default=os.environ.get("SPARK_MASTER", "local[2]"))
    parser.add_argument("--log-level", default="INFO", help="of the job's lines and its Spark workers'")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    configure_logging(args.log_level)
    # Spark starts ``python3`` from PATH for its workers unless told: use this venv's interpreter.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    import pipeline

    spark = SparkSession.builder.master(args.master).appName("kipling-topic-to-parquet").getOrCreate()
    pipeline.register(spark)
    reader = (
        spark.readStream.format("kipling")
        .option("kafka.bootstrap.servers", args.bootstrap)
        .option("subscribe", args.topic)
        .option("startingOffsets", args.starting_offsets)
        .option("includeHeaders", "true")
    )
    if args.max_offsets_per_trigger is not None:
        reader = reader.option("maxOffsetsPerTrigger", str(args.max_offsets_per_trigger))
    writer = (
        reader.load()
        .selectExpr(
            "topic", "partition", "offset", "timestamp", "CAST(key AS STRING) AS key", "value", "headers"
        )
        .writeStream.format("parquet")
        .option("path", args.output)
        .option("checkpointLocation", args.checkpoint)
    )
    if args.available_now:
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime=f"{args.trigger_seconds} seconds")
    query = writer.start()
    _log.info("query started", id=str(query.id), topic=args.topic, output=args.output)
    try:
        query.awaitTermination()
    except KeyboardInterrupt:
        _log.info("stopping the query")
        query.stop()
    error = query.exception()
    if error is not None:
        _log.error("query failed", error=str(error))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
