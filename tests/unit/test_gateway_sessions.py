"""An operator's ended session at one gateway, without a live server: a hello with its
token is refused, and when the bus lost the announcement (its subscription was down), the
gateway closes the session's sockets once it asks the store again (``recheck_sessions``,
what a re-subscription of the Redis bus calls)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from livetable import protocol as p
from livetable.auth import mint
from livetable.betting.sessions import SessionRecord
from livetable.bus import TableBatch
from livetable.config import Settings
from livetable.metrics import Metrics
from livetable.server.gateway import Gateway
from livetable.store.sqlite import SQLiteStore

#: Waits on the wall clock (asyncio.sleep above zero): not in bin/test --fast (tests/tiers.py).
pytestmark = pytest.mark.sleeps

SECRET = b"s" * 32
T0 = 1_700_000_000_000
IDLE = p.TableSnapshot(id="t1", name="T1", phase="idle", mode="auto")


class _Socket:
    """What the gateway uses of a Starlette WebSocket: a hello, then the frames sent back
    and the close code."""

    def __init__(self, token: str) -> None:
        self.headers: dict[str, str] = {}
        self.scope: dict[str, Any] = {"type": "websocket", "extensions": {}}
        self.sent: list[dict[str, Any]] = []
        self.closed_with: int | None = None
        self.incoming: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        hello = {"type": "hello", "v": 1, "table": "t1", "token": token}
        self.incoming.put_nowait({"type": "websocket.receive", "text": json.dumps(hello)})

    async def accept(self) -> None:
        return None

    async def receive(self) -> dict[str, Any]:
        return await self.incoming.get()

    async def send_text(self, text: str) -> None:
        self.sent.append(json.loads(text))

    async def close(self, code: int = 1000, reason: str = "") -> None:
        if self.closed_with is None:
            self.closed_with = code
        self.incoming.put_nowait({"type": "websocket.disconnect", "code": code})

    def types(self) -> list[str]:
        return [m["type"] for m in self.sent if m["type"] != "heartbeat"]


def gateway_over(tmp_path: Path, snapshot: p.TableSnapshot = IDLE) -> tuple[SQLiteStore, Gateway]:
    """A SQLite store and a gateway over it (no dealer commands), the table ``t1`` as
    ``snapshot`` shows it."""
    settings = Settings(data_dir=tmp_path, secret=SECRET, heartbeat=0)

    async def execute(table: str, command: Any) -> p.Ack | p.Error:
        raise AssertionError("no dealer command here")

    store = SQLiteStore(tmp_path / "db.sqlite3")
    gateway = Gateway(settings, store, execute, Metrics(), SECRET)
    gateway.deliver(TableBatch(table="t1", epoch=1, seq=0, frames=[],
                               snapshot=p.encode(snapshot)))
    return store, gateway


async def _until(check: Any) -> None:
    async with asyncio.timeout(5):
        while not check():
            await asyncio.sleep(0.005)


async def test_a_missed_end_closes_the_sessions_sockets_when_the_store_is_asked_again(
        tmp_path: Path) -> None:
    store, gateway = gateway_over(tmp_path)
    far = 2**52
    for sid in ("s-ends", "s-stays"):
        await store.open_session(SessionRecord(session_id=sid, operator="default",
                                               player_id="p1", started_at=T0,
                                               expires_at=far, checked_at=T0))
    ends = _Socket(mint(SECRET, "player", "p1", "P1", 3600, session="s-ends"))
    stays = _Socket(mint(SECRET, "player", "p1", "P1", 3600, session="s-stays"))
    tasks = [asyncio.create_task(gateway.serve(ws, "player"))  # type: ignore[arg-type]
             for ws in (ends, stays)]
    try:
        await _until(lambda: ends.types() == ["welcome"] and stays.types() == ["welcome"])
        # ended in the store, its announcement lost: nothing closes yet
        await store.end_session("s-ends", "self_exclusion", T0 + 1)
        await gateway.recheck_sessions()
        await _until(lambda: ends.closed_with is not None)
        assert ends.types() == ["welcome", "session_ended"]
        assert ends.sent[-1] == {"type": "session_ended", "reason": "self_exclusion"}
        assert ends.closed_with == 4002
        assert stays.closed_with is None and stays.types() == ["welcome"]
        # and its token is refused at the door from now on
        again = _Socket(mint(SECRET, "player", "p1", "P1", 3600, session="s-ends"))
        tasks.append(asyncio.create_task(gateway.serve(again, "player")))  # type: ignore[arg-type]
        await _until(lambda: again.closed_with is not None)
        assert again.types() == ["session_ended"] and again.closed_with == 4002
    finally:
        await stays.close()
        async with asyncio.timeout(5):
            await asyncio.gather(*tasks)
        await store.close()


async def test_a_reality_check_answered_before_it_is_due_does_not_put_it_off(
        tmp_path: Path) -> None:
    """Answering ahead of time would move the next check for ever: only an answer to a
    check that is due counts."""
    from livetable.betting.sessions import SessionLimits
    from livetable.clock import now_ms

    store, gateway = gateway_over(tmp_path)
    start = now_ms() - 30_000  # half of its minute played: no check due yet
    await store.open_session(SessionRecord(
        session_id="s-rc", operator="default", player_id="p1", started_at=start,
        expires_at=2**52, limits=SessionLimits(reality_check_minutes=1), checked_at=start))
    ws = _Socket(mint(SECRET, "player", "p1", "P1", 3600, session="s-rc"))
    ws.incoming.put_nowait({"type": "websocket.receive",
                            "text": json.dumps({"type": "reality_check_ack"})})
    task = asyncio.create_task(gateway.serve(ws, "player"))  # type: ignore[arg-type]
    try:
        await _until(lambda: ws.types() == ["welcome", "ack"])
        record = await store.session("s-rc")
        assert record is not None and record.checked_at == start  # not put off
    finally:
        await ws.close()
        async with asyncio.timeout(5):
            await task
        await store.close()


async def test_a_slip_the_store_failed_on_holds_no_stake(tmp_path: Path) -> None:
    """A slip answered ``unavailable`` (a store outage) gives its reserved stake back: else
    the session's next slips would be refused a limit they are within."""
    from livetable.betting.sessions import SessionLimits
    from livetable.store.base import StoreUnavailable

    store, gateway = gateway_over(tmp_path)
    await store.open_session(SessionRecord(
        session_id="s-out", operator="default", player_id="p1", started_at=T0,
        expires_at=2**52, limits=SessionLimits(max_stake_per_round=1000), checked_at=T0))
    place_slip = store.place_slip
    failures = [StoreUnavailable("the store is down")]

    async def failing_once(slip: Any, now: int) -> Any:
        if failures:
            raise failures.pop()
        return await place_slip(slip, now)

    store.place_slip = failing_once  # type: ignore[method-assign]
    ws = _Socket(mint(SECRET, "player", "p1", "P1", 3600, session="s-out"))
    task = asyncio.create_task(gateway.serve(ws, "player"))  # type: ignore[arg-type]

    def bet(bet_id: str) -> None:
        frame = {"type": "place_bet", "bet_id": bet_id, "round_id": "r1", "spot": "P1",
                 "amount": 400}  # stakes 800 of the round's 1000
        ws.incoming.put_nowait({"type": "websocket.receive", "text": json.dumps(frame)})

    try:
        await _until(lambda: ws.types() == ["welcome"])
        bet("b1")
        await _until(lambda: len(ws.types()) == 2)
        assert ws.sent[-1]["type"] == "error" and ws.sent[-1]["code"] == "unavailable"
        bet("b2")
        await _until(lambda: len(ws.types()) == 3)
        # judged within the limit, so it reached the store (which has no round r1 open)
        assert ws.sent[-1]["code"] == "unknown_round", ws.sent[-1]
    finally:
        await ws.close()
        async with asyncio.timeout(5):
            await task
        await store.close()
