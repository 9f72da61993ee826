"""The table engine, step by step, in auto and manual mode.

Every command goes through :func:`act`, which returns the step and the *change* of the whole
persisted state (``to_bytes()`` decoded), and checks the event numbering (``seq`` +1 per
event, no gap, the table's epoch). Tests then assert the change exactly: a field that is not
named did not move. Expectations are computed from the rules (cards → :func:`hand_of` →
:func:`settle_round`), never from the engine's own helpers.

A rejected command must change nothing: not the stored bytes, and not what the engine does
next (an engine that saw the rejected command and one rebuilt from the bytes before it finish
the round identically).
"""

from __future__ import annotations

import ast
import json
import random
import re
import typing
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

from livetable import protocol as p
from livetable.engine import TRANSITIONS, Command, EngineError, Step, TableEngine, Timing
from livetable.engine.state import Mode
from livetable.engine.transitions import allowed_in
from livetable.rules import (
    DEAL_ORDER,
    PLAYER_POSITIONS,
    ROUND_SLOTS,
    BetSpot,
    Position,
    Shoe,
    hand_of,
    parse_cards,
    settle_round,
)
from livetable.rules.fairness import chain_link, commitment

T0 = 1_700_000_000_000
SEED = 7
#: The engine on its own: betting closes at closes_at (the grace is for a busy server's
#: queues; tests of it set it).
TIMING = Timing(close_grace_ms=0)
BET_MS = TIMING.betting_ms
DEAL_MS = TIMING.deal_interval_ms
REVEAL_MS = TIMING.reveal_interval_ms
BETWEEN_MS = TIMING.between_rounds_ms

#: A manual round: burn, then P1 … P5, Banker, twice.
MANUAL_CARDS = ["2C", "9H", "KS", "4H", "5D", "2H", "KH", "4C", "3D", "QC", "4S", "2C", "3H"]
#: The opening card of a manual shoe (burns 5 unseen cards).
OPENING = "5C"

PHASES = ("idle", "betting", "dealing", "revealing", "settled", "paused", "cancelled")
CARD_TOKEN = re.compile(r"(?<![0-9A-Za-z])(?:10|[2-9AJQK])[SHDC](?![0-9A-Za-z])")


# --- helpers ------------------------------------------------------------------------------


def state(e: TableEngine) -> dict[str, Any]:
    result: dict[str, Any] = json.loads(e.to_bytes())
    return result


