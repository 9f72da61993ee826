"""Every two-card hand, and every settlement, against expectations written from the seed.

The expectations here do not call the implementation: hands are classified from card
*strings* ("10H", "KS") through a literal table copied from the seed's Special
Combinations (docs/design.md §1), and Player bets are paid from a function written from that
section's settlement table. Then all 52×52 ordered hands are checked field by field, and
settlement is checked for every Banker hand class against every Player hand, and every Banker
hand against every Player hand class.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from functools import cache

import pytest

from livetable.rules import DECK, BetSpot, Hand, evaluate, parse_card, settle_bet

RANKS = ["A", "2", "3", "4", "5", "6", "7", "8", "9", "10", "J", "Q", "K"]
SUITS = ["S", "H", "D", "C"]
TOKENS = [rank + suit for suit in SUITS for rank in RANKS]
PIPS = {"A": 1, "2": 2, "3": 3, "4": 4, "5": 5, "6": 6, "7": 7, "8": 8, "9": 9,
        "10": 0, "J": 0, "Q": 0, "K": 0}

# The seed's Special Combinations, highest first: (value, label, must be suited, rank pairs).
# Rank pairs are unordered, written low-high in RANKS order. A hand takes the first row it fits.
SPECIAL_ROWS = [
    ("7.5", "AK Flush", True, "A-K"),
    ("7.4", "Special Pair", False, "A-A 5-5 6-6 10-10"),
    ("7.3", "Face-card Combo", False, "J-J J-Q J-K Q-Q Q-K K-K"),
    ("7.2", "Single Face-card with No Point", False, "10-J 10-Q 10-K"),
    # Two non-face cards of one suit making 0 points (5-5 and 10-10 are caught above).
    ("7.1", "Flush with No Point", True, "A-9 2-8 3-7 4-6 5-5 10-10"),
]


@dataclass(frozen=True)
class Expected:
    value: str
    points: int
    flush: bool
    pair: bool
    label: str

    @property
    def special(self) -> bool:
        return self.flush or self.pair or "." in self.value

    @property
    def number(self) -> Decimal:
        return _DECIMAL[self.value]


_DECIMAL = {v: Decimal(v) for v in
            ["0", "1", "2", "3", "4", "5", "6", "7", "7.1", "7.2", "7.3", "7.4", "7.5", "8", "9"]}


def split(token: str) -> tuple[str, str]:
    return token[:-1], token[-1]


def classify(first: str, second: str) -> Expected:
    """The seed's reading of two cards, from their strings alone."""
    (r1, s1), (r2, s2) = split(first), split(second)
    points = (PIPS[r1] + PIPS[r2]) % 10
    suited, same = s1 == s2, r1 == r2
    low, high = sorted((r1, r2), key=RANKS.index)
    key = f"{low}-{high}"
    for value, label, needs_suit, pairs in SPECIAL_ROWS:
        if key in pairs.split() and (suited or not needs_suit):
            return Expected(value, points, suited, same, label)
    label = "1 Point" if points == 1 else f"{points} Points"
    return Expected(str(points), points, suited, same, label)


def expected_player_return(banker: Expected, player: Expected, amount: int) -> int:
    """docs/design.md §1's table for a Player bet of ``amount`` (``2 × amount`` deducted)."""
    b, p = banker.number, player.number
    if p == b:
        return 2 * amount  # tie: what was deducted
    if p < b:
        return 0 if banker.special else amount  # the withholding comes back, or nothing
    odds = 2 if player.special else 1
    if b in (Decimal("0"), Decimal("6")):
        odds = 1  # Note 5
    if player.points in (8, 9) and (player.flush or player.pair):
        odds = 2  # Note 6 overrides Note 5
    return amount * 2 + amount * odds


def expected_outcome(banker: Expected, player: Expected) -> str:
    b, p = banker.number, player.number
    return "tie" if p == b else "win" if p > b else "lose"


def test_the_deck_is_the_52_tokens() -> None:
    assert sorted(str(c) for c in DECK) == sorted(TOKENS)
    assert len(set(DECK)) == 52


