"""A table event is encoded once and framed once, whatever the number of connections: the
same bytes object is written to every idle connection, one write each.

Counted, not timed: the engine encodes an event once (the bus carries its bytes); the
gateway frames it once (``text_frame``) and writes that frame to each socket. Encoding or
framing per connection would cost the fan-out's CPU per frame N times over.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from test_gateway import FakeWebSocket, _gateway, event, settle, snapshot

from livetable import protocol as p
from livetable.bus import TableBatch
from livetable.server.framed_ws import text_frame as frame_of
from livetable.server.gateway import delivery

VIEWERS = 7


@pytest.mark.sleeps  # the connections' writers are let run (asyncio.sleep)
async def test_a_broadcast_writes_one_encoded_frame_to_every_connection(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    gateway = _gateway(tmp_path, heartbeat=0)
    hello = {"type": "hello", "v": 1, "table": "t1"}
    sockets = [FakeWebSocket(hello, direct=True) for _ in range(VIEWERS)]
    sessions = [asyncio.create_task(gateway.serve(ws, "player"))  # type: ignore[arg-type]  # a fake of Starlette's WebSocket
                for ws in sockets]
    await settle(lambda: len(gateway.feeds["t1"].clients) == VIEWERS
                 and all(ws.wire for ws in sockets))  # the welcomes, written directly

    one = TableBatch(table="t1", epoch=1, seq=1, frames=[(1, event(1))], snapshot=snapshot(1))
    two = TableBatch(table="t1", epoch=1, seq=3, frames=[(2, event(2)), (3, event(3))],
                     snapshot=snapshot(3))
    framings: list[bytes] = []
    encodings: list[Any] = []
    encode = p.encode

    def counted_frame(payload: bytes) -> bytes:
        framings.append(payload)
        return frame_of(payload)

    def counted_encode(message: Any) -> bytes:
        encodings.append(message)
        return encode(message)

    monkeypatch.setattr(delivery, "text_frame", counted_frame)
    monkeypatch.setattr(p, "encode", counted_encode)

    gateway.deliver(one)
    assert len(framings) == 1 and not encodings  # framed once, never encoded again
    first = sockets[0].wire[-1]
    assert all(len(ws.wire) == 2 and ws.wire[1] is first for ws in sockets)  # one write each

    # a step of two events: each framed once, both written to a socket in one write
    gateway.deliver(two)
    assert len(framings) == 3 and not encodings
    joined = sockets[0].wire[-1]
    assert all(len(ws.wire) == 3 and ws.wire[2] is joined for ws in sockets)
    assert joined == frame_of(event(2)) + frame_of(event(3))

    monkeypatch.undo()
    for ws in sockets:
        await ws.close(1000)
    async with asyncio.timeout(2):
        await asyncio.gather(*sessions)
