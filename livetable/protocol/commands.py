"""What clients send: the player's frames on ``/ws``, the dealer console's on
``/ws/dealer``, and what a gateway hands to a table's engine.

Each endpoint's frames are one tagged union (:data:`PlayerCommand`,
:data:`DealerCommand`), decoded by one decoder (:mod:`livetable.protocol.codec`), so
what an endpoint accepts is the union and nothing else. The lists derived from the
unions (:data:`DEALER_COMMANDS`, :data:`CHAT_COMMANDS`) are the one list the engine, the
consoles and docs/protocol.md are checked against.
"""

from __future__ import annotations

from typing import Annotated, Any, get_args

import msgspec
from msgspec import Meta, Struct

from livetable.protocol.codes import Cursor, Integer, ShortText
from livetable.protocol.values import ResumePoint


class Hello(Struct, tag="hello", tag_field="type", kw_only=True):
    v: Integer
    table: ShortText
    token: Annotated[str, Meta(max_length=2048)] | None = None
    resume: ResumePoint | None = None


class PlaceBet(Struct, tag="place_bet", tag_field="type", kw_only=True):
    bet_id: str  # its length is the store's bad_bet_id, with the bet named
    round_id: ShortText
    spot: ShortText
    amount: Integer  # its range is the store's bad_amount, with the bet named


class SlipBet(Struct, kw_only=True, frozen=True):
    """One bet of a slip, as the player sends it."""

    bet_id: str  # its length is the store's bad_bet_id, with the bet named
    spot: ShortText
    amount: Integer  # its range is the store's bad_amount, with the bet named


class PlaceBets(Struct, tag="place_bets", tag_field="type", kw_only=True):
    """A bet slip (docs/design.md §6): all of its bets are accepted together, or none is."""

    slip_id: str  # its length is the store's bad_slip_id
    round_id: ShortText
    bets: list[SlipBet]  # how many is the store's bad_slip (the frame's size bounds it)


class GetBets(Struct, tag="get_bets", tag_field="type", kw_only=True):
    limit: Integer | None = None  # clamped to 1…200
    before: Cursor | None = None


class Ping(Struct, tag="ping", tag_field="type", kw_only=True):
    t: Integer | float | None = None


class GetBalance(Struct, tag="get_balance", tag_field="type", kw_only=True):
    """Ask for the player's balance now (with a seamless wallet: the operator's)."""


class RealityCheckAck(Struct, tag="reality_check_ack", tag_field="type", kw_only=True):
    """The player has seen the reality check: betting goes on until the next one."""


class Tip(Struct, tag="tip", tag_field="type", kw_only=True):
    """A tip to the dealer: ``amount`` (minor units) from the player's balance to the
    house's tip account, once by ``tip_id`` (livetable/betting/tips.py)."""

    tip_id: str  # its length is the gateway's bad_tip_id, with the tip named
    amount: Integer  # its range is the tip's limits (tip_out_of_range)


# --- table chat and the presenter, both endpoints (docs/design.md §10) ------------------


class ChatSend(Struct, tag="chat_send", tag_field="type", kw_only=True):
    """A chat message to the table. ``text`` is judged after trimming (1–200 characters,
    plain text: livetable/chat.py); its bound here is only the frame's."""

    client_msg_id: ShortText
    text: str


class ChatMute(Struct, tag="chat_mute", tag_field="type", kw_only=True):
    """A dealer console's: the player may not chat for ``minutes`` (0 lifts a mute)."""

    player_id: ShortText
    minutes: Annotated[int, Meta(ge=0, le=10_080)]  # a week at most


class ChatDelete(Struct, tag="chat_delete", tag_field="type", kw_only=True):
    """A dealer console's: take a chat message off every screen and the table's last 50."""

    id: ShortText


class DealerSignIn(Struct, tag="dealer_sign_in", tag_field="type", kw_only=True):
    """A dealer console's: ``name`` is dealing now (the presenter the table shows)."""

    name: Annotated[str, Meta(min_length=1, max_length=40)]


#: The commands the gateway answers itself, without the table's engine: the chat and the
#: presenter (livetable/server/gateway/chat.py).
ChatCommand = ChatSend | ChatMute | ChatDelete | DealerSignIn

PlayerCommand = (Hello | PlaceBet | PlaceBets | GetBets | Ping | GetBalance | RealityCheckAck
                 | ChatSend | Tip)


# --- dealer console → server on /ws/dealer ----------------------------------------------


