"""Stores: the ledger, bets, rounds and event logs (SQLite embedded, Redis scale-out)."""

from livetable.store.base import (
    REJECTIONS,
    AuditReport,
    BetRequest,
    Rejection,
    RoundView,
    Settled,
    SlipRequest,
    Store,
    precheck,
    rejected,
)
from livetable.store.sqlite import SQLiteStore

__all__ = [
    "REJECTIONS",
    "AuditReport",
    "BetRequest",
    "Rejection",
    "RoundView",
    "SQLiteStore",
    "Settled",
    "SlipRequest",
    "Store",
    "precheck",
    "rejected",
]
