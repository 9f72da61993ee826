"""A stalled PostgreSQL answers every bet within a bound, and takes none after it answered.

A 60 s stall of the network to PostgreSQL left players without an answer for 30-60 s
(asyncpg's query and connect timeouts were the only bounds) and acknowledged bets 59-61 s
late, past the close of betting. Now (store/postgres/slips.py): a slip is answered
``unavailable`` within ``answer_within`` (5 s; resend the same id), and its batch's
transaction is bounded by the server itself — each statement and each wait for the next at
most the time left, the COMMIT refused after the deadline — so a COMMIT that a stalled
network delivers late finds its transaction gone, the round's row lock was released for
the close of betting and the settlement, and a bet answered ``unavailable`` is never taken
behind the player's back.

The stall is a TCP proxy that holds bytes (tests/e2e/tcpproxy.py, ``hold``/``release``)
in front of the session's PostgreSQL (tests/pg_util.py); it starts holding at a controlled
point — the batch judged and written, its COMMIT about to go.
"""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

import asyncpg
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))

from pg_util import fresh_database, shared_pg
from tcpproxy import TcpProxy  # tests/e2e is not a package
from test_store_contract import LIMITS, ROUND_A, T0, settle_effect

from livetable import protocol as p
from livetable.betting.slips import Rejection, SlipRequest
from livetable.engine import OpenRound
from livetable.engine.effects import SetBetting
from livetable.store.base import StoreUnavailable
from livetable.store.postgres import PostgresStore
from livetable.store.postgres.slips import SlipBatch

ROUND = "t1.1.1"
#: A test waits at most this for an answer (the old code waited for the stall to end).
PATIENCE = 20.0


def slip(n: int) -> SlipRequest:
    return SlipRequest(player_id="alice", table="t1", slip_id=f"s{n}", round_id=ROUND,
                       bets=(p.SlipBet(bet_id=f"b{n}", spot="P1", amount=50),))


def now() -> int:
    return int(time.time() * 1000)


async def bets_of(url: str) -> dict[str, str]:
    con = await asyncpg.connect(url)
    try:
        return {r[0]: r[1] for r in await con.fetch("SELECT bet_id, state FROM bets")}
    finally:
        await con.close()


async def test_a_stalled_postgresql_answers_unavailable_and_takes_nothing_late(
        monkeypatch: pytest.MonkeyPatch) -> None:
    url = fresh_database()
    port = shared_pg().primary.port
    engine = PostgresStore(url, max_connections=2, replication="none")
    await engine.ensure_player("alice", "Alice", 100_000, T0)
    closes_at = now() + 600_000
    await engine.commit_step("t1", b"{}", [], [OpenRound(
        table="t1", round_id=ROUND, shoe_id="t1.1", round_no=1, closes_at=closes_at,
        limits=LIMITS)], T0)
    with TcpProxy(port) as proxy:
        gateway = PostgresStore(url.replace(f":{port}/", f":{proxy.port}/"),
                                max_connections=2, replication="none", answer_within=1.0)
        acknowledged = {"b1"}
        assert isinstance(await gateway.place_slip(slip(1), now()), p.SlipAccepted)

        # the stall, from the moment the batch is judged and written: its COMMIT is held
        taken = SlipBatch.take

        async def take_then_stall(batch: SlipBatch) -> list[object]:
            answers = await taken(batch)
            proxy.hold()
            return answers  # type: ignore[return-value]  # SlipBatch.take's own

        monkeypatch.setattr(SlipBatch, "take", take_then_stall)
        try:
            with pytest.raises(StoreUnavailable):  # answered while the stall goes on
                await asyncio.wait_for(gateway.place_slip(slip(2), now()), PATIENCE)
            # the held transaction had the round's row: the server's own deadline let it
            # go, so betting closes and the round settles while the stall goes on
            await asyncio.wait_for(engine.commit_step("t1", b"{}", [], [SetBetting(
                table="t1", round_id=ROUND, status="closed", closes_at=None)], now()),
                PATIENCE)
            settled = await engine.commit_step("t1", b"{}", [], [settle_effect(
                ROUND, ROUND_A)], now())
            more = True
            while more:
                chunk, more = await engine.settle_pending("t1", now())
                settled += chunk
        finally:
            proxy.release()  # the held COMMIT reaches the server, late
        monkeypatch.undo()
        await gateway.close()
    # every acknowledged bet is in the round, settled; the one answered unavailable is not
    assert {s.bet_id for s in settled} == acknowledged
    assert await bets_of(url) == {"b1": "settled"}
    # and its resend, now, finds betting closed: no acknowledgement after the round closed
    again = await engine.place_slip(slip(2), now())
    assert isinstance(again, Rejection) and again.code == "betting_closed", again
    assert (await engine.audit()).ok
    await engine.close()


async def test_a_commit_after_the_answer_deadline_is_refused_by_the_server() -> None:
    """The backstop (migration 5): whatever delayed it, a batch's COMMIT after its
    ``livetable.answer_by`` is refused by PostgreSQL, and nothing of it is written."""
    url = fresh_database()
    store = PostgresStore(url, max_connections=1, replication="none")
    await store.commit_step("t1", b"{}", [], [OpenRound(
        table="t1", round_id=ROUND, shoe_id="t1.1", round_no=1, closes_at=now() + 60_000,
        limits=LIMITS)], T0)
    await store.close()
    con = await asyncpg.connect(url)
    try:
        with pytest.raises(asyncpg.QueryCanceledError, match="after their answer deadline"):
            async with con.transaction():
                await con.execute("SELECT set_config('livetable.answer_by', $1, true)",
                                  str(now() - 1))
                await con.execute("UPDATE rounds SET bets = 7 WHERE round_id = $1", ROUND)
        assert await con.fetchval("SELECT bets FROM rounds WHERE round_id = $1", ROUND) == 0
        async with con.transaction():  # in time, or outside a batch: committed
            await con.execute("SELECT set_config('livetable.answer_by', $1, true)",
                              str(now() + 60_000))
            await con.execute("UPDATE rounds SET bets = 7 WHERE round_id = $1", ROUND)
        await con.execute("UPDATE rounds SET bets = 8 WHERE round_id = $1", ROUND)
        assert await con.fetchval("SELECT bets FROM rounds WHERE round_id = $1", ROUND) == 8
    finally:
        await con.close()
