"""The Store contract (livetable/store/base.py), checked on every implementation.

Every test here takes the parametrised ``store`` fixture, so it runs once per entry of
:data:`STORE_FACTORIES`. Adding an implementation is one line in that dict: an async
factory taking the pytest ``request`` (for ``tmp_path`` or a server fixture, through
``request.getfixturevalue``) and ``event_retention`` (how many events per table the log
keeps for resume).

The tests drive the store the way the runner does — ``commit_step`` with engine effects
(:class:`OpenRound`, :class:`SetBetting`, :class:`SettleRound`, :class:`CancelRound`) — but
build those effects by hand, so that each test says exactly what the ledger was told. The
money expected back is written out from docs/design.md §1 (and cross-checked with
:func:`settle_bet`), as the seed's examples are.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any, Literal

import msgspec
import pytest
from bets import place_bet

from livetable import protocol as p
from livetable.accounts import AccountError
from livetable.betting.slips import REJECTIONS, BetRequest, Rejection, SlipRequest
from livetable.engine import CancelRound, OpenRound, RevealShoe, SetBetting, SettleRound
from livetable.rules import (
    DECK,
    BetSpot,
    Position,
    hand_of,
    parse_cards,
    settle_bet,
    settle_round,
)
from livetable.rules.fairness import ShoeRecord, ShoeRound
from livetable.store import SQLiteStore, Store
from livetable.store.base import OutOfStep, UnknownPlayer
from livetable.store.bets import Withdrawal
from livetable.store.sealing import StateSeal
from livetable.store.sqlite import DEFAULT_EVENT_RETENTION

StoreFactory = Callable[[pytest.FixtureRequest, int], Awaitable[Store]]


async def _sqlite_memory(request: pytest.FixtureRequest, event_retention: int) -> Store:
    return SQLiteStore(":memory:", event_retention=event_retention)


async def _sqlite_file(request: pytest.FixtureRequest, event_retention: int) -> Store:
    tmp_path = request.getfixturevalue("tmp_path")
    return SQLiteStore(tmp_path / "livetable.db", event_retention=event_retention)


#: The key a store seals engine states with (store/sealing.py), as the server's stores do.
SEAL = StateSeal(b"contract-test-shoe-key-0123456789abcdef")


async def _sqlite_sealed(request: pytest.FixtureRequest, event_retention: int) -> Store:
    tmp_path = request.getfixturevalue("tmp_path")
    return SQLiteStore(tmp_path / "livetable.db", event_retention=event_retention, seal=SEAL)


async def _sqlite_process(request: pytest.FixtureRequest, event_retention: int) -> Store:
    """The store as ``livetable serve`` runs it: its writer in a child process."""
    tmp_path = request.getfixturevalue("tmp_path")
    return SQLiteStore(tmp_path / "livetable.db", event_retention=event_retention, seal=SEAL,
                       writer="process")


#: Every Store implementation under contract (tests/integration/test_pg_contract.py adds
#: the PostgreSQL store).
STORE_FACTORIES: dict[str, StoreFactory] = {
    "sqlite-memory": _sqlite_memory,
    "sqlite-file": _sqlite_file,
    "sqlite-sealed": _sqlite_sealed,
    "sqlite-process": _sqlite_process,
}

T0 = 1_700_000_000_000
TABLE = "t1"
R1, R2 = "t1.1.1", "t1.1.2"
CLOSES = T0 + 15_000
#: Distinct minimums and maximums, so that each limit is seen to apply to its own spots.
LIMITS = p.Limits(min=20, max=500, pair_min=5, pair_max=100, round_max=2_000)


#: The stores that start a process (their writer's): marked so, out of bin/test --fast.
STARTS_A_PROCESS = {"sqlite-process"}


@pytest.fixture(params=[pytest.param(name, marks=pytest.mark.process)
                        if name in STARTS_A_PROCESS else name for name in sorted(STORE_FACTORIES)])
async def make_store(
    request: pytest.FixtureRequest,
) -> AsyncIterator[Callable[..., Awaitable[Store]]]:
    made: list[Store] = []

    async def make(event_retention: int = DEFAULT_EVENT_RETENTION) -> Store:
        store = await STORE_FACTORIES[request.param](request, event_retention)
        made.append(store)
        return store

    yield make
    for store in made:
        await store.close()


@pytest.fixture
async def store(make_store: Callable[..., Awaitable[Store]]) -> Store:
    return await make_store()


# --- helpers ----------------------------------------------------------------------------------


async def commit(store: Store, *effects: Any, now: int = T0,
                 events: list[tuple[int, int, bytes]] | None = None) -> list[Any]:
    return await store.commit_step(TABLE, b'{"state": 1}', events or [], list(effects), now)


async def refused(store: Store, *effects: Any, now: int = T0) -> None:
    """A step of ``effects`` is refused as out of step, and nothing of it is written: the
    ledger, the rounds and the table's state are as they were."""
    rounds = [getattr(e, "round_id", R1) for e in effects]
    before = ([await store.round_view(r) for r in rounds], await store.audit(),
              await store.load_table(TABLE))
    with pytest.raises(OutOfStep):
        await commit(store, *effects, now=now)
    assert ([await store.round_view(r) for r in rounds], await store.audit(),
            await store.load_table(TABLE)) == before


async def open_round(store: Store, round_id: str = R1, closes_at: int = CLOSES,
                     table: str = TABLE, now: int = T0) -> None:
    round_no = int(round_id.rsplit(".", 1)[1])
    await store.commit_step(table, b"{}", [], [OpenRound(
        table=table, round_id=round_id, shoe_id=round_id.rsplit(".", 1)[0], round_no=round_no,
        closes_at=closes_at, limits=LIMITS)], now)


def betting(status: Literal["betting", "paused", "closed"], round_id: str = R1,
            closes_at: int | None = None) -> SetBetting:
    return SetBetting(table=TABLE, round_id=round_id, status=status, closes_at=closes_at)


def settle_effect(round_id: str, cards: dict[str, str]) -> SettleRound:
    """The SettleRound effect of a round dealt ``cards`` (position → "9D 7C"), by the rules."""
    hands = {Position(pos): hand_of(parse_cards(text)) for pos, text in cards.items()}
    spots: dict[str, tuple[str, int, int]] = {
        k.value: (v.outcome, v.odds, v.returned_multiple) for k, v in settle_round(hands).items()}
    return SettleRound(table=TABLE, round_id=round_id, spots=spots,
                       cards={pos: text.split() for pos, text in cards.items()})


def cancel(round_id: str = R1, reason: str = "camera down") -> CancelRound:
    return CancelRound(table=TABLE, round_id=round_id, reason=reason)


def bet(player: str, bet_id: str, spot: str, amount: int, round_id: str = R1,
        table: str = TABLE) -> BetRequest:
    return BetRequest(player_id=player, table=table, bet_id=bet_id, round_id=round_id,
                      spot=spot, amount=amount)


async def balance(store: Store, player: str) -> int:
    view = await store.player(player)
    assert view is not None
    return view.balance


async def accepted(store: Store, request: BetRequest, now: int = T0 + 1) -> p.BetAccepted:
    answer = await place_bet(store, request, now)
    assert isinstance(answer, p.BetAccepted), answer
    return answer


async def ledger_view(store: Store, players: list[str]) -> tuple[object, ...]:
    report = await store.audit()
    assert report.ok, report.problems
    records = [await store.bet_record(pid, 200, None) for pid in players]
    return (report.total, report.deposits, report.house,
            [await balance(store, pid) for pid in players], records)


async def rejected(store: Store, request: BetRequest, code: str, now: int = T0 + 1) -> None:
    """``request`` is refused with ``code``, and no balance, bet or record moved."""
    players = ["alice", "bob"]
    before = await ledger_view(store, players)
    answer = await place_bet(store, request, now)
    assert isinstance(answer, p.BetRejected), answer
    assert answer.code == code
    assert answer.message.startswith(REJECTIONS[code])
    assert answer.bet_id == request.bet_id[:64]
    assert await ledger_view(store, players) == before


@pytest.fixture
async def table(store: Store) -> Store:
    """A store with two players and round R1 open for bets until CLOSES."""
    await store.ensure_player("alice", "Alice", 10_000, T0)
    await store.ensure_player("bob", "Bob", 999, T0)
    await open_round(store)
    return store


# --- players and deposits -------------------------------------------------------------------


async def test_ensure_player_is_idempotent_with_one_opening_deposit(store: Store) -> None:
    view = await store.ensure_player("alice", "Alice", 1_000, T0)
    assert view == p.PlayerView(id="alice", name="Alice", balance=1_000)
    again = await store.ensure_player("alice", "Alice B.", 5_000, T0 + 1)
    assert again == p.PlayerView(id="alice", name="Alice B.", balance=1_000)
    assert await store.player("alice") == again
    assert (await store.ensure_player("bob", "Bob", 0, T0)).balance == 0
    assert await store.player("nobody") is None
    report = await store.audit()
    assert (report.ok, report.total, report.deposits, report.house) == (True, 0, 1_000, 0)


