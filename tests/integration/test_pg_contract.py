"""The Store contract (tests/unit/test_store_contract.py, and its tips':
tests/unit/test_store_contract_tips.py) on the PostgreSQL store.

The contract's tests are taken as they are — every ``test_*`` there that runs on the
parametrised ``store``/``table``/``make_store`` fixtures — and run here against a
PostgreSQL server of this module's own (tests/pg_util.py), each store in a schema of its
own on it, so that tests cannot see each other.
"""

from __future__ import annotations

import inspect
import itertools
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import test_store_contract as contract
import test_store_contract_tips as tips_contract
from pg_util import PgCluster

from livetable.store import Store
from livetable.store.postgres import PostgresStore
from livetable.store.sqlite import DEFAULT_EVENT_RETENTION

_STORE_FIXTURES = {"store", "table", "make_store"}
_schemas = itertools.count()


@pytest.fixture(params=["postgres"])
async def make_store(pg_cluster: PgCluster) -> AsyncIterator[Callable[..., Awaitable[Store]]]:
    made: list[PostgresStore] = []

    async def make(event_retention: int = DEFAULT_EVENT_RETENTION) -> Store:
        store = PostgresStore(pg_cluster.url, schema=f"c{next(_schemas)}",
                              event_retention=event_retention, seal=contract.SEAL,
                              max_connections=4, replication="none")
        made.append(store)
        return store

    yield make
    for store in made:
        await store.close()


store = contract.store
table = contract.table

for _module in (contract, tips_contract):  # the tips' contract: the same fixtures
    for _name, _test in vars(_module).items():
        if _name.startswith("test_") and callable(_test) and _STORE_FIXTURES & set(
                inspect.signature(_test).parameters):
            globals()[_name] = _test
