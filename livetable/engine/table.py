"""The round state machine of one table, sans-IO.

Theory of operation (the h11 way): a :class:`TableEngine` never touches a socket, a
database or a clock. Commands (``open_betting``, ``card``, ``reveal``, ``pause`` …) and clock
ticks (``tick(now)``) go in; a :class:`Step` comes out, holding

* ``events`` — the protocol v1 table events, already numbered (``epoch``, ``seq``), to be
  stored and then announced to every client of the table;
* ``effects`` — what the ledger must do for this step (open a round for bets, close it,
  settle it, refund it), carrying what the wire must not (the cards of a round before their
  reveal).

A command that is illegal in the current phase raises :class:`EngineError` and changes
nothing. The transition table :data:`TRANSITIONS` is the one place that says which command is
legal in which phase and where it leads: ``(phase, command) -> phase``. Two of its rows are
moves the engine makes by itself when a condition holds (h11's "state-triggered"
transitions): ``all_dealt`` (betting has closed and the thirteenth card is out: reveal) and
``banker_revealed`` (settle). Conditions that are not the phase (the mode, the shoe, how
many cards are out) are checked by the command itself, after the table. The whole state
is one msgspec ``Struct`` (:class:`TableState`) that the shell stores with every step, so
a crashed engine is rebuilt from the store exactly where it was (:meth:`TableEngine.recover`).

The round follows the rules sheet (DESIGN §1, "When the cards are dealt"): the burn card and
the twelve cards are dealt face down *while betting is open*; the hands are revealed once
betting has closed and all thirteen cards are out. A dealer slower than the countdown
finishes dealing after the close (phase ``dealing``). No card identity leaves the engine
before its hand's ``hand_revealed`` except in :attr:`Step.detail` (answered to the dealer
console that fed the card, or asked for it) and the ledger's effects.

Auto mode deals from the engine's own shoe on timers (the runner asks
:meth:`TableEngine.next_deadline` when to tick). Manual mode waits for a dealer: the
dealer opens betting, feeds each card as the shoe scanner reads it, and paces reveals; a
mis-scanned card is voided by :meth:`TableEngine.void_cards` (a supervisor's approval is
checked by the gateway, who passes both names).

Bets do not pass through here: the ledger takes them while the round it opened is open,
until ``closes_at`` — the engine's deadline, not the client's.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Literal

import msgspec

from livetable import protocol as p
from livetable.rules import (
    DEAL_ORDER,
    PLAYER_POSITIONS,
    ROUND_SLOTS,
    CardError,
    ImpossibleCard,
    Position,
    Shoe,
    SpotResult,
    hand_of,
    parse_card,
    settle_round,
)
from livetable.rules.cards import Card
from livetable.rules.fairness import commitment
from livetable.rules.shoe import DEFAULT_CUT_RANGE

Phase = p.Phase
Mode = Literal["auto", "manual"]

#: What the outside asks of the engine (dealer commands; the clock asks for some in auto mode).
Command = Literal[
    "start_shoe", "open_betting", "close_betting", "card", "void_cards", "reveal", "pause",
    "resume", "cancel_round", "set_mode",
]
#: What the engine does by itself when a condition holds (see the module docstring).
Move = Literal["all_dealt", "banker_revealed"]
#: The target of ``resume``: the phase the table was paused from.
BEFORE_PAUSE: Literal["before_pause"] = "before_pause"

BETWEEN_ROUNDS: tuple[Phase, ...] = ("idle", "settled", "cancelled")

#: The one transition table: ``(phase, command) -> phase``. A pair that is not here is
#: refused with ``illegal_command``, and the refused command changes nothing.
TRANSITIONS: dict[tuple[Phase, Command | Move], Phase | Literal["before_pause"]] = {
    # between rounds: a new shoe, its opening card (manual), the cut card, the mode, a round
    **{(ph, "start_shoe"): ph for ph in BETWEEN_ROUNDS},
    **{(ph, "card"): ph for ph in BETWEEN_ROUNDS},  # the opening card or the cut card
    **{(ph, "set_mode"): ph for ph in BETWEEN_ROUNDS},
    **{(ph, "open_betting"): "betting" for ph in BETWEEN_ROUNDS},
    # betting: bets are taken while the cards are dealt face down
    ("betting", "card"): "betting",
    ("betting", "void_cards"): "betting",
    ("betting", "close_betting"): "dealing",
    # dealing: betting has closed, cards are still coming out
    ("dealing", "card"): "dealing",
    ("dealing", "void_cards"): "dealing",
    ("dealing", "all_dealt"): "revealing",
    # revealing: P1 … P5, then the Banker; a correction only before the first reveal
    ("revealing", "reveal"): "revealing",
    ("revealing", "void_cards"): "dealing",
    ("revealing", "banker_revealed"): "settled",
    # a round can be paused, resumed where it was, or cancelled (every bet refunded)
    **{(ph, "pause"): "paused" for ph in ("betting", "dealing", "revealing")},
    ("paused", "resume"): BEFORE_PAUSE,
    **{(ph, "cancel_round"): "cancelled" for ph in ("betting", "dealing", "revealing",
                                                    "paused")},
}


def allowed_in(command: Command | Move) -> frozenset[Phase]:
    """The phases in which ``command`` is legal (read from :data:`TRANSITIONS`)."""
    return frozenset(ph for (ph, cmd) in TRANSITIONS if cmd == command)


#: What a dealer types (or a scanner reads) when the cut card comes out of the shoe.
CUT_CARD_TOKENS = frozenset({"CUT", "CUTCARD", "CUT_CARD"})


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
    """An auto shoe has ended: keep it for ``GET /api/shoes/{shoe_id}`` (DESIGN §7).

    ``rounds``: each round of the shoe (round id, how many cards it took out of the shoe,
    its burn included), in order.
    """

    table: str
    shoe_id: str
    commitment: str
    salt: str
    cut_at: int
    order: list[str]
    burn_card: str
    burned: int
    rounds: list[tuple[str, int]]


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


# --- state -------------------------------------------------------------------------------


class ShoeState(msgspec.Struct, kw_only=True):
    shoe_id: str
    order: list[str]
    cut_at: int
    drawn: int
    cut_out: bool
    seen: dict[str, int]
    awaiting_open_card: bool = False
    #: Auto shoes (DESIGN §7): the salt and the commitment published in shoe_started, where
    #: in ``order`` each round began, and whether the shoe was revealed. A shoe stored
    #: before commitments existed has none: it is never revealed.
    salt: str | None = None
    commitment: str | None = None
    round_starts: list[int] = msgspec.field(default_factory=list)
    revealed: bool = False


class Timing(msgspec.Struct, kw_only=True):
    """How a table paces its rounds. These defaults are the only ones: the process's
    settings (livetable/config.py) take theirs from here, in seconds."""

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
    phase: Phase = "idle"
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
    paused_from: Phase | None = None
    paused_reason: str | None = None
    betting_left_ms: int | None = None
    next_at: int | None = None  # auto mode: when the next timed action is due
    #: The table's live video, as configured (the runner sets it on every start).
    stream: p.StreamView | None = None


STATE_ENCODER = msgspec.json.Encoder()
STATE_DECODER = msgspec.json.Decoder(TableState)


def _shoe_state(shoe: Shoe, shoe_id: str, awaiting: bool = False) -> ShoeState:
    return ShoeState(
        shoe_id=shoe_id,
        order=[str(c) for c in shoe.order],
        cut_at=shoe.cut_at,
        drawn=shoe.drawn,
        cut_out=shoe.cut_out,
        seen={str(c): n for c, n in shoe.seen.items()},
        awaiting_open_card=awaiting,
    )


def _parse_shoe(state: ShoeState) -> Shoe:
    from collections import Counter

    return Shoe(
        order=[parse_card(c) for c in state.order],
        cut_at=state.cut_at,
        drawn=state.drawn,
        cut_out=state.cut_out,
        seen=Counter({parse_card(c): n for c, n in state.seen.items()}),
    )


def hand_view(position: Position, cards: list[str]) -> p.HandView:
    hand = hand_of([parse_card(c) for c in cards])
    return p.HandView(
        hand=position.value,
        cards=list(cards),
        value=hand.value,
        points=hand.points,
        label=hand.label,
        flush=hand.flush,
        pair=hand.pair,
    )


class TableEngine:
    """One table's round state machine. See the module docstring."""

    def __init__(self, state: TableState, rng: random.Random | None = None) -> None:
        self.state = state
        self.rng = rng if rng is not None else random.SystemRandom()
        self._live_shoe: tuple[str, Shoe] | None = None  # a parsed copy of state.shoe

    def _shoe(self) -> Shoe:
        """The live Shoe of ``state.shoe`` (parsed once per shoe, not once per card)."""
        assert self.state.shoe is not None
        shoe_id = self.state.shoe.shoe_id
        if self._live_shoe is None or self._live_shoe[0] != shoe_id:
            self._live_shoe = (shoe_id, _parse_shoe(self.state.shoe))
        return self._live_shoe[1]

    def _took(self, shoe: Shoe, card: Card) -> None:
        """Mirror a card taken from the live shoe into the stored state."""
        state = self.state.shoe
        assert state is not None
        state.drawn = shoe.drawn
        state.cut_out = shoe.cut_out
        key = str(card)
        state.seen[key] = state.seen.get(key, 0) + 1

    @classmethod
    def new(
        cls,
        table: str,
        name: str | None = None,
        *,
        mode: Mode = "auto",
        limits: p.Limits | None = None,
        timing: Timing | None = None,
        rng: random.Random | None = None,
        epoch: int = 1,
    ) -> TableEngine:
        state = TableState(
            table=table,
            name=name or table,
            mode=mode,
            epoch=epoch,
            limits=limits or p.Limits(),
            timing=timing or Timing(),
        )
        return cls(state, rng)

    @classmethod
    def from_bytes(cls, data: bytes, rng: random.Random | None = None) -> TableEngine:
        return cls(STATE_DECODER.decode(data), rng)

    def to_bytes(self) -> bytes:
        return STATE_ENCODER.encode(self.state)

    # --- reading ---------------------------------------------------------------------

    @property
    def phase(self) -> Phase:
        return self.state.phase

    def snapshot(self) -> p.TableSnapshot:
        s = self.state
        shoe = s.shoe
        return p.TableSnapshot(
            id=s.table,
            name=s.name,
            phase=s.phase,
            mode=s.mode,
            round_id=s.round_id,
            round_no=s.round_no,
            shoe_id=shoe.shoe_id if shoe else None,
            shoe_commitment=shoe.commitment if shoe else None,
            closes_at=s.closes_at if s.phase == "betting" else None,
            limits=s.limits,
            hands=[hand_view(pos, self._cards_of(pos)) for pos in DEAL_ORDER[: s.revealed]],
            dealt=self._dealt(),
            results=list(s.results),
            roadmap=list(s.roadmap),
            last_round=s.last_round,
            cut_card_out=bool(shoe and shoe.cut_out),
            cards_left=self._cards_left(),
            paused_reason=s.paused_reason,
            resume_phase=s.paused_from,
            shuffling=bool(shoe and shoe.awaiting_open_card),
            opens_at=s.next_at if s.phase in BETWEEN_ROUNDS else None,
            epoch=s.epoch,
            seq=s.seq,
            stream=s.stream,
        )

    def _cards_left(self) -> int:
        shoe = self.state.shoe
        return 52 * 8 - shoe.drawn if shoe else 0

    def _opens_at(self) -> int | None:
        """Between rounds: when the next round opens by itself (the snapshot's ``opens_at``)."""
        s = self.state
        return s.next_at if s.phase in BETWEEN_ROUNDS else None

    def _dealt(self) -> dict[str, int]:
        """How many cards each hand holds, face down or not (no card identity)."""
        dealt: dict[str, int] = {}
        for slot, _ in zip(ROUND_SLOTS, self.state.round_cards, strict=False):
            if slot.position is not None:
                dealt[slot.position.value] = slot.n
        return dealt

    def next_deadline(self) -> int | None:
        """When the runner must call :meth:`tick` next (epoch ms), or None."""
        s = self.state
        if s.phase == "betting":
            close = None if s.closes_at is None else s.closes_at + s.timing.close_grace_ms
            if s.mode == "auto" and s.next_at is not None:  # the next card, face down
                return s.next_at if close is None else min(close, s.next_at)
            return close
        if s.phase == "paused":
            return None
        if s.mode == "auto" or s.phase in BETWEEN_ROUNDS:  # manual: an automatic open
            return s.next_at
        return None

    def entered_cards(self) -> list[dict[str, object]]:
        """The cards of the open round in dealing order, for the dealer console only.

        Manual mode only: those are the cards the dealer scanned. The server's own shoe
        (auto mode) stays secret until each hand's reveal, from dealer consoles too.
        """
        s = self.state
        if s.mode != "manual":
            raise EngineError("wrong_mode", "the server's shoe is secret until the reveal; "
                              "entered cards exist in manual mode only")
        return [_slot_detail(i) | {"card": card} for i, card in enumerate(s.round_cards)]

    def _cards_of(self, position: Position) -> list[str]:
        cards = self.state.round_cards
        return [
            card
            for slot, card in zip(ROUND_SLOTS, cards, strict=False)
            if slot.position == position
        ]

    # --- plumbing ----------------------------------------------------------------------

    def _emit(self, step: Step, event: p.TableEvent) -> None:
        """Number ``event`` as this table's next and add it to ``step``."""
        s = self.state
        s.seq += 1
        event.table, event.epoch, event.seq = s.table, s.epoch, s.seq
        step.events.append(event)

    def _target(self, command: Command | Move) -> Phase:
        """Where ``command`` leads from the current phase, by :data:`TRANSITIONS`; an
        :class:`EngineError` (and no change) if the table has no such row."""
        s = self.state
        target = TRANSITIONS.get((s.phase, command))
        if target is None:
            raise EngineError(
                "illegal_command", f"{command} is not allowed while the table is {s.phase}")
        if target == BEFORE_PAUSE:
            assert s.paused_from is not None
            return s.paused_from
        return target

    def _after_card(self, now: int) -> None:
        """Betting closed and the thirteenth card out: the reveals begin."""
        s = self.state
        if s.phase == "dealing" and len(s.round_cards) == len(ROUND_SLOTS):
            s.phase = self._target("all_dealt")
            s.next_at = now + s.timing.reveal_interval_ms if s.mode == "auto" else None

    def _between_rounds_at(self, now: int) -> int | None:
        """When the next round opens by itself: auto mode always, manual mode if set."""
        s = self.state
        if s.mode == "auto":
            return now + s.timing.between_rounds_ms
        return now + s.timing.manual_open_ms if s.timing.manual_open_ms > 0 else None

    # --- commands ----------------------------------------------------------------------

    def start_shoe(self, now: int) -> Step:
        """A new shoe: shuffle and the opening burn (auto), or wait for its first card."""
        self._target("start_shoe")
        s = self.state
        step = Step()
        self._reveal_shoe(step)  # the shoe it replaces has ended
        s.shoe_no += 1
        shoe_id = f"{s.table}.{s.shoe_no}"
        s.round_no = 0
        s.roadmap = []
        s.last_round = False
        if s.mode == "auto":
            shoe = Shoe.shuffled(self.rng, cut_range=s.timing.cut_range)
            salt = self.rng.randbytes(32).hex()
            burn_card, burned = shoe.open()
            s.shoe = _shoe_state(shoe, shoe_id)
            s.shoe.salt = salt
            s.shoe.commitment = commitment(salt, shoe.cut_at, s.shoe.order)
            self._live_shoe = (shoe_id, shoe)
            self._emit(step, p.ShoeStarted(shoe_id=shoe_id, burn_card=str(burn_card),
                       burned=burned, commitment=s.shoe.commitment,
                       cards_left=self._cards_left(), opens_at=self._opens_at()))
        else:
            shoe = Shoe.manual()
            s.shoe = _shoe_state(shoe, shoe_id, awaiting=True)
            self._live_shoe = (shoe_id, shoe)
            s.next_at = None  # no round opens by itself before the opening card
            # players see "shuffling — new shoe" until the opening card is read
            self._emit(step, p.ShoeShuffling(shoe_id=shoe_id))
            step.detail = {"awaiting": "opening card"}
        return step

    def open_betting(self, now: int, betting_ms: int | None = None) -> Step:
        target = self._target("open_betting")
        s = self.state
        step = Step()
        if betting_ms is not None and not 1_000 <= betting_ms <= 600_000:
            raise EngineError("bad_command", "betting_ms must be between 1000 and 600000")
        if s.shoe is None or s.last_round:
            if s.mode == "manual":
                raise EngineError("no_shoe", "start a new shoe first")
            step.extend(self.start_shoe(now))
        assert s.shoe is not None
        if s.shoe.awaiting_open_card:
            raise EngineError("no_shoe", "the shoe's opening card has not been read yet")
        s.round_no += 1
        s.round_id = f"{s.shoe.shoe_id}.{s.round_no}"
        s.round_cards = []
        s.revealed = 0
        s.approvals_used = []
        s.results = []
        s.closes_at = now + (betting_ms or s.timing.betting_ms)
        s.phase = target
        # auto mode deals the burn card and the twelve cards while bets are open
        s.next_at = now + s.timing.deal_interval_ms if s.mode == "auto" else None
        if s.shoe.cut_out:
            s.last_round = True
        if s.shoe.commitment is not None:  # where this round's burn is: before it is drawn
            s.shoe.round_starts.append(s.shoe.drawn)
        self._emit(step, p.RoundOpened(round_id=s.round_id, shoe_id=s.shoe.shoe_id,
                   round_no=s.round_no, closes_at=s.closes_at))
        step.effects.append(OpenRound(table=s.table, round_id=s.round_id,
                                      shoe_id=s.shoe.shoe_id, round_no=s.round_no,
                                      closes_at=s.closes_at, limits=s.limits))
        return step

    def close_betting(self, now: int) -> Step:
        target = self._target("close_betting")
        s = self.state
        assert s.round_id is not None
        step = Step()
        s.phase = target
        s.closes_at = None
        step.effects.append(SetBetting(table=s.table, round_id=s.round_id, status="closed",
                                       closes_at=None))
        self._emit(step, p.BettingClosed(round_id=s.round_id))
        if s.mode == "auto" and s.next_at is None:  # never left without its next card
            s.next_at = now + s.timing.deal_interval_ms
        self._after_card(now)
        return step

    def card(self, token: str, now: int) -> Step:
        """A card read by the dealer's scanner (manual mode): the shoe's opening card
        between rounds, the cut card, or the round's next card (during betting or after)."""
        target = self._target("card")
        s = self.state
        if s.mode != "manual":
            raise EngineError("wrong_mode", "cards are fed only in manual mode")
        if s.shoe is None:
            raise EngineError("no_shoe", "start a new shoe first")
        if token.strip().upper() in CUT_CARD_TOKENS:
            # The live shoe too: the next card's _took copies its cut_out into the state.
            self._shoe().mark_cut_card()
            already = s.shoe.cut_out
            s.shoe.cut_out = True
            if s.phase in ("betting", "dealing"):
                s.last_round = True
            step = Step(detail={"slot": "cut", "last_round": s.last_round})
            if not already:
                self._emit(step, p.CutCardOut(shoe_id=s.shoe.shoe_id, last_round=s.last_round))
            return step
        try:
            card = parse_card(token)
        except CardError as exc:
            raise EngineError("bad_card", str(exc)) from None
        between = s.phase in BETWEEN_ROUNDS
        if between and not s.shoe.awaiting_open_card:
            raise EngineError("no_round", "no round is open: open betting, then deal")
        if not between and s.shoe.awaiting_open_card:
            raise EngineError("illegal_command", "the shoe opens between rounds")
        if not between and len(s.round_cards) == len(ROUND_SLOTS):
            raise EngineError("all_dealt", "all thirteen cards of this round are out")
        shoe = self._shoe()
        if s.shoe.awaiting_open_card:
            self._feed(shoe, card, now)
            shoe.burn_unseen(card.burn_count)
            self._took(shoe, card)
            s.shoe.awaiting_open_card = False
            s.next_at = self._between_rounds_at(now)
            step = Step(detail={"slot": "opening", "burned": card.burn_count})
            self._emit(step, p.ShoeStarted(shoe_id=s.shoe.shoe_id, burn_card=str(card),
                       burned=card.burn_count, cards_left=self._cards_left(),
                       opens_at=self._opens_at()))
            return step
        self._feed(shoe, card, now)
        self._took(shoe, card)
        step = self._place_card(str(card), now)
        s.phase = target
        self._after_card(now)
        return step

    def _feed(self, shoe: Shoe, card: Card, now: int) -> None:
        try:
            shoe.feed(card)
        except ImpossibleCard as exc:
            step = Step()
            if self.state.phase in allowed_in("pause"):
                step = self._pause(str(exc), now)
            raise EngineError("impossible_card", str(exc), step) from None

    def _place_card(self, card: str, now: int) -> Step:
        s = self.state
        assert s.round_id is not None
        index = len(s.round_cards)
        slot = ROUND_SLOTS[index]
        s.round_cards.append(card)
        step = Step(detail=_slot_detail(index))
        if slot.position is not None:
            self._emit(step, p.CardDealt(round_id=s.round_id, to=slot.position.value,
                       n=slot.n, cards_left=self._cards_left()))
        return step

    def _deal_from_shoe(self, due: int) -> Step:
        """Auto mode: the next card of the round from the engine's own shoe, face down."""
        target = self._target("card")
        s = self.state
        assert s.shoe is not None
        shoe = self._shoe()
        already = s.shoe.cut_out
        card = shoe.draw()
        self._took(shoe, card)
        step = Step()
        if shoe.cut_out:
            s.last_round = True
            if not already:  # it came out before this card
                self._emit(step, p.CutCardOut(shoe_id=s.shoe.shoe_id, last_round=True))
        placed = self._place_card(str(card), due)
        step.extend(placed)
        step.detail = placed.detail
        s.phase = target
        complete = len(s.round_cards) == len(ROUND_SLOTS)
        s.next_at = None if complete else due + s.timing.deal_interval_ms
        self._after_card(due)
        return step

    def void_cards(self, count: int, dealer: str, supervisor: str, now: int,
                   approval: tuple[str, str] | None = None) -> Step:
        """Void the last ``count`` cards of the round (a mis-scan), before any reveal.

        Manual mode only. The gateway has checked the supervisor's approval (its signature,
        table, count and life); ``approval`` is its ``(round id, nonce)``, None when the
        supervisor corrects at their own console. It must be for this round, and a nonce is
        taken once: the engine is the one place every gateway's corrections of the table
        meet. Both names are announced in ``cards_voided`` and logged. The voided cards go
        back to the shoe's count (they were never dealt as such): the dealer scans the
        right ones next.
        """
        target = self._target("void_cards")
        s = self.state
        if approval is not None:
            round_id, nonce = approval
            if round_id != s.round_id:
                raise EngineError("bad_approval", f"the approval is for round {round_id}, "
                                  f"not the round in play ({s.round_id})")
            if nonce in s.approvals_used:
                raise EngineError("bad_approval", "this approval was already used")
        if s.mode != "manual":
            raise EngineError("wrong_mode", "cards are corrected only in manual mode")
        if s.revealed:
            raise EngineError("illegal_command", "a hand of this round is already revealed")
        if not 1 <= count <= len(s.round_cards):
            raise EngineError("bad_command", f"count must be between 1 and the "
                              f"{len(s.round_cards)} cards dealt so far")
        assert s.shoe is not None and s.round_id is not None
        voided = [_slot_detail(i) | {"card": s.round_cards[i]}
                  for i in range(len(s.round_cards) - count, len(s.round_cards))]
        for entry in voided:
            key = str(entry["card"])
            s.shoe.seen[key] -= 1
            if not s.shoe.seen[key]:
                del s.shoe.seen[key]
        s.shoe.drawn -= count
        if approval is not None:
            s.approvals_used.append(approval[1])
        self._live_shoe = None  # re-read from the corrected state
        del s.round_cards[-count:]
        s.phase = target
        if target == "dealing":
            s.next_at = None
        step = Step(detail={"voided": voided})
        self._emit(step, p.CardsVoided(round_id=s.round_id, count=count,
                   dealt=self._dealt(), dealer=dealer, supervisor=supervisor,
                   cards_left=self._cards_left()))
        return step

    def reveal(self, now: int) -> Step:
        """Reveal the next hand (P1 … P5, then Banker); after the Banker, settle."""
        self._target("reveal")
        s = self.state
        assert s.round_id is not None
        position = DEAL_ORDER[s.revealed]
        view = hand_view(position, self._cards_of(position))
        s.revealed += 1
        step = Step()
        self._emit(step, p.HandRevealed(round_id=s.round_id, hand=view.hand, cards=view.cards,
                   value=view.value, points=view.points, label=view.label, flush=view.flush,
                   pair=view.pair))
        if position is Position.BANKER:
            step.extend(self._settle(now))
        elif s.mode == "auto":
            s.next_at = now + s.timing.reveal_interval_ms
        return step

    def _settle(self, now: int) -> Step:
        s = self.state
        assert s.round_id is not None and s.shoe is not None
        hands = {pos: hand_of([parse_card(c) for c in self._cards_of(pos)]) for pos in DEAL_ORDER}
        spots: dict[str, SpotResult] = {k.value: v for k, v in settle_round(hands).items()}
        results = []
        for pos in PLAYER_POSITIONS:
            r = spots[pos.value]
            hand = hands[pos]
            results.append(p.PositionResult(hand=pos.value, outcome=r.outcome, odds=r.odds,
                                            pair=hand.pair, flush=hand.flush))
        s.results = results
        s.roadmap.append(p.RoadmapEntry(round_id=s.round_id, round_no=s.round_no,
                                        results=results))
        s.phase = self._target("banker_revealed")
        step = Step()
        step.effects.append(SettleRound(
            table=s.table,
            round_id=s.round_id,
            spots={k: (v.outcome, v.odds, v.returned_multiple) for k, v in spots.items()},
            cards={pos.value: self._cards_of(pos) for pos in DEAL_ORDER},
        ))
        s.next_at = self._next_round_at(now)
        self._emit(step, p.RoundSettled(round_id=s.round_id, results=results,
                   last_round=s.last_round, opens_at=s.next_at))
        if s.last_round:
            self._reveal_shoe(step)
        return step

    def _next_round_at(self, now: int) -> int | None:
        """When the next round opens by itself (None: the dealer opens it)."""
        s = self.state
        if s.mode == "manual" and (s.shoe is None or s.shoe.awaiting_open_card
                                   or s.last_round):
            return None  # a new shoe first: the dealer starts it and reads its opening card
        return self._between_rounds_at(now)

    def _reveal_shoe(self, step: Step) -> None:
        """The shoe has ended: publish its order and salt (an auto shoe, once)."""
        s = self.state
        shoe = s.shoe
        if shoe is None or shoe.commitment is None or shoe.salt is None or shoe.revealed:
            return
        shoe.revealed = True
        ends = [*shoe.round_starts[1:], shoe.drawn]
        rounds = [(f"{shoe.shoe_id}.{n}", end - start)
                  for n, (start, end) in enumerate(zip(shoe.round_starts, ends, strict=True),
                                                   start=1)]
        opening = parse_card(shoe.order[0])
        step.effects.append(RevealShoe(
            table=s.table, shoe_id=shoe.shoe_id, commitment=shoe.commitment, salt=shoe.salt,
            cut_at=shoe.cut_at, order=list(shoe.order), burn_card=str(opening),
            burned=opening.burn_count, rounds=rounds))
        self._emit(step, p.ShoeRevealed(shoe_id=shoe.shoe_id, salt=shoe.salt,
                                        cut_at=shoe.cut_at, order=list(shoe.order)))

    def pause(self, reason: str, now: int) -> Step:
        self._target("pause")
        return self._pause(reason or "paused by the dealer", now)

    def _pause(self, reason: str, now: int) -> Step:
        s = self.state
        step = Step()
        if s.phase == "betting" and s.round_id is not None and s.closes_at is not None:
            s.betting_left_ms = max(0, s.closes_at - now)
            step.effects.append(SetBetting(table=s.table, round_id=s.round_id, status="paused",
                                           closes_at=None))
        s.paused_from = s.phase
        s.paused_reason = reason
        s.phase = "paused"
        self._emit(step, p.TablePaused(reason=reason))
        return step

    def resume(self, now: int) -> Step:
        s = self.state
        s.phase = self._target("resume")
        step = Step()
        s.paused_from = None
        s.paused_reason = None
        if s.phase == "betting":
            assert s.round_id is not None
            left = (s.betting_left_ms if s.betting_left_ms is not None
                    else s.timing.betting_ms)
            s.closes_at = now + max(left, 5_000)  # players get at least 5 s back
            s.betting_left_ms = None
            step.effects.append(SetBetting(table=s.table, round_id=s.round_id,
                                           status="betting", closes_at=s.closes_at))
        if s.mode == "auto":
            dealt = len(s.round_cards) == len(ROUND_SLOTS)
            if s.phase == "revealing":
                s.next_at = now + s.timing.reveal_interval_ms
            else:  # betting or dealing: the next card, if any is left to deal
                s.next_at = None if dealt else now + s.timing.deal_interval_ms
        self._emit(step, p.TableResumed(closes_at=s.closes_at if s.phase == "betting" else None))
        return step

    def cancel_round(self, reason: str, now: int) -> Step:
        target = self._target("cancel_round")
        s = self.state
        assert s.round_id is not None
        step = Step()
        reason = reason or "cancelled by the dealer"
        step.effects.append(CancelRound(table=s.table, round_id=s.round_id, reason=reason))
        s.phase = target
        s.closes_at = None
        s.paused_from = None
        s.paused_reason = None
        s.betting_left_ms = None
        s.next_at = self._next_round_at(now)
        self._emit(step, p.RoundCancelled(round_id=s.round_id, reason=reason,
                   opens_at=s.next_at))
        if s.last_round:
            self._reveal_shoe(step)
        return step

    def set_mode(self, mode: Mode, now: int) -> Step:
        """Switch auto/manual between rounds. The shoe goes with the mode that dealt it."""
        self._target("set_mode")
        s = self.state
        if s.mode == mode:
            return Step(detail={"mode": mode})
        step = Step(detail={"mode": mode})
        self._reveal_shoe(step)  # an auto shoe set aside has ended
        s.mode = mode
        s.shoe = None
        s.last_round = False
        s.next_at = now if mode == "auto" else None
        self._emit(step, p.ModeChanged(mode=mode, opens_at=s.next_at))
        return step

    def tick(self, now: int) -> Step:
        """The clock: deal (auto mode) and close betting at its deadline; in auto mode
        reveal and go on; in manual mode open the next round if that is set."""
        s = self.state
        step = Step()
        for _ in range(64):  # bounded: a tick far in the future catches up step by step
            if s.phase == "betting" and s.closes_at is not None:
                close = s.closes_at + s.timing.close_grace_ms
                deal = s.next_at if s.mode == "auto" else None
                if deal is not None and deal <= now and deal <= close:
                    step.extend(self._deal_from_shoe(deal))  # face down, bets still open
                    continue
                if now >= close:
                    step.extend(self.close_betting(close))
                    continue
                break
            if s.next_at is None or now < s.next_at or s.phase == "paused":
                break
            due = s.next_at
            if s.phase in BETWEEN_ROUNDS:
                if s.mode == "manual" and (s.shoe is None or s.shoe.awaiting_open_card
                                           or s.last_round):
                    s.next_at = None  # the dealer starts the next shoe
                    break
                step.extend(self.open_betting(max(due, now)))
            elif s.mode != "auto":
                break
            elif s.phase == "dealing":
                step.extend(self._deal_from_shoe(due))
            elif s.phase == "revealing":
                step.extend(self.reveal(due))
            else:
                break
        return step

    def recover(self, now: int) -> Step:
        """After a crash: a round whose cards are all recorded and whose betting had closed
        is revealed and settled; any other unfinished round is cancelled with full refunds.
        Never both, never neither.
        """
        s = self.state
        phase = s.paused_from if s.phase == "paused" else s.phase
        step = Step()
        if phase == "revealing":
            if s.phase == "paused":
                step.extend(self.resume(now))
            if s.mode == "auto":
                s.next_at = now + s.timing.reveal_interval_ms
            return step
        if phase in ("betting", "dealing"):
            step.extend(self.cancel_round("the table restarted before all cards were dealt",
                                          now))
            return step
        if s.phase in BETWEEN_ROUNDS:
            s.next_at = self._next_round_at(now)
        return step


def _slot_detail(index: int) -> dict[str, object]:
    """Where the round's ``index``-th card goes: ``{"slot": "burn"}`` or ``{"slot": "P3",
    "n": 1}`` (the dealer's view; never sent to players with a card in it)."""
    slot = ROUND_SLOTS[index]
    if slot.position is None:
        return {"slot": "burn"}
    return {"slot": slot.position.value, "n": slot.n}
