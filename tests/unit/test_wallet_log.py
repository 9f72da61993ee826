"""The wallet log contract (livetable/operator/log.py) and the ledger's ``withdraw``, on
SQLite here; tests/integration/test_wallet_log_pg.py runs the same tests on PostgreSQL."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import msgspec
import pytest

from livetable.operator.log import CallState, WalletCall, WalletLog, rollback_tx_id
from livetable.operator.log_sqlite import SQLiteWalletLog
from livetable.operator.report import daily, report
from livetable.store.base import InsufficientBalance, Store, UnknownPlayer
from livetable.store.sqlite import SQLiteStore

T0 = 1_800_000_000_000


@pytest.fixture
async def wallet_log(tmp_path: Path) -> AsyncIterator[WalletLog]:
    made = SQLiteWalletLog(tmp_path / "lt.db")
    yield made
    await made.close()


@pytest.fixture
async def ledger(tmp_path: Path) -> AsyncIterator[Store]:
    made = SQLiteStore(tmp_path / "ledger.db")
    yield made
    await made.close()


def debit(tx_id: str, slip_key: str, player: str = "alice", round_id: str = "t1.1.1",
          deadline: int = T0 + 3_000) -> WalletCall:
    return WalletCall(tx_id=tx_id, method="debit", player_id=player, currency="THB",
                      table_id="t1", round_id=round_id, amount=200, body=b'{"tx_id":"%s"}'
                      % tx_id.encode(), state="pending", created_at=T0, updated_at=T0,
                      slip_key=slip_key, deadline=deadline)


def rollback(of: WalletCall, next_at: int = T0) -> WalletCall:
    return WalletCall(tx_id=rollback_tx_id(of.tx_id), method="rollback",
                      player_id=of.player_id, currency=of.currency, table_id=of.table_id,
                      round_id=of.round_id, amount=of.amount, body=b"{}", state="queued",
                      created_at=T0 + 1, updated_at=T0 + 1, next_at=next_at, debits=of.tx_id)


async def test_a_slip_is_debited_once_the_second_time_gets_the_first_debit(
        wallet_log: WalletLog) -> None:
    first = debit("d-1", "b1")
    assert await wallet_log.begin_debit(first) is None
    prior = await wallet_log.begin_debit(debit("d-2", "b1"))
    assert prior is not None and prior.tx_id == "d-1" and prior.body == first.body
    assert await wallet_log.begin_debit(debit("d-3", "b1", player="bob")) is None
    assert [c.tx_id for c in await wallet_log.calls()] == ["d-1", "d-3"]


async def test_a_slips_debit_is_found_by_its_key_without_writing(
        wallet_log: WalletLog) -> None:
    assert await wallet_log.debit_of("alice", "t1", "slip:s1") is None
    await wallet_log.begin_debit(debit("d-1", "slip:s1"))
    found = await wallet_log.debit_of("alice", "t1", "slip:s1")
    assert found is not None and found.tx_id == "d-1" and found.state == "pending"
    assert await wallet_log.debit_of("bob", "t1", "slip:s1") is None
    assert await wallet_log.debit_of("alice", "t2", "slip:s1") is None
    assert [c.tx_id for c in await wallet_log.calls()] == ["d-1"]


async def test_a_log_kept_in_the_ledgers_file_is_moved_to_its_own(tmp_path: Path) -> None:
    """The layout before: the log's table in the ledger's file. Opening the log in its own
    file with ``moved_from`` takes every call over (states as they were) and drops the old
    table; opening it again changes nothing."""
    ledger_file, own_file = tmp_path / "livetable.sqlite3", tmp_path / "livetable-wallet.sqlite3"
    old = SQLiteWalletLog(ledger_file)
    await old.begin_debit(debit("d-1", "b1"))
    await old.answer_debit(debit("d-1", "b1"), "ok", '{"status":"ok"}', T0 + 1)
    await old.begin_debit(debit("d-2", "b2"))
    await old.close()
    for _ in range(2):
        moved = SQLiteWalletLog(own_file, moved_from=ledger_file)
        assert [(c.tx_id, c.state) for c in await moved.calls()] == [("d-1", "ok"),
                                                                     ("d-2", "pending")]
        await moved.close()
    with sqlite3.connect(ledger_file) as db:
        assert db.execute("SELECT name FROM sqlite_master WHERE name = 'wallet_calls'"
                          ).fetchone() is None


async def test_a_debit_leaves_pending_once(wallet_log: WalletLog) -> None:
    call = debit("d-1", "b1")
    await wallet_log.begin_debit(call)
    assert await wallet_log.answer_debit(call, "ok", '{"status":"ok"}', T0 + 5)
    assert not await wallet_log.answer_debit(call, "unknown", "timeout", T0 + 6)
    [stored] = await wallet_log.calls()
    assert (stored.state, stored.answer, stored.attempts) == ("ok", '{"status":"ok"}', 1)
    assert stored.closed_by is None
    assert [c.tx_id for c in await wallet_log.open_debits(10)] == ["d-1"]


async def test_an_ok_debit_the_operator_keeps_is_closed_once(wallet_log: WalletLog) -> None:
    """A tip's debit: ``ok`` and open until the ledger has the tip, then closed ``tip``."""
    call, pending = debit("d-1", "tip:t1"), debit("d-2", "tip:t2")
    for one in (call, pending):
        await wallet_log.begin_debit(one)
    assert not await wallet_log.keep_debit(call, "tip", T0 + 2)  # not ok yet
    assert await wallet_log.answer_debit(call, "ok", '{"status":"ok"}', T0 + 5)
    assert await wallet_log.keep_debit(call, "tip", T0 + 6)
    assert not await wallet_log.keep_debit(call, "tip", T0 + 7)  # closed already
    assert not await wallet_log.keep_debit(pending, "tip", T0 + 7)
    stored = {c.tx_id: c for c in await wallet_log.calls()}
    assert (stored["d-1"].closed_by, stored["d-1"].updated_at) == ("tip", T0 + 6)
    assert stored["d-2"].closed_by is None
    assert [c.tx_id for c in await wallet_log.open_debits(10)] == ["d-2"]


