"""SQLite's group commit judges a batch of slips exactly as one transaction per slip would.

The store reads a whole batch's facts in a few queries and keeps them current in memory as
it takes each slip (store/sqlite/ledger/slips.py). Here a few hundred random slips —
repeats, reused bet and slip ids, limits, short balances, unknown rounds and players, a
second round — go once one at a time (each its own transaction) and once all together (one
batch), and the answers and every ledger row must be the same.
"""

from __future__ import annotations

import asyncio
import random
import sqlite3
from typing import Any

import pytest

from livetable import protocol as p
from livetable.betting.slips import SlipRequest
from livetable.engine import OpenRound
from livetable.store import SQLiteStore
from livetable.store.slip_queue import take_in_batches
from livetable.store.sqlite import MAX_SLIPS_PER_TRANSACTION

T0 = 1_700_000_000_000
LIMITS = p.Limits(min=20, max=500, pair_min=5, pair_max=100, round_max=2_000)
SPOTS = ["P1", "P2", "P3", "P4", "P5", "P1_PAIR", "P3_PAIR", "BANKER", "P9"]
PLAYERS = ["alice", "bob", "carol", "dan", "nobody"]  # nobody has no account


async def _store() -> SQLiteStore:
    store = SQLiteStore(":memory:")
    for i, pid in enumerate(PLAYERS[:-1]):
        await store.ensure_player(pid, pid.title(), [10_000, 999, 300, 50_000][i], T0)
    for round_id in ("t1.1.1", "t1.1.2"):
        await store.commit_step("t1", b"{}", [], [OpenRound(
            table="t1", round_id=round_id, shoe_id="t1.1", round_no=int(round_id[-1]),
            closes_at=T0 + 15_000, limits=LIMITS)], T0)
    return store


def _slips(seed: int, n: int) -> list[tuple[SlipRequest, int]]:
    rng = random.Random(seed)
    made: list[tuple[SlipRequest, int]] = []
    for _ in range(n):
        if made and rng.random() < 0.1:  # the same frame again: a retry
            made.append(rng.choice(made))
            continue
        bets = tuple(p.SlipBet(bet_id=f"b{rng.randrange(60)}", spot=rng.choice(SPOTS),
                               amount=rng.choice([5, 20, 50, 120, 400, 600]))
                     for _ in range(rng.choice([1, 1, 2, 3])))
        slip = SlipRequest(
            player_id=rng.choice(PLAYERS), table=rng.choice(["t1"] * 9 + ["t2"]),
            slip_id=rng.choice([None, None, f"s{rng.randrange(25)}"]),
            round_id=rng.choice(["t1.1.1"] * 6 + ["t1.1.2", "t1.9.9"]), bets=bets)
        made.append((slip, T0 + 1 + rng.choice([0, 0, 0, 20_000])))  # some arrive late
    return made


def _rows(store: SQLiteStore) -> dict[str, list[Any]]:
    db: sqlite3.Connection = store.db
    return {name: db.execute(f"SELECT * FROM {name} ORDER BY 1, 2").fetchall()
            for name in ("accounts", "slips", "bets", "transfers", "round_players", "rounds")}


@pytest.mark.parametrize("seed", range(6))
async def test_one_batch_answers_and_writes_as_one_transaction_per_slip(seed: int) -> None:
    slips = _slips(seed, 300)
    alone, together = await _store(), await _store()
    try:
        one_by_one = [await alone.place_slip(slip, now) for slip, now in slips]
        batched = await asyncio.gather(*[together.place_slip(slip, now) for slip, now in slips])
        assert len(slips) < MAX_SLIPS_PER_TRANSACTION  # so they did share one transaction
        assert batched == one_by_one
        codes = {a.code if not isinstance(a, p.SlipAccepted) else "accepted"
                 for a in one_by_one}
        # the mix reached every branch worth comparing
        assert {"accepted", "duplicate_bet_id", "unknown_round", "betting_closed",
                "insufficient_funds", "not_a_player", "above_max"} <= codes, codes
        assert _rows(together) == _rows(alone)
        assert (await together.audit()).ok
    finally:
        await alone.close()
        await together.close()


@pytest.mark.parametrize("in_flight", [1, 2])
async def test_the_next_batch_goes_to_the_store_before_the_answered_callers_wake(
        in_flight: int) -> None:
    """Waking a batch's callers (each writes its answer to its connection) takes the event
    loop a while; the slips that arrived meanwhile must already be at the store by then,
    or the store idles through it (a 20,000-bet burst on SQLite: ack p99 136-314 ms
    before, 58-124 ms since). Also: never more than ``in_flight`` batches at the store at once."""
    events: list[tuple[str, list[str]]] = []
    first_answer = asyncio.Event()
    at_store = most_at_store = 0
    pending: list[tuple[Any, int, asyncio.Future[str]]] = []
    loop = asyncio.get_running_loop()

    async def take(batch: list[tuple[Any, int]]) -> list[str]:
        nonlocal at_store, most_at_store
        names = [slip for slip, _ in batch]
        events.append(("take", names))
        at_store += 1
        most_at_store = max(most_at_store, at_store)
        if names == ["a"]:
            await first_answer.wait()
        await asyncio.sleep(0)
        at_store -= 1
        return names

    async def caller(name: str) -> None:
        future: asyncio.Future[str] = loop.create_future()
        pending.append((name, T0, future))
        events.append(("woke", [await future]))

    async def turns() -> None:  # let every task that can run, run
        for _ in range(10):
            await asyncio.sleep(0)

    callers = [asyncio.create_task(caller("a"))]
    await turns()
    drain = asyncio.create_task(take_in_batches(pending, take, 2, in_flight=in_flight))
    await turns()
    assert events == [("take", ["a"])]
    callers += [asyncio.create_task(caller(name)) for name in "bcde"]
    await turns()
    first_answer.set()
    await asyncio.gather(*callers)
    await drain
    takes = [names for kind, names in events if kind == "take"]
    # in order, at most two a batch (``most``)
    assert [name for names in takes for name in names] == list("abcde")
    assert all(len(names) <= 2 for names in takes)
    assert events.index(("take", takes[1])) < events.index(("woke", ["a"]))
    assert most_at_store <= in_flight
    assert not pending
