"""The wallet log: every call to a seamless wallet, and the outbox of those still owed.

Why it exists (DESIGN §5, docs/operator.md): with a seamless wallet the operator holds the
money, and a call whose answer is lost leaves money in doubt unless livetable remembers it.
So every call is written here *before* it is sent, and kept with its state and answer:

* a ``debit`` starts ``pending`` (sent, unanswered) and becomes ``ok``, ``refused`` (the
  operator answered a code: nothing moved) or ``unknown`` (timeout, non-200, garbage).
  The move out of ``pending`` is a compare-and-set, so the gateway that waits for the
  answer and the sweeper that gives up on it (past ``deadline``) can never both win.
  ``closed_by`` names the credit or rollback that closes it (``refused`` for a refusal);
* a ``credit`` or ``rollback`` is the outbox: written ``queued`` together with the
  ``closed_by`` of the debits it closes (one transaction), then delivered until the
  operator answers ``ok`` (state ``ok``), each attempt counted, with its last answer.

Ids are deterministic (:func:`credit_tx_id`, :func:`rollback_tx_id`): whoever writes a
closing call — the gateway that saw a debit fail, the sweeper after a crash, a second
engine after a failover — writes the same one, and writing it twice is a no-op.

Two implementations keep the one contract (tests/unit/test_wallet_log.py): SQLite (a
connection of its own to the embedded database file, tables ``wallet_calls``) and Redis
(:mod:`livetable.store.wallet_redis`).
"""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path
from typing import Literal, Protocol

import msgspec

from livetable.store.base import surface_outages
from livetable.store.sqlite import check_synchronous, create_private, is_sqlite_outage

Method = Literal["balance", "debit", "credit", "rollback"]
#: debit: pending ok refused unknown; credit and rollback: queued ok
CallState = Literal["pending", "ok", "refused", "unknown", "queued"]


class CallSummary(msgspec.Struct, kw_only=True, omit_defaults=True):
    """What every record of a wallet call holds: which call, for whom, how much, and how it
    stands. Fields at their default are left out of an encoded call."""

    tx_id: str
    method: Method
    player_id: str
    currency: str
    table_id: str
    round_id: str
    amount: int
    state: CallState
    #: The operator's last answer (or why there was none: "timeout", "http 500" …).
    answer: str | None = None
    attempts: int = 0
    created_at: int = 0
    updated_at: int = 0


class CallRecord(CallSummary, kw_only=True, omit_defaults=True):
    """A wallet call without its body (which never changes): the Redis log's msgpack map.
    Its fields keep their order, so that a call encodes to the same bytes as ever."""

    #: Debit: the slip's idempotency key, and until when its answer may accept the slip.
    slip_key: str | None = None
    deadline: int = 0
    #: Debit: the tx_id of the credit or rollback that closes it ("refused": no money moved).
    closed_by: str | None = None
    #: Credit and rollback: when the next delivery is due.
    next_at: int = 0
    #: Rollback: the debit it undoes; credit: the debits it closes (comma-separated).
    debits: str = ""


class WalletCall(CallRecord, kw_only=True):
    """One wallet call as the log keeps it."""

    #: The exact JSON body sent (and re-sent: a retry is byte for byte the same call).
    body: bytes


def _digest(*parts: str) -> str:
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:32]


def credit_tx_id(round_id: str, player_id: str) -> str:
    """The one credit of ``player_id`` for ``round_id`` (ids are free text: hashed, so two
    pairs can never spell the same id)."""
    return "c-" + _digest(round_id, player_id)


def rollback_tx_id(debit_tx_id: str) -> str:
    return "r-" + _digest(debit_tx_id)


def mirror_id(tx_id: str) -> str:
    """The ledger transfer id (deposit or withdrawal) that mirrors wallet call ``tx_id``."""
    return f"wallet:{tx_id}"


