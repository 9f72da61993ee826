"""A slip's turn: its sends one at a time (see :meth:`SeamlessWallet.place_slip
<livetable.operator.seamless.SeamlessWallet.place_slip>`).

A re-send of a slip waits for the first send to finish and hears its answer, never finds
its debit half done. A turn is kept only while a send holds it or waits for it; the sends
waiting for it are served first come, first served.

Why not an ``asyncio.Lock`` a slip: every seamless bet made one, and the lock's Python
code and its objects (the collector walks what a bet in flight holds) were a few per cent
of a seamless bet's CPU (docs/benchmarks.md). Here a send that finds no turn held takes it
with one dictionary write, and only a send that must wait makes a future.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Hashable

Waiting = deque[asyncio.Future[None]]


class Turns:
    """The turns held, by key (a player's slip)."""

    def __init__(self) -> None:
        self._held: dict[Hashable, Waiting] = {}

    def __contains__(self, key: Hashable) -> bool:
        """Whether a send holds ``key``'s turn."""
        return key in self._held

    def __len__(self) -> int:
        return len(self._held)

    async def take(self, key: Hashable) -> None:
        """Hold ``key``'s turn: at once if nobody does, else once the sends before have
        passed it on. The caller must :meth:`pass_on` after."""
        waiting = self._held.get(key)
        if waiting is None:
            self._held[key] = deque()
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        waiting.append(waiter)
        try:
            await waiter
        except BaseException:
            if waiter.done() and not waiter.cancelled():
                self.pass_on(key)  # handed the turn as it was cancelled: pass it on
            raise

    def pass_on(self, key: Hashable) -> None:
        """The turn to the first send still waiting for it (not one cancelled meanwhile);
        none: the turn is dropped."""
        waiting = self._held[key]
        while waiting:
            waiter = waiting.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return
        del self._held[key]
