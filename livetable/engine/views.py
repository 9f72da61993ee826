"""What a table's state shows: the snapshot, a revealed hand, where each card went, when
the table next needs the clock.

Read-only functions of a :class:`~livetable.engine.state.TableState`, apart from the engine
that changes it: the snapshot and the events show the same counts (cards left, cards per
hand) because both take them from here. No card identity leaves through a view before its
hand's reveal, but :func:`entered_card`'s, which only a dealer console is answered.
"""

from __future__ import annotations

from livetable import protocol as p
from livetable.engine.effects import EngineError
from livetable.engine.state import TableState
from livetable.engine.transitions import BETWEEN_ROUNDS
from livetable.rules import (
    DEAL_ORDER,
    PAIR_ODDS,
    PLAYER_ODDS,
    ROUND_SLOTS,
    BetSpot,
    Position,
    hand_of,
    parse_card,
)

#: The rules' multiples and odds, in every snapshot: the pages take them from here.
PAYOUTS = p.Payouts(player_deducted=BetSpot.P1.deducted_multiple,
                    pair_deducted=BetSpot.P1_PAIR.deducted_multiple,
                    player_odds=list(PLAYER_ODDS), pair_odds=PAIR_ODDS)


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


def snapshot(s: TableState) -> p.TableSnapshot:
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
        hands=[hand_view(pos, cards_of(s, pos)) for pos in DEAL_ORDER[: s.revealed]],
        dealt=dealt(s),
        results=list(s.results),
        roadmap=list(s.roadmap),
        last_round=s.last_round,
        cut_card_out=bool(shoe and shoe.cut_out),
        cards_left=cards_left(s),
        paused_reason=s.paused_reason,
        resume_phase=s.paused_from,
        shuffling=bool(shoe and shoe.awaiting_open_card),
        opens_at=opens_at(s),
        epoch=s.epoch,
        seq=s.seq,
        stream=s.stream,
        payouts=PAYOUTS,
    )


def cards_left(s: TableState) -> int:
    return 52 * 8 - s.shoe.drawn if s.shoe else 0


def opens_at(s: TableState) -> int | None:
    """Between rounds: when the next round opens by itself (the snapshot's ``opens_at``)."""
    return s.next_at if s.phase in BETWEEN_ROUNDS else None


def dealt(s: TableState) -> dict[str, int]:
    """How many cards each hand holds, face down or not (no card identity)."""
    held: dict[str, int] = {}
    for slot, _ in zip(ROUND_SLOTS, s.round_cards, strict=False):
        if slot.position is not None:
            held[slot.position.value] = slot.n
    return held


def cards_of(s: TableState, position: Position) -> list[str]:
    return [card for slot, card in zip(ROUND_SLOTS, s.round_cards, strict=False)
            if slot.position == position]


def slot_detail(index: int) -> dict[str, object]:
    """Where the round's ``index``-th card goes: ``{"slot": "burn"}`` or ``{"slot": "P3",
    "n": 1}`` (the dealer's view; never sent to players with a card in it)."""
    slot = ROUND_SLOTS[index]
    if slot.position is None:
        return {"slot": "burn"}
    return {"slot": slot.position.value, "n": slot.n}


def entered_card(s: TableState, index: int) -> dict[str, object]:
    """The round's ``index``-th card and where it went: for the dealer console only."""
    return slot_detail(index) | {"card": s.round_cards[index]}


def entered_cards(s: TableState) -> list[dict[str, object]]:
    """The cards of the open round in dealing order, for the dealer console only.

    Manual mode only: those are the cards the dealer scanned. The server's own shoe
    (auto mode) stays secret until each hand's reveal, from dealer consoles too.
    """
    if s.mode != "manual":
        raise EngineError("wrong_mode", "the server's shoe is secret until the reveal; "
                          "entered cards exist in manual mode only")
    return [entered_card(s, i) for i in range(len(s.round_cards))]


# --- when ---------------------------------------------------------------------------------


def next_deadline(s: TableState) -> int | None:
    """When the clock must tick the table next (epoch ms), or None."""
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


def between_rounds_at(s: TableState, now: int) -> int | None:
    """When the next round opens by itself: auto mode always, manual mode if set."""
    if s.mode == "auto":
        return now + s.timing.between_rounds_ms
    return now + s.timing.manual_open_ms if s.timing.manual_open_ms > 0 else None


def next_round_at(s: TableState, now: int) -> int | None:
    """When the next round opens by itself after this one (None: the dealer opens it)."""
    if s.mode == "manual" and (s.shoe is None or s.shoe.awaiting_open_card or s.last_round):
        return None  # a new shoe first: the dealer starts it and reads its opening card
    return between_rounds_at(s, now)
