"""A full disk is an outage of the SQLite ledger, and it passes.

When a write fails with ``SQLITE_FULL``, SQLite may already have rolled the transaction
back; the store used to run ``ROLLBACK`` anyway, and its "cannot rollback - no
transaction is active" replaced the disk-full error: a bug to the runner (the table held
for good) and to the gateway (the connection closed). Here the disk is "full" by SQLite's
own cap on the file (``PRAGMA max_page_count`` set to the pages it has): every bet is
refused as an outage, readiness's question (``identity``) says the disk is full, and once
the cap is lifted — the space freed — the same store takes bets again and every bet it
acknowledged settles, with no restart. tests/integration/test_server_disk_full.py does it
to a live server on a real full filesystem.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from livetable import protocol as p
from livetable.betting.slips import Rejection, SlipRequest
from livetable.engine import OpenRound
from livetable.engine.effects import SettleRound
from livetable.operator.log import WalletCall
from livetable.operator.log_sqlite import SQLiteWalletLog
from livetable.store import SQLiteStore
from livetable.store.base import StoreUnavailable
from livetable.store.sqlite.ledger import calls as c

T0 = 1_700_000_000_000
LIMITS = p.Limits(min=1, max=500, pair_min=1, pair_max=100, round_max=1_000_000)
PLAYERS = [f"p{i}" for i in range(20)]


def settle_effect(round_id: str) -> SettleRound:
    """The round's results: P1 wins at 1:1, every other spot loses."""
    spots = {spot: ("win", 1, 2) if spot == "P1" else ("lose", 0, 0)
             for spot in ("P1", "P2", "P3", "P4", "P5", "P1_PAIR", "P2_PAIR", "P3_PAIR",
                          "P4_PAIR", "P5_PAIR")}
    return SettleRound(table="t1", round_id=round_id, spots=spots, cards={})


def wallet_debit(n: int) -> WalletCall:
    return WalletCall(tx_id=f"d-{n}", method="debit", player_id="alice", currency="THB",
                      table_id="t1", round_id="t1.1.1", amount=200, body=b"{}" * 200,
                      state="pending", created_at=T0, updated_at=T0, slip_key=f"s{n}",
                      deadline=T0)


def slip(n: int, round_id: str = "t1.1.1") -> SlipRequest:
    return SlipRequest(player_id=PLAYERS[n % len(PLAYERS)], table="t1", slip_id=f"s{n}",
                       round_id=round_id, bets=(p.SlipBet(bet_id=f"b{n}", spot="P1",
                                                          amount=1 + n % 7),))


def fill(store: SQLiteStore) -> None:
    """The disk is full: the file may not grow by one page."""
    pages = store.db.execute("PRAGMA page_count").fetchone()[0]
    store.db.execute(f"PRAGMA max_page_count = {pages}")


def free(store: SQLiteStore) -> None:
    store.db.execute("PRAGMA max_page_count = 1073741823")


