"""Supervision of broker processes: started together, their output shown behind a tag, stopped together.

Used by ``kipling dev-cluster`` (several brokers of a development cluster in one terminal) and by a
node with ``kipling.node.processes`` above 1 (several broker processes that use the cores of one
machine). It works like ``docker-compose up``: every child's output is shown line by line behind a
``name |`` tag, the first SIGINT/SIGTERM/SIGHUP stops every child gracefully (SIGTERM, then SIGKILL
after a timeout) and a second one kills them. Each child runs in a process group of its own, so a
terminal's Ctrl-C reaches only the supervisor, which then stops the children in order; whatever a
child leaves behind in its group (its follower processes) is stopped too.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TextIO

from client.tasks import cancel_and_wait

DEFAULT_STOP_TIMEOUT_S = 30.0
"""As docker-compose.yml's ``stop_grace_period``: time for a controlled shutdown (up to 10 s), the
follower processes handing their logs back and every log being flushed, on a busy machine too."""
SAME_STOP_S = 0.5
"""Stop requests this close together are one: a second that kills must come later."""
EXIT_STOPPED = 0
EXIT_BROKER_FAILED = 1


# -- output: docker-compose style tagged lines ---------------------------------------------------

_COLOURS = (36, 33, 32, 35, 34, 96, 93, 92, 95, 94)
"""ANSI foreground colours given to the brokers' tags in turn."""


class Console:
    """The command's output: child lines behind a fixed-width ``name |`` tag, coloured on a terminal.

    Child lines go to ``out``, the supervisor's own notices to ``err``. A closed ``out`` (``| head``)
    is not an error: output stops, the children keep being drained and supervised.
    """

    def __init__(
        self,
        names: Sequence[str],
        out: TextIO,
        err: TextIO,
        colour: bool | None = None,
        *,
        supervisor_name: str = "dev-cluster",
        tagged: bool = True,
        notify: Callable[[str], None] | None = None,
    ) -> None:
        """``tagged`` False writes the children's lines as they are (JSON log lines); ``notify``
        takes the supervisor's own messages instead of ``err`` (to log them as JSON too)."""
        self._out = out
        self._err = err
        self._tagged = tagged
        self._notify = notify
        self._width = max(len(name) for name in (*names, supervisor_name))
        use_colour = colour if colour is not None else _is_terminal(out)
        self._tags = {
            name: self._tag(name, _COLOURS[i % len(_COLOURS)], use_colour) for i, name in enumerate(names)
        }
        self._supervisor_tag = self._tag(supervisor_name, 1, use_colour)  # 1: bold
        self._closed = False

    def _tag(self, name: str, colour: int, use_colour: bool) -> str:
        text = f"{name:<{self._width}} |"
        return f"\x1b[{colour}m{text}\x1b[0m " if use_colour else text + " "

    def lines(self, name: str, lines: Sequence[str]) -> None:
        """Write complete lines of one child's output (untagged when the lines are JSON)."""
        tag = self._tags[name] if self._tagged else ""
        self._write(self._out, "".join(f"{tag}{line}\n" for line in lines))

    def plain(self, text: str) -> None:
        """Write an untagged line to ``out`` (the bootstrap servers line, meant to be copied)."""
        self._write(self._out, text + "\n")

    def notice(self, text: str) -> None:
        """Write one of the supervisor's own messages."""
        if self._notify is not None:
            self._notify(text)
            return
        self._write(self._err, f"{self._supervisor_tag}{text}\n")

    def _write(self, stream: TextIO, text: str) -> None:
        if self._closed and stream is self._out:
            return
        try:
            stream.write(text)
            stream.flush()
        except BrokenPipeError:
            self._closed = True
            _silence(stream)


def _is_terminal(stream: TextIO) -> bool:
    return stream.isatty() and not os.environ.get("NO_COLOR")


def _silence(stream: TextIO) -> None:
    """Point a stream whose reader went away at /dev/null, so that flushing it at exit is quiet."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, stream.fileno())
        os.close(devnull)


class LineSplitter:
    """Turns a child's output chunks into complete lines; any line length, any chunk boundary."""

    def __init__(self) -> None:
        self._partial = b""

    def feed(self, chunk: bytes) -> list[str]:
        data = self._partial + chunk
        *complete, self._partial = data.split(b"\n")
        return [_decode(line) for line in complete]

    def flush(self) -> list[str]:
        """The unterminated last line, if any (at end of output)."""
        rest, self._partial = self._partial, b""
        return [_decode(rest)] if rest else []


