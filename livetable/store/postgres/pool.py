"""The PostgreSQL store's connections: one asyncpg pool per process, and the one door every
query of the store goes through (:meth:`Pool.connection`), where an outage becomes
:class:`~livetable.store.base.StoreUnavailable` (:func:`.outages.is_pg_outage`) and a
connection in an unknown state is closed, not given back.

A transaction is :meth:`Pool.transaction`, once; :meth:`Pool.run` runs a piece of work in
one and again if the server rolled it back to break a deadlock or a serialization
conflict (:func:`retry_after`: the one policy, which the slip batches' own transaction
follows too, :mod:`.slips`).

Why one door, and not a wrapper around each method of the store: every query passes here
anyway, and a wrapper was one more room a bet walked through on its way (twice:
``bench/bet_path.py``); the operator's wallet log and the Redis migration share the pool
and now get the same errors as the store.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

import asyncpg

from livetable.store.base import StoreError, StoreUnavailable
from livetable.store.postgres.outages import RETRY_STATES, is_pg_outage
from livetable.store.postgres.schema import migrate

T = TypeVar("T")
#: Times a deadlock's or a conflict's victim is run in all.
ATTEMPTS = 5
#: The planner, per connection. The store's queries join a batch's arrays (``unnest``) to
#: a few rows of large tables: index lookups in a nested loop. With statistics that lag a
#: burst (a round's bets grow by thousands a second, before autovacuum analyses them),
#: the planner hashed the whole ``bets`` table for 100 slips instead (EXPLAIN ANALYZE:
#: a sequential scan of every bet, per batch and per settlement chunk). The audit, which
#: reads whole tables, turns them back on for its transaction. No JIT: every query is short.
PLANNER = {"enable_hashjoin": "off", "enable_mergejoin": "off", "jit": "off"}


async def retry_after(exc: asyncpg.PostgresError, attempt: int) -> None:
    """After ``exc`` ended attempt ``attempt`` (from 0) of a transaction: raise it unless
    the server rolled the transaction back as a deadlock's or a conflict's victim and
    attempts are left; else wait a little before the next."""
    if getattr(exc, "sqlstate", None) not in RETRY_STATES or attempt >= ATTEMPTS - 1:
        raise exc
    await asyncio.sleep(0.01 * (attempt + 1))


class Pool:
    """One asyncpg pool, opened (and the schema migrated) on first use."""

    def __init__(self, url: str, schema: str | None, max_connections: int) -> None:
        self.url = url
        self.schema = schema
        self.max_connections = max_connections
        self._pool: asyncpg.Pool | None = None
        self._opening = asyncio.Lock()

    async def _ready(self) -> asyncpg.Pool:
        if self._pool is None:
            async with self._opening:
                if self._pool is None:
                    settings = dict(PLANNER)
                    if self.schema is not None:
                        settings["search_path"] = self.schema
                    pool = await asyncpg.create_pool(
                        self.url, min_size=1, max_size=self.max_connections,
                        server_settings=settings, command_timeout=30)
                    async with pool.acquire() as con:
                        await migrate(con, self.schema)
                    self._pool = pool
        return self._pool

    @contextlib.asynccontextmanager
    async def connection(self) -> AsyncIterator[Any]:
        """A pooled connection. One that failed otherwise than by the server's answer (a
        connection lost, a call cancelled half way) is closed, not given back: its protocol
        state is unknown, and the next caller would meet it (``another operation is in
        progress``) instead of a fresh connection. An outage, in opening the pool or in
        the work, surfaces as :class:`StoreUnavailable`."""
        try:
            pool = await self._ready()
            async with pool.acquire() as con:
                try:
                    yield con
                except BaseException as exc:  # our own refusals come after a clean rollback
                    if (not isinstance(exc, asyncpg.PostgresError | StoreError)
                            or is_pg_outage(exc)):
                        con.terminate()
                    raise
        except Exception as exc:
            if is_pg_outage(exc) and not isinstance(exc, StoreError):
                raise StoreUnavailable(f"{type(exc).__name__}: {exc}") from exc
            raise

    @contextlib.asynccontextmanager
    async def transaction(self) -> AsyncIterator[Any]:
        """A connection in one transaction: committed if the block ends, else rolled back.
        A rollback that fails (the connection is gone) does not hide why the block failed."""
        async with self.connection() as con:
            transaction = con.transaction()
            await transaction.start()
            try:
                yield con
            except BaseException:
                if not con.is_closed():
                    with contextlib.suppress(Exception):
                        await transaction.rollback()
                raise
            await transaction.commit()

    async def run(self, work: Callable[[Any], Awaitable[T]]) -> T:
        """``work(connection)`` in one transaction, again if the server rolled it back as a
        deadlock's or a conflict's victim (:func:`retry_after`)."""
        for attempt in range(ATTEMPTS):
            try:
                async with self.transaction() as con:
                    return await work(con)
            except asyncpg.PostgresError as exc:
                await retry_after(exc, attempt)
        raise AssertionError("unreachable")

    async def close(self) -> None:
        if self._pool is not None:
            await self._pool.close()
            self._pool = None

    def terminate(self) -> None:
        if self._pool is not None:
            self._pool.terminate()
            self._pool = None
