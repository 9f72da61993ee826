"""The Store contract for tips to the dealer (``Store.place_tip``, ``Store.tip_record``),
on every store: the fixtures of tests/unit/test_store_contract.py, so each test runs once
per SQLite store here and on PostgreSQL in tests/integration/test_pg_contract.py.

A tip moves its amount from the player to the house's tip account in one transaction, once
by ``(player, tip_id)``; the audit still proves the ledger; the Bet Record pages carry the
tips of the span of time their bets cover.
"""

from __future__ import annotations

import msgspec
from test_store_contract import (  # the contract's fixtures and helpers, as they are
    R1,
    T0,
    TABLE,
    accepted,
    balance,
    bet,
    make_store,
    open_round,
    store,
    table,
)

from livetable import protocol as p
from livetable.accounts import HOUSE_TIPS
from livetable.betting.slips import MirrorDeposit
from livetable.betting.tips import Allowance, TipRefusal, TipRequest, TipTaken
from livetable.store import Store

__all__ = ["make_store", "store", "table"]  # fixtures, used by name


def tip(tip_id: str, amount: int, player: str = "alice", **more: object) -> TipRequest:
    return TipRequest(player_id=player, table=TABLE, tip_id=tip_id, amount=amount,
                      round_id=R1, **more)  # type: ignore[arg-type]  # the test's own fields


async def test_a_tip_moves_its_amount_to_the_houses_tip_account_once(table: Store) -> None:
    answer = await table.place_tip(tip("tip-1", 300), T0 + 5)
    assert answer == TipTaken("tip-1", 300, 9_700, fresh=True)
    # the same tip again: the same answer, nothing moved a second time
    again = await table.place_tip(tip("tip-1", 300), T0 + 9)
    assert again == TipTaken("tip-1", 300, 9_700, fresh=False)
    assert await balance(table, "alice") == 9_700
    report = await table.audit()
    assert report.ok, report.problems
    assert report.total == 0
    entries = await table.tip_record("alice", None, None)
    assert entries == [p.TipRecordEntry(tip_id="tip-1", table=TABLE, round_id=R1, amount=300,
                                        placed_at=T0 + 5, balance_after=9_700)]


async def test_the_tip_account_holds_every_tip(table: Store) -> None:
    await table.place_tip(tip("a", 100), T0)
    await table.place_tip(tip("b", 250, player="bob"), T0)
    # the ledger's books balance: players + house + tips + external sum to 0
    report = await table.audit()
    assert report.ok and report.total == 0, report.problems
    assert await balance(table, "alice") + await balance(table, "bob") == 10_000 + 999 - 350
    assert report.deposits == 10_000 + 999


async def test_a_tip_id_used_for_another_amount_is_refused_and_moves_nothing(
        table: Store) -> None:
    await table.place_tip(tip("tip-1", 300), T0)
    refused = await table.place_tip(tip("tip-1", 301), T0)
    assert refused == TipRefusal("duplicate_tip_id")
    assert await balance(table, "alice") == 9_700


async def test_a_tip_the_balance_does_not_cover_is_refused_and_moves_nothing(
        table: Store) -> None:
    refused = await table.place_tip(tip("t", 1_000, player="bob"), T0)
    assert refused == TipRefusal("insufficient_funds", (1_000, 999))
    assert await balance(table, "bob") == 999
    assert await table.tip_record("bob", None, None) == []
    # the id was not used: the same tip_id for what the balance covers is taken
    assert isinstance(await table.place_tip(tip("t", 999, player="bob"), T0), TipTaken)
    assert await balance(table, "bob") == 0


async def test_a_tip_past_its_sessions_allowance_is_refused_but_a_resend_is_not(
        table: Store) -> None:
    left = Allowance("loss_limit", 200, 500)
    assert await table.place_tip(tip("t1", 201, allowance=left), T0) == TipRefusal(
        "rg_limit", ("loss_limit", 200, 500))
    assert isinstance(await table.place_tip(tip("t2", 200, allowance=left), T0), TipTaken)
    used_up = Allowance("loss_limit", 0, 500)
    assert await table.place_tip(tip("t2", 200, allowance=used_up), T0) == TipTaken(
        "t2", 200, 9_800, fresh=False)


async def test_nobody_but_a_player_tips(table: Store) -> None:
    for who in ("nobody", "house", HOUSE_TIPS):
        answer = await table.place_tip(tip("t", 10, player=who), T0)
        assert isinstance(answer, TipRefusal) and answer.code == "insufficient_funds"
    assert (await table.audit()).ok


async def test_a_seamless_tip_brings_its_mirror_deposit_in_the_same_transaction(
        store: Store) -> None:
    await store.ensure_player("acme~p1", "P1", 0, T0)
    paid = tip("t", 500, player="acme~p1", deposit=MirrorDeposit("wallet:d-1", 500, T0))
    assert await store.place_tip(paid, T0) == TipTaken("t", 500, 0, fresh=True)
    assert await store.place_tip(paid, T0 + 1) == TipTaken("t", 500, 0, fresh=False)
    report = await store.audit()
    assert report.ok, report.problems
    assert report.deposits == 500  # the operator's money, once
    assert await balance(store, "acme~p1") == 0


async def test_bet_record_pages_carry_the_tips_of_their_span_each_once(store: Store) -> None:
    await store.ensure_player("alice", "Alice", 10_000, T0)
    await open_round(store)
    # bets at T0+10 … T0+50, a tip before, between and after them
    await store.place_tip(tip("before", 10), T0 + 5)
    for n in range(5):
        await accepted(store, bet("alice", f"b{n}", "P1", 20), now=T0 + 10 * (n + 1))
        await store.place_tip(tip(f"after-b{n}", 10 + n), T0 + 10 * (n + 1) + 1)
    seen: list[str] = []
    before = None
    while True:
        entries, cursor = await store.bet_record("alice", 2, before)
        since = entries[-1].placed_at if cursor is not None else None
        tips = await store.tip_record("alice", before, since)
        assert all(t.placed_at >= (since or 0) for t in tips)
        seen += [t.tip_id for t in tips]
        if cursor is None:
            break
        before = cursor
    assert seen == ["after-b4", "after-b3", "after-b2", "after-b1", "after-b0", "before"]


async def test_a_tip_without_a_round_in_play_is_kept_without_one(store: Store) -> None:
    await store.ensure_player("alice", "Alice", 1_000, T0)
    free = msgspec.structs.replace(tip("t", 100), round_id=None)
    assert isinstance(await store.place_tip(free, T0), TipTaken)
    [entry] = await store.tip_record("alice", None, None)
    assert entry.round_id is None