def _decode(line: bytes) -> str:
    return line.rstrip(b"\r").decode("utf-8", errors="replace")


# -- supervision ---------------------------------------------------------------------------------

READ_CHUNK = 65536
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
GROUP_POLL_S = 0.05


@dataclass
class Child:
    """One running broker process and the task copying its output."""

    name: str
    process: asyncio.subprocess.Process
    pump: asyncio.Task[None]
    exited_on_its_own: bool = False
    killed: bool = False
    """Its whole process group got SIGKILL: nothing of it is left to stop."""

    @property
    def running(self) -> bool:
        return self.process.returncode is None


@dataclass
class Supervisor:
    """Runs the brokers until a stop signal, then stops them all.

    A broker that exits on its own is reported and the others keep running, so that a failover can
    be watched (and its clients tried) from one terminal; with ``restart_after_s`` it is started
    again that many seconds later, on the same log directory. When no broker is left running and
    none is to be restarted, the supervisor stops.
    """

    commands: Sequence[tuple[str, Sequence[str]]]
    console: Console
    stop_timeout_s: float = DEFAULT_STOP_TIMEOUT_S
    env: Mapping[str, str] | None = None
    restart_after_s: float | None = None
    one_for_all: bool = False
    """A child that exits on its own stops all the others (a node of several broker processes):
    the supervisor then exits with :data:`EXIT_BROKER_FAILED`, for its own supervisor to restart."""
    children: list[Child] = field(default_factory=list, init=False)
    _stop: asyncio.Event = field(default_factory=asyncio.Event, init=False)
    """Set by the first stop signal: stop the brokers gracefully."""
    _stop_requested_at: float = field(default=0.0, init=False)
    _force: asyncio.Event = field(default_factory=asyncio.Event, init=False)
    """Set by a second stop signal: kill what is still running instead of waiting."""

    async def run(self) -> int:
        """Exit status: 0 when stopped by a signal with every broker that died restarted, 1 when a
        broker exited on its own and was not restarted, or could not be started."""
        loop = asyncio.get_running_loop()
        for sig in STOP_SIGNALS:
            loop.add_signal_handler(sig, self._on_signal, sig)
        try:
            started = await self._start_all()
            failed = not started or await self._supervise()
            await self._stop_all()
        finally:
            for sig in STOP_SIGNALS:
                loop.remove_signal_handler(sig)
        return EXIT_BROKER_FAILED if failed else EXIT_STOPPED

    def _on_signal(self, sig: int) -> None:
        self.request_stop(f"{signal.Signals(sig).name} received")

    def request_stop(self, reason: str) -> None:
        """Stop the brokers gracefully; asked a second time, kill whatever is still running.

        A second request within :data:`SAME_STOP_S` of the first is the same stop seen twice (a
        service manager or ``timeout`` signalling the supervisor and then its whole group), not an
        operator insisting: it is ignored."""
        now = time.monotonic()
        if self._stop.is_set():
            if now - self._stop_requested_at < SAME_STOP_S:
                return
            self.console.notice(f"{reason} again: killing the brokers now")
            self._force.set()
            return
        self.console.notice(f"{reason}: stopping the brokers")
        self._stop_requested_at = now
        self._stop.set()

    async def _start_all(self) -> bool:
        return all([await self._start(name, argv) for name, argv in self.commands])

    async def _start(self, name: str, argv: Sequence[str]) -> bool:
        env = dict(self.env if self.env is not None else os.environ, PYTHONUNBUFFERED="1")
        try:
            process = await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT,
                env=env,
                process_group=0,
            )
        except OSError as exc:
            self.console.notice(f"cannot start {name}: {exc}")
            return False
        assert process.stdout is not None
        pump = asyncio.create_task(self._pump(name, process.stdout), name=f"output of {name}")
        self.children.append(Child(name, process, pump))
        self.console.notice(f"started {name} (pid {process.pid})")
        return True

    async def _pump(self, name: str, stream: asyncio.StreamReader) -> None:
        splitter = LineSplitter()
        while chunk := await stream.read(READ_CHUNK):
            if lines := splitter.feed(chunk):
                self.console.lines(name, lines)
        if rest := splitter.flush():
            self.console.lines(name, rest)

    async def _supervise(self) -> bool:
        """Until a stop signal: report each broker that exits on its own and, with
        ``restart_after_s``, start it again. True if a broker died and was not restarted."""
        unrestarted = False
        restarts: dict[asyncio.Task[bool], str] = {}
        stop = asyncio.create_task(self._stop.wait())
        try:
            while not self._stop.is_set():
                exits = {asyncio.create_task(c.process.wait()): c for c in self.children if c.running}
                if not exits and not restarts:
                    self.console.notice("no broker is running: stopping")
                    return True
                done, _ = await asyncio.wait({stop, *exits, *restarts}, return_when=asyncio.FIRST_COMPLETED)
                for task in exits:
                    task.cancel()
                for restart in [task for task in restarts if task in done]:
                    restarts.pop(restart)
                    unrestarted |= not restart.result()
                if self._stop.is_set():
                    break
                for task in done & exits.keys():
                    child = exits[task]
                    child.exited_on_its_own = True
                    if self.one_for_all:
                        unrestarted = True
                        self.request_stop(
                            f"{child.name} exited on its own ({_describe_exit(child.process.returncode)})"
                        )
                        continue
                    if self.restart_after_s is None:
                        unrestarted = True
                        self.console.notice(
                            f"{child.name} exited on its own ({_describe_exit(child.process.returncode)}); "
                            "the other brokers keep running (Ctrl-C stops them)"
                        )
                        continue
                    self.console.notice(
                        f"{child.name} exited on its own ({_describe_exit(child.process.returncode)}); "
                        f"restarting it in {self.restart_after_s:g} s"
                    )
                    restarts[asyncio.create_task(self._restart(child.name))] = child.name
        finally:
            stop.cancel()
            for task in restarts:
                await cancel_and_wait(task)
        return unrestarted

    async def _restart(self, name: str) -> bool:
        """Start broker ``name`` again after ``restart_after_s`` (unless stopping meanwhile)."""
        assert self.restart_after_s is not None
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self.restart_after_s):
                await self._stop.wait()
        if self._stop.is_set():
            return True
        argv = dict(self.commands)[name]
        return await self._start(name, argv)

    async def _stop_all(self) -> None:
        """SIGTERM every running broker, SIGKILL whatever is left at the deadline (or on a second
        signal), then make sure nothing of any broker's process group survives."""
        deadline = time.monotonic() + self.stop_timeout_s
        for child in self.children:
            if child.running:
                with contextlib.suppress(ProcessLookupError):
                    child.process.send_signal(signal.SIGTERM)
        await asyncio.gather(*(self._await_exit(child, deadline) for child in self.children))
        await asyncio.gather(*(self._reap_group(child, deadline) for child in self.children))
        for child in self.children:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(max(deadline - time.monotonic(), 1.0)):
                    await child.pump
            if not child.exited_on_its_own:
                self.console.notice(f"{child.name} stopped ({_describe_exit(child.process.returncode)})")

    async def _await_exit(self, child: Child, deadline: float) -> None:
        if await self._wait_until(child.process.wait(), deadline):
            return
        self.console.notice(f"{child.name} did not stop in time: killing it")
        _kill_group(child.process.pid)
        child.killed = True
        await child.process.wait()

    async def _reap_group(self, child: Child, deadline: float) -> None:
        """Stop processes the broker left behind in its group (e.g. follower processes)."""
        pgid = child.process.pid
        if child.killed or not _group_alive(pgid):
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGTERM)
        while _group_alive(pgid) and time.monotonic() < deadline and not self._force.is_set():
            await asyncio.sleep(GROUP_POLL_S)
        if _group_alive(pgid):
            self.console.notice(f"processes left by {child.name} did not stop in time: killing them")
            _kill_group(pgid)

    async def _wait_until(self, awaitable: Awaitable[object], deadline: float) -> bool:
        """Await ``awaitable`` until ``deadline`` or a forced stop; True if it completed."""
        task = asyncio.ensure_future(awaitable)
        force = asyncio.create_task(self._force.wait())
        await asyncio.wait(
            {task, force}, timeout=max(deadline - time.monotonic(), 0), return_when=asyncio.FIRST_COMPLETED
        )
        force.cancel()
        if task.done():
            return True
        task.cancel()
        return False


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def _describe_exit(code: int | None) -> str:
    if code is None:
        return "still running"
    if code < 0:
        return f"killed by {signal.Signals(-code).name}"
    return f"exit code {code}"
