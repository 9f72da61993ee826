"""Two-card hands: points, patterns, special combinations and their total order.

docs/design.md §1 fixes the reading: points are the units digit of the two cards' points; a special
combination sits between 7 and 8 (7.1 … 7.5); a hand that fits two rows takes the higher
one. Values are kept as integers in tenths (``75`` for 7.5) so that comparison is exact and
the order is total; the wire shows them as strings (``"7.5"``).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from livetable.rules.cards import Card


class Combination(Enum):
    """The special combinations, with their value in tenths and their English label."""

    AK_FLUSH = (75, "AK Flush")
    SPECIAL_PAIR = (74, "Special Pair")
    FACE_CARD_COMBO = (73, "Face-card Combo")
    SINGLE_FACE_NO_POINT = (72, "Single Face-card with No Point")
    FLUSH_NO_POINT = (71, "Flush with No Point")

    @property
    def tenths(self) -> int:
        return self.value[0]

    @property
    def label(self) -> str:
        return self.value[1]


_SPECIAL_PAIR_RANKS = frozenset({1, 5, 6, 10})


def _combination(a: Card, b: Card) -> Combination | None:
    """The highest special combination the two cards make, if any."""
    flush = a.suit == b.suit
    ranks = {a.rank, b.rank}
    if flush and ranks == {1, 13}:
        return Combination.AK_FLUSH
    if a.rank == b.rank and a.rank in _SPECIAL_PAIR_RANKS:
        return Combination.SPECIAL_PAIR
    if a.is_face and b.is_face:
        return Combination.FACE_CARD_COMBO
    if 10 in ranks and (a.is_face or b.is_face):
        return Combination.SINGLE_FACE_NO_POINT
    if flush and not a.is_face and not b.is_face and (a.points + b.points) % 10 == 0:
        return Combination.FLUSH_NO_POINT
    return None


@dataclass(frozen=True, slots=True)
class Hand:
    """A two-card hand, evaluated once at construction."""

    cards: tuple[Card, Card]
    points: int
    flush: bool
    pair: bool
    combination: Combination | None
    tenths: int

    @property
    def special(self) -> bool:
        """A special pattern: a flush, a pair or a special combination (drives 2:1)."""
        return self.flush or self.pair or self.combination is not None

    @property
    def value(self) -> str:
        """The hand value as on the wire: ``"0"`` … ``"9"``, ``"7.1"`` … ``"7.5"``."""
        whole, tenth = divmod(self.tenths, 10)
        return f"{whole}.{tenth}" if tenth else str(whole)

    @property
    def label(self) -> str:
        """English label: ``"Special Pair"``, ``"9 Points"``, ``"1 Point"`` (no value)."""
        if self.combination is not None:
            return self.combination.label
        return "1 Point" if self.points == 1 else f"{self.points} Points"

    def __lt__(self, other: Hand) -> bool:
        return self.tenths < other.tenths

    def __gt__(self, other: Hand) -> bool:
        return self.tenths > other.tenths

    def __str__(self) -> str:
        return " ".join(str(c) for c in self.cards)


def evaluate(first: Card, second: Card) -> Hand:
    """Evaluate two cards into a Hand."""
    points = (first.points + second.points) % 10
    combination = _combination(first, second)
    tenths = combination.tenths if combination is not None else points * 10
    return Hand(
        cards=(first, second),
        points=points,
        flush=first.suit == second.suit,
        pair=first.rank == second.rank,
        combination=combination,
        tenths=tenths,
    )


def hand_of(cards: tuple[Card, ...] | list[Card]) -> Hand:
    if len(cards) != 2:
        raise ValueError(f"a hand has two cards, got {len(cards)}")
    return evaluate(cards[0], cards[1])
