"""The broker <-> follower IPC: frame codec, request/reply matching, events, and closing."""

from __future__ import annotations

import asyncio
import json
import socket
import struct
from collections.abc import AsyncIterator
from typing import Any

import pytest

from client.replica_ipc import (
    FrameDecoder,
    IpcChannel,
    IpcClosedError,
    IpcProtocolError,
    IpcRemoteError,
    JsonObject,
    encode_message,
    error_reply,
    event_message,
    reply_message,
    request_message,
)
from client.replica_messages import FollowerSettings, PartitionAssignment, PartitionOffsets

# -- codec ---------------------------------------------------------------------------------------------


def test_messages_round_trip_through_frames() -> None:
    messages = [
        request_message(1, "add_partitions", {"partitions": [{"topic": "tëst", "offsets": [0, 2**62]}]}),
        reply_message(1, {"handovers": []}),
        error_reply(2, "KeyError: 'epoch'"),
        event_message("offsets", {"partitions": []}),
    ]
    stream = b"".join(encode_message(m) for m in messages)
    assert FrameDecoder().feed(stream) == messages


def test_frames_split_anywhere_are_reassembled() -> None:
    message = request_message(7, "configure", FollowerSettings().to_json())
    frame = encode_message(message)
    assert struct.unpack(">I", frame[:4]) == (len(frame) - 4,)
    decoder = FrameDecoder()
    out = []
    for i in range(len(frame)):
        out += decoder.feed(frame[i : i + 1])
        assert decoder.pending == (0 if i == len(frame) - 1 else i + 1)
    assert out == [message]


def test_a_truncated_frame_stays_pending() -> None:
    frame = encode_message(event_message("offsets", {"partitions": []}))
    decoder = FrameDecoder()
    assert decoder.feed(frame[:-3]) == []
    assert decoder.pending == len(frame) - 3
    assert decoder.feed(frame[-3:]) == [event_message("offsets", {"partitions": []})]


@pytest.mark.parametrize(
    "payload",
    [
        b"not json",
        b"[1, 2]",
        b'{"kind": "gossip"}',
        b'{"kind": "request", "type": "x"}',
        b'{"kind": "request", "id": true, "type": "x"}',
        b'{"kind": "reply"}',
        b'{"kind": "event"}',
        b'{"kind": "event", "type": "x", "body": [1]}',
        b"\xff\xfe",
    ],
)
def test_malformed_frames_are_refused(payload: bytes) -> None:
    with pytest.raises(IpcProtocolError):
        FrameDecoder().feed(struct.pack(">I", len(payload)) + payload)


def test_oversized_frames_are_refused_before_reading_them() -> None:
    with pytest.raises(IpcProtocolError):
        FrameDecoder(max_frame_bytes=10).feed(struct.pack(">I", 11))


def test_message_payloads_round_trip() -> None:
    settings = FollowerSettings(
        replica_fetch_wait_max_ms=100, broker_epoch=9, log_config={"segment.bytes": "4096"}
    )
    assert FollowerSettings.from_json(json.loads(json.dumps(settings.to_json()))) == settings
    assert (
        FollowerSettings.from_json(
            {"replica_fetch_backoff_ms": 5, "from_the_future": 1}
        ).replica_fetch_backoff_ms
        == 5
    )
    assignment = PartitionAssignment({"topic": "t", "partition": 3}, {}, 1, "h", 9092, 4, 5)
    assert PartitionAssignment.from_json(json.loads(json.dumps(assignment.to_json()))) == assignment
    assert assignment.topic_partition == ("t", 3)
    offsets = PartitionOffsets("t", 3, 10, 8, 0, 12)
    assert PartitionOffsets.from_json(offsets.to_json()) == offsets


# -- channel -------------------------------------------------------------------------------------------


class Pair:
    """Two channels over a socketpair: ``broker`` asks, ``follower`` answers and sends events."""

    def __init__(self, broker: IpcChannel, follower: IpcChannel) -> None:
        self.broker = broker
        self.follower = follower
        self.events: list[tuple[str, JsonObject]] = []


@pytest.fixture
async def sockets() -> AsyncIterator[tuple[socket.socket, socket.socket]]:
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    yield a, b
    a.close()
    b.close()


@pytest.fixture
async def pair(sockets: tuple[socket.socket, socket.socket]) -> AsyncIterator[Pair]:
    broker = await IpcChannel.over_socket(sockets[0], name="broker")
    follower = await IpcChannel.over_socket(sockets[1], name="follower")
    result = Pair(broker, follower)
    broker.start(on_event=lambda kind, body: result.events.append((kind, body)))
    yield result
    await broker.close()
    await follower.close()


async def test_requests_get_their_own_replies(pair: Pair) -> None:
    async def handler(kind: str, body: JsonObject) -> JsonObject:
        await asyncio.sleep(body["delay"])
        return {"echo": body["n"], "kind": kind}

    pair.follower.start(on_request=handler)
    replies = await asyncio.gather(
        *(pair.broker.request("echo", {"n": n, "delay": 0.01 * (5 - n)}) for n in range(5))
    )
    assert replies == [{"echo": n, "kind": "echo"} for n in range(5)]