async def test_deposit_is_idempotent_by_id(store: Store) -> None:
    await store.ensure_player("alice", "Alice", 1_000, T0)
    assert await store.deposit("d1", "alice", 500, T0) == 1_500
    assert await store.deposit("d1", "alice", 500, T0 + 1) == 1_500
    assert await store.deposit("d2", "alice", 250, T0 + 2) == 1_750
    with pytest.raises(UnknownPlayer):
        await store.deposit("d3", "nobody", 10, T0)
    report = await store.audit()
    assert (report.ok, report.deposits) == (True, 1_750)


async def test_withdraw_many_does_each_once_and_says_why_not_for_the_rest(
        store: Store) -> None:
    """A round's close takes every player's money out in one call (the seamless wallet's
    credits and rollbacks): one that cannot be done does not stop the others."""
    await store.ensure_player("alice", "Alice", 200, T0)
    await store.deposit("d1", "alice", 100, T0)
    assert await store.withdraw_many([
        Withdrawal("w1", "alice", 100),
        Withdrawal("w2", "alice", 1_000),  # more than she holds
        Withdrawal("w3", "nobody", 1),
        Withdrawal("w4", "alice", 50, against="never-made"),  # nothing to take back
        Withdrawal("w1", "alice", 100),  # once by its id
        Withdrawal("w5", "alice", 150, against="d1"),
    ], T0) == [None, "InsufficientBalance: withdraw w2: 'alice' holds 200, not 1000",
               "UnknownPlayer: no player 'nobody'", None, None, None]
    assert await balance(store, "alice") == 50
    assert await store.withdraw_many([], T0) == []
    assert (await store.audit()).ok


# --- place_bet: every rejection, and that it changes nothing ------------------------------------


async def test_unknown_round(table: Store) -> None:
    await rejected(table, bet("alice", "b1", "P1", 100, round_id="t1.9.9"), "unknown_round")
    # A round of another table is unknown at this one.
    await open_round(table, "t2.1.1", table="t2")
    await rejected(table, bet("alice", "b1", "P1", 100, round_id="t2.1.1"), "unknown_round")
    await accepted(table, bet("alice", "b1", "P1", 100, round_id="t2.1.1", table="t2"))


async def test_betting_closed_by_the_callers_clock(table: Store) -> None:
    await accepted(table, bet("alice", "b0", "P1", 100), now=CLOSES - 1)
    await rejected(table, bet("alice", "b1", "P1", 100), "betting_closed", now=CLOSES)
    await rejected(table, bet("alice", "b1", "P1", 100), "betting_closed", now=CLOSES + 5_000)


async def test_betting_closed_after_set_betting_closed(table: Store) -> None:
    await commit(table, betting("closed"))
    await rejected(table, bet("alice", "b1", "P1", 100), "betting_closed", now=T0 + 2)


async def test_a_bet_that_arrived_in_time_is_taken_after_the_close_step(table: Store) -> None:
    # Judged by when it reached the gateway: a busy server may store the close (at
    # closes_at plus the grace) before it gets to a bet that arrived before closes_at.
    await commit(table, betting("closed"), now=CLOSES + 1_000)
    await accepted(table, bet("alice", "b1", "P1", 100), now=CLOSES - 1)
    await rejected(table, bet("alice", "b2", "P1", 100), "betting_closed", now=CLOSES)
    # until the round starts settling: then it is too late, even for an on-time bet
    settled = await commit(table, settle_effect(R1, ROUND_A), now=CLOSES + 5_000)
    assert [s.message.bet_id for s in settled] == ["b1"]
    await rejected(table, bet("alice", "b3", "P1", 100), "betting_closed", now=CLOSES - 1)


async def test_a_dealers_early_close_is_the_deadline(table: Store) -> None:
    await commit(table, betting("closed"), now=T0 + 5_000)
    await accepted(table, bet("alice", "b1", "P1", 100), now=T0 + 4_999)
    await rejected(table, bet("alice", "b2", "P1", 100), "betting_closed", now=T0 + 5_000)


async def test_betting_closed_after_the_round_ended(table: Store) -> None:
    await open_round(table, R2)
    await commit(table, cancel(R1))
    await rejected(table, bet("alice", "b1", "P1", 100), "betting_closed")
    await commit(table, settle_effect(R2, ROUND_A))
    await rejected(table, bet("alice", "b1", "P1", 100, round_id=R2), "betting_closed")


async def test_paused_then_resumed(table: Store) -> None:
    await commit(table, betting("paused"))
    await rejected(table, bet("alice", "b1", "P1", 100), "paused", now=T0 + 2)
    await rejected(table, bet("alice", "b1", "P1", 100), "paused", now=CLOSES + 10)
    # Resumed with a later deadline: bets are taken past the original one.
    await commit(table, betting("betting", closes_at=CLOSES + 20_000))
    await accepted(table, bet("alice", "b1", "P1", 100), now=CLOSES + 10)
    await rejected(table, bet("alice", "b2", "P1", 100), "betting_closed", now=CLOSES + 20_000)


async def test_below_min(table: Store) -> None:
    await rejected(table, bet("alice", "b1", "P1", 19), "below_min")
    await rejected(table, bet("alice", "b1", "P3_PAIR", 4), "below_min")
    await accepted(table, bet("alice", "b1", "P1", 20))
    await accepted(table, bet("alice", "b2", "P3_PAIR", 5))


async def test_above_max_including_several_bets_on_one_spot(table: Store) -> None:
    await rejected(table, bet("alice", "b1", "P1", 501), "above_max")
    await rejected(table, bet("alice", "b1", "P2_PAIR", 101), "above_max")
    await accepted(table, bet("alice", "b1", "P1", 300))
    await rejected(table, bet("alice", "b2", "P1", 201), "above_max")
    await accepted(table, bet("alice", "b2", "P1", 200))  # 500 on P1: the maximum
    await rejected(table, bet("alice", "b3", "P1", 20), "above_max")
    await accepted(table, bet("alice", "b3", "P2", 300))  # the maximum is per spot
    await accepted(table, bet("alice", "b4", "P2_PAIR", 60))
    await rejected(table, bet("alice", "b5", "P2_PAIR", 41), "above_max")
    # … and per player: Bob's bets do not count against Alice's.
    await accepted(table, bet("bob", "b1", "P1", 20))


async def test_round_limit(table: Store) -> None:
    await accepted(table, bet("alice", "b1", "P1", 500))  # deducts 1000
    await accepted(table, bet("alice", "b2", "P2", 495))  # deducts 990: 1990 in the round
    await rejected(table, bet("alice", "b3", "P3", 20), "round_limit")  # would be 2030
    await rejected(table, bet("alice", "b3", "P3_PAIR", 11), "round_limit")  # would be 2001
    await accepted(table, bet("alice", "b3", "P3_PAIR", 10))  # 2000: the limit itself
    # The limit is per round: the next round starts from nothing.
    await open_round(table, R2)
    await accepted(table, bet("alice", "b4", "P1", 500, round_id=R2))


async def test_insufficient_funds_counts_the_withholding(table: Store) -> None:
    # Bob has 999: a Player bet of 500 deducts 1000 (bet + withholding).
    await rejected(table, bet("bob", "b1", "P1", 500), "insufficient_funds")
    answer = await accepted(table, bet("bob", "b1", "P1_PAIR", 100))  # a Pair deducts 1×
    assert (answer.deducted, answer.balance) == (100, 899)
    await rejected(table, bet("bob", "b2", "P2", 450), "insufficient_funds")  # needs 900
    answer = await accepted(table, bet("bob", "b2", "P2", 449))  # needs 898
    assert (answer.deducted, answer.balance) == (898, 1)
    await rejected(table, bet("bob", "b3", "P3_PAIR", 5), "insufficient_funds")


@pytest.mark.parametrize("spot", ["P6", "P0", "BANKER", "p1", "", "P1_pair", "TIE"])
async def test_bad_spot(table: Store, spot: str) -> None:
    await rejected(table, bet("alice", "b1", spot, 100), "bad_spot")


@pytest.mark.parametrize("amount", [0, -5, -10**9, 10**12 + 1])
async def test_bad_amount(table: Store, amount: int) -> None:
    await rejected(table, bet("alice", "b1", "P1", amount), "bad_amount")


async def test_bad_bet_id(table: Store) -> None:
    await rejected(table, bet("alice", "", "P1", 100), "bad_bet_id")
    await rejected(table, bet("alice", "x" * 65, "P1", 100), "bad_bet_id")
    await accepted(table, bet("alice", "x" * 64, "P1", 100))


