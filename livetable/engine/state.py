"""The whole state of one table, as one msgspec Struct the shell stores with every step.

A crashed engine is rebuilt from these bytes exactly where it was
(:meth:`TableEngine.recover <livetable.engine.table.TableEngine.recover>`); the stores keep
them sealed, because they hold the shoe's order. Plain data: the engine changes it, the
views (:mod:`livetable.engine.views`) read it.
"""

from __future__ import annotations

from collections import Counter
from typing import Literal

import msgspec

from livetable import protocol as p
from livetable.rules import Shoe, parse_card
from livetable.rules.shoe import DEFAULT_CUT_RANGE

Mode = Literal["auto", "manual"]


class ShoeState(msgspec.Struct, kw_only=True):
    shoe_id: str
    order: list[str]
    cut_at: int
    drawn: int
    cut_out: bool
    seen: dict[str, int]
    awaiting_open_card: bool = False
    #: Auto shoes (docs/design.md §7): the salt and the commitment published in shoe_started, where
    #: in ``order`` each round began, and whether the shoe was revealed. A shoe stored
    #: before commitments existed has none: it is never revealed.
    salt: str | None = None
    commitment: str | None = None
    round_starts: list[int] = msgspec.field(default_factory=list)
    revealed: bool = False
    #: The game log (docs/security.md): its head after the last round ended (the commitment
    #: before the first), and when each ended round ended. None: a shoe started before the
    #: log existed, or a manual one.
    chain_head: str | None = None
    round_ends: list[int] = msgspec.field(default_factory=list)
    #: Why the shoe ends, when that is decided before its end (rules/fairness.py ENDINGS).
    ended_by: str | None = None


class Timing(msgspec.Struct, kw_only=True):
    """How a table paces its rounds. These defaults are the only ones: the process's
    settings (livetable/config/settings.py) take theirs from here, in seconds."""

    betting_ms: int = 15_000
    deal_interval_ms: int = 150
    reveal_interval_ms: int = 1_500
    between_rounds_ms: int = 4_000
    #: Betting closes this long after ``closes_at``: bets that *arrived* before the deadline
    #: (the store judges by arrival) but wait in a busy server's queues still land.
    close_grace_ms: int = 1_000
    #: Manual mode: open the next round by itself this long after a round ended (or the
    #: shoe's opening card was read); 0 = the dealer opens every round.
    manual_open_ms: int = 0
    cut_range: tuple[int, int] = DEFAULT_CUT_RANGE


class TableState(msgspec.Struct, kw_only=True):
    table: str
    name: str
    mode: Mode = "auto"
    epoch: int = 1
    seq: int = 0
    phase: p.Phase = "idle"
    limits: p.Limits = msgspec.field(default_factory=p.Limits)
    timing: Timing = msgspec.field(default_factory=Timing)
    shoe_no: int = 0
    shoe: ShoeState | None = None
    round_no: int = 0
    round_id: str | None = None
    closes_at: int | None = None
    #: Cards of the round in dealing order: index 0 is the burn, then ROUND_SLOTS.
    round_cards: list[str] = msgspec.field(default_factory=list)
    revealed: int = 0
    #: The nonces of the supervisors' approvals used in this round: each is used once.
    approvals_used: list[str] = msgspec.field(default_factory=list)
    last_round: bool = False
    results: list[p.PositionResult] = msgspec.field(default_factory=list)
    roadmap: list[p.RoadmapEntry] = msgspec.field(default_factory=list)
    paused_from: p.Phase | None = None
    paused_reason: str | None = None
    betting_left_ms: int | None = None
    next_at: int | None = None  # auto mode: when the next timed action is due
    #: The table's live video, as configured (the runner sets it on every start).
    stream: p.StreamView | None = None
    #: The rounds whose ``bet_stats`` and ``round_winners`` were announced: once a round.
    stats_for: str | None = None
    winners_for: str | None = None


STATE_ENCODER = msgspec.json.Encoder()
STATE_DECODER = msgspec.json.Decoder(TableState)


def shoe_state(shoe: Shoe, shoe_id: str, awaiting: bool = False) -> ShoeState:
    return ShoeState(
        shoe_id=shoe_id,
        order=[str(c) for c in shoe.order],
        cut_at=shoe.cut_at,
        drawn=shoe.drawn,
        cut_out=shoe.cut_out,
        seen={str(c): n for c, n in shoe.seen.items()},
        awaiting_open_card=awaiting,
    )


def parse_shoe(state: ShoeState) -> Shoe:
    return Shoe(
        order=[parse_card(c) for c in state.order],
        cut_at=state.cut_at,
        drawn=state.drawn,
        cut_out=state.cut_out,
        seen=Counter({parse_card(c): n for c, n in state.seen.items()}),
    )
