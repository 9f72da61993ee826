"""A table's announcements about a round's bets, read from the store for the engine.

The engine announces what the store knows of a round as a whole (livetable/engine/
announce.py): at the close of betting, how its accepted bets lie on the spots
(``bet_stats``); once its settlement is stored, its biggest wins (``round_winners``). The
runner asks for each at those two moments; this reads the store and hands the engine the
figures, then the runner stores and publishes the step like any other.

An announcement is news, not money: one the store cannot answer in time, or whose round has
moved on (the next round opened first), is dropped and logged — it never holds the table
nor delays its next step by more than its read.
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from collections.abc import Callable, Coroutine
from typing import Any

from livetable import protocol as p
from livetable.engine import Step, TableEngine
from livetable.engine.announce import MOST_WINNERS, NameShown, masked
from livetable.rules.settlement import BetSpot
from livetable.store.base import Store
from livetable.tasks import cancel

log = logging.getLogger("livetable.runner")

#: How a player's name is shown to the table, and the currency of their wins (None: the
#: table's own), by the player's ledger id — the operator's choice (the registry's
#: ``winner_names``), given by the process's services.
WinnerTerms = Callable[[str], tuple[NameShown, str | None]]


def masked_everywhere(player_id: str) -> tuple[NameShown, str | None]:
    """The terms without an operator registry: every name masked, the table's currency."""
    return "masked", None


class Announcements:
    """Reads the figures of a round's announcements; keeps the tasks that wait for the
    table to take them (stopped with the runner)."""

    def __init__(self, store: Store, terms: WinnerTerms = masked_everywhere) -> None:
        self.store = store
        self.terms = terms
        self._tasks: set[asyncio.Task[None]] = set()

    async def bet_stats(self, engine: TableEngine, round_id: str) -> Step:
        spots, bettors = await self.store.bet_spread(round_id)
        return engine.announce.bet_stats(round_id, spots, bettors)

    async def round_winners(self, engine: TableEngine, round_id: str) -> Step:
        net: defaultdict[str, int] = defaultdict(int)
        for player_id, bet in await self.store.round_settlements(round_id):
            # what the bet took from the balance (a Player spot holds the bet's double
            # against a 2:1 loss, livetable/rules/settlement.py) against what it returned
            net[player_id] += bet.returned - bet.amount * BetSpot(bet.spot).deducted_multiple
        best = sorted((pid for pid in net if net[pid] > 0), key=lambda pid: -net[pid])
        wins = []
        for player_id in best[:MOST_WINNERS]:
            view = await self.store.player(player_id)
            shown, currency = self.terms(player_id)
            wins.append(p.Winner(name=masked(view.name if view else "", shown),
                                 amount=net[player_id], currency=currency))
        return engine.announce.round_winners(round_id, wins)

    def later(self, what: str, announce: Coroutine[Any, Any, None]) -> None:
        """Run ``announce`` beside the table (it waits for the table's lock)."""
        task = asyncio.create_task(announce, name=what)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def stop(self) -> None:
        for task in list(self._tasks):
            await cancel(task)