async def test_duplicate_bet_id_with_other_content(table: Store) -> None:
    await accepted(table, bet("alice", "b1", "P1", 100))
    await open_round(table, R2)
    await rejected(table, bet("alice", "b1", "P2", 100), "duplicate_bet_id")
    await rejected(table, bet("alice", "b1", "P1", 101), "duplicate_bet_id")
    await rejected(table, bet("alice", "b1", "P1", 100, round_id=R2), "duplicate_bet_id")
    # Bet ids are the player's own: Bob may use the same one.
    await accepted(table, bet("bob", "b1", "P2", 100))


async def test_not_a_player(table: Store) -> None:
    await rejected(table, bet("mallory", "b1", "P1", 100), "not_a_player")
    # The ledger's own accounts are not players, whatever a token calls itself.
    for account in ("house", "external", f"hold:{R1}"):
        await rejected(table, bet(account, "b1", "P1", 100), "not_a_player")


async def test_a_rejected_bet_id_can_be_used_again(table: Store) -> None:
    await rejected(table, bet("alice", "b1", "P1", 10), "below_min")
    await accepted(table, bet("alice", "b1", "P1", 100))


async def test_the_same_bet_twice_is_accepted_once_and_answered_identically(table: Store) -> None:
    first = await accepted(table, bet("alice", "b1", "P1", 100))
    assert first == p.BetAccepted(bet_id="b1", round_id=R1, spot="P1", amount=100,
                                  deducted=200, balance=9_800)
    await accepted(table, bet("alice", "b2", "P2_PAIR", 50))  # the balance moves on
    assert await place_bet(table, bet("alice", "b1", "P1", 100), T0 + 2) == first
    # A retry after betting closed is still the same answer, not a rejection.
    assert await place_bet(table, bet("alice", "b1", "P1", 100), CLOSES + 1) == first
    assert await balance(table, "alice") == 10_000 - 200 - 50
    entries, _ = await table.bet_record("alice", 50, None)
    assert [e.bet_id for e in entries] == ["b2", "b1"]
    report = await table.audit()
    assert report.ok and report.deposits == 10_999


# --- settlement ---------------------------------------------------------------------------------

#: Banker 4C 3D: 7 points, no special pattern.
ROUND_A = {"P1": "9H KS", "P2": "4H 4S", "P3": "5D 2C", "P4": "2H 3H", "P5": "KH QH",
           "BANKER": "4C 3D"}
#: Banker 2D 4C: 6 points (the "0 or 6" rule), no special pattern.
ROUND_B = {"P1": "3S 5S", "P2": "AH 9H", "P3": "7D 2C", "P4": "2S 2H", "P5": "10C 10D",
           "BANKER": "2D 4C"}
#: Banker AS KS: AK Flush (7.5), a special pattern.
ROUND_C = {"P1": "9D 9C", "P2": "3C 4D", "P3": "JD QS", "P4": "6S 6C", "P5": "8C AC",
           "BANKER": "AS KS"}

# (round, cards, spot, amount, outcome, odds, returned) — written from docs/design.md §1.
SETTLEMENTS = [
    (R1, ROUND_A, "P1", 100, "win", 1, 300),       # 9 v 7, no pattern: 1:1
    (R1, ROUND_A, "P2", 100, "win", 2, 400),       # pair 8 v 7: 2:1
    (R1, ROUND_A, "P2_PAIR", 10, "win", 11, 120),  # 4H 4S: 11:1
    (R1, ROUND_A, "P3", 100, "tie", 1, 200),       # 7 v 7
    (R1, ROUND_A, "P4", 100, "lose", 1, 100),      # flush 5 v 7 without pattern: withholding
    (R1, ROUND_A, "P5", 50, "win", 2, 200),        # Face-card Combo 7.3 v 7: 2:1
    (R1, ROUND_A, "P5_PAIR", 10, "lose", 1, 0),
    (R2, ROUND_B, "P1", 100, "win", 2, 400),       # flush 8 v Banker 6: Note 6, 2:1
    (R2, ROUND_B, "P2", 100, "win", 1, 300),       # Flush No Point 7.1 v Banker 6: 1:1
    (R2, ROUND_B, "P3", 100, "win", 1, 300),       # 9 v 6
    (R2, ROUND_B, "P4", 100, "lose", 1, 100),      # pair 4 v 6
    (R2, ROUND_B, "P4_PAIR", 20, "win", 11, 240),
    (R2, ROUND_B, "P5", 100, "win", 1, 300),       # Special Pair 7.4 v Banker 6: 1:1
]


async def test_settlement_is_exact_and_paid_once(table: Store) -> None:
    await table.deposit("more", "bob", 10_000, T0)
    await open_round(table, R2)
    placed: dict[str, tuple[str, int, str, int, int]] = {}
    for n, (round_id, cards, spot, amount, outcome, odds, returned) in enumerate(SETTLEMENTS):
        player = "alice" if n % 2 else "bob"
        bet_id = f"b{n}"
        await accepted(table, bet(player, bet_id, spot, amount, round_id=round_id))
        # The expectations above agree with the one settlement function.
        pos = BetSpot(spot).position.value
        rules = settle_bet(BetSpot(spot), amount, hand_of(parse_cards(cards[pos])),
                           hand_of(parse_cards(cards["BANKER"])))
        assert (rules.outcome, rules.odds, rules.returned) == (outcome, odds, returned)
        placed[bet_id] = (player, amount * BetSpot(spot).deducted_multiple, outcome, odds,
                          returned)
    before = {pid: await balance(table, pid) for pid in ("alice", "bob")}

    paid: dict[str, int] = {"alice": 0, "bob": 0}
    for round_id, cards in ((R1, ROUND_A), (R2, ROUND_B)):
        settled = await commit(table, betting("closed", round_id), settle_effect(round_id, cards),
                               now=T0 + 30_000)
        expected = {(placed[f"b{n}"][0], f"b{n}", s[2], s[3], s[4], s[5], s[6])
                    for n, s in enumerate(SETTLEMENTS) if s[0] == round_id}
        got = {(s.player_id, s.message.bet_id, s.message.spot, s.message.amount,
                s.message.outcome, s.message.odds, s.message.returned) for s in settled}
        assert got == expected
        assert all(s.message.round_id == round_id for s in settled)
        for s in settled:
            paid[s.player_id] += s.message.returned
        for pid in ("alice", "bob"):
            mine = [s for s in settled if s.player_id == pid]
            assert mine[-1].message.balance == before[pid] + paid[pid]
        # Committed again (a runner retrying after a crash): refused, paid once.
        await refused(table, settle_effect(round_id, cards), now=T0 + 40_000)
        await refused(table, cancel(round_id), now=T0 + 40_000)
    for pid in ("alice", "bob"):
        assert await balance(table, pid) == before[pid] + paid[pid]

    report = await table.audit()
    deducted = sum(v[1] for v in placed.values())
    returned = sum(v[4] for v in placed.values())
    assert (report.ok, report.total, report.deposits) == (True, 0, 20_999)
    assert report.house == deducted - returned

    view = await table.round_view(R1)
    assert view is not None
    assert view.state == "settled"
    assert view.cards == {pos: text.split() for pos, text in ROUND_A.items()}
    spots = view.spots
    assert spots is not None
    assert {k: list(v) for k, v in spots.items()} == {
        k: list(v) for k, v in settle_effect(R1, ROUND_A).spots.items()}


async def test_banker_special_pattern_takes_the_withholding(table: Store) -> None:
    await accepted(table, bet("alice", "b1", "P2", 100))   # 7 v AK Flush: lose at 2:1
    await accepted(table, bet("alice", "b2", "P1", 100))   # pair 8 v 7.5: win 2:1
    await accepted(table, bet("alice", "b3", "P3", 100))   # Face-card Combo 7.3 v 7.5
    await accepted(table, bet("alice", "b4", "P4_PAIR", 10))
    settled = await commit(table, settle_effect(R1, ROUND_C))
    got = {s.message.bet_id: (s.message.outcome, s.message.odds, s.message.returned)
           for s in settled}
    assert got == {"b1": ("lose", 2, 0), "b2": ("win", 2, 400), "b3": ("lose", 2, 0),
                   "b4": ("win", 11, 120)}
    assert await balance(table, "alice") == 10_000 - 610 + 520


async def test_a_round_without_bets_settles_and_cancels_cleanly(table: Store) -> None:
    assert await commit(table, settle_effect(R1, ROUND_A)) == []
    await open_round(table, R2)
    assert await commit(table, cancel(R2)) == []
    report = await table.audit()
    assert report.ok and report.house == 0


# --- cancel -------------------------------------------------------------------------------------


