"""The ledger's SQLite schema: one list of migrations, how a connection is opened, and
which of SQLite's errors are outages.

Every table of the ledger's database file is created here (the seamless wallet's log keeps
a file of its own: operator/log_sqlite.py), by migrations applied in order and recorded in
``PRAGMA user_version``. A migration reads the version inside its own write transaction,
so two connections opening one file at once never apply one twice.

``synchronous=NORMAL`` in WAL mode survives a process crash (what the recovery tests do);
an OS crash may lose the last transactions, which ``FULL`` would not — set
``LIVETABLE_SQLITE_SYNC=FULL`` for that trade.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path

from livetable.store.base import StoreUnavailable

#: SQLite's result codes for "the database cannot be used now" (the primary code is the
#: low byte of an extended one): busy or locked past the busy timeout, disk I/O, a full
#: disk, a file that cannot be opened or written. Anything else (a constraint, SQL that
#: does not parse, a corrupt file) is a bug or damage, not an outage.
_OUTAGE_CODES = frozenset({sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED, sqlite3.SQLITE_IOERR,
                           sqlite3.SQLITE_FULL, sqlite3.SQLITE_CANTOPEN,
                           sqlite3.SQLITE_READONLY, sqlite3.SQLITE_NOMEM,
                           sqlite3.SQLITE_PROTOCOL})


def is_sqlite_outage(exc: BaseException) -> bool:
    """Whether ``exc`` says the database file cannot be used now (see _OUTAGE_CODES)."""
    code = getattr(exc, "sqlite_errorcode", None)
    return (isinstance(exc, sqlite3.OperationalError) and code is not None
            and code & 0xFF in _OUTAGE_CODES)


def outage(exc: BaseException) -> StoreUnavailable:
    """The outage ``exc`` (an :func:`is_sqlite_outage` error) is, said plainly: a full disk
    is named, for the operator reading ``/readyz`` and the log."""
    if getattr(exc, "sqlite_errorcode", 0) & 0xFF == sqlite3.SQLITE_FULL:
        return StoreUnavailable(f"the disk is full (SQLite: {exc}): free space, and the "
                                f"ledger goes on by itself")
    return StoreUnavailable(f"SQLite: {exc}")

MIGRATIONS: list[str] = [
    # 1: the first schema
    """
    CREATE TABLE accounts (
        id TEXT PRIMARY KEY,
        kind TEXT NOT NULL,            -- player, house, hold, external
        name TEXT NOT NULL DEFAULT '',
        balance INTEGER NOT NULL DEFAULT 0,
        created_at INTEGER NOT NULL DEFAULT 0
    );
    CREATE TABLE transfers (
        id TEXT PRIMARY KEY,
        debit TEXT NOT NULL,
        credit TEXT NOT NULL,
        amount INTEGER NOT NULL CHECK (amount > 0),
        kind TEXT NOT NULL,            -- deposit, bet, settle, payout, refund
        ref TEXT NOT NULL,
        at INTEGER NOT NULL
    );
    CREATE TABLE rounds (
        round_id TEXT PRIMARY KEY,
        table_id TEXT NOT NULL,
        shoe_id TEXT NOT NULL,
        round_no INTEGER NOT NULL,
        state TEXT NOT NULL,           -- betting paused closed settled cancelled
        closes_at INTEGER,
        limits TEXT NOT NULL,
        cards TEXT,
        spots TEXT,
        reason TEXT,
        opened_at INTEGER NOT NULL,
        ended_at INTEGER
    );
    CREATE TABLE bets (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        player_id TEXT NOT NULL,
        bet_id TEXT NOT NULL,
        table_id TEXT NOT NULL,
        round_id TEXT NOT NULL,
        spot TEXT NOT NULL,
        amount INTEGER NOT NULL,
        deducted INTEGER NOT NULL,
        placed_at INTEGER NOT NULL,
        balance_at_accept INTEGER NOT NULL,
        state TEXT NOT NULL,           -- accepted settled refunded
        outcome TEXT,
        odds INTEGER,
        returned INTEGER,
        settled_at INTEGER,
        balance_after INTEGER,
        UNIQUE (player_id, bet_id)
    );
    CREATE INDEX bets_by_round ON bets (round_id, player_id, spot);
    CREATE INDEX bets_by_player ON bets (player_id, seq);
    CREATE TABLE tables (
        table_id TEXT PRIMARY KEY,
        state BLOB NOT NULL,
        epoch INTEGER NOT NULL,
        seq INTEGER NOT NULL
    );
    CREATE TABLE events (
        table_id TEXT NOT NULL,
        epoch INTEGER NOT NULL,
        seq INTEGER NOT NULL,
        frame BLOB NOT NULL,
        PRIMARY KEY (table_id, epoch, seq)
    ) WITHOUT ROWID;
    INSERT INTO accounts (id, kind, name) VALUES ('house', 'house', 'House');
    INSERT INTO accounts (id, kind, name) VALUES ('external', 'external', 'Deposits');
    """,
    # 2: the store's identity (see Store.identity)
    """
    CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
    """,
    # 3: ended auto shoes, revealed for anyone to verify (docs/design.md §7). Nothing is written
    # here before a shoe ends: the order of a shoe in play is only in the sealed state.
    """
    CREATE TABLE shoes (
        shoe_id TEXT PRIMARY KEY,
        table_id TEXT NOT NULL,
        commitment TEXT NOT NULL,
        salt TEXT NOT NULL,
        cut_at INTEGER NOT NULL,
        burn_card TEXT NOT NULL,
        burned INTEGER NOT NULL,
        card_order TEXT NOT NULL,      -- JSON list of the 416 cards
        rounds TEXT NOT NULL,          -- JSON [[round_id, cards taken], ...]
        ended_at INTEGER NOT NULL
    );
    """,
    # 4: bet slips (every bet belongs to one; a place_bet is a slip of one without a
    # slip_id), and the indexes chunked settlement reads by
    """
    CREATE TABLE slips (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        player_id TEXT NOT NULL,
        slip_id TEXT,                  -- NULL: a place_bet
        round_id TEXT NOT NULL,
        deducted INTEGER NOT NULL,
        balance INTEGER NOT NULL,      -- the player's balance once the slip was taken
        placed_at INTEGER NOT NULL,
        UNIQUE (player_id, slip_id)
    );
    ALTER TABLE bets ADD COLUMN slip_seq INTEGER REFERENCES slips (seq);
    CREATE INDEX bets_by_slip ON bets (slip_seq);
    CREATE INDEX bets_open ON bets (round_id, state, player_id, seq);
    CREATE INDEX rounds_by_table_state ON rounds (table_id, state);
    -- a round's players in the order they first bet (settlement goes player by player,
    -- ``cursor`` players done), as the Redis store keeps them
    CREATE TABLE round_players (
        round_id TEXT NOT NULL,
        n INTEGER NOT NULL,
        player_id TEXT NOT NULL,
        PRIMARY KEY (round_id, n)
    ) WITHOUT ROWID;
    ALTER TABLE rounds ADD COLUMN players INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE rounds ADD COLUMN cursor INTEGER NOT NULL DEFAULT 0;
    INSERT INTO round_players (round_id, n, player_id)
        SELECT round_id, ROW_NUMBER() OVER (PARTITION BY round_id ORDER BY MIN(seq)) - 1,
               player_id FROM bets WHERE state = 'accepted' GROUP BY round_id, player_id;
    UPDATE rounds SET players = (SELECT COUNT(*) FROM round_players
                                 WHERE round_players.round_id = rounds.round_id);
    """,
    # 5: the open-bets index holds open bets only: settling a bet removes its entry
    # instead of moving it under state 'settled' (a delete and an insert per bet, and pages
    # split by the entries moved). Measured on a 100k-bet round, alternately
    # (bench/settle_chunks.py, --sql with the old index): 1.13-1.29 s -> 0.86-0.95 s CPU.
    """
    DROP INDEX bets_open;
    CREATE INDEX bets_open ON bets (round_id, player_id, seq) WHERE state = 'accepted';
    """,
    # (The seamless wallet's log is not here: it keeps a file of its own, beside this one,
    # so that its writes never wait for the ledger's write lock: operator/log_sqlite.py.)
    # 6: operators' sessions (betting/sessions.py): who launched each, its limits and
    # figures, and whether it ended — every gateway reads the same row, after a restart too
    """
    CREATE TABLE sessions (
        session_id TEXT PRIMARY KEY,
        operator TEXT NOT NULL,
        player_id TEXT NOT NULL,
        started_at INTEGER NOT NULL,
        expires_at INTEGER NOT NULL,
        limits TEXT NOT NULL,          -- JSON: SessionLimits
        staked INTEGER NOT NULL DEFAULT 0,
        returned INTEGER NOT NULL DEFAULT 0,
        round_id TEXT,                 -- the round last staked in, and what it took
        round_staked INTEGER NOT NULL DEFAULT 0,
        checked_at INTEGER NOT NULL DEFAULT 0,
        ended_at INTEGER,
        reason TEXT
    );
    CREATE INDEX sessions_by_expiry ON sessions (expires_at);
    """,
    # 7: the launches' request ids, each used once (operator/launches.py): in the store,
    # so that a captured launch replayed after a restart is refused as before it
    """
    CREATE TABLE launch_requests (
        operator TEXT NOT NULL,
        request_id TEXT NOT NULL,
        kept_until INTEGER NOT NULL,   -- epoch ms: past any replay its timestamp allows
        PRIMARY KEY (operator, request_id)
    );
    CREATE INDEX launch_requests_by_expiry ON launch_requests (kept_until);
    """,
    # 8: tips to the dealer (betting/tips.py): each once by (player, tip_id), its money
    # moved player -> the house's tip account by the transfer 'tip:<player>:<tip_id>'
    """
    CREATE TABLE tips (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        player_id TEXT NOT NULL,
        tip_id TEXT NOT NULL,
        table_id TEXT NOT NULL,
        round_id TEXT,                 -- the round in play at the table, if any
        amount INTEGER NOT NULL CHECK (amount > 0),
        balance_after INTEGER NOT NULL,
        placed_at INTEGER NOT NULL,
        UNIQUE (player_id, tip_id)
    );
    CREATE INDEX tips_by_player ON tips (player_id, placed_at);
    INSERT INTO accounts (id, kind, name) VALUES ('tips:house', 'tips', 'Tips to dealers');
    """,
]


def check_synchronous(value: str) -> str:
    """``PRAGMA synchronous`` of the ledger and the wallet log (``LIVETABLE_SQLITE_SYNC``,
    which the settings check first)."""
    if value not in ("NORMAL", "FULL", "EXTRA"):
        raise ValueError(f"LIVETABLE_SQLITE_SYNC must be NORMAL, FULL or EXTRA, not {value!r}")
    return value


def create_private(path: Path) -> None:
    """The database file, if it is new, readable by its owner only (0600), in a directory
    created 0700: the ledger and the event log are nobody else's to read, whatever the
    umask (outside systemd it is usually 022: 0644 files). SQLite gives the ``-wal`` and
    ``-shm`` files the database file's mode."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    with contextlib.suppress(FileExistsError):
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))


