"""Garbage collection timed by the tables, not by the allocation counter.

CPython's cyclic collector runs a full (generation 2) collection when enough objects have
survived the younger ones. A process holding thousands of connections has hundreds of
thousands of live objects, and a full collection stops the event loop while it walks them
all: measured during the 20,000-bet burst of ``bench/run.py --only bets`` (2,000 players),
9 full collections took 1.8 s, the longest 346 ms — more than the whole ack budget of a
bet, and always at the busiest moment, since that is when objects are made.

:class:`Collector` keeps the young collections (cheap: they walk only new objects) with a
larger first threshold, switches the automatic full collection off, and runs it itself
every ``interval`` seconds at a moment when no table is about to close betting, dealing,
revealing or settling (``busy``); if the tables are never quiet, it collects anyway after
``longest`` seconds, so that garbage cycles are still freed. What the process made before
it served anyone (modules, the app) is moved out of the collector's sight once, with
:func:`gc.freeze`: it lives as long as the process.

The young collections are held too, through the close of betting, and run together once
it is over, as one collection of the two younger generations. In that window every late
bet is an object graph in flight (its task, a dozen coroutines, its futures and timers; a
seamless bet's waits on the operator's wallet hold them for tens of milliseconds), so the
young collections walked thousands of bets in flight again and again, and the middle ones
stopped the loop for 35–65 ms at a time, just as the acks were due. On the seamless
wallet's bench (1,000 players × 10 bets in 2 s), automatic collection switched off took
its ack p99 from 221–1,097 ms to 150–270 ms (docs/benchmarks.md). Only cyclic garbage
waits (what reference counting frees is freed at once): about 20,000 objects a bench round.

A hold (``closing``) lasts while bets are being answered in a table's last seconds of
betting, and :data:`RELEASE_AFTER` seconds after; never over :data:`HOLD_LONGEST` seconds
at a time. Only with bets: a table only watched has no bets in flight to spare, and held
at every close, a table dealing a round every 3 s to 3,000 viewers cost 20–30 % more CPU a
frame (the held garbage: docs/benchmarks.md).

Only ``livetable serve`` / ``gateway`` / ``engine`` install it (a process-wide setting is
the process owner's call, not a library's): tests and embedders keep CPython's defaults.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import time
from collections.abc import Callable, Collection, Iterable
from typing import Protocol

from livetable import protocol as p
from livetable.clock import now_ms
from livetable.tasks import cancel

log = logging.getLogger(__name__)

#: Objects allocated (net) between young collections: 10x CPython's 700. Each young
#: collection walks at most that many objects (a few ms), and they happen 14x less often.
YOUNG_THRESHOLD = 10_000
#: Young collections between middle-generation ones (CPython's default).
MIDDLE_THRESHOLD = 10
#: Middle collections before an automatic full one: never, in practice (the timer does it).
NO_AUTOMATIC_FULL = 1 << 30
#: The young collections are held until this long after the close of betting ends (s):
#: the last slips are taken and answered (the close grace, a seamless debit's answer).
RELEASE_AFTER = 1.5
#: The longest hold (s): tables that close betting all the time still get collected.
HOLD_LONGEST = 10.0


#: A table is busy this long after a table event went out (private results may follow).
QUIET_AFTER_EVENT = 1.0
#: ... and from this long before betting closes (the burst of late bets).
BUSY_BEFORE_CLOSE_MS = 5_000


class Table(Protocol):
    """What the timing reads of a table (a gateway's feed)."""

    last_sent: float  # when its last event went out (time.monotonic)

    def view(self) -> p.TableSnapshot: ...


def tables_closing(feeds: Iterable[Table]) -> bool:
    """Whether a table is in its last :data:`BUSY_BEFORE_CLOSE_MS` of betting."""
    now = now_ms()
    for feed in feeds:
        view = feed.view()
        if (view.phase == "betting" and view.closes_at is not None
                and view.closes_at - now < BUSY_BEFORE_CLOSE_MS):
            return True
    return False


def tables_busy(feeds: Collection[Table], settling: bool) -> bool:
    """Whether a table is about to close betting, or is dealing, revealing or settling
    (``settling``: a runner of the process is): not the moment for a full collection."""
    if settling or tables_closing(feeds):
        return True
    for feed in feeds:
        if time.monotonic() - feed.last_sent < QUIET_AFTER_EVENT:
            return True
        if feed.view().phase in ("dealing", "revealing"):
            return True
    return False


class Collector:
    def __init__(self, busy: Callable[[], bool], *, interval: float = 60.0,
                 longest: float = 300.0, poll: float = 0.5,
                 on_collect: Callable[[float], None] | None = None,
                 closing: Callable[[], bool] | None = None, hold_poll: float = 0.1,
                 release_after: float = RELEASE_AFTER,
                 hold_longest: float = HOLD_LONGEST) -> None:
        """``busy``: not the moment for a full collection; ``closing``: a table is in the
        close of its betting (the young collections are held, polled every
        ``hold_poll`` s); ``on_collect``: each collection's pause (s)."""
        self.busy = busy
        self.interval = interval
        self.longest = longest
        self.poll = poll
        self.on_collect = on_collect
        self.closing = closing
        self.hold_poll = hold_poll
        self.release_after = release_after
        self.hold_longest = hold_longest
        self.collections = 0
        #: the held young collections run so far
        self.released = 0
        self._task: asyncio.Task[None] | None = None
        self._holding: asyncio.Task[None] | None = None
        self._saved: tuple[int, int, int] | None = None

    def start(self) -> None:
        """Freeze what exists, set the thresholds, start the timer."""
        if self._task is not None:
            return
        gc.collect()
        gc.freeze()
        self._saved = gc.get_threshold()
        gc.set_threshold(YOUNG_THRESHOLD, MIDDLE_THRESHOLD, NO_AUTOMATIC_FULL)
        self._task = asyncio.get_running_loop().create_task(self._run(), name="gc")
        if self.closing is not None:
            self._holding = asyncio.get_running_loop().create_task(
                self._hold(self.closing), name="gc-hold")

    async def stop(self) -> None:
        """Stop the timer and give CPython its thresholds back."""
        await cancel(self._task)
        await cancel(self._holding)
        self._task = self._holding = None
        gc.enable()  # a hold ends with the collector
        if self._saved is not None:
            gc.set_threshold(*self._saved)
            self._saved = None

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            await self.wait_for_quiet()
            self.collect()

    async def _hold(self, closing: Callable[[], bool]) -> None:
        """Hold the young collections while a table closes its betting (see the module's
        docstring); run them once it is over, or after :attr:`hold_longest` seconds."""
        held_since: float | None = None
        last_closing = 0.0
        try:
            while True:
                await asyncio.sleep(self.hold_poll)
                now = time.monotonic()
                try:
                    if closing():
                        last_closing = now
                except Exception:  # a bug in closing() must not hold collection for ever
                    log.exception("gc: closing() failed; not holding")
                    last_closing = 0.0
                if held_since is None:
                    if now - last_closing < self.release_after:
                        gc.disable()
                        held_since = now
                elif (now - last_closing >= self.release_after
                      or now - held_since >= self.hold_longest):
                    held_since = None
                    gc.enable()
                    self._collect(1)
                    self.released += 1
        finally:
            gc.enable()  # a hold never outlives its task

    async def wait_for_quiet(self) -> None:
        """Return when no table is busy, or after ``longest - interval`` seconds anyway."""
        give_up = time.monotonic() + max(0.0, self.longest - self.interval)
        while time.monotonic() < give_up:
            try:
                if not self.busy():
                    return
            except Exception:  # a bug in busy() must not stop collection altogether
                log.exception("gc: busy() failed; collecting anyway")
                return
            await asyncio.sleep(self.poll)

    def collect(self) -> float:
        """One full collection now; its duration in seconds."""
        took = self._collect(2)
        self.collections += 1
        return took

    def _collect(self, generation: int) -> float:
        """A collection of ``generation`` and the younger ones, timed (s)."""
        started = time.perf_counter()
        gc.collect(generation)
        took = time.perf_counter() - started
        if self.on_collect is not None:
            self.on_collect(took)
        log.debug("gc: generation %d collected in %.1f ms", generation, took * 1000)
        return took