def changes(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    assert before.keys() == after.keys()
    return {k: v for k, v in after.items() if before[k] != v}


def frames(step: Step) -> list[dict[str, Any]]:
    return [json.loads(p.encode(ev)) for ev in step.events]


def effects(step: Step) -> list[dict[str, Any]]:
    return [json.loads(msgspec.json.encode(ef)) for ef in step.effects]


def act(e: TableEngine, command: str, *args: Any, **kwargs: Any) -> tuple[Step, dict[str, Any]]:
    """Run one command (or tick/recover); check the numbering; return the step and the change."""
    before = state(e)
    step: Step = getattr(e, command)(*args, **kwargs)
    after = state(e)
    numbered = frames(step)
    first = before["seq"] + 1
    assert [f["seq"] for f in numbered] == list(range(first, first + len(numbered)))
    assert all(f["epoch"] == before["epoch"] and f["table"] == before["table"] for f in numbered)
    assert after["seq"] == before["seq"] + len(numbered)
    return step, changes(before, after)


def refused(e: TableEngine, command: str, *args: Any, **kwargs: Any) -> EngineError:
    """Run a command that must be refused; check it changed nothing; return the error."""
    before = e.to_bytes()
    with pytest.raises(EngineError) as info:
        getattr(e, command)(*args, **kwargs)
    assert e.to_bytes() == before
    assert info.value.step is None
    return info.value


def shoe_of(ref: Shoe, shoe_id: str, awaiting: bool = False, *, salt: str | None = None,
            round_starts: tuple[int, ...] = (), chain_head: str | None = None,
            round_ends: tuple[int, ...] = ()) -> dict[str, Any]:
    """The persisted form of a reference shoe (an auto shoe has a ``salt``: docs/design.md §7;
    its game log starts from its commitment: docs/security.md)."""
    order = [str(c) for c in ref.order]
    committed = None if salt is None else commitment(salt, ref.cut_at, order)
    return {
        "shoe_id": shoe_id,
        "order": [str(c) for c in ref.order],
        "cut_at": ref.cut_at,
        "drawn": ref.drawn,
        "cut_out": ref.cut_out,
        "seen": {str(c): n for c, n in ref.seen.items()},
        "awaiting_open_card": awaiting,
        "salt": salt,
        "commitment": committed,
        "round_starts": list(round_starts),
        "revealed": False,
        "chain_head": chain_head or committed,
        "round_ends": list(round_ends),
        "ended_by": None,
    }


def hands_of(round_cards: list[str]) -> dict[Position, list[str]]:
    """The six hands of a dealt round, by the dealing order (index 0 is the burn)."""
    return {pos: [round_cards[1 + i], round_cards[7 + i]] for i, pos in enumerate(DEAL_ORDER)}


def revealed_frame(round_id: str, pos: Position, cards: list[str]) -> dict[str, Any]:
    """The hand_revealed frame expected for ``cards``, from the rules (without numbering)."""
    hand = hand_of(parse_cards(" ".join(cards)))
    return {"type": "hand_revealed", "round_id": round_id, "hand": pos.value, "cards": cards,
            "value": hand.value, "points": hand.points, "label": hand.label,
            "flush": hand.flush, "pair": hand.pair}


def expected_results(round_cards: list[str]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """(round_settled results, SettleRound spots) for a dealt round, from the rules."""
    hands = {pos: hand_of(parse_cards(" ".join(cs))) for pos, cs in hands_of(round_cards).items()}
    spots = settle_round(hands)
    results = [{"hand": pos.value, "outcome": spots[BetSpot(pos.value)].outcome,
                "odds": spots[BetSpot(pos.value)].odds, "pair": hands[pos].pair,
                "flush": hands[pos].flush} for pos in PLAYER_POSITIONS]
    by_spot = {k.value: [v.outcome, v.odds, v.returned_multiple] for k, v in spots.items()}
    return results, by_spot


def strip(frame: dict[str, Any]) -> dict[str, Any]:
    """A frame without its numbering (checked by :func:`act`)."""
    return {k: v for k, v in frame.items() if k not in ("table", "epoch", "seq")}


def auto_engine(timing: Timing = TIMING, seed: int = SEED) -> TableEngine:
    return TableEngine.new("t1", "Table 1", timing=timing, rng=random.Random(seed))


def manual_engine() -> TableEngine:
    return TableEngine.new("t1", "Table 1", mode="manual", timing=TIMING,
                           rng=random.Random(SEED))


def tick_due(e: TableEngine) -> Step:
    due = e.next_deadline()
    assert due is not None
    return e.tick(due)


def opened_manual(now: int = T0) -> TableEngine:
    """A manual engine whose shoe is open (opening card read), between rounds."""
    e = manual_engine()
    e.start_shoe(now)
    e.card(OPENING, now)
    return e


def engine_in(phase: str, mode: Mode, paused_from: str = "betting") -> TableEngine:
    """An engine of ``mode`` in ``phase`` (for "paused": paused from ``paused_from``)."""
    if phase == "idle":
        return auto_engine() if mode == "auto" else manual_engine()
    e = auto_engine() if mode == "auto" else opened_manual()
    target = paused_from if phase == "paused" else phase
    # "dealing" in auto mode: a countdown shorter than the deal (six cards out at its end)
    e.open_betting(T0, betting_ms=1_000 if target in ("dealing", "revealing", "settled")
                   and mode == "auto" else None)
    if target == "cancelled":
        e.cancel_round("", T0 + 1)
        return e
    if mode == "auto":
        e.tick(T0 + 3 * DEAL_MS)  # three cards out, face down, while bets are open
        if target != "betting":
            e.tick(T0 + 1_000)  # the countdown ends with six cards out: still dealing
        if target in ("revealing", "settled"):
            while e.phase == "dealing":
                tick_due(e)
            tick_due(e)  # P1 revealed
        if target == "settled":
            while e.phase == "revealing":
                tick_due(e)
    else:
        cards = iter(MANUAL_CARDS)
        for _ in range(3):  # three cards scanned while bets are open
            e.card(next(cards), T0 + 20)
        if target in ("revealing", "settled"):
            for card in cards:
                e.card(card, T0 + 30)
        if target != "betting":
            e.close_betting(T0 + 40)
        if target in ("revealing", "settled"):
            e.reveal(T0 + 40)
        if target == "settled":
            while e.phase == "revealing":
                e.reveal(T0 + 50)
    assert e.phase == target
    if phase == "paused":
        e.pause("test", T0 + 100)
    return e


def finish_round(e: TableEngine, now: int, feed: list[str]) -> Iterator[Step]:
    """Drive ``e`` to the end of its round the natural way; yield every step."""
    cards = iter(feed)
    for _ in range(200):
        phase = e.phase
        if phase in ("idle", "settled", "cancelled"):
            return
        now += 1
        if phase == "paused":
            yield e.resume(now)
        elif e.state.mode == "auto":
            due = e.next_deadline()
            assert due is not None
            now = max(now, due)
            yield e.tick(now)
        elif phase == "betting":
            yield e.close_betting(now)
        elif phase == "dealing":
            yield e.card(next(cards), now)
        else:
            yield e.reveal(now)
    raise AssertionError("the round did not end")


def same_future(e: TableEngine, before: bytes) -> None:
    """``e`` (after a refused command) and a twin rebuilt from ``before`` go on identically."""
    twin = TableEngine.from_bytes(before, rng=random.Random(99))
    e.rng = random.Random(99)
    feed = MANUAL_CARDS[len(e.state.round_cards):]
    for a, b in zip(finish_round(e, T0 + 1000, feed), finish_round(twin, T0 + 1000, feed),
                    strict=True):
        assert frames(a) == frames(b)
        assert effects(a) == effects(b)
    e.tick(T0 + 10**7)
    twin.tick(T0 + 10**7)
    assert e.to_bytes() == twin.to_bytes()


# --- auto mode, step by step ------------------------------------------------------------------


def test_auto_round_step_by_step() -> None:
    e = auto_engine()
    rng = random.Random(SEED)
    ref = Shoe.shuffled(rng, cut_range=TIMING.cut_range)
    salt = rng.randbytes(32).hex()  # the shoe's salt comes next from the engine's RNG
    burn_card, burned = ref.open()
    starts = (ref.drawn,)
    assert e.next_deadline() is None  # a new auto table waits for its first open_betting

    # open_betting: the first shoe starts (shoe_started before round_opened), bets open,
    # and the first card is due one deal interval later.
    step, diff = act(e, "open_betting", T0)
    closes = T0 + BET_MS
    shoe = shoe_of(ref, "t1.1", salt=salt, round_starts=starts)
    assert diff == {"seq": 2, "phase": "betting", "shoe_no": 1, "shoe": shoe,
                    "round_no": 1, "round_id": "t1.1.1", "closes_at": closes,
                    "next_at": T0 + DEAL_MS}
    assert [strip(f) for f in frames(step)] == [
        {"type": "shoe_started", "shoe_id": "t1.1", "burn_card": str(burn_card),
         "burned": burned, "commitment": shoe["commitment"], "cards_left": 416 - burned - 1,
         "opens_at": None},
        {"type": "round_opened", "round_id": "t1.1.1", "shoe_id": "t1.1", "round_no": 1,
         "closes_at": closes},
    ]
    assert effects(step) == [{"type": "open_round", "table": "t1", "round_id": "t1.1.1",
                              "shoe_id": "t1.1", "round_no": 1, "closes_at": closes,
                              "limits": msgspec.to_builtins(p.Limits())}]

    # Thirteen cards while bets are open (the sheet: "at the beginning of a round"), one per
    # tick: the burn (no event), then P1 … Banker twice, face down. Betting stays open.
    round_cards: list[str] = []
    seq = 2
    due = T0 + DEAL_MS
    for i, slot in enumerate(ROUND_SLOTS):
        assert e.next_deadline() == due
        round_cards.append(str(ref.draw()))
        step, diff = act(e, "tick", due)
        last = i == len(ROUND_SLOTS) - 1
        expected: dict[str, Any] = {"round_cards": round_cards,
                                    "shoe": shoe_of(ref, "t1.1", salt=salt, round_starts=starts),
                                    "next_at": None if last else due + DEAL_MS}
        if slot.position is None:
            assert step.events == []
        else:
            seq += 1
            expected["seq"] = seq
            assert [strip(f) for f in frames(step)] == [
                {"type": "card_dealt", "round_id": "t1.1.1", "to": slot.position.value,
                 "n": slot.n, "cards_left": 416 - ref.drawn}]
        assert diff == expected
        assert step.effects == []
        assert e.phase == "betting"
        due += DEAL_MS

    # All thirteen out: nothing happens until the deadline.
    assert e.next_deadline() == closes
    step, diff = act(e, "tick", closes - 1)
    assert (step.events, step.effects, diff) == ([], [], {})

    # At the deadline betting closes, and with every card out the reveals begin.
    step, diff = act(e, "tick", closes)
    seq += 1
    assert diff == {"seq": seq, "phase": "revealing", "closes_at": None,
                    "next_at": closes + REVEAL_MS}
    assert [strip(f) for f in frames(step)] == [{"type": "betting_closed", "round_id": "t1.1.1"}]
    assert effects(step) == [{"type": "set_betting", "table": "t1", "round_id": "t1.1.1",
                              "status": "closed", "closes_at": None}]
    due = closes + REVEAL_MS

    # Six reveals, P1 … P5 then Banker; the Banker's settles the round.
    hands = hands_of(round_cards)
    results, spots = expected_results(round_cards)
    for i, pos in enumerate(DEAL_ORDER):
        assert e.next_deadline() == due
        step, diff = act(e, "tick", due)
        seq += 1
        got = [strip(f) for f in frames(step)]
        assert got[0] == revealed_frame("t1.1.1", pos, hands[pos])
        if pos is not Position.BANKER:
            assert diff == {"seq": seq, "revealed": i + 1, "next_at": due + REVEAL_MS}
            assert len(got) == 1 and step.effects == []
            due += REVEAL_MS
            continue
        seq += 1
        banker = hand_of(parse_cards(" ".join(hands[Position.BANKER])))
        # the round is chained into the shoe's game log (docs/security.md), its head published
        head = chain_link(salt, commitment(salt, ref.cut_at, [str(c) for c in ref.order]),
                          "t1.1.1", "settled", due, e.state.round_cards,
                          {k: v[0] for k, v in spots.items()})
        logged = shoe_of(ref, "t1.1", salt=salt, round_starts=starts, chain_head=head,
                         round_ends=(due,))
        assert diff == {"seq": seq, "revealed": 6, "phase": "settled", "results": results,
                        "roadmap": [{"round_id": "t1.1.1", "round_no": 1, "results": results,
                                     "banker": {"value": banker.value, "points": banker.points,
                                                "pair": banker.pair, "flush": banker.flush}}],
                        "next_at": due + BETWEEN_MS, "shoe": logged}
        assert got[1:] == [{"type": "round_settled", "round_id": "t1.1.1", "results": results,
                            "last_round": False, "opens_at": due + BETWEEN_MS,
                            "chain_head": head}]
        assert effects(step) == [{
            "type": "settle_round", "table": "t1", "round_id": "t1.1.1", "spots": spots,
            "cards": {pos.value: cs for pos, cs in hands.items()}}]

    # Between rounds, the next round opens by itself from the same shoe.
    due += BETWEEN_MS
    assert e.next_deadline() == due
    step, diff = act(e, "tick", due)
    assert diff == {"seq": seq + 1, "phase": "betting", "round_no": 2, "round_id": "t1.1.2",
                    "closes_at": due + BET_MS, "round_cards": [], "revealed": 0, "results": [],
                    "next_at": due + DEAL_MS,
                    "shoe": shoe_of(ref, "t1.1", salt=salt, round_starts=(*starts, ref.drawn),
                                    chain_head=head, round_ends=(due - BETWEEN_MS,))}
    assert [strip(f) for f in frames(step)] == [
        {"type": "round_opened", "round_id": "t1.1.2", "shoe_id": "t1.1", "round_no": 2,
         "closes_at": due + BET_MS}]
    assert [ef["type"] for ef in effects(step)] == ["open_round"]


def test_auto_late_tick_catches_up_in_order_and_reveals_paced() -> None:
    e = auto_engine()
    e.open_betting(T0)
    late = T0 + 10**6
    step, _ = act(e, "tick", late)  # the runner slept through the whole round
    types = [f["type"] for f in frames(step)]
    # The cards dealt face down and the close catch up; the show does not: one hand is
    # revealed, the next a reveal interval later. (A runner held 15 s by a Redis partition
    # sent the six reveals and the settlement in one millisecond.)
    assert types == ["card_dealt"] * 12 + ["betting_closed", "hand_revealed"]
    assert [ef["type"] for ef in effects(step)] == ["set_betting"]
    assert e.next_deadline() == late + REVEAL_MS
    now = late
    for n in range(5):
        now += REVEAL_MS
        step = e.tick(now)
        assert [f["type"] for f in frames(step)] == (
            ["hand_revealed"] if n < 4 else ["hand_revealed", "round_settled"])
    assert [ef["type"] for ef in effects(step)] == ["settle_round"]
    step = e.tick(now + BETWEEN_MS)
    assert [f["type"] for f in frames(step)] == ["round_opened"]
    # The new round's countdown starts from its tick, not from a missed deadline.
    assert e.state.closes_at == now + BETWEEN_MS + BET_MS


def test_auto_open_betting_with_betting_ms() -> None:
    e = auto_engine()
    _, diff = act(e, "open_betting", T0, betting_ms=1_000)
    assert diff["closes_at"] == T0 + 1_000
    step, diff = act(e, "tick", T0 + 1_000)
    # A countdown shorter than the deal: six cards by the close, the rest after it.
    assert [f["type"] for f in frames(step)] == ["card_dealt"] * 5 + ["betting_closed"]
    assert diff["phase"] == "dealing" and len(e.state.round_cards) == 6
    assert e.next_deadline() == T0 + 7 * DEAL_MS
    step = e.tick(T0 + 13 * DEAL_MS)
    assert [f["type"] for f in frames(step)] == ["card_dealt"] * 7
    assert e.phase == "revealing" and e.next_deadline() == T0 + 13 * DEAL_MS + REVEAL_MS


# --- manual mode, step by step ---------------------------------------------------------------


def test_manual_round_step_by_step() -> None:
    e = manual_engine()
    assert refused(e, "open_betting", T0).code == "no_shoe"

    # start_shoe: a manual shoe waits for its opening card; players see it being shuffled.
    step, diff = act(e, "start_shoe", T0)
    assert diff == {"seq": 1, "shoe_no": 1,
                    "shoe": shoe_of(Shoe.manual(), "t1.1", awaiting=True)}
    assert [strip(f) for f in frames(step)] == [{"type": "shoe_shuffling", "shoe_id": "t1.1"}]
    assert (step.effects, step.detail) == ([], {"awaiting": "opening card"})
    assert e.snapshot().shuffling
    assert refused(e, "open_betting", T0).code == "no_shoe"

    # The opening card is read face up, its value burned unseen.
    step, diff = act(e, "card", "5c", T0 + 1)  # the scanner's lower case is fine
    ref = Shoe.manual()
    ref.feed(parse_cards("5C")[0])
    ref.burn_unseen(5)
    assert diff == {"seq": 2, "shoe": shoe_of(ref, "t1.1")}
    assert [strip(f) for f in frames(step)] == [
        {"type": "shoe_started", "shoe_id": "t1.1", "burn_card": "5C", "burned": 5,
         "commitment": None, "cards_left": 416 - 6, "opens_at": None}]
    assert step.detail == {"slot": "opening", "burned": 5}
    assert not e.snapshot().shuffling

    step, diff = act(e, "open_betting", T0 + 2, betting_ms=5_000)
    assert diff == {"seq": 3, "phase": "betting", "round_no": 1, "round_id": "t1.1.1",
                    "closes_at": T0 + 5_002}
    assert [f["type"] for f in frames(step)] == ["round_opened"]
    assert [ef["type"] for ef in effects(step)] == ["open_round"]
    assert e.next_deadline() == T0 + 5_002  # the clock closes betting in manual mode too

    # The dealer deals the whole round face down while the countdown runs.
    seq = 3
    for i, (slot, card) in enumerate(zip(ROUND_SLOTS, MANUAL_CARDS, strict=True)):
        ref.feed(parse_cards(card)[0])
        step, diff = act(e, "card", card, T0 + 10 + i)
        expected: dict[str, Any] = {"round_cards": MANUAL_CARDS[: i + 1],
                                    "shoe": shoe_of(ref, "t1.1")}
        if slot.position is None:
            assert step.detail == {"slot": "burn"} and step.events == []
        else:
            seq += 1
            expected["seq"] = seq
            assert step.detail == {"slot": slot.position.value, "n": slot.n}
            assert [strip(f) for f in frames(step)] == [
                {"type": "card_dealt", "round_id": "t1.1.1", "to": slot.position.value,
                 "n": slot.n, "cards_left": 416 - ref.drawn}]
        assert diff == expected
        assert step.effects == []
        assert e.phase == "betting"  # bets are still taken
    assert refused(e, "card", "9D", T0 + 30).code == "all_dealt"
    assert refused(e, "reveal", T0 + 30).code == "illegal_command"  # not before the close
    assert e.next_deadline() == T0 + 5_002

    # The dealer closes early: every card is out, so the reveals can begin at once.
    step, diff = act(e, "close_betting", T0 + 40)
    seq += 1
    assert diff == {"seq": seq, "phase": "revealing", "closes_at": None}
    assert [strip(f) for f in frames(step)] == [{"type": "betting_closed", "round_id": "t1.1.1"}]
    assert effects(step) == [{"type": "set_betting", "table": "t1", "round_id": "t1.1.1",
                              "status": "closed", "closes_at": None}]
    assert e.next_deadline() is None  # the dealer paces the reveals

    hands = hands_of(MANUAL_CARDS)
    results, spots = expected_results(MANUAL_CARDS)
    for i, pos in enumerate(DEAL_ORDER):
        step, diff = act(e, "reveal", T0 + 100 + i)
        seq += 1
        got = [strip(f) for f in frames(step)]
        assert got[0] == revealed_frame("t1.1.1", pos, hands[pos])
        if pos is not Position.BANKER:
            assert diff == {"seq": seq, "revealed": i + 1}
            continue
        seq += 1
        banker = hand_of(parse_cards(" ".join(hands[Position.BANKER])))
        assert diff == {"seq": seq, "revealed": 6, "phase": "settled", "results": results,
                        "roadmap": [{"round_id": "t1.1.1", "round_no": 1, "results": results,
                                     "banker": {"value": banker.value, "points": banker.points,
                                                "pair": banker.pair, "flush": banker.flush}}]}
        assert got[1]["type"] == "round_settled" and got[1]["last_round"] is False
        assert effects(step)[0]["spots"] == spots
    assert e.next_deadline() is None


def test_manual_dealer_slower_than_the_countdown_deals_after_the_close() -> None:
    e = opened_manual()
    e.open_betting(T0, betting_ms=5_000)
    for card in MANUAL_CARDS[:4]:  # the burn and P1 … P3's first cards in time
        e.card(card, T0 + 1_000)
    # The countdown ends: bets close, the round waits for its last nine cards (dealing).
    step, diff = act(e, "tick", T0 + 5_000)
    assert [strip(f) for f in frames(step)] == [{"type": "betting_closed", "round_id": "t1.1.1"}]
    assert diff == {"seq": diff["seq"], "phase": "dealing", "closes_at": None}
    assert refused(e, "reveal", T0 + 5_001).code == "illegal_command"
    for card in MANUAL_CARDS[4:-1]:
        step, diff = act(e, "card", card, T0 + 6_000)
        assert e.phase == "dealing"
    # The thirteenth card: the reveals begin.
    step, diff = act(e, "card", MANUAL_CARDS[-1], T0 + 7_000)
    assert [strip(f) for f in frames(step)] == [
        {"type": "card_dealt", "round_id": "t1.1.1", "to": "BANKER", "n": 2,
         "cards_left": 416 - 6 - 13}]
    assert diff["phase"] == "revealing"
    step, _ = act(e, "reveal", T0 + 8_000)
    assert frames(step)[0]["hand"] == "P1"


def test_manual_next_round_opens_by_itself_when_set() -> None:
    e = TableEngine.new("t1", mode="manual", timing=Timing(manual_open_ms=8_000, close_grace_ms=0),
                        rng=random.Random(SEED))
    e.start_shoe(T0)
    assert e.next_deadline() is None  # not before the opening card
    _, diff = act(e, "card", OPENING, T0 + 1)
    assert diff["shoe"]["awaiting_open_card"] is False and diff["next_at"] == T0 + 8_001
    step, _ = act(e, "tick", T0 + 8_001)
    assert [f["type"] for f in frames(step)] == ["round_opened"]
    list(finish_round(e, T0 + 10_000, MANUAL_CARDS))
    assert e.phase == "settled"
    due = e.next_deadline()
    assert due is not None
    step, _ = act(e, "tick", due)
    assert [f["type"] for f in frames(step)] == ["round_opened"]
    assert e.state.round_no == 2
    # A cancelled round too; but never into a new shoe (the dealer starts it).
    e.card("CUT", due + 1)
    step = e.cancel_round("", due + 2)
    assert e.next_deadline() is None


def test_manual_next_round_is_the_dealers_by_default() -> None:
    e = opened_manual()
    e.open_betting(T0)
    list(finish_round(e, T0, MANUAL_CARDS))
    assert e.phase == "settled" and e.next_deadline() is None
    assert e.tick(T0 + 10**7).events == []


# --- refused commands change nothing ------------------------------------------------------------

ARGS: dict[str, Callable[[TableEngine], tuple[Any, ...]]] = {
    "start_shoe": lambda e: (T0 + 500,),
    "open_betting": lambda e: (T0 + 500,),
    "close_betting": lambda e: (T0 + 500,),
    "card": lambda e: ("9D", T0 + 500),
    "reveal": lambda e: (T0 + 500,),
    "pause": lambda e: ("why", T0 + 500),
    "resume": lambda e: (T0 + 500,),
    "cancel_round": lambda e: ("why", T0 + 500),
    "set_mode": lambda e: ("manual" if e.state.mode == "auto" else "auto", T0 + 500),
    "void_cards": lambda e: (1, "Dee", "Sue", T0 + 500),
}
COMMANDS: tuple[Command, ...] = typing.get_args(Command)
#: Every (phase, command) pair the transition table does not hold, in both modes and for a
#: pause from each phase: all of them are refused, and change nothing.
FORBIDDEN = [
    (mode, phase, paused_from, command)
    for mode in ("auto", "manual")
    for phase in PHASES
    for paused_from in (("betting", "dealing", "revealing") if phase == "paused" else ("",))
    for command in COMMANDS
    if (phase, command) not in TRANSITIONS
]


@pytest.mark.parametrize(("mode", "phase", "paused_from", "command"), FORBIDDEN,
                         ids=["-".join(x for x in case if x) for case in FORBIDDEN])
def test_command_forbidden_in_phase_changes_nothing(
    mode: Mode, phase: str, paused_from: str, command: str
) -> None:
    e = engine_in(phase, mode, paused_from or "betting")
    before = e.to_bytes()
    error = refused(e, command, *ARGS[command](e))
    assert error.code == "illegal_command"
    assert command in error.message and phase in error.message
    same_future(e, before)


def test_every_command_is_refused_somewhere() -> None:
    # The table is the one place that says what is legal; it forbids something for each.
    assert set(ARGS) == set(COMMANDS)
    assert {case[3] for case in FORBIDDEN} == set(COMMANDS)
    assert len(FORBIDDEN) == 2 * sum(3 if ph == "paused" else 1 for ph in PHASES
                                     for cmd in COMMANDS if (ph, cmd) not in TRANSITIONS)


def test_the_transition_table_reads_as_the_rules() -> None:
    # The sheet's order: cards while betting is open, reveals only after the close.
    assert allowed_in("card") == {"idle", "settled", "cancelled", "betting", "dealing"}
    assert allowed_in("reveal") == {"revealing"}
    assert allowed_in("close_betting") == {"betting"}
    assert TRANSITIONS[("betting", "card")] == "betting"
    assert TRANSITIONS[("betting", "close_betting")] == "dealing"
    # the engine's own moves: the last card after the close, the Banker's reveal
    assert TRANSITIONS[("dealing", "all_dealt")] == "revealing"
    assert TRANSITIONS[("revealing", "banker_revealed")] == "settled"
    assert allowed_in("all_dealt") == {"dealing"}
    assert allowed_in("banker_revealed") == {"revealing"}
    assert {k[0] for k in TRANSITIONS} <= set(PHASES)
    assert set(TRANSITIONS.values()) <= set(PHASES) | {"before_pause"}


ENGINE_SOURCES = sorted((Path(__file__).resolve().parents[2] / "livetable/engine").glob("*.py"))


def test_the_phase_changes_in_one_place_only() -> None:
    """``phase`` was assigned at 10 sites, some (a pause) without the table. Now
    one function checks the move against TRANSITIONS and assigns it."""
    sites = []
    for path in ENGINE_SOURCES:
        tree = ast.parse(path.read_text())
        for func in ast.walk(tree):
            if not isinstance(func, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for node in ast.walk(func):
                targets = (node.targets if isinstance(node, ast.Assign)
                           else [node.target] if isinstance(node, ast.AugAssign | ast.AnnAssign)
                           else [])
                for t in targets:
                    for leaf in ast.walk(t):
                        if isinstance(leaf, ast.Attribute) and leaf.attr == "phase":
                            sites.append(f"{path.name}:{getattr(node, 'lineno', 0)} in {func.name}")
    assert [site.split(" in ")[1] for site in sites] == ["_move"], sites


def test_events_are_numbered_once_and_frozen() -> None:
    step = auto_engine().open_betting(T0)
    assert [ev.seq for ev in step.events] == list(range(1, len(step.events) + 1))
    for ev in step.events:
        with pytest.raises(AttributeError):
            ev.seq = 99  # type: ignore[misc]  # frozen: what mypy says too


@pytest.mark.parametrize("betting_ms", [0, 999, 600_001, -1])
@pytest.mark.parametrize("mode", ["auto", "manual"])
def test_bad_betting_ms_is_refused(mode: Mode, betting_ms: int) -> None:
    e = auto_engine() if mode == "auto" else opened_manual()
    before = e.to_bytes()
    assert refused(e, "open_betting", T0, betting_ms=betting_ms).code == "bad_command"
    # Not even the auto table's first shoe was started.
    assert e.state.shoe_no == (0 if mode == "auto" else 1)
    same_future(e, before)


@pytest.mark.parametrize("betting_ms", [1_000, 600_000])
def test_betting_ms_bounds_are_accepted(betting_ms: int) -> None:
    e = opened_manual()
    e.open_betting(T0, betting_ms=betting_ms)
    assert e.state.closes_at == T0 + betting_ms


@pytest.mark.parametrize("phase", ["idle", "betting", "dealing", "settled", "cancelled"])
def test_card_in_auto_mode_is_refused(phase: str) -> None:
    e = engine_in(phase, "auto")
    before = e.to_bytes()
    assert refused(e, "card", "9D", T0 + 500).code == "wrong_mode"
    assert refused(e, "card", "CUT", T0 + 500).code == "wrong_mode"
    same_future(e, before)


@pytest.mark.parametrize("token", ["", "ZZ", "1H", "11S", "K", "KX", "HK", "10", "JOKER"])
@pytest.mark.parametrize("phase", ["dealing", "betting", "settled"])
def test_bad_card_token_is_refused(phase: str, token: str) -> None:
    e = engine_in(phase, "manual")
    before = e.to_bytes()
    error = refused(e, "card", token, T0 + 500)
    assert error.code == "bad_card"
    same_future(e, before)


def test_bad_opening_card_is_refused() -> None:
    e = manual_engine()
    e.start_shoe(T0)
    assert refused(e, "card", "XX", T0).code == "bad_card"
    assert e.state.shoe is not None and e.state.shoe.awaiting_open_card


def test_card_between_rounds_is_refused_in_manual_mode() -> None:
    # Between rounds only the shoe's opening card and the cut card are read.
    for phase in ("settled", "cancelled"):
        e = engine_in(phase, "manual")
        before = e.to_bytes()
        assert refused(e, "card", "9D", T0 + 500).code == "no_round"
        same_future(e, before)
    e = manual_engine()  # no shoe at all
    assert refused(e, "card", "9D", T0).code == "no_shoe"
    assert refused(e, "card", "CUT", T0).code == "no_shoe"


def test_fourteenth_card_is_refused() -> None:
    for phase in ("betting", "dealing"):
        e = opened_manual()
        e.open_betting(T0)
        if phase == "dealing":
            e.card(MANUAL_CARDS[0], T0)
            e.close_betting(T0 + 1)
            for card in MANUAL_CARDS[1:]:
                assert e.phase == "dealing"
                e.card(card, T0 + 2)
            assert e.phase == "revealing"
            assert refused(e, "card", "9D", T0 + 3).code == "illegal_command"
            continue
        for card in MANUAL_CARDS:
            e.card(card, T0 + 2)
        before = e.to_bytes()
        assert refused(e, "card", "9D", T0 + 3).code == "all_dealt"
        same_future(e, before)


def test_open_betting_in_manual_mode_needs_an_open_shoe() -> None:
    e = manual_engine()
    assert refused(e, "open_betting", T0).code == "no_shoe"
    e.start_shoe(T0)
    assert refused(e, "open_betting", T0).code == "no_shoe"


def test_ninth_king_of_hearts_pauses_the_round() -> None:
    e = manual_engine()
    e.start_shoe(T0)
    e.card("KH", T0)  # opening card: 1 KH out, 10 burned
    e.open_betting(T0)
    e.close_betting(T0 + 1)
    for _ in range(7):  # KH 2 … 8: legal, eight decks
        e.card("KH", T0 + 2)
    assert e.state.shoe is not None and e.state.shoe.seen["KH"] == 8

    before = state(e)
    with pytest.raises(EngineError) as info:
        e.card("KH", T0 + 3)
    error = info.value
    assert error.code == "impossible_card"
    assert "KH" in error.message
    # The table moved: it paused, and the pause step is on the error for the shell to commit.
    assert error.step is not None
    assert [strip(f) for f in frames(error.step)] == [
        {"type": "table_paused", "reason": error.message}]
    assert error.step.effects == []
    assert frames(error.step)[0]["seq"] == before["seq"] + 1
    assert changes(before, state(e)) == {"seq": before["seq"] + 1, "phase": "paused",
                                         "paused_from": "dealing",
                                         "paused_reason": error.message}
    # The ninth KH was not taken: the round goes on with the right card after a resume.
    step, diff = act(e, "resume", T0 + 4)
    assert diff == {"seq": before["seq"] + 2, "phase": "dealing", "paused_from": None,
                    "paused_reason": None}
    assert [strip(f) for f in frames(step)] == [{"type": "table_resumed", "closes_at": None}]
    e.card("QH", T0 + 5)
    assert e.state.round_cards == ["KH"] * 7 + ["QH"]


def test_impossible_card_while_paused_changes_nothing() -> None:
    e = manual_engine()
    e.start_shoe(T0)
    e.card("KH", T0)
    e.open_betting(T0)
    e.close_betting(T0 + 1)
    for _ in range(7):
        e.card("KH", T0 + 2)
    with pytest.raises(EngineError):
        e.card("KH", T0 + 3)
    assert e.phase == "paused"
    # While paused, card is not allowed at all: the same ninth KH changes nothing now.
    assert refused(e, "card", "KH", T0 + 4).code == "illegal_command"


# --- pause and resume ----------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["auto", "manual"])
def test_pause_and_resume_in_betting_extends_the_countdown(mode: Mode) -> None:
    e = engine_in("betting", mode)
    closes = T0 + BET_MS
    assert e.state.closes_at == closes

    step, diff = act(e, "pause", "", T0 + 5_000)
    assert diff == {"seq": diff["seq"], "phase": "paused", "paused_from": "betting",
                    "paused_reason": "paused by the dealer", "betting_left_ms": 10_000}
    assert [strip(f) for f in frames(step)] == [
        {"type": "table_paused", "reason": "paused by the dealer"}]
    assert effects(step) == [{"type": "set_betting", "table": "t1", "round_id": "t1.1.1",
                              "status": "paused", "closes_at": None}]
    assert e.next_deadline() is None
    step, diff = act(e, "tick", closes + 60_000)  # the countdown is frozen
    assert (step.events, diff) == ([], {})

    step, diff = act(e, "resume", T0 + 100_000)
    new_closes = T0 + 100_000 + 10_000
    expected = {"seq": diff["seq"], "phase": "betting", "paused_from": None,
                "paused_reason": None, "betting_left_ms": None, "closes_at": new_closes}
    if mode == "auto":  # the deal goes on where it stopped (three cards were out)
        expected["next_at"] = T0 + 100_000 + DEAL_MS
    assert diff == expected
    assert [strip(f) for f in frames(step)] == [
        {"type": "table_resumed", "closes_at": new_closes}]
    assert effects(step) == [{"type": "set_betting", "table": "t1", "round_id": "t1.1.1",
                              "status": "betting", "closes_at": new_closes}]
    if mode == "auto":
        assert e.next_deadline() == T0 + 100_000 + DEAL_MS
        step, _ = act(e, "tick", new_closes - 1)
        assert [f["type"] for f in frames(step)] == ["card_dealt"] * 10  # the other ten
        assert len(e.state.round_cards) == 13
    assert e.next_deadline() == new_closes
    step, _ = act(e, "tick", new_closes)
    assert [f["type"] for f in frames(step)] == ["betting_closed"]
    assert e.phase == ("revealing" if mode == "auto" else "dealing")


@pytest.mark.parametrize(("paused_at", "left"), [
    (T0 + BET_MS - 2_000, 5_000),   # 2 s left: players get at least 5 s back
    (T0 + BET_MS, 5_000),           # paused on the deadline, before the tick closed betting
    (T0 + BET_MS + 700, 5_000),     # paused after the deadline (a late tick)
    (T0 + 1_000, BET_MS - 1_000),
])
def test_resume_in_betting_gives_at_least_five_seconds(paused_at: int, left: int) -> None:
    e = engine_in("betting", "auto")
    e.pause("x", paused_at)
    e.resume(T0 + 50_000)
    assert e.state.closes_at == T0 + 50_000 + left


@pytest.mark.parametrize("mode", ["auto", "manual"])
@pytest.mark.parametrize("phase", ["dealing", "revealing"])
def test_pause_and_resume_in_dealing_and_revealing(mode: Mode, phase: str) -> None:
    e = engine_in(phase, mode)
    before_pause = state(e)
    step, diff = act(e, "pause", "card fell", T0 + 500)
    assert diff == {"seq": before_pause["seq"] + 1, "phase": "paused", "paused_from": phase,
                    "paused_reason": "card fell"}
    assert step.effects == []  # no bets are being taken: nothing for the ledger
    assert e.next_deadline() is None
    step, diff = act(e, "tick", T0 + 10**6)  # auto mode deals nothing while paused
    assert (step.events, diff) == ([], {})

    step, diff = act(e, "resume", T0 + 20_000)
    expected: dict[str, Any] = {"seq": before_pause["seq"] + 2, "phase": phase,
                                "paused_from": None, "paused_reason": None}
    if mode == "auto":
        expected["next_at"] = T0 + 20_000 + (DEAL_MS if phase == "dealing" else REVEAL_MS)
    assert diff == expected
    assert [strip(f) for f in frames(step)] == [{"type": "table_resumed", "closes_at": None}]
    assert step.effects == []
    # The round then completes exactly as it would have.
    done = list(finish_round(e, T0 + 20_000, MANUAL_CARDS[len(e.state.round_cards):]))
    assert e.phase == "settled"
    assert sum(ef["type"] == "settle_round" for s in done for ef in effects(s)) == 1


# --- cancel ---------------------------------------------------------------------------------

CANCELLABLE = [("betting", ""), ("dealing", ""), ("revealing", ""),
               ("paused", "betting"), ("paused", "dealing"), ("paused", "revealing")]


@pytest.mark.parametrize("mode", ["auto", "manual"])
@pytest.mark.parametrize(("phase", "paused_from"), CANCELLABLE)
def test_cancel_from_every_cancellable_phase(mode: Mode, phase: str, paused_from: str) -> None:
    e = engine_in(phase, mode, paused_from or "betting")
    before = state(e)
    step, diff = act(e, "cancel_round", "", T0 + 900)
    reason = "cancelled by the dealer"
    expected: dict[str, Any] = {"seq": before["seq"] + 1, "phase": "cancelled"}
    if before["closes_at"] is not None:
        expected["closes_at"] = None
    if phase == "paused":
        expected |= {"paused_from": None, "paused_reason": None}
        if paused_from == "betting":
            expected["betting_left_ms"] = None
    if mode == "auto":
        expected["next_at"] = T0 + 900 + BETWEEN_MS
    shoe = e.state.shoe
    assert shoe is not None
    head = shoe.chain_head
    if mode == "auto":  # the cancelled round is chained into the game log, its head published
        assert shoe.salt is not None and shoe.commitment is not None
        assert head == chain_link(shoe.salt, shoe.commitment, "t1.1.1", "cancelled",
                                  T0 + 900, e.state.round_cards, {})
        expected["shoe"] = {**before["shoe"], "chain_head": head, "round_ends": [T0 + 900]}
    else:
        assert head is None  # a manual shoe has no log
    assert diff == expected
    assert [strip(f) for f in frames(step)] == [
        {"type": "round_cancelled", "round_id": "t1.1.1", "reason": reason,
         "opens_at": expected.get("next_at"), "chain_head": head}]
    assert effects(step) == [{"type": "cancel_round", "table": "t1", "round_id": "t1.1.1",
                              "reason": reason}]
    # The next round opens with the next number, with nothing left of the cancelled one.
    e.open_betting(T0 + 10_000)
    assert (e.state.round_id, e.state.round_cards, e.state.revealed) == ("t1.1.2", [], 0)
    assert e.state.paused_from is None and e.state.betting_left_ms is None


def test_cancel_with_a_reason() -> None:
    e = engine_in("dealing", "manual")
    step = e.cancel_round("camera down", T0)
    assert frames(step)[0]["reason"] == "camera down"
    assert effects(step)[0]["reason"] == "camera down"


# --- set_mode --------------------------------------------------------------------------------


def test_set_mode_between_rounds() -> None:
    e = engine_in("settled", "auto")
    step, diff = act(e, "set_mode", "auto", T0 + 1)
    assert diff == {} and step.detail == {"mode": "auto"}
    shoe = e.state.shoe
    assert shoe is not None and shoe.salt is not None
    seq = e.state.seq
    step, diff = act(e, "set_mode", "manual", T0 + 1)
    assert diff == {"seq": seq + 2, "mode": "manual", "shoe": None, "next_at": None}
    # The auto shoe set aside has ended: it is revealed (docs/design.md §7).
    assert [strip(f) for f in frames(step)] == [
        {"type": "shoe_revealed", "shoe_id": "t1.1", "salt": shoe.salt, "cut_at": shoe.cut_at,
         "order": shoe.order, "chain_head": shoe.chain_head, "round_count": 1,
         "ended_by": "set_aside"},
        {"type": "mode_changed", "mode": "manual", "opens_at": None}]
    assert [ef["type"] for ef in effects(step)] == ["reveal_shoe"]
    assert refused(e, "open_betting", T0 + 2).code == "no_shoe"
    step, diff = act(e, "set_mode", "auto", T0 + 3)
    assert diff == {"seq": seq + 3, "mode": "auto", "next_at": T0 + 3}
    # Announced: a console shows the mode, and that the next round opens now, from events.
    assert [strip(f) for f in frames(step)] == [
        {"type": "mode_changed", "mode": "auto", "opens_at": T0 + 3}]
    assert e.snapshot().mode == "auto" and e.snapshot().opens_at == T0 + 3
    step = tick_due(e)
    types = [f["type"] for f in frames(step)]
    assert types == ["shoe_started", "round_opened"]
    assert e.state.shoe is not None and e.state.shoe.shoe_id == "t1.2"
    assert e.state.round_id == "t1.2.1"


# --- the cut card --------------------------------------------------------------------------

#: The cut card 392 cards from the end: it comes out within the first rounds of the shoe.
EARLY_CUT = Timing(cut_range=(392, 392))


def test_auto_cut_card_makes_the_round_the_last_of_the_shoe() -> None:
    e = auto_engine(EARLY_CUT)
    cut_round: str | None = None
    settled: list[tuple[str, bool]] = []
    opened: list[list[str]] = []
    step = e.open_betting(T0)
    opened.append([f["type"] for f in frames(step)])
    now = T0
    while len(opened) < 4:
        due = e.next_deadline()
        assert due is not None
        now = due
        was_out = e.state.shoe is not None and e.state.shoe.cut_out
        step = e.tick(now)
        assert e.state.shoe is not None
        cut_events = [strip(f) for f in frames(step) if f["type"] == "cut_card_out"]
        if e.state.shoe.cut_out and not was_out:
            assert cut_round is None
            cut_round = e.state.round_id
            assert e.phase == "betting"  # the cards come out while bets are open
            # announced once, before the card that came out after it
            assert [f["type"] for f in frames(step)] == ["cut_card_out", "card_dealt"]
            assert cut_events == [{"type": "cut_card_out", "shoe_id": "t1.1",
                                   "last_round": True}]
        else:
            assert cut_events == []
        for f in frames(step):
            if f["type"] == "round_settled":
                settled.append((f["round_id"], f["last_round"]))
        if any(f["type"] == "round_opened" for f in frames(step)):
            opened.append([f["type"] for f in frames(step)])
    assert cut_round is not None and cut_round.startswith("t1.1.")
    # Only the round in which the cut card came out is the last; then a new shoe starts,
    # announced before the round that opens it.
    assert [r for r, last in settled if last] == [cut_round]
    index = [r for r, _ in settled].index(cut_round)
    assert settled[:index] == [(r, False) for r, _ in settled[:index]]
    assert opened[index + 1] == ["shoe_started", "round_opened"]
    assert all(types == ["round_opened"] for types in opened[1:index + 1])
    assert [r for r, _ in settled][index + 1:] == ["t1.2.1", "t1.2.2"][: len(settled) - index - 1]
    assert e.state.shoe is not None and e.state.shoe.shoe_id == "t1.2"


def test_manual_cut_card_during_dealing_marks_the_last_round() -> None:
    e = engine_in("dealing", "manual")
    before = state(e)
    step, diff = act(e, "card", "CUT", T0 + 200)
    assert step.effects == []
    assert [strip(f) for f in frames(step)] == [
        {"type": "cut_card_out", "shoe_id": "t1.1", "last_round": True}]
    assert step.detail == {"slot": "cut", "last_round": True}
    assert diff == {"seq": before["seq"] + 1, "last_round": True,
                    "shoe": {**before["shoe"], "cut_out": True}}
    # Read twice (a scanner's repeat): it is out already, nothing more to announce.
    step, diff = act(e, "card", "CUT", T0 + 201)
    assert step.events == [] and diff == {}
    # The cut card is not a card of the round; the next card goes where it would have.
    rest = MANUAL_CARDS[len(e.state.round_cards):]
    settled = [f for s in finish_round(e, T0 + 300, rest) for f in frames(s)
               if f["type"] == "round_settled"]
    assert e.state.round_cards == MANUAL_CARDS
    assert [f["last_round"] for f in settled] == [True]
    assert e.state.shoe is not None and e.state.shoe.cut_out  # it stays out
    assert refused(e, "open_betting", T0 + 400).code == "no_shoe"
    e.start_shoe(T0 + 500)
    e.card("9S", T0 + 501)
    step = e.open_betting(T0 + 502)
    assert e.state.round_id == "t1.2.1" and not e.state.last_round


def test_manual_cut_card_between_rounds_makes_the_next_round_the_last() -> None:
    e = engine_in("settled", "manual")
    step, diff = act(e, "card", "cut_card", T0 + 100)
    assert step.detail == {"slot": "cut", "last_round": False}
    assert [strip(f) for f in frames(step)] == [
        {"type": "cut_card_out", "shoe_id": "t1.1", "last_round": False}]
    assert e.snapshot().cut_card_out and not e.snapshot().last_round
    step, diff = act(e, "open_betting", T0 + 200)
    assert diff["last_round"] is True
    list(finish_round(e, T0 + 300, MANUAL_CARDS))
    assert e.state.results and e.state.last_round


def test_manual_cut_card_before_the_opening_card_is_not_lost() -> None:
    e = manual_engine()
    e.start_shoe(T0)
    e.card("CUT", T0 + 1)  # a short shoe: the dealer sees the cut card at once
    e.card(OPENING, T0 + 2)
    assert e.state.shoe is not None and e.state.shoe.cut_out
    e.open_betting(T0 + 3)
    assert e.state.last_round


def test_manual_cut_card_in_betting() -> None:
    e = engine_in("betting", "manual")
    _, diff = act(e, "card", "CUT", T0 + 100)
    assert diff["last_round"] is True
    settled = [f for s in finish_round(e, T0 + 300, MANUAL_CARDS) for f in frames(s)
               if f["type"] == "round_settled"]
    assert settled[0]["last_round"] is True


def test_manual_cut_card_survives_a_rebuild() -> None:
    # The state is what the store keeps: an engine rebuilt from it after every step must
    # behave exactly as one that never stopped.
    e = engine_in("dealing", "manual")
    e.card("CUT", T0 + 100)
    rebuilt = TableEngine.from_bytes(e.to_bytes())
    rest = MANUAL_CARDS[len(e.state.round_cards):]
    for a, b in zip(finish_round(e, T0 + 200, rest), finish_round(rebuilt, T0 + 200, rest),
                    strict=True):
        assert frames(a) == frames(b)
        assert e.to_bytes() == rebuilt.to_bytes()


# --- no card identity before its reveal ------------------------------------------------------


def _check_no_leak(steps: list[tuple[Step, p.TableSnapshot]]) -> int:
    """Check every frame and snapshot; return how many hands were revealed."""
    shown: list[str] = []  # cards of the current round's hands revealed so far
    revealed = 0
    last_round_over = False  # the round that just ended was its shoe's last
    ended: set[str] = set()  # shoes revealed: none of their rounds may follow
    for step, snapshot in steps:
        for ev in step.events:
            frame = p.encode(ev).decode()
            tokens = CARD_TOKEN.findall(frame)
            kind = json.loads(frame)["type"]
            if kind == "round_opened":
                shown = []
                assert json.loads(frame)["shoe_id"] not in ended
                last_round_over = False
            if kind == "shoe_revealed":  # the whole order, once the shoe's last round ended
                assert last_round_over, frame
                assert tokens == json.loads(frame)["order"]
                ended.add(json.loads(frame)["shoe_id"])
                continue
            if kind == "round_settled":
                last_round_over = json.loads(frame)["last_round"]
            if kind == "hand_revealed":
                revealed += 1
                cards = json.loads(frame)["cards"]
                assert sorted(tokens) == sorted(cards)
                shown += cards
            elif kind == "shoe_started":
                assert tokens == [json.loads(frame)["burn_card"]]
            elif kind == "round_settled":
                assert tokens == []
            else:
                assert tokens == [], frame
        view = p.encode(snapshot).decode()
        assert set(CARD_TOKEN.findall(view)) <= set(shown), view
        hands = json.loads(view)["hands"]
        assert [c for h in hands for c in h["cards"]] == shown[: 2 * len(hands)]
    return revealed


def test_no_card_identity_before_its_reveal_auto() -> None:
    e = auto_engine(EARLY_CUT)
    steps = [(e.open_betting(T0), e.snapshot())]
    while len(steps) < 400:
        steps.append((tick_due(e), e.snapshot()))
    assert _check_no_leak(steps) > 60


def test_no_card_identity_before_its_reveal_manual() -> None:
    e = opened_manual()
    steps: list[tuple[Step, p.TableSnapshot]] = []
    for _ in range(3):
        steps.append((e.open_betting(T0), e.snapshot()))
        steps += [(s, e.snapshot()) for s in finish_round(e, T0, MANUAL_CARDS)]
    assert _check_no_leak(steps) == 18


def test_hand_cards_appear_first_in_their_own_reveal() -> None:
    e = opened_manual()
    e.open_betting(T0)
    frames_so_far: list[str] = []
    reveals: dict[str, int] = {}
    for step in finish_round(e, T0, MANUAL_CARDS):
        for ev in step.events:
            frame = p.encode(ev).decode()
            if isinstance(ev, p.HandRevealed):
                reveals[ev.hand] = len(frames_so_far)
            frames_so_far.append(frame)
    for pos, cards in hands_of(MANUAL_CARDS).items():
        first = min(i for i, f in enumerate(frames_so_far) if all(c in f for c in cards))
        assert first == reveals[pos.value]


# --- settlement effect and rules ---------------------------------------------------------------


def test_settlement_effect_equals_the_rules_over_many_rounds() -> None:
    e = auto_engine(seed=2024)
    e.open_betting(T0)
    hands: dict[str, list[str]] = {}
    checked = 0
    while checked < 300:
        step = tick_due(e)
        for ev in step.events:
            if isinstance(ev, p.HandRevealed):
                hands[ev.hand] = ev.cards
        for ef in effects(step):
            if ef["type"] != "settle_round":
                continue
            assert ef["cards"] == hands
            evaluated = {Position(k): hand_of(parse_cards(" ".join(v))) for k, v in hands.items()}
            rules = {k.value: [v.outcome, v.odds, v.returned_multiple]
                     for k, v in settle_round(evaluated).items()}
            assert ef["spots"] == rules
            hands = {}
            checked += 1


# --- serialisation and recovery --------------------------------------------------------------


@pytest.mark.parametrize("mode", ["auto", "manual"])
def test_rebuilt_after_every_step_behaves_identically(mode: Mode) -> None:
    a = auto_engine(EARLY_CUT) if mode == "auto" else opened_manual()
    b = TableEngine.from_bytes(a.to_bytes(), rng=random.Random(SEED))
    a.rng = random.Random(SEED)
    for _ in range(4):  # MANUAL_CARDS holds two 2C: four rounds use all eight
        sa, sb = a.open_betting(T0), b.open_betting(T0)
        assert frames(sa) == frames(sb)
        b = TableEngine.from_bytes(b.to_bytes(), rng=b.rng)
        ra = finish_round(a, T0, MANUAL_CARDS)
        for step in ra:
            b = TableEngine.from_bytes(b.to_bytes(), rng=b.rng)
            if b.phase == "paused":
                other = b.resume(T0)
            elif mode == "auto":
                other = b.tick(max(T0, b.next_deadline() or T0))
            else:
                other = next(iter(finish_round(b, T0, MANUAL_CARDS[len(b.state.round_cards):])))
            assert frames(step) == frames(other)
            assert effects(step) == effects(other)
            assert a.to_bytes() == b.to_bytes()


RECOVER_CASES = [(phase, frm) for phase, frm in CANCELLABLE] + [
    ("settled", ""), ("cancelled", ""), ("idle", "")]


@pytest.mark.parametrize("mode", ["auto", "manual"])
@pytest.mark.parametrize(("phase", "paused_from"), RECOVER_CASES)
def test_recover(mode: Mode, phase: str, paused_from: str) -> None:
    crashed = engine_in(phase, mode, paused_from or "betting")
    e = TableEngine.from_bytes(crashed.to_bytes(), rng=random.Random(5))
    before = state(e)
    now = T0 + 10**6
    step, diff = act(e, "recover", now)
    underlying = paused_from or phase
    types = [f["type"] for f in frames(step)]
    if underlying in ("betting", "dealing"):
        # Not every card is recorded: the round is cancelled and every bet refunded.
        assert types == ["round_cancelled"]
        assert [ef["type"] for ef in effects(step)] == ["cancel_round"]
        assert e.phase == "cancelled"
    elif underlying == "revealing":
        # Every card is recorded: the round goes on and settles.
        assert types == (["table_resumed"] if phase == "paused" else [])
        assert step.effects == []
        assert e.phase == "revealing"
        if mode == "auto":
            assert e.next_deadline() == now + REVEAL_MS
        assert diff.get("round_cards", before["round_cards"]) == before["round_cards"]
    else:
        assert step.events == [] and step.effects == []
        assert e.phase == phase
        assert diff == ({"next_at": now + BETWEEN_MS} if mode == "auto" else {})
    # Never both, never neither: exactly one of settle or cancel for the round.
    later = list(finish_round(e, now, MANUAL_CARDS[len(e.state.round_cards):]))
    ends = [ef["type"] for s in [step, *later] for ef in effects(s)
            if ef["type"] in ("settle_round", "cancel_round")]
    if underlying in ("betting", "dealing"):
        assert ends == ["cancel_round"]
    elif underlying == "revealing":
        assert ends == ["settle_round"]
        assert e.phase == "settled"
    else:
        assert ends == []


def test_recover_twice_changes_nothing_more() -> None:
    e = engine_in("dealing", "auto")
    e = TableEngine.from_bytes(e.to_bytes())
    e.recover(T0 + 10**6)
    again = e.recover(T0 + 10**6)
    assert again.events == [] and again.effects == []


def test_snapshot_fields() -> None:
    e = engine_in("revealing", "manual")
    snap = e.snapshot()
    assert (snap.id, snap.phase, snap.mode, snap.round_id) == ("t1", "revealing", "manual",
                                                               "t1.1.1")
    assert snap.closes_at is None
    assert snap.dealt == {pos.value: 2 for pos in DEAL_ORDER}
    assert [h.hand for h in snap.hands] == ["P1"]
    assert snap.cards_left == 416 - 6 - 13
    assert (snap.epoch, snap.seq) == (e.state.epoch, e.state.seq)


# --- dealt while betting is open ---------------------------------------------------------------


@pytest.mark.parametrize("mode", ["auto", "manual"])
def test_no_card_identity_while_betting_is_open(mode: Mode) -> None:
    e = auto_engine() if mode == "auto" else opened_manual()
    steps = [(e.open_betting(T0), e.snapshot())]
    if mode == "auto":
        steps.append((e.tick(T0 + 13 * DEAL_MS), e.snapshot()))
    else:
        steps += [(e.card(c, T0 + 1), e.snapshot()) for c in MANUAL_CARDS]
    assert e.phase == "betting" and len(e.state.round_cards) == 13
    assert e.snapshot().dealt == {pos.value: 2 for pos in DEAL_ORDER}
    assert _check_no_leak(steps) == 0  # thirteen cards out, not one of them shown


# --- card corrections ------------------------------------------------------------------------


def test_void_the_last_cards_during_betting() -> None:
    e = opened_manual()
    e.open_betting(T0)
    for card in ["2C", "9H", "KS", "4H", "5D"]:  # 5D was a mis-scan of 5H
        e.card(card, T0 + 1)
    seen_before = dict(e.state.shoe.seen) if e.state.shoe else {}
    step, diff = act(e, "void_cards", 2, "Dee", "Sue", T0 + 2)
    assert step.detail == {"voided": [{"slot": "P3", "n": 1, "card": "4H"},
                                      {"slot": "P4", "n": 1, "card": "5D"}]}
    assert [strip(f) for f in frames(step)] == [{
        "type": "cards_voided", "round_id": "t1.1.1", "count": 2,
        "dealt": {"P1": 1, "P2": 1}, "dealer": "Dee", "supervisor": "Sue",
        "cards_left": 416 - e.state.shoe.drawn}]  # type: ignore[union-attr]  # dealt from it
    assert step.effects == []
    assert diff["round_cards"] == ["2C", "9H", "KS"]
    assert diff["shoe"]["drawn"] == 6 + 5 - 2  # the opening card, five burned, three dealt
    assert diff["shoe"]["seen"] == {k: v for k, v in seen_before.items()
                                    if k not in ("4H", "5D")}
    assert e.phase == "betting" and e.snapshot().dealt == {"P1": 1, "P2": 1}
    # The dealer scans the right cards; the round completes with them.
    e.card("4H", T0 + 3)
    e.card("5H", T0 + 3)
    for card in MANUAL_CARDS[5:]:
        e.card(card, T0 + 4)
    cards = list(e.state.round_cards)
    assert cards == [*MANUAL_CARDS[:4], "5H", *MANUAL_CARDS[5:]]
    settled = [ef for s in finish_round(e, T0 + 5, []) for ef in effects(s)
               if ef["type"] == "settle_round"]
    assert settled[0]["cards"] == {pos.value: cs for pos, cs in hands_of(cards).items()}


def test_void_after_the_close_before_the_first_reveal_goes_back_to_dealing() -> None:
    e = opened_manual()
    e.open_betting(T0)
    for card in MANUAL_CARDS:
        e.card(card, T0 + 1)
    e.close_betting(T0 + 2)
    assert e.phase == "revealing"
    _, diff = act(e, "void_cards", 1, "Dee", "Sue", T0 + 3)
    assert diff["phase"] == "dealing" and len(diff["round_cards"]) == 12
    assert refused(e, "reveal", T0 + 4).code == "illegal_command"
    e.card("QD", T0 + 5)
    assert e.phase == "revealing"
    e.reveal(T0 + 6)
    # After a reveal, no correction: the hands are public.
    before = e.to_bytes()
    assert refused(e, "void_cards", 1, "Dee", "Sue", T0 + 7).code == "illegal_command"
    same_future(e, before)


@pytest.mark.parametrize("count", [0, 4, 14, -1])
def test_void_more_cards_than_dealt_is_refused(count: int) -> None:
    e = engine_in("betting", "manual")  # three cards out
    before = e.to_bytes()
    assert refused(e, "void_cards", count, "Dee", "Sue", T0 + 500).code == "bad_command"
    same_future(e, before)


@pytest.mark.parametrize("phase", ["betting", "dealing"])
def test_void_in_auto_mode_is_refused(phase: str) -> None:
    e = engine_in(phase, "auto")
    before = e.to_bytes()
    assert refused(e, "void_cards", 1, "Dee", "Sue", T0 + 500).code == "wrong_mode"
    same_future(e, before)


def test_voided_cards_go_back_to_the_shoe_count() -> None:
    e = manual_engine()
    e.start_shoe(T0)
    e.card("KH", T0)  # 1 KH out
    e.open_betting(T0)
    for _ in range(7):  # KH 2 … 8
        e.card("KH", T0 + 1)
    e.void_cards(2, "Dee", "Sue", T0 + 2)  # two of them were a stuck scanner
    e.card("KH", T0 + 3)
    e.card("KH", T0 + 3)  # eight again: legal
    with pytest.raises(EngineError) as info:
        e.card("KH", T0 + 4)
    assert info.value.code == "impossible_card"


def test_entered_cards_for_the_dealer_console() -> None:
    e = engine_in("betting", "manual")
    assert e.entered_cards() == [{"slot": "burn", "card": "2C"},
                                 {"slot": "P1", "n": 1, "card": "9H"},
                                 {"slot": "P2", "n": 1, "card": "KS"}]
    with pytest.raises(EngineError) as info:
        engine_in("betting", "auto").entered_cards()
    assert info.value.code == "wrong_mode"  # the server's shoe stays secret


def test_the_snapshot_carries_the_rules_multiples_and_odds() -> None:
    """The page takes what a bet deducts and the odds it is paid at from the snapshot: they
    are what the one settlement function pays, for a winning Pair bet and each Player odds."""
    from livetable.rules import settle_bet

    payouts = TableEngine.new("t1").snapshot().payouts
    assert payouts is not None
    pair, player = BetSpot.P1_PAIR, BetSpot.P1
    assert payouts.pair_deducted == pair.deducted_multiple == 1
    assert payouts.player_deducted == player.deducted_multiple == 2
    won_pair = settle_bet(pair, 10, hand_of(parse_cards("7S 7H")), hand_of(parse_cards("9S KH")))
    assert won_pair.odds == payouts.pair_odds and won_pair.returned == 10 * (1 + payouts.pair_odds)
    strong = settle_bet(player, 10, hand_of(parse_cards("4S 5S")), hand_of(parse_cards("2H 5C")))
    plain = settle_bet(player, 10, hand_of(parse_cards("4S 5H")), hand_of(parse_cards("2H 5C")))
    assert sorted({strong.odds, plain.odds}) == payouts.player_odds
    wire = json.loads(p.encode(TableEngine.new("t1").snapshot()))
    assert wire["payouts"] == {"player_deducted": 2, "pair_deducted": 1,
                               "player_odds": [1, 2], "pair_odds": 11}
