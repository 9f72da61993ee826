"""Players' accounts on the ledger: open one, read it, deposit, withdraw.

Each is a function of the :class:`~livetable.store.sqlite.ledger.core.Ledger` (run as a typed
call, store/sqlite/ledger/calls.py); money moves only through ``Ledger.post``.
"""

from __future__ import annotations

from livetable import protocol as p
from livetable.accounts import AccountError
from livetable.store.base import InsufficientBalance, UnknownPlayer
from livetable.store.bets import Withdrawal
from livetable.store.sqlite.ledger.core import Ledger, Transfer


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
        elif name:  # only a new name is written: a hello is not a write (a reconnect
            # storm's 5,000 resumes were 5,000 commits through the one writer)
            db.execute("UPDATE accounts SET name = ? WHERE id = ? AND name IS NOT ?",
                       (name, player_id, name))
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
    with ledger.transaction():
        if not _withdraw(ledger, Withdrawal(transfer_id, player_id, amount, against), now):
            return None
    return ledger.balance(player_id)


def withdraw_many(ledger: Ledger, moves: list[Withdrawal], now: int) -> list[str | None]:
    """Each of ``moves`` (see ``Store.withdraw_many``), in one transaction."""
    out: list[str | None] = []
    with ledger.transaction():
        for move in moves:
            try:
                _withdraw(ledger, move, now)
                out.append(None)
            except (InsufficientBalance, UnknownPlayer) as exc:  # raised before any write
                out.append(f"{type(exc).__name__}: {exc}")
    return out


def _withdraw(ledger: Ledger, move: Withdrawal, now: int) -> bool:
    """One withdrawal, inside the caller's transaction; False if its ``against`` deposit
    was never made (nothing moved)."""
    db = ledger.db
    if ledger.kind(move.player_id) != "player":
        raise UnknownPlayer(f"no player {move.player_id!r}")
    tid = f"withdraw:{move.transfer_id}"
    if db.execute("SELECT 1 FROM transfers WHERE id = ?", (tid,)).fetchone() is not None:
        return True
    if move.against is not None and db.execute(
            "SELECT 1 FROM transfers WHERE id = ?",
            (f"deposit:{move.against}",)).fetchone() is None:
        return False  # that deposit was never made: nothing to take back
    balance = ledger.balance(move.player_id) or 0
    if balance < move.amount:
        raise InsufficientBalance(f"withdraw {move.transfer_id}: {move.player_id!r} holds "
                                  f"{balance}, not {move.amount}")
    ledger.transfer(Transfer(tid, move.player_id, "external", move.amount, "withdraw",
                             move.player_id, now))
    return True
