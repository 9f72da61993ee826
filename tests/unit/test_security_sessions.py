"""An operator's session at one gateway, attacked: its limits escaped by a reconnect race,
its table scope left behind after the launch, its operator removed from the registry.

Each race runs on a controlled schedule: the second connection is held between the
session's admission and its join (a hook on ``Sessions.admit``) while the first one
leaves, never by sleeping."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from test_gateway_sessions import _Socket, _until

from livetable import protocol as p
from livetable.auth import Identity, mint
from livetable.betting.sessions import SessionLimits, SessionRecord
from livetable.bus import TableBatch
from livetable.clock import now_ms
from livetable.config import Settings
from livetable.metrics import Metrics
from livetable.operator.registry import Operator, Refusal, Registry
from livetable.operator.wallets import OperatorWallets
from livetable.server.gateway import Gateway
from livetable.server.gateway.client import Client
from livetable.store.sqlite import SQLiteStore

#: the connections' tasks are let run a few ms at a time (asyncio.sleep)
pytestmark = pytest.mark.sleeps

SECRET = b"s" * 32


async def _no_dealer(table: str, command: Any) -> p.Ack | p.Error:
    raise AssertionError("no dealer command here")


@pytest.fixture
async def gateway(tmp_path: Path) -> AsyncIterator[Gateway]:
    store = SQLiteStore(tmp_path / "db.sqlite3")
    gateway = Gateway(Settings(data_dir=tmp_path, secret=SECRET, heartbeat=0), store,
                      _no_dealer, Metrics(), SECRET)
    for table in ("t1", "t2"):
        snapshot = p.encode(p.TableSnapshot(id=table, name=table, phase="idle", mode="auto"))
        gateway.deliver(TableBatch(table=table, epoch=1, seq=0, frames=[],
                                   snapshot=snapshot))
    try:
        yield gateway
    finally:
        await store.close()


def _bet(ws: _Socket, bet_id: str, amount: int) -> None:
    frame = {"type": "place_bet", "bet_id": bet_id, "round_id": "r1", "spot": "P1",
             "amount": amount}
    ws.incoming.put_nowait({"type": "websocket.receive", "text": json.dumps(frame)})


class _HeldAfterAdmit:
    """``Sessions.admit`` of ``gateway``, holding the connection ``held`` (the n-th to be
    admitted) between its admission and the rest of its welcome until :attr:`release`."""

    def __init__(self, gateway: Gateway, held: int) -> None:
        self.admitted = asyncio.Event()
        self.release = asyncio.Event()
        self._count = 0
        admit = gateway.sessions.admit

        async def hooked(client: Client, identity: Identity) -> bool:
            ok = await admit(client, identity)
            self._count += 1
            if self._count == held:
                self.admitted.set()
                await self.release.wait()
            return ok

        gateway.sessions.admit = hooked  # type: ignore[method-assign]  # the test's hook


async def _race(gateway: Gateway, token: str,
                meanwhile: Callable[[], Any] | None = None) -> tuple[_Socket, list[Any]]:
    """Connection A welcomed; B admitted and held; A closes and is gone; B let through
    to its welcome. Returns B (welcomed) and the serving tasks."""
    hold = _HeldAfterAdmit(gateway, held=2)
    first, second = _Socket(token), _Socket(token)
    tasks = [asyncio.create_task(gateway.serve(first, "player"))]  # type: ignore[arg-type]
    await _until(lambda: first.types() == ["welcome"])
    tasks.append(asyncio.create_task(gateway.serve(second, "player")))  # type: ignore[arg-type]
    async with asyncio.timeout(5):
        await hold.admitted.wait()
    await first.close()
    async with asyncio.timeout(5):
        await tasks[0]  # A has left the gateway (its connection forgotten)
    if meanwhile is not None:
        await meanwhile()
    hold.release.set()
    await _until(lambda: "welcome" in second.types())
    return second, tasks


async def test_a_reconnect_race_does_not_escape_the_stake_limit(gateway: Gateway) -> None:
    """A leaves while B is between admit and join: B's slips are still judged."""
    await gateway.store.open_session(SessionRecord(
        session_id="s-race", operator="default", player_id="p1", started_at=now_ms(),
        expires_at=2**52, limits=SessionLimits(max_stake_per_round=2000),
        checked_at=now_ms()))
    token = mint(SECRET, "player", "p1", "P1", 3600, session="s-race")
    second, tasks = await _race(gateway, token)
    try:
        _bet(second, "b-over", 6000)
        await _until(lambda: len(second.types()) == 2)
        answer = second.sent[-1]
        assert answer["type"] == "bet_rejected", answer
        assert answer["code"] == "rg_limit", answer  # not through to the store
    finally:
        await second.close()
        async with asyncio.timeout(5):
            await asyncio.gather(*tasks)


async def test_a_session_past_its_minutes_refuses_the_racing_connection(
        gateway: Gateway) -> None:
    """``session_minutes`` run out while B is held: B's bet is refused ``session_ended``,
    the session ends (as ``GET /api/bets`` already says) and B is closed 4002."""
    store = gateway.store
    await store.open_session(SessionRecord(
        session_id="s-time", operator="default", player_id="p1", started_at=now_ms(),
        expires_at=2**52, limits=SessionLimits(session_minutes=60), checked_at=now_ms()))
    token = mint(SECRET, "player", "p1", "P1", 3600, session="s-time")

    async def played_an_hour() -> None:
        assert isinstance(store, SQLiteStore)
        with sqlite3.connect(store.path, timeout=10) as db:  # an hour of it played
            db.execute("UPDATE sessions SET started_at = started_at - 3600000 "
                       "WHERE session_id = 's-time'")

    second, tasks = await _race(gateway, token, played_an_hour)
    try:
        _bet(second, "b-late", 100)
        await _until(lambda: second.closed_with is not None)
        assert [m for m in second.types() if m != "welcome"] == [
            "bet_rejected", "session_ended"], second.sent
        assert second.sent[1]["code"] == "session_ended"
        assert second.closed_with == 4002
        record = await store.session("s-time")
        assert record is not None and record.reason == "time_limit"
    finally:
        await second.close()
        async with asyncio.timeout(5):
            await asyncio.gather(*tasks)


