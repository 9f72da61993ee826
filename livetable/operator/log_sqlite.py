"""The wallet log in the embedded SQLite database file (its contract and records:
:mod:`livetable.operator.log`). Its table is among the ledger's migrations
(store/ledger/schema.py), which it applies too if it opens the file first."""

from __future__ import annotations

from pathlib import Path

import msgspec

from livetable.operator.log import CallState, WalletCall
from livetable.store.base import surface_outages
from livetable.store.ledger.schema import connect, is_sqlite_outage, transaction

_FIELDS = tuple(WalletCall.__struct_fields__)
_COLUMNS = ", ".join(_FIELDS)


def _row(row: tuple[object, ...]) -> WalletCall:
    values = dict(zip(_FIELDS, row, strict=True))
    body = values["body"]
    values["body"] = bytes(body) if isinstance(body, bytes | memoryview) else body
    return msgspec.convert(values, WalletCall)


@surface_outages(is_sqlite_outage)
class SQLiteWalletLog:
    """The wallet log in the embedded database file, on a connection of its own.

    The file locked past ``busy_timeout``, or a disk I/O error, surfaces as
    :class:`~livetable.store.base.StoreUnavailable` (:func:`surface_outages`).

    Its own connection (its table is among the ledger's migrations, which it applies too
    if it opens the file first): the log never shares a transaction with the ledger —
    every step that touches both is idempotent by id instead (see
    :mod:`livetable.operator.seamless`) — so it needs nothing of the ledger's connection, and
    nothing waits on the other's work beyond SQLite's own write lock (``busy_timeout``).
    """

    def __init__(self, path: str | Path, synchronous: str = "NORMAL") -> None:
        # the ledger's durability (store/ledger/schema.py): NORMAL survives a process
        # crash, which is what the outbox must; WAL's default (FULL) would fsync every
        # debit twice
        self.db = connect(str(path), synchronous)
        self.db.execute("PRAGMA busy_timeout=5000")

    def _select(self, where: str, args: tuple[object, ...]) -> list[WalletCall]:
        rows = self.db.execute(f"SELECT {_COLUMNS} FROM wallet_calls WHERE {where}",
                               args).fetchall()
        return [_row(r) for r in rows]

    async def begin_debit(self, call: WalletCall) -> WalletCall | None:
        with transaction(self.db):
            prior = self._select("method = 'debit' AND player_id = ? AND slip_key = ?",
                                 (call.player_id, call.slip_key))
            if not prior:
                self._insert(call)
        return prior[0] if prior else None

    def _insert(self, call: WalletCall) -> None:
        values = [getattr(call, name) for name in _FIELDS]
        self.db.execute(f"INSERT OR IGNORE INTO wallet_calls ({_COLUMNS}) VALUES "
                        f"({', '.join('?' * len(_FIELDS))})", values)

    async def answer_debit(self, debit: WalletCall, state: CallState, answer: str, now: int,
                           closed_by: str | None = None) -> bool:
        cur = self.db.execute(
            "UPDATE wallet_calls SET state = ?, answer = ?, attempts = attempts + 1, "
            "updated_at = ?, closed_by = COALESCE(closed_by, ?) "
            "WHERE tx_id = ? AND state = 'pending'",
            (state, answer, now, closed_by, debit.tx_id))
        return cur.rowcount == 1

    async def expire_debits(self, before: int, now: int) -> list[WalletCall]:
        with transaction(self.db):
            expired = self._select("method = 'debit' AND state = 'pending' AND deadline < ?",
                                   (before,))
            self.db.executemany(
                "UPDATE wallet_calls SET state = 'unknown', answer = 'no answer by the "
                "deadline', updated_at = ? WHERE tx_id = ? AND state = 'pending'",
                [(now, c.tx_id) for c in expired])
        for call in expired:
            call.state = "unknown"
        return expired

    async def enqueue(self, calls: list[WalletCall], closes: list[str], now: int) -> None:
        with transaction(self.db):
            for call in calls:
                self._insert(call)
            closer = calls[0].tx_id if calls else None
            self.db.executemany(
                "UPDATE wallet_calls SET closed_by = ?, updated_at = ? "
                "WHERE tx_id = ? AND closed_by IS NULL", [(closer, now, t) for t in closes])

    async def open_debits(self, limit: int) -> list[WalletCall]:
        return self._select("method = 'debit' AND closed_by IS NULL ORDER BY created_at "
                            "LIMIT ?", (limit,))

    async def due(self, now: int, limit: int) -> list[WalletCall]:
        return self._select("state = 'queued' AND next_at <= ? ORDER BY next_at LIMIT ?",
                            (now, limit))

    async def delivered(self, call: WalletCall, ok: bool, answer: str, next_at: int,
                        now: int) -> None:
        self.db.execute(
            "UPDATE wallet_calls SET state = CASE WHEN ? THEN 'ok' ELSE state END, "
            "answer = ?, attempts = attempts + 1, next_at = ?, updated_at = ? "
            "WHERE tx_id = ? AND state = 'queued'", (ok, answer, next_at, now, call.tx_id))

    async def calls(self, round_id: str | None = None, player_id: str | None = None,
                    limit: int = 10_000) -> list[WalletCall]:
        return self._select(
            "(? IS NULL OR round_id = ?) AND (? IS NULL OR player_id = ?) "
            "ORDER BY created_at, rowid LIMIT ?",
            (round_id, round_id, player_id, player_id, limit))

    async def backlog(self) -> int:
        row = self.db.execute("SELECT COUNT(*) FROM wallet_calls WHERE state = 'queued'"
                              ).fetchone()
        return int(row[0])

    async def close(self) -> None:
        self.db.close()
