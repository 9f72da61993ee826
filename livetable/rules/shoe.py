"""The shoe: eight decks, a cut card, burns, and the dealing order.

One :class:`Shoe` serves both ways a table gets its cards:

* **auto** — the shoe is shuffled here (``secrets.SystemRandom``, or a seeded
  ``random.Random`` for simulations and tests) and :meth:`Shoe.draw` takes the next card;
* **manual** — a dealer's scanner reads each card out of a physical shoe and
  :meth:`Shoe.feed` takes it. We cannot know the order, but we can know what is impossible:
  a card already seen eight times (a ninth K♥) is rejected with :class:`ImpossibleCard`.

Either way the same :data:`ROUND_SLOTS` decide where each card goes: one burn face down,
then P1 … P5, Banker, twice. The cut card: when it comes out, the round under way is the
shoe's last; it completes, then a new shoe starts.
"""

from __future__ import annotations

import random
import secrets
from collections import Counter
from dataclasses import dataclass, field

from livetable.rules.cards import DECK, Card, CardError
from livetable.rules.settlement import DEAL_ORDER, Position

DECKS = 8
CARDS_PER_ROUND = 13  # one burn + 2 × 6 hands
#: Default place of the cut card: this many cards (inclusive range) remain behind it.
DEFAULT_CUT_RANGE = (52, 78)


class ImpossibleCard(CardError):
    """A card that cannot come out of this shoe: every copy of it is already out."""


class ShoeExhausted(RuntimeError):
    """The shoe has no card left (cannot happen with a valid cut-card range)."""


@dataclass(frozen=True, slots=True)
class Slot:
    """Where a card of a round goes: ``position`` None is the burn; ``n`` is 1 or 2."""

    position: Position | None
    n: int

    @property
    def is_burn(self) -> bool:
        return self.position is None


#: The 13 cards of one round, in order: burn, then two passes P1…P5, Banker.
ROUND_SLOTS: tuple[Slot, ...] = (
    Slot(None, 1),
    *(Slot(p, 1) for p in DEAL_ORDER),
    *(Slot(p, 2) for p in DEAL_ORDER),
)


def make_rng(seed: int | None) -> random.Random:
    """A cryptographic RNG, or a reproducible one from a seed (simulations, tests)."""
    return secrets.SystemRandom() if seed is None else random.Random(seed)


@dataclass
class Shoe:
    """The cards of one shoe, how many are out, and whether the cut card is out.

    ``order`` holds the shuffled cards of an auto shoe (empty for a manual one). ``cut_at``
    is how many cards come out before the cut card.
    """

    decks: int = DECKS
    order: list[Card] = field(default_factory=list)
    cut_at: int = 0
    drawn: int = 0
    cut_out: bool = False
    seen: Counter[Card] = field(default_factory=Counter)

    @classmethod
    def shuffled(
        cls,
        rng: random.Random,
        decks: int = DECKS,
        cut_range: tuple[int, int] = DEFAULT_CUT_RANGE,
    ) -> Shoe:
        lo, hi = cut_range
        total = 52 * decks
        if not (CARDS_PER_ROUND <= lo <= hi <= total - 10 - 1 - CARDS_PER_ROUND):
            raise ValueError(f"cut card range {cut_range} does not fit a {decks}-deck shoe")
        order = [card for card in DECK for _ in range(decks)]
        rng.shuffle(order)
        behind = rng.randint(lo, hi)
        return cls(decks=decks, order=order, cut_at=total - behind)

    @classmethod
    def manual(cls, decks: int = DECKS) -> Shoe:
        return cls(decks=decks)

    @property
    def is_manual(self) -> bool:
        return not self.order

    @property
    def size(self) -> int:
        return 52 * self.decks

    def draw(self) -> Card:
        """Take the next card of an auto shoe; the cut card comes out on its own."""
        if self.is_manual:
            raise RuntimeError("a manual shoe is fed by the dealer, not drawn")
        if self.drawn >= len(self.order):
            raise ShoeExhausted("the shoe is empty")
        if self.drawn == self.cut_at:
            self.cut_out = True
        card = self.order[self.drawn]
        self._take(card)
        return card

    def check(self, card: Card) -> None:
        """Raise :class:`ImpossibleCard` if ``card`` cannot come out of this shoe now."""
        if self.seen[card] >= self.decks:
            raise ImpossibleCard(
                f"impossible card {card}: all {self.decks} copies are already out of this shoe"
            )
        if self.drawn >= self.size:
            raise ImpossibleCard(f"impossible card {card}: all {self.size} cards are out")

    def feed(self, card: Card) -> Card:
        """Take a card read from a physical shoe."""
        self.check(card)
        self._take(card)
        return card

    def mark_cut_card(self) -> None:
        """The dealer reports the cut card out of a physical shoe."""
        self.cut_out = True

    def burn_unseen(self, count: int) -> None:
        """Cards burned face down without being read (the opening burn of a manual shoe)."""
        self.drawn += count

    def _take(self, card: Card) -> None:
        self.seen[card] += 1
        self.drawn += 1

    def open(self) -> tuple[Card, int]:
        """The shoe-opening burn of an auto shoe: one card face up, then burn its value."""
        first = self.draw()
        for _ in range(first.burn_count):
            self.draw()
        return first, first.burn_count

    def deal_round(self) -> list[tuple[Slot, Card]]:
        """The 13 cards of one round from an auto shoe, each with its slot."""
        return [(slot, self.draw()) for slot in ROUND_SLOTS]
