"""The ledger: one SQLite connection, its transactions, and the one way money moves.

:class:`Ledger` is synchronous and owns the connection; the operations on it are plain
functions of the modules beside this one (accounts, slips, steps, reads), each taking the
ledger first, and :mod:`livetable.store.sqlite.ledger.calls` names each of them as a typed call.
Whoever runs the calls — the store's writer thread, or the writer process
(store/sqlite/writer.py) — holds the one ledger and runs one call at a time on it.

Every balance changes through :meth:`Ledger.post`: a list of transfers, each applied once
by its id (a transfer already in the log is skipped), written to the transfer log and
applied to the balances together, with the ledger's invariants checked on every post —
no account debits and credits itself, every amount is positive, the applied transfers'
debits equal their credits (so the accounts still sum to 0), every account moved exists,
and no player's or round hold's balance goes below 0. A broken invariant raises
:class:`BrokenLedger` (a bug: the transaction rolls back, nothing is written).
"""

from __future__ import annotations

import contextlib
import sqlite3
from typing import NamedTuple

from livetable import protocol as p
from livetable.accounts import AccountError
from livetable.store.sealing import StateSeal
from livetable.store.sqlite.ledger.schema import connect, transaction

#: How many events per table the log keeps for resume (older ones are trimmed).
DEFAULT_EVENT_RETENTION = 20_000
#: Rows per query when a batch's facts are read with ``IN (…)`` / ``VALUES …`` lists.
QUERY_ROWS = 400

INSERT_TRANSFER = ("INSERT OR IGNORE INTO transfers (id, debit, credit, amount, kind, ref, at) "
                   "VALUES (?, ?, ?, ?, ?, ?, ?)")
INSERT_TRANSFERS = ("INSERT INTO transfers (id, debit, credit, amount, kind, ref, at) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?)")
#: A balance moves only if the account exists and it leaves no player or hold below 0: a
#: row not updated is a broken invariant (checked in the same statement, no query more).
MOVE_BALANCE = ("UPDATE accounts SET balance = balance + ?1 WHERE id = ?2 "
                "AND (balance + ?1 >= 0 OR kind NOT IN ('player', 'hold'))")


def marks(n: int) -> str:
    """``?, ?, …`` for an ``IN (…)`` list of ``n`` values."""
    return ",".join("?" * n)


class Transfer(NamedTuple):
    """Money moved from ``debit`` to ``credit``, once by ``id`` (a row of ``transfers``)."""

    id: str
    debit: str
    credit: str
    amount: int
    kind: str  # deposit, withdraw, bet, settle, payout, refund
    ref: str
    at: int


class BrokenLedger(Exception):
    """A post that would break the ledger's invariants (see the module): a bug."""


class Ledger:
    """The SQLite ledger: the connection and everything that needs it between calls."""

    def __init__(self, path: str, event_retention: int = DEFAULT_EVENT_RETENTION,
                 seal: StateSeal | None = None, synchronous: str = "NORMAL") -> None:
        self.db = connect(path, synchronous)
        #: Seals engine states at rest (store/sealing.py); None only in tests.
        self.seal = seal
        self.event_retention = event_retention
        #: A round's limits never change: read once (the last 1,000 rounds).
        self.limits: dict[str, p.Limits] = {}

    def transaction(self) -> contextlib.AbstractContextManager[sqlite3.Connection]:
        return transaction(self.db)

    def close(self) -> None:
        self.db.close()

    def kind(self, account: str) -> str | None:
        row = self.db.execute("SELECT kind FROM accounts WHERE id = ?", (account,)).fetchone()
        return None if row is None else str(row[0])

    def balance(self, account: str) -> int | None:
        row = self.db.execute("SELECT balance FROM accounts WHERE id = ?", (account,)).fetchone()
        return None if row is None else int(row[0])

    def transfer(self, move: Transfer) -> bool:
        """Post one transfer; False if its id was applied before (or it moves nothing)."""
        return bool(self.post([move]))

    def post(self, moves: list[Transfer], *, fresh: bool = False) -> list[Transfer]:
        """Apply each transfer once by its id, inside the caller's transaction; return
        those applied now. ``fresh``: ids just made (a batch of slips'), written with one
        statement and no look-up — one already in the log fails the post."""
        if any(m.debit == m.credit for m in moves):  # would create money in the log
            move = next(m for m in moves if m.debit == m.credit)  # and move none
            raise AccountError(f"transfer {move.id} debits and credits the same "
                               f"account {move.debit!r}")
        if not all(m.amount > 0 for m in moves):
            moves = [m for m in moves if m.amount > 0]
        if fresh:
            self.db.executemany(INSERT_TRANSFERS, moves)
            applied = moves
        else:
            applied = [m for m in moves if self.db.execute(INSERT_TRANSFER, m).rowcount]
        self._move_balances(applied)
        return applied

    def _move_balances(self, moves: list[Transfer]) -> None:
        deltas: dict[str, int] = {}
        for m in moves:
            deltas[m.debit] = deltas.get(m.debit, 0) - m.amount
            deltas[m.credit] = deltas.get(m.credit, 0) + m.amount
        if sum(deltas.values()) != 0:
            raise BrokenLedger(f"debits and credits differ by {sum(deltas.values())}")
        accounts = sorted(a for a, d in deltas.items() if d)
        if not accounts:
            return
        cur = self.db.executemany(MOVE_BALANCE, [(deltas[a], a) for a in accounts])
        if cur.rowcount != len(accounts):
            raise BrokenLedger(self._why_not_moved(accounts, deltas))

    def _why_not_moved(self, accounts: list[str], deltas: dict[str, int]) -> str:
        """Which account a post could not move, and why (the post fails: rare)."""
        for account in accounts:
            row = self.db.execute("SELECT kind, balance FROM accounts WHERE id = ?",
                                  (account,)).fetchone()
            if row is None:
                return f"a transfer names an account that does not exist: {account!r}"
            if row[0] in ("player", "hold") and row[1] + deltas[account] < 0:
                return f"a transfer takes {account} below 0 ({row[1]} + {deltas[account]})"
        return "a balance did not move"
