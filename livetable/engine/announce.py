"""What a table tells its watchers about a round's bets: their spread at the close of
betting (``bet_stats``) and the biggest wins once it is settled (``round_winners``).

Bets do not pass through the engine (docs/architecture.md, "The engine"), so these figures
come from the store: the shell reads the round's accepted bets once betting has closed, and
its settled bets once settlement is stored, and hands the engine the sums. The engine keeps
the rules of what may be said — whole percent shares, no amount or id of any one player on
the spread; at most :data:`MOST_WINNERS` wins, largest first, names as the operator lets
them be shown (:func:`masked`) — and numbers the event like any other, once a round, for
the round in play only (a figure read late, after the next round opened, is refused:
:class:`~livetable.engine.effects.EngineError` ``no_round``; nothing changes).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Literal

from livetable import protocol as p
from livetable.engine.effects import EngineError, Numbering, Step
from livetable.engine.state import TableState
from livetable.engine.transitions import Announcement, target
from livetable.rules.settlement import BetSpot

#: The wins a ``round_winners`` names at most.
MOST_WINNERS = 5
#: How a winner's name is shown: its first two characters then ``***`` (``Pl***``), not at
#: all (``***``), or whole. The operator chooses (the registry's ``winner_names``).
NameShown = Literal["masked", "hidden", "full"]


def masked(name: str, shown: NameShown = "masked") -> str:
    """``name`` as ``shown`` lets others read it. A name of two characters or fewer is
    masked to its first one, so a masked name never shows a whole name."""
    name = name.strip()
    if shown == "full" and name:
        return name
    if shown == "hidden" or not name:
        return "***"
    keep = 2 if len(name) > 2 else 1
    return name[:keep] + "***"


def percent(part: int, whole: int) -> int:
    """``part`` of ``whole`` in whole percent, rounded half up; 0 of nothing."""
    return (200 * part + whole) // (2 * whole) if whole > 0 else 0


class Announcer:
    """The engine's announcements about a round (see the module docstring)."""

    def __init__(self, state: TableState, number: Callable[[], Numbering]) -> None:
        self.state = state
        self.number = number

    def _check(self, what: Announcement, round_id: str) -> None:
        s = self.state
        if target(s.phase, s.paused_from, what) is None:
            raise EngineError(
                "illegal_command", f"{what} is not allowed while the table is {s.phase}")
        if round_id != s.round_id or (s.phase == "paused" and s.closes_at is not None):
            raise EngineError("no_round", f"{what} of {round_id} is not for the round "
                              f"in play ({s.round_id})")
        if round_id in ((s.stats_for,) if what == "bet_stats" else (s.winners_for,)):
            raise EngineError("illegal_command", f"{what} of {round_id} was announced")

    def bet_stats(self, round_id: str, spots: Mapping[str, tuple[int, int]],
                  bettors: int) -> Step:
        """``spots``: for each spot bet on, how many players bet there and their stakes'
        sum; ``bettors``: how many players bet in the round. Every spot is in the event,
        the ones nobody bet on at 0."""
        self._check("bet_stats", round_id)
        staked = sum(amount for _, amount in spots.values())
        shares = [p.SpotShare(spot=spot.value,
                              players=percent(spots.get(spot.value, (0, 0))[0], bettors),
                              money=percent(spots.get(spot.value, (0, 0))[1], staked))
                  for spot in BetSpot]
        self.state.stats_for = round_id
        return Step(events=[p.BetStats(**self.number(), round_id=round_id, bettors=bettors,
                                       spots=shares)])

    def round_winners(self, round_id: str, wins: Sequence[p.Winner]) -> Step:
        """``wins``: what the round paid each player over their stakes (names already as
        their operators let them be shown); the largest :data:`MOST_WINNERS` are
        announced, none if nobody won."""
        self._check("round_winners", round_id)
        self.state.winners_for = round_id
        best = sorted((w for w in wins if w.amount > 0), key=lambda w: -w.amount)
        if not best:
            return Step()
        return Step(events=[p.RoundWinners(**self.number(), round_id=round_id,
                                           winners=best[:MOST_WINNERS])])
