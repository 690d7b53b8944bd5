"""Fixtures that run real broker processes on loopback ports.

When a test that used a broker fails, the tail of that broker's output (``<data_dir>/broker.out``) is
attached to the report, so a failure shows the broker's side of it without rerunning.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest

from tests.integration.broker_process import BrokerProcess

BROKER_LOG_TAIL_LINES = 80


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):  # type: ignore[no-untyped-def]
    """Attach each used broker's log tail to a failed test's report."""
    outcome = yield
    report = outcome.get_result()
    if report.when != "call" or not report.failed:
        return
    brokers: list[BrokerProcess] = list(getattr(item, "_kipling_brokers", []))
    for name in ("broker", "fresh_broker"):
        fixture = getattr(item, "funcargs", {}).get(name)
        if isinstance(fixture, BrokerProcess) and fixture not in brokers:
            brokers.append(fixture)
    for process in brokers:
        tail = "\n".join(process.output().splitlines()[-BROKER_LOG_TAIL_LINES:])
        report.sections.append((f"broker output ({process.log_path})", tail))


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """A broker shared by the tests of one module."""
    process = BrokerProcess(tmp_path_factory.mktemp("broker")).start()
    yield process
    process.stop()


@pytest.fixture
def fresh_broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    """A broker of the test's own, for tests that restart or break it."""
    process = BrokerProcess(tmp_path / "broker")
    yield process
    process.stop()


@pytest.fixture
def broker_factory(
    tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[Callable[[Sequence[str]], BrokerProcess]]:
    """Start brokers of the test's own with config overrides (``key=value``); all stopped afterwards."""
    started: list[BrokerProcess] = []
    request.node._kipling_brokers = started

    def start(overrides: Sequence[str] = ()) -> BrokerProcess:
        process = BrokerProcess(tmp_path / f"broker{len(started)}", overrides=list(overrides))
        started.append(process)
        return process.start()

    yield start
    for process in started:
        process.stop()
