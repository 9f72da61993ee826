"""The Store contract (tests/unit/test_store_contract.py) on the Redis store.

The contract's tests are taken as they are — every ``test_*`` there that runs on the
parametrised ``store``/``table``/``make_store`` fixtures — and run here against a
``redis-server`` of this module's own, through a ``make_store`` fixture that builds
:class:`RedisStore` instead of the contract's SQLite ones. (The contract's own tests that
reach into SQLite tables stay there; test_redis_store.py has their Redis counterparts.)
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
from redis_util import RedisServer

from livetable.store import Store
from livetable.store.redis import RedisStore
from livetable.store.sqlite import DEFAULT_EVENT_RETENTION

pytestmark = [
    pytest.mark.redis,
]

_STORE_FIXTURES = {"store", "table", "make_store"}
_prefixes = itertools.count()


@pytest.fixture(params=["redis"])
async def make_store(
    redis_server: RedisServer,
) -> AsyncIterator[Callable[..., Awaitable[Store]]]:
    """Each store its own key prefix on the shared server: tests cannot see each other."""
    made: list[RedisStore] = []

    async def make(event_retention: int = DEFAULT_EVENT_RETENTION) -> Store:
        store = RedisStore.from_url(redis_server.url, prefix=f"c{next(_prefixes)}",
                                    event_retention=event_retention, seal=contract.SEAL)
        made.append(store)
        return store

    yield make
    for store in made:
        await store.close()


store = contract.store
table = contract.table

for _name, _test in vars(contract).items():
    if _name.startswith("test_") and callable(_test) and _STORE_FIXTURES & set(
            inspect.signature(_test).parameters):
        globals()[_name] = _test