class WalletLog(Protocol):
    async def begin_debit(self, call: WalletCall) -> WalletCall | None:
        """Write a new ``pending`` debit; or, if the player's ``slip_key`` was debited
        before, return that debit (and write nothing)."""
        ...

    async def answer_debit(self, debit: WalletCall, state: CallState, answer: str, now: int,
                           closed_by: str | None = None) -> bool:
        """``pending`` → ``state`` with ``answer``, if still pending (False if not)."""
        ...

    async def expire_debits(self, before: int, now: int) -> list[WalletCall]:
        """Every ``pending`` debit whose deadline is before ``before`` → ``unknown``."""
        ...

    async def enqueue(self, calls: list[WalletCall], closes: list[str], now: int) -> None:
        """Queue ``calls`` (credits, rollbacks; one already there is left alone) and close
        the debits ``closes`` by them, together."""
        ...

    async def open_debits(self, limit: int) -> list[WalletCall]:
        """Debits not closed yet, oldest first."""
        ...

    async def due(self, now: int, limit: int) -> list[WalletCall]:
        """Queued credits and rollbacks due for delivery, soonest first."""
        ...

    async def delivered(self, call: WalletCall, ok: bool, answer: str, next_at: int,
                        now: int) -> None:
        """One delivery attempt of a queued call: its answer; ``ok`` ends it."""
        ...

    async def calls(self, round_id: str | None = None, player_id: str | None = None,
                    limit: int = 10_000) -> list[WalletCall]:
        """The log, oldest first, for one round and/or one player."""
        ...

    async def backlog(self) -> int:
        """Credits and rollbacks not yet answered ``ok``."""
        ...

    async def close(self) -> None: ...


_SCHEMA = """
CREATE TABLE IF NOT EXISTS wallet_calls (
    tx_id TEXT PRIMARY KEY,
    method TEXT NOT NULL,
    player_id TEXT NOT NULL,
    currency TEXT NOT NULL,
    table_id TEXT NOT NULL,
    round_id TEXT NOT NULL,
    amount INTEGER NOT NULL,
    body BLOB NOT NULL,
    state TEXT NOT NULL,
    answer TEXT,
    attempts INTEGER NOT NULL DEFAULT 0,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    slip_key TEXT,
    deadline INTEGER NOT NULL DEFAULT 0,
    closed_by TEXT,
    next_at INTEGER NOT NULL DEFAULT 0,
    debits TEXT NOT NULL DEFAULT ''
);
CREATE UNIQUE INDEX IF NOT EXISTS wallet_slips ON wallet_calls (player_id, slip_key)
    WHERE method = 'debit';
CREATE INDEX IF NOT EXISTS wallet_open ON wallet_calls (created_at)
    WHERE method = 'debit' AND closed_by IS NULL;
CREATE INDEX IF NOT EXISTS wallet_due ON wallet_calls (next_at) WHERE state = 'queued';
CREATE INDEX IF NOT EXISTS wallet_rounds ON wallet_calls (round_id, player_id);
CREATE INDEX IF NOT EXISTS wallet_players ON wallet_calls (player_id, created_at)
"""

_FIELDS = tuple(WalletCall.__struct_fields__)
_COLUMNS = ", ".join(_FIELDS)


def _row(row: tuple[object, ...]) -> WalletCall:
    values = dict(zip(_FIELDS, row, strict=True))
    body = values["body"]
    values["body"] = bytes(body) if isinstance(body, bytes | memoryview) else body
    return msgspec.convert(values, WalletCall)