@cache
def all_hands() -> list[tuple[str, str, Hand, Expected]]:
    return [
        (a, b, evaluate(parse_card(a), parse_card(b)), classify(a, b))
        for a in TOKENS
        for b in TOKENS
    ]


def test_every_ordered_hand_matches_the_seed_table() -> None:
    hands = all_hands()
    assert len(hands) == 2704
    wrong = [
        (a, b, (h.value, h.points, h.flush, h.pair, h.label), e)
        for a, b, h, e in hands
        if (h.value, h.points, h.flush, h.pair, h.label)
        != (e.value, e.points, e.flush, e.pair, e.label)
    ]
    assert wrong == []


def test_special_combinations_are_special_patterns() -> None:
    for _, _, hand, expected in all_hands():
        assert hand.special == expected.special
        assert (hand.combination is not None) == ("." in expected.value)


def test_how_many_ordered_hands_hold_each_combination() -> None:
    # Counted by hand over the 52 distinct cards (ordered, a card may repeat: 8 decks).
    counts: dict[str, int] = {}
    for _, _, hand, _ in all_hands():
        counts[hand.value] = counts.get(hand.value, 0) + 1
    assert counts["7.5"] == 4 * 2  # A-K, 4 suits, 2 orders
    assert counts["7.4"] == 4 * 4 * 4  # 4 ranks, any suit each
    assert counts["7.3"] == 12 * 12  # face × face
    assert counts["7.2"] == 4 * 12 * 2  # a 10 and a face card, 2 orders
    assert counts["7.1"] == 4 * 4 * 2  # A9 28 37 46, 4 suits, 2 orders
    assert sum(counts.values()) == 2704


@pytest.mark.parametrize(
    ("cards", "value", "points", "flush", "pair", "label"),
    [
        ("AS KS", "7.5", 1, True, False, "AK Flush"),
        ("KD AD", "7.5", 1, True, False, "AK Flush"),
        ("AS KH", "1", 1, False, False, "1 Point"),
        ("AH AC", "7.4", 2, False, True, "Special Pair"),
        ("AH AH", "7.4", 2, True, True, "Special Pair"),
        ("5C 5C", "7.4", 0, True, True, "Special Pair"),
        ("6S 6H", "7.4", 2, False, True, "Special Pair"),
        ("10C 10D", "7.4", 0, False, True, "Special Pair"),
        ("10C 10C", "7.4", 0, True, True, "Special Pair"),
        ("2C 2D", "4", 4, False, True, "4 Points"),
        ("4H 4H", "8", 8, True, True, "8 Points"),
        ("9S 9D", "8", 8, False, True, "8 Points"),
        ("JS JH", "7.3", 0, False, True, "Face-card Combo"),
        ("QD KC", "7.3", 0, False, False, "Face-card Combo"),
        ("QC JC", "7.3", 0, True, False, "Face-card Combo"),
        ("10H JH", "7.2", 0, True, False, "Single Face-card with No Point"),
        ("KS 10H", "7.2", 0, False, False, "Single Face-card with No Point"),
        ("AD 9D", "7.1", 0, True, False, "Flush with No Point"),
        ("8H 2H", "7.1", 0, True, False, "Flush with No Point"),
        ("3C 7C", "7.1", 0, True, False, "Flush with No Point"),
        ("AD 9C", "0", 0, False, False, "0 Points"),
        ("10S 9S", "9", 9, True, False, "9 Points"),
        ("KS 9S", "9", 9, True, False, "9 Points"),
        ("JS 5S", "5", 5, True, False, "5 Points"),
        ("8C 7S", "5", 5, False, False, "5 Points"),
        ("JD AC", "1", 1, False, False, "1 Point"),
    ],
)
def test_spot_checks(
    cards: str, value: str, points: int, flush: bool, pair: bool, label: str
) -> None:
    a, b = cards.split()
    hand = evaluate(parse_card(a), parse_card(b))
    assert (hand.value, hand.points, hand.flush, hand.pair, hand.label) == (
        value, points, flush, pair, label,
    )
    assert classify(a, b) == Expected(value, points, flush, pair, label)


