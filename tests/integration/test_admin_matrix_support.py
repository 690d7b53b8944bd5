"""The admin matrix's witness: a TCP proxy in front of a broker that records the header of every
request it forwards (API key, API version, client id), so a test can state which version of an
admin API a client library really sent, for every API (the brokers log versions only for config
changes).

Start the broker with ``advertised.listeners=PLAINTEXT://127.0.0.1:<proxy port>``: Metadata then
names the proxy, so a client keeps talking through it after bootstrapping (other brokers of a
cluster too, which only costs a thread per connection). Bytes are forwarded unchanged; only the
client → broker direction is split into frames, to read their headers.

The module holds the helpers shared by the ``test_admin_matrix_*`` files (the name is the one those
files may use) and a test of the header parsing.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from protocol.api_keys import ApiKey


@dataclass(frozen=True)
class SeenRequest:
    api_key: int
    api_version: int
    client_id: str | None


def parse_request_header(frame: bytes) -> SeenRequest:
    """API key, version and client id of a request frame (size prefix removed). Every request header
    version (0-2) starts with key, version, correlation id, then (from v1) a nullable int16-sized
    client id; v0 headers (ControlledShutdown v0 only) never reach a broker from these clients."""
    api_key, api_version, _correlation_id, size = struct.unpack_from(">hhih", frame, 0)
    client_id = None if size < 0 else frame[10 : 10 + size].decode("utf-8", errors="replace")
    return SeenRequest(api_key, api_version, client_id)


def _read_exact(sock: socket.socket, n: int) -> bytes | None:
    chunks = []
    while n:
        chunk = sock.recv(n)
        if not chunk:
            return None
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


@dataclass
class _Link:
    client: socket.socket
    broker: socket.socket
    closed: threading.Event = field(default_factory=threading.Event)

    def close(self) -> None:
        self.closed.set()
        for sock in (self.client, self.broker):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                sock.close()


class RecordingProxy:
    """Forwards connections on ``port`` to ``broker_port`` and records each request's header."""

    def __init__(self, broker_port: int) -> None:
        self.broker_port = broker_port
        """Where the broker listens (it must listen there before a client connects)."""
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.1)  # accept() wakes up to notice stop()
        self.port: int = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._seen: list[SeenRequest] = []
        self._links: list[_Link] = []
        self._threads: list[threading.Thread] = []
        self._stopped = threading.Event()

    def start(self) -> RecordingProxy:
        self._spawn(self._accept)
        return self

    def stop(self) -> None:
        self._stopped.set()
        with contextlib.suppress(OSError):
            self._listener.close()
        with self._lock:
            links = list(self._links)
        for link in links:
            link.close()
        for thread in list(self._threads):
            thread.join(10)

    @property
    def advertised(self) -> str:
        """The override making the broker name this proxy in Metadata."""
        return f"advertised.listeners=PLAINTEXT://127.0.0.1:{self.port}"

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def seen(self) -> list[SeenRequest]:
        """Every request header recorded so far, in arrival order."""
        with self._lock:
            return list(self._seen)

    def versions(self, api: ApiKey, client_id: str) -> set[int]:
        """The versions of ``api`` sent by clients whose id starts with ``client_id``."""
        with self._lock:
            return {
                seen.api_version
                for seen in self._seen
                if seen.api_key == api and (seen.client_id or "").startswith(client_id)
            }

    # -- threads --------------------------------------------------------------------------------

    def _spawn(self, target: Callable[..., None], *args: object) -> None:
        thread = threading.Thread(target=self._guarded, args=(target, *args), daemon=True)
        with self._lock:
            self._threads.append(thread)
        thread.start()

    def _guarded(self, target: Callable[..., None], *args: object) -> None:
        try:
            target(*args)
        except OSError:
            pass  # a connection went away: its link is closed below
        finally:
            for arg in args:
                if isinstance(arg, _Link):
                    arg.close()

    def _accept(self) -> None:
        while not self._stopped.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            client.settimeout(None)
            try:
                broker = socket.create_connection(("127.0.0.1", self.broker_port), timeout=10)
            except OSError:  # the broker is not listening (yet, or any more): the client retries
                client.close()
                continue
            broker.settimeout(None)
            link = _Link(client, broker)
            with self._lock:
                self._links.append(link)
            self._spawn(self._upstream, link)
            self._spawn(self._downstream, link)

    def _upstream(self, link: _Link) -> None:
        while not link.closed.is_set():
            size = _read_exact(link.client, 4)
            frame = _read_exact(link.client, struct.unpack(">i", size)[0]) if size else None
            if size is None or frame is None:
                return
            with self._lock:
                self._seen.append(parse_request_header(frame))
            link.broker.sendall(size + frame)

    def _downstream(self, link: _Link) -> None:
        while not link.closed.is_set():
            chunk = link.broker.recv(1 << 16)
            if not chunk:
                return
            link.client.sendall(chunk)


def test_parse_request_header() -> None:
    frame = struct.pack(">hhih", 44, 1, 7, 12) + b"kafka-python" + b"\x00rest"
    assert parse_request_header(frame) == SeenRequest(44, 1, "kafka-python")
    assert parse_request_header(struct.pack(">hhih", 3, 12, 1, -1)) == SeenRequest(3, 12, None)
