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
nothing. The phase table :data:`ALLOWED` is the one place that says which command is legal
when. The whole state is one msgspec ``Struct`` (:class:`TableState`) that the shell stores
with every step, so a crashed engine is rebuilt from the store exactly where it was
(:meth:`TableEngine.recover`).

Auto mode deals from the engine's own shoe on timers (the runner asks
:meth:`TableEngine.next_deadline` when to tick). Manual mode waits for a dealer: the
dealer opens betting, feeds each card as the shoe scanner reads it, and paces reveals.
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

#: Which command is legal in which phase. "between" = idle, settled or cancelled.
ALLOWED: dict[str, frozenset[str]] = {
    "start_shoe": frozenset({"idle", "settled", "cancelled"}),
    "open_betting": frozenset({"idle", "settled", "cancelled"}),
    "close_betting": frozenset({"betting"}),
    "card": frozenset({"dealing", "idle", "settled", "cancelled", "betting"}),
    "reveal": frozenset({"revealing"}),
    "pause": frozenset({"betting", "dealing", "revealing"}),
    "resume": frozenset({"paused"}),
    "cancel_round": frozenset({"betting", "dealing", "revealing", "paused"}),
    "set_mode": frozenset({"idle", "settled", "cancelled"}),
}

#: What a dealer types (or a scanner reads) when the cut card comes out of the shoe.
CUT_CARD_TOKENS = frozenset({"CUT", "CUTCARD", "CUT_CARD"})


