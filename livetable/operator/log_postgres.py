"""The wallet log (:class:`~livetable.store.wallet.WalletLog`) in PostgreSQL, next to the
ledger: the calls to a seamless wallet and the outbox of those still owed.

Why next to the ledger: with the PostgreSQL store the money's system of record has a
synchronous standby, and the record of what the operator's wallet was asked for — a debit
in doubt, a credit still owed — is money too: a failover that lost it would lose a player's
winnings or debit a stake twice. So the log shares the store's pool and its durability
(table ``wallet_calls``, the store's migration 2), and follows
:class:`~livetable.store.wallet.SQLiteWalletLog` statement for statement: the same contract
tests hold it (tests/integration/test_wallet_log_pg.py). As there, the log never shares a
transaction with the ledger: every step that touches both is idempotent by id instead.
"""

from __future__ import annotations

from typing import Any

import msgspec

from livetable.operator.log import CallState, WalletCall
from livetable.store.base import surface_outages
from livetable.store.ledger.wallet import closes
from livetable.store.postgres.store import PostgresStore, is_pg_outage

_FIELDS = tuple(WalletCall.__struct_fields__)
_COLUMNS = ", ".join(_FIELDS)
_INSERT = (f"INSERT INTO wallet_calls ({_COLUMNS}) VALUES "
           f"({', '.join(f'${n}' for n in range(1, len(_FIELDS) + 1))}) "
           f"ON CONFLICT DO NOTHING RETURNING 1")


def _call(row: Any) -> WalletCall:
    return msgspec.convert(dict(zip(_FIELDS, row, strict=True)), WalletCall)


def _values(call: WalletCall) -> list[Any]:
    return [getattr(call, name) for name in _FIELDS]


@surface_outages(is_pg_outage)
class PostgresWalletLog:
    """The wallet log on the PostgreSQL store's connections."""

    def __init__(self, store: PostgresStore) -> None:
        self.store = store

    async def _select(self, where: str, *args: Any) -> list[WalletCall]:
        async with self.store._connection() as con:
            rows = await con.fetch(f"SELECT {_COLUMNS} FROM wallet_calls WHERE {where}", *args)
        return [_call(r) for r in rows]

    async def begin_debit(self, call: WalletCall) -> WalletCall | None:
        async def work(con: Any) -> WalletCall | None:
            if await con.fetchval(_INSERT, *_values(call)):
                return None
            prior = await con.fetch(f"SELECT {_COLUMNS} FROM wallet_calls WHERE method = "
                                    f"'debit' AND player_id = $1 AND slip_key = $2",
                                    call.player_id, call.slip_key)
            return _call(prior[0]) if prior else None

        return await self.store._transaction(work)

    async def debit_of(self, player_id: str, table_id: str, slip_key: str
                       ) -> WalletCall | None:
        async with self.store._connection() as con:
            found = await con.fetch(f"SELECT {_COLUMNS} FROM wallet_calls WHERE method = "
                                    f"'debit' AND player_id = $1 AND slip_key = $2 AND "
                                    f"table_id = $3", player_id, slip_key, table_id)
        return _call(found[0]) if found else None

    async def answer_debit(self, debit: WalletCall, state: CallState, answer: str, now: int,
                           closed_by: str | None = None) -> bool:
        async with self.store._connection() as con:
            done = await con.execute(
                "UPDATE wallet_calls SET state = $1, answer = $2, attempts = attempts + 1, "
                "updated_at = $3, closed_by = COALESCE(closed_by, $4) "
                "WHERE tx_id = $5 AND state = 'pending'",
                state, answer, now, closed_by, debit.tx_id)
        return bool(done == "UPDATE 1")

    async def expire_debits(self, before: int, now: int) -> list[WalletCall]:
        async def work(con: Any) -> list[WalletCall]:
            expired = [_call(r) for r in await con.fetch(
                f"SELECT {_COLUMNS} FROM wallet_calls WHERE method = 'debit' AND "
                f"state = 'pending' AND deadline < $1 ORDER BY n FOR UPDATE", before)]
            await con.execute(
                "UPDATE wallet_calls SET state = 'unknown', answer = 'no answer by the "
                "deadline', updated_at = $1 WHERE tx_id = ANY($2::text[]) AND "
                "state = 'pending'", now, [c.tx_id for c in expired])
            return expired

        expired = await self.store._transaction(work)
        for call in expired:
            call.state = "unknown"
        return expired

    async def enqueue(self, calls: list[WalletCall], now: int) -> None:
        async def work(con: Any) -> None:
            await con.executemany(_INSERT, [_values(call) for call in calls])
            await con.executemany("UPDATE wallet_calls SET closed_by = $1, updated_at = $2 "
                                  "WHERE tx_id = $3 AND closed_by IS NULL",
                                  [(call.tx_id, now, t) for call in calls
                                   for t in closes(call)])

        await self.store._transaction(work)

    async def open_debits(self, limit: int) -> list[WalletCall]:
        return await self._select("method = 'debit' AND closed_by IS NULL ORDER BY "
                                  "created_at, n LIMIT $1", limit)

    async def due(self, now: int, limit: int) -> list[WalletCall]:
        return await self._select("state = 'queued' AND next_at <= $1 ORDER BY next_at, n "
                                  "LIMIT $2", now, limit)

    async def delivered(self, call: WalletCall, ok: bool, answer: str, next_at: int,
                        now: int) -> None:
        async with self.store._connection() as con:
            await con.execute(
                "UPDATE wallet_calls SET state = CASE WHEN $1 THEN 'ok' ELSE state END, "
                "answer = $2, attempts = attempts + 1, next_at = $3, updated_at = $4 "
                "WHERE tx_id = $5 AND state = 'queued'", ok, answer, next_at, now, call.tx_id)

    async def calls(self, round_id: str | None = None, player_id: str | None = None,
                    limit: int = 10_000) -> list[WalletCall]:
        return await self._select(
            "($1::text IS NULL OR round_id = $1) AND ($2::text IS NULL OR player_id = $2) "
            "ORDER BY created_at, n LIMIT $3", round_id, player_id, limit)

    async def backlog(self) -> int:
        async with self.store._connection() as con:
            return int(await con.fetchval(
                "SELECT count(*) FROM wallet_calls WHERE state = 'queued'"))

    async def close(self) -> None:
        """Nothing of its own to close: the store's pool is the store's."""