async def test_calls_made_together_are_answered_as_one_after_another(
        wallet_log: WalletLog) -> None:
    """What arrives together goes to the store together (a group commit): the answers
    are still those of the calls made one at a time, in some order — one debit per slip,
    one answer per debit, every credit's delivery kept."""
    firsts = await asyncio.gather(*(wallet_log.begin_debit(debit(f"d-{n}", f"b{n // 2}"))
                                    for n in range(40)))
    # two debits per slip key: the one written first is the slip's, the other gets it
    for n in range(0, 40, 2):
        pair = firsts[n:n + 2]
        assert sorted(x is None for x in pair) == [False, True], pair
        prior = next(x for x in pair if x is not None)
        assert prior.tx_id in (f"d-{n}", f"d-{n + 1}") and prior.slip_key == f"b{n // 2}"
    debits = [c for c in await wallet_log.calls() if c.method == "debit"]
    assert len(debits) == 20
    answers: list[tuple[CallState, str]] = [("ok", '{"status":"ok"}'), ("unknown", "timeout")]
    won = await asyncio.gather(*(wallet_log.answer_debit(c, state, why, T0 + 5)
                                 for c in debits for state, why in answers))
    assert [won[n] + won[n + 1] for n in range(0, 40, 2)] == [1] * 20  # one answer each
    credits = [rollback(c) for c in debits]
    await wallet_log.enqueue(credits, T0 + 6)
    await asyncio.gather(*(wallet_log.delivered(c, n % 2 == 0, "answered", T0 + 9, T0 + 7)
                           for n, c in enumerate(credits)))
    stored = {c.tx_id: c for c in await wallet_log.calls()}
    assert [(stored[c.tx_id].state, stored[c.tx_id].attempts) for c in credits] == [
        ("ok" if n % 2 == 0 else "queued", 1) for n in range(20)]
    assert await wallet_log.backlog() == 10


