"""The wallet log in the embedded SQLite database file (its contract and records:
:mod:`livetable.operator.log`).

Never on the event loop, and in group commits. Every seamless slip writes the log twice
(its debit before the call, the answer after), at the close of betting hundreds at once;
the operator's credits and rollbacks after a round, thousands. Each of those, run as its
own ``sqlite3`` call inside ``async def``, was a blocking call on the event loop (up to the
5 s busy timeout while the ledger's writer held the file's lock, every socket frozen) and
a transaction of its own. So the log's work runs on a writer thread of its own, and the
calls that arrive while it is busy wait for one another and go in the next transaction
together (each in a savepoint of its own: one that fails fails alone). The event loop
only queues a call and awaits its answer.

And in a file of its own, beside the ledger's (``livetable-wallet.sqlite3``). In the
ledger's file, under ``livetable serve`` the log's thread and the ledger's writer process
took turns at the file's one write lock, and SQLite's busy handler (a sleep and a retry)
lost the race at the close of betting: measured (docs/benchmarks.md), debits waited for
the lock until their 3 s deadline and were refused ``wallet_unavailable``; in a file of
its own, 200 players × 10 bets were all accepted. The log never shares a transaction with
the ledger anyway (every step that touches both is idempotent by id), so nothing is lost
by the split. A log found in the ledger's file (the layout before) is moved over when
the log is opened (:func:`_move_from`).
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import msgspec

from livetable.operator.log import CallState, WalletCall
from livetable.store.base import surface_outages
from livetable.store.ledger.schema import check_synchronous, create_private, is_sqlite_outage

_SCHEMA = """
CREATE TABLE IF NOT EXISTS wallet_calls (
    tx_id TEXT PRIMARY KEY,
    method TEXT NOT NULL,
    player_id TEXT NOT NULL,
    currency TEXT NOT NULL,
    table_id TEXT NOT NULL,
    round_id TEXT NOT NULL,
    amount INTEGER NOT NULL,
    body BLOB NOT NULL,
    state TEXT NOT NULL,
    answer TEXT,
    attempts INTEGER NOT NULL DEFAULT 0,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    slip_key TEXT,
    deadline INTEGER NOT NULL DEFAULT 0,
    closed_by TEXT,
    next_at INTEGER NOT NULL DEFAULT 0,
    debits TEXT NOT NULL DEFAULT ''
);
CREATE UNIQUE INDEX IF NOT EXISTS wallet_slips ON wallet_calls (player_id, slip_key)
    WHERE method = 'debit';
CREATE INDEX IF NOT EXISTS wallet_open ON wallet_calls (created_at)
    WHERE method = 'debit' AND closed_by IS NULL;
