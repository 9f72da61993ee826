"""The values inside frames: a table's snapshot, hands, results, limits, a player.

None of these is a frame of its own (no ``type`` tag): they are the nouns frames carry (a
hello's resume point, a welcome's snapshot, a settled round's results, a Bet Record's
entries), kept apart so that a field added to one (within v1, only ever added) is added
once for every frame that carries it.
"""

from __future__ import annotations

from typing import Literal

from msgspec import Struct, field

from livetable.protocol.codes import BetState, Counter, Phase


class ResumePoint(Struct, kw_only=True):
    epoch: Counter
    seq: Counter


class Limits(Struct, kw_only=True):
    min: int = 10
    max: int = 5_000
    pair_min: int = 10
    pair_max: int = 1_000
    round_max: int = 20_000  # a player's total deducted per round


class HandView(Struct, kw_only=True):
    hand: str
    cards: list[str]
    value: str
    points: int
    label: str
    flush: bool
    pair: bool


class PositionResult(Struct, kw_only=True):
    hand: str
    outcome: str  # the Player position's: win lose tie
    odds: int
    pair: bool
    flush: bool


class BankerResult(Struct, kw_only=True):
    """The Banker's hand of a settled round, for the shoe's statistics (Pok: 8 or 9 points)."""

    value: str
    points: int
    pair: bool
    flush: bool


class RoadmapEntry(Struct, kw_only=True, omit_defaults=True):
    round_id: str
    round_no: int
    results: list[PositionResult]
    #: Added within v1: absent from rounds settled before it (and from older servers).
    banker: BankerResult | None = None


class TipLimits(Struct, kw_only=True):
    """The smallest and the largest tip, in the player's minor units."""

    min: int
    max: int


class PlayerView(Struct, kw_only=True, omit_defaults=True):
    id: str
    name: str
    balance: int
    #: The session's currency, for a player an operator launched (docs/design.md §5).
    currency: str | None = None
    #: The session's chips and table limits, in the currency's minor units, when its
    #: operator gives the currency its own (docs/design.md §8): they replace the
    #: snapshot's ``limits`` for this player's bets. Absent otherwise.
    chips: list[int] | None = None
    limits: Limits | None = None
    #: What a tip to the dealer may be, when this player may tip (docs/protocol.md §3,
    #: tip); absent when their operator turned tips off.
    tips: TipLimits | None = None


class Payouts(Struct, kw_only=True):
    """What a bet of one unit takes from the balance and the odds it can be paid at, as the
    rules settle it (the engine fills it from ``livetable.rules``): a page shows and checks
    these instead of knowing the rules itself, so a rule changed on the server is a rule
    changed on every page."""

    player_deducted: int  # a Player bet: the bet and its withholding
    pair_deducted: int
    player_odds: list[int]  # a Player bet wins (or loses) at one of these, lowest first
    pair_odds: int


class StreamView(Struct, kw_only=True):
    """Where a table's live video is: ``hls``, the URL of its HLS playlist (absolute, or a
    path on the pages' origin). The playlist's EXT-X-PROGRAM-DATE-TIME tags tell the page
    how far the video runs behind ``server_time`` (docs/video.md)."""

    hls: str


class TableSnapshot(Struct, kw_only=True):
    id: str
    name: str
    phase: Phase
    mode: Literal["auto", "manual"]
    round_id: str | None = None
    round_no: int = 0
    shoe_id: str | None = None
    #: The commitment of this shoe (docs/design.md §7); null for a manual shoe.
    shoe_commitment: str | None = None
    closes_at: int | None = None
    limits: Limits = field(default_factory=Limits)
    hands: list[HandView] = field(default_factory=list)
    dealt: dict[str, int] = field(default_factory=dict)
    results: list[PositionResult] = field(default_factory=list)
    roadmap: list[RoadmapEntry] = field(default_factory=list)
    last_round: bool = False
    cut_card_out: bool = False
    cards_left: int = 0
    paused_reason: str | None = None
    resume_phase: Phase | None = None
    #: A new (manual) shoe waits for its opening card: players see "shuffling — new shoe".
    shuffling: bool = False
    #: Between rounds: when the next round opens by itself (None: when the dealer opens it).
    opens_at: int | None = None
    epoch: int = 0
    seq: int = 0
    stream: StreamView | None = None  # null: no video, the drawn table only
    #: Added within v1 (so optional to a reader): the multiples and odds of the rules.
    payouts: Payouts | None = None


class BetRecordEntry(Struct, kw_only=True):
    bet_id: str
    table: str
    shoe_id: str
    round_id: str
    round_no: int
    spot: str
    amount: int
    deducted: int
    placed_at: int
    state: BetState
    outcome: str | None = None
    odds: int | None = None
    returned: int | None = None
    net: int | None = None
    settled_at: int | None = None
    cards: list[str] | None = None
    banker_cards: list[str] | None = None
    balance_after: int | None = None


class TipRecordEntry(Struct, kw_only=True):
    """A tip to the dealer as the Bet Record shows it: taken at once, never settled."""

    tip_id: str
    table: str
    round_id: str | None  # the round in play at the table when it was given, if any
    amount: int
    placed_at: int
    balance_after: int | None
