"""Frames that are not a message — pings, empty continuation frames — flooded by one
anonymous viewer, against a real ``livetable serve``, over a socket driven by hand.

Reported: 2 M pings in 12 s took the server to ~85 % CPU and the other clients' round
trip from 1 ms to 300–700 ms; 3–4 M empty continuation frames left a probe unanswered for
9–10 s. Neither reached the app, so neither counted against the connection's frame budget.
Now each is charged to it (livetable/server/framed_ws.py, ``BUDGET``; the same on picows,
server/picows_ws.py), and past it the connection is closed 4029 like any client that sends
too many frames, while a client beside it goes on being served: on either transport.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import struct
from collections.abc import Iterator

import pytest
from liveserver import WAIT, LiveServer, WireClient

MASK = b"\x00\x00\x00\x00"  # any key will do; zeros leave the payload as it is
PING = b"\x89\x80" + MASK  # FIN, opcode 9, masked, no payload
FIRST_FRAGMENT = b"\x01\x80" + MASK  # not FIN, opcode 1 (text), empty
CONTINUATION = b"\x00\x80" + MASK  # not FIN, opcode 0 (continuation), empty
#: Sent in chunks of this many frames, at most :data:`CHUNKS` of them: far past any budget.
CHUNK = 2_000
CHUNKS = 100
CLOSE_RATE_LIMITED = 4029


@pytest.fixture(scope="module", params=["uvicorn", "picows"])
def server(request: pytest.FixtureRequest,
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """A server on each websocket transport (``--ws-transport``)."""
    live = LiveServer(tmp_path_factory.mktemp("floods"),
                      env={"LIVETABLE_CLOSE_TIMEOUT": "1",
                           "LIVETABLE_WS_TRANSPORT": request.param})
    live.start(betting_seconds=5)
    try:
        yield live
    finally:
        live.stop()


def _text(message: object) -> bytes:
    payload = json.dumps(message).encode()
    assert len(payload) < 126
    return bytes([0x81, 0x80 | len(payload)]) + MASK + payload


async def _viewer(port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A websocket opened by hand, its hello sent as an anonymous viewer."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    key = base64.b64encode(os.urandom(16)).decode()
    writer.write((f"GET /ws HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\n"
                  f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
                  "Sec-WebSocket-Version: 13\r\n\r\n").encode())
    head = await reader.readuntil(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 101"), head
    writer.write(_text({"type": "hello", "v": 1, "table": "t1"}))
    return reader, writer


async def _close_code(reader: asyncio.StreamReader) -> int | None:
    """Read the server's frames (unmasked) until its close: the close's code; None if the
    connection ended without one."""
    try:
        while True:
            first, second = await reader.readexactly(2)
            length = second & 0x7F
            if length == 126:
                (length,) = struct.unpack("!H", await reader.readexactly(2))
            elif length == 127:
                (length,) = struct.unpack("!Q", await reader.readexactly(8))
            payload = await reader.readexactly(length)
            if first & 0x0F == 0x8:
                return int.from_bytes(payload[:2], "big") if len(payload) >= 2 else None
    except (asyncio.IncompleteReadError, ConnectionError):
        return None


async def _ended(reader: asyncio.StreamReader) -> bool:
    """Whether the server ends the connection (EOF or reset) after its close."""
    try:
        while await reader.read(65536):
            pass
    except ConnectionError:
        pass
    return True


async def _flood(port: int, opening: bytes, frame: bytes) -> int | None:
    """Open a viewer, send ``opening`` then ``frame`` over and over; the close code the
    server answers with (None if it never closes), once the connection has ended."""
    reader, writer = await _viewer(port)
    chunk = frame * CHUNK

    async def send() -> None:
        writer.write(opening)
        for _ in range(CHUNKS):
            writer.write(chunk)
            await writer.drain()

    sender = asyncio.create_task(send())
    try:
        code = None
        with contextlib.suppress(TimeoutError):
            # a bound on a hang, not a timing: the flood is sent in well under WAIT
            code = await asyncio.wait_for(_close_code(reader), WAIT)
        if code is not None:
            # the server does not go on reading the flood: it ends the connection
            assert await asyncio.wait_for(_ended(reader), WAIT)
        return code
    finally:
        sender.cancel()
        with contextlib.suppress(asyncio.CancelledError, ConnectionError):
            await sender
        writer.close()


async def _assert_alive(client: WireClient, t: int) -> None:
    await client.send({"type": "ping", "t": t})
    assert (await client.expect("pong"))["t"] == t
    assert not client.closed.is_set()


async def test_a_ping_flood_is_closed_and_the_neighbour_is_served(server: LiveServer) -> None:
    neighbour = await WireClient.connect(server.ws, "neighbour")
    try:
        await neighbour.hello()
        flood = asyncio.create_task(_flood(server.port, b"", PING))
        await _assert_alive(neighbour, 1)  # served while the flood is on
        assert await flood == CLOSE_RATE_LIMITED
        await _assert_alive(neighbour, 2)
    finally:
        await neighbour.close()
    assert "livetable_rate_limit_closes_total" in server.get("/metrics").text


async def test_an_empty_continuation_flood_is_closed_and_the_neighbour_is_served(
        server: LiveServer) -> None:
    neighbour = await WireClient.connect(server.ws, "neighbour")
    try:
        await neighbour.hello()
        flood = asyncio.create_task(_flood(server.port, FIRST_FRAGMENT, CONTINUATION))
        await _assert_alive(neighbour, 3)
        assert await flood == CLOSE_RATE_LIMITED
        await _assert_alive(neighbour, 4)
    finally:
        await neighbour.close()
