"""pipeline.logs: Spark's Python workers log at WARNING unless asked, on stderr, a line per write."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from pipeline.logs import LOG_LEVEL_ENV, level_number

WORKER = """
import sys

class Recorder:
    def __init__(self, stream):
        self.stream, self.writes = stream, []
    def write(self, text):
        self.writes.append(text)
        return self.stream.write(text)
    def flush(self):
        self.stream.flush()

sys.stderr = recorder = Recorder(sys.stderr)
import structlog
from pipeline.logs import configure_worker_logging

configure_worker_logging()
log = structlog.get_logger("worker")
log.debug("a debug line", n=1)
log.info("an info line", n=2)
log.warning("a warning line", n=3)
assert all(w.endswith("\\n") and w.count("\\n") == 1 for w in recorder.writes), recorder.writes
"""


def run_worker(level: str | None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != LOG_LEVEL_ENV}
    if level is not None:
        env[LOG_LEVEL_ENV] = level
    return subprocess.run(
        [sys.executable, "-c", WORKER], env=env, capture_output=True, text=True, timeout=60, check=False
    )


def test_a_worker_logs_warnings_only_by_default_on_stderr_one_write_per_line() -> None:
    result = run_worker(None)
    assert result.returncode == 0, result.stderr
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and "a warning line" in lines[0] and "n=3" in lines[0]


def test_a_worker_logs_at_the_level_its_job_asked_for() -> None:
    result = run_worker("DEBUG")
    assert result.returncode == 0, result.stderr
    assert [("debug" in line, "info" in line) for line in result.stderr.splitlines()][:2] == [
        (True, False),
        (False, True),
    ]
    assert result.stdout == ""


def test_an_unknown_worker_level_falls_back_to_warning() -> None:
    result = run_worker("chatty")
    assert result.returncode == 0, result.stderr
    assert len(result.stderr.splitlines()) == 1


def test_level_names() -> None:
    assert level_number("warning") == 30
    with pytest.raises(ValueError, match="chatty"):
        level_number("chatty")
