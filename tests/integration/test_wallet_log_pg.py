"""The wallet log contract and the ledger's ``withdraw`` (tests/unit/test_wallet_log.py)
on PostgreSQL: the same tests, with fixtures that build the PostgreSQL implementations,
each in a schema of its own on the module's server."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import itertools
import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import test_wallet_log as contract
from pg_util import PgCluster

from livetable.operator import log_postgres
from livetable.operator.log import WalletLog
from livetable.operator.log_postgres import PostgresWalletLog
from livetable.store.base import Store
from livetable.store.postgres import PostgresStore

_schemas = itertools.count()


@pytest.fixture
async def wallet_log(pg_cluster: PgCluster) -> AsyncIterator[WalletLog]:
    store = PostgresStore(pg_cluster.url, schema=f"w{next(_schemas)}", max_connections=2,
                          replication="none")
    yield PostgresWalletLog(store)
    await store.close()


@pytest.fixture
async def ledger(pg_cluster: PgCluster) -> AsyncIterator[Store]:
    store = PostgresStore(pg_cluster.url, schema=f"w{next(_schemas)}", max_connections=2,
                          replication="none")
    yield store
    await store.close()


for _name, _test in vars(contract).items():
    if _name.startswith("test_") and callable(_test) and {"wallet_log", "ledger"} & set(
            inspect.signature(_test).parameters):
        globals()[_name] = _test


async def test_calls_made_together_are_one_transaction_a_batch(pg_cluster: PgCluster) -> None:
    """100 seamless debits begun, answered, and their 100 rollbacks delivered, each
    hundred at once (as at the close of betting): a handful of transactions, not one per
    call (before: 300, each a commit — with a synchronous standby, a network round trip)."""
    store = PostgresStore(pg_cluster.url, schema=f"w{next(_schemas)}", max_connections=4,
                          replication="none")
    wallet_log = PostgresWalletLog(store)
    await wallet_log.backlog()  # the schema made
    used = 0
    connection = store.pool.connection

    @contextlib.asynccontextmanager
    async def counted() -> AsyncIterator[Any]:
        nonlocal used
        used += 1
        async with connection() as con:
            yield con

    store.pool.connection = counted  # type: ignore[method-assign]
    debits = [contract.debit(f"d-{n}", f"b{n}", player=f"p{n}") for n in range(100)]
    assert await asyncio.gather(*map(wallet_log.begin_debit, debits)) == [None] * 100
    assert all(await asyncio.gather(*(wallet_log.answer_debit(c, "unknown", "timeout",
                                                              contract.T0 + 5)
                                      for c in debits)))
    rollbacks = [contract.rollback(c) for c in debits]
    await wallet_log.enqueue(rollbacks, contract.T0 + 6)
    await asyncio.gather(*(wallet_log.delivered(c, True, "ok", contract.T0 + 9,
                                                contract.T0 + 7) for c in rollbacks))
    assert used <= 8, f"{used} transactions for 300 calls"
    store.pool.connection = connection  # type: ignore[method-assign]
    assert await wallet_log.backlog() == 0
    assert await wallet_log.open_debits(200) == []
    await wallet_log.close()
    await store.close()


def _filtered(plan: Any) -> tuple[int, list[str]]:
    """Rows a plan read and threw away, and the kinds of its nodes."""
    removed = int(plan.get("Rows Removed by Filter", 0))
    kinds = [plan["Node Type"]]
    for child in plan.get("Plans", []):
        more, under = _filtered(child)
        removed += more
        kinds += under
    return removed, kinds


async def test_the_sweepers_reads_go_by_index_not_through_the_history(
        pg_cluster: PgCluster) -> None:
    """What the sweeper reads four times a second — the pending debits past a deadline, the
    rounds with open debits — goes straight to them by index, whatever the log holds: none
    of 600 closed debits is read and thrown away (before, finding the expired debits read
    every debit ever made)."""
    store = PostgresStore(pg_cluster.url, schema=f"w{next(_schemas)}", max_connections=2,
                          replication="none")
    wallet_log = PostgresWalletLog(store)
    for i in range(600):
        call = contract.debit(f"d-{i}", f"b{i}", player=f"p{i % 40}",
                              round_id=f"t1.1.{i // 100}")
        await wallet_log.begin_debit(call)
        await wallet_log.answer_debit(call, "refused", "no", contract.T0, closed_by="refused")
    await wallet_log.begin_debit(contract.debit("d-open", "b-open", round_id="t1.9.9"))
    assert await wallet_log.open_rounds(10) == [("t1.9.9", False)]
    async with store.pool.transaction() as con:
        await con.execute("ANALYZE wallet_calls")
        await con.execute("SET LOCAL enable_seqscan = off")
        for query, arg in ((f"SELECT tx_id FROM wallet_calls WHERE {log_postgres._EXPIRED}",
                            contract.T0 + 10_000),
                           (log_postgres._OPEN_ROUNDS, 10)):
            [plan] = json.loads(await con.fetchval(
                f"EXPLAIN (ANALYZE, FORMAT JSON) {query}", arg))
            removed, kinds = _filtered(plan["Plan"])
            assert removed == 0 and "Seq Scan" not in kinds, (query, kinds, removed)
    await store.close()
