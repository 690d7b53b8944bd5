"""A cleaner process whose owner died stops its round and leaves no files.

The owner (broker or follower process) killed mid-round: the cleaner runs in its own session and its
event loop is blocked by the round, so it cannot see its channel close. Before, it finished the
round (minutes when throttled) beside the restarted owner's own cleaner and left its ``.cleaned``
files in directories whose loader had already run. Now it checks its owner before every batch
(Kafka's checkDone) and aborts: the round's files are removed and the process exits.
"""

from __future__ import annotations

import asyncio
import json
import os
import pathlib
import signal
import subprocess
import sys
import textwrap

import pytest

from storage.cleaner import plan_clean
from storage.clock import FakeClock
from storage.config import LogConfig
from storage.log import PartitionLog
from tests.storage.cleaner.helpers import BASE_TIME, Writer

pytestmark = pytest.mark.timeout(90)

COMPACT = LogConfig(segment_bytes=100_000, file_delete_delay_ms=0, cleanup_policy=("compact",))

OWNER = textwrap.dedent(
    """
    import asyncio, json, sys
    from cleaner.process import CleanerProcess

    async def main() -> None:
        process = await CleanerProcess.spawn(
            python_executable=sys.executable, broker_id=1, cleaner_id=0, env={}, log_level="WARNING"
        )
        await process.request(
            "configure",
            {"dedupe_buffer_size": 1 << 20, "load_factor": 0.9, "io_max_bytes_per_second": 50_000.0},
            30.0,
        )
        print("PID", process.pid, flush=True)
        task = json.load(open(sys.argv[1]))
        await process.request("clean", {"task": task})
        print("done", flush=True)

    asyncio.run(main())
    """
)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(") ", 1)[1][0] not in "ZX"
    except FileNotFoundError:
        return False


async def test_a_cleaner_whose_owner_died_aborts_its_round(tmp_path: pathlib.Path) -> None:
    clock = FakeClock(BASE_TIME)
    log = PartitionLog.open(tmp_path / "t-0", COMPACT, clock)
    w = Writer(log)
    for i in range(12_000):  # ~3.6 MB in 37 segments: minutes of reads and writes at 50 kB/s
        w.put([(b"k%d" % (i % 50), b"v" * 200)])
    log.roll()
    log.update_high_watermark(log.log_end_offset)
    task = plan_clean(
        log, first_dirty_offset=0, first_uncleanable_offset=log.log_end_offset, now_ms=BASE_TIME
    )
    task_file = tmp_path / "task.json"
    task_file.write_text(json.dumps(task.to_json()))
    owner = subprocess.Popen(
        [sys.executable, "-c", OWNER, str(task_file)],
        stdout=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": os.getcwd()},
        start_new_session=True,
    )
    try:
        assert owner.stdout is not None
        line = b""
        while not line.startswith(b"PID "):  # the owner's own log lines come first
            line = await asyncio.to_thread(owner.stdout.readline)
            assert line, "the owner exited before starting its cleaner"
        cleaner_pid = int(line.split()[1])
        await asyncio.sleep(0.5)  # the round has begun (whenever the owner dies, nothing may be left)
        owner.send_signal(signal.SIGKILL)
        owner.wait()
        async with asyncio.timeout(10):  # the round had minutes left
            while _alive(cleaner_pid):
                await asyncio.sleep(0.05)
        assert not list(log.directory.glob("*.cleaned"))
    finally:
        if owner.poll() is None:
            owner.kill()
            owner.wait()
        if "cleaner_pid" in locals() and _alive(cleaner_pid):
            os.kill(cleaner_pid, signal.SIGKILL)
    log.close()