@pytest.mark.parametrize("status", ["betting", "paused", "closed"])
async def test_cancel_refunds_stake_and_withholding(
    table: Store, status: Literal["betting", "paused", "closed"]
) -> None:
    a = await accepted(table, bet("alice", "b1", "P1", 100))
    b = await accepted(table, bet("alice", "b2", "P1_PAIR", 50))
    c = await accepted(table, bet("bob", "b1", "P3", 20))
    assert (a.deducted, b.deducted, c.deducted) == (200, 50, 40)
    if status != "betting":
        await commit(table, betting(status))
    refunds = await commit(table, cancel(), now=T0 + 20_000)
    got = {(s.player_id, s.message.bet_id, s.message.outcome, s.message.odds,
            s.message.returned) for s in refunds}
    assert got == {("alice", "b1", "refund", 0, 200), ("alice", "b2", "refund", 0, 50),
                   ("bob", "b1", "refund", 0, 40)}
    last = {s.player_id: s.message.balance for s in refunds}
    assert last == {"alice": 10_000, "bob": 999}
    assert await balance(table, "alice") == 10_000
    assert await balance(table, "bob") == 999
    # Neither a second cancel nor a late settle is taken: the round is not open any more.
    await refused(table, cancel())
    await refused(table, settle_effect(R1, ROUND_A))
    assert await balance(table, "alice") == 10_000
    view = await table.round_view(R1)
    assert view is not None and (view.state, view.reason) == ("cancelled", "camera down")
    entries, _ = await table.bet_record("alice", 10, None)
    assert [(e.bet_id, e.state, e.outcome, e.returned, e.net, e.balance_after)
            for e in entries] == [("b2", "refunded", "refund", 50, 0, 10_000),
                                  ("b1", "refunded", "refund", 200, 0, 10_000)]
    report = await table.audit()
    assert report.ok and report.house == 0


# --- the Bet Record -----------------------------------------------------------------------------


async def test_bet_record_pages_newest_first_with_cards_and_balance_after(table: Store) -> None:
    await accepted(table, bet("alice", "a1", "P1", 100))       # 9H KS v 4C 3D: returns 300
    await accepted(table, bet("bob", "x1", "P1", 20))
    await accepted(table, bet("alice", "a2", "P2_PAIR", 10))   # 4H 4S: returns 120
    await commit(table, settle_effect(R1, ROUND_A), now=T0 + 30_000)
    await open_round(table, R2, closes_at=T0 + 60_000, now=T0 + 40_000)
    await accepted(table, bet("alice", "a3", "P4", 50, round_id=R2), now=T0 + 41_000)
    await accepted(table, bet("alice", "a4", "P5", 20, round_id=R2), now=T0 + 42_000)
    await accepted(table, bet("alice", "a5", "P1_PAIR", 5, round_id=R2), now=T0 + 43_000)

    pages: list[list[p.BetRecordEntry]] = []
    cursor: str | None = None
    while True:
        entries, cursor = await table.bet_record("alice", 2, cursor)
        pages.append(entries)
        if cursor is None:
            break
    assert [[e.bet_id for e in page] for page in pages] == [["a5", "a4"], ["a3", "a2"], ["a1"]]
    every, none = await table.bet_record("alice", 50, None)
    assert none is None
    assert [e.bet_id for e in every] == ["a5", "a4", "a3", "a2", "a1"]

    by_id = {e.bet_id: e for e in every}
    a1, a2, a3 = by_id["a1"], by_id["a2"], by_id["a3"]
    assert (a1.table, a1.shoe_id, a1.round_id, a1.round_no) == (TABLE, "t1.1", R1, 1)
    assert (a1.spot, a1.amount, a1.deducted, a1.placed_at) == ("P1", 100, 200, T0 + 1)
    assert (a1.state, a1.outcome, a1.odds, a1.returned, a1.net) == ("settled", "win", 1, 300,
                                                                  100)
    assert (a1.cards, a1.banker_cards) == (["9H", "KS"], ["4C", "3D"])
    assert a1.settled_at == T0 + 30_000
    assert (a2.cards, a2.outcome, a2.returned, a2.net) == (["4H", "4S"], "win", 120, 110)
    # balance_after: the player's balance once the bet's round was settled.
    assert a1.balance_after == a2.balance_after == 10_000 - 200 - 10 + 300 + 120
    # Open bets: no result, no cards yet (the round's cards are not known).
    assert (a3.state, a3.outcome, a3.returned, a3.net, a3.cards, a3.banker_cards,
            a3.balance_after) == ("accepted", None, None, None, None, None, None)
    bob, _ = await table.bet_record("bob", 50, None)
    assert [e.bet_id for e in bob] == ["x1"]
    assert await table.bet_record("nobody", 10, None) == ([], None)


async def test_settlements_for_rounds(table: Store) -> None:
    await accepted(table, bet("alice", "a1", "P1", 100))
    await accepted(table, bet("alice", "a2", "P2_PAIR", 10))
    await open_round(table, R2)
    await accepted(table, bet("alice", "a3", "P1", 100, round_id=R2))
    await commit(table, settle_effect(R1, ROUND_A))
    got = await table.settlements_for_rounds("alice", [R1, R2])
    assert {(s.bet_id, s.outcome, s.returned) for s in got} == {("a1", "win", 300),
                                                               ("a2", "win", 120)}
    assert await table.settlements_for_rounds("alice", []) == []
    assert await table.settlements_for_rounds("bob", [R1]) == []
    await commit(table, cancel(R2))
    got = await table.settlements_for_rounds("alice", [R2])
    assert [(s.bet_id, s.outcome, s.returned, s.balance) for s in got] == [
        ("a3", "refund", 200, await balance(table, "alice"))]


async def test_round_settlements_are_every_players_settled_bets(table: Store) -> None:
    await accepted(table, bet("alice", "a1", "P1", 100))
    await accepted(table, bet("bob", "a1", "P2_PAIR", 10))  # bet ids are a player's own
    await open_round(table, R2)
    await accepted(table, bet("alice", "a3", "P1", 100, round_id=R2))
    assert await table.round_settlements(R1) == []  # not settled yet
    await commit(table, settle_effect(R1, ROUND_A))
    got = await table.round_settlements(R1)
    assert {(player, s.bet_id, s.outcome, s.returned) for player, s in got} == {
        ("alice", "a1", "win", 300), ("bob", "a1", "win", 120)}
    await commit(table, cancel(R2))
    assert [(player, s.bet_id, s.outcome) for player, s in
            await table.round_settlements(R2)] == [("alice", "a3", "refund")]


async def test_bet_spread_is_each_spots_players_and_stakes(table: Store) -> None:
    # what bet_stats is made of (livetable/engine/announce.py): no player named
    assert await table.bet_spread(R1) == ({}, 0)
    await accepted(table, bet("alice", "a1", "P1", 100))
    await accepted(table, bet("alice", "a2", "P1", 50))  # one player, counted once
    await accepted(table, bet("alice", "a3", "P2_PAIR", 10))
    await accepted(table, bet("bob", "b1", "P1", 200))
    await open_round(table, R2)
    await accepted(table, bet("bob", "b2", "P3", 100, round_id=R2))
    assert await table.bet_spread(R1) == ({"P1": (2, 350), "P2_PAIR": (1, 10)}, 2)
    await commit(table, settle_effect(R1, ROUND_A))  # settled bets still count
    assert await table.bet_spread(R1) == ({"P1": (2, 350), "P2_PAIR": (1, 10)}, 2)
    await commit(table, cancel(R2))  # refunded ones do not
    assert await table.bet_spread(R2) == ({}, 0)


async def test_round_view(table: Store) -> None:
    assert await table.round_view("t1.9.9") is None
    view = await table.round_view(R1)
    assert view is not None
    assert (view.round_id, view.table, view.shoe_id, view.round_no, view.state,
            view.cards) == (R1, TABLE, "t1.1", 1, "betting", None)


# --- the event log ------------------------------------------------------------------------------


def frame(epoch: int, seq: int) -> tuple[int, int, bytes]:
    event = p.BettingClosed(round_id=f"r{seq}", table=TABLE, epoch=epoch, seq=seq)
    return epoch, seq, p.encode(event)


async def test_load_table(store: Store) -> None:
    assert await store.load_table(TABLE) is None
    await store.commit_step(TABLE, b"one", [frame(1, 1)], [], T0)
    assert await store.load_table(TABLE) == b"one"
    await store.commit_step(TABLE, b"two", [], [], T0)
    assert await store.load_table(TABLE) == b"two"
    assert await store.load_table("t2") is None


