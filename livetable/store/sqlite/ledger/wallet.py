"""The seamless wallet's log in SQLite: its table, and every operation on it as a typed,
synchronous step, run in batches by whichever writer holds the log's connection.

Why here, beside the ledger's calls. The log's front (:mod:`livetable.operator.log_sqlite`)
used to run these steps on a thread of the server. A thread shares the interpreter lock
with the event loop: at the close of betting every seamless slip wrote the log twice, and
each write handed the lock back and forth with the loop — on a loaded 2-core machine every
hand-over waits for the scheduler, and 500 players × 10 bets collapsed (debits timed out
in the log's queue with the server half idle, docs/benchmarks.md) where the internal
wallet, whose ledger runs in the writer's child process (store/sqlite/writer.py), took them all.
So under ``livetable serve`` the log joins the ledger's writer process: a batch of log
steps is one :class:`~livetable.store.sqlite.ledger.calls.WalletLogBatch` call, run there on a
connection of the child's own to the log's file (a file of its own: see log_sqlite.py).
In-process stores (tests, tools) keep the log's thread, with the same steps.

Each batch is one transaction, each step in a savepoint of its own: one that fails fails
alone (its :class:`Outcome` says why), the others commit.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import msgspec

from livetable.store.sqlite.ledger.schema import check_synchronous, create_private, is_sqlite_outage
from livetable.store.sqlite.ledger.wallet_totals import days_sql, totals_sql

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


SCHEMA = """
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
DROP INDEX IF EXISTS wallet_open;
CREATE INDEX IF NOT EXISTS wallet_open_rounds ON wallet_calls (round_id, state, created_at)
    WHERE method = 'debit' AND closed_by IS NULL;
CREATE INDEX IF NOT EXISTS wallet_pending ON wallet_calls (deadline)
    WHERE method = 'debit' AND state = 'pending';
CREATE INDEX IF NOT EXISTS wallet_due ON wallet_calls (next_at) WHERE state = 'queued';
CREATE INDEX IF NOT EXISTS wallet_rounds ON wallet_calls (round_id, player_id);
CREATE INDEX IF NOT EXISTS wallet_players ON wallet_calls (player_id, created_at)
"""

FIELDS = tuple(WalletCall.__struct_fields__)
COLUMNS = ", ".join(FIELDS)


def connect(path: str | Path, synchronous: str = "NORMAL") -> sqlite3.Connection:
    """The log's connection, its table made if missing."""
    if str(path) != ":memory:":  # 0600 in a 0700 directory, whatever the umask
        create_private(Path(path))
    db = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA busy_timeout=5000")
    # the ledger's durability (store/sqlite/__init__.py): NORMAL survives a process crash, which
    # is what the outbox must; WAL's default (FULL) would fsync every debit twice
    db.execute(f"PRAGMA synchronous={check_synchronous(synchronous)}")
    for statement in SCHEMA.split(";"):
        if statement.strip():
            db.execute(statement)
    return db


# --- the steps --------------------------------------------------------------------------


class Step(msgspec.Struct, frozen=True, tag_field="step"):
    """One operation on the log (see :class:`livetable.operator.log.WalletLog`)."""


class BeginDebit(Step, frozen=True, tag="begin_debit"):
    call: WalletCall


class AnswerDebit(Step, frozen=True, tag="answer_debit"):
    tx_id: str
    state: CallState
    answer: str
    now: int
    closed_by: str | None


class KeepDebit(Step, frozen=True, tag="keep_debit"):
    """An ``ok`` debit the operator keeps (a tip), closed once its ledger side is written."""

    tx_id: str
    closed_by: str
    now: int


class DebitOf(Step, frozen=True, tag="debit_of"):
    player_id: str
    table_id: str
    slip_key: str


class ExpireDebits(Step, frozen=True, tag="expire_debits"):
    before: int
    now: int


class Enqueue(Step, frozen=True, tag="enqueue"):
    calls: list[WalletCall]
    now: int


class OpenRounds(Step, frozen=True, tag="open_rounds"):
    """The rounds with open debits, oldest first, as JSON: ``[round_id, any unknown]``."""

    limit: int


class OpenDebits(Step, frozen=True, tag="open_debits"):
    """Open debits, oldest first: every one (``rounds`` None), or those of ``rounds``
    and the ``unknown`` ones of ``unknown_of``."""

    limit: int
    rounds: list[str] | None = None
    unknown_of: list[str] = []


class Due(Step, frozen=True, tag="due"):
    now: int
    limit: int


class Delivered(Step, frozen=True, tag="delivered"):
    tx_id: str
    ok: bool
    answer: str
    next_at: int
    now: int


class Calls(Step, frozen=True, tag="calls"):
    round_id: str | None
    player_id: str | None
    limit: int


class Backlog(Step, frozen=True, tag="backlog"):
    pass