def connect(path: str, synchronous: str = "NORMAL") -> sqlite3.Connection:
    """A connection to the database file at ``path`` (WAL, foreign keys), migrated."""
    if path != ":memory:":
        create_private(Path(path))
    db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute(f"PRAGMA synchronous={check_synchronous(synchronous)}")
    db.execute("PRAGMA foreign_keys=ON")
    migrate(db)
    return db


def migrate(db: sqlite3.Connection) -> None:
    """Apply the migrations ``db`` has not had yet, each in its own transaction."""
    while True:
        with transaction(db):
            version = db.execute("PRAGMA user_version").fetchone()[0]
            if version >= len(MIGRATIONS):
                return
            for statement in MIGRATIONS[version].split(";"):
                if statement.strip():
                    db.execute(statement)
            db.execute(f"PRAGMA user_version={version + 1}")


@contextlib.contextmanager
def transaction(db: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """``BEGIN IMMEDIATE`` … ``COMMIT``; on any failure, ``ROLLBACK`` if a transaction is
    still open.

    Only if: when ``COMMIT`` itself fails — the disk is full (``SQLITE_FULL``), an I/O
    error — SQLite has already rolled the transaction back, and a ``ROLLBACK`` then fails
    with "cannot rollback - no transaction is active", which replaced the disk-full error
    (an outage) with what looked like a bug, and held the table for good
    (docs/decisions.md#every-failure-loud-and-recoverable)."""
    db.execute("BEGIN IMMEDIATE")
    try:
        yield db
        db.execute("COMMIT")
    except BaseException:
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise
