"""Simulated shoes: the exact RTP, checked the way a table really deals.

The enumeration in :mod:`livetable.rules.rtp` assumes that four cards of a shuffled shoe
behave like four draws without replacement. This simulator does not assume it: it shuffles
whole shoes, opens them (face-up card, burns), deals rounds with :meth:`Shoe.deal_round`
until the cut card comes out (that round is the last; it completes), and settles every round
with :func:`~livetable.rules.settlement.settle_round` — the same calls as the table engine.

A unit is bet on each of the ten spots every round. Spots of one round share the Banker's
hand, so they are not independent; the round is therefore the sample: the 95 % confidence
interval is the normal approximation over per-round returns. Sums are kept as integers, so
the point estimates are exact fractions of what was dealt.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction

from livetable.rules.cards import Card
from livetable.rules.hands import Hand, hand_of
from livetable.rules.settlement import (
    BET_SPOTS,
    DEAL_ORDER,
    PLAYER_POSITIONS,
    BetSpot,
    Position,
    settle_round,
)
from livetable.rules.shoe import Shoe, Slot, make_rng

#: Two-sided 95 % quantile of the standard normal distribution.
Z95 = 1.959963984540054

#: ``progress(shoes_done, shoes_total)``, called after every shoe.
Progress = Callable[[int, int], None]

_PLAYER_SPOTS: tuple[BetSpot, ...] = tuple(s for s in BET_SPOTS if not s.is_pair)
_PAIR_SPOTS: tuple[BetSpot, ...] = tuple(s for s in BET_SPOTS if s.is_pair)


@dataclass(frozen=True, slots=True)
class BetTotals:
    """One kind of bet (Player or Pair) over a simulation, one unit per spot per round.

    ``sum_sq`` is the sum over rounds of the square of that round's returned units; with
    ``returned`` and ``rounds`` it gives the per-round variance.
    """

    rounds: int
    spots_per_round: int
    deducted_multiple: int
    returned: int
    sum_sq: int

    @property
    def bets(self) -> int:
        return self.rounds * self.spots_per_round

    @property
    def deducted(self) -> int:
        return self.bets * self.deducted_multiple

    @property
    def rtp(self) -> Fraction:
        """Returned / deducted."""
        return Fraction(self.returned, self.deducted) if self.deducted else Fraction(0)

    @property
    def rtp_ci95(self) -> tuple[float, float]:
        """95 % confidence interval of :attr:`rtp`, normal approximation over rounds."""
        n = self.rounds
        if n < 2:
            return (math.nan, math.nan)
        per_round_deducted = self.spots_per_round * self.deducted_multiple
        # Sample variance of the per-round returns, computed exactly before the square root.
        variance = Fraction(n * self.sum_sq - self.returned**2, n * (n - 1))
        half = Z95 * math.sqrt(variance / n) / per_round_deducted
        centre = float(self.rtp)
        return (centre - half, centre + half)

    def to_json(self) -> dict[str, object]:
        low, high = self.rtp_ci95
        return {
            "bets": self.bets,
            "deducted": self.deducted,
            "returned": self.returned,
            "rtp": f"{self.rtp.numerator}/{self.rtp.denominator}",
            "rtp_approx": float(self.rtp),
            "ci95": [low, high],
        }


@dataclass(frozen=True, slots=True)
class SimulationResult:
    shoes: int
    rounds: int
    seed: int | None
    player: BetTotals
    pair: BetTotals

    @property
    def player_rtp_of_stake(self) -> Fraction:
        """(returned − withholding) / stake, the stake being half of what was deducted."""
        stake = self.player.bets
        return Fraction(self.player.returned - stake, stake) if stake else Fraction(0)

    def to_json(self) -> dict[str, object]:
        return {
            "shoes": self.shoes,
            "rounds": self.rounds,
            "seed": self.seed,
            "player": self.player.to_json(),
            "player_rtp_of_stake_approx": float(self.player_rtp_of_stake),
            "player_rtp_of_stake_ci95": [2 * x - 1 for x in self.player.rtp_ci95],
            "pair": self.pair.to_json(),
        }


def _hands_of(dealt: list[tuple[Slot, Card]]) -> dict[Position, Hand]:
    """The six hands of a dealt round (the burn goes nowhere)."""
    cards: dict[Position, list[Card]] = {p: [] for p in DEAL_ORDER}
    for slot, card in dealt:
        if slot.position is not None:
            cards[slot.position].append(card)
    return {p: hand_of(cs) for p, cs in cards.items()}


def simulate(
    shoes: int, seed: int | None = None, progress: Progress | None = None
) -> SimulationResult:
    """Deal and settle ``shoes`` whole shoes; reproducible when ``seed`` is given."""
    if shoes < 0:
        raise ValueError(f"a number of shoes is not negative, got {shoes}")
    rng = make_rng(seed)
    rounds = 0
    player_returned = player_sq = 0
    pair_returned = pair_sq = 0
    for done in range(1, shoes + 1):
        shoe = Shoe.shuffled(rng)
        shoe.open()
        last = False
        while not last:
            dealt = shoe.deal_round()
            last = shoe.cut_out
            results = settle_round(_hands_of(dealt))
            r_player = sum(results[s].returned_multiple for s in _PLAYER_SPOTS)
            r_pair = sum(results[s].returned_multiple for s in _PAIR_SPOTS)
            player_returned += r_player
            player_sq += r_player * r_player
            pair_returned += r_pair
            pair_sq += r_pair * r_pair
            rounds += 1
        if progress is not None:
            progress(done, shoes)
    return SimulationResult(
        shoes=shoes,
        rounds=rounds,
        seed=seed,
        player=BetTotals(
            rounds,
            len(PLAYER_POSITIONS),
            BetSpot.P1.deducted_multiple,
            player_returned,
            player_sq,
        ),
        pair=BetTotals(
            rounds,
            len(PLAYER_POSITIONS),
            BetSpot.P1_PAIR.deducted_multiple,
            pair_returned,
            pair_sq,
        ),
    )
