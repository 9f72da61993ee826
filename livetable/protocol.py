"""Protocol v1: every frame on the wire, as msgspec Structs.

The names and meanings here are a public contract (docs/design.md §3, docs/protocol.md): other
clients rely on them, so within v1 fields may be added, never renamed. The schema is the
validator: each endpoint decodes with one reused ``Decoder`` over a tagged union
(``tag_field="type"``), and a bad frame yields msgspec's precise message
("Expected `int`, got `float` - at `$.amount`") turned into ``error {code, message}``.

Table events are numbered per table (``epoch``, ``seq``) by the table's engine, the one
writer, and encoded once for all their receivers.
"""

from __future__ import annotations

from typing import Annotated, Any, Generic, Literal, TypeVar, get_args

import msgspec
from msgspec import Meta, Struct, field

# --- what a client may send: bounds in the schema, so a bad value is a bad_frame -----------
#: Ids and names a client sends (tables, rounds, bet ids are checked again by the store).
ShortText = Annotated[str, Meta(max_length=128)]
#: Counters kept exactly everywhere (SQLite's integers, Lua's doubles): 0 … 2^53 - 1.
Counter = Annotated[int, Meta(ge=0, le=2**53 - 1)]
#: Any other whole number a client sends. What it means is checked where it is used, with
#: the answer that names it (a bet's ``bad_amount``, the engine's ``bad_command``, a
#: ``get_bets`` limit clamped to 1…200), but no number a client sends is larger than every
#: store and every encoder on its way keep exactly: a ``get_bets`` limit of 2^70 once
#: overflowed the ledger's msgpack frame (docs/security.md, issue 25).
Integer = Annotated[int, Meta(ge=-(2**53 - 1), le=2**53 - 1)]
#: A Bet Record page cursor: the ``next`` of the page before (a bet's sequence number).
Cursor = Annotated[str, Meta(pattern=r"^[0-9]{1,15}$")]

PROTOCOL_VERSION = 1

Phase = Literal["idle", "betting", "dealing", "revealing", "settled", "paused", "cancelled"]
BetState = Literal["accepted", "settled", "refunded"]

#: ``error.code`` on ``/ws`` and ``/ws/dealer``: the connection's codes, then the dealer
#: commands' (docs/protocol.md §14 lists exactly these; tests/unit/test_protocol_codes.py).
ErrorCode = Literal[
    "hello_required", "bad_version", "unknown_table", "bad_token", "not_a_dealer",
    "not_your_table", "hello_timeout", "already_hello", "bad_frame", "frame_too_large",
    "rate_limited", "token_expired", "not_a_player", "unavailable",
    # dealer commands
    "illegal_command", "bad_command", "no_shoe", "no_round", "all_dealt", "wrong_mode",
    "bad_card", "approval_required", "bad_approval", "not_a_supervisor", "impossible_card",
    "table_halted", "table_unavailable",
]
#: ``bet_rejected.code`` and ``slip_rejected.code`` (their messages:
#: :data:`livetable.engine.bets.REJECTIONS`; docs/protocol.md §6 and §14).
RejectionCode = Literal[
    "not_a_player", "rate_limited", "bad_bet_id", "bad_spot", "bad_amount",
    "duplicate_bet_id", "unknown_round", "paused", "betting_closed", "below_min",
    "above_max", "round_limit", "insufficient_funds", "wallet_refused", "wallet_unavailable",
    "wallet_pending",
    # an operator's session (responsible gaming: docs/protocol.md §6)
    "rg_limit", "reality_check_pending", "session_ended",
    # slips only
    "bad_slip_id", "bad_slip", "duplicate_slip_id",
]


# --- values ---------------------------------------------------------------------------


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


# --- client → server on /ws -----------------------------------------------------------


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
                 | ChatSend)


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


# --- server → client: table events --------------------------------------------------------


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


class RoundCancelled(TableEvent, tag="round_cancelled", frozen=True):
    round_id: str
    reason: str
    opens_at: int | None = None  # as in round_settled


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


AnyTableEvent = (
    ShoeShuffling | ShoeStarted | RoundOpened | BettingClosed | CardDealt | CardsVoided
    | HandRevealed | RoundSettled | RoundCancelled | TablePaused | TableResumed | ShoeRevealed
    | CutCardOut | ModeChanged
)


# --- server → client: the chat and the presenter (not numbered table events) -------------

ChatRole = Literal["player", "dealer", "system"]
#: ``chat_rejected.code`` (docs/protocol.md §14).
ChatRejectionCode = Literal[
    "empty", "too_long", "not_a_player", "muted", "blocked_word", "rate_limited",
]


class ChatNotice(Struct, kw_only=True):
    """What a ``system`` line says, for a page to say in its own language: ``muted`` (a
    player was muted for ``minutes``)."""

    key: Literal["muted"]
    minutes: int | None = None


class ChatMessage(Struct, tag="chat", tag_field="type", kw_only=True, omit_defaults=True):
    """One chat message, to everyone at the table. ``id`` names it for ``chat_delete``;
    ``player_id`` is sent to dealer consoles only (for ``chat_mute``); a ``system`` line's
    ``notice`` is its ``text`` as a key (the text is English)."""

    id: str
    table: str
    sender: str = field(name="from")
    role: ChatRole
    text: str
    at: int
    player_id: str | None = None
    notice: ChatNotice | None = None


class ChatAccepted(Struct, tag="chat_accepted", tag_field="type", kw_only=True):
    client_msg_id: str
    id: str


class ChatRejected(Struct, tag="chat_rejected", tag_field="type", kw_only=True):
    client_msg_id: str
    code: ChatRejectionCode
    message: str


class ChatDeleted(Struct, tag="chat_deleted", tag_field="type", kw_only=True):
    id: str
    table: str


class Presenter(Struct, kw_only=True):
    """Who is dealing at a table, and their photo (a URL, or null)."""

    name: str
    photo: str | None = None


class DealerChanged(Struct, tag="dealer_changed", tag_field="type", kw_only=True):
    """A dealer signed in at the table's console: the table shows them from now on."""

    table: str
    name: str
    photo: str | None = None


#: A frame for a table's watchers that is not a numbered table event.
TableNote = ChatMessage | ChatDeleted | DealerChanged


# --- server → client: private ----------------------------------------------------------------


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


# --- the one encoder and the decoders ---------------------------------------------------------

ENCODER = msgspec.json.Encoder()

T = TypeVar("T")


class FrameDecoder(Generic[T]):
    """msgspec's decoder for what clients send, with the one failure msgspec leaves to
    Python turned into a bad frame like any other: JSON nested deeper than the interpreter's
    stack (2,000 brackets fit in one 4 KiB frame) raises ``RecursionError``."""

    def __init__(self, kind: Any) -> None:
        self._decoder: msgspec.json.Decoder[T] = msgspec.json.Decoder(kind)

    def decode(self, data: str | bytes) -> T:
        try:
            return self._decoder.decode(data)
        except RecursionError:
            raise msgspec.DecodeError("JSON nested too deeply") from None


PLAYER_DECODER: FrameDecoder[PlayerCommand] = FrameDecoder(PlayerCommand)
DEALER_DECODER: FrameDecoder[DealerCommand] = FrameDecoder(DealerCommand)
#: What an engine takes from its command queue (scale-out): written by gateways only.
TABLE_COMMAND_DECODER = msgspec.json.Decoder(TableCommand)


def encode(message: Struct) -> bytes:
    return ENCODER.encode(message)