async def test_events_after(store: Store) -> None:
    frames = [frame(1, seq) for seq in range(1, 6)]
    await store.commit_step(TABLE, b"s", frames[:2], [], T0)
    await store.commit_step(TABLE, b"s", frames[2:], [], T0)
    await store.commit_step(TABLE, b"s", [], [], T0)  # a step without events moves no head
    assert await store.events_after(TABLE, 1, 0, 100) == [f for _, _, f in frames]
    assert await store.events_after(TABLE, 1, 2, 100) == [f for _, _, f in frames[2:]]
    assert await store.events_after(TABLE, 1, 5, 100) == []   # at the head
    assert await store.events_after(TABLE, 1, 6, 100) is None  # ahead of the head
    assert await store.events_after(TABLE, 2, 0, 100) is None  # unknown epoch
    assert await store.events_after("t2", 1, 0, 100) is None   # unknown table
    assert await store.events_after(TABLE, 1, 0, 3) is None    # more missed than the limit
    # A new epoch: the old one cannot be resumed any more.
    await store.commit_step(TABLE, b"s", [frame(2, 1)], [], T0)
    assert await store.events_after(TABLE, 1, 5, 100) is None
    assert await store.events_after(TABLE, 2, 0, 100) == [frame(2, 1)[2]]


async def test_a_step_is_written_only_if_it_follows_the_stored_head(table: Store) -> None:
    """An engine ahead of its store (a failover lost the store's last writes)
    went on publishing steps the store did not have. Every store writes a step only if its
    first event is the stored head + 1; any other is refused, and nothing of it is
    written — its events, its effects, the engine's state."""
    await commit(table, events=[frame(1, 1), frame(1, 2)])
    for wrong in ([frame(1, 4)],                 # ahead: the store lost seq 3
                  [frame(1, 2), frame(1, 3)],    # overlapping what is stored
                  [frame(1, 1)]):                # behind
        with pytest.raises(OutOfStep, match="does not follow"):
            await table.commit_step(TABLE, b'{"ahead": 1}', wrong, [betting("closed")],
                                    T0 + 1)
        assert await table.events_after(TABLE, 1, 0, 100) == [frame(1, s)[2] for s in (1, 2)]
        assert await table.load_table(TABLE) == b'{"state": 1}'
        view = await table.round_view(R1)
        assert view is not None and view.state == "betting"
    await table.commit_step(TABLE, b'{"next": 1}', [frame(1, 3)], [betting("closed")], T0 + 1)
    assert await table.events_after(TABLE, 1, 2, 100) == [frame(1, 3)[2]]
    view = await table.round_view(R1)
    assert view is not None and view.state == "closed"


async def test_a_step_is_written_only_if_its_round_is_where_it_expects(table: Store) -> None:
    """A round opens once, and betting is set, a round settled or cancelled, only while it
    is open (step.lua used to skip such effects quietly)."""
    await refused(table, betting("closed", round_id=R2))  # a round the store never opened
    await refused(table, settle_effect(R2, ROUND_A))
    await refused(table, cancel(R2))
    await refused(table, OpenRound(table=TABLE, round_id=R1, shoe_id="t1.1", round_no=1,
                                   closes_at=CLOSES, limits=LIMITS))  # opened already
    await commit(table, betting("closed"), cancel())
    await refused(table, betting("betting", closes_at=CLOSES))  # ended
    # effects of one step follow each other: a round opened and closed in the same step
    await commit(table, OpenRound(table=TABLE, round_id=R2, shoe_id="t1.1", round_no=2,
                                  closes_at=CLOSES, limits=LIMITS), betting("closed", R2))
    view = await table.round_view(R2)
    assert view is not None and view.state == "closed"


async def test_events_after_a_trimmed_log(make_store: Callable[..., Awaitable[Store]]) -> None:
    store = await make_store(event_retention=10)
    for start in range(1, 1001, 100):
        await store.commit_step(TABLE, b"s", [frame(1, seq) for seq in range(start, start + 100)],
                                [], T0)
    assert await store.events_after(TABLE, 1, 0, 10_000) is None
    assert await store.events_after(TABLE, 1, 500, 10_000) is None
    assert await store.events_after(TABLE, 1, 995, 10_000) == [
        frame(1, seq)[2] for seq in range(996, 1001)]


# --- audit ------------------------------------------------------------------------------------


async def test_audit_is_ok_through_a_round(table: Store) -> None:
    for step in range(3):
        report = await table.audit()
        assert (report.ok, report.total, report.problems) == (True, 0, [])
        if step == 0:
            await accepted(table, bet("alice", "a1", "P1", 100))
        elif step == 1:
            await commit(table, settle_effect(R1, ROUND_A))


async def test_audit_detects_a_tampered_balance_sqlite() -> None:
    store = SQLiteStore(":memory:")
    await store.ensure_player("alice", "Alice", 1_000, T0)
    await open_round(store)
    await accepted(store, bet("alice", "a1", "P1", 100))
    assert (await store.audit()).ok
    store.db.execute("UPDATE accounts SET balance = balance + 500 WHERE id = 'alice'")
    report = await store.audit()
    assert not report.ok
    assert report.total == 500
    assert any("alice" in problem for problem in report.problems)
    store.db.execute("UPDATE accounts SET balance = balance - 500 WHERE id = 'alice'")
    assert (await store.audit()).ok
    # A hold moved without a transfer, even if the sum is kept, is drift too.
    store.db.execute("UPDATE accounts SET balance = balance - 50 WHERE id = 'hold:t1.1.1'")
    store.db.execute("UPDATE accounts SET balance = balance + 50 WHERE id = 'house'")
    report = await store.audit()
    assert not report.ok and report.total == 0
    assert any("hold:t1.1.1" in problem for problem in report.problems)
    await store.close()


async def test_audit_detects_a_bet_left_open_in_an_ended_round_sqlite() -> None:
    store = SQLiteStore(":memory:")
    await store.ensure_player("alice", "Alice", 1_000, T0)
    await open_round(store)
    await accepted(store, bet("alice", "a1", "P1", 100))
    await commit(store, settle_effect(R1, ROUND_A))
    store.db.execute("UPDATE bets SET state = 'accepted'")
    report = await store.audit()
    assert not report.ok
    assert any("neither settled nor refunded" in problem for problem in report.problems)
    await store.close()


async def test_audit_detects_a_hold_that_is_not_its_open_bets_sqlite() -> None:
    """The audit checked holds of ended rounds only. A round in play holds
    exactly what its open bets took: a bet marked refunded without its refund (the money
    still in the hold, every account still matching its transfers) is found."""
    store = SQLiteStore(":memory:")
    await store.ensure_player("alice", "Alice", 1_000, T0)
    await open_round(store)
    await accepted(store, bet("alice", "a1", "P1", 100))
    await accepted(store, bet("alice", "a2", "P2", 50))
    assert (await store.audit()).ok
    store.db.execute("UPDATE bets SET state = 'refunded' WHERE bet_id = 'a2'")
    report = await store.audit()
    assert not report.ok and report.total == 0
    assert report.problems == ["hold:t1.1.1 holds 300 but the round's open bets took 200"]
    await store.close()


async def test_ids_with_colons_do_not_collide(store: Store) -> None:
    # Bet ids are free text: "a" betting "b:c" and "a" betting "b" then "c" are apart.
    await store.ensure_player("a", "A", 10_000, T0)
    await store.ensure_player("a.b", "AB", 10_000, T0)
    await open_round(store)
    first = await accepted(store, bet("a.b", "c", "P1", 100))
    second = await accepted(store, bet("a", "b:c", "P1", 100))
    third = await accepted(store, bet("a", "b", "P2", 100))
    assert (first.balance, second.balance, third.balance) == (9_800, 9_800, 9_600)
    assert await balance(store, "a") == 9_600
    assert await balance(store, "a.b") == 9_800
    assert (await store.audit()).ok
    refunds = await commit(store, cancel())
    assert sorted((s.player_id, s.message.returned) for s in refunds) == [
        ("a", 200), ("a", 200), ("a.b", 200)]
    assert await balance(store, "a") == 10_000
    assert await balance(store, "a.b") == 10_000
    report = await store.audit()
    assert report.ok and report.house == 0


# --- the account namespace ------------------------------------------------


@pytest.mark.parametrize("player_id", ["hold:t1.1.2", "house", "external", "a:b", ""])
async def test_no_player_account_can_take_an_internal_id(store: Store, player_id: str) -> None:
    # The attack: "hold:<next round>" signed up before the round opened, owned its escrow,
    # took every stake placed in it and bet with money that was never its own.
    await store.ensure_player("alice", "Alice", 1_000, T0)
    with pytest.raises(AccountError):
        await store.ensure_player(player_id, "Escrow", 0, T0)
    with pytest.raises(AccountError):
        await store.deposit("d-1", player_id, 17_000, T0)
    assert await store.player(player_id) is None
    await open_round(store, R2)
    await accepted(store, bet("alice", "b1", "P1", 100, round_id=R2))
    report = await store.audit()
    assert report.ok, report.problems
    assert report.deposits == 1_000