class StartShoe(Struct, tag="start_shoe", tag_field="type", kw_only=True):
    pass


class OpenBetting(Struct, tag="open_betting", tag_field="type", kw_only=True):
    betting_ms: Integer | None = None  # its range is the engine's bad_command


class CloseBetting(Struct, tag="close_betting", tag_field="type", kw_only=True):
    pass


class CardIn(Struct, tag="card", tag_field="type", kw_only=True):
    card: Annotated[str, Meta(max_length=16)]


class Reveal(Struct, tag="reveal", tag_field="type", kw_only=True):
    pass


class Pause(Struct, tag="pause", tag_field="type", kw_only=True):
    reason: Annotated[str, Meta(max_length=200)] = ""


class ResumeTable(Struct, tag="resume", tag_field="type", kw_only=True):
    pass


class CallOffRound(Struct, tag="cancel_round", tag_field="type", kw_only=True):
    """The dealer's ``cancel_round``: the round is called off, every bet refunded (what the
    ledger does then is the engine's effect :class:`livetable.engine.table.CancelRound`)."""

    reason: Annotated[str, Meta(max_length=200)] = ""


class SetMode(Struct, tag="set_mode", tag_field="type", kw_only=True):
    auto: bool


class CorrectCards(Struct, tag="correct_cards", tag_field="type", kw_only=True):
    """Void the last ``count`` cards of the round before its reveal (a mis-scan).

    Needs a supervisor: a dealer's console sends ``approval``, the code a supervisor's
    console got for this correction (:class:`ApproveCorrection`: this table, this round,
    this count, used once, 120 s); a supervisor's own console needs none. A supervisor's
    token is not an approval. The gateway turns it into :class:`VoidCards` with both names.
    """

    count: Annotated[int, msgspec.Meta(ge=1, le=13)]
    approval: Annotated[str, Meta(max_length=2048)] | None = None


class ApproveCorrection(Struct, tag="approve_correction", tag_field="type", kw_only=True):
    """A supervisor's console asks for the approval of voiding the last ``count`` cards of
    the round in play at its table. Answered ``ack {cmd, detail: {approval, round_id,
    count, expires_at}}`` to that console only: ``approval`` is the code the dealer's
    console sends with ``correct_cards`` (docs/dealer.md)."""

    count: Annotated[int, msgspec.Meta(ge=1, le=13)]


class RoundCards(Struct, tag="round_cards", tag_field="type", kw_only=True):
    """Ask for the cards entered so far this round (a console after a reload). Answered
    ``ack {cmd, detail: {round_id, cards: [{slot, n?, card}]}}`` to that console only."""


DealerCommand = (
    Hello | StartShoe | OpenBetting | CloseBetting | CardIn | Reveal | Pause | ResumeTable
    | CallOffRound | SetMode | CorrectCards | ApproveCorrection | RoundCards | Ping
    | ChatSend | ChatMute | ChatDelete | DealerSignIn
)


def type_names(union: Any) -> tuple[str, ...]:
    """The ``type`` of each Struct of a tagged union, in its order: the names on the wire."""
    return tuple(str(kind.__struct_config__.tag) for kind in get_args(union))


#: What a dealer console sends after its ``hello``: the one list of dealer commands. The
#: engine's commands, the terminal console, the browser console, its labels and
#: docs/protocol.md are checked against it (tests/unit/test_dealer_commands.py).
DEALER_COMMANDS: tuple[str, ...] = tuple(n for n in type_names(DealerCommand) if n != "hello")
#: The commands no engine sees: the gateway answers them (the chat and the presenter).
CHAT_COMMANDS: tuple[str, ...] = type_names(ChatCommand)


class VoidCards(Struct, tag="void_cards", tag_field="type", kw_only=True):
    """An approved correction, as the gateway hands it to the table (never decoded from a
    client: the names come from a verified token and a verified approval). ``round_id``
    and ``nonce`` are the approval's (the engine takes a nonce once, in that round only);
    both None when a supervisor corrects at their own console."""

    count: int
    dealer: str
    dealer_id: str
    supervisor: str
    supervisor_id: str
    round_id: str | None = None
    nonce: str | None = None


#: What a gateway hands to a table's engine (in-process, or through Redis in scale-out).
TableCommand = (
    StartShoe | OpenBetting | CloseBetting | CardIn | Reveal | Pause | ResumeTable
    | CallOffRound | SetMode | RoundCards | VoidCards
)
