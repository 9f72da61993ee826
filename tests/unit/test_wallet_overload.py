"""The seamless wallet under more debits than it can send in time, and a big round's close
(docs/decisions.md#the-seamless-wallet-at-table-speed): a debit that cannot start before its
deadline is refused without a call and
without a rollback to owe; a round's close is a few store and log calls, not three per
player."""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from test_wallet import ALICE, INITIAL, R1, T0, TABLE, Rig, applied_once, credits_of

from livetable import protocol as p
from livetable.auth import Identity
from livetable.betting.slips import BetRequest, Rejection, SlipRequest
from livetable.operator import seamless
from livetable.operator.gate import MIN_CALL_MS, DebitGate
from livetable.operator.reference import Faults
from livetable.operator.seamless import NOT_SENT
from livetable.tasks import cancel

#: Waits on the wall clock (asyncio.sleep above zero): not in bin/test --fast (tests/tiers.py).
pytestmark = pytest.mark.sleeps


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> int:
        return self.now


async def test_the_line_hands_places_in_turn_and_refuses_who_cannot_start_in_time() -> None:
    clock = Clock()
    gate = DebitGate(1, clock)
    assert await gate.enter(T0 + 5_000)  # the one place
    second = asyncio.create_task(gate.enter(T0 + 5_000))
    short = asyncio.create_task(gate.enter(T0 + MIN_CALL_MS + 30))  # ~20 ms to wait
    await asyncio.sleep(0.2)
    assert short.done() and short.result() is False  # refused, never sent
    assert not second.done() and gate.waiting == 1
    gate.leave(5.0)
    assert await second is True and gate.busy == 1
    assert not await gate.enter(T0 + MIN_CALL_MS - 1)  # less than a call's time left
    gate.leave(None)
    assert gate.busy == 0 and gate.waiting == 0


async def test_a_debit_behind_a_line_longer_than_its_time_is_refused_at_once() -> None:
    gate = DebitGate(2, Clock())
    gate.typical_ms = 100.0  # two places: one comes free every 50 ms
    assert gate.call_ms == 150  # the time a debit must have left
    assert await gate.enter(T0 + 5_000) and await gate.enter(T0 + 5_000)
    line = [asyncio.create_task(gate.enter(T0 + 250)) for _ in range(2)]
    await asyncio.sleep(0)
    assert gate.waiting == 2  # the second starts after 100 ms: 150 left
    refused = asyncio.create_task(gate.enter(T0 + 250))
    await asyncio.sleep(0)
    assert refused.done() and refused.result() is False  # no wait: 150 + 150 > 250
    gate.leave(None)
    assert await line[0] and not line[1].done()
    gate.leave(None)
    assert await line[1]


async def test_a_place_handed_to_a_cancelled_waiter_is_given_on() -> None:
    gate = DebitGate(1, Clock())
    assert await gate.enter(T0 + 5_000)
    first = asyncio.create_task(gate.enter(T0 + 5_000))
    then = asyncio.create_task(gate.enter(T0 + 5_000))
    await asyncio.sleep(0)
    gate.leave(None)  # handed to ``first``...
    first.cancel()  # ...which is cancelled before it runs
    with pytest.raises(asyncio.CancelledError):
        await first
    assert await then is True and gate.busy == 1


def slip(player: str, slip_id: str, amount: int = 100) -> SlipRequest:
    return BetRequest(player_id=player, table=TABLE, bet_id=slip_id, round_id=R1,
                      spot="P1", amount=amount).as_slip()