async def test_a_deposit_reaches_only_a_player(store: Store) -> None:
    await store.ensure_player("alice", "Alice", 1_000, T0)
    await open_round(store)
    await accepted(store, bet("alice", "b1", "P1", 100))
    for account in ("house", "external", f"hold:{R1}"):
        with pytest.raises((AccountError, UnknownPlayer)):
            await store.deposit(f"d-{account}", account, 5_000, T0)
    assert await store.deposit("d-alice", "alice", 5_000, T0) == 5_800
    assert (await store.audit()).ok


async def test_a_store_carries_one_identity(store: Store) -> None:
    # written once, when the ledger is new; a process that started on it can tell a wiped
    # or swapped store from its own
    assert await store.identity() is None
    first = await store.identity(create=True)
    assert first and await store.identity(create=True) == first
    assert await store.identity() == first


# --- revealed shoes (docs/design.md §7) -----------------------------------------------------

#: Any 416 cards: the store keeps what the engine revealed, it does not judge it.
ORDER = [str(card) for card in DECK for _ in range(8)]
ROUND_HANDS = {"P1": "9D 7C", "P2": "KH 9H", "P3": "AS AD", "P4": "2C 3C", "P5": "QS JH",
               "BANKER": "5S 5H"}


def reveal(shoe_id: str = "t1.1", salt: str = "cd" * 32) -> RevealShoe:
    return RevealShoe(table=TABLE, shoe_id=shoe_id, commitment="ab" * 32, salt=salt,
                      cut_at=350, order=ORDER, burn_card=ORDER[0], burned=1,
                      rounds=[(R1, 13, T0 + 5), (R2, 4, T0 + 8)], ended_by="cut_card",
                      chain_head="ef" * 32)


async def test_a_shoe_is_kept_once_revealed_with_its_rounds(store: Store) -> None:
    await open_round(store, R1)
    await commit(store, betting("closed"), settle_effect(R1, ROUND_HANDS))
    await open_round(store, R2)
    await commit(store, cancel(R2))
    assert await store.shoe_view("t1.1") is None  # nothing before the shoe is revealed
    await commit(store, reveal(), now=T0 + 9)
    expected = ShoeRecord(
        shoe_id="t1.1", table=TABLE, commitment="ab" * 32, salt="cd" * 32, cut_at=350,
        order=ORDER, burn_card=ORDER[0], burned=1, ended_at=T0 + 9,
        # the game log's facts: why the shoe ended, its rounds, its head (docs/security.md)
        ended_by="cut_card", round_count=2, chain_head="ef" * 32,
        rounds=[ShoeRound(round_id=R1, round_no=1, state="settled", dealt=13,
                          cards={pos: text.split() for pos, text in ROUND_HANDS.items()},
                          at=T0 + 5, spots={spot: result[0] for spot, result in
                                            settle_effect(R1, ROUND_HANDS).spots.items()}),
                # a cancelled round publishes what it had dealt: its burn is slot 15
                # (the opening AS, its one burn, round 1's 13), then P1, P2, P3
                ShoeRound(round_id=R2, round_no=2, state="cancelled", dealt=4, cards={
                    "P1": [ORDER[16]], "P2": [ORDER[17]], "P3": [ORDER[18]], "P4": [],
                    "P5": [], "BANKER": []}, at=T0 + 8, spots={})])
    assert await store.shoe_view("t1.1") == expected
    # Revealed once: a repeated step (a runner's retry) does not rewrite the record.
    await commit(store, reveal(salt="ee" * 32), now=T0 + 10)
    assert await store.shoe_view("t1.1") == expected
    assert await store.shoe_view("t1.2") is None
    assert await store.shoe_view("t9") is None

# --- bet slips (docs/design.md §6) ----------------------------------------------------------


def slip(player: str, slip_id: str | None, *bets: tuple[str, str, int],
         round_id: str = R1) -> SlipRequest:
    return SlipRequest(player_id=player, table=TABLE, slip_id=slip_id, round_id=round_id,
                       bets=tuple(p.SlipBet(bet_id=b, spot=s, amount=a) for b, s, a in bets))


async def test_a_slip_is_taken_whole(table: Store) -> None:
    answer = await table.place_slip(
        slip("alice", "s1", ("b1", "P1", 100), ("b2", "P1_PAIR", 10), ("b3", "P1", 50)),
        T0 + 1)
    assert answer == p.SlipAccepted(
        slip_id="s1", round_id=R1, deducted=200 + 10 + 100, balance=10_000 - 310,
        bets=[p.SlipBetAccepted(bet_id="b1", spot="P1", amount=100, deducted=200),
              p.SlipBetAccepted(bet_id="b2", spot="P1_PAIR", amount=10, deducted=10),
              p.SlipBetAccepted(bet_id="b3", spot="P1", amount=50, deducted=100)])
    assert await balance(table, "alice") == 9_690
    entries, _ = await table.bet_record("alice", 50, None)
    assert [(e.bet_id, e.deducted, e.state) for e in entries] == [
        ("b3", 100, "accepted"), ("b2", 10, "accepted"), ("b1", 200, "accepted")]
    report = await table.audit()
    assert report.ok, report.problems
    # settled like any bets: the slip's bets, each once
    settled = await commit(table, settle_effect(R1, ROUND_A))
    assert sorted((s.message.bet_id, s.message.returned) for s in settled) == [
        ("b1", 300), ("b2", 0), ("b3", 150)]
    assert await balance(table, "alice") == 9_690 + 450


async def test_a_slip_with_its_sessions_limits_is_judged_by_them_not_the_rounds(
        table: Store) -> None:
    """An operator's currency brings its own limits (minor units, registry): a slip that
    carries them is held to them, the round's own (20..500 per spot, 2000 a round) play no
    part — above them here, and below them."""
    own = p.Limits(min=1000, max=3000, pair_min=100, pair_max=400, round_max=6000)
    with_limits = msgspec.structs.replace
    refused = await table.place_slip(with_limits(
        slip("alice", "s1", ("b1", "P1", 500)), limits=own), T0 + 1)  # the round's max
    assert refused == Rejection("below_min", "b1", (1000,))
    taken = await table.place_slip(with_limits(
        slip("alice", "s2", ("b2", "P1", 2000), ("b3", "P1_PAIR", 400)), limits=own), T0 + 1)
    assert isinstance(taken, p.SlipAccepted), taken
    over = await table.place_slip(with_limits(
        slip("alice", "s3", ("b4", "P1", 1001)), limits=own), T0 + 1)  # 3001 on P1
    assert over == Rejection("above_max", "b4", (3000,))
    assert over.message.endswith("(maximum 3000 per spot)")
    round_max = await table.place_slip(with_limits(
        slip("alice", "s4", ("b5", "P2", 1000)), limits=own), T0 + 1)  # 4400 + 2000
    assert round_max == Rejection("round_limit", "b5", (6000,))
    # a slip without them (a guest at the same round) still meets the round's
    assert await table.place_slip(slip("bob", "s5", ("b6", "P1", 19)), T0 + 1) == \
        Rejection("below_min", "b6", (20,))


# A slip whose one bet cannot be taken: (slip, the code, the bet that failed).
BAD_SLIPS: list[tuple[SlipRequest, str, str | None]] = [
    (slip("alice", "s", ("b1", "P1", 100), ("b2", "P2", 10)), "below_min", "b2"),
    (slip("alice", "s", ("b1", "P1", 300), ("b2", "P1", 300)), "above_max", "b2"),
    (slip("alice", "s", ("b1", "P1", 500), ("b2", "P2", 500), ("b3", "P3", 100)),
     "round_limit", "b3"),
    (slip("alice", "s", ("b1", "P1", 100), ("b2", "P6", 100)), "bad_spot", "b2"),
    (slip("alice", "s", ("b1", "P1", 100), ("b2", "P2", 0)), "bad_amount", "b2"),
    (slip("alice", "s", ("b1", "P1", 100), ("b1", "P2", 100)), "duplicate_bet_id", "b1"),
    (slip("alice", "s", ("b1", "P1", 100), ("", "P2", 100)), "bad_bet_id", ""),
    (slip("bob", "s", ("b1", "P1", 400), ("b2", "P2", 100)), "insufficient_funds", None),
    (slip("alice", "", ("b1", "P1", 100)), "bad_slip_id", None),
    (slip("alice", "s"), "bad_slip", None),
    (slip("alice", "s", *((f"b{n}", "P1", 20) for n in range(21))), "bad_slip", None),
    (slip("alice", "s", ("b1", "P1", 100), round_id="t1.9.9"), "unknown_round", None),
    (slip("nobody", "s", ("b1", "P1", 100)), "not_a_player", None),
]


