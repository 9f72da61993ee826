"""Table events: what every watcher of a table sees, numbered per table.

Each is numbered by the table's engine (``epoch``, ``seq``), the table's one writer, built
with its number and frozen from then on, and encoded once for all its receivers. A
client that missed some resumes from the last number it saw; so only these are numbered,
and nothing private is ever one of them.
"""

from __future__ import annotations

from typing import Literal

from msgspec import Struct

from livetable.protocol.values import PositionResult


class TableEvent(Struct, tag_field="type", kw_only=True, frozen=True):
    """Every table event: numbered per table by its engine (``epoch``, ``seq`` +1 each),
    built with its number and never changed after (frozen)."""

    table: str = ""
    epoch: int = 0
    seq: int = 0


class ShoeShuffling(TableEvent, tag="shoe_shuffling", frozen=True):
    """A new shoe is being shuffled (manual mode): its ``shoe_started`` comes with the
    opening card."""

    shoe_id: str


class ShoeStarted(TableEvent, tag="shoe_started", frozen=True):
    shoe_id: str
    burn_card: str
    burned: int
    #: SHA-256 over the shoe's order, cut card and salt (docs/design.md §7); null for a manual shoe.
    commitment: str | None = None
    #: Cards left in the shoe after its opening burn (as the snapshot's ``cards_left``).
    cards_left: int | None = None
    #: When the first round opens by itself (as the snapshot's ``opens_at``).
    opens_at: int | None = None


class ShoeRevealed(TableEvent, tag="shoe_revealed", frozen=True):
    """An auto shoe has ended: what its commitment was computed from."""

    shoe_id: str
    salt: str
    cut_at: int
    order: list[str]
    #: Added to v1: the game log's head after the shoe's last round, how many rounds it
    #: had, and why it ended ("cut_card", "set_aside", "restored"): docs/protocol.md §10.1.
    chain_head: str | None = None
    round_count: int | None = None
    ended_by: str | None = None


class RoundOpened(TableEvent, tag="round_opened", frozen=True):
    round_id: str
    shoe_id: str
    round_no: int
    closes_at: int


class BettingClosed(TableEvent, tag="betting_closed", frozen=True):
    round_id: str


class CardDealt(TableEvent, tag="card_dealt", frozen=True):
    round_id: str
    to: str
    n: int
    #: Cards left in the shoe after this card (the round's burn before it counted too).
    cards_left: int | None = None


class CardsVoided(TableEvent, tag="cards_voided", frozen=True):
    """The last ``count`` cards of the round were voided (a mis-scan), with a supervisor's
    approval. ``dealt`` is the new count per hand, as in the snapshot; no card identity."""

    round_id: str
    count: int
    dealt: dict[str, int]
    dealer: str
    supervisor: str
    cards_left: int | None = None  # back in the shoe's count: the voided cards


class HandRevealed(TableEvent, tag="hand_revealed", frozen=True):
    round_id: str
    hand: str
    cards: list[str]
    value: str
    points: int
    label: str
    flush: bool
    pair: bool


class RoundSettled(TableEvent, tag="round_settled", frozen=True):
    round_id: str
    results: list[PositionResult]
    last_round: bool
    #: When the next round opens by itself; null: when the dealer opens it.
    opens_at: int | None = None
    #: Added to v1: the head of the shoe's game log once this round is in it (an auto
    #: shoe's; null for a manual one): docs/protocol.md §10.1.
    chain_head: str | None = None


class RoundCancelled(TableEvent, tag="round_cancelled", frozen=True):
    round_id: str
    reason: str
    opens_at: int | None = None  # as in round_settled
    chain_head: str | None = None  # added to v1, as in round_settled


class TablePaused(TableEvent, tag="table_paused", frozen=True):
    reason: str


class TableResumed(TableEvent, tag="table_resumed", frozen=True):
    closes_at: int | None = None  # betting resumes with a fresh deadline


class CutCardOut(TableEvent, tag="cut_card_out", frozen=True):
    """The cut card came out of the shoe. ``last_round``: the round in play is the shoe's
    last; false between rounds, when the next round will be."""

    shoe_id: str
    last_round: bool


class ModeChanged(TableEvent, tag="mode_changed", frozen=True):
    """The table switched between auto and manual (between rounds). The shoe went with the
    mode that dealt it: the table has none until the next one starts."""

    mode: Literal["auto", "manual"]
    opens_at: int | None = None  # as in round_settled


class SpotShare(Struct, kw_only=True, frozen=True):
    """One spot's part of a round's bets, in whole percent (0-100): of the players who bet
    in the round, how many bet here (``players``); of the round's stakes, how much
    (``money``). Shares, not amounts or names: no player can be picked out."""

    spot: str
    players: int
    money: int


class BetStats(TableEvent, tag="bet_stats", frozen=True):
    """Once per round, after betting closed: how the round's accepted bets lie on the
    spots (docs/protocol.md, "bet_stats"). ``bettors``: how many players bet."""

    round_id: str
    bettors: int
    spots: list[SpotShare]


class Winner(Struct, kw_only=True, frozen=True):
    """One of a round's biggest wins: the player's name as the operator lets it be shown
    (masked by default, ``Pl***``), and what the round returned them over what their bets
    took from their balance (the net win of docs/protocol.md §7), in the minor units of
    ``currency`` (null: the table's own)."""

    name: str
    amount: int
    currency: str | None = None


class RoundWinners(TableEvent, tag="round_winners", frozen=True):
    """Once per round, when its settlement is stored: its biggest wins, largest first
    (at most five; none is sent for a round nobody won)."""

    round_id: str
    winners: list[Winner]


AnyTableEvent = (
    ShoeShuffling | ShoeStarted | RoundOpened | BettingClosed | CardDealt | CardsVoided
    | HandRevealed | RoundSettled | RoundCancelled | TablePaused | TableResumed | ShoeRevealed
    | CutCardOut | ModeChanged | BetStats | RoundWinners
)
