"""The seamless wallet, unit by unit: signatures, the reference operator's books, and
livetable's wallet (debit, credit, rollback, the outbox, the sweeper) against the reference
operator served in the test's own event loop (tests/asgi_server.py: real requests over
loopback).

The over-the-wire runs with faults and kill -9 are tests/integration/test_operator_wallet.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest
from asgi_server import served
from starlette.types import ASGIApp

from livetable import protocol as p
from livetable.auth import Identity
from livetable.betting.slips import BetRequest, Rejection, SlipRequest
from livetable.clock import now_ms
from livetable.config import Settings
from livetable.engine import CancelRound, OpenRound, SettleRound
from livetable.metrics import Metrics
from livetable.operator import signatures
from livetable.operator.client import WalletClient
from livetable.operator.closing import TAKEOVER_MS
from livetable.operator.log import rollback_tx_id
from livetable.operator.log_sqlite import SQLiteWalletLog
from livetable.operator.reference import Books, Call, Faults, create_operator_app
from livetable.operator.report import report
from livetable.operator.seamless import SeamlessWallet
from livetable.rules import Position, hand_of, parse_cards, settle_round
from livetable.server.gateway.intake import bet_answer
from livetable.store.sqlite import SQLiteStore

#: Waits on the wall clock (asyncio.sleep above zero): not in bin/test --fast (tests/tiers.py).
pytestmark = pytest.mark.sleeps

SECRET = b"wallet-secret"
T0 = 1_800_000_000_000
TABLE = "t1"
R1 = "t1.1.1"
INITIAL = 10_000
ALICE = Identity(kind="player", id="alice", name="Alice", expires=2**40, currency="THB")
#: P1 wins 1:1 (9 against the Banker's 7): a P1 bet of 100 deducts 200 and returns 300.
CARDS = {"P1": "9D 10C", "P2": "2S 3H", "P3": "4S 5H", "P4": "6S 8H", "P5": "7S 9H",
         "BANKER": "7D 10H"}


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> int:
        return self.now


class Rig:
    """A SQLite ledger with a round open, the reference operator, and livetable's wallet."""

    def __init__(self, tmp: Path, faults: Faults | None = None,
                 secret: bytes = SECRET, timeout: float = 2.0, connections: int = 4) -> None:
        self.clock = Clock()
        tmp.mkdir(parents=True, exist_ok=True)
        self.store = SQLiteStore(tmp / "lt.db")
        self.log = SQLiteWalletLog(tmp / "lt-wallet.db")  # beside the ledger, as served
        self.operator: ASGIApp = create_operator_app(SECRET, initial_balance=INITIAL, faults=faults)
        self.books: Books = self.operator.state.books
        self.secret = secret
        self.timeout = timeout
        self.connections = connections
        self._serving: contextlib.AbstractAsyncContextManager[str] | None = None

    async def start(self) -> None:
        """Serve the reference operator and make livetable's wallet, calling it."""
        self._serving = served(self.operator)
        url = await self._serving.__aenter__() + "/wallet"
        self.settings = Settings(wallet="seamless", wallet_url=url,
                                 wallet_secret=self.secret, wallet_timeout=self.timeout)
        self.client = client = WalletClient(url, self.secret, timeout=self.timeout,
                                            connections=self.connections)
        self.wallet = SeamlessWallet(self.settings, self.store, self.log, client, Metrics(),
                                     clock=self.clock)

    async def open_round(self, round_id: str = R1) -> None:
        if self._serving is None:
            await self.start()
        await self.store.ensure_player("alice", "Alice", 0, T0)
        await self.store.commit_step(TABLE, b"{}", [], [OpenRound(
            table=TABLE, round_id=round_id, shoe_id="t1.1", round_no=1,
            closes_at=T0 + 15_000, limits=p.Limits())], T0)

    async def bet(self, bet_id: str, amount: int = 100, spot: str = "P1",
                  round_id: str = R1) -> p.BetAccepted | p.BetRejected:
        request = BetRequest(player_id="alice", table=TABLE, bet_id=bet_id, round_id=round_id,
                             spot=spot, amount=amount)
        return bet_answer(request.bet_id, await self.wallet.place_slip(
            ALICE, request.as_slip(), self.clock.now, T0 + 16_000))

    async def settle(self, round_id: str = R1) -> None:
        hands = {Position(k): hand_of(parse_cards(v)) for k, v in CARDS.items()}
        spots: dict[str, tuple[str, int, int]] = {k.value: (r.outcome, r.odds, r.returned_multiple)
                 for k, r in settle_round(hands).items()}
        await self.store.commit_step(TABLE, b"{}", [], [SettleRound(
            table=TABLE, round_id=round_id, spots=spots,
            cards={k: v.split() for k, v in CARDS.items()})], self.clock.now)

    async def cancel(self, round_id: str = R1) -> None:
        await self.store.commit_step(TABLE, b"{}", [], [CancelRound(
            table=TABLE, round_id=round_id, reason="camera down")], self.clock.now)

    async def drain(self) -> None:
        """Sweep and deliver until nothing is owed (faults off by then)."""
        for _ in range(50):
            await self.wallet.sweep()
            await self.wallet.deliver()
            if await self.log.backlog() == 0:
                return
            self.clock.now += 60_000  # past any back-off
        raise AssertionError("the outbox did not drain")

    async def ledger_balance(self) -> int:
        view = await self.store.player("alice")
        assert view is not None
        return view.balance

    async def close(self) -> None:
        await self.wallet.stop()
        if self._serving is not None:
            await self._serving.__aexit__(None, None, None)
        await self.log.close()
        await self.store.close()


