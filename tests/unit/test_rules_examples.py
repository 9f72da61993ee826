"""The nine worked examples of the English seed, as the seed reads them.

Given these cards and this bet, this is deducted and this is returned. Example 9 returns 400,
not the 300 printed in the English text: docs/design.md §1 explains why (Note 6, the Thai text and
the Hindi "Return 400" all say 2:1).
"""

from __future__ import annotations

import pytest

from livetable.rules import BetSpot, parse_cards, settle_bet
from livetable.rules.hands import hand_of

EXAMPLES = [
    # (example, bet, banker, player, banker value, player value, outcome, odds, returned)
    (1, BetSpot.P1, "4♥ 8♣", "6♣ 7♠", "2", "3", "win", 1, 300),
    (2, BetSpot.P1, "2♣ 3♦", "9♣ 2♦", "5", "1", "lose", 1, 100),
    (3, BetSpot.P1, "Q♣ 10♣", "Q♣ J♣", "7.2", "7.3", "win", 2, 400),
    (4, BetSpot.P1, "8♣ J♣", "9♦ 6♣", "8", "5", "lose", 2, 0),
    (5, BetSpot.P1, "6♣ 5♣", "J♦ A♣", "1", "1", "tie", 1, 200),
    (6, BetSpot.P1, "J♣ K♦", "5♠ 9♥", "7.3", "4", "lose", 2, 0),
    (7, BetSpot.P1_PAIR, "6♠ 8♠", "10♣ 10♥", "4", "7.4", "win", 11, 1200),
    (8, BetSpot.P1, "2♥ 4♥", "5♣ 5♣", "6", "7.4", "win", 1, 300),
    (9, BetSpot.P1, "9♦ 7♣", "K♥ 9♥", "6", "9", "win", 2, 400),
]


@pytest.mark.parametrize(
    ("example", "spot", "banker", "player", "banker_value", "player_value",
     "outcome", "odds", "returned"),
    EXAMPLES,
    ids=[f"example-{e[0]}" for e in EXAMPLES],
)
def test_worked_example(
    example: int,
    spot: BetSpot,
    banker: str,
    player: str,
    banker_value: str,
    player_value: str,
    outcome: str,
    odds: int,
    returned: int,
) -> None:
    banker_hand = hand_of(parse_cards(banker))
    player_hand = hand_of(parse_cards(player))
    assert banker_hand.value == banker_value
    assert player_hand.value == player_value

    bet = settle_bet(spot, 100, player_hand, banker_hand)

    # Player bets deduct bet + withholding; "No amount is withheld for Pairs".
    assert bet.deducted == (100 if spot.is_pair else 200)
    assert (bet.outcome, bet.odds, bet.returned) == (outcome, odds, returned)


def test_example_7_player_bet_also_wins_at_2_to_1() -> None:
    # "Player 1 and Player 1 Pair Win": a Special Pair (7.4) against a Banker 4 with a flush.
    bet = settle_bet(
        BetSpot.P1, 100, hand_of(parse_cards("10♣ 10♥")), hand_of(parse_cards("6♠ 8♠"))
    )
    assert (bet.outcome, bet.odds, bet.returned) == ("win", 2, 400)


def test_example_8_pair_bet_wins_too() -> None:
    # 5♣ 5♣ is a pair (eight decks): "Player 1 and Player 1 Pair Win".
    bet = settle_bet(
        BetSpot.P1_PAIR, 100, hand_of(parse_cards("5♣ 5♣")), hand_of(parse_cards("2♥ 4♥"))
    )
    assert bet.returned == 1200


def test_example_9_english_text_300_is_the_typo() -> None:
    # Without Note 6 the Banker's 6 would cut the odds to 1:1 and return 300; Note 6 restores
    # 2:1 because the Player has 9 points with a flush.
    bet = settle_bet(BetSpot.P1, 100, hand_of(parse_cards("KH 9H")), hand_of(parse_cards("9D 7C")))
    assert bet.returned == 100 + 100 + 200