# --- the registry in force, at every hello and every slip ---------------------------------


class _Registry:
    """The registry in force, as Services keeps it (replaced whole on SIGHUP)."""

    def __init__(self, **tables: list[str] | None) -> None:
        self.load(**tables)

    def load(self, **tables: list[str] | None) -> None:
        self.registry = Registry({
            name: Operator(id=name, name=name, operator_secrets=(b"x" * 16,),
                           tables=None if scope is None else frozenset(scope))
            for name, scope in tables.items()})

    def standing(self, identity: Identity, table: str) -> Refusal | None:
        assert identity.operator is not None
        return self.registry.refusal(identity.operator, table)


@pytest.fixture
async def scoped(tmp_path: Path) -> AsyncIterator[tuple[Gateway, _Registry]]:
    in_force = _Registry(acme=["t1"])
    store = SQLiteStore(tmp_path / "db.sqlite3")
    gateway = Gateway(Settings(data_dir=tmp_path, secret=SECRET, heartbeat=0), store,
                      _no_dealer, Metrics(), SECRET, standing=in_force.standing)
    for table in ("t1", "t2"):
        snapshot = p.encode(p.TableSnapshot(id=table, name=table, phase="idle", mode="auto"))
        gateway.deliver(TableBatch(table=table, epoch=1, seq=0, frames=[],
                                   snapshot=snapshot))
    await store.open_session(SessionRecord(
        session_id="s-acme", operator="acme", player_id="acme~p1", started_at=now_ms(),
        expires_at=2**52, checked_at=now_ms()))
    try:
        yield gateway, in_force
    finally:
        await store.close()


def _acme(table: str = "t1") -> _Socket:
    ws = _Socket(mint(SECRET, "player", "acme~p1", "P1", 3600, currency="THB",
                      operator="acme", session="s-acme"))
    hello = json.loads(ws.incoming.get_nowait()["text"])
    ws.incoming.put_nowait({"type": "websocket.receive",
                            "text": json.dumps({**hello, "table": table})})
    return ws


async def test_a_table_out_of_the_operators_scope_is_refused_at_hello(
        scoped: tuple[Gateway, _Registry]) -> None:
    gateway, _ = scoped
    ws = _acme("t2")  # acme offers t1 only
    task = asyncio.create_task(gateway.serve(ws, "player"))  # type: ignore[arg-type]
    async with asyncio.timeout(5):
        await task
    assert ws.types() == ["error"] and ws.sent[0]["code"] == "not_your_table"
    assert ws.closed_with == 4003


async def test_a_table_taken_out_of_scope_refuses_the_next_bet(
        scoped: tuple[Gateway, _Registry]) -> None:
    gateway, in_force = scoped
    ws = _acme("t1")
    task = asyncio.create_task(gateway.serve(ws, "player"))  # type: ignore[arg-type]
    try:
        await _until(lambda: ws.types() == ["welcome"])
        in_force.load(acme=["t2"])  # a reload narrows acme's tables
        _bet(ws, "b-out", 100)
        await _until(lambda: len(ws.types()) == 2)
        assert ws.sent[-1]["type"] == "bet_rejected"
        assert ws.sent[-1]["code"] == "not_your_table", ws.sent[-1]
    finally:
        await ws.close()
        async with asyncio.timeout(5):
            await task


async def test_an_operator_removed_from_the_registry_ends_its_sessions(
        scoped: tuple[Gateway, _Registry]) -> None:
    gateway, in_force = scoped
    ws = _acme("t1")
    task = asyncio.create_task(gateway.serve(ws, "player"))  # type: ignore[arg-type]
    try:
        await _until(lambda: ws.types() == ["welcome"])
        in_force.load(other=None)  # acme removed: what SIGHUP's reload does next
        await gateway.recheck_standing()
        await _until(lambda: ws.closed_with is not None)
        assert ws.types() == ["welcome", "session_ended"]
        assert ws.sent[-1]["reason"] == "operator_removed" and ws.closed_with == 4002
        record = await gateway.store.session("s-acme")
        assert record is not None and record.reason == "operator_removed"
        again = _acme("t1")  # and its token opens nothing from now on
        await gateway.serve(again, "player")  # type: ignore[arg-type]
        assert again.types() == ["session_ended"] and again.closed_with == 4002
    finally:
        await ws.close()
        async with asyncio.timeout(5):
            await task


def test_a_removed_operators_wallet_still_gets_what_it_is_owed() -> None:
    """The outbox delivers the credits and rollbacks owed to a removed operator: its
    wallet stays (a reload adds and changes wallets, never drops one)."""
    wallets = OperatorWallets(timeout=1.0, connections=4)
    acme = Operator(id="acme", name="ACME", operator_secrets=(b"x" * 16,),
                    wallet_url="http://127.0.0.1:9/wallet", wallet_secrets=(b"w" * 16,))
    wallets.update(Registry({"acme": acme}))
    before = wallets.of("acme~p1")
    wallets.update(Registry({}))
    assert wallets.of("acme~p1") is before