async def test_a_refused_debit_is_closed_by_its_refusal(wallet_log: WalletLog) -> None:
    call = debit("d-1", "b1")
    await wallet_log.begin_debit(call)
    assert await wallet_log.answer_debit(call, "refused", "insufficient", T0, closed_by="refused")
    assert await wallet_log.open_debits(10) == []


async def test_pending_debits_past_the_deadline_expire_to_unknown(
        wallet_log: WalletLog) -> None:
    early, late = debit("d-1", "b1", deadline=T0), debit("d-2", "b2", deadline=T0 + 10_000)
    await wallet_log.begin_debit(early)
    await wallet_log.begin_debit(late)
    expired = await wallet_log.expire_debits(T0 + 1, T0 + 2)
    assert [(c.tx_id, c.state) for c in expired] == [("d-1", "unknown")]
    assert not await wallet_log.answer_debit(early, "ok", "too late", T0 + 3)  # sweeper won
    assert await wallet_log.expire_debits(T0 + 1, T0 + 2) == []


async def test_the_sweeper_reads_open_debits_by_round(wallet_log: WalletLog) -> None:
    """The rounds with open debits, oldest first, and whether one of them is in doubt; then
    the debits of the rounds asked for, and only the unknown ones of the rounds in doubt."""
    def made(tx_id: str, round_id: str, at: int) -> WalletCall:
        return msgspec.structs.replace(debit(tx_id, tx_id, round_id=round_id), created_at=at)

    calls = [made("d-1", "t1.1.2", T0 + 1), made("d-2", "t1.1.2", T0 + 2),
             made("d-3", "t1.1.1", T0), made("d-4", "t1.1.3", T0 + 3),
             made("d-5", "t1.1.3", T0 + 4), made("d-6", "t1.1.4", T0 + 5)]
    for call in calls:
        await wallet_log.begin_debit(call)
    for call in calls[:5]:
        await wallet_log.answer_debit(call, "unknown" if call.tx_id == "d-5" else "ok", "", T0)
    await wallet_log.answer_debit(calls[5], "refused", "no", T0, closed_by="refused")
    assert await wallet_log.open_rounds(10) == [("t1.1.1", False), ("t1.1.2", False),
                                                ("t1.1.3", True)]
    assert await wallet_log.open_rounds(1) == [("t1.1.1", False)]
    assert [c.tx_id for c in await wallet_log.open_debits(10, ["t1.1.2"], ["t1.1.3"])] == [
        "d-1", "d-2", "d-5"]
    assert [c.tx_id for c in await wallet_log.open_debits(1, ["t1.1.2"], [])] == ["d-1"]
    assert await wallet_log.open_debits(10, [], []) == []
    assert [c.tx_id for c in await wallet_log.open_debits(10)] == [
        "d-3", "d-1", "d-2", "d-4", "d-5"]


async def test_a_sweeps_reads_cost_the_same_whatever_the_logs_history(tmp_path: Path) -> None:
    """What the sweeper reads four times a second (the pending debits past their deadline,
    the rounds with open debits) costs the same after 4,000 closed debits as after 400:
    counted in SQLite's virtual machine's instructions, which do not depend on the
    machine. Before, finding the expired debits scanned every debit ever made."""
    log = SQLiteWalletLog(tmp_path / "lt-wallet.db")
    assert log.writer is not None  # the steps run on the log's connection, on its thread
    steps = 0

    def count() -> int:
        nonlocal steps
        steps += 1
        return 0

    async def history(start: int, n: int) -> None:
        for i in range(start, start + n):
            call = debit(f"d-{i}", f"b{i}", player=f"p{i % 50}", round_id=f"t1.1.{i // 100}")
            await log.begin_debit(call)
            await log.answer_debit(call, "refused", "no", T0, closed_by="refused")

    async def cost() -> int:
        nonlocal steps
        steps = 0
        log.db.set_progress_handler(count, 100)
        assert await log.expire_debits(T0 + 10_000, T0 + 10_000) == []
        assert await log.open_rounds(1000) == [("t1.9.9", False)]
        log.db.set_progress_handler(None, 100)
        return steps

    await history(0, 400)
    for i in range(200):  # a round in play: its debits answered ok, still open
        call = debit(f"o-{i}", f"o{i}", player=f"q{i}", round_id="t1.9.9")
        await log.begin_debit(call)
        await log.answer_debit(call, "ok", "", T0)
    short = await cost()
    await history(400, 3600)
    long = await cost()
    assert long < short * 1.5, (short, long)
    await log.close()


