"""The wallet log contract and the ledger's ``withdraw`` (tests/unit/test_wallet_log.py)
on Redis: the same tests, with fixtures that build the Redis implementations."""

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
from redis.asyncio import Redis
from redis_util import RedisServer

from livetable.operator.log import WalletLog
from livetable.operator.log_redis import RedisWalletLog
from livetable.store.base import Store
from livetable.store.redis import RedisStore

pytestmark = [pytest.mark.redis]

_prefixes = itertools.count()


@pytest.fixture
async def wallet_log(redis_server: RedisServer) -> AsyncIterator[WalletLog]:
    client = Redis.from_url(redis_server.url)
    yield RedisWalletLog(client, ["t1", "t2"], prefix=f"w{next(_prefixes)}")
    await client.aclose()


@pytest.fixture
async def ledger(redis_server: RedisServer) -> AsyncIterator[Store]:
    store = RedisStore.from_url(redis_server.url, prefix=f"w{next(_prefixes)}")
    yield store
    await store.close()


for _name, _test in vars(contract).items():
    if _name.startswith("test_") and callable(_test) and {"wallet_log", "ledger"} & set(
            inspect.signature(_test).parameters):
        globals()[_name] = _test


def test_every_key_of_a_call_is_in_its_tables_slot() -> None:
    """One hash tag per table: a Redis Cluster can shard the wallet log by table."""
    wallet_log = RedisWalletLog(Redis(), ["t1"])
    keys = [wallet_log._key("t1", name) for name in ("calls", "bodies", "slips", "open",
                                                      "due", "round:t1.1.1", "player:bob")]
    assert all("{t1}" in key for key in keys)
