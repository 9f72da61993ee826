"""Properties of the rules that hold for every hand, every bet and every shuffle."""

from __future__ import annotations

from collections import Counter
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from livetable.rules import (
    DECK,
    ROUND_SLOTS,
    BetSpot,
    Card,
    CardError,
    Hand,
    ImpossibleCard,
    Position,
    Shoe,
    Slot,
    Suit,
    evaluate,
    make_rng,
    parse_card,
    settle_bet,
    settle_round,
    spot_result,
)

cards = st.sampled_from(DECK)
hands = st.builds(evaluate, cards, cards)
amounts = st.integers(min_value=1, max_value=10**9)
seeds = st.integers(min_value=0, max_value=2**64)
player_spots = st.sampled_from([s for s in BetSpot if not s.is_pair])
pair_spots = st.sampled_from([s for s in BetSpot if s.is_pair])

ALL_HANDS = [evaluate(a, b) for a in DECK for b in DECK]
HANDS_BY_VALUE: dict[int, list[Hand]] = {}
for _hand in ALL_HANDS:
    HANDS_BY_VALUE.setdefault(_hand.tenths, []).append(_hand)

BURN = {"A": 1, "2": 2, "3": 3, "4": 4, "5": 5, "6": 6, "7": 7, "8": 8, "9": 9,
        "10": 10, "J": 10, "Q": 10, "K": 10}


# --- the order of hands -------------------------------------------------------------------


@given(hands, hands)
def test_the_order_is_total_and_follows_the_values(a: Hand, b: Hand) -> None:
    relations = [a < b, a > b, a.tenths == b.tenths]
    assert relations.count(True) == 1
    assert (a < b) == (Decimal(a.value) < Decimal(b.value))
    assert (a > b) == (b < a)


@given(hands, hands, hands)
def test_the_order_is_transitive(a: Hand, b: Hand, c: Hand) -> None:
    if a < b and b < c:
        assert a < c
    if a.tenths == b.tenths == c.tenths:
        assert not (a < c or c < a)