async def test_enqueue_closes_its_debits_and_is_idempotent(wallet_log: WalletLog) -> None:
    call = debit("d-1", "b1")
    await wallet_log.begin_debit(call)
    await wallet_log.answer_debit(call, "unknown", "timeout", T0)
    for _ in range(2):  # the gateway, then the sweeper after a crash: one rollback
        await wallet_log.enqueue([rollback(call)], T0 + 1)
    assert await wallet_log.backlog() == 1
    assert await wallet_log.open_debits(10) == []
    [stored_debit, queued] = await wallet_log.calls()
    assert stored_debit.closed_by == queued.tx_id == rollback_tx_id("d-1")


async def test_the_outbox_gives_what_is_due_and_keeps_each_attempt(
        wallet_log: WalletLog) -> None:
    a, b = debit("d-1", "b1"), debit("d-2", "b2")
    for call in (a, b):
        await wallet_log.begin_debit(call)
    await wallet_log.enqueue([rollback(a, next_at=T0)], T0)
    await wallet_log.enqueue([rollback(b, next_at=T0 + 500)], T0)
    [due] = await wallet_log.due(T0 + 100, 10)
    assert due.tx_id == rollback_tx_id("d-1")
    await wallet_log.delivered(due, False, "http 500", T0 + 1_000, T0 + 100)
    assert [c.tx_id for c in await wallet_log.due(T0 + 600, 10)] == [rollback_tx_id("d-2")]
    [_, again] = await wallet_log.due(T0 + 1_000, 10)  # soonest first: d-2's, then d-1's
    assert again.tx_id == rollback_tx_id("d-1")
    assert (again.attempts, again.answer) == (1, "http 500")
    await wallet_log.delivered(again, True, '{"status":"ok"}', T0 + 2_000, T0 + 1_000)
    assert await wallet_log.backlog() == 1
    [stored] = [c for c in await wallet_log.calls() if c.tx_id == again.tx_id]
    assert (stored.state, stored.attempts) == ("ok", 2)


async def test_calls_by_round_and_by_player(wallet_log: WalletLog) -> None:
    await wallet_log.begin_debit(debit("d-1", "b1", round_id="t1.1.1"))
    await wallet_log.begin_debit(debit("d-2", "b2", round_id="t1.1.2"))
    await wallet_log.begin_debit(debit("d-3", "b3", player="bob", round_id="t1.1.2"))
    assert [c.tx_id for c in await wallet_log.calls(round_id="t1.1.2")] == ["d-2", "d-3"]
    assert [c.tx_id for c in await wallet_log.calls(player_id="alice")] == ["d-1", "d-2"]
    assert [c.tx_id for c in await wallet_log.calls("t1.1.2", "bob")] == ["d-3"]


# --- the ledger's withdraw --------------------------------------------------------------


async def test_withdraw_moves_once_by_id(ledger: Store) -> None:
    await ledger.ensure_player("alice", "Alice", 0, T0)
    await ledger.deposit("wallet:d-1", "alice", 500, T0)
    assert await ledger.withdraw("wallet:c-1", "alice", 300, T0) == 200
    assert await ledger.withdraw("wallet:c-1", "alice", 300, T0) == 200
    assert (await ledger.audit()).ok


