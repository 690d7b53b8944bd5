"""The commands README.md's "Using it" section shows work, as a user types them, against a broker.

README promises that every command it shows works after the command it says to run first; this
runs the shell blocks of "Using it" line by line (``make clients`` aside: the test environment has
what it installs) against a broker process, with the broker's ports in place of README's defaults.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.broker_process import BrokerProcess

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
RUN_TIMEOUT_S = 60


def using_it_commands() -> list[str]:
    """The shell lines of README's "## Using it" section, in order."""
    text = README.read_text()
    section = text.split("## Using it", 1)[1].split("\n## ", 1)[0]
    lines: list[str] = []
    for block in re.findall(r"```sh\n(.*?)```", section, re.S):
        lines += [line.strip() for line in block.splitlines() if line.strip() and not line.startswith("#")]
    return lines


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    process = BrokerProcess(tmp_path_factory.mktemp("readme")).start()
    yield process
    process.stop()


def as_run_here(command: str, broker: BrokerProcess) -> str:
    """README's command with this broker's ports and this environment's ``.venv/bin``."""
    command = command.replace("127.0.0.1:9092", broker.bootstrap)
    command = command.replace("127.0.0.1:9404", f"127.0.0.1:{broker.metrics_port}")
    command = command.replace("KafkaProducer()", f"KafkaProducer(bootstrap_servers='{broker.bootstrap}')")
    return command.replace(".venv/bin/", f"{Path(sys.executable).parent}/")


def test_the_section_shows_kiplings_tools_and_other_clients() -> None:
    commands = using_it_commands()
    assert any("kipling produce" in c for c in commands) and any("kipling consume" in c for c in commands)
    assert "make clients" in commands
    # what make clients installs comes after it, never before
    first_client = min(i for i, c in enumerate(commands) if "kcat" in c or "from kafka import" in c)
    assert commands.index("make clients") < first_client


def test_every_command_of_using_it_works(broker: BrokerProcess) -> None:
    have_kcat = shutil.which("kcat") is not None  # make test installs it, as make clients does
    outputs: list[str] = []
    for command in using_it_commands():
        if command == "make clients" or ("kcat" in command and not have_kcat):
            continue
        result = subprocess.run(
            ["bash", "-o", "pipefail", "-c", as_run_here(command, broker)],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=RUN_TIMEOUT_S,
            check=False,
        )
        assert result.returncode == 0, f"{command}\n{result.stdout}\n{result.stderr}"
        outputs.append(result.stdout)
    assert "hello" in "".join(outputs)
    assert "kafka_server_fetchsessioncache" in "".join(outputs)