@pytest.fixture
async def rig(tmp_path: Path) -> AsyncIterator[Rig]:
    made = Rig(tmp_path)
    await made.open_round()
    yield made
    await made.close()


def credits_of(books: Books, player: str, round_id: str) -> list[dict[str, Any]]:
    """The credits the operator applied for ``player`` in ``round_id``."""
    return [c for c in books.applied.values() if c["method"] == "credit"
            and c["player_id"] == player and c["round_id"] == round_id]


def applied_once(books: Books) -> None:
    assert all(n == 1 for n in books.applications.values()), books.applications


def closes(books: Books) -> dict[str, int]:
    """Per debit the operator applied: how many credits and rollbacks close it."""
    count = {tx: 0 for tx, c in books.applied.items() if c["method"] == "debit"}
    for call in books.applied.values():
        targets = (call["debit_tx_ids"] if call["method"] == "credit"
                   else [call["debit_tx_id"]] if call["method"] == "rollback" else [])
        for tx in targets:
            if tx in count:
                count[tx] += 1
    return count


# --- signatures ------------------------------------------------------------------------


def test_a_signature_is_the_hmac_of_the_timestamp_and_the_exact_body() -> None:
    body = b'{"player_id":"alice","currency":"THB"}'
    now = 1_700_000_000_000
    signed = signatures.headers(SECRET, body, now)
    header = signed[signatures.HEADER]
    assert header == "sha256=" + hmac.new(SECRET, b"1700000000000." + body,
                                          hashlib.sha256).hexdigest()
    assert signatures.check([SECRET], body, signed, now) is None
    assert signatures.check([b"old", SECRET], body, signed, now) is None  # rotation
    assert signatures.check([SECRET], body + b" ", signed, now)  # one byte more
    assert signatures.check([b"other"], body, signed, now)
    assert signatures.check([SECRET], body, {**signed, signatures.HEADER: header.replace(
        "sha256=", "sha1=")}, now)
    assert signatures.check([SECRET], body, {}, now)
    # the same signature at another time is another message
    assert signatures.check([SECRET], body, {**signed, signatures.TIMESTAMP_HEADER:
                                             str(now + 1)}, now)
    # within five minutes of the receiver's clock, either way, and no further
    assert signatures.check([SECRET], body, signed, now + 300_000) is None
    assert "300 s" in (signatures.check([SECRET], body, signed, now + 300_001) or "")
    assert "300 s" in (signatures.check([SECRET], body, signed, now - 300_001) or "")
    # a non-ASCII header is an invalid signature, not a server error
    assert signatures.check([SECRET], body, {**signed, signatures.HEADER: "sha256=\xe9\xe9"},
                            now)


async def test_the_operator_refuses_a_forged_call_and_moves_nothing() -> None:
    app = create_operator_app(SECRET, initial_balance=INITIAL)
    body = b'{"tx_id":"d-1","player_id":"alice","currency":"THB","amount":500}'
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                 base_url="http://op") as http:
        forged = await http.post("/wallet/debit", content=body,
                                 headers=signatures.headers(b"guess", body, now_ms()))
        unsigned = await http.post("/wallet/debit", content=body)
        assert forged.json() == unsigned.json() == {"status": "invalid_signature"}
        state = (await http.get("/state")).json()
    assert state["applied"] == {} and state["forged"] == 2