class Totals(Step, frozen=True, tag="totals"):
    """The report's totals over the whole log (store/sqlite/ledger/wallet_totals.py), as JSON."""

    round_id: str | None
    player_id: str | None
    operator: str | None


class Days(Step, frozen=True, tag="days"):
    """The per-day summary over the whole log (store/sqlite/ledger/wallet_totals.py), as JSON."""

    operator: str | None


AnyStep = (BeginDebit | AnswerDebit | KeepDebit | DebitOf | ExpireDebits | Enqueue
           | OpenRounds | OpenDebits | Due | Delivered | Calls | Backlog | Totals | Days)
#: A step's value (``str``: rows as JSON text, the totals', the days' and the open rounds').
Value = WalletCall | list[WalletCall] | bool | int | str | None


class Outcome(msgspec.Struct, frozen=True, array_like=True):
    """A step's answer: its value, or why it failed (``outage``: the disk or the lock)."""

    value: Value = None
    error: str | None = None
    outage: bool = False


def call_of(row: Sequence[object]) -> WalletCall:
    """A row of :data:`COLUMNS` (SQLite's or PostgreSQL's) as a call."""
    values = dict(zip(FIELDS, row, strict=True))
    body = values["body"]
    values["body"] = bytes(body) if isinstance(body, bytes | memoryview) else body
    return msgspec.convert(values, WalletCall)


def _select(db: sqlite3.Connection, where: str, args: tuple[object, ...]) -> list[WalletCall]:
    rows = db.execute(f"SELECT {COLUMNS} FROM wallet_calls WHERE {where}", args).fetchall()
    return [call_of(r) for r in rows]


def values_of(call: WalletCall) -> list[Any]:
    """A call's values in the order of :data:`COLUMNS`."""
    return [getattr(call, name) for name in FIELDS]


_INSERT = (f"INSERT OR IGNORE INTO wallet_calls ({COLUMNS}) VALUES "
           f"({', '.join('?' * len(FIELDS))})")


def _insert(db: sqlite3.Connection, call: WalletCall) -> None:
    db.execute(_INSERT, values_of(call))


def _begin_debit(db: sqlite3.Connection, call: WalletCall) -> WalletCall | None:
    """Written, or the slip's debit made before (``wallet_slips`` is unique): read only
    when the insert finds one, not before every insert."""
    if db.execute(_INSERT, values_of(call)).rowcount == 1:
        return None
    prior = _select(db, "method = 'debit' AND player_id = ? AND slip_key = ?",
                    (call.player_id, call.slip_key))
    return prior[0] if prior else None


def _expire(db: sqlite3.Connection, before: int, now: int) -> list[WalletCall]:
    expired = _select(db, "method = 'debit' AND state = 'pending' AND deadline < ?", (before,))
    db.executemany("UPDATE wallet_calls SET state = 'unknown', answer = 'no answer by the "
                   "deadline', updated_at = ? WHERE tx_id = ? AND state = 'pending'",
                   [(now, c.tx_id) for c in expired])
    for call in expired:
        call.state = "unknown"
    return expired


def closes(call: WalletCall) -> list[str]:
    """The debits a credit or rollback closes (its ``debits``)."""
    return [t for t in call.debits.split(",") if t]


def _enqueue(db: sqlite3.Connection, step: Enqueue) -> None:
    for call in step.calls:
        _insert(db, call)
    db.executemany("UPDATE wallet_calls SET closed_by = ?, updated_at = ? "
                   "WHERE tx_id = ? AND closed_by IS NULL",
                   [(call.tx_id, step.now, t) for call in step.calls for t in closes(call)])


#: What an open debit is, in SQLite and PostgreSQL alike (index ``wallet_open_rounds``:
#: the sweeper reads by round).
OPEN_DEBIT = "method = 'debit' AND closed_by IS NULL"
_OPEN_ROUNDS = (f"SELECT round_id, MAX(state = 'unknown') FROM wallet_calls WHERE {OPEN_DEBIT} "
                "GROUP BY round_id ORDER BY MIN(created_at) LIMIT ?")
_KEEP = ("UPDATE wallet_calls SET closed_by = ?, updated_at = ? WHERE tx_id = ? "
         "AND state = 'ok' AND closed_by IS NULL")


