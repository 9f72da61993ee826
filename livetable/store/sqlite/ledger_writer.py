"""The SQLite store's one writer: every call of the ledger runs here, one at a time.

Why apart from the store (store/sqlite/__init__.py). The store hands its slips to the
slip queue (store/slip_queue.py), and the queue hands each batch to whatever takes it:
given the store's own method, the queue called back up into the store, and a bet's path
entered the store twice (docs/benchmarks/postgres.md, "The path of a bet through the
code"). Given this writer, the queue hands the batch down, and the store's operations and
the slips' batches reach the ledger the same one way.

The writer is a thread of this process holding the ledger
(:class:`~livetable.store.sqlite.ledger.core.Ledger`), or a child process holding its own
(:class:`~livetable.store.sqlite.writer.WriterProcess`, what ``livetable serve`` uses).
Either way it runs one call at a time, which keeps each slip atomic with respect to every
other operation, and this is where SQLite's outages (the file locked past the busy timeout,
a disk I/O error, a full disk) become :class:`~livetable.store.base.StoreUnavailable`
(the process maps its own).
"""

from __future__ import annotations

import asyncio
import sqlite3
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from livetable.betting.slips import SlipAnswer, SlipRequest
from livetable.store.base import StoreUnavailable
from livetable.store.sqlite.ledger import calls as c
from livetable.store.sqlite.ledger.core import Ledger
from livetable.store.sqlite.ledger.schema import is_sqlite_outage, outage
from livetable.store.sqlite.writer import WriterProcess

A = TypeVar("A")


class LedgerWriter:
    """Runs the ledger's calls on its ``thread`` (holding ``ledger``) or in its child
    (``process``)."""

    def __init__(self, ledger: Ledger | None, process: WriterProcess | None,
                 thread: ThreadPoolExecutor) -> None:
        assert (ledger is None) != (process is None)
        self.ledger = ledger
        self.process = process
        self.thread = thread
        #: Why the last write failed as an outage (a full disk, the file locked), until a
        #: write that changed the ledger succeeds (one that wrote nothing — the settlement
        #: a runner tries after every failed tick, with no round pending — proved nothing,
        #: and had readiness 200 in 48 of 58 samples on a full disk): reads may still work
        #: meanwhile, so this is what readiness asks.
        self.outage: str | None = None

    async def run(self, call: c.Call[A]) -> A:
        """``call``'s answer, once the writer ran it; an outage raised as
        :class:`~livetable.store.base.StoreUnavailable`."""
        try:
            answer, wrote = await self._counting(call)
        except StoreUnavailable as exc:
            if call.writes:
                self.outage = str(exc)
            raise
        if wrote:
            self.outage = None
        return answer

    async def take_slips(self, batch: list[tuple[SlipRequest, int]]) -> list[SlipAnswer]:
        """A batch of the slip queue, judged and taken in one transaction
        (store/sqlite/ledger/slips.py)."""
        return await self.run(c.TakeSlips(batch))

    async def _counting(self, call: c.Call[A]) -> tuple[A, bool]:
        if self.process is not None:
            return await self.process.call_counting(call)
        assert self.ledger is not None
        try:
            return await asyncio.get_running_loop().run_in_executor(
                self.thread, c.run_counting, self.ledger, call)
        except sqlite3.Error as exc:
            if is_sqlite_outage(exc):
                raise outage(exc) from exc
            raise

    async def close(self) -> None:
        if self.process is not None:
            await self.process.close()
        else:
            await self.run(c.CloseLedger())
        self.thread.shutdown(wait=True)
