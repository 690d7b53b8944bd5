"""A blocking Kafka wire client for integration tests: send requests, read responses, misbehave."""

from __future__ import annotations

import socket
from typing import Any

from protocol.api import Response, decode_response, encode_request
from protocol.framing import encode_frame


class WireClient:
    def __init__(self, port: int, timeout_s: float = 10.0) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout_s)
        self.correlation_id = 0

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> WireClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send_raw(self, payload: bytes) -> None:
        self.sock.sendall(payload)

    def read_frame(self) -> bytes:
        size = int.from_bytes(self._read_exact(4), "big")
        return self._read_exact(size)

    def _read_exact(self, n: int) -> bytes:
        chunks = []
        while n:
            chunk = self.sock.recv(n)
            if not chunk:
                raise ConnectionError("connection closed by the broker")
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks)

    def request(self, api_key: int, version: int, body: Any, client_id: str = "wire-test") -> Response:
        self.correlation_id += 1
        self.send_raw(encode_frame(encode_request(api_key, version, self.correlation_id, client_id, body)))
        response = decode_response(self.read_frame(), api_key, version)
        assert response.header.correlation_id == self.correlation_id
        return response

    def is_closed_by_peer(self) -> bool:
        try:
            return self.sock.recv(1) == b""
        except (ConnectionResetError, TimeoutError):
            return True
