"""Settlement of the ten bet spots — the one settlement function of livetable.

Everything that pays money (the table engine's store, the CLI, the simulator, the RTP
enumeration and the tests) goes through :func:`spot_result`, which says, for a bet of one
unit, what is deducted and what is returned. Amounts are integers, so the money for a bet of
``a`` is exactly ``a × multiple``; no rounding ever happens.

Notes 1–6 of the seed, as docs/design.md §1 reads them:

* A Player bet of ``a`` deducts ``2a`` (bet + withholding).
* Player wins: 1:1 returns ``3a``; with a special pattern 2:1 returns ``4a`` — unless the
  Banker's hand *value* is exactly 0 or 6 (then 1:1), unless the Player has 8 or 9 points
  with a flush or a pair (then 2:1 again: Note 6 overrides Note 5).
* Tie (equal values, suits never break it): ``2a`` back.
* Banker wins: without a special pattern the withholding ``a`` comes back; with one, nothing.
* A Pair bet of ``a`` deducts ``a`` and returns ``12a`` (11:1) when the position's two cards
  share a rank, else nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Literal

from livetable.rules.hands import Hand

Outcome = Literal["win", "lose", "tie"]


class Position(StrEnum):
    """The six hands on the table, in reveal order."""

    P1 = "P1"
    P2 = "P2"
    P3 = "P3"
    P4 = "P4"
    P5 = "P5"
    BANKER = "BANKER"


PLAYER_POSITIONS: tuple[Position, ...] = (
    Position.P1,
    Position.P2,
    Position.P3,
    Position.P4,
    Position.P5,
)
#: Dealing order of one pass, and reveal order.
DEAL_ORDER: tuple[Position, ...] = (*PLAYER_POSITIONS, Position.BANKER)


class BetSpot(StrEnum):
    """The ten betting choices."""

    P1 = "P1"
    P2 = "P2"
    P3 = "P3"
    P4 = "P4"
    P5 = "P5"
    P1_PAIR = "P1_PAIR"
    P2_PAIR = "P2_PAIR"
    P3_PAIR = "P3_PAIR"
    P4_PAIR = "P4_PAIR"
    P5_PAIR = "P5_PAIR"

    @property
    def is_pair(self) -> bool:
        return self.value.endswith("_PAIR")

    @property
    def position(self) -> Position:
        return Position(self.value[:2])

    @property
    def deducted_multiple(self) -> int:
        """What a bet of one unit takes from the balance: 2 (with withholding) or 1 (Pair)."""
        return 1 if self.is_pair else 2


BET_SPOTS: tuple[BetSpot, ...] = tuple(BetSpot)
#: The odds a Player bet is paid (or loses its withholding) at: 1:1, or 2:1 with a special
#: pattern (see :func:`player_odds`).
PLAYER_ODDS: tuple[int, ...] = (1, 2)
#: A Pair bet that wins is paid 11:1 (its bet back and eleven times it).
PAIR_ODDS = 11


@dataclass(frozen=True, slots=True)
class SpotResult:
    """The result of one bet spot for a bet of one unit."""

    spot: BetSpot
    outcome: Outcome
    odds: int
    deducted_multiple: int
    returned_multiple: int


@dataclass(frozen=True, slots=True)
class BetSettlement:
    """A settled bet of a given amount."""

    spot: BetSpot
    amount: int
    outcome: Outcome
    odds: int
    deducted: int
    returned: int

    @property
    def net(self) -> int:
        return self.returned - self.deducted


def player_odds(player: Hand, banker: Hand) -> tuple[Outcome, int]:
    """The Player position's outcome against the Banker and the odds that apply (1 or 2).

    A tie reports odds 1: no odds apply, the deduction comes back.
    """
    if player.tenths == banker.tenths:
        return "tie", 1
    if player.tenths > banker.tenths:
        if not player.special:
            return "win", 1
        banker_zero_or_six = banker.tenths in (0, 60)  # the hand *value*, not raw points
        strong = player.points in (8, 9) and (player.flush or player.pair)
        return "win", 1 if banker_zero_or_six and not strong else 2
    return "lose", 2 if banker.special else 1


def spot_result(spot: BetSpot, position: Hand, banker: Hand) -> SpotResult:
    """Settle one unit on ``spot``, where ``position`` is that spot's Player hand."""
    if spot.is_pair:
        won = position.pair
        return SpotResult(
            spot, "win" if won else "lose", PAIR_ODDS if won else 1, 1, 1 + PAIR_ODDS if won else 0
        )
    outcome, odds = player_odds(position, banker)
    if outcome == "win":
        returned = 2 + odds  # bet + withholding + winnings at the odds
    elif outcome == "tie":
        returned = 2
    else:
        returned = 1 if odds == 1 else 0
    return SpotResult(spot, outcome, odds, 2, returned)


def settle_bet(spot: BetSpot, amount: int, position: Hand, banker: Hand) -> BetSettlement:
    """Settle a bet of ``amount`` on ``spot``."""
    if amount <= 0:
        raise ValueError(f"a bet amount is a positive integer, got {amount}")
    r = spot_result(spot, position, banker)
    return BetSettlement(
        spot=spot,
        amount=amount,
        outcome=r.outcome,
        odds=r.odds,
        deducted=amount * r.deducted_multiple,
        returned=amount * r.returned_multiple,
    )


def settle_round(hands: dict[Position, Hand]) -> dict[BetSpot, SpotResult]:
    """Every spot's result for a round whose six hands are known."""
    banker = hands[Position.BANKER]
    return {spot: spot_result(spot, hands[spot.position], banker) for spot in BET_SPOTS}
