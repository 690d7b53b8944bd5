"""Fixtures of the Spark pipeline tests: one kipling broker process (and a secured one, for the tests of
the security options) and one SparkSession per run.

All are session-scoped because starting them is what costs (a broker ~1 s, a SparkSession 2-6 s plus
the first query's warm-up, pyspark-notes.md §7); tests isolate themselves with their own topics and
checkpoint directories. Spark's Python workers must import ``pipeline``: the repository root is put
on PYTHONPATH before the JVM starts, so this works whether or not the project is installed.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tests.integration.broker_process import BrokerProcess
from tests.integration.secured_broker import SecuredBroker, start_secured_broker

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

ROOT = Path(__file__).resolve().parents[2]

BROKER_OVERRIDES = [
    "log.retention.check.interval.ms=200",  # the failOnDataLoss tests wait for retention
]


@pytest.fixture(scope="session")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    process = BrokerProcess(tmp_path_factory.mktemp("pipeline-broker"), overrides=BROKER_OVERRIDES).start()
    yield process
    process.stop()


@pytest.fixture(scope="session")
def secured_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecuredBroker]:
    """A second broker with SASL_SSL and mutual-TLS listeners, for the security options."""
    secured = start_secured_broker(tmp_path_factory)
    yield secured
    secured.process.stop()


def spark_environment() -> dict[str, str]:
    """What the driver, the JVM and Spark's Python workers need in their environment."""
    path = os.environ.get("PYTHONPATH", "")
    return {
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "PYTHONPATH": str(ROOT) + (os.pathsep + path if path else ""),
    }


SPARK_CONF: dict[str, Any] = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "1",
    "spark.driver.memory": "512m",
    # Short suites: a quicker JVM start beats peak JIT throughput (pyspark-notes.md §2 and §6).
    "spark.driver.extraJavaOptions": "-XX:+UseSerialGC -XX:TieredStopAtLevel=1",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.streaming.noDataMicroBatches.enabled": "false",
    # a query stuck in a micro-batch (a Python callback that never answers) makes stop() raise after
    # this long instead of waiting forever, and with it SparkContext.stop()
    "spark.sql.streaming.stopTimeout": "60000",
}
STOP_TIMEOUT_S = 120.0
"""How long the session's stop may take before its JVM is killed (teardown is not under pytest-timeout)."""


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    pytest.importorskip("pyspark")
    pytest.importorskip("pyarrow")
    from pyspark.sql import SparkSession

    import pipeline

    os.environ.update(spark_environment())
    builder = SparkSession.builder.master("local[1]").appName("kipling-pipeline-tests")
    for key, value in SPARK_CONF.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    pipeline.register(session)
    yield session
    stop_bounded(session)


def stop_bounded(session: SparkSession) -> None:
    """Stop the session; if that hangs (a JVM thread waiting on a dead Python callback), kill its JVM.

    A session-scoped fixture's teardown runs after the last test's timeout is disarmed: a stop that
    never returns would hang the whole test run.
    """
    stopper = threading.Thread(target=session.stop, name="spark-stop", daemon=True)
    stopper.start()
    stopper.join(STOP_TIMEOUT_S)
    if stopper.is_alive():
        jvm = getattr(session.sparkContext._gateway, "proc", None)
        if jvm is not None:
            jvm.kill()
            jvm.wait(30)
        pytest.fail(f"SparkSession.stop() did not return within {STOP_TIMEOUT_S:.0f} s; its JVM was killed")
