"""asyncpg or psycopg 3 for the PostgreSQL store: client CPU per call and per batch.

    .venv/bin/python bench/pg_driver_bench.py [--url URL] [--calls 3000] [--batches 40]

What the store does most, with each driver from one asyncio process: a call (one
prepared ``SELECT`` by primary key, a player's balance: one round trip), and a batch (the
shape of a group commit of 2,000 slips: in one transaction, read 2,000 rows by an array of
ids and write 2,000 rows from arrays with ``unnest``). The client process's CPU (user +
system) per call and per batch is what counts: on this 2-core machine the gateway's event
loop, not PostgreSQL, runs out first. Without ``--url`` a primary of its own is started
(tests/pg_util.py). Prints JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import asyncpg
import psycopg

ROWS = 2_000
SETUP = ("DROP TABLE IF EXISTS bench_accounts, bench_rows; "
         "CREATE TABLE bench_accounts (id text PRIMARY KEY, balance bigint NOT NULL); "
         "CREATE TABLE bench_rows (id bigint PRIMARY KEY, player text, amount bigint); "
         "INSERT INTO bench_accounts SELECT 'p' || n, n FROM generate_series(0, 9999) n")


def _cpu() -> float:
    return time.process_time()  # this process's user + system CPU, finely


async def _measure(runs: int, one: Callable[[int], Awaitable[None]]) -> dict[str, float]:
    wall, cpu = time.perf_counter(), _cpu()
    for n in range(runs):
        await one(n)
    wall, cpu = time.perf_counter() - wall, _cpu() - cpu
    return {"cpu_us": round(cpu / runs * 1e6, 1), "wall_us": round(wall / runs * 1e6, 1)}


async def bench_asyncpg(url: str, calls: int, batches: int) -> dict[str, Any]:
    con = await asyncpg.connect(url)
    await con.execute(SETUP)

    async def call(n: int) -> None:
        await con.fetchval("SELECT balance FROM bench_accounts WHERE id = $1", f"p{n % 10000}")

    async def batch(n: int) -> None:
        ids = [f"p{(n * ROWS + i) % 10000}" for i in range(ROWS)]
        async with con.transaction():
            await con.fetch("SELECT id, balance FROM bench_accounts WHERE id = ANY($1::text[]) "
                            "ORDER BY id FOR UPDATE", ids)
            await con.execute("INSERT INTO bench_rows SELECT * FROM unnest($1::bigint[], "
                              "$2::text[], $3::bigint[])", list(range(n * ROWS, (n + 1) * ROWS)),
                              ids, [10] * ROWS)

    result = {"call": await _measure(calls, call), "batch": await _measure(batches, batch)}
    await con.close()
    return result


async def bench_psycopg(url: str, calls: int, batches: int) -> dict[str, Any]:
    con = await psycopg.AsyncConnection.connect(url, autocommit=True)
    await con.execute(SETUP)

    async def call(n: int) -> None:
        cur = await con.execute("SELECT balance FROM bench_accounts WHERE id = %s",
                                (f"p{n % 10000}",), prepare=True)
        await cur.fetchone()

    async def batch(n: int) -> None:
        ids = [f"p{(n * ROWS + i) % 10000}" for i in range(ROWS)]
        async with con.transaction():
            cur = await con.execute("SELECT id, balance FROM bench_accounts WHERE id = "
                                    "ANY(%s::text[]) ORDER BY id FOR UPDATE", (ids,),
                                    prepare=True)
            await cur.fetchall()
            await con.execute("INSERT INTO bench_rows SELECT * FROM unnest(%s::bigint[], "
                              "%s::text[], %s::bigint[])",
                              (list(range(n * ROWS, (n + 1) * ROWS)), ids, [10] * ROWS),
                              prepare=True)

    result = {"call": await _measure(calls, call), "batch": await _measure(batches, batch)}
    await con.close()
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", help="a PostgreSQL URL (default: start a primary)")
    parser.add_argument("--calls", type=int, default=3_000)
    parser.add_argument("--batches", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=3, help="alternate the drivers N times")
    args = parser.parse_args()
    cluster = None
    url = args.url
    if url is None:
        sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
        from pg_util import start_pg  # the tests' helper

        cluster = start_pg()
        url = cluster.primary.url
    try:
        results: dict[str, list[Any]] = {"asyncpg": [], "psycopg": []}
        for _ in range(args.rounds):  # alternately: a busy machine slows both alike
            results["asyncpg"].append(asyncio.run(bench_asyncpg(url, args.calls, args.batches)))
            results["psycopg"].append(asyncio.run(bench_psycopg(url, args.calls, args.batches)))
        best = {name: {kind: min(r[kind]["cpu_us"] for r in runs) for kind in ("call", "batch")}
                for name, runs in results.items()}
        print(json.dumps({"runs": results, "best_cpu_us": best,
                          "psycopg_version": psycopg.__version__,
                          "asyncpg_version": asyncpg.__version__}, indent=1))
    finally:
        if cluster is not None:
            cluster.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
