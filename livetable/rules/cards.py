"""Cards and their wire notation.

A card is a rank and a suit. The wire writes it as rank then suit: ``"10D"``, ``"KH"``,
``"AS"``. On input we are lenient where a dealer's scanner or a person typing might be
(``T`` for ten, the suit symbols ♠♥♦♣, lower case); on output there is exactly one form.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class CardError(ValueError):
    """A token that is not a card. The message names the token."""


class Suit(StrEnum):
    SPADES = "S"
    HEARTS = "H"
    DIAMONDS = "D"
    CLUBS = "C"


RANKS: tuple[str, ...] = ("A", "2", "3", "4", "5", "6", "7", "8", "9", "10", "J", "Q", "K")
SUITS: tuple[Suit, ...] = (Suit.SPADES, Suit.HEARTS, Suit.DIAMONDS, Suit.CLUBS)

_SUIT_INPUT: dict[str, Suit] = {
    "S": Suit.SPADES,
    "♠": Suit.SPADES,
    "♤": Suit.SPADES,
    "H": Suit.HEARTS,
    "♥": Suit.HEARTS,
    "♡": Suit.HEARTS,
    "D": Suit.DIAMONDS,
    "♦": Suit.DIAMONDS,
    "♢": Suit.DIAMONDS,
    "C": Suit.CLUBS,
    "♣": Suit.CLUBS,
    "♧": Suit.CLUBS,
}
_RANK_INPUT: dict[str, int] = {r: i + 1 for i, r in enumerate(RANKS)} | {"T": 10}
_SUIT_SYMBOL: dict[Suit, str] = {
    Suit.SPADES: "♠",
    Suit.HEARTS: "♥",
    Suit.DIAMONDS: "♦",
    Suit.CLUBS: "♣",
}


@dataclass(frozen=True, slots=True, order=True)
class Card:
    """One card. ``rank`` is 1 (A) … 13 (K)."""

    rank: int
    suit: Suit

    def __post_init__(self) -> None:
        if not 1 <= self.rank <= 13:
            raise CardError(f"rank must be 1..13, got {self.rank}")

    @property
    def points(self) -> int:
        """A=1, 2–9 face value, 10/J/Q/K = 0."""
        return self.rank if self.rank < 10 else 0

    @property
    def is_face(self) -> bool:
        """J, Q and K are face cards; a 10 is not."""
        return self.rank >= 11

    @property
    def burn_count(self) -> int:
        """Cards burned when this card opens a shoe: A=1 … 9=9, 10/J/Q/K = 10."""
        return self.rank if self.rank < 10 else 10

    @property
    def rank_text(self) -> str:
        return RANKS[self.rank - 1]

    def __str__(self) -> str:
        return f"{self.rank_text}{self.suit.value}"

    @property
    def pretty(self) -> str:
        return f"{self.rank_text}{_SUIT_SYMBOL[self.suit]}"


def parse_card(token: str) -> Card:
    """Parse one card: ``"10D"``, ``"TD"``, ``"kh"``, ``"A♠"``."""
    text = token.strip().upper()
    if len(text) < 2:
        raise CardError(f"not a card: {token!r}")
    rank_text, suit_text = text[:-1], text[-1]
    rank = _RANK_INPUT.get(rank_text)
    suit = _SUIT_INPUT.get(suit_text)
    if rank is None or suit is None:
        raise CardError(f"not a card: {token!r} (rank A 2-10 J Q K, suit S H D C)")
    return Card(rank, suit)


def parse_cards(text: str) -> tuple[Card, ...]:
    """Parse cards separated by spaces or commas: ``"9D 7C"``."""
    return tuple(parse_card(t) for t in text.replace(",", " ").split())


#: The 52 distinct cards of one deck, in a fixed order (used for counting and enumeration).
DECK: tuple[Card, ...] = tuple(Card(rank, suit) for suit in SUITS for rank in range(1, 14))
