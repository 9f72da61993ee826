"""The fan-out's direct line on picows (livetable/server/gateway/audience.py): a step's frame
sent straight to each idle viewer's socket in one pass, with what the socket does not take
handed to the transport, in order. Served by uvicorn in this process on real sockets.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from asgi_server import served
from starlette.applications import Starlette
from starlette.routing import WebSocketRoute
from starlette.websockets import WebSocket
from test_gateway import _gateway, settle, snapshot
from test_picows_ws import TEXT, WS, close_code, frame, next_frame, opened

from livetable import protocol as p
from livetable.bus import TableBatch
from livetable.server.framed_ws import DIRECT, Line, Send
from livetable.server.gateway import Gateway
from livetable.server.gateway.audience import send_each
from livetable.server.gateway.client import Client
from livetable.server.picows_ws import PicowsWebSocketProtocol

#: Waits on the wall clock (the server's start): not in bin/test --fast.
pytestmark = pytest.mark.sleeps

HELLO = frame(TEXT, json.dumps({"type": "hello", "v": 1, "table": "t1"}).encode())


def event(seq: int, size: int = 0) -> bytes:
    return p.encode(p.TablePaused(reason="x" * size, table="t1", epoch=1, seq=seq))


def step(seq: int, size: int = 0) -> TableBatch:
    return TableBatch(table="t1", epoch=1, seq=seq, frames=[(seq, event(seq, size))],
                      snapshot=snapshot(seq))


def app_of(gateway: Gateway) -> Starlette:
    async def player(ws: WebSocket) -> None:
        await gateway.serve(ws, "player")

    return Starlette(routes=[WebSocketRoute("/ws", player)])


def test_each_socket_is_sent_the_frame_and_a_raise_does_not_stop_the_pass() -> None:
    sent: list[tuple[int, bytes]] = []

    def taking(i: int, n: int | None = None, fails: bool = False) -> Send:
        def send(data: bytes) -> int:
            sent.append((i, data))
            if fails:
                raise BlockingIOError(11, "Resource temporarily unavailable")
            return len(data) if n is None else n
        return send

    sends = [taking(0), taking(1, fails=True), taking(2, n=3), taking(3, fails=True),
             taking(4)]
    assert send_each(sends, b"frame") == [5, 0, 3, 0, 5]
    assert sent == [(i, b"frame") for i in range(5)]  # each once, in order
    assert send_each([], b"frame") == []


async def test_a_viewer_whose_socket_is_full_leaves_the_lines_and_loses_nothing(
        tmp_path: Path) -> None:
    """A viewer that stops reading: the kernel takes the fan-out's frames until its buffers
    are full; the send that is refused (or taken in part) hands the frame to the transport,
    which holds it — and the connection leaves the lines at once, so no later frame is sent
    ahead of it. Its next frames wait in its queue. When it reads again, every frame
    arrives, whole and in order, and it is back on the lines."""
    gateway = _gateway(tmp_path, heartbeat=0)
    async with served(app_of(gateway), **WS) as url, opened(url) as (_, reader, writer):
        writer.write(HELLO)
        assert json.loads((await next_frame(reader))[1])["type"] == "welcome"
        await settle(lambda: len(gateway.feeds["t1"].clients) == 1)
        audience = gateway.feeds["t1"].clients
        [client] = audience
        protocol: PicowsWebSocketProtocol = client.ws.scope["extensions"][DIRECT].__self__
        assert client.direct is protocol.line and client in audience.lines

        seq = 0
        while client.direct is not None:  # 64 KiB frames until the kernel refuses one
            seq += 1
            assert seq < 2_000, "the kernel took 128 MiB from a reader that reads nothing"
            gateway.deliver(step(seq, 64_000))
        assert client not in audience.lines and client in audience.others
        assert protocol.transport.get_write_buffer_size() > 0  # the rest, held in order
        for _ in range(3):  # these wait in the client's queue, behind it
            seq += 1
            gateway.deliver(step(seq, 64_000))
        assert client.queue

        for expected in range(1, seq + 1):
            opcode, payload = await next_frame(reader)
            assert (opcode, payload) == (TEXT, event(expected, 64_000))
        await settle(lambda: client.direct is protocol.line and client in audience.lines)
        gateway.deliver(step(seq + 1))
        assert await next_frame(reader) == (TEXT, event(seq + 1))
    await gateway.store.close()


@pytest.mark.parametrize("taken", [
    pytest.param(7, id="a short send"),
    pytest.param(BlockingIOError(11, "Resource temporarily unavailable"), id="EAGAIN"),
])
async def test_what_a_socket_does_not_take_goes_through_the_transport_in_order(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, taken: int | OSError) -> None:
    gateway = _gateway(tmp_path, heartbeat=0)
    told = Client._told

    def told_short(self: Client, line: Line | None) -> None:
        if line is None:
            return told(self, None)
        transport, send = line

        def short(data: bytes) -> int:
            if isinstance(taken, OSError):
                raise taken
            return send(data[:taken])
        told(self, (transport, short))

    monkeypatch.setattr(Client, "_told", told_short)
    async with served(app_of(gateway), **WS) as url, opened(url) as (_, reader, writer):
        writer.write(HELLO)
        assert json.loads((await next_frame(reader))[1])["type"] == "welcome"
        await settle(lambda: len(gateway.feeds["t1"].clients) == 1)
        [client] = gateway.feeds["t1"].clients
        for seq in (1, 2, 3):
            await settle(lambda: client.direct is not None)
            gateway.deliver(step(seq, 300))
        for seq in (1, 2, 3):
            assert await next_frame(reader) == (TEXT, event(seq, 300))
    await gateway.store.close()


async def test_a_lost_connection_lets_go_of_its_socket_without_closing_it(
        tmp_path: Path) -> None:
    """The direct line's socket is the transport's descriptor, not a copy: on the loss it
    is let go of (uvloop closes the descriptor, once), and a send on a line kept past the
    loss raises instead of reaching whatever socket takes the descriptor's number next."""
    gateway = _gateway(tmp_path, heartbeat=0)
    async with served(app_of(gateway), **WS) as url:
        async with opened(url) as (_, reader, writer):
            writer.write(HELLO)
            assert json.loads((await next_frame(reader))[1])["type"] == "welcome"
            await settle(lambda: len(gateway.feeds["t1"].clients) == 1)
            [client] = gateway.feeds["t1"].clients
            protocol: PicowsWebSocketProtocol = (
                client.ws.scope["extensions"][DIRECT].__self__)
            line = protocol.line
            assert line is not None and protocol.socket is not None
            fd = protocol.socket.fileno()
            writer.write(frame(0x8, (1000).to_bytes(2, "big")))
            assert await close_code(reader) == 1000
        await settle(lambda: protocol.disconnected)
        assert protocol.line is None and client.direct is None
        assert protocol.socket.fileno() == -1  # let go of, not closed by this
        with pytest.raises(OSError):
            line[1](b"late")
        assert fd >= 0
    await gateway.store.close()
