"""``Ledger.post``, the one way a balance changes on SQLite, and the invariants it checks
on every transfer (store/sqlite/ledger/core.py): each transfer once by its id, no account debited
and credited at once, no account missing, no player or round hold below 0. A post that
breaks one raises and its transaction writes nothing."""

from __future__ import annotations

import sqlite3

import pytest

from livetable.accounts import AccountError
from livetable.store.sqlite.ledger import accounts, reads
from livetable.store.sqlite.ledger.core import BrokenLedger, Ledger, Transfer

T0 = 1_700_000_000_000


@pytest.fixture
def ledger() -> Ledger:
    made = Ledger(":memory:")
    accounts.ensure_player(made, "alice", "Alice", 100, T0)
    accounts.ensure_player(made, "bob", "Bob", 50, T0)
    return made


def balances(ledger: Ledger) -> dict[str, int]:
    return dict(ledger.db.execute("SELECT id, balance FROM accounts").fetchall())


def test_a_transfer_is_applied_once_by_its_id(ledger: Ledger) -> None:
    move = Transfer("t1", "alice", "bob", 30, "test", "r", T0)
    with ledger.transaction():
        assert ledger.post([move]) == [move]
        assert ledger.post([move]) == []  # the same id again: nothing moves
    assert (ledger.balance("alice"), ledger.balance("bob")) == (70, 80)
    assert reads.audit(ledger).ok


@pytest.mark.parametrize(("move", "error", "words"), [
    (Transfer("t1", "alice", "bob", 111, "test", "r", T0), BrokenLedger, "alice below 0"),
    (Transfer("t1", "alice", "nobody", 5, "test", "r", T0), BrokenLedger, "does not exist"),
    (Transfer("t1", "alice", "alice", 5, "test", "r", T0), AccountError, "same account"),
], ids=["below 0", "missing account", "to itself"])
def test_a_post_that_breaks_an_invariant_writes_nothing(
        ledger: Ledger, move: Transfer, error: type[Exception], words: str) -> None:
    before = balances(ledger)
    fine = Transfer("t0", "bob", "alice", 10, "test", "r", T0)
    with pytest.raises(error, match=words), ledger.transaction():
        ledger.post([fine])
        ledger.post([move])
    assert balances(ledger) == before
    assert ledger.db.execute("SELECT COUNT(*) FROM transfers WHERE id IN ('t0', 't1')"
                             ).fetchone()[0] == 0
    assert reads.audit(ledger).ok


def test_a_batch_of_fresh_transfers_is_checked_too(ledger: Ledger) -> None:
    moves = [Transfer(f"slip:{n}", "alice", "bob", 40, "bet", "r", T0) for n in range(3)]
    with pytest.raises(BrokenLedger, match="alice below 0"), ledger.transaction():
        ledger.post(moves, fresh=True)  # 120 out of 100
    with pytest.raises(sqlite3.IntegrityError), ledger.transaction():  # a fresh id is new
        ledger.post([Transfer("open:alice", "external", "alice", 1, "x", "r", T0)],
                    fresh=True)
    assert balances(ledger)["alice"] == 100 and reads.audit(ledger).ok
