"""How long ``livetable migrate-store`` takes on a large Redis ledger.

    .venv/bin/python bench/migrate_bench.py [--players 20000] [--rounds 5000]
                                            [--play 10] [--events 2000] [--bets 200000]

Writes a synthetic ledger in the retired Redis layout (livetable/migration/redis_ledger.py)
into a redis-server of its own: ``--players`` players each with one deposit and
``--play`` transfers of play in the journal, ``--rounds`` ended rounds over four tables
(each with an engine state and ``--events`` events), ``--bets`` settled bets (half of them
in slips with an id), the house holding what the players lost. Then copies it into a
fresh PostgreSQL of its own (tests/pg_util.py, a primary without standby) and times the
three parts: reading the Redis, the copy's one transaction (the bets read from Redis as
they are copied), the check. Prints JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import msgspec
from pg_util import start_pg  # the tests' helpers
from redis.asyncio import Redis
from redis_util import start_redis

from livetable.migration.redis_ledger import Layout, read_redis
from livetable.migration.redis_to_postgres import check, copy
from livetable.store.postgres import PostgresStore

TABLES = ["t1", "t2", "t3", "t4"]


async def fill(redis: Redis, args: argparse.Namespace, rng: random.Random) -> None:
    keys = Layout()
    pipe = redis.pipeline(transaction=False)
    pipe.set(keys.identity, "bench0000identity")
    won_total = deposited = 0
    for n in range(args.players):
        pid = f"p{n}"
        deposit = rng.randint(1_000, 100_000)
        won = rng.randint(-deposit, deposit)
        won_total += won
        deposited += deposit
        pipe.hset(keys.accounts, pid, "player")
        pipe.hset(keys.balances, pid, deposit + won)
        pipe.hset(keys.names, pid, pid.upper())
        pipe.hset(keys.created, pid, 1)
        pipe.xadd(keys.journal, {"id": f"deposit:d{n}", "debit": "external", "credit": pid,
                                 "amount": deposit, "kind": "deposit", "ref": pid, "at": 1})
        for k in range(args.play):
            pipe.xadd(keys.journal, {"id": f"slip:{n}.{k}", "debit": pid, "credit": "hold:r",
                                     "amount": 1, "kind": "bet", "ref": "r", "at": 2})
        if n % 1000 == 999:
            await pipe.execute()
    pipe.hset(keys.accounts, mapping={"house": "house", "external": "external"})
    pipe.hset(keys.balances, mapping={"house": -won_total, "external": -deposited})
    for r in range(args.rounds):
        table, round_id = TABLES[r % 4], f"{TABLES[r % 4]}.1.{r}"
        pipe.hset(keys.rounds, round_id, table)
        pipe.hset(keys.round(table, round_id, "info"), mapping={
            "shoe_id": f"{table}.1", "round_no": r, "state": "settled", "closes_at": 5,
            "min": 10, "max": 1000, "pair_min": 10, "pair_max": 500, "round_max": 5000,
            "cards": "{}", "spots": "{}", "opened_at": 1, "ended_at": 9, "cursor": 1})
        if r % 1000 == 999:
            await pipe.execute()
    for seq in range(1, args.bets + 1):
        r, pid = seq % max(args.rounds, 1), f"p{seq % args.players}"
        bet = [pid, f"b{seq}", TABLES[r % 4], f"{TABLES[r % 4]}.1.{r}", "P1", 100, 100, 3,
               1_000, "settled", "lose", 1, 0, 9, 900]
        pipe.hset(keys.bets, str(seq), msgspec.msgpack.encode(bet))
        if seq % 2:  # half of them in a slip with an id, of one bet
            pipe.hset(keys.player_slips(pid), f"s{seq}", msgspec.msgpack.encode([str(seq)]))
        if seq % 1000 == 0:
            await pipe.execute()
    for table in TABLES:
        pipe.hset(keys.table(table, "state"), mapping={
            "state": rng.randbytes(2_000), "epoch": 1, "seq": args.events})
        for seq in range(1, args.events + 1):
            pipe.xadd(keys.table(table, "events"), {"epoch": 1, "seq": seq,
                                                    "frame": rng.randbytes(200)})
    await pipe.execute()


async def run(args: argparse.Namespace) -> dict[str, object]:
    with tempfile.TemporaryDirectory() as tmp, start_redis(Path(tmp)) as server:
        cluster = start_pg()
        redis = Redis.from_url(server.url)
        store = PostgresStore(cluster.primary.url, max_connections=2)
        try:
            await fill(redis, args, random.Random(1))
            started = time.perf_counter()
            source = await read_redis(redis, Layout())
            read = time.perf_counter()
            bets = await copy(store, redis, Layout(), source, 10)
            copied = time.perf_counter()
            problems = await check(store, source, bets)
            checked = time.perf_counter()
            assert not problems, problems
        finally:
            await redis.aclose()
            await store.close()
            cluster.stop()
    return {"players": args.players, "journal": source.journal, "rounds": args.rounds,
            "bets": bets,
            "events": args.events * len(TABLES), "read_s": round(read - started, 2),
            "copy_s": round(copied - read, 2), "check_s": round(checked - copied, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--players", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=5_000)
    parser.add_argument("--play", type=int, default=10, help="play transfers per player")
    parser.add_argument("--events", type=int, default=2_000, help="events per table")
    parser.add_argument("--bets", type=int, default=200_000, help="bets in the Bet Record")
    print(json.dumps(asyncio.run(run(parser.parse_args()))))


if __name__ == "__main__":
    main()
