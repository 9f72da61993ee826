"""A player on two connections (a phone and a laptop; two browsers): a bet or a tip taken on
one, and the other shows the new balance at once — not at the round's results, as it did."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, cast

import pytest
from test_gateway_sessions import SECRET, _Socket, _until, gateway_over

from livetable import protocol as p
from livetable.auth import Identity, mint
from livetable.bus import TableBatch
from livetable.clock import now_ms
from livetable.config import Settings
from livetable.engine import OpenRound
from livetable.metrics import Metrics
from livetable.server.gateway import Gateway
from livetable.server.gateway.client import Client
from livetable.server.gateway.players import OtherConnections, Players
from livetable.store.sqlite import SQLiteStore

#: Waits on the wall clock (asyncio.sleep above zero): not in bin/test --fast (tests/tiers.py).
pytestmark = pytest.mark.sleeps

ROUND = "t1.1.1"
LIMITS = p.Limits(min=10, max=5_000, pair_min=10, pair_max=1_000, round_max=20_000)


def _send(ws: _Socket, frame: dict[str, Any]) -> None:
    ws.incoming.put_nowait({"type": "websocket.receive", "text": json.dumps(frame)})


def _bet(ws: _Socket, bet_id: str, amount: int) -> None:
    _send(ws, {"type": "place_bet", "bet_id": bet_id, "round_id": ROUND, "spot": "P1",
               "amount": amount})


def _balances(ws: _Socket) -> list[int]:
    return [m["balance"] for m in ws.sent if m["type"] == "balance"]


async def _round_in_betting(tmp_path: Path) -> tuple[SQLiteStore, Gateway, p.TableSnapshot]:
    """A store with round :data:`ROUND` open for bets, a gateway over it, and the table as
    it shows it."""
    closes_at = now_ms() + 600_000
    snapshot = p.TableSnapshot(id="t1", name="T1", phase="betting", mode="auto",
                               round_id=ROUND, closes_at=closes_at, limits=LIMITS)
    store, gateway = gateway_over(tmp_path, snapshot)
    await store.commit_step("t1", b"{}", [], [OpenRound(
        table="t1", round_id=ROUND, shoe_id="t1.1", round_no=1, closes_at=closes_at,
        limits=LIMITS)], now_ms())
    return store, gateway, snapshot


@contextlib.asynccontextmanager
async def _served(store: SQLiteStore, seats: list[tuple[Gateway, _Socket]]
                  ) -> AsyncIterator[None]:
    """Each socket served by its gateway, welcomed; then closed, and the store with them."""
    tasks = [asyncio.create_task(gateway.serve(ws, "player"))  # type: ignore[arg-type]
             for gateway, ws in seats]
    try:
        await _until(lambda: all("welcome" in ws.types() for _, ws in seats))
        yield
    finally:
        for _, ws in seats:
            await ws.close()
        async with asyncio.timeout(5):
            await asyncio.gather(*tasks)
        await store.close()


async def test_a_bet_on_one_connection_shows_its_balance_on_the_players_others(
        tmp_path: Path) -> None:
    store, gateway, _ = await _round_in_betting(tmp_path)
    token = mint(SECRET, "guest", "g1", "G1", 3600)
    phone, laptop = _Socket(token), _Socket(token)
    someone = _Socket(mint(SECRET, "guest", "g2", "G2", 3600))
    async with _served(store, [(gateway, phone), (gateway, laptop), (gateway, someone)]):
        start = phone.sent[0]["player"]["balance"]
        _bet(phone, "b1", 100)  # P1 deducts twice the stake
        await _until(lambda: _balances(laptop) == [start - 200])
        assert _balances(phone) == [] and _balances(someone) == []
        _bet(laptop, "b2", 100)
        await _until(lambda: _balances(phone) == [start - 400])
        # the first bet sent again (a reconnect's resend): its answer repeats the balance of
        # its first acceptance; the other connection hears the balance as it is now
        _bet(phone, "b1", 100)
        await _until(lambda: len(_balances(laptop)) == 2)
        assert [m["balance"] for m in phone.sent if m["type"] == "bet_accepted"][-1] \
            == start - 200
        assert _balances(laptop) == [start - 200, start - 400]
        # a bet refused moves nothing: nobody hears a balance
        _bet(phone, "b3", start)
        await _until(lambda: phone.sent[-1]["type"] == "bet_rejected")
        _send(phone, {"type": "ping", "t": 1})  # answered after anything b3 set going
        _send(laptop, {"type": "ping", "t": 1})
        await _until(lambda: "pong" in phone.types() and "pong" in laptop.types())
        assert len(_balances(laptop)) == 2 and _balances(someone) == []
        # a tip to the dealer moves it too
        _send(phone, {"type": "tip", "tip_id": "tip-1", "amount": 10})
        await _until(lambda: len(_balances(laptop)) == 3)
        assert "tip_accepted" in phone.types()
        assert _balances(laptop)[-1] == start - 410 and _balances(someone) == []


async def test_a_bet_on_one_gateway_shows_its_balance_on_the_players_connections_on_another(
        tmp_path: Path) -> None:
    """Scale-out: the phone on one gateway, the laptop on another (the load balancer's
    choice). The laptop heard its balance only at the round's results: now the gateway that
    took the bet names the player to the others (the bus: here, straight to the other
    gateway), and each tells its own connections of that player."""
    store, _, snapshot = await _round_in_betting(tmp_path)
    told: list[list[str]] = []

    async def execute(table: str, command: object) -> p.Ack | p.Error:
        raise AssertionError("no dealer command here")

    def gateway(to: list[Gateway]) -> Gateway:
        async def balances(players: list[str]) -> None:  # the bus, to the other gateway
            told.append(players)
            for other in to:
                other.others.moved_elsewhere(players)

        made = Gateway(Settings(data_dir=tmp_path, secret=SECRET, heartbeat=0), store,
                       execute, Metrics(), SECRET, balances=balances)
        made.deliver(TableBatch(table="t1", epoch=1, seq=0, frames=[],
                                snapshot=p.encode(snapshot)))
        return made

    second: list[Gateway] = []
    one = gateway(second)
    second.append(two := gateway([one]))
    token = mint(SECRET, "guest", "g1", "G1", 3600)
    phone, laptop = _Socket(token), _Socket(token)
    someone = _Socket(mint(SECRET, "guest", "g2", "G2", 3600))
    async with _served(store, [(one, phone), (two, laptop), (two, someone)]):
        start = phone.sent[0]["player"]["balance"]
        _bet(phone, "b1", 100)  # P1 deducts twice the stake
        await _until(lambda: _balances(laptop) == [start - 200])
        assert told == [["g1"]]
        _bet(laptop, "b2", 100)
        await _until(lambda: _balances(phone) == [start - 400])
        assert told == [["g1"], ["g1"]]
        _send(someone, {"type": "ping", "t": 1})
        await _until(lambda: "pong" in someone.types())
        assert _balances(someone) == [] and _balances(phone) == [start - 400]


class _Seated:
    """What :class:`OtherConnections` reads of a connection: its identity."""

    def __init__(self, player_id: str) -> None:
        self.identity = Identity(kind="guest", id=player_id, name=player_id, expires=2**40)


async def test_the_players_of_one_turn_of_the_loop_go_to_the_other_gateways_in_one_word(
        tmp_path: Path) -> None:
    """A close of betting takes thousands of bets a second: the players whose balance
    moved in one turn of the loop are one message on the bus, not one a bet."""
    told: list[list[str]] = []

    async def balances(players: list[str]) -> None:
        told.append(players)

    players = Players(Settings(data_dir=tmp_path, secret=SECRET), None, None)  # type: ignore[arg-type]
    kept: list[asyncio.Task[None]] = []
    others = OtherConnections(players, {}, kept.append, balances)
    ann, bob = _Seated("ann"), _Seated("bob")
    for client in (bob, ann, bob):
        others.balance_moved(cast(Client, client))
    assert told == []  # not before the turn ends
    await asyncio.sleep(0)
    await asyncio.gather(*kept)
    assert told == [["ann", "bob"]]
    others.balance_moved(cast(Client, ann))  # the next turn: a word of its own
    await asyncio.sleep(0)
    await asyncio.gather(*kept)
    assert told == [["ann", "bob"], ["ann"]]
