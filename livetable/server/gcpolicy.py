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

Only ``livetable serve`` / ``gateway`` / ``engine`` install it (a process-wide setting is
the process owner's call, not a library's): tests and embedders keep CPython's defaults.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import time
from collections.abc import Callable

from livetable.tasks import cancel

log = logging.getLogger(__name__)

#: Objects allocated (net) between young collections: 10x CPython's 700. Each young
#: collection walks at most that many objects (a few ms), and they happen 14x less often.
YOUNG_THRESHOLD = 10_000
#: Young collections between middle-generation ones (CPython's default).
MIDDLE_THRESHOLD = 10
#: Middle collections before an automatic full one: never, in practice (the timer does it).
NO_AUTOMATIC_FULL = 1 << 30


class Collector:
    def __init__(self, busy: Callable[[], bool], *, interval: float = 60.0,
                 longest: float = 300.0, poll: float = 0.5,
                 on_collect: Callable[[float], None] | None = None) -> None:
        self.busy = busy
        self.interval = interval
        self.longest = longest
        self.poll = poll
        self.on_collect = on_collect
        self.collections = 0
        self._task: asyncio.Task[None] | None = None
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

    async def stop(self) -> None:
        """Stop the timer and give CPython its thresholds back."""
        await cancel(self._task)
        self._task = None
        if self._saved is not None:
            gc.set_threshold(*self._saved)
            self._saved = None

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            await self.wait_for_quiet()
            self.collect()

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
        started = time.perf_counter()
        gc.collect()
        took = time.perf_counter() - started
        self.collections += 1
        if self.on_collect is not None:
            self.on_collect(took)
        log.debug("gc: full collection in %.1f ms", took * 1000)
        return took
