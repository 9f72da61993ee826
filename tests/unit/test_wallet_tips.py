"""Tips to the dealer with a seamless wallet (livetable/operator/tipping.py), against the
reference operator in the test's own event loop (tests/unit/test_wallet.py's rig): one
signed debit the operator keeps, never a second for a re-send, an unknown outcome refused
and rolled back as a bet's debit is, the session's allowance judged before any debit."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import msgspec
import pytest
from test_wallet import ALICE, INITIAL, TABLE, Rig, applied_once

from livetable.betting.tips import Allowance, TipRefusal, TipRequest, TipTaken
from livetable.operator.calls import DEBIT_DECODER, TipDebit
from livetable.operator.closing import TAKEOVER_MS
from livetable.operator.log import rollback_tx_id
from livetable.operator.reference import Faults
from livetable.operator.tipping import WalletTips
from livetable.store.base import StoreUnavailable

#: Waits on the wall clock (asyncio.sleep above zero): not in bin/test --fast (tests/tiers.py).
pytestmark = pytest.mark.sleeps


def tip(tip_id: str = "tip-1", amount: int = 300, **more: object) -> TipRequest:
    return TipRequest(player_id="alice", table=TABLE, tip_id=tip_id, amount=amount,
                      round_id="t1.1.1", **more)  # type: ignore[arg-type]  # the test's own


async def tips_of(tmp_path: Path, faults: Faults | None = None) -> tuple[Rig, WalletTips]:
    rig = Rig(tmp_path, faults)
    await rig.open_round()
    return rig, WalletTips(rig.wallet)


@pytest.fixture
async def rigged(tmp_path: Path) -> AsyncIterator[tuple[Rig, WalletTips]]:
    rig, tips = await tips_of(tmp_path)
    yield rig, tips
    await rig.close()


async def test_a_tip_is_one_debit_the_operator_keeps(rigged: tuple[Rig, WalletTips]) -> None:
    rig, tips = rigged
    answer = await tips.place_tip(ALICE, tip())
    assert answer == TipTaken("tip-1", 300, INITIAL - 300, fresh=True)  # the operator's
    again = await tips.place_tip(ALICE, tip())
    assert again == TipTaken("tip-1", 300, INITIAL - 300, fresh=False)
    [debit] = [c for c in await rig.log.calls() if c.method == "debit"]
    assert (debit.state, debit.closed_by, debit.round_id, debit.slip_key) == (
        "ok", "tip", "t1.tips", "tip:tip-1")
    body = msgspec.json.decode(debit.body, type=TipDebit)
    assert (body.tip_id, body.bets, body.amount, body.currency) == ("tip-1", [], 300, "THB")
    assert DEBIT_DECODER.decode(debit.body).bets == []  # an operator reads it as a debit
    # nothing is owed back: no round closes it, the sweeper leaves it alone
    await rig.drain()
    assert rig.books.balances["alice"] == INITIAL - 300
    applied_once(rig.books)
    # the ledger shows it as an internal wallet's tip: in, out, the tip account credited
    assert await rig.ledger_balance() == 0
    [entry] = await rig.store.tip_record("alice", None, None)
    assert (entry.tip_id, entry.amount) == ("tip-1", 300)
    report = await rig.store.audit()
    assert report.ok and report.deposits == 300, report.problems


async def test_a_tip_id_sent_again_for_another_amount_is_refused_without_a_debit(
        rigged: tuple[Rig, WalletTips]) -> None:
    rig, tips = rigged
    await tips.place_tip(ALICE, tip(amount=300))
    assert await tips.place_tip(ALICE, tip(amount=400)) == TipRefusal("duplicate_tip_id")
    assert len([c for c in await rig.log.calls() if c.method == "debit"]) == 1


async def test_the_sessions_allowance_is_judged_before_any_debit(
        rigged: tuple[Rig, WalletTips]) -> None:
    rig, tips = rigged
    left = Allowance("loss_limit", 200, 1000)
    assert await tips.place_tip(ALICE, tip(amount=201, allowance=left)) == TipRefusal(
        "rg_limit", ("loss_limit", 200, 1000))
    assert await rig.log.calls() == []
    assert rig.books.balances.get("alice", INITIAL) == INITIAL


async def test_the_operators_no_is_the_tips(rigged: tuple[Rig, WalletTips]) -> None:
    rig, tips = rigged
    short = await tips.place_tip(ALICE, tip(amount=INITIAL + 1))
    assert short == TipRefusal("insufficient_funds", (INITIAL + 1, INITIAL))
    assert await tips.place_tip(ALICE, tip(amount=INITIAL + 1)) == TipRefusal(
        "insufficient_funds")  # sent again: the same no, no second debit
    assert await rig.log.backlog() == 0
    assert await rig.store.tip_record("alice", None, None) == []


@pytest.mark.parametrize("fault", ["error", "lost", "garbage"])
async def test_an_unknown_outcome_refuses_the_tip_and_rolls_the_debit_back(
        tmp_path: Path, fault: str) -> None:
    rig, tips = await tips_of(tmp_path, Faults({"debit": {fault: 1.0}}))
    try:
        assert await tips.place_tip(ALICE, tip()) == TipRefusal("wallet_unavailable")
        assert await tips.place_tip(ALICE, tip()) == TipRefusal("wallet_unavailable")
        [debit] = [c for c in await rig.log.calls() if c.method == "debit"]
        assert debit.state == "unknown"
        await rig.drain()
        assert rig.books.balances["alice"] == INITIAL  # "lost"/"garbage" took it: back
        assert rig.books.rolled_back == {debit.tx_id: rollback_tx_id(debit.tx_id)}
        applied_once(rig.books)
        assert await rig.ledger_balance() == 0
        assert await rig.store.tip_record("alice", None, None) == []
        assert (await rig.store.audit()).ok
    finally:
        await rig.close()


async def tip_while_the_ledger_is_out(rig: Rig, tips: WalletTips,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """A tip the operator takes while the store cannot write it (answered unavailable);
    the store back afterwards."""
    place_tip = rig.store.place_tip

    async def out(*args: object, **kwargs: object) -> object:
        raise StoreUnavailable("the disk is full")

    monkeypatch.setattr(rig.store, "place_tip", out)
    with pytest.raises(StoreUnavailable):
        await tips.place_tip(ALICE, tip())  # the gateway answers it unavailable
    monkeypatch.setattr(rig.store, "place_tip", place_tip)


async def test_a_tip_the_operator_took_while_the_ledger_was_out_is_written_by_the_sweeper(
        rigged: tuple[Rig, WalletTips], monkeypatch: pytest.MonkeyPatch) -> None:
    """The debit was closed ``tip`` as soon as the operator said ok, before the ledger took
    the tip: with the store out at that moment the player heard ``unavailable``, and unless
    they sent the same tip again the ledger never showed what the operator kept (no tip in
    the Bet Record, none in the house's tip account). Now the debit stays open until the
    ledger has it, and the sweeper writes it."""
    rig, tips = rigged
    await tip_while_the_ledger_is_out(rig, tips, monkeypatch)
    assert rig.books.balances["alice"] == INITIAL - 300  # the operator has it
    [debit] = [c for c in await rig.log.calls() if c.method == "debit"]
    assert (debit.state, debit.closed_by) == ("ok", None)
    await rig.wallet.sweep()  # too soon: its gateway may be writing it right now
    assert await rig.store.tip_record("alice", None, None) == []
    rig.clock.now += TAKEOVER_MS + 1
    await rig.drain()
    [debit] = [c for c in await rig.log.calls() if c.method == "debit"]
    assert (debit.state, debit.closed_by) == ("ok", "tip")
    [entry] = await rig.store.tip_record("alice", None, None)
    assert (entry.tip_id, entry.amount) == ("tip-1", 300)
    assert rig.books.balances["alice"] == INITIAL - 300  # kept: nothing rolled back
    assert await rig.ledger_balance() == 0
    report = await rig.store.audit()
    assert report.ok and report.deposits == 300, report.problems
    # the player's re-send, after all that, is answered as the tip it was
    assert await tips.place_tip(ALICE, tip()) == TipTaken("tip-1", 300, INITIAL - 300,
                                                          fresh=False)


async def test_a_tip_sent_again_after_the_ledger_was_out_is_written_once(
        rigged: tuple[Rig, WalletTips], monkeypatch: pytest.MonkeyPatch) -> None:
    rig, tips = rigged
    await tip_while_the_ledger_is_out(rig, tips, monkeypatch)
    answer = await tips.place_tip(ALICE, tip())  # the page sends it again
    assert isinstance(answer, TipTaken) and answer.amount == 300
    rig.clock.now += TAKEOVER_MS + 1
    await rig.drain()  # the sweeper finds it closed: nothing more
    [debit] = [c for c in await rig.log.calls() if c.method == "debit"]
    assert debit.closed_by == "tip"
    assert len(await rig.store.tip_record("alice", None, None)) == 1
    applied_once(rig.books)
    assert (await rig.store.audit()).ok