def test_the_values_in_order() -> None:
    values = sorted({h.tenths for h in ALL_HANDS})
    wire = [str(v // 10) if v % 10 == 0 else f"{v // 10}.{v % 10}" for v in values]
    assert wire == ["0", "1", "2", "3", "4", "5", "6", "7",
                    "7.1", "7.2", "7.3", "7.4", "7.5", "8", "9"]
    assert sorted({h.value for h in ALL_HANDS}, key=Decimal) == wire


# --- settlement ---------------------------------------------------------------------------


@given(player_spots, amounts, hands, hands)
def test_a_player_bet_returns_a_whole_multiple(
    spot: BetSpot, amount: int, position: Hand, banker: Hand
) -> None:
    bet = settle_bet(spot, amount, position, banker)
    assert bet.deducted == 2 * amount
    assert bet.returned in {0, amount, 2 * amount, 3 * amount, 4 * amount}
    assert bet.outcome == ("tie" if position.tenths == banker.tenths
                           else "win" if position > banker else "lose")


@given(pair_spots, amounts, hands, hands)
def test_a_pair_bet_returns_twelve_times_or_nothing(
    spot: BetSpot, amount: int, position: Hand, banker: Hand
) -> None:
    bet = settle_bet(spot, amount, position, banker)
    assert bet.deducted == amount
    assert bet.returned == (12 * amount if position.pair else 0)


@given(st.data(), player_spots, amounts)
def test_a_tie_returns_exactly_what_was_deducted(
    data: st.DataObject, spot: BetSpot, amount: int
) -> None:
    value = data.draw(st.sampled_from(sorted(HANDS_BY_VALUE)))
    position = data.draw(st.sampled_from(HANDS_BY_VALUE[value]))
    banker = data.draw(st.sampled_from(HANDS_BY_VALUE[value]))
    bet = settle_bet(spot, amount, position, banker)
    assert bet.outcome == "tie"
    assert bet.returned == bet.deducted == 2 * amount


@given(st.lists(hands, min_size=6, max_size=6))
def test_a_round_settles_every_spot_with_the_one_settlement_function(
    six: list[Hand],
) -> None:
    by_position = dict(zip(Position, six, strict=True))
    results = settle_round(by_position)
    assert set(results) == set(BetSpot)
    for spot, result in results.items():
        assert result == spot_result(spot, by_position[spot.position], by_position[Position.BANKER])


@pytest.mark.parametrize("amount", [0, -1, -100])
def test_a_bet_amount_is_positive(amount: int) -> None:
    with pytest.raises(ValueError, match="positive"):
        settle_bet(BetSpot.P1, amount, ALL_HANDS[0], ALL_HANDS[1])


# --- the shoe -----------------------------------------------------------------------------


@given(seeds)
def test_a_shuffled_shoe_holds_every_card_eight_times(seed: int) -> None:
    shoe = Shoe.shuffled(make_rng(seed))
    assert len(shoe.order) == shoe.size == 416
    assert Counter(shoe.order) == {card: 8 for card in DECK}
    assert shoe.drawn == 0 and not shoe.cut_out


@given(seeds)
def test_the_opening_burns_the_face_up_cards_value(seed: int) -> None:
    shoe = Shoe.shuffled(make_rng(seed))
    first, burned = shoe.open()
    assert first == shoe.order[0]
    assert burned == BURN[first.rank_text]
    assert shoe.drawn == 1 + burned


def test_the_round_slots() -> None:
    players = [Position.P1, Position.P2, Position.P3, Position.P4, Position.P5]
    assert list(ROUND_SLOTS) == [
        Slot(None, 1),
        *(Slot(p, 1) for p in [*players, Position.BANKER]),
        *(Slot(p, 2) for p in [*players, Position.BANKER]),
    ]
    assert ROUND_SLOTS[0].is_burn and not any(s.is_burn for s in ROUND_SLOTS[1:])


@given(seeds)
def test_a_round_deals_thirteen_cards_in_slot_order(seed: int) -> None:
    shoe = Shoe.shuffled(make_rng(seed))
    shoe.open()
    start = shoe.drawn
    dealt = shoe.deal_round()
    assert [slot for slot, _ in dealt] == list(ROUND_SLOTS)
    assert [card for _, card in dealt] == shoe.order[start : start + 13]
    assert shoe.drawn == start + 13


@given(seeds, st.integers(min_value=13, max_value=392), st.integers(min_value=0, max_value=379))
def test_the_round_in_which_the_cut_card_comes_out_is_the_last(
    seed: int, lo: int, spread: int
) -> None:
    hi = min(lo + spread, 392)
    shoe = Shoe.shuffled(make_rng(seed), cut_range=(lo, hi))
    assert lo <= shoe.size - shoe.cut_at <= hi
    shoe.open()
    assert not shoe.cut_out
    rounds = 0
    while True:
        start = shoe.drawn
        shoe.deal_round()  # the last round completes: no ShoeExhausted
        rounds += 1
        # The cut card lies after card number cut_at: it comes out within this round exactly
        # when this round draws card number cut_at + 1.
        assert shoe.cut_out == (start <= shoe.cut_at < shoe.drawn)
        if shoe.cut_out:
            break
    assert shoe.drawn <= shoe.size
    assert rounds >= 1


@given(seeds)
def test_cut_out_flips_on_the_draw_after_cut_at_cards(seed: int) -> None:
    shoe = Shoe.shuffled(make_rng(seed))
    while shoe.drawn < shoe.cut_at:
        shoe.draw()
        assert not shoe.cut_out  # drawn ≤ cut_at: the cut card is still in the shoe
    assert shoe.drawn == shoe.cut_at and not shoe.cut_out
    shoe.draw()
    assert shoe.cut_out


def test_a_manual_shoe_rejects_a_ninth_king_of_hearts() -> None:
    shoe = Shoe.manual()
    king = parse_card("KH")
    for _ in range(8):
        shoe.feed(king)
    with pytest.raises(ImpossibleCard, match="KH") as raised:
        shoe.feed(king)
    assert isinstance(raised.value, CardError)
    # The rejected card changed nothing.
    assert shoe.drawn == 8 and shoe.seen[king] == 8
    shoe.feed(parse_card("KS"))
    assert shoe.drawn == 9


# --- card notation ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("token", "card"),
    [
        ("10D", Card(10, Suit.DIAMONDS)),
        ("TD", Card(10, Suit.DIAMONDS)),
        ("kh", Card(13, Suit.HEARTS)),
        ("A♠", Card(1, Suit.SPADES)),
        ("a♠", Card(1, Suit.SPADES)),
        (" 9c ", Card(9, Suit.CLUBS)),
        ("Q♦", Card(12, Suit.DIAMONDS)),
        ("J♥", Card(11, Suit.HEARTS)),
    ],
)
def test_card_parsing_accepts(token: str, card: Card) -> None:
    assert parse_card(token) == card


@pytest.mark.parametrize("token", ["", "X", "10", "11H", "1OD", "AX", "KHH", "♠A", "joker", "0S"])
def test_card_parsing_rejects_junk_naming_the_token(token: str) -> None:
    with pytest.raises(CardError) as raised:
        parse_card(token)
    assert repr(token) in str(raised.value)


def test_every_card_round_trips_through_its_wire_form() -> None:
    for card in DECK:
        assert parse_card(str(card)) == card
        assert parse_card(str(card).lower()) == card
        assert parse_card(card.pretty) == card


@given(st.text(max_size=6))
def test_card_parsing_returns_a_card_or_names_the_token(token: str) -> None:
    try:
        card = parse_card(token)
    except CardError as e:
        assert repr(token) in str(e)
        assert "\n" not in str(e).replace(repr(token), "")
    else:
        assert parse_card(str(card)) == card
