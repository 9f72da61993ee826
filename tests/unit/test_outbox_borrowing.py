"""The outbox borrows the idle places of the debits' line (operator/outbox.py,
operator/gate.py): once betting closes, a round's credits go out on the outbox's own
connections *and* on up to three quarters of the debit connections, never more than the two pools
hold, and a debit arriving meanwhile is sent at once.

The operator's wallet is a fake here: clients that count the calls in flight and hold
each credit until the test lets it go (a debit is answered at once).
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import msgspec
import pytest
from test_wallet import T0, TABLE, Clock

from livetable.auth import Identity
from livetable.betting.slips import BetRequest, Rejection
from livetable.config import Settings
from livetable.metrics import Metrics
from livetable.operator.client import Reply, WalletClient
from livetable.operator.gate import lendable
from livetable.operator.log import WalletCall
from livetable.operator.log_sqlite import SQLiteWalletLog
from livetable.operator.seamless import SeamlessWallet
from livetable.operator.wallets import OperatorWallets
from livetable.store.sqlite import SQLiteStore

#: Waits on the wall clock (asyncio.sleep above zero): not in bin/test --fast (tests/tiers.py).
pytestmark = pytest.mark.sleeps

OUTBOX = 8
DEBITS = 24
#: the debit places the outbox may borrow: 18 of 24
LENT = lendable(DEBITS)
FAR = T0 + 60_000


class InFlight:
    """Calls in flight across both clients, and the most at once."""

    def __init__(self) -> None:
        self.now = 0
        self.most = 0
        #: one release lets one held credit be answered
        self.release = asyncio.Semaphore(0)

    def let_go(self, calls: int) -> None:
        for _ in range(calls):
            self.release.release()


class FakeWallet(WalletClient):
    """A wallet client that never leaves the process: counts its calls in flight, holds
    each credit until released, refuses each debit at once (``insufficient_funds``)."""

    def __init__(self, connections: int, flight: InFlight) -> None:
        super().__init__("http://fake.invalid/", b"s", timeout=2.0, connections=connections)
        self.flight = flight
        self.now = 0
        self.most = 0
        self.sent: Counter[str] = Counter()
        self.methods: Counter[str] = Counter()

    async def call(self, method: str, body: bytes, timeout: float | None = None) -> Reply:
        self.methods[method] += 1
        self.sent[msgspec.json.decode(body)["tx_id"]] += 1
        self.now += 1
        self.flight.now += 1
        self.most = max(self.most, self.now)
        self.flight.most = max(self.flight.most, self.flight.now)
        try:
            if method == "debit":
                return Reply("insufficient_funds", 0, '{"status":"insufficient_funds"}')
            await self.flight.release.acquire()
            return Reply("ok", 0, '{"status":"ok"}')
        finally:
            self.now -= 1
            self.flight.now -= 1


@dataclass
class Rig:
    wallet: SeamlessWallet
    log: SQLiteWalletLog
    store: SQLiteStore
    debits: FakeWallet
    outbox: FakeWallet
    flight: InFlight


@pytest.fixture
async def rig(tmp_path: Path) -> AsyncIterator[Rig]:
    flight = InFlight()
    debits, outbox = FakeWallet(DEBITS, flight), FakeWallet(OUTBOX, flight)
    store = SQLiteStore(tmp_path / "lt.db")
    log = SQLiteWalletLog(tmp_path / "lt-wallet.db")
    settings = Settings(wallet="seamless", wallet_url="http://fake.invalid/",
                        wallet_secret=b"s", wallet_timeout=2.0)
    wallet = SeamlessWallet(settings, store, log, OperatorWallets.one(debits, outbox),
                            Metrics(), clock=Clock())
    made = Rig(wallet, log, store, debits, outbox, flight)
    yield made
    flight.let_go(10_000)
    await wallet.stop()
    await log.close()
    await store.close()


async def queue_credits(log: SQLiteWalletLog, count: int) -> None:
    calls = []
    for i in range(count):
        tx_id = f"c-{i}"
        calls.append(WalletCall(
            tx_id=tx_id, method="credit", player_id=f"p{i}", currency="THB", table_id=TABLE,
            round_id="t1.1.1", amount=100,
            body=msgspec.json.encode({"tx_id": tx_id, "player_id": f"p{i}"}),
            state="queued", created_at=T0, updated_at=T0, next_at=T0))
    await log.enqueue(calls, T0)


async def settle_down() -> None:
    for _ in range(5):
        await asyncio.sleep(0.01)


@pytest.mark.parametrize("debits_in_flight", [0, 20])
async def test_the_outbox_borrows_idle_debit_places_never_over_the_pool(
        rig: Rig, debits_in_flight: int) -> None:
    """100 credits queued: the outbox's 8 connections, plus as many of the debits' 24 as
    are free, at most 18 (three quarters); all delivered once each, never more in flight.
    Before, 8 at a time, whatever the debits' line."""
    line = rig.wallet._gate("p0")
    for _ in range(debits_in_flight):
        assert await line.enter(FAR)  # debits on the wire
    await queue_credits(rig.log, 100)
    lent = min(LENT, DEBITS - debits_in_flight)
    started = await rig.wallet.outbox.send_due()
    await settle_down()
    assert len(started) == OUTBOX + lent
    assert (rig.outbox.now, rig.debits.now) == (OUTBOX, lent)
    assert line.busy == debits_in_flight + lent <= DEBITS and line.borrowed == lent
    assert await rig.wallet.outbox.send_due() == []  # every place taken
    rig.flight.let_go(10_000)
    await asyncio.gather(*started)
    while await rig.log.backlog():
        assert await rig.wallet.deliver() > 0
    assert rig.flight.most == OUTBOX + lent  # more than the outbox's own 8 at once...
    assert rig.outbox.most <= OUTBOX and rig.debits.most <= lent  # ...never over the pools
    assert set(rig.outbox.sent.values()) | set(rig.debits.sent.values()) == {1}
    assert sum(rig.outbox.sent.values()) + sum(rig.debits.sent.values()) == 100
    assert (line.busy, line.borrowed) == (debits_in_flight, 0)  # every place given back
    assert rig.debits.methods["credit"] > 0


