"""In-process ledger benchmark (issue 3): bet intake and settlement through the store.

    .venv/bin/python bench/store_bench.py [--bets 100000] [--players 5000] [--redis URL]

Bet intake: ``place_bet`` calls, store included, ``--concurrency`` of them in flight at
once (as when many players bet in the same second; 1 = strictly one after another).
Settlement: one ``commit_step`` with the SettleRound effect of a round that holds every one
of those bets. Prints JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import tempfile
import time
from pathlib import Path

from livetable import protocol as p
from livetable.engine.table import OpenRound, SetBetting, SettleRound
from livetable.rules import BET_SPOTS, DEAL_ORDER, hand_of, parse_cards, settle_round
from livetable.store.base import BetRequest, Store
from livetable.store.sqlite import SQLiteStore


async def run(store: Store, bets: int, players: int, concurrency: int = 100,
              seed: int = 1) -> dict[str, float]:
    rng = random.Random(seed)
    now = 1_000
    for i in range(players):
        await store.ensure_player(f"p{i}", f"P{i}", 10**9, now)
    limits = p.Limits(min=1, max=10**9, pair_min=1, pair_max=10**9, round_max=10**12)
    await store.commit_step("t1", b"{}", [], [OpenRound(table="t1", round_id="r1", shoe_id="s1",
                                                        round_no=1, closes_at=10**15,
                                                        limits=limits)], now)
    requests = [BetRequest(player_id=f"p{i % players}", table="t1", bet_id=f"b{i}",
                           round_id="r1", spot=rng.choice(list(BET_SPOTS)).value,
                           amount=rng.randint(1, 500)) for i in range(bets)]
    started = time.perf_counter()
    for first in range(0, len(requests), concurrency):  # `concurrency` players at once
        answers = await asyncio.gather(*(store.place_bet(r, now)
                                         for r in requests[first:first + concurrency]))
        assert all(isinstance(a, p.BetAccepted) for a in answers), answers[:3]
    intake = time.perf_counter() - started
    await store.commit_step("t1", b"{}", [], [SetBetting(table="t1", round_id="r1",
                                                         status="closed", closes_at=None)], now)
    cards = ["9D", "7C", "KH", "9H", "5C", "5S", "JD", "AC", "2H", "4H", "6S", "8S"]
    hands = {pos: hand_of(parse_cards(f"{cards[2 * i]} {cards[2 * i + 1]}"))
             for i, pos in enumerate(DEAL_ORDER)}
    spots = {k.value: (v.outcome, v.odds, v.returned_multiple)
             for k, v in settle_round(hands).items()}
    effect = SettleRound(table="t1", round_id="r1", spots=spots,
                         cards={pos.value: [str(c) for c in hands[pos].cards]
                                for pos in DEAL_ORDER})
    started = time.perf_counter()
    settled = await store.commit_step("t1", b"{}", [], [effect], now)
    settle = time.perf_counter() - started
    assert len(settled) == bets
    audit = await store.audit()
    assert audit.ok, audit.problems
    return {"bets": bets, "players": players, "concurrency": concurrency,
            "intake_seconds": intake,
            "bets_per_second": bets / intake, "settle_seconds": settle}


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--bets", type=int, default=100_000)
    parser.add_argument("--players", type=int, default=5_000)
    parser.add_argument("--concurrency", type=int, default=100,
                        help="bets in flight at once (1 = one after another)")
    parser.add_argument("--redis", help="also measure the Redis store at this URL (flushed!)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        store = SQLiteStore(Path(tmp) / "bench.sqlite3")
        result = {"sqlite": await run(store, args.bets, args.players, args.concurrency)}
        await store.close()
    if args.redis:
        from livetable.store.redis import RedisStore

        redis_store = RedisStore.from_url(args.redis)
        result["redis"] = await run(redis_store, args.bets, args.players, args.concurrency)
        await redis_store.close()
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    asyncio.run(main())
