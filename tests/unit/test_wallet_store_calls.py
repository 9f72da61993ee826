"""The seamless debit path's cost in the store: batched, and never on the event loop.

Counted, not timed: the write transactions both SQLite connections (the ledger's and the
wallet log's) run for 100 slips at once, read from SQLite's own statement trace; and the
event loop's longest stall while another connection holds the database's write lock.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from pathlib import Path

import pytest
from test_wallet import R1, T0, TABLE, Rig

from livetable import protocol as p
from livetable.auth import Identity
from livetable.betting.slips import SlipRequest
from livetable.operator.log import WalletCall
from livetable.operator.log_sqlite import SQLiteWalletLog

#: Starts processes: not in bin/test --fast (tests/tiers.py).
pytestmark = pytest.mark.process


class Transactions:
    """Counts the write transactions a connection runs: each ``BEGIN``, and each write
    statement run outside one (SQLite's autocommit: a transaction of its own)."""

    WRITES = ("INSERT", "UPDATE", "DELETE", "REPLACE")

    def __init__(self) -> None:
        self.count = 0
        self.open = False

    def __call__(self, statement: str) -> None:
        word = statement.lstrip().split(None, 1)[0].upper() if statement.strip() else ""
        if word == "BEGIN":
            self.count += 1
            self.open = True
        elif word in ("COMMIT", "END", "ROLLBACK") and "TO" not in statement.upper():
            self.open = False
        elif word in self.WRITES and not self.open:
            self.count += 1


async def test_100_slips_take_a_bounded_number_of_store_transactions(tmp_path: Path) -> None:
    # the slips' debits in flight together (as at the close of betting), so their
    # answers come back together: what comes together goes to the store together
    rig = Rig(tmp_path, connections=100)
    await rig.open_round()
    players = [f"p{n:03d}" for n in range(100)]
    for player in players:
        await rig.store.ensure_player(player, player, 0, T0)
    ledger, wallet_log = Transactions(), Transactions()
    rig.store.db.set_trace_callback(ledger)
    rig.log.db.set_trace_callback(wallet_log)

    async def slip(player: str) -> p.SlipAccepted | object:
        identity = Identity(kind="player", id=player, name=player, expires=2**40,
                            currency="THB")
        request = SlipRequest(player_id=player, table=TABLE, slip_id=f"s-{player}",
                              round_id=R1, bets=(p.SlipBet(bet_id="b1", spot="P1",
                                                           amount=10),))
        return await rig.wallet.place_slip(identity, request, T0, T0 + 16_000)

    answers = await asyncio.gather(*(slip(player) for player in players))
    rig.store.db.set_trace_callback(None)
    rig.log.db.set_trace_callback(None)
    assert all(isinstance(a, p.SlipAccepted) for a in answers), answers[:3]
    total = ledger.count + wallet_log.count
    # per slip today's path made four (the debit written, its answer, the mirror deposit,
    # the bets); batched, the 100 slips share a handful of transactions
    assert total <= 30, (f"{total} write transactions for 100 slips (ledger "
                         f"{ledger.count}, wallet log {wallet_log.count})")
    audit = await rig.store.audit()
    assert audit.ok, audit.problems
    await rig.close()


async def test_the_wallet_log_never_blocks_the_event_loop(tmp_path: Path) -> None:
    """Another connection holds the database's write lock for 2 s: a debit written to the
    log waits for it on the log's thread, and the event loop goes on ticking."""
    db_path = tmp_path / "lt.db"
    wallet_log = SQLiteWalletLog(db_path)
    holder = sqlite3.connect(str(db_path), isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN IMMEDIATE")
    holder.execute("INSERT INTO wallet_calls (tx_id, method, player_id, currency, table_id, "
                   "round_id, amount, body, state, created_at, updated_at) VALUES "
                   "('d-held', 'debit', 'bob', 'THB', 't1', 'r1', 1, x'', 'ok', 0, 0)")
    release = threading.Timer(2.0, holder.execute, args=("COMMIT",))
    release.start()
    stalls: list[float] = []
    stop = asyncio.Event()

    async def tick() -> None:
        last = time.monotonic()
        while not stop.is_set():
            await asyncio.sleep(0.01)
            now = time.monotonic()
            stalls.append(now - last)
            last = now

    ticker = asyncio.create_task(tick())
    await asyncio.sleep(0.05)
    call = WalletCall(tx_id="d-1", method="debit", player_id="alice", currency="THB",
                      table_id="t1", round_id="r1", amount=100, body=b"{}", state="pending",
                      created_at=T0, updated_at=T0, slip_key="bet:b1", deadline=T0 + 3000)
    started = time.monotonic()
    assert await wallet_log.begin_debit(call) is None
    waited = time.monotonic() - started
    stop.set()
    await ticker
    release.join()
    holder.close()
    assert waited > 1.0  # it did wait for the lock (else this test proves nothing)
    assert max(stalls) < 0.5, f"the event loop stalled {max(stalls):.2f} s"
    await wallet_log.close()


async def test_the_wallet_log_runs_in_the_ledgers_writer_process(tmp_path: Path) -> None:
    """Under ``livetable serve`` the log's batches run in the ledger's writer process (off
    the server's interpreter lock): no thread of the log in this process, every call
    answered as on the thread, and the rows in the log's own file."""
    from livetable.store.sqlite import SQLiteStore

    store = SQLiteStore(tmp_path / "lt.db", writer="process")
    await store.identity(create=True)  # the child is up
    wallet_log = SQLiteWalletLog(tmp_path / "lt-wallet.db", writer=store.process)
    try:
        debit = WalletCall(tx_id="d-1", method="debit", player_id="alice", currency="THB",
                           table_id="t1", round_id="r1", amount=100, body=b'{"a":1}',
                           state="pending", created_at=T0, updated_at=T0, slip_key="bet:b1",
                           deadline=T0 + 3000)
        firsts = await asyncio.gather(wallet_log.begin_debit(debit),
                                      wallet_log.begin_debit(debit))
        assert firsts[0] is None and firsts[1] is not None and firsts[1].tx_id == "d-1"
        assert await wallet_log.answer_debit(debit, "ok", '{"status":"ok"}', T0 + 1)
        assert not await wallet_log.answer_debit(debit, "unknown", "late", T0 + 2)
        again = await wallet_log.debit_of("alice", "t1", "bet:b1")
        assert again is not None and again.state == "ok" and again.body == b'{"a":1}'
        credit = WalletCall(tx_id="c-1", method="credit", player_id="alice", currency="THB",
                            table_id="t1", round_id="r1", amount=190, body=b"{}",
                            state="queued", created_at=T0, updated_at=T0, next_at=T0,
                            debits="d-1")
        await wallet_log.enqueue([credit], T0 + 3)
        assert [c.tx_id for c in await wallet_log.due(T0 + 4, 10)] == ["c-1"]
        assert await wallet_log.open_debits(10) == []  # closed by the credit
        await wallet_log.delivered(credit, True, '{"status":"ok"}', T0 + 5, T0 + 5)
        assert await wallet_log.backlog() == 0
        assert [c.tx_id for c in await wallet_log.calls(round_id="r1")] == ["d-1", "c-1"]
        assert not [t for t in threading.enumerate() if "wallet-log" in t.name]
    finally:
        await wallet_log.close()
        await store.close()
    rows = sqlite3.connect(tmp_path / "lt-wallet.db").execute(
        "SELECT tx_id, state, closed_by FROM wallet_calls ORDER BY tx_id").fetchall()
    assert rows == [("c-1", "ok", None), ("d-1", "ok", "c-1")]