def perform(db: sqlite3.Connection, step: AnyStep) -> Value:
    """Run one step on the log's connection (inside a transaction)."""
    match step:
        case BeginDebit(call):
            return _begin_debit(db, call)
        case AnswerDebit(tx_id, state, answer, now, closed_by):
            return db.execute(
                "UPDATE wallet_calls SET state = ?, answer = ?, attempts = attempts + 1, "
                "updated_at = ?, closed_by = COALESCE(closed_by, ?) "
                "WHERE tx_id = ? AND state = 'pending'",
                (state, answer, now, closed_by, tx_id)).rowcount == 1
        case KeepDebit(tx_id, closed_by, now):
            return db.execute(_KEEP, (closed_by, now, tx_id)).rowcount == 1
        case DebitOf(player_id, table_id, slip_key):
            found = _select(db, "method = 'debit' AND player_id = ? AND slip_key = ? AND "
                                "table_id = ?", (player_id, slip_key, table_id))
            return found[0] if found else None
        case ExpireDebits(before, now):
            return _expire(db, before, now)
        case Enqueue():
            _enqueue(db, step)
            return None
        case OpenRounds(limit):
            return msgspec.json.encode(db.execute(_OPEN_ROUNDS, (limit,)).fetchall()).decode()
        case OpenDebits(limit, None):
            return _select(db, f"{OPEN_DEBIT} ORDER BY created_at LIMIT ?", (limit,))
        case OpenDebits(limit, rounds, unknown_of):
            return _select(db, f"{OPEN_DEBIT} AND (round_id IN (SELECT value FROM json_each(?)) OR "
                               "(state = 'unknown' AND round_id IN (SELECT value FROM "
                               "json_each(?)))) ORDER BY created_at LIMIT ?",
                           (msgspec.json.encode(rounds), msgspec.json.encode(unknown_of),
                            limit))
        case Due(now, limit):
            return _select(db, "state = 'queued' AND next_at <= ? ORDER BY next_at LIMIT ?",
                           (now, limit))
        case Delivered(tx_id, ok, answer, next_at, now):
            db.execute("UPDATE wallet_calls SET state = CASE WHEN ? THEN 'ok' ELSE state END, "
                       "answer = ?, attempts = attempts + 1, next_at = ?, updated_at = ? "
                       "WHERE tx_id = ? AND state = 'queued'", (ok, answer, next_at, now, tx_id))
            return None
        case Calls(round_id, player_id, limit):
            return _select(db, "(? IS NULL OR round_id = ?) AND (? IS NULL OR player_id = ?) "
                               "ORDER BY created_at, rowid LIMIT ?",
                           (round_id, round_id, player_id, player_id, limit))
        case Backlog():
            return int(db.execute("SELECT COUNT(*) FROM wallet_calls "
                                  "WHERE state = 'queued'").fetchone()[0])
        case Totals(round_id, player_id, operator):
            rows = db.execute(totals_sql("sqlite"), (round_id, player_id, operator))
            return msgspec.json.encode(rows.fetchall()).decode()
        case Days(operator):
            rows = db.execute(days_sql("sqlite"), (operator,))
            return msgspec.json.encode(rows.fetchall()).decode()
    raise TypeError(f"not a wallet log step: {step!r}")


#: The steps that write at most one statement: one that fails has changed nothing (SQLite
#: undoes a failed statement), so they need no savepoint — two statements fewer a step,
#: four for every seamless bet's debit and its answer.
_ONE_WRITE = (BeginDebit, AnswerDebit, KeepDebit, DebitOf, OpenRounds, OpenDebits, Due,
              Delivered, Calls, Backlog, Totals, Days)


def _failed(exc: Exception) -> Outcome:
    """A step that failed alone: why, and whether it is an outage (the disk, the lock)."""
    return Outcome(None, f"{type(exc).__name__}: {exc}", is_sqlite_outage(exc))


def apply(db: sqlite3.Connection, steps: list[AnyStep]) -> list[Outcome]:
    """One transaction, each step in a savepoint of its own (but those of one statement:
    :data:`_ONE_WRITE`)."""
    db.execute("BEGIN IMMEDIATE")
    try:
        out: list[Outcome] = []
        for step in steps:
            if isinstance(step, _ONE_WRITE):
                try:
                    out.append(Outcome(perform(db, step)))
                except Exception as exc:
                    if not db.in_transaction:  # SQLite rolled it back (a full disk)
                        raise
                    out.append(_failed(exc))
                continue
            db.execute("SAVEPOINT step")
            try:
                out.append(Outcome(perform(db, step)))
            except Exception as exc:
                try:
                    db.execute("ROLLBACK TO step")
                except sqlite3.Error:
                    # the transaction is gone (SQLite rolled it back: a full disk): the
                    # batch fails, with why, not with the rollback's own error
                    raise exc from None
                out.append(_failed(exc))
            db.execute("RELEASE step")
        db.execute("COMMIT")
    except BaseException:
        # a COMMIT that failed on a full disk was already rolled back by SQLite: the
        # ROLLBACK's own error must not replace the one that says why
        with contextlib.suppress(sqlite3.Error):
            db.execute("ROLLBACK")
        raise
    return out


#: The log's connections in this process (the writer's child), by path.
_open: dict[str, sqlite3.Connection] = {}


def apply_at(path: str, synchronous: str, steps: list[AnyStep]) -> list[Outcome]:
    """:func:`apply` on the log at ``path``, its connection opened on first use."""
    db = _open.get(path)
    if db is None:
        db = _open[path] = connect(path, synchronous)
    return apply(db, steps)