async def test_a_debit_signed_with_the_wrong_secret_is_refused_and_no_money_moves(
        tmp_path: Path) -> None:
    rig = Rig(tmp_path, secret=b"not-the-operators")
    await rig.open_round()
    answer = await rig.bet("b1")
    assert isinstance(answer, p.BetRejected) and answer.code == "wallet_refused"
    assert "invalid_signature" in answer.message
    assert rig.books.applied == {} and rig.books.forged == 1
    assert await rig.log.backlog() == 0  # refused: nothing to roll back
    await rig.close()


# --- the reference operator's books ---------------------------------------------------------


def test_the_operator_answers_a_repeated_tx_id_with_its_first_answer() -> None:
    books = Books(initial_balance=1_000)
    debit = Call(tx_id="d-1", player_id="bob", currency="THB", amount=300)
    first = books.handle("debit", debit)
    assert msgspec.json.decode(first) == {"status": "ok", "balance": 700}
    books.balances["bob"] = 5  # whatever happens since, the tx_id's answer is the first
    assert books.handle("debit", debit) == first
    assert books.applications == {"d-1": 1}


def test_a_rollback_before_its_debit_is_ok_and_the_debit_is_refused_after() -> None:
    books = Books(initial_balance=1_000)
    rollback = Call(tx_id="r-1", player_id="bob", amount=300, debit_tx_id="d-1")
    assert msgspec.json.decode(books.handle("rollback", rollback))["status"] == "ok"
    late = books.handle("debit", Call(tx_id="d-1", player_id="bob", amount=300))
    assert msgspec.json.decode(late) == {"status": "rolled_back", "balance": 1_000}
    assert books.balances["bob"] == 1_000


def test_a_rollback_refunds_an_applied_debit_once() -> None:
    books = Books(initial_balance=1_000)
    books.handle("debit", Call(tx_id="d-1", player_id="bob", amount=300))
    books.handle("rollback", Call(tx_id="r-1", player_id="bob", amount=300, debit_tx_id="d-1"))
    books.handle("rollback", Call(tx_id="r-1", player_id="bob", amount=300, debit_tx_id="d-1"))
    books.handle("rollback", Call(tx_id="r-2", player_id="bob", amount=300, debit_tx_id="d-1"))
    assert books.balances["bob"] == 1_000


def test_fault_specs_are_parsed_per_method_and_drawn_from_the_seed() -> None:
    faults = Faults.parse(["debit:timeout=0.25,lost=0.25", "*:slow=0.5"], seed=3)
    assert faults.rates["debit"] == {"timeout": 0.25, "lost": 0.25, "slow": 0.5}
    assert faults.rates["credit"] == {"slow": 0.5}
    again = Faults.parse(["debit:timeout=0.25,lost=0.25", "*:slow=0.5"], seed=3)
    assert [faults.draw("debit") for _ in range(50)] == [again.draw("debit")
                                                          for _ in range(50)]
    for bad in (["debit"], ["debit:fire=0.1"], ["payout:error=0.1"], ["debit:error=2"]):
        with pytest.raises(ValueError):
            Faults.parse(bad)


# --- livetable's wallet ---------------------------------------------------------------------


async def test_a_bet_paid_by_the_operator_then_one_credit_for_the_round(rig: Rig) -> None:
    answer = await rig.bet("b1")
    assert isinstance(answer, p.BetAccepted)
    assert answer.deducted == 200 and answer.balance == INITIAL - 200  # the operator's
    assert await rig.ledger_balance() == 0  # the deposit went straight into the hold
    await rig.settle()
    await rig.drain()
    assert rig.books.balances["alice"] == INITIAL - 200 + 300
    [credit] = credits_of(rig.books, "alice", R1)
    assert credit["amount"] == 300 and len(credit["debit_tx_ids"]) == 1
    assert credit["bets"] == [{"bet_id": "b1", "outcome": "win", "returned": 300}]
    assert await rig.ledger_balance() == 0  # livetable holds nothing of the player's
    audit = await rig.store.audit()
    assert audit.ok, audit.problems
    applied_once(rig.books)
    assert set(closes(rig.books).values()) == {1}


