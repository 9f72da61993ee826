"""A bet's path on PostgreSQL (bench/bet_path.py --store postgres): each room once, one way.

It entered the store's module three times (a wrapper around each public method, made in
``store.base``, then the slip queue calling back the store's batch-taker, whose
transaction went through the wrapper again): now the queue hands its batch down to the
slips' taker, which opens its transaction at the pool, the one door of every query.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # the repository, where bench/ is

from bench.bet_path import main  # noqa: E402  (once bench/ is on the path)


async def test_a_bet_on_postgres_walks_each_room_once_and_one_way() -> None:
    walked = await main("postgres")
    assert walked["path"] == [
        "server.gateway.connection", "server.gateway.commands", "server.gateway.intake",
        "store.postgres.store", "store.slip_queue", "store.postgres.slips",
        "store.postgres.pool",  # the batch's transaction, from below the store
        "betting.slips", "accounts", "server.gateway.client"]
    assert walked["re_entries"] == {}
