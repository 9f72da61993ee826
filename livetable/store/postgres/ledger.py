"""The ledger's own moves and its proof on PostgreSQL: an account's kind, a transfer applied
once by its id, and the audit — helpers of :class:`~livetable.store.postgres.store.
PostgresStore`, run inside its transactions.

As on SQLite: money is double entry, every move a transfer with an id (the primary key of
``transfers``: applied once), so the accounts always sum to 0 and the audit can prove it
by replaying the transfers against the balances, on one snapshot.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from livetable.accounts import AccountError
from livetable.store.base import AuditReport, InsufficientBalance, UnknownPlayer
from livetable.store.bets import Withdrawal


async def kind(con: Any, account: str, *, lock: bool = False) -> str | None:
    kind = await con.fetchval("SELECT kind FROM accounts WHERE id = $1"
                              + (" FOR UPDATE" if lock else ""), account)
    return None if kind is None else str(kind)


async def withdraw(con: Any, move: Withdrawal, now: int) -> bool:
    """One withdrawal (see ``Store.withdraw``), inside the caller's transaction; False if
    its ``against`` deposit was never made (nothing moved). Raises before any write."""
    if await kind(con, move.player_id, lock=True) != "player":
        raise UnknownPlayer(f"no player {move.player_id!r}")
    tid = f"withdraw:{move.transfer_id}"
    if await con.fetchval("SELECT 1 FROM transfers WHERE id = $1", tid) is not None:
        return True
    if move.against is not None and await con.fetchval(
            "SELECT 1 FROM transfers WHERE id = $1", f"deposit:{move.against}") is None:
        return False  # that deposit was never made: nothing to take back
    balance = await con.fetchval("SELECT balance FROM accounts WHERE id = $1", move.player_id)
    if balance < move.amount:
        raise InsufficientBalance(f"withdraw {move.transfer_id}: {move.player_id!r} holds "
                                  f"{balance}, not {move.amount}")
    await transfer(con, tid, move.player_id, "external", move.amount, "withdraw",
                   move.player_id, now)
    return True


async def transfer(con: Any, tid: str, debit: str, credit: str, amount: int, kind: str,
                    ref: str, now: int) -> bool:
    """Move ``amount`` from ``debit`` to ``credit`` once; False if already applied."""
    if debit == credit:
        raise AccountError(f"transfer {tid} debits and credits the same account {debit!r}")
    if amount <= 0:
        return False
    done = await con.fetchval(
        "INSERT INTO transfers (id, debit, credit, amount, kind, ref, at) VALUES ($1, $2, $3, "
        "$4, $5, $6, $7) ON CONFLICT (id) DO NOTHING RETURNING 1",
        tid, debit, credit, amount, kind, ref, now)
    if done is None:
        return False
    await con.execute("UPDATE accounts SET balance = balance + x.d FROM (VALUES ($1, -$3::bigint), "
                      "($2, $3::bigint)) AS x(id, d) WHERE accounts.id = x.id", debit, credit,
                      amount)
    return True


async def transfer_all(con: Any, moves: Sequence[tuple[str, str, str, int, str, str, int]]
                       ) -> None:
    """Apply many new transfers ``(id, debit, credit, amount, kind, ref, at)`` at once, in
    two statements whatever their number (``livetable migrate-store`` posts one or two per
    player): each as :func:`transfer` would. An id applied before fails the whole
    transaction (the caller has checked that none was)."""
    if not moves:
        return
    deltas: Counter[str] = Counter()
    for tid, debit, credit, amount, *_ in moves:
        if debit == credit:
            raise AccountError(f"transfer {tid} debits and credits the same account {debit!r}")
        if amount <= 0:
            raise ValueError(f"transfer {tid} moves {amount}: a transfer moves more than 0")
        deltas[debit] -= amount
        deltas[credit] += amount
    await con.execute(
        "INSERT INTO transfers (id, debit, credit, amount, kind, ref, at) SELECT * FROM "
        "unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::text[], $6::text[], "
        "$7::bigint[])", *(list(column) for column in zip(*moves, strict=True)))
    moved = sorted(a for a, d in deltas.items() if d)
    await con.execute("UPDATE accounts SET balance = accounts.balance + x.d FROM unnest("
                      "$1::text[], $2::bigint[]) AS x(id, d) WHERE accounts.id = x.id",
                      moved, [deltas[a] for a in moved])


async def audit(con: Any) -> AuditReport:
    problems: list[str] = []
    total = await con.fetchval("SELECT COALESCE(SUM(balance), 0)::bigint FROM accounts")
    if total != 0:
        problems.append(f"accounts sum to {total}, not 0")
    drift = await con.fetch(
        "SELECT a.id, a.balance, COALESCE(c.s, 0) - COALESCE(d.s, 0) FROM accounts a "
        "LEFT JOIN (SELECT credit id, SUM(amount)::bigint s FROM transfers GROUP BY credit) c "
        "USING (id) LEFT JOIN (SELECT debit id, SUM(amount)::bigint s FROM transfers "
        "GROUP BY debit) d USING (id) WHERE a.balance != COALESCE(c.s, 0) - COALESCE(d.s, 0)")
    problems += [f"account {r[0]} holds {r[1]} but its transfers say {r[2]}" for r in drift]
    negative = await con.fetch("SELECT id, balance FROM accounts WHERE balance < 0 AND "
                               "kind IN ('player', 'hold')")
    problems += [f"account {r[0]} is negative: {r[1]}" for r in negative]
    open_holds = await con.fetch(
        "SELECT a.id, a.balance FROM accounts a JOIN rounds r ON a.id = 'hold:' || r.round_id "
        "WHERE r.state IN ('settled', 'cancelled') AND a.balance != 0")
    problems += [f"{r[0]} of an ended round still holds {r[1]}" for r in open_holds]
    stuck = await con.fetchval(
        "SELECT COUNT(*) FROM bets b JOIN rounds r USING (round_id) "
        "WHERE r.state IN ('settled', 'cancelled') AND b.state = 'accepted'")
    if stuck:
        problems.append(f"{stuck} bets of ended rounds are neither settled nor refunded")
    balances = dict(await con.fetch("SELECT id, balance FROM accounts WHERE id IN "
                                    "('external', 'house')"))
    return AuditReport(ok=not problems, total=total, deposits=-balances.get("external", 0),
                       house=balances.get("house", 0), problems=problems)