async def test_a_full_disk_refuses_bets_as_an_outage_and_the_ledger_goes_on(
        tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "db.sqlite3")
    try:
        made = await store.identity(create=True)
        for pid in PLAYERS:
            await store.ensure_player(pid, pid, 1_000_000, T0)
        await store.commit_step("t1", b"{}", [], [OpenRound(
            table="t1", round_id="t1.1.1", shoe_id="t1.1", round_no=1,
            closes_at=T0 + 10**9, limits=LIMITS)], T0)
        acknowledged: set[str] = set()
        for n in range(50):
            answer = await store.place_slip(slip(n), T0 + 1)
            assert isinstance(answer, p.SlipAccepted), answer
            acknowledged.add(f"b{n}")
        fill(store)
        refused = 0
        for n in range(50, 3_000):  # until the pages it has are full
            try:
                answer = await store.place_slip(slip(n), T0 + 1)
            except StoreUnavailable as exc:
                assert "disk is full" in str(exc), exc
                refused += 1
                if refused == 3:
                    break
                continue
            assert not isinstance(answer, Rejection), answer
            acknowledged.add(f"b{n}")
        assert refused == 3, "the disk never filled"
        with pytest.raises(StoreUnavailable, match="disk is full"):
            await store.commit_step("t1", b"{}", [], [settle_effect("t1.1.1")], T0 + 2)
        with pytest.raises(StoreUnavailable, match="disk is full"):  # readiness asks this
            await store.identity()

        free(store)  # space again: the same store, no restart
        answer = await store.place_slip(slip(5_000), T0 + 1)
        assert isinstance(answer, p.SlipAccepted), answer
        acknowledged.add("b5000")
        assert await store.identity() == made
        settled = await store.commit_step("t1", b"{}", [], [settle_effect("t1.1.1")], T0 + 2)
        more = True
        while more:
            chunk, more = await store.settle_pending("t1", T0 + 3)
            settled += chunk
        assert {s.bet_id for s in settled} == acknowledged  # each acknowledged bet, once
        assert (await store.audit()).ok
    finally:
        await store.close()


async def test_a_full_disk_is_an_outage_of_the_wallet_log_too(tmp_path: Path) -> None:
    log = SQLiteWalletLog(tmp_path / "db.sqlite3")
    try:
        pages = log.db.execute("PRAGMA page_count").fetchone()[0]
        log.db.execute(f"PRAGMA max_page_count = {pages}")
        with pytest.raises(StoreUnavailable):
            for n in range(2_000):
                await log.begin_debit(wallet_debit(n))
        log.db.execute("PRAGMA max_page_count = 1073741823")
        assert await log.begin_debit(wallet_debit(10_000)) is None
    finally:
        await log.close()


async def test_a_write_that_wrote_nothing_does_not_end_the_outage(tmp_path: Path) -> None:
    """A runner whose tick failed on the full disk settles what is pending next — nothing,
    a write call that writes nothing — and that success ended the outage: readiness was 200
    in 48 of 58 samples while every bet failed. Now only a write that changed the ledger
    (it needed room) ends it."""
    store = SQLiteStore(tmp_path / "db.sqlite3")
    try:
        made = await store.identity(create=True)
        for pid in PLAYERS:
            await store.ensure_player(pid, pid, 1_000_000, T0)
        await store.commit_step("t1", b"{}", [], [OpenRound(
            table="t1", round_id="t1.1.1", shoe_id="t1.1", round_no=1,
            closes_at=T0 + 10**9, limits=LIMITS)], T0)
        fill(store)
        with pytest.raises(StoreUnavailable, match="disk is full"):
            for n in range(3_000):  # until the pages it has are full
                await store.place_slip(slip(n), T0 + 1)
        assert await store.settle_pending("t1", T0 + 2) == ([], False)  # nothing pending
        refused = await store.place_slip(slip(9_999, round_id="t1.1.9"), T0 + 1)  # no round
        assert isinstance(refused, Rejection) and refused.code == "unknown_round"
        with pytest.raises(StoreUnavailable, match="disk is full"):  # readiness asks this
            await store.identity()

        free(store)  # space again: the next write that changes the ledger ends it
        answer = await store.place_slip(slip(5_000), T0 + 1)
        assert isinstance(answer, p.SlipAccepted), answer
        assert await store.identity() == made
    finally:
        await store.close()


@pytest.mark.process
async def test_the_writer_process_says_whether_a_call_changed_the_ledger(
        tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "db.sqlite3", writer="process")
    try:
        assert store.process is not None
        nothing, wrote = await store.process.call_counting(c.SettlePending("t1", T0, 100))
        assert (nothing, wrote) == (([], False), False)
        _, wrote = await store.process.call_counting(c.EnsurePlayer("alice", "A", 5, T0))
        assert wrote
        _, wrote = await store.process.call_counting(c.ReadPlayer("alice"))
        assert not wrote
    finally:
        await store.close()
