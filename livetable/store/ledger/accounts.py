"""Players' accounts on the ledger: open one, read it, deposit, withdraw.

Each is a function of the :class:`~livetable.store.ledger.core.Ledger` (run as a typed
call, store/ledger/calls.py); money moves only through ``Ledger.post``.
"""

from __future__ import annotations

from livetable import protocol as p
from livetable.accounts import AccountError
from livetable.store.base import InsufficientBalance, UnknownPlayer
from livetable.store.ledger.core import Ledger, Transfer


def ensure_player(ledger: Ledger, player_id: str, name: str, initial_balance: int,
                  now: int) -> p.PlayerView:
    db = ledger.db
    with ledger.transaction():
        cur = db.execute(
            "INSERT OR IGNORE INTO accounts (id, kind, name, balance, created_at) "
            "VALUES (?, 'player', ?, 0, ?)", (player_id, name, now))
        if cur.rowcount:
            ledger.transfer(Transfer(f"open:{player_id}", "external", player_id,
                                     initial_balance, "deposit", player_id, now))
        elif ledger.kind(player_id) != "player":
            raise AccountError(f"{player_id!r} is not a player account")
        elif name:
            db.execute("UPDATE accounts SET name = ? WHERE id = ?", (name, player_id))
    view = player(ledger, player_id)
    assert view is not None
    return view


def player(ledger: Ledger, player_id: str) -> p.PlayerView | None:
    row = ledger.db.execute(
        "SELECT id, name, balance FROM accounts WHERE id = ? AND kind = 'player'",
        (player_id,)).fetchone()
    return None if row is None else p.PlayerView(id=row[0], name=row[1], balance=row[2])


def deposit(ledger: Ledger, transfer_id: str, player_id: str, amount: int, now: int) -> int:
    with ledger.transaction():
        if ledger.kind(player_id) != "player":
            raise UnknownPlayer(f"no player {player_id!r}")
        ledger.transfer(Transfer(f"deposit:{transfer_id}", "external", player_id, amount,
                                 "deposit", player_id, now))
    balance = ledger.balance(player_id)
    assert balance is not None
    return balance


def withdraw(ledger: Ledger, transfer_id: str, player_id: str, amount: int, now: int,
             against: str | None) -> int | None:
    """Move ``amount`` from the player to ``external`` once by ``transfer_id``; None if
    ``against`` names a deposit that was never made (see ``Store.withdraw``)."""
    db = ledger.db
    with ledger.transaction():
        if ledger.kind(player_id) != "player":
            raise UnknownPlayer(f"no player {player_id!r}")
        tid = f"withdraw:{transfer_id}"
        if db.execute("SELECT 1 FROM transfers WHERE id = ?", (tid,)).fetchone() is None:
            if against is not None and db.execute(
                    "SELECT 1 FROM transfers WHERE id = ?",
                    (f"deposit:{against}",)).fetchone() is None:
                return None  # that deposit was never made: nothing to take back
            balance = ledger.balance(player_id) or 0
            if balance < amount:
                raise InsufficientBalance(
                    f"withdraw {transfer_id}: {player_id!r} holds {balance}, not {amount}")
            ledger.transfer(Transfer(tid, player_id, "external", amount, "withdraw",
                                     player_id, now))
    return ledger.balance(player_id)
