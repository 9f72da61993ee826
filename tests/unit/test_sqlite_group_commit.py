"""SQLite's group commit judges a batch of slips exactly as one transaction per slip would.

The store reads a whole batch's facts in a few queries and keeps them current in memory as
it takes each slip (store/sqlite.py, ``_SlipBatch``). Here a few hundred random slips —
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
from livetable.engine import OpenRound
from livetable.store import SlipRequest, SQLiteStore
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