class EngineError(Exception):
    """A command that is illegal now. ``code`` is stable (for clients), ``message`` human.

    ``step`` is set when the command was refused but the table still moved (an impossible
    card pauses the round): the shell stores and announces it, then reports the error.
    """

    def __init__(self, code: str, message: str, step: Step | None = None) -> None:
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
    betting_ms: int = 15_000
    deal_interval_ms: int = 150
    reveal_interval_ms: int = 1_500
    between_rounds_ms: int = 4_000
    #: Betting closes this long after ``closes_at``: bets that *arrived* before the deadline
    #: (the store judges by arrival) but wait in a busy server's queues still land.
    close_grace_ms: int = 0
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
        dealt: dict[str, int] = {}
        for slot, _ in zip(ROUND_SLOTS, s.round_cards, strict=False):
            if slot.position is not None:
                dealt[slot.position.value] = slot.n
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
            dealt=dealt,
            results=list(s.results),
            roadmap=list(s.roadmap),
            last_round=s.last_round,
            cut_card_out=bool(shoe and shoe.cut_out),
            cards_left=(52 * 8 - shoe.drawn) if shoe else 0,
            paused_reason=s.paused_reason,
            resume_phase=s.paused_from,
            epoch=s.epoch,
            seq=s.seq,
            stream=s.stream,
        )

    def next_deadline(self) -> int | None:
        """When the runner must call :meth:`tick` next (epoch ms), or None."""
        s = self.state
        if s.phase == "betting":
            return None if s.closes_at is None else s.closes_at + s.timing.close_grace_ms
        if s.mode == "auto" and s.phase != "paused":
            return s.next_at
        return None

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

    def _check(self, command: str) -> None:
        phase = self.state.phase
        if phase not in ALLOWED[command]:
            raise EngineError(
                "illegal_command", f"{command} is not allowed while the table is {phase}"
            )

    # --- commands ----------------------------------------------------------------------

    def start_shoe(self, now: int) -> Step:
        """A new shoe: shuffle and the opening burn (auto), or wait for its first card."""
        self._check("start_shoe")
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
                       burned=burned, commitment=s.shoe.commitment))
        else:
            shoe = Shoe.manual()
            s.shoe = _shoe_state(shoe, shoe_id, awaiting=True)
            self._live_shoe = (shoe_id, shoe)
            step.detail = {"awaiting": "opening card"}
        return step

    def open_betting(self, now: int, betting_ms: int | None = None) -> Step:
        self._check("open_betting")
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
        s.results = []
        s.closes_at = now + (betting_ms or s.timing.betting_ms)
        s.phase = "betting"
        s.next_at = None
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
        self._check("close_betting")
        s = self.state
        assert s.round_id is not None
        step = Step()
        s.phase = "dealing"
        s.closes_at = None
        step.effects.append(SetBetting(table=s.table, round_id=s.round_id, status="closed",
                                       closes_at=None))
        self._emit(step, p.BettingClosed(round_id=s.round_id))
        s.next_at = now + s.timing.deal_interval_ms if s.mode == "auto" else None
        return step

    def card(self, token: str, now: int) -> Step:
        """A card read by the dealer's scanner (manual mode)."""
        self._check("card")
        s = self.state
        if s.mode != "manual":
            raise EngineError("wrong_mode", "cards are fed only in manual mode")
        if s.shoe is None:
            raise EngineError("no_shoe", "start a new shoe first")
        if token.strip().upper() in CUT_CARD_TOKENS:
            # The live shoe too: the next card's _took copies its cut_out into the state.
            self._shoe().mark_cut_card()
            s.shoe.cut_out = True
            if s.phase in ("betting", "dealing"):
                s.last_round = True
            return Step(detail={"slot": "cut", "last_round": s.last_round})
        try:
            card = parse_card(token)
        except CardError as exc:
            raise EngineError("bad_card", str(exc)) from None
        shoe = self._shoe()
        if s.shoe.awaiting_open_card:
            if s.phase not in ("idle", "settled", "cancelled"):
                raise EngineError("illegal_command", "the shoe opens between rounds")
            self._feed(shoe, card)
            shoe.burn_unseen(card.burn_count)
            self._took(shoe, card)
            s.shoe.awaiting_open_card = False
            step = Step(detail={"slot": "opening", "burned": card.burn_count})
            self._emit(step, p.ShoeStarted(shoe_id=s.shoe.shoe_id, burn_card=str(card),
                       burned=card.burn_count))
            return step
        if s.phase != "dealing":
            raise EngineError("illegal_command", f"card is not allowed while the table is "
                              f"{s.phase}")
        self._feed(shoe, card)
        self._took(shoe, card)
        return self._place_card(str(card), now)

    def _feed(self, shoe: Shoe, card: Card) -> None:
        try:
            shoe.feed(card)
        except ImpossibleCard as exc:
            step = Step()
            if self.state.phase in ALLOWED["pause"]:
                step = self._pause(str(exc))
            raise EngineError("impossible_card", str(exc), step) from None

    def _place_card(self, card: str, now: int) -> Step:
        s = self.state
        assert s.round_id is not None
        slot = ROUND_SLOTS[len(s.round_cards)]
        s.round_cards.append(card)
        step = Step()
        if slot.position is None:
            step.detail = {"slot": "burn"}
        else:
            step.detail = {"slot": slot.position.value, "n": slot.n}
            self._emit(step, p.CardDealt(round_id=s.round_id, to=slot.position.value,
                       n=slot.n))
        if len(s.round_cards) == len(ROUND_SLOTS):
            s.phase = "revealing"
            s.next_at = now + s.timing.reveal_interval_ms if s.mode == "auto" else None
        return step

    def reveal(self, now: int) -> Step:
        """Reveal the next hand (P1 … P5, then Banker); after the Banker, settle."""
        self._check("reveal")
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
        s.phase = "settled"
        step = Step()
        step.effects.append(SettleRound(
            table=s.table,
            round_id=s.round_id,
            spots={k: (v.outcome, v.odds, v.returned_multiple) for k, v in spots.items()},
            cards={pos.value: self._cards_of(pos) for pos in DEAL_ORDER},
        ))
        self._emit(step, p.RoundSettled(round_id=s.round_id, results=results,
                   last_round=s.last_round))
        if s.last_round:
            self._reveal_shoe(step)
        s.next_at = now + s.timing.between_rounds_ms if s.mode == "auto" else None
        return step

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
        self._check("pause")
        return self._pause(reason or "paused by the dealer", now)

    def _pause(self, reason: str, now: int | None = None) -> Step:
        s = self.state
        step = Step()
        if s.phase == "betting" and s.round_id is not None and s.closes_at is not None:
            s.betting_left_ms = max(0, s.closes_at - now) if now is not None else None
            step.effects.append(SetBetting(table=s.table, round_id=s.round_id, status="paused",
                                           closes_at=None))
        s.paused_from = s.phase
        s.paused_reason = reason
        s.phase = "paused"
        self._emit(step, p.TablePaused(reason=reason))
        return step

    def resume(self, now: int) -> Step:
        self._check("resume")
        s = self.state
        assert s.paused_from is not None
        step = Step()
        s.phase = s.paused_from
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
        elif s.mode == "auto":
            interval = (s.timing.deal_interval_ms if s.phase == "dealing"
                        else s.timing.reveal_interval_ms)
            s.next_at = now + interval
        self._emit(step, p.TableResumed(closes_at=s.closes_at if s.phase == "betting" else None))
        return step

    def cancel_round(self, reason: str, now: int) -> Step:
        self._check("cancel_round")
        s = self.state
        assert s.round_id is not None
        step = Step()
        reason = reason or "cancelled by the dealer"
        step.effects.append(CancelRound(table=s.table, round_id=s.round_id, reason=reason))
        self._emit(step, p.RoundCancelled(round_id=s.round_id, reason=reason))
        if s.last_round:
            self._reveal_shoe(step)
        s.phase = "cancelled"
        s.closes_at = None
        s.paused_from = None
        s.paused_reason = None
        s.betting_left_ms = None
        s.next_at = now + s.timing.between_rounds_ms if s.mode == "auto" else None
        return step

    def set_mode(self, mode: Mode, now: int) -> Step:
        """Switch auto/manual between rounds. The shoe goes with the mode that dealt it."""
        self._check("set_mode")
        s = self.state
        if s.mode == mode:
            return Step(detail={"mode": mode})
        step = Step(detail={"mode": mode})
        self._reveal_shoe(step)  # an auto shoe set aside has ended
        s.mode = mode
        s.shoe = None
        s.last_round = False
        s.next_at = now if mode == "auto" else None
        return step

    def tick(self, now: int) -> Step:
        """The clock: close betting at its deadline; in auto mode deal, reveal, go on."""
        s = self.state
        step = Step()
        for _ in range(64):  # bounded: a tick far in the future catches up step by step
            if (s.phase == "betting" and s.closes_at is not None
                    and now >= s.closes_at + s.timing.close_grace_ms):
                step.extend(self.close_betting(s.closes_at + s.timing.close_grace_ms))
                continue
            if s.mode != "auto" or s.next_at is None or now < s.next_at:
                break
            due = s.next_at
            if s.phase == "dealing":
                assert s.shoe is not None
                shoe = self._shoe()
                card = shoe.draw()
                self._took(shoe, card)
                if shoe.cut_out:
                    s.last_round = True
                step.extend(self._place_card(str(card), due))
                if s.phase == "dealing":
                    s.next_at = due + s.timing.deal_interval_ms
            elif s.phase == "revealing":
                step.extend(self.reveal(due))
            elif s.phase in ("idle", "settled", "cancelled"):
                step.extend(self.open_betting(max(due, now)))
            else:
                break
        return step

    def recover(self, now: int) -> Step:
        """After a crash: a round whose cards are all recorded is revealed and settled;
        any other unfinished round is cancelled with full refunds. Never both, never neither.
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
        if s.mode == "auto" and s.phase in ("idle", "settled", "cancelled"):
            s.next_at = now + s.timing.between_rounds_ms
        return step