async def test_a_round_whose_bets_all_lose_still_gets_a_credit_of_0(rig: Rig) -> None:
    await rig.bet("b1", spot="P2_PAIR", amount=50)  # 2S 3H: no pair, returns 0
    await rig.settle()
    await rig.drain()
    [credit] = credits_of(rig.books, "alice", R1)
    assert credit["amount"] == 0 and credit["bets"][0]["returned"] == 0
    assert rig.books.balances["alice"] == INITIAL - 50


async def test_a_credit_lists_every_debit_of_the_player_in_the_round(rig: Rig) -> None:
    for n in range(3):
        assert isinstance(await rig.bet(f"b{n}"), p.BetAccepted)
    await rig.settle()
    await rig.drain()
    credits = [c for c in rig.books.applied.values() if c["method"] == "credit"]
    assert len(credits) == 1 and len(credits[0]["debit_tx_ids"]) == 3
    assert rig.books.balances["alice"] == INITIAL + 3 * 100


@pytest.mark.parametrize("fault", ["error", "lost", "garbage"])
async def test_an_unknown_outcome_refuses_the_bet_and_rolls_the_debit_back(
        tmp_path: Path, fault: str) -> None:
    rig = Rig(tmp_path, Faults({"debit": {fault: 1.0}}))
    await rig.open_round()
    answer = await rig.bet("b1")
    assert isinstance(answer, p.BetRejected) and answer.code == "wallet_unavailable"
    # the player heard it once the log said "unknown": the rollback is the sweeper's
    [debit] = await rig.log.open_debits(10)
    assert debit.state == "unknown" and await rig.log.backlog() == 0
    await rig.wallet.sweep()
    assert await rig.log.open_debits(10) == [] and await rig.log.backlog() == 1
    await rig.drain()
    assert rig.books.balances["alice"] == INITIAL  # "lost"/"garbage" applied it: refunded
    debit_tx = next(c.tx_id for c in await rig.log.calls() if c.method == "debit")
    assert rig.books.rolled_back == {debit_tx: rollback_tx_id(debit_tx)}
    applied_once(rig.books)
    assert await rig.ledger_balance() == 0
    assert (await rig.store.bet_record("alice", 10, None))[0] == []  # never placed
    await rig.close()


async def test_a_bet_sent_again_after_an_unknown_outcome_is_not_debited_twice(
        tmp_path: Path) -> None:
    rig = Rig(tmp_path, Faults({"debit": {"lost": 1.0}}))
    await rig.open_round()
    await rig.bet("b1")
    again = await rig.bet("b1")
    assert isinstance(again, p.BetRejected) and again.code == "wallet_unavailable"
    debits = [c for c in await rig.log.calls() if c.method == "debit"]
    assert len(debits) == 1
    await rig.close()


async def test_insufficient_funds_is_the_operators_no_and_needs_no_rollback(rig: Rig) -> None:
    answer = await rig.bet("b1", amount=5_000, spot="P1")  # deducts 10,000: all of it, ok
    assert isinstance(answer, p.BetAccepted)
    short = await rig.bet("b2", amount=10, spot="P2")
    assert isinstance(short, p.BetRejected) and short.code == "insufficient_funds"
    assert await rig.log.backlog() == 0
    [refused] = [c for c in await rig.log.calls() if c.slip_key == "bet:b2"]
    assert refused.state == "refused" and refused.closed_by == "refused"


async def test_a_cancelled_round_rolls_back_every_debit(rig: Rig) -> None:
    await rig.bet("b1")
    await rig.bet("b2", spot="P3_PAIR", amount=20)
    await rig.cancel()
    await rig.drain()
    assert rig.books.balances["alice"] == INITIAL
    assert len(rig.books.rolled_back) == 2
    assert not [c for c in rig.books.applied.values() if c["method"] == "credit"]
    assert await rig.ledger_balance() == 0
    assert (await rig.store.audit()).ok
    assert set(closes(rig.books).values()) == {1}


