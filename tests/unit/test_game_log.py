"""The game log of a shoe (docs/security.md, "The game log"): every round chained by hash
from the shoe's commitment, its head published live, and a record that is cut short, reordered
or recast refused by ``check_shoe`` and ``livetable verify-shoe``.

A real shoe is dealt by the engine into a sealed SQLite store, as the runner does it; the
heads are those the engine published in ``round_settled`` / ``round_cancelled`` and
``shoe_revealed``. Each link is recomputed here with :mod:`hmac` from the format written in
docs/security.md, not with the code under test.
"""

from __future__ import annotations

import hashlib
import hmac
import random
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

from livetable import protocol as p
from livetable.cli import main
from livetable.engine import TableEngine, Timing
from livetable.rules.fairness import ShoeRecord, chain_heads, check_shoe, round_slots
from livetable.store.sealing import StateSeal
from livetable.store.sqlite import SQLiteStore

T0 = 1_700_000_000_000
KEY = b"unit-test-shoe-key-0123456789abcdef-0123"
#: The cut card 300 cards from the end: the shoe ends by it after about eight rounds.
SHOE = Timing(cut_range=(300, 300), betting_ms=1_000)


class Dealt(msgspec.Struct):
    record: ShoeRecord
    #: The heads the table published live, in order: one per round, then the reveal's.
    heads: list[str]
    revealed: p.ShoeRevealed


async def deal(store: SQLiteStore, set_aside_after: int | None = None) -> Dealt:
    """Deal shoe t1.1 to its end (its cut card; or set aside after round
    ``set_aside_after``), round 2 cancelled mid-deal; what was published, and the record."""
    e = TableEngine.new("t1", timing=SHOE, rng=random.Random(5))
    now, heads, revealed = T0, [], None
    for _ in range(5_000):
        due = e.next_deadline()
        now = due if due is not None else now + 1
        step = e.tick(now) if due is not None else e.open_betting(now)
        if (e.state.round_no == 2 and e.phase in ("betting", "dealing")
                and len(e.state.round_cards) == 4):
            step.extend(e.cancel_round("camera down", now))
        if e.state.round_no == set_aside_after and e.phase == "settled":
            step.extend(e.set_mode("manual", now))
        await store.commit_step("t1", e.to_bytes(),
                                [(ev.epoch, ev.seq, p.encode(ev)) for ev in step.events],
                                step.effects, now)
        for ev in step.events:
            if isinstance(ev, p.RoundSettled | p.RoundCancelled):
                assert ev.chain_head is not None
                heads.append(ev.chain_head)
            if isinstance(ev, p.ShoeRevealed):
                revealed = ev
        if revealed is not None:
            break
    assert revealed is not None
    record = await store.shoe_view("t1.1")
    assert record is not None
    return Dealt(record=record, heads=heads, revealed=revealed)


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SQLiteStore]:
    s = SQLiteStore(tmp_path / "db.sqlite3", seal=StateSeal(KEY))
    yield s
    await s.close()


@pytest.fixture
async def dealt(store: SQLiteStore) -> Dealt:
    return await deal(store)


def copy(record: ShoeRecord) -> ShoeRecord:
    return msgspec.json.decode(msgspec.json.encode(record), type=ShoeRecord)


def link(salt: str, previous: str, round_id: str, state: str, at: int, cards: list[str],
         spots: dict[str, str]) -> str:
    """docs/security.md's format, written out again."""
    outcomes = ",".join(f"{k}={spots[k]}" for k in sorted(spots))
    text = f"{previous}\n{round_id}\n{state}\n{at}\n{','.join(cards)}\n{outcomes}"
    return hmac.new(salt.encode(), text.encode(), hashlib.sha256).hexdigest()


async def test_the_heads_published_live_are_the_records_game_log(dealt: Dealt) -> None:
    record = dealt.record
    assert check_shoe(record, seen_commitment=record.commitment,
                      seen_heads=dealt.heads) == []
    assert record.ended_by == "cut_card" and record.round_count == len(record.rounds) >= 6
    assert [r.state for r in record.rounds][:3] == ["settled", "cancelled", "settled"]
    head = record.commitment
    expected = []
    for at, rnd in zip(round_slots(record), record.rounds, strict=True):
        assert rnd.at is not None and rnd.spots is not None
        head = link(record.salt, head, rnd.round_id, rnd.state, rnd.at,
                    record.order[at:at + rnd.dealt], rnd.spots)
        expected.append(head)
    assert dealt.heads == expected == chain_heads(record)
    assert record.rounds[0].spots and record.rounds[1].spots == {}
    revealed = dealt.revealed
    assert (revealed.chain_head, revealed.round_count, revealed.ended_by) == (
        record.chain_head, len(record.rounds), "cut_card")
    assert record.chain_head == expected[-1]


def recast_last_as_cancelled(s: ShoeRecord) -> ShoeRecord:
    last = s.rounds[-1]
    last.state, last.dealt, last.spots = "cancelled", 0, {}
    last.cards = {k: [] for k in (last.cards or {})}
    return s


def cut(keep: slice) -> Any:
    def tamper(s: ShoeRecord) -> ShoeRecord:
        s.rounds = s.rounds[keep]
        return s
    return tamper


def reorder(s: ShoeRecord) -> ShoeRecord:
    s.rounds = [*s.rounds[:2], s.rounds[3], s.rounds[2], *s.rounds[4:]]
    return s


