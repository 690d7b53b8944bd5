"""A fault-injecting TCP proxy between Kafka clients and one broker, for tests of producer retries.

Clients connect to the proxy; each client connection gets a connection of its own to the broker,
and whole frames are forwarded both ways. Start the broker with
``advertised.listeners=PLAINTEXT://127.0.0.1:<proxy port>``: Metadata then names the proxy, so the
client keeps talking through it after bootstrapping.

The fault: for the Produce requests that ``drop_produce(n)`` selects (``n`` counts the Produce
requests forwarded, from 1), the proxy forwards the request, waits for the broker's answer, throws the
answer away and closes both connections. The broker has appended the batch but the client never
learns it: the client sees a lost connection with requests in flight and must retry them (every
response still in flight on that connection is lost too). Since the response is awaited before the
connection is cut, the batch is always written, so every such retry is a duplicate the broker must
recognise.

The proxy decodes each Produce request with kipling's codec and records the idempotence identity of
every batch it forwards (producer id, epoch, base sequence, partition): a batch forwarded twice is a
retry that reached the broker.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from protocol.api import decode_request
from protocol.api_keys import ApiKey
from protocol.records import iter_batches

BatchId = tuple[str, int, int, int, int]
"""(topic, partition, producer id, producer epoch, base sequence)."""


def _read_exact(sock: socket.socket, n: int) -> bytes | None:
    chunks = []
    while n:
        chunk = sock.recv(n)
        if not chunk:
            return None
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def _read_frame(sock: socket.socket) -> bytes | None:
    """One size-prefixed frame (without the prefix); None when the peer closed."""
    size = _read_exact(sock, 4)
    if size is None:
        return None
    return _read_exact(sock, struct.unpack(">i", size)[0])


def _send_frame(sock: socket.socket, frame: bytes) -> None:
    sock.sendall(struct.pack(">i", len(frame)) + frame)


@dataclass
class _Link:
    """One client connection and its broker connection; ``doomed`` holds the correlation ids of the
    requests whose answer must not reach the client."""

    client: socket.socket
    broker: socket.socket
    doomed: set[int] = field(default_factory=set)
    closed: threading.Event = field(default_factory=threading.Event)

    def close(self) -> None:
        self.closed.set()
        for sock in (self.client, self.broker):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                sock.close()


class FaultProxy:
    def __init__(self, broker_port: int, drop_produce: Callable[[int], bool] = lambda n: False) -> None:
        self._broker_port = broker_port
        self._drop_produce = drop_produce
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.1)  # accept() wakes up to notice stop()
        self.port: int = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._links: list[_Link] = []
        self._threads: list[threading.Thread] = []
        self._stopped = threading.Event()
        self.produce_requests = 0
        self.dropped = 0
        """Produce answers thrown away (each one cut a connection)."""
        self.batches: Counter[BatchId] = Counter()
        """How often the broker was sent each batch."""
        self.errors: list[BaseException] = []

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> FaultProxy:
        self._spawn(self._accept, "proxy-accept")
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

    def retried_batches(self) -> int:
        """Batches the broker received more than once."""
        with self._lock:
            return sum(1 for count in self.batches.values() if count > 1)

    # -- threads --------------------------------------------------------------------------------------

    def _spawn(self, target: Callable[..., None], name: str, *args: object) -> None:
        thread = threading.Thread(target=self._guarded, args=(target, *args), name=name, daemon=True)
        with self._lock:
            self._threads.append(thread)
        thread.start()

    def _guarded(self, target: Callable[..., None], *args: object) -> None:
        try:
            target(*args)
        except OSError:
            pass  # a connection went away: the link is closed below
        except BaseException as exc:  # kept for the test to see
            self.errors.append(exc)
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
                broker = socket.create_connection(("127.0.0.1", self._broker_port), timeout=10)
            except OSError:
                client.close()
                continue
            broker.settimeout(None)
            link = _Link(client, broker)
            with self._lock:
                self._links.append(link)
            self._spawn(self._upstream, "proxy-up", link)
            self._spawn(self._downstream, "proxy-down", link)

    def _upstream(self, link: _Link) -> None:
        """Client → broker, deciding which Produce answers to drop."""
        while not link.closed.is_set():
            frame = _read_frame(link.client)
            if frame is None:
                return
            self._note_request(frame)
            api_key, _version, correlation_id = struct.unpack_from(">hhi", frame, 0)
            if api_key == ApiKey.PRODUCE:
                self._note_produce(frame)
                with self._lock:
                    self.produce_requests += 1
                    if self._drop_produce(self.produce_requests):
                        link.doomed.add(correlation_id)
            _send_frame(link.broker, frame)

    def _note_request(self, frame: bytes) -> None:
        """Every request frame on its way to the broker (a subclass records what it needs)."""

    def _note_produce(self, frame: bytes) -> None:
        body = decode_request(frame).body
        with self._lock:
            for topic in body.topic_data:
                for partition in topic.partition_data:
                    records = partition.records
                    if not records:
                        continue
                    for _, header in iter_batches(memoryview(bytes(records))):
                        key = (
                            topic.name,
                            partition.index,
                            header.producer_id,
                            header.producer_epoch,
                            header.base_sequence,
                        )
                        self.batches[key] += 1

    def _downstream(self, link: _Link) -> None:
        """Broker → client; an answer to a doomed request cuts the link instead."""
        while not link.closed.is_set():
            frame = _read_frame(link.broker)
            if frame is None:
                return
            correlation_id = struct.unpack_from(">i", frame, 0)[0]
            if correlation_id in link.doomed:
                with self._lock:
                    self.dropped += 1
                link.close()
                return
            _send_frame(link.client, frame)


__all__ = ["FaultProxy"]
