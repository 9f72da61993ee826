"""The same small websocket app on three transports, to tell a transport's cost from the app's.

Run by :mod:`bench.fanout_server` (``--kind uvicorn|websockets|picows``) and measured by
:mod:`bench.transport` beside ``livetable serve`` itself. Each serves ``/ws`` the way
livetable's gateway uses its socket, minus the gateway:

* a client's first text frame (its ``hello``) is answered with a ``welcome`` of the size
  livetable's is at a table between rounds (:data:`WELCOME_BYTES`), carrying the head
  ``epoch``/``seq`` so that the load generator's livetable clients take it as one;
* each event is encoded once and framed once, and the same bytes are written to every
  connection's transport (livetable's ``framed_ws`` direct write; websockets'
  ``ServerConnection.transport``; picows' ``underlying_transport``);
* permessage-deflate off, 64 KiB messages at most, as ``livetable serve``.

* ``uvicorn`` — uvicorn (uvloop, its websockets-sansio protocol as livetable subclasses it,
  :class:`~livetable.server.framed_ws.FramedWebSocketProtocol`) and a one-route Starlette
  app: what livetable's transport costs without the gateway.
* ``websockets`` — websockets' own asyncio server (``websockets.asyncio.server.serve``).
* ``picows`` — picows' server (Cython), its read buffer started small
  (:data:`PICOWS_READ_BUFFER`: it grows on demand) instead of its 16 KiB default.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bench.fanout_server import Bench

#: livetable's welcome to an anonymous viewer at a table between rounds, in bytes (measured
#: on ``livetable serve``: the snapshot with its payouts, roadmap and last chat lines).
WELCOME_BYTES = 1_900
PICOWS_READ_BUFFER = 1_024


def welcome(bench: Bench) -> bytes:
    head = f'{{"type":"welcome","v":1,"epoch":{bench.epoch},"seq":{bench.seq},"pad":"'
    return (head + "x" * max(0, WELCOME_BYTES - len(head) - 2) + '"}').encode()


def _framed(bench: Bench, seq: int, pad: int) -> bytes:
    from bench.fanout_server import ENCODER, event
    from livetable.server.framed_ws import text_frame

    return text_frame(ENCODER.encode(event(bench.epoch, seq, pad)))


def _ready(bench: Bench, count: Callable[[], int]) -> None:
    bench.connections = count
    bench.reply({"ready": True, "pid": os.getpid(), "epoch": bench.epoch, "seq": bench.seq})


async def run_uvicorn(bench: Bench, port: int) -> None:
    import uvicorn
    from starlette.applications import Starlette
    from starlette.routing import WebSocketRoute
    from starlette.websockets import WebSocket, WebSocketDisconnect

    from livetable.server.framed_ws import EXTENSION, FramedWebSocketProtocol

    writers: set[Callable[[bytes], bool]] = set()

    async def endpoint(ws: WebSocket) -> None:
        await ws.accept()
        write = ws.scope["extensions"][EXTENSION]
        try:
            await ws.receive_text()
            await ws.send_text(welcome(bench).decode())
            writers.add(write)
            while (await ws.receive())["type"] != "websocket.disconnect":
                pass
        except WebSocketDisconnect:
            pass
        finally:
            writers.discard(write)

    app = Starlette(routes=[WebSocketRoute("/ws", endpoint)])
    config = uvicorn.Config(app, host="127.0.0.1", port=port, ws=FramedWebSocketProtocol,
                            ws_max_size=64 * 1024, ws_per_message_deflate=False,
                            log_level="warning", lifespan="off", backlog=2048,
                            timeout_graceful_shutdown=5)
    server = uvicorn.Server(config)
    serving = asyncio.create_task(server.serve())
    while not server.started:
        await asyncio.sleep(0.02)

    async def emit(seq: int, pad: int) -> None:
        framed = _framed(bench, seq, pad)
        for write in list(writers):  # a write may end a connection: not the set itself
            write(framed)

    bench.emit = emit
    _ready(bench, lambda: len(writers))
    await bench.done.wait()
    server.should_exit = True
    await serving


async def run_websockets(bench: Bench, port: int) -> None:
    from websockets.asyncio.server import ServerConnection, serve
    from websockets.exceptions import ConnectionClosed

    viewers: set[Any] = set()

    async def handler(ws: ServerConnection) -> None:
        try:
            await ws.recv()
            await ws.send(welcome(bench).decode())
        except ConnectionClosed:
            return
        viewers.add(ws.transport)
        try:
            await ws.wait_closed()
        finally:
            viewers.discard(ws.transport)

    async with serve(handler, "127.0.0.1", port, backlog=2048, compression=None,
                     max_size=64 * 1024):
        async def emit(seq: int, pad: int) -> None:
            framed = _framed(bench, seq, pad)
            for transport in list(viewers):  # a write may end a connection
                if not transport.is_closing():
                    transport.write(framed)

        bench.emit = emit
        _ready(bench, lambda: len(viewers))
        await bench.done.wait()


async def run_picows(bench: Bench, port: int) -> None:
    from picows import WSFrame, WSListener, WSMsgType, WSTransport, ws_create_server

    viewers: set[Any] = set()

    class Viewer(WSListener):
        welcomed = False

        def on_ws_frame(self, transport: WSTransport, frame: WSFrame) -> None:
            if frame.msg_type == WSMsgType.TEXT and not self.welcomed:
                self.welcomed = True
                transport.send(WSMsgType.TEXT, welcome(bench))
                viewers.add(transport.underlying_transport)
            elif frame.msg_type == WSMsgType.CLOSE:
                transport.send_close(frame.get_close_code())
                transport.disconnect()

        def on_ws_disconnected(self, transport: WSTransport) -> None:
            viewers.discard(transport.underlying_transport)

    server = await ws_create_server(lambda request: Viewer(), "127.0.0.1", port,
                                    backlog=2048, max_frame_size=64 * 1024,
                                    read_buffer_init_size=PICOWS_READ_BUFFER)

    async def emit(seq: int, pad: int) -> None:
        framed = _framed(bench, seq, pad)
        for transport in list(viewers):  # a write may end a connection
            if not transport.is_closing():
                transport.write(framed)

    bench.emit = emit
    _ready(bench, lambda: len(viewers))
    await bench.done.wait()
    server.close()
