"""A small blocking Kafka wire client for benchmarks that must see every byte and every frame.

The benchmarks here compare brokers on what crosses the socket (request and response bytes) and on
when a response arrives, so they cannot go through a client library that batches, retries or hides
the frames. This client speaks kipling's own codec (:mod:`protocol.api`) over a plain socket: one
request at a time with :meth:`Connection.request`, or split into :meth:`Connection.send` and
:meth:`Connection.poll_frames` when two connections are watched together with a selector (the long
poll bench reads a parked fetch and a produce acknowledgment in one thread, so their arrival times
are taken by the same clock without thread hand-offs in between).

It is blocking on purpose: a benchmark client that adds an event loop of its own adds scheduling
delay to every latency it reports.
"""

from __future__ import annotations

import socket
import time
from dataclasses import dataclass
from typing import Any

from protocol.api import Response, decode_response, encode_request
from protocol.api_keys import ApiKey
from protocol.framing import encode_frame

SIZE_PREFIX = 4
RECV_CHUNK = 1 << 20
"""One recv call's worth: large enough that a multi-megabyte full fetch takes few system calls."""


@dataclass(frozen=True, slots=True)
class Exchange:
    """One request and its response, with the bytes each took on the wire (size prefixes included)."""

    response: Response
    request_bytes: int
    response_bytes: int


class Connection:
    """One TCP connection to a broker on loopback; requests are numbered by correlation id."""

    def __init__(self, host: str, port: int, *, client_id: str = "kipling-bench", timeout_s: float = 60.0):
        self.sock = socket.create_connection((host, port), timeout=timeout_s)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.client_id = client_id
        self._correlation_id = 0
        self._buffer = bytearray()

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def fileno(self) -> int:
        return self.sock.fileno()

    def send(self, api_key: int, version: int, body: Any) -> tuple[int, int]:
        """Send one request; returns (correlation id, bytes sent including the size prefix)."""
        self._correlation_id += 1
        frame = encode_frame(encode_request(api_key, version, self._correlation_id, self.client_id, body))
        self.sock.sendall(frame)
        return self._correlation_id, len(frame)

    def send_encoded(self, frame: bytes) -> None:
        """Send a frame built beforehand (see :meth:`encode`), so that encoding stays out of a timing."""
        self.sock.sendall(frame)

    def encode(self, api_key: int, version: int, body: Any) -> tuple[int, bytes]:
        """Build the next request frame (size prefix included) without sending it."""
        self._correlation_id += 1
        frame = encode_frame(encode_request(api_key, version, self._correlation_id, self.client_id, body))
        return self._correlation_id, frame

    def read_frame(self) -> bytes:
        """Block until one whole response frame has arrived; returns it without its size prefix."""
        while True:
            frame = self._take_frame()
            if frame is not None:
                return frame
            self._recv_some()

    def poll_frames(self) -> list[bytes]:
        """Read what the socket has now (call when a selector says it is readable): complete frames."""
        self._recv_some()
        frames = []
        while (frame := self._take_frame()) is not None:
            frames.append(frame)
        return frames

    def request(self, api_key: int, version: int, body: Any) -> Exchange:
        correlation_id, sent = self.send(api_key, version, body)
        frame = self.read_frame()
        return Exchange(self.decode(frame, api_key, version, correlation_id), sent, len(frame) + SIZE_PREFIX)

    @staticmethod
    def decode(frame: bytes, api_key: int, version: int, correlation_id: int) -> Response:
        response = decode_response(frame, api_key, version)
        if response.header.correlation_id != correlation_id:
            raise ConnectionError(f"correlation id {response.header.correlation_id} != {correlation_id}")
        return response

    def _recv_some(self) -> None:
        chunk = self.sock.recv(RECV_CHUNK)
        if not chunk:
            raise ConnectionError("connection closed by the broker")
        self._buffer += chunk

    def _take_frame(self) -> bytes | None:
        if len(self._buffer) < SIZE_PREFIX:
            return None
        size = int.from_bytes(self._buffer[:SIZE_PREFIX], "big")
        if len(self._buffer) < SIZE_PREFIX + size:
            return None
        frame = bytes(self._buffer[SIZE_PREFIX : SIZE_PREFIX + size])
        del self._buffer[: SIZE_PREFIX + size]
        return frame


