"""A resume is one write and no needless store read: what a reconnect storm costs the
server per client (docs/benchmarks.md, "The websocket transport for /ws").

Counted, not timed: the welcome, the missed events, the player's results and the
heartbeat's interval go to an idle connection in one write, the missed events as the
frames the fan-out wrote (never framed again); the store is asked for the player's
results only when a round settled while the client was away; and a returning player's
hello writes nothing to the ledger (tests/integration/test_pg_store.py: nor to
PostgreSQL).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from test_gateway import FakeWebSocket, _gateway, _split_frames, event, settle, snapshot

from livetable import protocol as p
from livetable.auth import mint
from livetable.bus import TableBatch
from livetable.server.framed_ws import text_frame
from livetable.server.gateway import Gateway, admission, delivery
from livetable.store.sqlite.ledger import accounts
from livetable.store.sqlite.ledger.core import Ledger

HELLO = {"type": "hello", "v": 1, "table": "t1"}


async def _served(gateway: Gateway, *sockets: FakeWebSocket) -> list[asyncio.Task[None]]:
    return [asyncio.create_task(gateway.serve(ws, "player"))  # type: ignore[arg-type]  # a fake of Starlette's WebSocket
            for ws in sockets]


async def _closed(sessions: list[asyncio.Task[None]], *sockets: FakeWebSocket) -> None:
    for ws in sockets:
        await ws.close(1000)
    async with asyncio.timeout(2):
        await asyncio.gather(*sessions)


@pytest.mark.sleeps  # the sessions run on the loop until settled (asyncio.sleep)
async def test_a_resume_is_one_write_of_the_frames_the_fan_out_wrote(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    gateway = _gateway(tmp_path, heartbeat=5)  # a heartbeat's interval ends the burst
    watcher = FakeWebSocket(HELLO, direct=True)
    sessions = await _served(gateway, watcher)
    await settle(lambda: len(gateway.feeds["t1"].clients) == 1)
    for seq in (1, 2, 3):
        gateway.deliver(TableBatch(table="t1", epoch=1, seq=seq, frames=[(seq, event(seq))],
                                   snapshot=snapshot(seq)))
    fanned = watcher.wire[-3:]  # the events as the fan-out framed and wrote them

    framings: list[bytes] = []

    def counted(frame_of: Any) -> Any:
        def frame(payload: bytes) -> bytes:
            framings.append(payload)
            return bytes(frame_of(payload))
        return frame

    monkeypatch.setattr(delivery, "text_frame", counted(text_frame))
    # (the store's log, read on a resume the ring cannot serve, is framed there)
    monkeypatch.setattr(admission, "text_frame", counted(text_frame))
    back = FakeWebSocket({**HELLO, "resume": {"epoch": 1, "seq": 1}}, direct=True)
    sessions += await _served(gateway, back)
    await settle(lambda: len(gateway.feeds["t1"].clients) == 2)

    assert len(back.wire) == 1 and not back.sent  # one write, nothing through the queue
    frames = [json.loads(f) for f in _split_frames(back.wire[0])]
    assert [(f["type"], f.get("seq")) for f in frames] == [
        ("welcome", 3), ("table_paused", 2), ("table_paused", 3), ("heartbeat", None)]
    assert frames[0]["resumed"] is True
    assert fanned[1] + fanned[2] in back.wire[0]  # the missed events: the fan-out's bytes
    assert not framings  # ... not framed again for the resume
    await _closed(sessions, watcher, back)


@pytest.mark.sleeps  # the sessions run on the loop until settled (asyncio.sleep)
async def test_a_resume_without_a_settled_round_asks_the_store_for_no_results(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    gateway = _gateway(tmp_path, heartbeat=0)
    asked: list[list[str]] = []
    read = gateway.store.settlements_for_rounds

    async def settlements_for_rounds(player_id: str, rounds: list[str]) -> list[p.BetSettled]:
        asked.append(rounds)
        return await read(player_id, rounds)

    monkeypatch.setattr(gateway.store, "settlements_for_rounds", settlements_for_rounds)
    for seq in (1, 2):
        gateway.deliver(TableBatch(table="t1", epoch=1, seq=seq, frames=[(seq, event(seq))],
                                   snapshot=snapshot(seq)))
    token = mint(b"s" * 32, "player", "p1", "P1", 3600)
    player = {**HELLO, "token": token}
    away = FakeWebSocket({**player, "resume": {"epoch": 1, "seq": 1}}, direct=True)
    sessions = await _served(gateway, away)
    await settle(lambda: len(gateway.feeds["t1"].clients) == 1)
    assert json.loads(_split_frames(away.wire[0])[0])["resumed"] is True
    assert asked == []  # table_paused only: no round settled while it was away

    settled = p.encode(p.RoundSettled(round_id="r1", results=[], last_round=False,
                                      table="t1", epoch=1, seq=3))
    gateway.deliver(TableBatch(table="t1", epoch=1, seq=3, frames=[(3, settled)],
                               snapshot=snapshot(3)))
    later = FakeWebSocket({**player, "resume": {"epoch": 1, "seq": 2}}, direct=True)
    sessions += await _served(gateway, later)
    await settle(lambda: len(gateway.feeds["t1"].clients) == 2)
    assert asked == [["r1"]]  # a round settled while it was away: its results are read
    await _closed(sessions, away, later)
    await gateway.store.close()


def test_a_returning_players_hello_writes_nothing_unless_its_name_changed() -> None:
    ledger = Ledger(":memory:")
    accounts.ensure_player(ledger, "p1", "P1", 1_000, 1)
    before = ledger.db.total_changes
    assert accounts.ensure_player(ledger, "p1", "P1", 1_000, 2).name == "P1"
    assert ledger.db.total_changes == before  # the same name: no row written
    assert accounts.ensure_player(ledger, "p1", "Ann", 1_000, 3).name == "Ann"
    assert ledger.db.total_changes == before + 1