def _class_representatives() -> list[tuple[str, str, Hand, Expected]]:
    """One hand of each class the seed's table tells apart (value, points, flush, pair)."""
    seen: dict[tuple[str, int, bool, bool], tuple[str, str, Hand, Expected]] = {}
    for row in all_hands():
        e = row[3]
        seen.setdefault((e.value, e.points, e.flush, e.pair), row)
    return list(seen.values())


def _wrong_player_bets(
    bankers: list[tuple[str, str, Hand, Expected]],
    players: list[tuple[str, str, Hand, Expected]],
) -> list[str]:
    amount = 100
    wrong = []
    for b1, b2, banker, b_expected in bankers:
        for p1, p2, player, p_expected in players:
            bet = settle_bet(BetSpot.P1, amount, player, banker)
            got = (bet.outcome, bet.deducted, bet.returned)
            want = (
                expected_outcome(b_expected, p_expected),
                2 * amount,
                expected_player_return(b_expected, p_expected, amount),
            )
            if got != want:
                wrong.append(f"banker {b1} {b2}, player {p1} {p2}: {got} != {want}")
    return wrong


def test_settlement_every_banker_class_against_every_player_hand() -> None:
    classes = _class_representatives()
    assert len(classes) == 37
    assert _wrong_player_bets(classes, all_hands())[:10] == []


def test_settlement_every_banker_hand_against_every_player_class() -> None:
    assert _wrong_player_bets(all_hands(), _class_representatives())[:10] == []


def test_pair_bet_for_every_player_hand() -> None:
    # A Pair bet looks at the Player's cards only; any Banker will do.
    banker = evaluate(parse_card("9D"), parse_card("7C"))
    for p1, p2, player, expected in all_hands():
        bet = settle_bet(BetSpot.P1_PAIR, 100, player, banker)
        want = 1200 if expected.pair else 0
        assert (bet.deducted, bet.returned) == (100, want), f"{p1} {p2}"


@pytest.mark.parametrize(
    ("banker", "player", "returned"),
    [
        # Literal rows of docs/design.md §1's table, for a bet of 100 (200 deducted).
        ("9D 7C", "3H 4S", 300),  # Player wins without a pattern: 1:1
        ("2D 3C", "4H 3H", 400),  # Player wins with a flush: 2:1
        ("KD 10C", "QH JS", 400),  # 7.3 beats 7.2, a special combination: 2:1
        ("JD 10C", "AH AS", 400),  # Banker 10+J is 7.2, not 0: Note 5 does not apply
        ("9C AD", "2H 3H", 300),  # Banker value 0: Note 5, 1:1
        ("2C 4D", "QS JS", 300),  # Banker value 6: Note 5, even for a flush 7.3
        ("9C AD", "AS AH", 300),  # Special Pair but 2 points: Note 6 does not apply
        ("9C AD", "4H 4S", 400),  # 8 points with a pair: Note 6, 2:1
        ("2C 4D", "5S 3S", 400),  # 8 points with a flush: Note 6, 2:1
        ("2C 4D", "9S KS", 400),  # 9 points with a flush: Note 6 (Example 9)
        ("2C 4D", "9S KD", 300),  # 9 points, no pattern: 1:1
        ("5S 3S", "2C 3D", 0),  # Banker wins with a flush: 2:1, nothing back
        ("5S 3D", "2C 3D", 100),  # Banker wins without a pattern: the withholding back
        ("2H 4H", "7C 7D", 0),  # Banker 6 with a flush beats a pair of 7s (4): 2:1
        ("AS AH", "5C 5D", 200),  # both 7.4: tie
        ("AS KS", "QD QH", 0),  # AK Flush 7.5 beats a Face-card Combo
        ("JC QD", "10S 10H", 400),  # Special Pair 7.4 beats a Face-card Combo 7.3
        ("7C 7D", "AS 3S", 200),  # 4 against 4: a tie, even with a pair or a flush
    ],
)
def test_literal_rows(banker: str, player: str, returned: int) -> None:
    b = [parse_card(t) for t in banker.split()]
    p = [parse_card(t) for t in player.split()]
    bet = settle_bet(BetSpot.P1, 100, evaluate(p[0], p[1]), evaluate(b[0], b[1]))
    assert bet.returned == returned
    assert expected_player_return(classify(*banker.split()), classify(*player.split()), 100) == (
        returned
    )