def api_ranges(conn: Connection) -> dict[int, tuple[int, int]]:
    """The broker's advertised (min, max) version per API key, asked with ApiVersions v0.

    v0 is the one version every broker must answer, whatever it advertises for the others.
    """
    body = conn.request(ApiKey.API_VERSIONS, 0, {}).response.body
    if body.error_code:
        raise ConnectionError(f"ApiVersions failed with error {body.error_code}")
    return {k.api_key: (k.min_version, k.max_version) for k in body.api_keys}


def pick_version(ranges: dict[int, tuple[int, int]], api_key: int, low: int, high: int) -> int:
    """The highest version in ``[low, high]`` (what the bench can speak) that the broker advertises."""
    if api_key not in ranges:
        raise ConnectionError(f"broker does not advertise api key {api_key}")
    broker_low, broker_high = ranges[api_key]
    version = min(high, broker_high)
    if version < max(low, broker_low):
        raise ConnectionError(f"no common version for api key {api_key}: broker {broker_low}-{broker_high}")
    return version


def create_topics(
    conn: Connection,
    topics: list[tuple[str, int]],
    configs: dict[str, str] | None = None,
    *,
    version: int = 4,
    chunk_partitions: int = 2_000,
    timeout_s: float = 600.0,
) -> dict[str, Any]:
    """Create ``(name, partitions)`` topics, at most ``chunk_partitions`` partitions per request.

    Returns the topic ids by name (from v7; the zero UUID before). Kafka refuses more than 10,000
    partitions in one request, and a broker creating thousands of partition directories in one
    request can take minutes, so requests are chunked and the socket timeout is long.
    """
    conn.sock.settimeout(timeout_s)
    config_list = [{"name": k, "value": v} for k, v in (configs or {}).items()]
    ids: dict[str, Any] = {}
    chunk: list[dict[str, Any]] = []
    count = 0

    def flush() -> None:
        nonlocal chunk, count
        if not chunk:
            return
        body = {"topics": chunk, "timeout_ms": int(timeout_s * 1000), "validate_only": False}
        response = conn.request(ApiKey.CREATE_TOPICS, version, body).response.body
        for topic in response.topics:
            if topic.error_code not in (0, 36):  # 36 TOPIC_ALREADY_EXISTS: a rerun on the same broker
                raise RuntimeError(
                    f"CreateTopics {topic.name}: error {topic.error_code} {topic.error_message}"
                )
            ids[topic.name] = getattr(topic, "topic_id", None)
        chunk, count = [], 0

    for name, partitions in topics:
        if count + partitions > chunk_partitions:
            flush()
        chunk.append(
            {
                "name": name,
                "num_partitions": partitions,
                "replication_factor": 1,
                "assignments": [],
                "configs": config_list,
            }
        )
        count += partitions
    flush()
    return ids


def wait_for_leaders(
    conn: Connection, topics: list[str], *, version: int = 4, timeout_s: float = 60.0
) -> None:
    """Poll Metadata until every partition of ``topics`` has a leader (creation may be asynchronous)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        body = conn.request(
            ApiKey.METADATA,
            version,
            {"topics": [{"name": t} for t in topics], "allow_auto_topic_creation": False},
        ).response.body
        ready = all(
            t.error_code == 0 and t.partitions and all(p.leader_id >= 0 for p in t.partitions)
            for t in body.topics
        )
        if ready:
            return
        time.sleep(0.1)
    raise TimeoutError(f"topics {topics[:3]}... have no leader after {timeout_s}s")
