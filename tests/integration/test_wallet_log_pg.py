"""The wallet log contract and the ledger's ``withdraw`` (tests/unit/test_wallet_log.py)
on PostgreSQL: the same tests, with fixtures that build the PostgreSQL implementations,
each in a schema of its own on the module's server."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import itertools
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import test_wallet_log as contract
from pg_util import PgCluster

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