async def test_a_debit_answered_after_the_window_is_rolled_back(tmp_path: Path) -> None:
    rig = Rig(tmp_path)
    await rig.open_round()
    request = BetRequest(player_id="alice", table=TABLE, bet_id="b1", round_id=R1,
                         spot="P1", amount=100)
    real_call = rig.client.call

    async def late(method: str, body: bytes, timeout: float | None = None) -> Any:
        reply = await real_call(method, body, timeout)
        rig.clock.now = T0 + 20_000  # the answer came back after the window
        return reply

    rig.client.call = late  # type: ignore[method-assign]  # a slow network, no sleep
    answer = bet_answer(request.bet_id, await rig.wallet.place_slip(ALICE, request.as_slip(), T0,
                                                             T0 + 16_000))
    assert isinstance(answer, p.BetRejected) and answer.code == "wallet_unavailable"
    await rig.drain()
    assert rig.books.balances["alice"] == INITIAL
    await rig.close()


async def test_a_crash_between_the_debit_and_the_bet_is_rolled_back_after_the_round(
        rig: Rig) -> None:
    """The gateway died after the operator's ok, before the slip reached the ledger: the
    sweeper finds the debit open when the round has ended, waits out the gateway's time,
    then rolls the debit back (its mirror deposit goes with the slip, so there is none to
    take out of the ledger)."""
    real_place = rig.store.place_slip

    async def crash(*args: Any) -> Any:
        raise ConnectionError("killed")

    rig.store.place_slip = crash  # type: ignore[method-assign, assignment]  # the process dies here
    with pytest.raises(ConnectionError):
        await rig.bet("b1")
    rig.store.place_slip = real_place  # type: ignore[method-assign]
    assert await rig.ledger_balance() == 0  # no deposit without its slip
    await rig.settle()
    await rig.wallet.sweep()
    assert await rig.log.backlog() == 0  # too early: its gateway might still be at it
    rig.clock.now += TAKEOVER_MS + 16_000
    await rig.drain()
    assert rig.books.balances["alice"] == INITIAL
    assert await rig.ledger_balance() == 0
    assert (await rig.store.audit()).ok
    assert set(closes(rig.books).values()) == {1}


async def test_a_pending_debit_nobody_answered_is_taken_over_and_rolled_back(
        rig: Rig) -> None:
    """A debit written, sent, and its sender killed before the answer: still pending."""
    real_call = rig.client.call

    async def killed(method: str, body: bytes, timeout: float | None = None) -> Any:
        await real_call(method, body, timeout)  # the operator applies it
        raise SystemExit  # and the process is gone before it reads the answer

    rig.client.call = killed  # type: ignore[method-assign]
    with pytest.raises(SystemExit):
        await rig.bet("b1")
    rig.client.call = real_call  # type: ignore[method-assign]
    [debit] = await rig.log.open_debits(10)
    assert debit.state == "pending"
    rig.clock.now = debit.deadline + TAKEOVER_MS + 1
    await rig.drain()
    assert rig.books.balances["alice"] == INITIAL
    [debit] = [c for c in await rig.log.calls() if c.method == "debit"]
    assert debit.state == "unknown" and debit.closed_by == rollback_tx_id(debit.tx_id)


async def test_the_outbox_retries_with_back_off_and_the_same_tx_id(tmp_path: Path) -> None:
    faults = Faults({"credit": {"error": 1.0}})
    rig = Rig(tmp_path, faults)
    await rig.open_round()
    await rig.bet("b1")
    await rig.settle()
    await rig.wallet.sweep()
    for _ in range(4):
        await rig.wallet.deliver()
        [credit] = [c for c in await rig.log.calls() if c.method == "credit"]
        assert credit.state == "queued" and credit.next_at > rig.clock.now
        assert "http 500" in (credit.answer or "")
        rig.clock.now = credit.next_at
    assert credit.attempts == 4
    faults.rates = {}
    await rig.drain()
    [credit] = [c for c in await rig.log.calls() if c.method == "credit"]
    assert credit.state == "ok" and credit.attempts == 5
    applied_once(rig.books)
    assert rig.books.balances["alice"] == INITIAL + 100
    await rig.close()


async def test_the_report_adds_up_each_round(rig: Rig) -> None:
    await rig.bet("b1")  # 200 debited, 300 back
    await rig.bet("b2", spot="P2", amount=50)  # 100 debited; P2 (5) loses to 7: 50 back
    await rig.settle()
    await rig.drain()
    result = report(await rig.log.calls(round_id=R1), await rig.log.totals(round_id=R1))
    [row] = result.rounds
    assert (row.debited, row.credited, row.rolled_back, row.net) == (300, 350, 0, -50)
    assert row.open_debits == row.undelivered == 0
    assert [c.method for c in result.calls] == ["debit", "debit", "credit"]
    assert result.calls[2].request["debit_tx_ids"] == [c.tx_id for c in result.calls[:2]]


