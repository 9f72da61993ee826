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
nothing: every command first checks its row of the transition table
(:data:`~livetable.engine.transitions.TRANSITIONS`, ``(phase, command) -> phase``), then its
own conditions (the mode, the shoe, how many cards are out), and only then changes the
table — the phase through :meth:`TableEngine._move`, the one place it is assigned. Each
event is built with its number (:class:`Numbering`) and frozen. The whole state is one
msgspec ``Struct`` (:class:`~livetable.engine.state.TableState`) that the shell stores with
every step, so a crashed engine is rebuilt exactly where it was
(:meth:`TableEngine.recover`); what it shows is read by :mod:`livetable.engine.views`.

The round follows the rules sheet (docs/design.md §1, "When the cards are dealt"): the burn card and
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

from livetable import protocol as p
from livetable.engine import pacing, views
from livetable.engine.announce import Announcer
from livetable.engine.effects import (
    CancelRound,
    EngineError,
    Numbering,
    OpenRound,
    SetBetting,
    SettleRound,
    Step,
)
from livetable.engine.shoe_keeper import ShoeKeeper
from livetable.engine.state import (
    STATE_DECODER,
    STATE_ENCODER,
    Mode,
    TableState,
    Timing,
)
from livetable.engine.transitions import (
    BETWEEN_ROUNDS,
    Command,
    Move,
    Phase,
    allowed_in,
    target,
)
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

#: What a dealer types (or a scanner reads) when the cut card comes out of the shoe.
CUT_CARD_TOKENS = frozenset({"CUT", "CUTCARD", "CUT_CARD"})


