"""The wallet log contract and the ledger's ``withdraw`` (tests/unit/test_wallet_log.py)
on PostgreSQL: the same tests, with fixtures that build the PostgreSQL implementations,
each in a schema of its own on the module's server."""

from __future__ import annotations

import inspect
import itertools
import sys
from collections.abc import AsyncIterator
from pathlib import Path

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
    store = PostgresStore(pg_cluster.url, schema=f"w{next(_schemas)}", max_connections=2)
    yield PostgresWalletLog(store)
    await store.close()


@pytest.fixture
async def ledger(pg_cluster: PgCluster) -> AsyncIterator[Store]:
    store = PostgresStore(pg_cluster.url, schema=f"w{next(_schemas)}", max_connections=2)
    yield store
    await store.close()


for _name, _test in vars(contract).items():
    if _name.startswith("test_") and callable(_test) and {"wallet_log", "ledger"} & set(
            inspect.signature(_test).parameters):
        globals()[_name] = _test
