"""The websocket on picows (livetable/server/picows_ws.py), served by uvicorn in this
process on a real socket, driven by hand: what the gateway relies on of its transport —
the frame budget with the frames that are not a message, fragments joined and held to the
size limit, the close codes, flow control, the drain on a server stop, the keepalive, and
a broadcast framed once for every connection.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import gc
import json
import os
import struct
import weakref
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from asgi_server import served
from starlette.applications import Starlette
from starlette.routing import WebSocketRoute
from starlette.websockets import WebSocket
from test_gateway import _gateway, event, settle, snapshot

from livetable.bus import TableBatch
from livetable.cli.serve import websocket_protocol
from livetable.config import Settings, load_settings
from livetable.server.framed_ws import (
    ARRIVED_AT,
    BUDGET,
    DIRECT,
    EXTENSION,
    FramedWebSocketProtocol,
    Line,
)
from livetable.server.gateway.client import Client
from livetable.server.guard import ConnectionGuard
from livetable.server.picows_ws import PicowsWebSocketProtocol

#: Waits on the wall clock (the server's start, its keepalive): not in bin/test --fast.
pytestmark = pytest.mark.sleeps

MAX_SIZE = 1000
WS = {"ws": PicowsWebSocketProtocol, "ws_max_size": MAX_SIZE,
      "ws_per_message_deflate": False}
TEXT, CONT, BINARY, CLOSE, PING, PONG = 0x1, 0x0, 0x2, 0x8, 0x9, 0xA


def frame(opcode: int, payload: bytes = b"", fin: bool = True, rsv: int = 0) -> bytes:
    """A client's frame: masked (with zeros, so the payload stays as it is)."""
    head = (0x80 if fin else 0) | rsv | opcode
    n = len(payload)
    length = (bytes([0x80 | n]) if n < 126 else
              bytes([0x80 | 126]) + struct.pack("!H", n))
    return bytes([head]) + length + b"\x00\x00\x00\x00" + payload


class App:
    """Accepts (unless the origin is ``http://evil``), names a frame budget, and keeps
    every message it receives; a text ``close`` is answered with a close 4000."""

    def __init__(self) -> None:
        self.charged = 0
        self.messages: list[dict[str, Any]] = []
        self.protocols: list[PicowsWebSocketProtocol] = []

    def charge(self, frames: int) -> None:
        self.charged += frames

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        assert (await receive())["type"] == "websocket.connect"
        if (b"origin", b"http://evil") in scope["headers"]:
            await send({"type": "websocket.close"})
            return
        await send({"type": "websocket.accept"})
        self.protocols.append(scope["extensions"][EXTENSION].__self__)
        scope["extensions"][BUDGET](self.charge)
        while True:
            message = await receive()
            self.messages.append(message)
            if message["type"] == "websocket.disconnect":
                return
            if message.get("text") == "close":
                await send({"type": "websocket.close", "code": 4000})
            elif message.get("text") == "echo":
                await send({"type": "websocket.send", "text": "echoed"})


@contextlib.asynccontextmanager
async def opened(url: str, origin: str = "", key: str = "") -> AsyncIterator[
        tuple[bytes, asyncio.StreamReader, asyncio.StreamWriter]]:
    """A websocket opened by hand: (the answer's head, reader, writer)."""
    host, port = url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    key = key or base64.b64encode(os.urandom(16)).decode()
    writer.write((f"GET /ws HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\n"
                  f"Connection: keep-alive, Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
                  "Sec-WebSocket-Extensions: permessage-deflate\r\n"
                  + (f"Origin: {origin}\r\n" if origin else "")
                  + "Sec-WebSocket-Version: 13\r\n\r\n").encode())
    try:
        yield await reader.readuntil(b"\r\n\r\n"), reader, writer
    finally:
        writer.close()