@surface_outages(is_sqlite_outage)
class SQLiteWalletLog:
    """The wallet log in the embedded database file, on a connection of its own.

    The file locked past ``busy_timeout``, or a disk I/O error, surfaces as
    :class:`~livetable.store.base.StoreUnavailable` (:func:`surface_outages`).

    Its own connection (and tables created if missing, apart from the ledger's numbered
    migrations): the log never shares a transaction with the ledger — every step that
    touches both is idempotent by id instead (see :mod:`livetable.server.wallet`) — so
    it needs nothing of the ledger's connection, and nothing waits on the other's work
    beyond SQLite's own write lock (``busy_timeout``).
    """

    def __init__(self, path: str | Path, synchronous: str = "NORMAL") -> None:
        if str(path) != ":memory:":
            create_private(Path(path))
        self.db = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA busy_timeout=5000")
        # the ledger's durability (store/sqlite.py): NORMAL survives a process crash, which
        # is what the outbox must; WAL's default (FULL) would fsync every debit twice
        self.db.execute(f"PRAGMA synchronous={check_synchronous(synchronous)}")
        for statement in _SCHEMA.split(";"):
            if statement.strip():
                self.db.execute(statement)

    def _select(self, where: str, args: tuple[object, ...]) -> list[WalletCall]:
        rows = self.db.execute(f"SELECT {_COLUMNS} FROM wallet_calls WHERE {where}",
                               args).fetchall()
        return [_row(r) for r in rows]

    async def begin_debit(self, call: WalletCall) -> WalletCall | None:
        self.db.execute("BEGIN IMMEDIATE")
        try:
            prior = self._select("method = 'debit' AND player_id = ? AND slip_key = ?",
                                 (call.player_id, call.slip_key))
            if not prior:
                self._insert(call)
            self.db.execute("COMMIT")
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        return prior[0] if prior else None

    def _insert(self, call: WalletCall) -> None:
        values = [getattr(call, name) for name in _FIELDS]
        self.db.execute(f"INSERT OR IGNORE INTO wallet_calls ({_COLUMNS}) VALUES "
                        f"({', '.join('?' * len(_FIELDS))})", values)

    async def answer_debit(self, debit: WalletCall, state: CallState, answer: str, now: int,
                           closed_by: str | None = None) -> bool:
        cur = self.db.execute(
            "UPDATE wallet_calls SET state = ?, answer = ?, attempts = attempts + 1, "
            "updated_at = ?, closed_by = COALESCE(closed_by, ?) "
            "WHERE tx_id = ? AND state = 'pending'",
            (state, answer, now, closed_by, debit.tx_id))
        return cur.rowcount == 1

    async def expire_debits(self, before: int, now: int) -> list[WalletCall]:
        self.db.execute("BEGIN IMMEDIATE")
        try:
            expired = self._select("method = 'debit' AND state = 'pending' AND deadline < ?",
                                   (before,))
            self.db.executemany(
                "UPDATE wallet_calls SET state = 'unknown', answer = 'no answer by the "
                "deadline', updated_at = ? WHERE tx_id = ? AND state = 'pending'",
                [(now, c.tx_id) for c in expired])
            self.db.execute("COMMIT")
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        for call in expired:
            call.state = "unknown"
        return expired

    async def enqueue(self, calls: list[WalletCall], closes: list[str], now: int) -> None:
        self.db.execute("BEGIN IMMEDIATE")
        try:
            for call in calls:
                self._insert(call)
            closer = calls[0].tx_id if calls else None
            self.db.executemany(
                "UPDATE wallet_calls SET closed_by = ?, updated_at = ? "
                "WHERE tx_id = ? AND closed_by IS NULL", [(closer, now, t) for t in closes])
            self.db.execute("COMMIT")
        except BaseException:
            self.db.execute("ROLLBACK")
            raise

    async def open_debits(self, limit: int) -> list[WalletCall]:
        return self._select("method = 'debit' AND closed_by IS NULL ORDER BY created_at "
                            "LIMIT ?", (limit,))

    async def due(self, now: int, limit: int) -> list[WalletCall]:
        return self._select("state = 'queued' AND next_at <= ? ORDER BY next_at LIMIT ?",
                            (now, limit))

    async def delivered(self, call: WalletCall, ok: bool, answer: str, next_at: int,
                        now: int) -> None:
        self.db.execute(
            "UPDATE wallet_calls SET state = CASE WHEN ? THEN 'ok' ELSE state END, "
            "answer = ?, attempts = attempts + 1, next_at = ?, updated_at = ? "
            "WHERE tx_id = ? AND state = 'queued'", (ok, answer, next_at, now, call.tx_id))

    async def calls(self, round_id: str | None = None, player_id: str | None = None,
                    limit: int = 10_000) -> list[WalletCall]:
        return self._select(
            "(? IS NULL OR round_id = ?) AND (? IS NULL OR player_id = ?) "
            "ORDER BY created_at, rowid LIMIT ?",
            (round_id, round_id, player_id, player_id, limit))

    async def backlog(self) -> int:
        row = self.db.execute("SELECT COUNT(*) FROM wallet_calls WHERE state = 'queued'"
                              ).fetchone()
        return int(row[0])

    async def close(self) -> None:
        self.db.close()
