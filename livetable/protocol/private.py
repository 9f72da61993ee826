"""Frames to one connection only: the welcome, a bet's answers, results, replies.

Nothing here is a table event: a private frame has no ``seq`` and is never replayed from
the table's log (a player's results after a resume are read back from the store).
"""

from __future__ import annotations

from typing import Any

from msgspec import Struct, field

from livetable.protocol.codes import ErrorCode, RejectionCode
from livetable.protocol.notes import ChatMessage, Presenter
from livetable.protocol.values import (
    BetRecordEntry,
    PlayerView,
    TableSnapshot,
    TipRecordEntry,
)


class Welcome(Struct, tag="welcome", tag_field="type", kw_only=True):
    v: int
    player: PlayerView | None
    table: TableSnapshot
    epoch: int
    seq: int
    server_time: int
    resumed: bool
    #: The table's last chat messages, oldest first (docs/protocol.md §4); old clients
    #: ignore them.
    chat: list[ChatMessage] = field(default_factory=list)
    #: Who is dealing, when a dealer signed in at the console.
    dealer: Presenter | None = None


class BetAccepted(Struct, tag="bet_accepted", tag_field="type", kw_only=True):
    bet_id: str
    round_id: str
    spot: str
    amount: int
    deducted: int
    balance: int


class BetRejected(Struct, tag="bet_rejected", tag_field="type", kw_only=True):
    bet_id: str
    code: RejectionCode
    message: str


class SlipBetAccepted(Struct, kw_only=True):
    bet_id: str
    spot: str
    amount: int
    deducted: int


class SlipAccepted(Struct, tag="slip_accepted", tag_field="type", kw_only=True):
    slip_id: str
    round_id: str
    bets: list[SlipBetAccepted]
    deducted: int  # the slip's total: what the player's balance went down by
    balance: int


class SlipRejected(Struct, tag="slip_rejected", tag_field="type", kw_only=True,
                   omit_defaults=True):
    slip_id: str
    code: RejectionCode
    message: str
    bet_id: str | None = None  # the bet that failed, when one did


class BetSettled(Struct, tag="bet_settled", tag_field="type", kw_only=True):
    bet_id: str
    round_id: str
    spot: str
    amount: int
    outcome: str  # win lose tie refund
    odds: int
    returned: int
    balance: int


class Bets(Struct, tag="bets", tag_field="type", kw_only=True):
    bets: list[BetRecordEntry]
    next: str | None = None
    #: The player's tips to the dealer in the span of time this page's bets cover
    #: (docs/protocol.md §6, bets): apart from ``bets``, whose entries keep their meaning.
    tips: list[TipRecordEntry] = field(default_factory=list)


class TipAccepted(Struct, tag="tip_accepted", tag_field="type", kw_only=True):
    """A tip taken (or a tip sent again, answered as it first was): ``balance`` is the
    player's right after it; ``currency`` the session's, null for a player without one."""

    tip_id: str
    amount: int
    balance: int
    currency: str | None = None


class Pong(Struct, tag="pong", tag_field="type", kw_only=True):
    t: int | float | None
    server_time: int


class Heartbeat(Struct, tag="heartbeat", tag_field="type", kw_only=True):
    """Sent on a quiet table every ``interval_ms``, so that a client can time the silence:
    no frame at all for about twice the interval means the connection is gone, even when
    the network dropped it without a word (a weak mobile signal sends no FIN)."""

    interval_ms: int
    server_time: int


class Presence(Struct, tag="presence", tag_field="type", kw_only=True):
    """How many connections watch the table (players and viewers) on this server: sent
    after the welcome, then to the table's connections when the number changed, at most
    every ``PRESENCE_EVERY`` seconds. A private frame (no ``seq``): a count, not a table
    event, and nothing to resume."""

    table: str
    online: int


#: Presence frames go out at most this often per table (a busy lobby joins and leaves
#: all the time: one frame per change would be a frame per join).
PRESENCE_EVERY = 2.0


class Balance(Struct, tag="balance", tag_field="type", kw_only=True, omit_defaults=True):
    """The answer to ``get_balance``; with a seamless wallet, what the operator said."""

    balance: int
    currency: str | None = None


class Error(Struct, tag="error", tag_field="type", kw_only=True, omit_defaults=True):
    code: ErrorCode
    message: str
    bet_id: str | None = None  # set when the error is about one place_bet (unavailable)
    slip_id: str | None = None  # set when the error is about one place_bets (unavailable)
    tip_id: str | None = None  # set when the error answers a tip


class SessionEnded(Struct, tag="session_ended", tag_field="type", kw_only=True):
    """The operator's session this connection belongs to has ended (the operator ended it:
    self-exclusion, an account closed; or its time limit, ``time_limit``). The connection
    closes 4002 next; its token is refused from now on. Bets already taken settle as
    usual."""

    reason: str


class RealityCheck(Struct, tag="reality_check", tag_field="type", kw_only=True):
    """The session's figures so far (minor units): the player's slips are refused
    ``reality_check_pending`` until they answer ``reality_check_ack``."""

    minutes: int  # since the session started
    staked: int
    returned: int
    net: int  # returned - staked


class Ack(Struct, tag="ack", tag_field="type", kw_only=True):
    cmd: str
    detail: dict[str, Any] | None = None