async def test_requests_are_served_one_at_a_time_in_order(pair: Pair) -> None:
    served: list[int] = []

    async def handler(kind: str, body: JsonObject) -> JsonObject:
        served.append(body["n"])
        await asyncio.sleep(0.01)
        served.append(-body["n"])
        return {}

    pair.follower.start(on_request=handler)
    await asyncio.gather(*(pair.broker.request("x", {"n": n}) for n in (1, 2, 3)))
    assert served == [1, -1, 2, -2, 3, -3]


async def test_replies_are_matched_by_id_not_by_order(sockets: tuple[socket.socket, socket.socket]) -> None:
    broker = await IpcChannel.over_socket(sockets[0], name="broker")
    broker.start()
    reader, writer = await asyncio.open_unix_connection(sock=sockets[1])
    try:
        first = asyncio.create_task(broker.request("a"))
        second = asyncio.create_task(broker.request("b"))
        decoder = FrameDecoder()
        received: list[JsonObject] = []
        while len(received) < 2:
            received += decoder.feed(await reader.read(4096))
        for message in reversed(received):  # answer the second one first
            writer.write(encode_message(reply_message(message["id"], {"type": message["type"]})))
        await writer.drain()
        assert await first == {"type": "a"}
        assert await second == {"type": "b"}
    finally:
        writer.close()
        await broker.close()


async def test_a_failing_handler_becomes_an_error_reply(pair: Pair) -> None:
    async def handler(kind: str, body: JsonObject) -> JsonObject:
        raise KeyError("epoch")

    pair.follower.start(on_request=handler)
    with pytest.raises(IpcRemoteError, match="KeyError"):
        await pair.broker.request("set_broker_epoch", {})
    with pytest.raises(IpcRemoteError):
        await pair.follower.request("nobody serves this side")


async def test_unsolicited_events_arrive_between_replies(pair: Pair) -> None:
    async def handler(kind: str, body: JsonObject) -> JsonObject:
        await pair.follower.send_event("offsets", {"partitions": [{"topic": "t"}]})
        return {"done": True}

    pair.follower.start(on_request=handler)
    await pair.follower.send_event("partition_failed", {"topic": "t", "partition": 0, "reason": "r"})
    assert await pair.broker.request("remove_partitions") == {"done": True}
    assert [kind for kind, _ in pair.events] == ["partition_failed", "offsets"]


async def test_a_closed_peer_fails_pending_requests(pair: Pair) -> None:
    started, release = asyncio.Event(), asyncio.Event()

    async def handler(kind: str, body: JsonObject) -> JsonObject:
        started.set()
        await release.wait()
        return {}

    pair.follower.start(on_request=handler)
    pending = asyncio.create_task(pair.broker.request("slow"))
    await started.wait()
    pair.follower._writer.close()  # the follower process died
    with pytest.raises(IpcClosedError):
        await pending
    await asyncio.wait_for(pair.broker.wait_closed(), 1)
    with pytest.raises(IpcClosedError):
        await pair.broker.request("more")
    with pytest.raises(IpcClosedError):
        await pair.broker.send_event("x", {})
    release.set()


async def test_a_peer_dying_mid_frame_closes_the_channel(
    sockets: tuple[socket.socket, socket.socket],
) -> None:
    broker = await IpcChannel.over_socket(sockets[0], name="broker")
    events: list[Any] = []
    broker.start(on_event=lambda kind, body: events.append(kind))
    frame = encode_message(event_message("offsets", {"partitions": []}))
    sockets[1].sendall(encode_message(event_message("first", {})) + frame[:-1])
    sockets[1].close()
    await asyncio.wait_for(broker.wait_closed(), 1)
    assert events == ["first"]
    await broker.close()


async def test_garbage_closes_the_channel(sockets: tuple[socket.socket, socket.socket]) -> None:
    broker = await IpcChannel.over_socket(sockets[0], name="broker")
    broker.start()
    pending = asyncio.create_task(broker.request("x"))
    sockets[1].sendall(struct.pack(">I", 5) + b"hello")
    with pytest.raises(IpcClosedError):
        await asyncio.wait_for(pending, 1)
    await broker.close()


async def test_a_request_times_out_and_its_late_reply_is_dropped(pair: Pair) -> None:
    async def handler(kind: str, body: JsonObject) -> JsonObject:
        await asyncio.sleep(body["delay"])
        return {"n": body["n"]}

    pair.follower.start(on_request=handler)
    with pytest.raises(TimeoutError):
        await pair.broker.request("slow", {"n": 1, "delay": 0.1}, timeout_s=0.02)
    assert await pair.broker.request("fast", {"n": 2, "delay": 0}) == {"n": 2}


async def test_close_lets_the_reply_in_progress_go_out(pair: Pair) -> None:
    async def handler(kind: str, body: JsonObject) -> JsonObject:
        asyncio.get_running_loop().call_soon(lambda: asyncio.ensure_future(pair.follower.close()))
        await asyncio.sleep(0.02)
        return {"handovers": ["last words"]}

    pair.follower.start(on_request=handler)
    assert await pair.broker.request("shutdown") == {"handovers": ["last words"]}
    await asyncio.wait_for(pair.broker.wait_closed(), 1)