async def test_a_slip_of_several_bets_is_one_debit_and_one_credit(rig: Rig) -> None:
    """The wallet pays slips, not bets: one debit for the slip's total, one credit."""
    slip = SlipRequest(player_id="alice", table=TABLE, slip_id="s1", round_id=R1, bets=(
        p.SlipBet(bet_id="s1-a", spot="P1", amount=100),
        p.SlipBet(bet_id="s1-b", spot="P1_PAIR", amount=20)))
    answer = await rig.wallet.place_slip(ALICE, slip, T0, T0 + 16_000)
    assert isinstance(answer, p.SlipAccepted) and answer.deducted == 220
    assert answer.balance == INITIAL - 220  # the operator's
    [debit] = [c for c in rig.books.applied.values() if c["method"] == "debit"]
    assert debit["amount"] == 220 and [b["bet_id"] for b in debit["bets"]] == ["s1-a", "s1-b"]
    again = await rig.wallet.place_slip(ALICE, slip, T0, T0 + 16_000)  # sent again
    assert isinstance(again, p.SlipAccepted) and len(rig.books.applied) == 1
    await rig.settle()
    await rig.drain()
    [credit] = credits_of(rig.books, "alice", R1)
    assert credit["amount"] == 300  # P1 wins 1:1 (300), the pair loses (0)
    assert [b["bet_id"] for b in credit["bets"]] == ["s1-a", "s1-b"]


async def test_a_slip_the_store_refuses_after_the_debit_is_rolled_back_whole(rig: Rig) -> None:
    slip = SlipRequest(player_id="alice", table=TABLE, slip_id="s2", round_id=R1, bets=(
        p.SlipBet(bet_id="s2-a", spot="P2", amount=100),
        p.SlipBet(bet_id="s2-b", spot="P2_PAIR", amount=1_500)))  # a Pair's max is 1,000
    answer = await rig.wallet.place_slip(ALICE, slip, T0, T0 + 16_000)
    assert isinstance(answer, Rejection) and answer.code == "above_max"
    await rig.drain()
    assert rig.books.balances["alice"] == INITIAL and len(rig.books.rolled_back) == 1
    assert await rig.ledger_balance() == 0  # the mirror deposit went back out
    assert (await rig.store.bet_record("alice", 10, None))[0] == []  # neither bet stands


async def test_a_bet_id_whose_debit_was_rolled_back_is_never_placed_later(rig: Rig) -> None:
    """b1's debit is ok but the store refuses the bet (over the spot's maximum), so it is
    rolled back; the same bet_id sent again (now within the limit) must not be placed on
    money that went back to the operator."""
    too_much = await rig.bet("b1", amount=1_500, spot="P1_PAIR")  # a Pair's max is 1,000
    assert isinstance(too_much, p.BetRejected) and too_much.code == "above_max"
    again = await rig.bet("b1", amount=500, spot="P1_PAIR")
    assert isinstance(again, p.BetRejected) and again.code == "wallet_unavailable"
    assert (await rig.store.bet_record("alice", 10, None))[0] == []
    await rig.drain()
    assert rig.books.balances["alice"] == INITIAL


async def test_one_players_slips_sent_at_once_all_land(rig: Rig) -> None:
    """Four slips of one player at once are debited together (each debit's deposit is
    taken by its own bets only) and are all taken; a re-send of one sent meanwhile waits
    for the first and hears its answer; no turn is kept once they are done."""
    answers = await asyncio.gather(*(rig.bet(f"b{n}", amount=100 + n) for n in range(4)),
                                   rig.bet("b0", amount=100))
    assert all(isinstance(a, p.BetAccepted) for a in answers), answers
    assert answers[4] == answers[0]
    assert len([c for c in await rig.log.calls() if c.method == "debit"]) == 4
    assert await rig.ledger_balance() == 0
    assert (await rig.store.audit()).ok
    assert not rig.wallet._turns  # no turn kept once nobody waits


# --- money defects: currencies and installations ---------------------------------------------