async def test_withdraw_against_a_deposit_moves_only_if_the_deposit_was_made(
        ledger: Store) -> None:
    await ledger.ensure_player("alice", "Alice", 0, T0)
    await ledger.deposit("other", "alice", 500, T0)
    assert await ledger.withdraw("wallet:r-1", "alice", 200, T0, against="wallet:d-1") is None
    await ledger.deposit("wallet:d-1", "alice", 200, T0)
    assert await ledger.withdraw("wallet:r-1", "alice", 200, T0, against="wallet:d-1") == 500


async def test_withdraw_never_takes_a_balance_below_0(ledger: Store) -> None:
    await ledger.ensure_player("alice", "Alice", 0, T0)
    await ledger.deposit("d", "alice", 100, T0)
    with pytest.raises(InsufficientBalance):
        await ledger.withdraw("w", "alice", 101, T0)
    view = await ledger.player("alice")
    assert view is not None and view.balance == 100
    with pytest.raises(UnknownPlayer):
        await ledger.withdraw("w", "nobody", 1, T0)


# --- one layout for the call: stored entries and the report keep their bytes ---------------

STORED_DEBIT = WalletCall(
    tx_id="d-1", method="debit", player_id="p1", currency="THB", table_id="t1",
    round_id="t1.1.1", amount=100, body=b'{"tx_id":"d-1","amount":100}', state="ok",
    answer='{"balance":900}', attempts=1, created_at=5, updated_at=6, slip_key="s1",
    deadline=7, closed_by="c-1")
STORED_CREDIT = WalletCall(
    tx_id="c-1", method="credit", player_id="p1", currency="THB", table_id="t1",
    round_id="t1.1.1", amount=190, body=b'{"tx_id":"c-1"}', state="queued", created_at=8,
    next_at=9, debits="d-1")
def test_the_wallet_report_keeps_its_fields() -> None:
    totals = [[0, "*", "*", 0, 2] + [0] * 10]  # the log's (test_the_report_adds_up_…)
    assert msgspec.json.encode(report([STORED_DEBIT, STORED_CREDIT], totals).calls) == (
        b'[{"tx_id":"d-1","method":"debit","player_id":"p1","currency":"THB","table_id":"t1",'
        b'"round_id":"t1.1.1","amount":100,"state":"ok","answer":"{\\"balance\\":900}",'
        b'"attempts":1,"created_at":5,"updated_at":6,"closed_by":"c-1",'
        b'"request":{"tx_id":"d-1","amount":100}},'
        b'{"tx_id":"c-1","method":"credit","player_id":"p1","currency":"THB","table_id":"t1",'
        b'"round_id":"t1.1.1","amount":190,"state":"queued","created_at":8,'
        b'"request":{"tx_id":"c-1"}}]')