async def test_a_debit_with_no_place_in_time_is_refused_unsent_and_owes_no_rollback(
        tmp_path: Path) -> None:
    """One connection, held by a slow debit: a slip whose deadline comes first is refused
    at once, ``wallet_unavailable``, without a call — logged as never sent (no debit in
    doubt, no rollback) and answered the same when sent again. Before, it waited for the
    connection, timed out, and its debit was left ``unknown``, to be rolled back."""
    rig = Rig(tmp_path, Faults({"debit": {"slow": 1.0}}, slow=1.0), connections=1)
    await rig.open_round()
    first = asyncio.create_task(rig.wallet.place_slip(ALICE, slip("alice", "b1"),
                                                      rig.clock.now, T0 + 16_000))
    await asyncio.sleep(0.1)  # its debit holds the one connection for 0.5 to 1.5 s
    answer = await rig.wallet.place_slip(ALICE, slip("alice", "b2"), rig.clock.now,
                                         rig.clock.now + 200)
    assert isinstance(answer, Rejection) and answer.code == "wallet_unavailable"
    assert not first.done()  # refused before the place came free
    [b2] = [c for c in await rig.log.calls() if c.slip_key == "bet:b2"]
    assert (b2.state, b2.answer, b2.closed_by) == ("refused", NOT_SENT, "refused")
    again = await rig.wallet.place_slip(ALICE, slip("alice", "b2"), rig.clock.now,
                                        T0 + 16_000)
    assert isinstance(again, Rejection) and again.code == "wallet_unavailable"
    assert isinstance(await first, p.SlipAccepted)
    assert [c["tx_id"] for c in rig.books.applied.values()] != [] and b2.tx_id not in {
        c["tx_id"] for c in rig.books.applied.values()}  # the operator never heard of it
    assert len([c for c in await rig.log.calls() if c.method == "debit"]) == 2
    await rig.wallet.sweep()
    assert await rig.log.backlog() == 0  # nothing to roll back
    await rig.close()


def count_calls(target: Any, names: list[str], calls: Counter[str]) -> None:
    for name in names:
        real = getattr(target, name)

        async def counted(*args: Any, _real: Any = real, _name: str = name,
                          **kwargs: Any) -> Any:
            calls[_name] += 1
            return await _real(*args, **kwargs)

        setattr(target, name, counted)


async def one_slip_each(rig: Rig, n: int) -> list[str]:
    """``n`` players, each with one slip of 100 on P1 accepted through the wallet at once."""
    players = [f"p{i}" for i in range(n)]
    for player in players:
        await rig.store.ensure_player(player, player, 0, T0)
    answers = await asyncio.gather(*(
        rig.wallet.place_slip(Identity(kind="player", id=player, name=player, expires=2**40,
                                       currency="THB"),
                              slip(player, f"{player}-b"), rig.clock.now, T0 + 16_000)
        for player in players))
    assert all(isinstance(a, p.SlipAccepted) for a in answers)
    return players


async def test_a_500_player_rounds_close_is_a_few_calls_and_pays_every_player_right(
        tmp_path: Path) -> None:
    rig = Rig(tmp_path, timeout=30.0, connections=32)
    await rig.open_round()
    players = await one_slip_each(rig, 500)
    await rig.settle()
    calls: Counter[str] = Counter()
    count_calls(rig.store, ["withdraw", "withdraw_many", "settlements_for_rounds",
                            "round_settlements", "round_view"], calls)
    count_calls(rig.log, ["enqueue", "answer_debit", "expire_debits", "open_debits"], calls)
    await rig.wallet.sweep()
    assert calls == {"expire_debits": 1, "open_debits": 1, "round_view": 1,
                     "round_settlements": 1, "withdraw_many": 1, "enqueue": 1}
    count_calls(rig.log, ["due"], calls)
    while await rig.log.backlog():  # 500 credits, 32 places: the log read ahead
        assert await rig.wallet.deliver() > 0
    assert calls["due"] <= 500 / 32 / 2  # one read per delivery of every place, before
    await rig.drain()
    applied_once(rig.books)
    won = {c["bets"][0]["returned"] for p_ in players for c in credits_of(rig.books, p_, R1)}
    assert len(won) == 1
    for player in players:
        [credit] = credits_of(rig.books, player, R1)
        assert rig.books.balances[player] == INITIAL - 200 + credit["amount"]
        view = await rig.store.player(player)
        assert view is not None and view.balance == 0
    assert (await rig.store.audit()).ok
    await rig.close()