CREATE INDEX IF NOT EXISTS wallet_due ON wallet_calls (next_at) WHERE state = 'queued';
CREATE INDEX IF NOT EXISTS wallet_rounds ON wallet_calls (round_id, player_id);
CREATE INDEX IF NOT EXISTS wallet_players ON wallet_calls (player_id, created_at)
"""

R = TypeVar("R")
#: Calls in one transaction at most (a batch stays a few milliseconds on the thread).
MAX_CALLS_PER_TRANSACTION = 1000

_FIELDS = tuple(WalletCall.__struct_fields__)
_COLUMNS = ", ".join(_FIELDS)


def _row(row: tuple[object, ...]) -> WalletCall:
    values = dict(zip(_FIELDS, row, strict=True))
    body = values["body"]
    values["body"] = bytes(body) if isinstance(body, bytes | memoryview) else body
    return msgspec.convert(values, WalletCall)


def _move_from(db: sqlite3.Connection, old: Path) -> None:
    """Move a wallet log kept in the ledger's file (the layout before) into ``db``: every
    call copied (one already here is kept), then the old table dropped. A crash between
    the two copies again next time, which changes nothing."""
    db.execute("ATTACH DATABASE ? AS old", (str(old),))
    try:
        if db.execute("SELECT 1 FROM old.sqlite_master WHERE type = 'table' AND "
                      "name = 'wallet_calls'").fetchone() is None:
            return
        db.execute(f"INSERT OR IGNORE INTO main.wallet_calls ({_COLUMNS}) "
                   f"SELECT {_COLUMNS} FROM old.wallet_calls")
        db.execute("DROP TABLE old.wallet_calls")
    finally:
        db.execute("DETACH DATABASE old")


@surface_outages(is_sqlite_outage)
class SQLiteWalletLog:
    """The wallet log in a SQLite file of its own beside the ledger's, on a connection and
    a writer thread of its own (see the module's docstring).

    The file locked past ``busy_timeout``, or a disk I/O error, surfaces as
    :class:`~livetable.store.base.StoreUnavailable` (:func:`surface_outages`).

    The log never shares a transaction with the ledger — every step that touches both is
    idempotent by id instead (see :mod:`livetable.operator.seamless`) — so neither waits
    for the other's work. ``moved_from``: the ledger's file, where an older version kept
    the log (moved over here on opening).
    """

    def __init__(self, path: str | Path, synchronous: str = "NORMAL", *,
                 moved_from: str | Path | None = None) -> None:
        if str(path) != ":memory:":  # 0600 in a 0700 directory, whatever the umask
            create_private(Path(path))
        self.db = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA busy_timeout=5000")
        # the ledger's durability (store/sqlite.py): NORMAL survives a process crash, which
        # is what the outbox must; WAL's default (FULL) would fsync every debit twice
        self.db.execute(f"PRAGMA synchronous={check_synchronous(synchronous)}")
        for statement in _SCHEMA.split(";"):
            if statement.strip():
                self.db.execute(statement)
        if moved_from is not None and Path(moved_from).exists() \
                and Path(moved_from).resolve() != Path(path).resolve():
            _move_from(self.db, Path(moved_from))
        self.writer = ThreadPoolExecutor(max_workers=1,
                                         thread_name_prefix="livetable-wallet-log")
        self._pending: list[tuple[Callable[[], Any], asyncio.Future[Any]]] = []
        self._draining: asyncio.Task[None] | None = None

    # --- the group commit ----------------------------------------------------------------

    async def _in_batch(self, work: Callable[[], R]) -> R:
        """Run ``work`` on the writer thread inside the next transaction; calls that come
        while one is running go together in the one after."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[R] = loop.create_future()
        self._pending.append((work, future))
        if self._draining is None:
            self._draining = loop.create_task(self._drain())
        return await future

    async def _drain(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            while self._pending:
                batch = self._pending[:MAX_CALLS_PER_TRANSACTION]
                del self._pending[:MAX_CALLS_PER_TRANSACTION]
                try:
                    results = await loop.run_in_executor(
                        self.writer, self._apply, [work for work, _ in batch])
                except Exception as exc:  # the transaction failed: each call did
                    for _, future in batch:
                        if not future.done():
                            future.set_exception(exc)
                    continue
                for (_, future), (ok, value) in zip(batch, results, strict=True):
                    if future.done():  # its caller gave up waiting
                        continue
                    if ok:
                        future.set_result(value)
                    else:
                        future.set_exception(value)
        finally:
            self._draining = None

    def _apply(self, works: list[Callable[[], Any]]) -> list[tuple[bool, Any]]:
        """On the writer thread: one transaction, each call in a savepoint of its own."""
        db = self.db
        db.execute("BEGIN IMMEDIATE")
        try:
            out: list[tuple[bool, Any]] = []
            for work in works:
                db.execute("SAVEPOINT call")
                try:
                    out.append((True, work()))
                except Exception as exc:
                    try:
                        db.execute("ROLLBACK TO call")
                    except sqlite3.Error:
                        # the transaction is gone (SQLite rolled it back: a full disk):
                        # the batch fails, with why, not with the rollback's own error
                        raise exc from None
                    out.append((False, exc))
                db.execute("RELEASE call")
            db.execute("COMMIT")
        except BaseException:
            # a COMMIT that failed on a full disk was already rolled back by SQLite: the
            # ROLLBACK's own error must not replace the one that says why
            with contextlib.suppress(sqlite3.Error):
                db.execute("ROLLBACK")
            raise
        return out

    # --- the calls (each runs on the writer thread, inside a batch's transaction) --------

    def _select(self, where: str, args: tuple[object, ...]) -> list[WalletCall]:
        rows = self.db.execute(f"SELECT {_COLUMNS} FROM wallet_calls WHERE {where}",
                               args).fetchall()
        return [_row(r) for r in rows]

    def _insert(self, call: WalletCall) -> None:
        values = [getattr(call, name) for name in _FIELDS]
        self.db.execute(f"INSERT OR IGNORE INTO wallet_calls ({_COLUMNS}) VALUES "
                        f"({', '.join('?' * len(_FIELDS))})", values)

    async def begin_debit(self, call: WalletCall) -> WalletCall | None:
        def work() -> WalletCall | None:
            prior = self._select("method = 'debit' AND player_id = ? AND slip_key = ?",
                                 (call.player_id, call.slip_key))
            if prior:
                return prior[0]
            self._insert(call)
            return None
        return await self._in_batch(work)

    async def answer_debit(self, debit: WalletCall, state: CallState, answer: str, now: int,
                           closed_by: str | None = None) -> bool:
        def work() -> bool:
            cur = self.db.execute(
                "UPDATE wallet_calls SET state = ?, answer = ?, attempts = attempts + 1, "
                "updated_at = ?, closed_by = COALESCE(closed_by, ?) "
                "WHERE tx_id = ? AND state = 'pending'",
                (state, answer, now, closed_by, debit.tx_id))
            return cur.rowcount == 1
        return await self._in_batch(work)

    async def debit_of(self, player_id: str, table_id: str, slip_key: str
                       ) -> WalletCall | None:
        found = await self._in_batch(lambda: self._select(
            "method = 'debit' AND player_id = ? AND slip_key = ? AND table_id = ?",
            (player_id, slip_key, table_id)))
        return found[0] if found else None

    async def expire_debits(self, before: int, now: int) -> list[WalletCall]:
        def work() -> list[WalletCall]:
            expired = self._select("method = 'debit' AND state = 'pending' AND deadline < ?",
                                   (before,))
            self.db.executemany(
                "UPDATE wallet_calls SET state = 'unknown', answer = 'no answer by the "
                "deadline', updated_at = ? WHERE tx_id = ? AND state = 'pending'",
                [(now, c.tx_id) for c in expired])
            for call in expired:
                call.state = "unknown"
            return expired
        return await self._in_batch(work)

    async def enqueue(self, calls: list[WalletCall], closes: list[str], now: int) -> None:
        def work() -> None:
            for call in calls:
                self._insert(call)
            closer = calls[0].tx_id if calls else None
            self.db.executemany(
                "UPDATE wallet_calls SET closed_by = ?, updated_at = ? "
                "WHERE tx_id = ? AND closed_by IS NULL", [(closer, now, t) for t in closes])
        await self._in_batch(work)

    async def open_debits(self, limit: int) -> list[WalletCall]:
        return await self._in_batch(lambda: self._select(
            "method = 'debit' AND closed_by IS NULL ORDER BY created_at LIMIT ?", (limit,)))

    async def due(self, now: int, limit: int) -> list[WalletCall]:
        return await self._in_batch(lambda: self._select(
            "state = 'queued' AND next_at <= ? ORDER BY next_at LIMIT ?", (now, limit)))

    async def delivered(self, call: WalletCall, ok: bool, answer: str, next_at: int,
                        now: int) -> None:
        def work() -> None:
            self.db.execute(
                "UPDATE wallet_calls SET state = CASE WHEN ? THEN 'ok' ELSE state END, "
                "answer = ?, attempts = attempts + 1, next_at = ?, updated_at = ? "
                "WHERE tx_id = ? AND state = 'queued'", (ok, answer, next_at, now, call.tx_id))
        await self._in_batch(work)

    async def calls(self, round_id: str | None = None, player_id: str | None = None,
                    limit: int = 10_000) -> list[WalletCall]:
        return await self._in_batch(lambda: self._select(
            "(? IS NULL OR round_id = ?) AND (? IS NULL OR player_id = ?) "
            "ORDER BY created_at, rowid LIMIT ?",
            (round_id, round_id, player_id, player_id, limit)))

    async def backlog(self) -> int:
        return await self._in_batch(lambda: int(self.db.execute(
            "SELECT COUNT(*) FROM wallet_calls WHERE state = 'queued'").fetchone()[0]))

    async def close(self) -> None:
        if self._draining is not None:
            await self._draining
        await asyncio.get_running_loop().run_in_executor(self.writer, self.db.close)
        self.writer.shutdown(wait=True)
