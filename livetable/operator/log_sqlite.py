"""The wallet log in the embedded SQLite database file (its contract and records:
:mod:`livetable.operator.log`).

Never on the event loop, and in group commits. Every seamless slip writes the log twice
(its debit before the call, the answer after), at the close of betting hundreds at once;
the operator's credits and rollbacks after a round, thousands. Each of those, run as its
own ``sqlite3`` call inside ``async def``, was a blocking call on the event loop (up to the
5 s busy timeout while the ledger's writer held the file's lock, every socket frozen) and
a transaction of its own. So the calls that arrive while a batch is running wait for one
another and go in the next transaction together (each in a savepoint of its own: one that
fails fails alone); the event loop only queues a call and awaits its answer.

Off the server's interpreter lock. The batches run where the ledger's writer runs: in
its child process under ``livetable serve`` (``writer=``, the store's
:class:`~livetable.store.writer.WriterProcess`), else on a thread of this log's own. On a
thread, every batch's Python work took the lock from the event loop, and on a loaded
machine every hand-over of it waited for the scheduler: 500 players × 10 bets collapsed
(the steps, and why: :mod:`livetable.store.ledger.wallet`).

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
import sqlite3
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar, cast

from livetable.operator.log import CallState, WalletCall
from livetable.store.base import StoreUnavailable, surface_outages
from livetable.store.ledger import wallet as w
from livetable.store.ledger.calls import WalletLogBatch
from livetable.store.ledger.schema import check_synchronous, is_sqlite_outage
from livetable.store.writer import WriterProcess

R = TypeVar("R")
#: Calls in one transaction at most (a batch stays a few milliseconds on the writer).
MAX_CALLS_PER_TRANSACTION = 1000


def _move_from(db: sqlite3.Connection, old: Path) -> None:
    """Move a wallet log kept in the ledger's file (the layout before) into ``db``: every
    call copied (one already here is kept), then the old table dropped. A crash between
    the two copies again next time, which changes nothing."""
    db.execute("ATTACH DATABASE ? AS old", (str(old),))
    try:
        if db.execute("SELECT 1 FROM old.sqlite_master WHERE type = 'table' AND "
                      "name = 'wallet_calls'").fetchone() is None:
            return
        db.execute(f"INSERT OR IGNORE INTO main.wallet_calls ({w.COLUMNS}) "
                   f"SELECT {w.COLUMNS} FROM old.wallet_calls")
        db.execute("DROP TABLE old.wallet_calls")
    finally:
        db.execute("DETACH DATABASE old")


@surface_outages(is_sqlite_outage)
class SQLiteWalletLog:
    """The wallet log in a SQLite file of its own beside the ledger's, its batches run by
    the ledger's writer process (``writer``) or a thread of its own (see the module's
    docstring).

    The file locked past ``busy_timeout``, or a disk I/O error, surfaces as
    :class:`~livetable.store.base.StoreUnavailable` (:func:`surface_outages`).

    The log never shares a transaction with the ledger — every step that touches both is
    idempotent by id instead (see :mod:`livetable.operator.seamless`) — so neither waits
    for the other's work. ``moved_from``: the ledger's file, where an older version kept
    the log (moved over here on opening).
    """

    def __init__(self, path: str | Path, synchronous: str = "NORMAL", *,
                 moved_from: str | Path | None = None,
                 writer: WriterProcess | None = None) -> None:
        self.path = str(path)
        self.synchronous = check_synchronous(synchronous)
        self.process = writer if self.path != ":memory:" else None
        #: This process's connection: made here (the table, the move from an older
        #: layout), then closed if the batches run in the writer process.
        self.db = w.connect(path, synchronous)
        if moved_from is not None and Path(moved_from).exists() \
                and Path(moved_from).resolve() != Path(path).resolve():
            _move_from(self.db, Path(moved_from))
        self.writer: ThreadPoolExecutor | None = None
        if self.process is not None:
            self.db.close()
        else:
            self.writer = ThreadPoolExecutor(max_workers=1,
                                             thread_name_prefix="livetable-wallet-log")
        self._pending: list[tuple[w.AnyStep, asyncio.Future[Any]]] = []
        self._draining: asyncio.Task[None] | None = None

    # --- the group commit ----------------------------------------------------------------

    async def _in_batch(self, step: w.AnyStep) -> Any:
        """Run ``step`` inside the next transaction; steps that come while one is running
        go together in the one after."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        self._pending.append((step, future))
        if self._draining is None:
            self._draining = loop.create_task(self._drain())
        return await future

    async def _run(self, steps: list[w.AnyStep]) -> list[w.Outcome]:
        if self.process is not None:
            return await self.process.call(WalletLogBatch(self.path, self.synchronous, steps))
        assert self.writer is not None
        return await asyncio.get_running_loop().run_in_executor(
            self.writer, w.apply, self.db, steps)

    async def _drain(self) -> None:
        try:
            while self._pending:
                batch = self._pending[:MAX_CALLS_PER_TRANSACTION]
                del self._pending[:MAX_CALLS_PER_TRANSACTION]
                try:
                    outcomes = await self._run([step for step, _ in batch])
                except Exception as exc:  # the transaction failed: each call did
                    for _, future in batch:
                        if not future.done():
                            future.set_exception(exc)
                    continue
                for (_, future), outcome in zip(batch, outcomes, strict=True):
                    if future.done():  # its caller gave up waiting
                        continue
                    if outcome.error is None:
                        future.set_result(outcome.value)
                    else:
                        future.set_exception(StoreUnavailable(outcome.error) if outcome.outage
                                             else RuntimeError(outcome.error))
        finally:
            self._draining = None

    async def _calls(self, step: w.AnyStep) -> list[WalletCall]:
        return cast(list[WalletCall], await self._in_batch(step))

    # --- the calls ------------------------------------------------------------------------

    async def begin_debit(self, call: WalletCall) -> WalletCall | None:
        return cast(WalletCall | None, await self._in_batch(w.BeginDebit(call)))

    async def answer_debit(self, debit: WalletCall, state: CallState, answer: str, now: int,
                           closed_by: str | None = None) -> bool:
        return bool(await self._in_batch(
            w.AnswerDebit(debit.tx_id, state, answer, now, closed_by)))

    async def debit_of(self, player_id: str, table_id: str, slip_key: str
                       ) -> WalletCall | None:
        return cast(WalletCall | None,
                    await self._in_batch(w.DebitOf(player_id, table_id, slip_key)))

    async def expire_debits(self, before: int, now: int) -> list[WalletCall]:
        return await self._calls(w.ExpireDebits(before, now))

    async def enqueue(self, calls: list[WalletCall], now: int) -> None:
        await self._in_batch(w.Enqueue(calls, now))

    async def open_debits(self, limit: int) -> list[WalletCall]:
        return await self._calls(w.OpenDebits(limit))

    async def due(self, now: int, limit: int) -> list[WalletCall]:
        return await self._calls(w.Due(now, limit))

    async def delivered(self, call: WalletCall, ok: bool, answer: str, next_at: int,
                        now: int) -> None:
        await self._in_batch(w.Delivered(call.tx_id, ok, answer, next_at, now))

    async def calls(self, round_id: str | None = None, player_id: str | None = None,
                    limit: int = 10_000) -> list[WalletCall]:
        return await self._calls(w.Calls(round_id, player_id, limit))

    async def backlog(self) -> int:
        return int(await self._in_batch(w.Backlog()))

    async def close(self) -> None:
        if self._draining is not None:
            await self._draining
        if self.writer is not None:
            await asyncio.get_running_loop().run_in_executor(self.writer, self.db.close)
            self.writer.shutdown(wait=True)