async def test_a_sweep_while_the_round_is_in_play_reads_none_of_its_debits(
        tmp_path: Path) -> None:
    """Four sweeps a second while 10,000 bets come in: each read every open debit of the
    round in play (thousands, each made a call in the writer and sent back) to find the
    round not ended — measured, a quarter of a seamless bet's CPU. Now a sweep reads the
    rounds with open debits, and the debits only of a round that ended: none here, then
    every one once the round settles, each player paid."""
    rig = Rig(tmp_path, timeout=30.0, connections=16)
    await rig.open_round()
    players = await one_slip_each(rig, 60)
    read: Counter[str] = Counter()
    run = rig.log._run

    async def counted(steps: list[Any]) -> Any:
        outcomes = await run(steps)
        for outcome in outcomes:
            value = outcome.value
            read["debits"] += len(value) if isinstance(value, list) else 0
        return outcomes

    rig.log._run = counted  # type: ignore[method-assign]
    for _ in range(3):
        await rig.wallet.sweep()
    assert read["debits"] == 0 and await rig.log.backlog() == 0
    await rig.settle()
    await rig.wallet.sweep()
    assert read["debits"] == len(players) and await rig.log.backlog() == len(players)
    await rig.drain()
    applied_once(rig.books)
    for player in players:
        [credit] = credits_of(rig.books, player, R1)
        assert rig.books.balances[player] == INITIAL - 200 + credit["amount"]
    await rig.close()


async def test_a_rounds_close_is_delivered_chunk_by_chunk_and_starts_when_bets_settle(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The loop's sweep runs once at start, then not for 30 s unless asked: the round's
    settlement asks (``settled``, the runner's hook), and its credits are written 2 at a
    time (``CLOSE_CHUNK``), the outbox delivering the first while the next wait to be
    written. Before, the close waited for the next interval and wrote every credit before
    the first was sent."""
    monkeypatch.setattr(seamless, "CLOSE_CHUNK", 2)
    rig = Rig(tmp_path, timeout=5.0, connections=8)
    await rig.open_round()
    players = [f"p{i}" for i in range(5)]
    for player in players:
        await rig.store.ensure_player(player, player, 0, T0)
        answer = await rig.wallet.place_slip(
            Identity(kind="player", id=player, name=player, expires=2**40, currency="THB"),
            slip(player, f"{player}-b"), rig.clock.now, T0 + 16_000)
        assert isinstance(answer, p.SlipAccepted)
    withdrawals: list[int] = []
    first_delivered: list[bool] = []
    real = rig.store.withdraw_many

    async def withdraw_many(moves: Any, now: int) -> Any:
        withdrawals.append(len(moves))
        if len(withdrawals) == 2:  # the first chunk's credits reach the operator meanwhile
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(5):
                    while sum(len(credits_of(rig.books, p_, R1)) for p_ in players) < 2:
                        await asyncio.sleep(0.01)
            first_delivered.append(
                sum(len(credits_of(rig.books, p_, R1)) for p_ in players) == 2)
        return await real(moves, now)

    rig.store.withdraw_many = withdraw_many  # type: ignore[method-assign]
    loop = asyncio.create_task(rig.wallet.run(interval=30))
    try:
        await asyncio.sleep(0.3)  # its first sweep: nothing ended yet
        await rig.settle()
        rig.wallet.settled()
        async with asyncio.timeout(10):
            while sum(len(credits_of(rig.books, p_, R1)) for p_ in players) < len(players):
                await asyncio.sleep(0.02)
    finally:
        await cancel(loop)
    assert withdrawals == [2, 2, 1] and first_delivered == [True]
    for player in players:
        assert len(credits_of(rig.books, player, R1)) == 1
    applied_once(rig.books)
    await rig.close()