@pytest.mark.parametrize(("request_", "code", "bet_id"), BAD_SLIPS,
                         ids=[f"{c}-{n}" for n, (_, c, _) in enumerate(BAD_SLIPS)])
async def test_one_bad_bet_rejects_the_whole_slip_and_nothing_is_deducted(
        table: Store, request_: SlipRequest, code: p.RejectionCode, bet_id: str | None) -> None:
    before = await ledger_view(table, ["alice", "bob"])
    answer = await table.place_slip(request_, T0 + 1)
    assert isinstance(answer, Rejection), answer
    assert (answer.code, answer.bet_id) == (code, bet_id)
    assert answer.message.startswith(REJECTIONS[code])
    assert await ledger_view(table, ["alice", "bob"]) == before
    # the refused slip's ids are free again
    if code not in ("bad_slip_id", "bad_slip", "unknown_round", "not_a_player"):
        fine = slip(request_.player_id, "s", ("b1", "P1", 20))
        assert isinstance(await table.place_slip(fine, T0 + 1), p.SlipAccepted)


async def test_a_slip_after_the_close_is_refused_whole(table: Store) -> None:
    late = slip("alice", "s1", ("b1", "P1", 100), ("b2", "P2", 100))
    answer = await table.place_slip(late, CLOSES)
    assert isinstance(answer, Rejection) and answer.code == "betting_closed"
    assert await balance(table, "alice") == 10_000


async def test_the_same_slip_twice_is_taken_once_and_answered_identically(table: Store) -> None:
    s1 = slip("alice", "s1", ("b1", "P1", 100), ("b2", "P2", 100))
    first = await table.place_slip(s1, T0 + 1)
    assert isinstance(first, p.SlipAccepted) and first.balance == 9_600
    await accepted(table, bet("alice", "b9", "P3", 100))  # the balance moves on
    assert await table.place_slip(s1, T0 + 2) == first
    assert await table.place_slip(s1, CLOSES + 1) == first  # a retry after the close too
    assert await balance(table, "alice") == 9_400
    # bob may use the same slip id: slip ids are per player
    bobs = await table.place_slip(slip("bob", "s1", ("b1", "P1", 100)), T0 + 3)
    assert isinstance(bobs, p.SlipAccepted) and bobs.balance == 799
    assert (await table.audit()).ok


@pytest.mark.parametrize("other", [
    slip("alice", "s1", ("b1", "P1", 100), ("b2", "P2", 200)),   # another amount
    slip("alice", "s1", ("b1", "P1", 100)),                      # fewer bets
    slip("alice", "s1", ("b2", "P2", 100), ("b1", "P1", 100)),   # another order
    slip("alice", "s1", ("b1", "P1", 100), ("b2", "P2", 100), round_id=R2),
], ids=["amount", "fewer", "order", "round"])
async def test_the_same_slip_id_for_another_slip_is_refused(
        table: Store, other: SlipRequest) -> None:
    await open_round(table, R2)
    first = await table.place_slip(slip("alice", "s1", ("b1", "P1", 100), ("b2", "P2", 100)),
                                   T0 + 1)
    assert isinstance(first, p.SlipAccepted)
    before = await ledger_view(table, ["alice", "bob"])
    answer = await table.place_slip(other, T0 + 2)
    assert isinstance(answer, Rejection)
    assert (answer.code, answer.bet_id) == ("duplicate_slip_id", None)
    assert await ledger_view(table, ["alice", "bob"]) == before


async def test_a_bet_id_of_an_earlier_slip_is_refused_in_a_new_slip(table: Store) -> None:
    assert isinstance(await table.place_slip(slip("alice", "s1", ("b1", "P1", 100)), T0 + 1),
                      p.SlipAccepted)
    answer = await table.place_slip(slip("alice", "s2", ("b0", "P2", 20), ("b1", "P1", 100)),
                                    T0 + 2)
    assert isinstance(answer, Rejection)
    assert (answer.code, answer.bet_id) == ("duplicate_bet_id", "b1")
    # place_bet of a bet taken in a slip: its first answer (a slip of one, by bet id)
    again = await place_bet(table, bet("alice", "b1", "P1", 100), T0 + 3)
    assert again == p.BetAccepted(bet_id="b1", round_id=R1, spot="P1", amount=100,
                                  deducted=200, balance=9_800)


# --- settlement in chunks -------------------------------------------------------------------------


async def _many_bets(table: Store, count: int) -> dict[str, int]:
    """``count`` bets of 20 from three players across the spots; returns each one's stake."""
    await table.ensure_player("carol", "Carol", 10_000, T0)
    stakes: dict[str, int] = {}
    spots = ["P1", "P2", "P3", "P4", "P5"]
    for n in range(count):
        pid = ["alice", "carol", "bob"][n % 3]
        answer = await place_bet(table, bet(pid, f"m{n}", spots[n % 5], 20), T0 + 1)
        assert isinstance(answer, p.BetAccepted), answer
        stakes[f"m{n}"] = answer.deducted
    return stakes


@pytest.mark.parametrize("end", ["settle", "cancel"])
async def test_a_round_settles_in_chunks_each_bet_once(table: Store, end: str) -> None:
    table.settle_chunk = 4  # type: ignore[attr-defined]  # both stores have it
    await _many_bets(table, 15)
    before = {pid: await balance(table, pid) for pid in ("alice", "bob", "carol")}
    effect = settle_effect(R1, ROUND_A) if end == "settle" else cancel()
    messages = await commit(table, effect, now=T0 + 20_000)
    assert len(messages) == 5
    view = await table.round_view(R1)
    assert view is not None and view.state == ("settling" if end == "settle" else "refunding")
    assert (await table.audit()).ok  # mid-way: the hold still holds the rest
    # the round's second step (a retry) is refused: it settles nothing more
    await refused(table, effect, now=T0 + 20_000)
    chunks = [len(messages)]
    while True:
        chunk, more = await table.settle_pending(TABLE, T0 + 21_000)
        chunks.append(len(chunk))
        messages += chunk
        if not more:
            break
    # whole players per chunk: one chunk per player here (each has 5 bets, over 4)
    assert chunks == [5, 5, 5]
    assert [len({m.player_id for m in c}) for c in _chunks(messages, chunks)] == [1, 1, 1]
    assert await table.settle_pending(TABLE, T0 + 22_000) == ([], False)
    ids = [m.message.bet_id for m in messages]
    assert sorted(ids) == sorted(f"m{n}" for n in range(15)) and len(set(ids)) == 15
    view = await table.round_view(R1)
    assert view is not None and view.state == ("settled" if end == "settle" else "cancelled")
    report = await table.audit()
    assert report.ok, report.problems
    # every player's last bet_settled holds their balance after the round
    for pid in ("alice", "bob", "carol"):
        mine = [m.message for m in messages if m.player_id == pid]
        assert mine[-1].balance == await balance(table, pid)
        assert await balance(table, pid) == before[pid] + sum(m.returned for m in mine)


def _chunks(messages: list[Any], sizes: list[int]) -> list[list[Any]]:
    out, start = [], 0
    for size in sizes:
        out.append(messages[start:start + size])
        start += size
    return out


async def test_a_chunk_holds_whole_players_one_payout_each(table: Store) -> None:
    table.settle_chunk = 4  # type: ignore[attr-defined]  # both stores have it
    for n in range(6):
        await table.ensure_player(f"q{n}", f"Q{n}", 10_000, T0)
    for k in range(12):  # two bets each, taken in turn
        await accepted(table, bet(f"q{k % 6}", f"q{k}", "P1", 20))
    messages = await commit(table, settle_effect(R1, ROUND_A), now=T0 + 20_000)
    chunks = [len(messages)]
    more = True
    while more:
        chunk, more = await table.settle_pending(TABLE, T0 + 21_000)
        chunks.append(len(chunk))
        messages += chunk
    assert chunks == [4, 4, 4]
    for c in _chunks(messages, chunks):
        players = [m.player_id for m in c]
        assert players == sorted(players, key=players.index) and len(set(players)) == 2
    for n in range(6):  # P1 wins 1:1: 20 + 20 withheld + 20 won, per bet
        mine = [m.message for m in messages if m.player_id == f"q{n}"]
        assert [m.balance for m in mine] == [10_000 + 40, 10_000 + 40]
    report = await table.audit()
    assert report.ok, report.problems


async def test_settle_pending_with_nothing_to_settle(table: Store) -> None:
    assert await table.settle_pending(TABLE, T0) == ([], False)
    assert await table.settle_pending("t9", T0) == ([], False)