async def test_the_daily_summary_books_each_operators_play_by_table_and_currency(
        wallet_log: WalletLog) -> None:
    """Stakes are the debits that stood (a rolled-back one nets out), returns the credits,
    GGR their difference; an operator sees only its players; a round that crosses
    midnight is booked on the day it began — added up by the log, over every call."""
    day = 1_799_971_200_000  # 2027-01-15 00:00 UTC
    def call(tx: str, method: str, player: str, currency: str, round_id: str, amount: int,
             state: str = "ok", at: int = day + 3_600_000) -> WalletCall:
        return WalletCall(tx_id=tx, method=method, player_id=player,  # type: ignore[arg-type]
                          currency=currency, table_id=round_id.split(".")[0],
                          round_id=round_id, amount=amount, body=b"{}",
                          state=state, created_at=at, updated_at=at)  # type: ignore[arg-type]
    await wallet_log.enqueue([
        call("d1", "debit", "acme~p-1", "THB", "t1.1.1", 20_000),
        call("d2", "debit", "acme~p-2", "THB", "t1.1.1", 10_000),
        call("c1", "credit", "acme~p-1", "THB", "t1.1.1", 40_000, at=day + 3_700_000),
        call("c2", "credit", "acme~p-2", "THB", "t1.1.1", 0, at=day + 3_700_000),
        call("d3", "debit", "acme~p-1", "JPY", "t1.1.2", 500, state="unknown"),
        call("r3", "rollback", "acme~p-1", "JPY", "t1.1.2", 500),
        call("d4", "debit", "acme~p-1", "JPY", "t2.1.1", 700),
        call("c4", "credit", "acme~p-1", "JPY", "t2.1.1", 0),
        call("x1", "debit", "bet7~p-1", "INR", "t1.1.3", 99_999),
        call("r9", "debit", "acme~p-3", "THB", "t1.1.4", 100, state="refused"),
        # begins before midnight, credited after it: the day it began
        call("d5", "debit", "acme~p-2", "THB", "t1.1.9", 300, at=day - 1_000),
        call("c5", "credit", "acme~p-2", "THB", "t1.1.9", 600, at=day + 5_000),
    ], day)
    rows = [(d.day, d.operator, d.table_id, d.currency, d.rounds, d.players, d.stakes,
             d.returns, d.ggr) for d in daily(await wallet_log.days("acme"))]
    assert rows == [
        ("2027-01-14", "acme", "t1", "THB", 1, 1, 300, 600, -300),
        ("2027-01-15", "acme", "t1", "JPY", 1, 1, 0, 0, 0),
        ("2027-01-15", "acme", "t1", "THB", 2, 3, 30_000, 40_000, -10_000),
        ("2027-01-15", "acme", "t2", "JPY", 1, 1, 700, 0, 700),
    ]
    assert [d.operator for d in daily(await wallet_log.days())] == ["acme"] * 4 + ["bet7"]



async def test_the_reports_totals_are_the_logs_over_every_call(wallet_log: WalletLog) -> None:
    """Each round's figures and the overall ones, added up by the log (both stores), and
    of one operator's players when asked."""
    def call(tx: str, method: str, state: str, amount: int, round_id: str = "t1.1.1",
             player: str = "acme~p-1", closed_by: str | None = None) -> WalletCall:
        return WalletCall(tx_id=tx, method=method, player_id=player,  # type: ignore[arg-type]
                          currency="THB", table_id="t1", round_id=round_id, amount=amount,
                          body=b"{}", state=state, created_at=T0, updated_at=T0,  # type: ignore[arg-type]
                          closed_by=closed_by)
    await wallet_log.enqueue([
        call("d1", "debit", "ok", 100, closed_by="c1"),
        call("d2", "debit", "unknown", 40, closed_by="r2"),
        call("d3", "debit", "pending", 7),
        call("d4", "debit", "refused", 9, closed_by="refused"),
        call("c1", "credit", "queued", 250),
        call("r2", "rollback", "ok", 40),
        call("d5", "debit", "ok", 1_000, round_id="t1.1.2", player="other~p-9"),
    ], T0)
    found = report(await wallet_log.calls(), await wallet_log.totals())
    first, second = found.rounds
    assert (first.round_id, first.debits, first.debited, first.debited_unknown, first.refused,
            first.credits, first.credited, first.rollbacks, first.rolled_back, first.net,
            first.open_debits, first.undelivered) == (
        "t1.1.1", 4, 100, 47, 1, 1, 250, 1, 40, -143, 1, 1)
    assert (second.round_id, second.debited) == ("t1.1.2", 1_000)
    assert (found.totals.debited, found.calls_in_log, found.partial) == (1_100, 7, False)
    acme = report([], await wallet_log.totals(operator="acme"))
    assert (acme.totals.debited, acme.calls_in_log, acme.partial) == (100, 6, True)
    assert [r.round_id for r in acme.rounds] == ["t1.1.1"]
    one = report([], await wallet_log.totals(round_id="t1.1.2", player_id="other~p-9"))
    assert (one.totals.debited, one.calls_in_log) == (1_000, 1)