async def test_a_credit_carries_its_debits_currency(rig: Rig) -> None:
    """Alice launched in USD and in THB bets from both sessions in one round: the operator
    gets one credit per currency, each with its own debits and bets — never one USD credit
    that includes the THB bet's return."""
    in_usd = Identity(kind="player", id="alice", name="Alice", expires=2**40, currency="USD")
    for identity, bet_id, spot in ((in_usd, "b-usd", "P1"), (ALICE, "b-thb", "P4")):
        request = BetRequest(player_id="alice", table=TABLE, bet_id=bet_id, round_id=R1,
                             spot=spot, amount=100)
        answer = bet_answer(request.bet_id, await rig.wallet.place_slip(
            identity, request.as_slip(), rig.clock.now, T0 + 16_000))
        assert isinstance(answer, p.BetAccepted), answer
    # P1 (9) beats the Banker's 7: 300 of its 200 deducted back; P4 (4) loses 1:1: 100 back
    await rig.settle()
    await rig.drain()
    credits = {c["currency"]: c for c in credits_of(rig.books, "alice", R1)}
    assert set(credits) == {"USD", "THB"}
    debits = {c["currency"]: tx for tx, c in rig.books.applied.items()
              if c["method"] == "debit"}
    assert credits["USD"]["amount"] == 300
    assert [b["bet_id"] for b in credits["USD"]["bets"]] == ["b-usd"]
    assert credits["USD"]["debit_tx_ids"] == [debits["USD"]]
    assert credits["THB"]["amount"] == 100
    assert [b["bet_id"] for b in credits["THB"]["bets"]] == ["b-thb"]
    assert credits["THB"]["debit_tx_ids"] == [debits["THB"]]
    assert await rig.ledger_balance() == 0
    assert (await rig.store.audit()).ok
    assert set(closes(rig.books).values()) == {1}


async def test_credit_ids_of_two_fresh_installations_never_collide(tmp_path: Path) -> None:
    """Two installations (or one whose store was wiped) both start at round ``t1.1.1``;
    against one operator, each one's credit is its own call, and both wins are paid."""
    first = Rig(tmp_path / "one")
    second = Rig(tmp_path / "two")
    second.operator, second.books = first.operator, first.books  # the same operator
    for rig in (first, second):
        await rig.open_round()
        assert isinstance(await rig.bet("b1"), p.BetAccepted)
        await rig.settle()
        await rig.drain()
    credits = credits_of(first.books, "alice", R1)
    assert len(credits) == 2 and credits[0]["tx_id"] != credits[1]["tx_id"]
    # two debits of 200, two credits of 300: both wins reached the player
    assert first.books.balances["alice"] == INITIAL + 2 * 100
    applied_once(first.books)
    await second.close()
    await first.close()


async def test_an_accepted_slip_sent_again_after_the_window_is_answered_accepted(
        rig: Rig) -> None:
    """The wallet's own window check comes after the look-up of the slip's first answer."""
    first = await rig.bet("b1")
    assert isinstance(first, p.BetAccepted)
    rig.clock.now = T0 + 20_000  # the betting window (T0 + 16 s) is over
    again = await rig.bet("b1")
    assert isinstance(again, p.BetAccepted) and again.deducted == first.deducted
    late = await rig.bet("b2")  # a new slip is still refused
    assert isinstance(late, p.BetRejected) and late.code == "betting_closed"
    assert len([c for c in await rig.log.calls() if c.method == "debit"]) == 1


async def test_a_send_cancelled_in_line_for_its_turn_never_holds_the_others_up(
        rig: Rig) -> None:
    """A slip's sends take its turn one at a time. One cancelled while it waits is
    skipped; one cancelled just as the turn is handed to it hands it on; the turn is
    dropped once nobody holds or waits for it."""
    turns, key = rig.wallet._turns, ("alice", "slip:s-turn")
    await turns.take(key)
    second = asyncio.create_task(turns.take(key))
    third = asyncio.create_task(turns.take(key))
    await asyncio.sleep(0)
    second.cancel()
    await asyncio.sleep(0)
    turns.pass_on(key)  # to the third: the second gave up
    await third
    assert second.cancelled()
    fourth = asyncio.create_task(turns.take(key))
    fifth = asyncio.create_task(turns.take(key))
    await asyncio.sleep(0)
    turns.pass_on(key)  # to the fourth, cancelled before it runs: to the fifth
    fourth.cancel()
    with pytest.raises(asyncio.CancelledError):
        await fourth
    await asyncio.wait_for(fifth, 5)
    turns.pass_on(key)
    assert not turns