async def test_a_debit_arriving_while_credits_borrow_is_sent_at_once(rig: Rig) -> None:
    """18 of the 24 debit places carry credits that are not answered: a slip's debit is
    still sent at once (a quarter of the places are never lent), and answered."""
    await queue_credits(rig.log, 100)
    started = await rig.wallet.outbox.send_due()
    await settle_down()
    line = rig.wallet._gate("alice")
    assert line.borrowed == LENT and rig.debits.now == LENT
    alice = Identity(kind="player", id="alice", name="Alice", expires=2**40, currency="THB")
    slip = BetRequest(player_id="alice", table=TABLE, bet_id="b1", round_id="t1.1.1",
                      spot="P1", amount=100).as_slip()
    answer = await asyncio.wait_for(rig.wallet.place_slip(alice, slip, T0, FAR), 5.0)
    assert isinstance(answer, Rejection) and answer.code == "insufficient_funds"
    assert rig.debits.methods["debit"] == 1 and line.waiting == 0
    assert rig.debits.most == LENT + 1 and rig.debits.now == LENT
    rig.flight.let_go(10_000)
    await asyncio.gather(*started)


async def test_a_borrowed_place_given_back_goes_to_the_debit_in_line(rig: Rig) -> None:
    """6 debits in flight and 18 places lent: the pool is full, a debit waits in line;
    the first borrowed credit answered gives its place to that debit, not to the outbox."""
    line = rig.wallet._gate("p0")
    for _ in range(DEBITS - LENT):
        assert await line.enter(FAR)
    await queue_credits(rig.log, 100)
    await rig.wallet.outbox.send_due()
    await settle_down()
    assert line.busy == DEBITS and line.borrowed == LENT
    waiter = asyncio.create_task(line.enter(FAR))
    await settle_down()
    assert line.waiting == 1 and not waiter.done()
    rig.flight.let_go(OUTBOX + 1)  # the outbox's own, then the first borrowed
    await settle_down()
    assert waiter.done() and waiter.result() is True
    assert (line.busy, line.borrowed) == (DEBITS, LENT - 1)
    await rig.wallet.outbox.send_due()
    assert line.borrowed == LENT - 1  # the pool is full: nothing more lent


async def test_credits_to_an_operator_never_configured_make_no_line_of_debits(
        tmp_path: Path) -> None:
    """Credits for ``bet7``'s players, an operator this process was never told of, cannot
    borrow (its calls all end unknown, and stay queued): the outbox makes no line for it
    — a line made now would hold ``bet7``'s debits to one place once it is configured —
    and they do not stop ``acme``'s credits behind them from borrowing ``acme``'s."""
    store = SQLiteStore(tmp_path / "lt.db")
    log = SQLiteWalletLog(tmp_path / "lt-wallet.db")
    wallets = OperatorWallets(timeout=1.0, connections=8)
    wallets.serve("acme", "http://127.0.0.1:9/wallet", b"s")
    settings = Settings(wallet="seamless", wallet_url="http://127.0.0.1:9/wallet",
                        wallet_secret=b"s", wallet_timeout=1.0)
    wallet = SeamlessWallet(settings, store, log, wallets, Metrics(), clock=Clock())
    calls = []
    for i in range(20):
        tx_id = f"c-{i}"
        operator, due = ("bet7", T0 - 1) if i < 10 else ("acme", T0)  # bet7's first
        calls.append(WalletCall(
            tx_id=tx_id, method="credit", player_id=f"{operator}~p{i}", currency="THB",
            table_id=TABLE, round_id="t1.1.1", amount=100,
            body=msgspec.json.encode({"tx_id": tx_id, "player_id": f"p{i}"}),
            state="queued", created_at=T0, updated_at=T0, next_at=due))
    await log.enqueue(calls, T0)
    try:
        started = await wallet.outbox.send_due()
        # acme's quarter of 8 (bet7's first two), then 3/4 of acme's 6 debit places
        assert wallets.outbox_connections == 2 and len(started) == 2 + 4
        assert wallet._gates["acme"].borrowed == 4
        await asyncio.gather(*started)
        assert "bet7" not in wallet._gates and wallet._gates["acme"].busy == 0
        assert await log.backlog() == 20  # unknown outcomes (nobody at port 9): owed
    finally:
        await wallet.stop()
        await log.close()
        await store.close()
