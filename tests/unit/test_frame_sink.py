"""A bet taken as its frame is read (framed_ws's SINK), and everything else left in order.

The protocol offers each text message to the app's sink only while nothing read before it
waits in the receive queue; the session takes only bets, and only while its loop waits for
a frame — so the direct path changes the cost of a bet, never the order or the checks.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from test_gateway import FakeWebSocket, _gateway, settle, snapshot
from test_uvicorn_internals import _made, _Transport
from websockets.frames import Frame, Opcode

from livetable.auth import mint
from livetable.bus import TableBatch
from livetable.config import Settings
from livetable.metrics import Metrics
from livetable.server.framed_ws import AFTER_CLOSE, SINK, FramedWebSocketProtocol
from livetable.server.gateway import Gateway
from livetable.store.sqlite import SQLiteStore

#: Waits on the wall clock (asyncio.sleep above zero): not in bin/test --fast (tests/tiers.py).
pytestmark = pytest.mark.sleeps


async def test_the_protocol_offers_a_frame_to_the_sink_only_with_nothing_queued() -> None:
    ws = _made(FramedWebSocketProtocol)
    ws.transport = _Transport()
    offered: list[tuple[str, int]] = []
    answer = True

    def take(text: str, arrived_at: int) -> bool:
        offered.append((text, arrived_at))
        return answer

    ws.offer_frames_to(take)
    ws.handle_text(Frame(Opcode.TEXT, b'{"type":"place_bet"}'))
    assert [t for t, _ in offered] == ['{"type":"place_bet"}'] and ws.queue.empty()
    assert isinstance(offered[0][1], int)  # stamped with its arrival, as a queued one is
    answer = False  # not taken: queued as always
    ws.handle_text(Frame(Opcode.TEXT, b'{"type":"ping"}'))
    assert ws.queue.qsize() == 1 and len(offered) == 2
    # with a message queued before it, a frame is not even offered: it waits its turn
    answer = True
    ws.handle_text(Frame(Opcode.TEXT, b'{"type":"place_bet","n":2}'))
    assert len(offered) == 2
    assert [ws.queue.get_nowait()["text"] for _ in range(2)] == [
        '{"type":"ping"}', '{"type":"place_bet","n":2}']
    ws.offer_frames_to(None)
    ws.handle_text(Frame(Opcode.TEXT, b'{"type":"place_bet","n":3}'))
    assert ws.queue.qsize() == 1 and len(offered) == 2


class SinkWebSocket(FakeWebSocket):
    """A fake connection that offers the SINK extension and keeps what the session names."""

    def __init__(self, *frames: dict[str, Any]) -> None:
        super().__init__(*frames)
        self.take: Any = None
        self.scope["extensions"][SINK] = self._offer

    def _offer(self, take: Any) -> None:
        self.take = take


def _bet(bet_id: str) -> str:
    return json.dumps({"type": "place_bet", "bet_id": bet_id, "round_id": "r1",
                       "spot": "P1", "amount": 100})


async def test_the_session_takes_bets_at_once_and_leaves_the_rest_to_its_loop(
        tmp_path: Path) -> None:
    gateway = _gateway(tmp_path, heartbeat=0)
    token = mint(b"s" * 32, "player", "p1", "P1", 3600)
    ws = SinkWebSocket({"type": "hello", "v": 1, "table": "t1", "token": token})
    session = asyncio.create_task(gateway.serve(ws, "player"))  # type: ignore[arg-type]
    try:
        await settle(lambda: ws.take is not None and len(ws.sent) == 1)
        frames_in = gateway.metrics.frames_in
        assert ws.take(_bet("b1"), 1) is True  # taken: started without the queue
        await settle(lambda: len(ws.sent) == 2)
        assert ws.sent[1]["bet_id"] == "b1" and ws.sent[1]["type"] == "bet_rejected"
        assert gateway.metrics.frames_in == frames_in + 1  # counted as any frame is
        assert ws.take('{"type":"ping"}', 2) is False  # awaited by the loop: queued
        assert ws.take("not json", 3) is False  # the loop says what is wrong with it
        assert ws.take(_bet("b2") + " " * 100_000, 4) is False  # too large: the loop
    finally:
        await ws.close(1000)
        async with asyncio.timeout(2):
            await session
        await gateway.store.close()
    assert ws.take is None  # forgotten when the session ends


async def test_a_bet_on_the_direct_path_counts_against_the_frame_budget(
        tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path, secret=b"s" * 32, frames_per_second=1,
                        heartbeat=0)

    async def execute(table: str, command: Any) -> Any:
        raise AssertionError("no dealer here")

    gateway = Gateway(settings, SQLiteStore(tmp_path / "db.sqlite3"), execute, Metrics(),
                      b"s" * 32)
    gateway.deliver(TableBatch(table="t1", epoch=1, seq=0, frames=[], snapshot=snapshot(0)))
    token = mint(b"s" * 32, "player", "p1", "P1", 3600)
    ws = SinkWebSocket({"type": "hello", "v": 1, "table": "t1", "token": token})
    session = asyncio.create_task(gateway.serve(ws, "player"))  # type: ignore[arg-type]
    try:
        await settle(lambda: ws.take is not None and len(ws.sent) == 1)
        # a budget of 2 frames, the hello took one: one bet more, then "rate_limited"
        assert ws.take(_bet("b1"), 1) is True and ws.take(_bet("b2"), 2) is True
        await settle(lambda: len(ws.sent) == 3)
        codes = sorted(f.get("code", "") for f in ws.sent[1:])
        assert codes == ["rate_limited", "unknown_round"], ws.sent
    finally:
        await ws.close(1000)
        async with asyncio.timeout(2):
            await session
        await gateway.store.close()


async def test_pings_pongs_and_fragments_are_charged_to_the_budget_named() -> None:
    """Frames that are not a whole message never reach the app, so the protocol charges
    them to the budget the app names — those read before it names one, when it does —
    and a whole message is left for the app to count. Past its close, a peer that goes
    on sending is no longer read."""
    class Transport(_Transport):
        def write(self, data: bytes) -> None:
            return None

    ws = _made(FramedWebSocketProtocol)
    ws.transport = Transport()
    ws.handle_ping()  # read before the app named its budget
    charged: list[int] = []
    ws.charge_frames_to(charged.append)
    assert charged == [1]
    ws.handle_pong(Frame(Opcode.PONG, b""))
    ws.handle_text(Frame(Opcode.TEXT, b'{"type":', fin=False))
    ws.handle_cont(Frame(Opcode.CONT, b"", fin=False))
    ws.handle_cont(Frame(Opcode.CONT, b'"ping"}'))  # the last: the message, the app's
    assert charged == [1, 1, 1, 1] and ws.queue.get_nowait()["text"] == '{"type":"ping"}'
    ws.handle_bytes(Frame(Opcode.BINARY, b"\x00", fin=False))
    assert len(charged) == 5
    ws.close_sent = True
    for _ in range(AFTER_CLOSE - 1):
        ws.handle_ping()
    assert len(charged) == 5 and not ws.transport.paused
    ws.handle_text(Frame(Opcode.TEXT, b"{}"))
    assert ws.transport.paused and ws.queue.empty()


async def test_the_upgrade_requests_headers_are_dropped_once_in_the_scope() -> None:
    """websockets' parser keeps the upgrade request for the connection's life; its headers
    are in the scope once the connection is made, so the request's own are dropped (2 KiB
    an idle viewer in bench/transport.py, more for a browser's headers)."""
    class Transport(_Transport):
        def write(self, data: bytes) -> None:
            return None

    ws = _made(FramedWebSocketProtocol)
    ws.connection_made(Transport())
    # as uvicorn's h11 protocol hands the upgrade over: names in lower case
    ws.conn.receive_data(b"GET /ws HTTP/1.1\r\nhost: h\r\nupgrade: websocket\r\n"
                         b"connection: Upgrade\r\nsec-websocket-key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                         b"sec-websocket-version: 13\r\norigin: http://h\r\n\r\n")
    [request] = ws.conn.events_received()
    ws.handle_connect(request)
    assert not list(request.headers.raw_items())
    assert (b"origin", b"http://h") in ws.scope["headers"]
    assert ws.response.status_code == 101
    for task in list(ws.tasks):  # the app's task (this test's app is never called)
        task.cancel()
