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

import struct
from dataclasses import dataclass

from protocol.api_keys import ApiKey
from tests.integration.fault_proxy import FaultProxy


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


class RecordingProxy(FaultProxy):
    """The fault proxy with no fault: forwards connections on ``port`` to ``broker_port`` and records
    each request's header."""

    def __init__(self, broker_port: int) -> None:
        super().__init__(broker_port)
        self.broker_port = broker_port
        """Where the broker listens (it must listen there before a client connects)."""
        self._seen: list[SeenRequest] = []

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

    def _note_request(self, frame: bytes) -> None:
        with self._lock:
            self._seen.append(parse_request_header(frame))


def test_parse_request_header() -> None:
    frame = struct.pack(">hhih", 44, 1, 7, 12) + b"kafka-python" + b"\x00rest"
    assert parse_request_header(frame) == SeenRequest(44, 1, "kafka-python")
    assert parse_request_header(struct.pack(">hhih", 3, 12, 1, -1)) == SeenRequest(3, 12, None)
