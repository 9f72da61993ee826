"""What a table's step is made of: its events, and the effects the ledger applies.

An engine command returns a :class:`Step`: the protocol's table events, each built with its
number (:class:`Numbering`), and the *effects* — what the ledger must do for the step (open
a round for bets, close it, settle it, refund it, keep an ended auto shoe), carrying what
the wire must not (a round's cards before their reveal). A command refused raises
:class:`EngineError`. Plain data, shared by the engine that makes them and the stores that
apply them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, TypedDict

import msgspec

from livetable import protocol as p


class EngineError(Exception):
    """A command that is illegal now. ``code`` is stable (for clients), ``message`` human.

    ``step`` is set when the command was refused but the table still moved (an impossible
    card pauses the round): the shell stores and announces it, then reports the error.
    """

    def __init__(self, code: p.ErrorCode, message: str, step: Step | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.step = step


class Numbering(TypedDict):
    """A table event's place in the table's numbering: built into the event, which is
    frozen (``p.RoundOpened(**self._number(), round_id=…)``)."""

    table: str
    epoch: int
    seq: int


# --- effects: what the ledger does for a step ---------------------------------------------


class OpenRound(msgspec.Struct, tag="open_round", kw_only=True):
    table: str
    round_id: str
    shoe_id: str
    round_no: int
    closes_at: int
    limits: p.Limits


class SetBetting(msgspec.Struct, tag="set_betting", kw_only=True):
    """Bets are taken until ``closes_at`` while ``status`` is "betting"; "paused" and
    "closed" refuse them (with the codes ``paused`` and ``betting_closed``)."""

    table: str
    round_id: str
    status: Literal["betting", "paused", "closed"]
    closes_at: int | None


class SettleRound(msgspec.Struct, tag="settle_round", kw_only=True):
    table: str
    round_id: str
    #: spot → (outcome, odds, returned multiple) for a bet of one unit.
    spots: dict[str, tuple[str, int, int]]
    cards: dict[str, list[str]]


class CancelRound(msgspec.Struct, tag="cancel_round", kw_only=True):
    table: str
    round_id: str
    reason: str


class RevealShoe(msgspec.Struct, tag="reveal_shoe", kw_only=True):
    """An auto shoe has ended: keep it for ``GET /api/shoes/{shoe_id}`` (docs/design.md §7).

    ``rounds``: each round of the shoe (round id, how many cards it took out of the shoe,
    its burn included, when it ended), in order; ``ended_by``: why the shoe ended
    (rules/fairness.py ``ENDINGS``); ``chain_head``: its game log's head after its last round.
    """

    table: str
    shoe_id: str
    commitment: str
    salt: str
    cut_at: int
    order: list[str]
    burn_card: str
    burned: int
    rounds: list[tuple[str, int, int]]
    ended_by: str = "set_aside"
    chain_head: str | None = None


Effect = OpenRound | SetBetting | SettleRound | CancelRound | RevealShoe


@dataclass
class Step:
    events: list[p.TableEvent] = field(default_factory=list)
    effects: list[Effect] = field(default_factory=list)
    #: For a manual ``card``: where it went (``{"slot": "P3", "n": 1}`` or ``{"slot": "burn"}``).
    detail: dict[str, object] | None = None

    def extend(self, other: Step) -> None:
        self.events.extend(other.events)
        self.effects.extend(other.effects)