#: The attacks: the record's tail cut, or its last round recast; nothing else changed.
CUT: dict[str, Any] = {
    "the last round removed": cut(slice(None, -1)),
    "the last four rounds removed": cut(slice(None, -4)),
    "every round removed": cut(slice(0, 0)),
    "the last round recast as cancelled with no cards": recast_last_as_cancelled,
    "two rounds reordered": reorder,
}


@pytest.mark.parametrize("name", sorted(CUT))
async def test_a_record_cut_short_or_recast_is_refused(dealt: Dealt, name: str,
                                                       tmp_path: Path) -> None:
    forged = CUT[name](copy(dealt.record))
    assert check_shoe(forged), name
    saved = tmp_path / "cut.json"
    saved.write_bytes(msgspec.json.encode(forged))
    assert main(["verify-shoe", "t1.1", "--file", str(saved)]) == 1


def rechained(forged: ShoeRecord) -> ShoeRecord:
    """A forger's record: its count and its game log's head recomputed to match."""
    forged.round_count = len(forged.rounds)
    heads = chain_heads(forged)
    forged.chain_head = heads[-1] if heads else forged.commitment
    return forged


@pytest.mark.parametrize("name", sorted(CUT))
async def test_a_forger_who_recomputes_the_log_is_caught(dealt: Dealt, name: str) -> None:
    """The shoe ended by its cut card: its last round must take it out; and any head seen
    live after the cut is in no round of the forged record."""
    forged = rechained(CUT[name](copy(dealt.record)))
    assert check_shoe(forged), name
    problems = check_shoe(forged, seen_heads=[dealt.heads[-1]])
    assert any("you saw published" in p for p in problems), problems


async def test_a_shoe_set_aside_is_held_to_the_heads_seen(store: SQLiteStore,
                                                          tmp_path: Path) -> None:
    """A shoe set aside never took its cut card: a forger who cuts its tail and recomputes
    the log leaves a record consistent in itself; the head a player saw refuses it."""
    dealt = await deal(store, set_aside_after=5)
    record = dealt.record
    assert record.ended_by == "set_aside" and record.round_count == 5
    assert check_shoe(record, seen_heads=dealt.heads) == []
    forged = rechained(CUT["the last round removed"](copy(record)))
    assert check_shoe(forged) == []
    assert check_shoe(forged, seen_heads=dealt.heads[:-1]) == []  # those rounds are in it
    assert check_shoe(forged, seen_heads=[dealt.heads[-1]])
    saved = tmp_path / "forged.json"
    saved.write_bytes(msgspec.json.encode(forged))
    assert main(["verify-shoe", "t1.1", "--file", str(saved)]) == 0
    assert main(["verify-shoe", "t1.1", "--file", str(saved),
                 "--head", dealt.heads[-1]]) == 1
    relabelled = rechained(CUT["the last round removed"](copy(record)))
    relabelled.ended_by = "cut_card"
    assert check_shoe(relabelled)


async def test_a_record_without_a_game_log_is_not_verified(dealt: Dealt) -> None:
    """A record that drops the log's facts (to pass for an older one) is refused."""
    bare = copy(dealt.record)
    bare.ended_by = bare.round_count = bare.chain_head = None
    problems = check_shoe(bare)
    assert any("why the shoe ended" in p for p in problems)
    assert any("rounds were cut or added" in p for p in problems)


@pytest.mark.parametrize("phase", ["betting", "revealing", "settled"])
async def test_a_retired_shoe_ends_restored_and_verifies(store: SQLiteStore,
                                                         phase: str) -> None:
    """What a runner does when its store was restored (host/restores.py): the round in
    play is recovered as after a crash (cancelled while betting, settled while revealing),
    and the shoe ends with it — or at once, between rounds — revealed ``restored``; the next
    round deals from a new shoe."""
    e = TableEngine.new("t1", timing=SHOE, rng=random.Random(9))
    now = T0
    published: list[p.TableEvent] = []

    async def commit(step: Any) -> None:
        published.extend(step.events)
        await store.commit_step("t1", e.to_bytes(),
                                [(ev.epoch, ev.seq, p.encode(ev)) for ev in step.events],
                                step.effects, now)

    await commit(e.open_betting(now))
    while not (e.state.round_no == 2 and e.phase == phase):
        due = e.next_deadline()
        assert due is not None
        now = due
        await commit(e.tick(now))
    step = e.recover(now)
    e.shoes.retire(step, "restored")
    await commit(step)
    while e.state.shoe is not None and e.state.shoe.shoe_id == "t1.1":
        due = e.next_deadline()
        assert due is not None
        now = due
        await commit(e.tick(now))
    (revealed,) = [ev for ev in published if isinstance(ev, p.ShoeRevealed)]
    assert revealed.ended_by == "restored" and revealed.round_count == 2
    record = await store.shoe_view("t1.1")
    assert record is not None and record.ended_by == "restored"
    assert record.rounds[-1].state == ("cancelled" if phase == "betting" else "settled")
    heads = [ev.chain_head for ev in published
             if isinstance(ev, p.RoundSettled | p.RoundCancelled) and ev.chain_head]
    assert check_shoe(record, seen_heads=heads) == []
    assert e.state.round_id == "t1.2.1"