async def next_frame(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    """The server's next frame (unmasked): (opcode, payload)."""
    async with asyncio.timeout(5):
        first, second = await reader.readexactly(2)
        length = second & 0x7F
        if length == 126:
            (length,) = struct.unpack("!H", await reader.readexactly(2))
        return first & 0x0F, await reader.readexactly(length)


async def close_code(reader: asyncio.StreamReader) -> int:
    opcode, payload = await next_frame(reader)
    assert opcode == CLOSE, (opcode, payload)
    return int.from_bytes(payload[:2], "big")


async def test_the_upgrade_is_answered_101_without_extensions_or_refused() -> None:
    app = App()
    async with served(app, **WS) as url:
        async with opened(url) as (head, _, _):
            assert head.startswith(b"HTTP/1.1 101") and b"extensions" not in head.lower()
        async with opened(url, origin="http://evil") as (head, _, _):
            assert head.startswith(b"HTTP/1.1 403")  # the app closed before its accept
        async with opened(url, key="short") as (head, _, _):
            assert head.startswith(b"HTTP/1.1 400")


async def test_frames_that_are_not_a_message_are_charged_and_fragments_joined() -> None:
    app = App()
    async with served(app, **WS) as url, opened(url) as (_, reader, writer):
        writer.write(frame(PING, b"p") + frame(PONG) + frame(TEXT, b'{"a":', fin=False)
                     + frame(CONT, b"", fin=False) + frame(CONT, b"1}"))
        assert await next_frame(reader) == (PONG, b"p")
        await settle(lambda: len(app.messages) == 1)
        assert app.messages[0]["text"] == '{"a":1}'
        assert isinstance(app.messages[0][ARRIVED_AT], int)
        assert app.charged == 4  # the ping, the pong, two fragments before the last
        writer.write(frame(BINARY, b"\x01\x02"))
        await settle(lambda: len(app.messages) == 2)
        assert app.messages[1]["bytes"] == b"\x01\x02"


@pytest.mark.parametrize(("frames", "code"), [
    pytest.param(frame(TEXT, b"x" * 600, fin=False) + frame(CONT, b"y" * 600), 1009,
                 id="a message over ws_max_size"),
    pytest.param(frame(TEXT, b"x" * (MAX_SIZE + 1)), 1009, id="a frame over ws_max_size"),
    pytest.param(frame(TEXT, b"\xff\xfe"), 1007, id="invalid UTF-8"),
    pytest.param(frame(TEXT, b"{}", rsv=0x40), 1002, id="RSV1 without an extension"),
    pytest.param(frame(CONT, b"{}"), 1002, id="a continuation of nothing"),
])
async def test_a_frame_that_breaks_the_protocol_is_closed_with_its_code(
        frames: bytes, code: int) -> None:
    app = App()
    async with served(app, **WS) as url, opened(url) as (_, reader, writer):
        writer.write(frames)
        assert await close_code(reader) == code
        await settle(lambda: app.messages and app.messages[-1]["type"]
                     == "websocket.disconnect")


async def test_the_close_handshake_either_way() -> None:
    app = App()
    async with served(app, **WS) as url:
        async with opened(url) as (_, reader, writer):  # the app closes
            writer.write(frame(TEXT, b"close"))
            assert await close_code(reader) == 4000
            writer.write(frame(TEXT, b"after the close: dropped"))
            writer.write(frame(CLOSE, struct.pack("!H", 4000)))
            assert await reader.read() == b""  # the handshake done: the socket closed
        assert [m["type"] for m in app.messages] == ["websocket.receive",
                                                     "websocket.disconnect"]
        async with opened(url) as (_, reader, writer):  # the client closes
            writer.write(frame(CLOSE, struct.pack("!H", 1001) + b"bye"))
            assert await close_code(reader) == 1001
            await settle(lambda: app.messages[-1].get("code") == 1001)
            assert app.messages[-1]["reason"] == "bye"


async def test_write_frame_and_send_wait_while_the_transport_is_paused() -> None:
    app = App()
    async with served(app, **WS) as url, opened(url) as (_, reader, _):
        await settle(lambda: app.protocols)
        ws = app.protocols[0]
        ws.pause_writing()  # as the transport does past its high-water mark
        assert ws.write_frame(b"\x81\x01a") is False
        sending = asyncio.ensure_future(ws.send({"type": "websocket.send", "text": "b"}))
        await asyncio.sleep(0.01)
        assert not sending.done()
        ws.resume_writing()
        await sending
        assert ws.write_frame(b"\x81\x01c") is True
        assert [await next_frame(reader) for _ in range(2)] == [(TEXT, b"b"), (TEXT, b"c")]


async def test_a_server_stop_closes_every_websocket_1012() -> None:
    app = App()
    async with contextlib.AsyncExitStack() as client:
        async with served(app, **WS) as url:
            _, reader, _ = await client.enter_async_context(opened(url))
            await settle(lambda: app.protocols)
        # the server stopped with the client's socket still open
        assert await close_code(reader) == 1012
        assert await reader.read() == b""
    assert app.messages[-1] == {"type": "websocket.disconnect", "code": 1012}
    assert not app.protocols[0].connections


async def test_a_peer_that_does_not_answer_the_keepalive_ping_is_closed() -> None:
    app = App()
    async with served(app, **WS, ws_ping_interval=0.05, ws_ping_timeout=0.05) as url, \
            opened(url) as (_, reader, _):
        opcode, payload = await next_frame(reader)
        assert opcode == PING and len(payload) == 4
        assert await close_code(reader) == 1011


async def test_a_broadcast_writes_one_encoded_frame_to_every_connection(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The gateway on picows: a table event is framed once and the same bytes are written
    to every viewer's socket, one write each (as tests/unit/test_broadcast_once.py for the
    gateway alone)."""
    gateway = _gateway(tmp_path, heartbeat=0)

    async def player(ws: WebSocket) -> None:
        await gateway.serve(ws, "player")

    # every write to a socket, whichever way it goes: straight to the socket the
    # connection told of (the fan-out's line, Client.direct), to its transport, or through
    # write_frame
    written: list[tuple[object, bytes]] = []
    write_frame = PicowsWebSocketProtocol.write_frame
    told = Client._told

    def counted(self: PicowsWebSocketProtocol, data: bytes) -> bool:
        written.append((self.transport, data))
        return write_frame(self, data)

    class Counted:
        def __init__(self, transport: asyncio.Transport) -> None:
            self.transport = transport

        def is_closing(self) -> bool:
            return self.transport.is_closing()

        def write(self, data: bytes) -> None:
            written.append((self.transport, data))
            self.transport.write(data)

    def told_counted(self: Client, line: Line | None) -> None:
        if line is None:
            return told(self, None)
        transport, send = line

        def send_counted(data: bytes) -> int:
            written.append((transport, data))
            return send(data)
        told(self, (Counted(transport), send_counted))  # type: ignore[arg-type]

    monkeypatch.setattr(PicowsWebSocketProtocol, "write_frame", counted)
    monkeypatch.setattr(Client, "_told", told_counted)
    app = Starlette(routes=[WebSocketRoute("/ws", player)])
    viewers = 5
    hello = frame(TEXT, json.dumps({"type": "hello", "v": 1, "table": "t1"}).encode())
    async with served(app, **WS) as url, contextlib.AsyncExitStack() as stack:
        readers = []
        for _ in range(viewers):
            _, reader, writer = await stack.enter_async_context(opened(url))
            writer.write(hello)
            assert json.loads((await next_frame(reader))[1])["type"] == "welcome"
            readers.append(reader)
        await settle(lambda: len(gateway.feeds["t1"].clients) == viewers)
        written.clear()
        gateway.deliver(TableBatch(table="t1", epoch=1, seq=1, frames=[(1, event(1))],
                                   snapshot=snapshot(1)))
        assert len(written) == viewers and len({id(w) for _, w in written}) == 1
        assert len({id(ws) for ws, _ in written}) == viewers  # one write to each
        assert all(client.direct is not None for client in gateway.feeds["t1"].clients)
        for reader in readers:
            assert await next_frame(reader) == (TEXT, event(1))
    await gateway.store.close()


async def test_the_fan_out_writes_straight_only_while_the_connection_may_take_it(
        tmp_path: Path) -> None:
    """The fan-out writes to a viewer's transport with no check of its own a socket
    (``Client.direct``) only while the server says a frame may go straight to it and the
    viewer has nothing queued. Paused by flow control, the viewer's frames wait in its
    queue and go out in order after the resume, then straight again; a closing connection
    is never written to straight."""
    gateway = _gateway(tmp_path, heartbeat=0)

    async def player(ws: WebSocket) -> None:
        await gateway.serve(ws, "player")

    app = Starlette(routes=[WebSocketRoute("/ws", player)])
    hello = frame(TEXT, json.dumps({"type": "hello", "v": 1, "table": "t1"}).encode())

    def step(seq: int) -> TableBatch:
        return TableBatch(table="t1", epoch=1, seq=seq, frames=[(seq, event(seq))],
                          snapshot=snapshot(seq))

    async with served(app, **WS) as url, opened(url) as (_, reader, writer):
        writer.write(hello)
        assert json.loads((await next_frame(reader))[1])["type"] == "welcome"
        await settle(lambda: len(gateway.feeds["t1"].clients) == 1)
        [client] = gateway.feeds["t1"].clients
        protocol: PicowsWebSocketProtocol = client.ws.scope["extensions"][DIRECT].__self__
        assert client.direct is protocol.line

        protocol.pause_writing()  # as the transport does past its high-water mark
        assert client.direct is None
        gateway.deliver(step(1))
        gateway.deliver(step(2))
        assert client.queue or client.in_flight  # waiting here, in order
        protocol.resume_writing()
        assert [await next_frame(reader) for _ in range(2)] == [(TEXT, event(1)),
                                                                 (TEXT, event(2))]
        await settle(lambda: client.direct is protocol.line)  # drained: straight again
        gateway.deliver(step(3))
        assert await next_frame(reader) == (TEXT, event(3))

        protocol.shutdown()  # the server stops: its close goes out, nothing after it
        assert client.direct is None
        gateway.deliver(step(4))
        assert await close_code(reader) == 1012
    await gateway.store.close()


def test_the_setting_chooses_the_protocol_uvicorn_is_given() -> None:
    assert websocket_protocol(Settings()) is PicowsWebSocketProtocol
    uvicorns = load_settings({"LIVETABLE_WS_TRANSPORT": "uvicorn"})
    assert websocket_protocol(uvicorns) is FramedWebSocketProtocol


@pytest.mark.parametrize("transport", [FramedWebSocketProtocol, PicowsWebSocketProtocol])
async def test_an_upgraded_connection_leaves_nothing_of_its_http_protocol(
        transport: type[asyncio.Protocol]) -> None:
    """The guard's head timer, armed at the connection's start, held the HTTP protocol —
    its parser, the request, its scope: ~3 KiB an idle viewer — for its 10 s after the
    upgrade had handed the socket over (docs/benchmarks.md, the transport)."""
    made: list[weakref.ref[Any]] = []

    class Recorded(ConnectionGuard(head_timeout=10, per_address=10).protocol()):  # type: ignore[misc]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            made.append(weakref.ref(self))

    app = App()
    async with served(app, **{**WS, "ws": transport}, http=Recorded) as url, \
            opened(url) as (head, _, _):
        assert head.startswith(b"HTTP/1.1 101")
        gc.collect()
        assert made and made[0]() is None


async def test_a_connection_that_ended_is_freed_without_the_collector(
        tmp_path: Path) -> None:
    """Nothing of a closed connection waits for a full collection (the gateway runs one
    only while the tables are idle): its protocol is freed as its last reference goes."""
    gateway = _gateway(tmp_path, heartbeat=0)
    protocols: list[weakref.ref[Any]] = []

    async def player(ws: WebSocket) -> None:
        protocols.append(weakref.ref(ws.scope["extensions"][EXTENSION].__self__))
        await gateway.serve(ws, "player")

    app = Starlette(routes=[WebSocketRoute("/ws", player)])
    hello = frame(TEXT, json.dumps({"type": "hello", "v": 1, "table": "t1"}).encode())
    gc.disable()
    try:
        async with served(app, **WS) as url:
            async with opened(url) as (_, reader, writer):
                writer.write(hello)
                assert json.loads((await next_frame(reader))[1])["type"] == "welcome"
                writer.write(frame(CLOSE, struct.pack("!H", 1000)))
                assert await close_code(reader) == 1000
            await settle(lambda: not gateway.clients and protocols[0]() is None)
    finally:
        gc.enable()
        await gateway.store.close()


async def test_bytes_sent_before_the_accept_are_held_by_the_kernel_not_here() -> None:
    """A client that does not wait for the 101 had every byte it sent kept in the
    protocol until the app accepted (``early``): bounded by nothing but its speed. Past a
    message's worth, reading pauses until the accept; then the bytes are read as frames."""
    accept = asyncio.Event()
    protocols: list[PicowsWebSocketProtocol] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        assert (await receive())["type"] == "websocket.connect"
        protocols.append(scope["extensions"][EXTENSION].__self__)
        await accept.wait()
        await send({"type": "websocket.accept"})
        while (await receive())["type"] != "websocket.disconnect":
            pass

    async with served(app, **WS) as url:
        host, port = url.removeprefix("http://").split(":")
        reader, writer = await asyncio.open_connection(host, int(port))
        key = base64.b64encode(os.urandom(16)).decode()
        writer.write((f"GET /ws HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\n"
                      f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
                      "Sec-WebSocket-Version: 13\r\n\r\n").encode())
        flood = frame(TEXT, b"{}") * 400_000  # 3.2 MB of small frames, not waiting
        writer.write(flood)
        try:
            await settle(lambda: protocols and len(protocols[0].early) > MAX_SIZE)
            for _ in range(50):  # the loop's turns in which the rest would have come
                await asyncio.sleep(0.002)
            held = len(protocols[0].early)
            assert held < MAX_SIZE + 512 * 1024 < len(flood), held
            accept.set()
            assert (await reader.readuntil(b"\r\n\r\n")).startswith(b"HTTP/1.1 101")
            # after the accept the held bytes are read on as frames: never left paused
            await settle(lambda: protocols[0].transport.is_reading()
                         or protocols[0].disconnected, timeout=5)
        finally:
            writer.close()
