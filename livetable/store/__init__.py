"""Stores: the ledger, bets, rounds and event logs (SQLite embedded, PostgreSQL scale-out).

The betting rules both stores follow are :mod:`livetable.betting.slips` (and imported from
there); what the stores share below them is :mod:`livetable.store.bets`.
"""

from livetable.store.base import AuditReport, Settled, Store
from livetable.store.sqlite import SQLiteStore

__all__ = [
    "AuditReport",
    "SQLiteStore",
    "Settled",
    "Store",
]
