"""Start-up time of a fresh single node: from the process's start to its first answered request.

A kipling single node is a KRaft cluster of one, so its start-up includes what a cluster node does:
format the log dir, open ``__cluster_metadata-0``, start the controller listener, register the
broker with its own controller, replay the metadata log and wait to be unfenced before the client
listener opens. This measures, for each broker, ``RUNS`` starts on a fresh directory: the wall time
from ``Popen`` until an ApiVersions request on the client port is answered, and until a Metadata
request is, side by side with Tansu (memory engine) and the ratio of the medians.

``python -m bench.startup [--runs N]``; prints a table; never asserts a time.
"""

from __future__ import annotations

import argparse
import contextlib
import socket
import statistics
import time

from bench.broker_proc import KiplingProcess, ServerProcess, TansuProcess, tansu_binary
from protocol.api import decode_response, encode_request
from protocol.api_keys import ApiKey
from protocol.framing import encode_frame

RUNS = 5
DEADLINE_S = 60.0


def _ask(port: int, api_key: ApiKey, version: int, body: dict[str, object]) -> bool:
    """One request on a new connection; True once it is answered."""
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1.0) as sock:
        sock.sendall(encode_frame(encode_request(api_key, version, 1, "bench-startup", body)))
        size = int.from_bytes(_read(sock, 4), "big")
        decode_response(_read(sock, size), api_key, version)
        return True
    return False


def _read(sock: socket.socket, n: int) -> bytes:
    chunks = []
    while n:
        chunk = sock.recv(n)
        if not chunk:
            raise OSError("closed")
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def _until(port: int, api_key: ApiKey, version: int, body: dict[str, object], started: float) -> float:
    while time.monotonic() - started < DEADLINE_S:
        if _ask(port, api_key, version, body):
            return time.monotonic() - started
        time.sleep(0.005)
    raise TimeoutError(f"no answer to {api_key.name} within {DEADLINE_S}s")


def measure(server: ServerProcess) -> tuple[float, float]:
    """Seconds from spawn to the first ApiVersions answer, and to the first Metadata answer."""
    started = time.monotonic()
    server.start(timeout_s=DEADLINE_S)
    api_versions = _until(server.port, ApiKey.API_VERSIONS, 0, {}, started)
    metadata = _until(server.port, ApiKey.METADATA, 1, {"topics": []}, started)
    return api_versions, metadata


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=RUNS)
    args = parser.parse_args()
    factories = {"kipling": KiplingProcess}
    if tansu_binary() is not None:
        factories["tansu"] = TansuProcess
    medians: dict[str, float] = {}
    print(f"{'broker':<8} {'run':>3} {'ApiVersions s':>14} {'Metadata s':>11}")
    for name, factory in factories.items():
        answered = []
        for run in range(args.runs):
            server = factory()
            try:
                api_versions, metadata = measure(server)
            finally:
                server.cleanup()
            answered.append(metadata)
            print(f"{name:<8} {run:>3} {api_versions:>14.3f} {metadata:>11.3f}")
        medians[name] = statistics.median(answered)
    print()
    for name, median in medians.items():
        print(f"{name}: median {median:.3f} s to the first Metadata answer")
    if "tansu" in medians:
        print(f"ratio kipling/tansu: {medians['kipling'] / medians['tansu']:.1f}")


if __name__ == "__main__":
    main()
