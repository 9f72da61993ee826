"""Exact return to player, by enumeration over an 8-deck shoe.

A Player bet depends on four cards only: the Banker's two and its position's two. In a
uniformly shuffled shoe every set of four dealt cards is equally likely to be any four cards
of the 416, whatever was burned or dealt to the other positions (they are unseen, and by
symmetry irrelevant). So the exact distribution is that of four ordered draws without
replacement: 52⁴ ordered card identities, each with the integer weight
``8·(8−[same])·…`` — the number of ways to draw those identities — over
``416·415·414·413``.

We do not re-implement the payouts. The weights are summed with numpy per (Banker hand
class, Player hand class), where a class is everything a :class:`Hand` holds except its
cards; then :func:`~livetable.rules.settlement.spot_result` — the one settlement
function — settles one representative hand of each class pair. The partial sums are integers
below 2⁵³, so the float64 accumulation is exact; we check that they add up to the total.
Every figure is a :class:`fractions.Fraction`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from fractions import Fraction
from functools import cache

import numpy as np

from livetable.rules.cards import DECK
from livetable.rules.hands import Combination, Hand, evaluate
from livetable.rules.settlement import BetSpot, Outcome, spot_result
from livetable.rules.shoe import DECKS

#: Everything about a hand that settlement may look at (a Hand minus its cards).
HandClass = tuple[int, int, bool, bool, Combination | None]


def _class_of(hand: Hand) -> HandClass:
    return (hand.tenths, hand.points, hand.flush, hand.pair, hand.combination)


@dataclass(frozen=True, slots=True)
class OutcomeShare:
    """How often a Player bet ends with this outcome at these odds, and what it returns."""

    outcome: Outcome
    odds: int
    returned_multiple: int
    probability: Fraction


@dataclass(frozen=True, slots=True)
class RtpReport:
    """Exact figures for a bet of one unit.

    ``player_rtp_of_stake`` is (E[returned] − withholding) / stake: what comes back of the
    bet itself. ``player_rtp_of_deducted`` is E[returned] / 2: what comes back of all that
    was deducted (bet + withholding) — the seed's "maximum RTP of 98.75 %".
    """

    decks: int
    total_weight: int
    player_expected_return: Fraction
    player_rtp_of_stake: Fraction
    player_rtp_of_deducted: Fraction
    pair_rtp: Fraction
    outcomes: tuple[OutcomeShare, ...]

    def to_json(self) -> dict[str, object]:
        """A JSON-ready dict: fractions as ``"p/q"`` strings, with float approximations."""

        def frac(f: Fraction) -> str:
            return f"{f.numerator}/{f.denominator}"

        return {
            "decks": self.decks,
            "player_rtp_of_stake": frac(self.player_rtp_of_stake),
            "player_rtp_of_deducted": frac(self.player_rtp_of_deducted),
            "pair_rtp": frac(self.pair_rtp),
            "player_expected_return": frac(self.player_expected_return),
            "outcomes": [
                {
                    "outcome": o.outcome,
                    "odds": o.odds,
                    "returned": o.returned_multiple,
                    "probability": frac(o.probability),
                    "approx": float(o.probability),
                }
                for o in self.outcomes
            ],
            "approx": {
                "player_rtp_of_stake": float(self.player_rtp_of_stake),
                "player_rtp_of_deducted": float(self.player_rtp_of_deducted),
                "pair_rtp": float(self.pair_rtp),
            },
        }


def _hand_classes() -> tuple[np.ndarray, list[Hand]]:
    """For each ordered two-card hand (52×52), the index of its class; one hand per class."""
    representatives: dict[HandClass, int] = {}
    hands: list[Hand] = []
    index = np.empty((52, 52), dtype=np.int64)
    for i, first in enumerate(DECK):
        for j, second in enumerate(DECK):
            hand = evaluate(first, second)
            key = _class_of(hand)
            if key not in representatives:
                representatives[key] = len(hands)
                hands.append(hand)
            index[i, j] = representatives[key]
    return index, hands


def _class_pair_weights(decks: int) -> tuple[np.ndarray, list[Hand], int]:
    """Summed draw weights per (Banker class, Player class), the classes, and the total."""
    eye = np.eye(52, dtype=np.int64)
    # Axes: b1, b2, p1, p2 — the Banker's cards, then the Player's (order is irrelevant).
    same_b1b2 = eye[:, :, None, None]
    same_p1b1 = eye[:, None, :, None]
    same_p1b2 = eye[None, :, :, None]
    same_p2b1 = eye[:, None, None, :]
    same_p2b2 = eye[None, :, None, :]
    same_p2p1 = eye[None, None, :, :]
    weight = (
        decks
        * (decks - same_b1b2)
        * (decks - same_p1b1 - same_p1b2)
        * (decks - same_p2b1 - same_p2b2 - same_p2p1)
    )
    index, hands = _hand_classes()
    n = len(hands)
    pair_index = index[:, :, None, None] * n + index[None, None, :, :]
    sums = np.bincount(pair_index.ravel(), weights=weight.ravel(), minlength=n * n)
    total = 1
    for k in range(4):
        total *= 52 * decks - k
    exact = np.rint(sums).astype(np.int64)
    # Exactness check: integers below 2**53 sum exactly in float64.
    if int(exact.sum()) != total or int(weight.sum()) != total:
        raise ArithmeticError("enumeration weights do not add up to the number of draws")
    return exact.reshape(n, n), hands, total


def _class_pairs(weights: np.ndarray, hands: list[Hand]) -> Iterator[tuple[int, Hand, Hand]]:
    for b, p in zip(*np.nonzero(weights), strict=True):
        yield int(weights[b, p]), hands[int(b)], hands[int(p)]


@cache
def exact_rtp(decks: int = DECKS) -> RtpReport:
    """The exact RTP of a Player bet and a Pair bet, dealt from a ``decks``-deck shoe."""
    weights, hands, total = _class_pair_weights(decks)
    player_returned = 0
    pair_returned = 0
    shares: dict[tuple[Outcome, int, int], int] = {}
    for w, banker, player in _class_pairs(weights, hands):
        bet = spot_result(BetSpot.P1, player, banker)
        pair = spot_result(BetSpot.P1_PAIR, player, banker)
        player_returned += w * bet.returned_multiple
        pair_returned += w * pair.returned_multiple
        key = (bet.outcome, bet.odds, bet.returned_multiple)
        shares[key] = shares.get(key, 0) + w
    expected = Fraction(player_returned, total)
    # Stake 1, withholding 1, deducted 2 (BetSpot.P1.deducted_multiple).
    deducted = BetSpot.P1.deducted_multiple
    withholding = deducted - 1
    outcomes = tuple(
        OutcomeShare(outcome, odds, returned, Fraction(w, total))
        for (outcome, odds, returned), w in sorted(shares.items(), key=lambda kv: -kv[0][2])
    )
    return RtpReport(
        decks=decks,
        total_weight=total,
        player_expected_return=expected,
        player_rtp_of_stake=expected - withholding,
        player_rtp_of_deducted=expected / deducted,
        pair_rtp=Fraction(pair_returned, total) / BetSpot.P1_PAIR.deducted_multiple,
        outcomes=outcomes,
    )