async def crash_in_the_middle_of_a_settlement(
        store: Store, reopen: Callable[[Store], Awaitable[Store]]) -> Store:
    """Settle 30 bets in chunks of 4; the process dies after the settling step and again
    after the next chunk (``reopen`` closes the store and opens a new one on the same
    data). Every bet settles exactly once, and the audit is clean, mid-way and at the end.
    Returns the last store."""
    store.settle_chunk = 4  # type: ignore[attr-defined]  # both stores have it
    await store.ensure_player("alice", "Alice", 10_000, T0)
    await store.ensure_player("bob", "Bob", 999, T0)
    await open_round(store)
    await _many_bets(store, 30)
    before = {pid: await balance(store, pid) for pid in ("alice", "bob", "carol")}
    messages = await commit(store, settle_effect(R1, ROUND_A), now=T0 + 20_000)
    store = await reopen(store)
    store.settle_chunk = 4  # type: ignore[attr-defined]
    chunk, more = await store.settle_pending(TABLE, T0 + 21_000)
    messages += chunk
    assert more and (await store.audit()).ok
    store = await reopen(store)
    store.settle_chunk = 4  # type: ignore[attr-defined]
    # the new process retries the settling step it cannot know was stored: refused
    await refused(store, settle_effect(R1, ROUND_A), now=T0 + 22_000)
    while more:
        chunk, more = await store.settle_pending(TABLE, T0 + 22_000)
        messages += chunk
    ids = [m.message.bet_id for m in messages]
    assert sorted(ids) == sorted(f"m{n}" for n in range(30)), ids
    entries = {pid: (await store.bet_record(pid, 200, None))[0]
               for pid in ("alice", "bob", "carol")}
    assert all(e.state == "settled" for es in entries.values() for e in es)
    for pid in ("alice", "bob", "carol"):
        returned = sum(m.message.returned for m in messages if m.player_id == pid)
        assert await balance(store, pid) == before[pid] + returned
    view = await store.round_view(R1)
    assert view is not None and view.state == "settled"
    report = await store.audit()
    assert report.ok, report.problems
    return store


async def test_a_crash_in_the_middle_of_a_chunked_settlement_sqlite(tmp_path: Path) -> None:
    path = tmp_path / "livetable.db"

    async def reopen(old: Store) -> Store:
        await old.close()
        return SQLiteStore(path)

    store = await crash_in_the_middle_of_a_settlement(SQLiteStore(path), reopen)
    await store.close()


async def test_a_round_settling_across_the_open_bets_index_migration_sqlite(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A ledger written before migration 5 (the open-bets index of open bets only), with a
    round half settled, opens migrated, and the rest of the round settles each bet once."""
    import livetable.store.sqlite.ledger.schema as sqlite_store

    path = tmp_path / "livetable.db"
    with monkeypatch.context() as m:
        m.setattr(sqlite_store, "MIGRATIONS", sqlite_store.MIGRATIONS[:4])
        old = SQLiteStore(path, settle_chunk=4)
        await old.ensure_player("alice", "Alice", 10_000, T0)
        await old.ensure_player("bob", "Bob", 999, T0)
        await open_round(old)
        await _many_bets(old, 30)
        messages = await commit(old, settle_effect(R1, ROUND_A), now=T0 + 20_000)
        assert 0 < len(messages) < 30
        await old.close()
    store = SQLiteStore(path, settle_chunk=4)
    try:
        assert store.db.execute("PRAGMA user_version").fetchone()[0] == len(
            sqlite_store.MIGRATIONS) == 8  # 6: sessions, 7: launch request ids, 8: tips
        index = store.db.execute(
            "SELECT sql FROM sqlite_master WHERE name = 'bets_open'").fetchone()[0]
        assert index.endswith("WHERE state = 'accepted'"), index
        more = True
        while more:
            chunk, more = await store.settle_pending(TABLE, T0 + 21_000)
            messages += chunk
        ids = [m.message.bet_id for m in messages]
        assert sorted(ids) == sorted(f"m{n}" for n in range(30)), ids
        report = await store.audit()
        assert report.ok, report.problems
        assert store.db.execute("SELECT COUNT(*) FROM bets WHERE state = 'accepted'"
                                ).fetchone()[0] == 0
    finally:
        await store.close()


async def test_a_chunk_that_fails_half_way_writes_nothing_sqlite(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # The transaction of a chunk is all or nothing: a failure after its first transfer
    # (a full disk, a crash) leaves every bet of the chunk open, to settle once later.
    store = SQLiteStore(":memory:", settle_chunk=4)
    await store.ensure_player("alice", "Alice", 10_000, T0)
    await store.ensure_player("bob", "Bob", 999, T0)
    await open_round(store)
    await _many_bets(store, 10)
    first = await commit(store, settle_effect(R1, ROUND_A), now=T0 + 20_000)
    assert isinstance(store, SQLiteStore) and store.ledger is not None
    real = store.ledger.post

    def failing(moves: list[Any], **kwargs: Any) -> Any:
        applied = real(moves, **kwargs)  # written, then the failure
        if any(m.id.startswith("payout:") for m in moves):
            raise sqlite3.OperationalError("disk I/O error")
        return applied

    monkeypatch.setattr(store.ledger, "post", failing)
    before = await store.audit()
    with pytest.raises(sqlite3.OperationalError):
        await store.settle_pending(TABLE, T0 + 21_000)
    assert await store.audit() == before
    monkeypatch.undo()
    rest: list[Any] = []
    more = True
    while more:
        chunk, more = await store.settle_pending(TABLE, T0 + 22_000)
        rest += chunk
    assert sorted(m.message.bet_id for m in first + rest) == sorted(f"m{n}" for n in range(10))
    assert (await store.audit()).ok
    await store.close()


async def test_an_on_time_bet_still_queued_when_settlement_starts_is_taken(
        table: Store) -> None:
    """A bet that reached the gateway before closes_at but waits in a busy
    store's queue when the engine's settling step comes is taken (then settled), not
    refused ``betting_closed`` for the store's delay."""
    await commit(table, betting("closed"), now=CLOSES + 1_000)
    queued = asyncio.ensure_future(place_bet(table, bet("alice", "late", "P1", 100),
                                                   CLOSES - 1))
    await asyncio.sleep(0)  # handed to the store, not yet taken
    settled = await commit(table, settle_effect(R1, ROUND_A), now=CLOSES + 5_000)
    answer = await queued
    assert isinstance(answer, p.BetAccepted), answer
    assert [s.message.bet_id for s in settled] == ["late"]


# --- operators' sessions ----------------------------------------------------------------


async def test_a_session_is_kept_counted_checked_and_ended_once(store: Store) -> None:
    """A launch's session as every gateway reads it: its limits, its figures (a stake by
    round, returns), the last reality check answered, and one end whose first reason
    stays."""
    from livetable.betting.sessions import SessionLimits, SessionRecord

    far = 2**52  # an expiry the store's clock never reaches
    limits = SessionLimits(max_stake_per_round=500, loss_limit=2_000, session_minutes=30,
                           reality_check_minutes=10)
    record = SessionRecord(session_id="s-1", operator="acme", player_id="acme~p-1",
                           started_at=T0, expires_at=far, limits=limits, checked_at=T0)
    assert await store.session("s-1") is None
    await store.open_session(record)
    await store.open_session(record)  # once by its id
    assert await store.session("s-1") == record
    await store.count_session("s-1", R1, 200, 0)
    await store.count_session("s-1", R1, 100, 0)
    counted = await store.count_session("s-1", None, 0, 450)
    assert counted is not None
    assert (counted.staked, counted.returned, counted.round_id, counted.round_staked) == (
        300, 450, R1, 300)
    counted = await store.count_session("s-1", R2, 40, 0)  # a new round starts at its own
    assert counted is not None and (counted.round_id, counted.round_staked) == (R2, 40)
    checked = await store.reality_checked("s-1", T0 + 600_000)
    assert checked is not None and checked.checked_at == T0 + 600_000
    ended = await store.end_session("s-1", "self_exclusion", T0 + 700_000)
    again = await store.end_session("s-1", "time_limit", T0 + 800_000)
    assert ended == again
    assert again is not None and (again.ended_at, again.reason) == (T0 + 700_000,
                                                                   "self_exclusion")
    assert again.limits == limits and again.staked == 340
    assert await store.end_session("nobody", "x", T0) is None
    assert await store.count_session("nobody", None, 1, 1) is None


async def test_a_launch_request_id_is_taken_once_until_it_is_forgotten(store: Store) -> None:
    """A launch's request id is the operator's once (the store's, so after a restart too);
    another operator's same id is its own; past its time it is forgotten."""
    kept = T0 + 600_000
    assert await store.first_launch("acme", "req-00001", T0, kept)
    assert not await store.first_launch("acme", "req-00001", T0 + 1, kept + 1)
    assert await store.first_launch("bet-7", "req-00001", T0 + 2, kept + 2)
    assert await store.first_launch("acme", "req-00001", kept + 10, kept + 600_000)
