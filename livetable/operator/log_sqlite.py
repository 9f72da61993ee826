"""The wallet log in the embedded SQLite database file (its contract and records:
:mod:`livetable.operator.log`).

Never on the event loop, and in group commits. Every seamless slip writes the log twice
(its debit before the call, the answer after), at the close of betting hundreds at once;
the operator's credits and rollbacks after a round, thousands. Each of those, run as its
own ``sqlite3`` call inside ``async def``, was a blocking call on the event loop (up to the
5 s busy timeout while the ledger's writer held the file's lock, every socket frozen) and
a transaction of its own. So the calls that arrive while a batch is running wait for one
another and go in the next transaction together (:class:`~livetable.operator.log.
BatchedWalletLog`; here each in a savepoint of its own: one that fails fails alone); the
event loop only queues a call and awaits its answer.

Off the server's interpreter lock. The batches run where the ledger's writer runs: in
its child process under ``livetable serve`` (``writer=``, the store's
:class:`~livetable.store.sqlite.writer.WriterProcess`), else on a thread of this log's own. On a
thread, every batch's Python work took the lock from the event loop, and on a loaded
machine every hand-over of it waited for the scheduler: 500 players × 10 bets collapsed
(the steps, and why: :mod:`livetable.store.sqlite.ledger.wallet`).

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

from livetable.operator.log import BatchedWalletLog
from livetable.store.sqlite.ledger import wallet as w
from livetable.store.sqlite.ledger.calls import WalletLogBatch
from livetable.store.sqlite.ledger.schema import check_synchronous, is_sqlite_outage
from livetable.store.sqlite.writer import WriterProcess


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


class SQLiteWalletLog(BatchedWalletLog):
    """The wallet log in a SQLite file of its own beside the ledger's, its batches run by
    the ledger's writer process (``writer``) or a thread of its own (see the module's
    docstring).

    The file locked past ``busy_timeout``, or a disk I/O error, surfaces as
    :class:`~livetable.store.base.StoreUnavailable`.

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
        super().__init__()
        self.writer: ThreadPoolExecutor | None = None
        if self.process is not None:
            self.db.close()
        else:
            self.writer = ThreadPoolExecutor(max_workers=1,
                                             thread_name_prefix="livetable-wallet-log")

    async def _run(self, steps: list[w.AnyStep]) -> list[w.Outcome]:
        if self.process is not None:
            return await self.process.call(WalletLogBatch(self.path, self.synchronous, steps))
        assert self.writer is not None
        return await asyncio.get_running_loop().run_in_executor(
            self.writer, w.apply, self.db, steps)

    def _is_outage(self, exc: BaseException) -> bool:
        return is_sqlite_outage(exc)

    async def close(self) -> None:
        await self._finish()
        if self.writer is not None:
            await asyncio.get_running_loop().run_in_executor(self.writer, self.db.close)
            self.writer.shutdown(wait=True)