class TableEngine:
    """One table's round state machine. See the module docstring."""

    def __init__(self, state: TableState, rng: random.Random | None = None) -> None:
        self.state = state
        self.rng = rng if rng is not None else random.SystemRandom()
        #: The shoe: its live parsed copy, cards taken, started, cut, opened, revealed.
        self.shoes = ShoeKeeper(state, self.rng, self._number)
        #: What it tells of a round's bets: their spread, the biggest wins (announce.py).
        self.announce = Announcer(state, self._number)

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
        return views.snapshot(self.state)

    def next_deadline(self) -> int | None:
        """When the runner must call :meth:`tick` next (epoch ms), or None."""
        return views.next_deadline(self.state)

    def entered_cards(self) -> list[dict[str, object]]:
        """The cards the dealer entered this round (manual mode only)."""
        return views.entered_cards(self.state)

    # --- plumbing ----------------------------------------------------------------------

    def _number(self) -> Numbering:
        """The next event's place in this table's numbering (one number per event)."""
        s = self.state
        s.seq += 1
        return {"table": s.table, "epoch": s.epoch, "seq": s.seq}

    def _check(self, command: Command | Move) -> None:
        """An :class:`EngineError` (and no change) if :data:`TRANSITIONS
        <livetable.engine.transitions.TRANSITIONS>` has no row for ``command`` in the
        current phase. Every command checks first, and moves (:meth:`_move`) once its own
        conditions hold."""
        s = self.state
        if target(s.phase, s.paused_from, command) is None:
            raise EngineError(
                "illegal_command", f"{command} is not allowed while the table is {s.phase}")

    def _move(self, command: Command | Move) -> None:
        """The one place a table changes phase: where :data:`TRANSITIONS
        <livetable.engine.transitions.TRANSITIONS>` leads ``command`` from here."""
        s = self.state
        to = target(s.phase, s.paused_from, command)
        if to is None:
            raise EngineError(
                "illegal_command", f"{command} is not allowed while the table is {s.phase}")
        s.phase = to

    def _after_card(self, now: int) -> None:
        """Betting closed and the thirteenth card out: the reveals begin."""
        s = self.state
        if s.phase == "dealing" and len(s.round_cards) == len(ROUND_SLOTS):
            self._move("all_dealt")
            s.next_at = now + s.timing.reveal_interval_ms if s.mode == "auto" else None

    # --- commands ----------------------------------------------------------------------

    def start_shoe(self, now: int) -> Step:
        """A new shoe: shuffle and the opening burn (auto), or wait for its first card."""
        self._check("start_shoe")
        step = Step()
        self.shoes.start(step)
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
        s.approvals_used = []
        s.results = []
        s.closes_at = now + (betting_ms or s.timing.betting_ms)
        self._move("open_betting")
        # auto mode deals the burn card and the twelve cards while bets are open
        s.next_at = now + s.timing.deal_interval_ms if s.mode == "auto" else None
        if s.shoe.cut_out:
            s.last_round = True
        if s.shoe.commitment is not None:  # where this round's burn is: before it is drawn
            s.shoe.round_starts.append(s.shoe.drawn)
        step.events.append(p.RoundOpened(
            **self._number(), round_id=s.round_id, shoe_id=s.shoe.shoe_id, round_no=s.round_no,
            closes_at=s.closes_at))
        step.effects.append(OpenRound(table=s.table, round_id=s.round_id,
                                      shoe_id=s.shoe.shoe_id, round_no=s.round_no,
                                      closes_at=s.closes_at, limits=s.limits))
        return step

    def close_betting(self, now: int) -> Step:
        self._check("close_betting")
        s = self.state
        assert s.round_id is not None
        step = Step()
        self._move("close_betting")
        s.closes_at = None
        step.effects.append(SetBetting(table=s.table, round_id=s.round_id, status="closed",
                                       closes_at=None))
        step.events.append(p.BettingClosed(**self._number(), round_id=s.round_id))
        if s.mode == "auto" and s.next_at is None:  # never left without its next card
            s.next_at = now + s.timing.deal_interval_ms
        self._after_card(now)
        return step

    def card(self, token: str, now: int) -> Step:
        """A card read by the dealer's scanner (manual mode): the shoe's opening card
        between rounds, the cut card, or the round's next card (during betting or after)."""
        self._check("card")
        s = self.state
        if s.mode != "manual":
            raise EngineError("wrong_mode", "cards are fed only in manual mode")
        if s.shoe is None:
            raise EngineError("no_shoe", "start a new shoe first")
        if token.strip().upper() in CUT_CARD_TOKENS:
            return self.shoes.cut()
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
        shoe = self.shoes.live()
        self._feed(shoe, card, now)
        if s.shoe.awaiting_open_card:
            return self.shoes.opened(shoe, card, now)
        self.shoes.took(shoe, card)
        step = self._place_card(str(card), now)
        self._move("card")
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
        step = Step(detail=views.slot_detail(index))
        if slot.position is not None:
            step.events.append(p.CardDealt(
                **self._number(), round_id=s.round_id, to=slot.position.value, n=slot.n,
                cards_left=views.cards_left(s)))
        return step

    def deal(self, due: int) -> Step:
        """Auto mode: the next card of the round from the engine's own shoe, face down."""
        self._check("card")
        s = self.state
        assert s.shoe is not None
        shoe = self.shoes.live()
        already = s.shoe.cut_out
        card = shoe.draw()
        self.shoes.took(shoe, card)
        step = Step()
        if shoe.cut_out:
            s.last_round = True
            if not already:  # it came out before this card
                step.events.append(p.CutCardOut(
                    **self._number(), shoe_id=s.shoe.shoe_id, last_round=True))
        placed = self._place_card(str(card), due)
        step.extend(placed)
        step.detail = placed.detail
        self._move("card")
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
        self._check("void_cards")
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
        voided = [views.entered_card(s, i)
                  for i in range(len(s.round_cards) - count, len(s.round_cards))]
        self.shoes.put_back([str(entry["card"]) for entry in voided])
        if approval is not None:
            s.approvals_used.append(approval[1])
        del s.round_cards[-count:]
        self._move("void_cards")
        if s.phase == "dealing":
            s.next_at = None
        step = Step(detail={"voided": voided})
        step.events.append(p.CardsVoided(
            **self._number(), round_id=s.round_id, count=count, dealt=views.dealt(s), dealer=dealer,
            supervisor=supervisor, cards_left=views.cards_left(s)))
        return step

    def reveal(self, now: int) -> Step:
        """Reveal the next hand (P1 … P5, then Banker); after the Banker, settle."""
        self._check("reveal")
        s = self.state
        assert s.round_id is not None
        position = DEAL_ORDER[s.revealed]
        view = views.hand_view(position, views.cards_of(s, position))
        s.revealed += 1
        step = Step()
        step.events.append(p.HandRevealed(
            **self._number(), round_id=s.round_id, hand=view.hand, cards=view.cards,
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
        hands = {pos: hand_of([parse_card(c) for c in views.cards_of(s, pos)])
                 for pos in DEAL_ORDER}
        spots: dict[str, SpotResult] = {k.value: v for k, v in settle_round(hands).items()}
        results = []
        for pos in PLAYER_POSITIONS:
            r = spots[pos.value]
            hand = hands[pos]
            results.append(p.PositionResult(hand=pos.value, outcome=r.outcome, odds=r.odds,
                                            pair=hand.pair, flush=hand.flush))
        s.results = results
        banker = hands[Position.BANKER]
        s.roadmap.append(p.RoadmapEntry(round_id=s.round_id, round_no=s.round_no,
                                        results=results, banker=p.BankerResult(
                                            value=banker.value, points=banker.points,
                                            pair=banker.pair, flush=banker.flush)))
        self._move("banker_revealed")
        step = Step()
        step.effects.append(SettleRound(
            table=s.table,
            round_id=s.round_id,
            spots={k: (v.outcome, v.odds, v.returned_multiple) for k, v in spots.items()},
            cards={pos.value: views.cards_of(s, pos) for pos in DEAL_ORDER},
        ))
        s.next_at = views.next_round_at(s, now)
        step.events.append(p.RoundSettled(
            **self._number(), round_id=s.round_id, results=results, last_round=s.last_round,
            opens_at=s.next_at, chain_head=self.shoes.chain(
                "settled", now, {k: v.outcome for k, v in spots.items()})))
        if s.last_round:
            self.shoes.reveal(step)
        return step

    def pause(self, reason: str, now: int) -> Step:
        self._check("pause")
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
        self._move("pause")
        step.events.append(p.TablePaused(**self._number(), reason=reason))
        return step

    def resume(self, now: int) -> Step:
        s = self.state
        self._move("resume")
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
        step.events.append(p.TableResumed(
            **self._number(), closes_at=s.closes_at if s.phase == "betting" else None))
        return step

    def cancel_round(self, reason: str, now: int) -> Step:
        self._check("cancel_round")
        s = self.state
        assert s.round_id is not None
        step = Step()
        reason = reason or "cancelled by the dealer"
        step.effects.append(CancelRound(table=s.table, round_id=s.round_id, reason=reason))
        self._move("cancel_round")
        s.closes_at = None
        s.paused_from = None
        s.paused_reason = None
        s.betting_left_ms = None
        s.next_at = views.next_round_at(s, now)
        step.events.append(p.RoundCancelled(
            **self._number(), round_id=s.round_id, reason=reason, opens_at=s.next_at,
            chain_head=self.shoes.chain("cancelled", now, {})))
        if s.last_round:
            self.shoes.reveal(step)
        return step

    def set_mode(self, mode: Mode, now: int) -> Step:
        """Switch auto/manual between rounds. The shoe goes with the mode that dealt it."""
        self._check("set_mode")
        s = self.state
        if s.mode == mode:
            return Step(detail={"mode": mode})
        step = Step(detail={"mode": mode})
        self.shoes.reveal(step)  # an auto shoe set aside has ended
        s.mode = mode
        s.shoe = None
        s.last_round = False
        s.next_at = now if mode == "auto" else None
        step.events.append(p.ModeChanged(**self._number(), mode=mode, opens_at=s.next_at))
        return step

    def tick(self, now: int) -> Step:
        """What the clock does to the table by ``now`` (:func:`~.pacing.tick`)."""
        return pacing.tick(self, now)

    def recover(self, now: int) -> Step:
        """After a crash: finish or cancel the round (:func:`~.pacing.recover`)."""
        return pacing.recover(self, now)
