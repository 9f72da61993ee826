"""A bench-only *prototype* of a change to livetable's fan-out, to measure what it would
gain before anyone makes it (``--kind livetable-direct`` in :mod:`bench.fanout_server`).
livetable itself is not modified: this patches the classes inside the bench server process.

The change: a table event is framed once — the websocket frame header and payload, the same
bytes for every connection, since server frames are not masked — and written straight to
each connection's transport when that connection has nothing queued, no frame in flight and
a transport under its high-water mark. Otherwise the frame takes the usual path (the
bounded queue and the writer task), so a slow client still only delays itself and order is
kept. What it saves per frame and connection: waking the writer task, the ASGI send
(Starlette → uvicorn), and the websockets protocol's per-connection framing.

Reaching the transport from a Starlette ``WebSocket`` needs uvicorn's protocol object, found
here through the ASGI ``send`` closure — fine for a measurement, not for production, where
the gateway would own its connections (a server whose transport it can see).
"""

from __future__ import annotations

import asyncio
import contextlib
import struct
from typing import Any

_last: list[Any] = [None, b""]


def frame_bytes(text: str) -> bytes:
    """The whole websocket text frame (FIN, opcode 1, unmasked) — encoded once per event."""
    if text is _last[0]:
        return bytes(_last[1])
    payload = text.encode()
    n = len(payload)
    if n < 126:
        header = struct.pack("!BB", 0x81, n)
    elif n < 65536:
        header = struct.pack("!BBH", 0x81, 126, n)
    else:
        header = struct.pack("!BBQ", 0x81, 127, n)
    data = header + payload
    _last[0], _last[1] = text, data
    return data


def _protocol(ws: Any) -> Any:
    """uvicorn's protocol object behind a Starlette WebSocket (via the send closures)."""
    seen = set()
    todo = [ws._send]
    while todo:
        fn = todo.pop()
        if id(fn) in seen:
            continue
        seen.add(id(fn))
        owner = getattr(fn, "__self__", None)
        if owner is not None and hasattr(owner, "transport") and hasattr(owner, "conn"):
            return owner
        for cell in getattr(fn, "__closure__", None) or ():
            with contextlib.suppress(ValueError):
                if callable(cell.cell_contents):
                    todo.append(cell.cell_contents)
    return None


def built_in() -> bool:
    """livetable has this fast path of its own (livetable.server.wsproto, since 65b0827)."""
    import importlib.util

    return importlib.util.find_spec("livetable.server.wsproto") is not None


def install() -> None:
    if built_in():
        return  # nothing to prototype: livetable-direct is then livetable itself
    from livetable.server import gateway as g

    client_cls = g.Client
    queued_send = client_cls.send

    def send(self: Any, frame: str) -> None:
        proto = getattr(self, "_proto", False)
        if proto is False:
            proto = self._proto = _protocol(self.ws)
        if (proto is not None and not self.closed and not self.queue
                and not getattr(self, "_busy", False) and proto.writable.is_set()
                and proto.handshake_complete and not proto.close_sent
                and not proto.transport.is_closing()):
            proto.transport.write(frame_bytes(frame))
            self.gateway.metrics.frames_out += 1
            return
        queued_send(self, frame)

    async def _write(self: Any) -> None:  # the original, with a "frame in flight" flag
        ws = self.ws
        metrics = self.gateway.metrics
        try:
            while True:
                await self.ready.wait()
                self.ready.clear()
                while self.queue:
                    frame = self.queue.popleft()
                    self._busy = True
                    await ws.send_text(frame)
                    self._busy = False
                    metrics.frames_out += 1
                if self.closed:
                    break
        except (g.WebSocketDisconnect, RuntimeError, OSError):
            self.closed = True
        except asyncio.CancelledError:
            pass
        self._busy = False
        if self.close_code is not None:
            with contextlib.suppress(Exception):
                await ws.close(self.close_code, getattr(self, "close_reason", ""))

    client_cls.send = send  # type: ignore[method-assign]  # the prototype's whole point
    client_cls._write = _write  # type: ignore[method-assign]  # adds the in-flight flag
