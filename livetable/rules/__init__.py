"""The rules of Pok Deng: pure values and functions, no I/O, no asyncio, no clock."""

from livetable.rules.cards import DECK, Card, CardError, Suit, parse_card, parse_cards
from livetable.rules.hands import Combination, Hand, evaluate, hand_of
from livetable.rules.settlement import (
    BET_SPOTS,
    DEAL_ORDER,
    PAIR_ODDS,
    PLAYER_ODDS,
    PLAYER_POSITIONS,
    BetSettlement,
    BetSpot,
    Outcome,
    Position,
    SpotResult,
    player_odds,
    settle_bet,
    settle_round,
    spot_result,
)
from livetable.rules.shoe import ROUND_SLOTS, ImpossibleCard, Shoe, Slot, make_rng

__all__ = [
    "BET_SPOTS",
    "DEAL_ORDER",
    "DECK",
    "PAIR_ODDS",
    "PLAYER_ODDS",
    "PLAYER_POSITIONS",
    "ROUND_SLOTS",
    "BetSettlement",
    "BetSpot",
    "Card",
    "CardError",
    "Combination",
    "Hand",
    "ImpossibleCard",
    "Outcome",
    "Position",
    "Shoe",
    "Slot",
    "SpotResult",
    "Suit",
    "evaluate",
    "hand_of",
    "make_rng",
    "parse_card",
    "parse_cards",
    "player_odds",
    "settle_bet",
    "settle_round",
    "spot_result",
]
