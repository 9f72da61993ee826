"""The SQLite store: the embedded default (stdlib ``sqlite3``, WAL mode).

One connection, used by one writer thread (:attr:`SQLiteStore.writer`): every operation,
read or write, runs there, so the event loop never waits on the disk or on a long query —
a Bet Record read or a chunk of settlement delays no connection of the process. The thread
also serializes the transactions, which keeps each slip atomic with respect to every other
operation. Slips that arrive while the writer is busy wait together and go in one
transaction (group commit), each still judged and applied one after another, so the
answers are exactly those of one transaction per slip.

``synchronous=NORMAL`` in WAL mode survives a process crash (what the recovery tests do);
an OS crash may lose the last transactions, which ``FULL`` would not — set
``LIVETABLE_SQLITE_SYNC=FULL`` for that trade.

Schema changes are migrations in :data:`MIGRATIONS`, applied in order and recorded in
``PRAGMA user_version``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sqlite3
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Literal, TypeVar

from livetable import protocol as p
from livetable.accounts import AccountError, check_player_id, hold_account
from livetable.engine.table import (
    CancelRound,
    Effect,
    OpenRound,
    RevealShoe,
    SetBetting,
    SettleRound,
)
from livetable.rules.fairness import ShoeRecord, ShoeRound, publish_rounds
from livetable.store.base import (
    AuditReport,
    InsufficientBalance,
    Settled,
    StepRefused,
    StoreUnavailable,
    Unanswered,
    UnknownPlayer,
    cursor_of,
    take_in_batches,
)
from livetable.store.bets import (
    SQLITE_SETTLE_CHUNK,
    BetRequest,
    BetRow,
    OpenBet,
    Rejection,
    RoundFacts,
    RoundView,
    SlipAnswer,
    SlipFacts,
    SlipRequest,
    TakenBet,
    accepted,
    bet_answer,
    closed_deadline,
    judge_slip,
    limits_dict,
    payout_transfer_id,
    precheck,
    record_entry,
    refund_transfer_id,
    settle_chunk,
    settle_transfer_id,
    settled_message,
)
from livetable.store.sealing import StateSeal, open_state, seal_state
from livetable.store.writer import WriterOptions, WriterProcess

T = TypeVar("T")

#: Where the store's one writer runs: a thread of this process, or a child process of its
#: own (store/writer.py; what ``livetable serve`` uses, ``LIVETABLE_SQLITE_WRITER``).
SQLiteWriter = Literal["thread", "process"]

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
    # 3: ended auto shoes, revealed for anyone to verify (DESIGN §7). Nothing is written
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
]

#: How many events per table the log keeps for resume (older ones are trimmed).
DEFAULT_EVENT_RETENTION = 20_000


#: Slips taken in one transaction at most (a burst is cut into transactions of this size,
#: so that a settlement chunk or a read waits behind one of them at most).
MAX_SLIPS_PER_TRANSACTION = 2_000

_BET_COLUMNS = ("player_id, bet_id, table_id, round_id, spot, amount, deducted, placed_at, "
                "balance_at_accept, state, outcome, odds, returned, settled_at, balance_after")
_TAKEN_COLUMNS = "bet_id, round_id, spot, amount, deducted, balance_at_accept"
_TAKEN_COLUMNS_OF_BETS = ", ".join(f"bets.{c}" for c in _TAKEN_COLUMNS.split(", "))


def create_private(path: Path) -> None:
    """The database file, if it is new, readable by its owner only (0600), in a directory
    created 0700: the ledger and the event log are nobody else's to read, whatever the
    umask (outside systemd it is usually 022: 0644 files). SQLite gives the ``-wal`` and
    ``-shm`` files the database file's mode."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    with contextlib.suppress(FileExistsError):
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))


def check_synchronous(value: str) -> str:
    """``PRAGMA synchronous`` of the ledger and the wallet log (``LIVETABLE_SQLITE_SYNC``,
    which the settings check first)."""
    if value not in ("NORMAL", "FULL", "EXTRA"):
        raise ValueError(f"LIVETABLE_SQLITE_SYNC must be NORMAL, FULL or EXTRA, not {value!r}")
    return value


class SQLiteStore:
    """The :class:`~livetable.store.base.Store` contract on SQLite."""

    def __init__(self, path: str | Path, event_retention: int = DEFAULT_EVENT_RETENTION,
                 seal: StateSeal | None = None,
                 settle_chunk: int = SQLITE_SETTLE_CHUNK, synchronous: str = "NORMAL",
                 writer: SQLiteWriter = "thread") -> None:
        self.path = str(path)
        #: Seals engine states at rest (store/sealing.py); None only in tests.
        self.seal = seal
        #: The writer in a child process (``writer="process"``, store/writer.py): then
        #: this object opens no database, and every operation runs in the child.
        self.process: WriterProcess | None = None
        self._db: sqlite3.Connection | None = None
        if writer == "process":
            self.process = WriterProcess(WriterOptions(
                self.path, event_retention, None if seal is None else seal.master,
                settle_chunk, check_synchronous(synchronous)))
        else:
            if self.path != ":memory:":
                create_private(Path(self.path))
            # used by the writer thread only (tests may use it between two operations)
            self._db = sqlite3.connect(self.path, isolation_level=None,
                                       check_same_thread=False)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute(f"PRAGMA synchronous={check_synchronous(synchronous)}")
            self._db.execute("PRAGMA foreign_keys=ON")
        self.event_retention = event_retention
        #: Bets settled per call of :meth:`settle_pending` (and in the settling step).
        self.settle_chunk = settle_chunk
        self._limits: dict[str, p.Limits] = {}  # a round's limits never change
        self.writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="livetable-sqlite")
        self._pending: list[tuple[SlipRequest, int, asyncio.Future[SlipAnswer]]] = []
        self._unanswered = Unanswered()
        self._draining: asyncio.Task[None] | None = None
        if self._db is not None:
            self._migrate()

    @property
    def db(self) -> sqlite3.Connection:
        """The connection (the writer's; tests may use it between two operations)."""
        if self._db is None:
            raise RuntimeError("this SQLite store's database is open in its writer process")
        return self._db

    async def _run(self, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn`` (a method of this class) on the writer thread, or by name in the
        writer process: every operation of the store does, so this is where SQLite's
        outages (the file locked past the busy timeout, a disk I/O error) become
        :class:`~livetable.store.base.StoreUnavailable` (the process maps its own)."""
        if self.process is not None:
            result: T = await self.process.call(fn.__name__, *args)
            return result
        try:
            return await asyncio.get_running_loop().run_in_executor(self.writer, fn, *args)
        except sqlite3.Error as exc:
            if is_sqlite_outage(exc):
                raise StoreUnavailable(f"SQLite: {exc}") from exc
            raise

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        self.db.execute("BEGIN IMMEDIATE")
        try:
            yield self.db
            self.db.execute("COMMIT")
        except BaseException:
            self.db.execute("ROLLBACK")
            raise

    def _migrate(self) -> None:
        version = self.db.execute("PRAGMA user_version").fetchone()[0]
        for number, script in enumerate(MIGRATIONS[version:], start=version + 1):
            self.db.execute("BEGIN IMMEDIATE")
            try:
                for statement in script.split(";"):
                    if statement.strip():
                        self.db.execute(statement)
                self.db.execute(f"PRAGMA user_version={number}")
                self.db.execute("COMMIT")
            except BaseException:
                self.db.execute("ROLLBACK")
                raise

    # --- helpers (inside a transaction) -------------------------------------------------

    def _transfer(self, tid: str, debit: str, credit: str, amount: int, kind: str,
                  ref: str, now: int) -> bool:
        """Move ``amount`` from ``debit`` to ``credit`` once; False if already applied."""
        if debit == credit:  # would create money in the transfer log and move none
            raise AccountError(f"transfer {tid} debits and credits the same account {debit!r}")
        if amount <= 0:
            return False
        cur = self.db.execute(
            "INSERT OR IGNORE INTO transfers (id, debit, credit, amount, kind, ref, at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)", (tid, debit, credit, amount, kind, ref, now))
        if cur.rowcount == 0:
            return False
        self.db.execute("UPDATE accounts SET balance = balance - ? WHERE id = ?", (amount, debit))
        self.db.execute("UPDATE accounts SET balance = balance + ? WHERE id = ?", (amount, credit))
        return True

    def _kind(self, account: str) -> str | None:
        row = self.db.execute("SELECT kind FROM accounts WHERE id = ?", (account,)).fetchone()
        return None if row is None else str(row[0])

    def _balance(self, account: str) -> int | None:
        row = self.db.execute("SELECT balance FROM accounts WHERE id = ?", (account,)).fetchone()
        return None if row is None else int(row[0])

    # --- accounts --------------------------------------------------------------------

    async def ensure_player(self, player_id: str, name: str, initial_balance: int,
                            now: int) -> p.PlayerView:
        check_player_id(player_id)
        return await self._run(self._ensure_player, player_id, name, initial_balance, now)

    def _ensure_player(self, player_id: str, name: str, initial_balance: int,
                       now: int) -> p.PlayerView:
        with self._transaction():
            cur = self.db.execute(
                "INSERT OR IGNORE INTO accounts (id, kind, name, balance, created_at) "
                "VALUES (?, 'player', ?, 0, ?)", (player_id, name, now))
            if cur.rowcount:
                self._transfer(f"open:{player_id}", "external", player_id, initial_balance,
                               "deposit", player_id, now)
            elif self._kind(player_id) != "player":
                raise AccountError(f"{player_id!r} is not a player account")
            elif name:
                self.db.execute("UPDATE accounts SET name = ? WHERE id = ?", (name, player_id))
        view = self._player(player_id)
        assert view is not None
        return view

    async def player(self, player_id: str) -> p.PlayerView | None:
        return await self._run(self._player, player_id)

    def _player(self, player_id: str) -> p.PlayerView | None:
        row = self.db.execute(
            "SELECT id, name, balance FROM accounts WHERE id = ? AND kind = 'player'",
            (player_id,)).fetchone()
        return None if row is None else p.PlayerView(id=row[0], name=row[1], balance=row[2])

    async def deposit(self, transfer_id: str, player_id: str, amount: int, now: int) -> int:
        check_player_id(player_id)
        return await self._run(self._deposit, transfer_id, player_id, amount, now)

    def _deposit(self, transfer_id: str, player_id: str, amount: int, now: int) -> int:
        with self._transaction():
            if self._kind(player_id) != "player":
                raise UnknownPlayer(f"no player {player_id!r}")
            self._transfer(f"deposit:{transfer_id}", "external", player_id, amount, "deposit",
                           player_id, now)
        balance = self._balance(player_id)
        assert balance is not None
        return balance

    async def withdraw(self, transfer_id: str, player_id: str, amount: int, now: int, *,
                       against: str | None = None) -> int | None:
        """Move ``amount`` from the player to ``external`` once by ``transfer_id`` (see
        :meth:`livetable.store.base.Store.withdraw`)."""
        check_player_id(player_id)
        return await self._run(self._withdraw, transfer_id, player_id, amount, now, against)

    def _withdraw(self, transfer_id: str, player_id: str, amount: int, now: int,
                  against: str | None) -> int | None:
        with self._transaction() as db:
            if self._kind(player_id) != "player":
                raise UnknownPlayer(f"no player {player_id!r}")
            tid = f"withdraw:{transfer_id}"
            if db.execute("SELECT 1 FROM transfers WHERE id = ?", (tid,)).fetchone() is None:
                if against is not None and db.execute(
                        "SELECT 1 FROM transfers WHERE id = ?",
                        (f"deposit:{against}",)).fetchone() is None:
                    return None  # that deposit was never made: nothing to take back
                balance = self._balance(player_id) or 0
                if balance < amount:
                    raise InsufficientBalance(
                        f"withdraw {transfer_id}: {player_id!r} holds {balance}, not {amount}")
                self._transfer(tid, player_id, "external", amount, "withdraw", player_id, now)
        return self._balance(player_id)

    # --- slips -----------------------------------------------------------------------

    async def place_bet(self, bet: BetRequest, now: int) -> p.BetAccepted | p.BetRejected:
        return bet_answer(bet, await self.place_slip(bet.as_slip(), now))

    async def place_slip(self, slip: SlipRequest, now: int) -> p.SlipAccepted | Rejection:
        """Take a slip. Slips that arrive while the writer is busy wait for one another
        and share the next transaction (group commit)."""
        bad = precheck(slip)
        if bad is not None:
            return bad
        loop = asyncio.get_running_loop()
        future: asyncio.Future[SlipAnswer] = loop.create_future()
        self._pending.append((slip, now, future))
        self._unanswered.add(future)
        if self._draining is None:
            self._draining = loop.create_task(self._drain_slips())
        return await future

    async def _drain_slips(self) -> None:
        try:
            # two batches in flight to a writer process: it takes the next while this
            # process reads the answers of the last (store/writer.py)
            await take_in_batches(self._pending, self._take_batch, MAX_SLIPS_PER_TRANSACTION,
                                  in_flight=1 if self.process is None else 2)
        finally:
            self._draining = None

    async def _take_batch(self, batch: list[tuple[SlipRequest, int]]) -> list[SlipAnswer]:
        return await self._run(self._take_slips, batch)

    def _take_slips(self, batch: list[tuple[SlipRequest, int]]) -> list[SlipAnswer]:
        """Judge and apply a batch of slips in one transaction, one after another, as if
        each had its own: the facts every slip is judged by are read for the whole batch
        in a few queries, then kept current in memory as each slip is taken, and what the
        batch takes is written with one statement per table (see :class:`_SlipBatch`)."""
        with self._transaction():
            return _SlipBatch(self, batch).take()

    def _round_facts(self, round_id: str) -> tuple[RoundFacts, int] | None:
        """The round as slips are judged against it, and its number of players so far."""
        row = self.db.execute("SELECT table_id, state, closes_at, limits, players FROM rounds "
                              "WHERE round_id = ?", (round_id,)).fetchone()
        if row is None:
            return None
        limits = self._limits.get(round_id)
        if limits is None:
            limits = self._limits[round_id] = p.Limits(**json.loads(row[3]))
            if len(self._limits) > 1000:
                self._limits.pop(next(iter(self._limits)))
        return RoundFacts(table=row[0], state=row[1], closes_at=row[2], limits=limits), row[4]

    # --- engine steps ------------------------------------------------------------------

    async def commit_step(self, table: str, state: bytes, events: list[tuple[int, int, bytes]],
                          effects: list[Effect], now: int, *,
                          snapshot: bytes = b"") -> list[Settled]:
        # ``snapshot`` is for gateways of other processes (Redis): the embedded gateway
        # runs beside its engine.
        if any(isinstance(effect, SettleRound) for effect in effects):
            await self._unanswered.answered()  # slips that came before it go first
        return await self._run(self._commit_step, table, state, events, effects, now,
                               self.settle_chunk)

    def _commit_step(self, table: str, state: bytes, events: list[tuple[int, int, bytes]],
                     effects: list[Effect], now: int, chunk: int) -> list[Settled]:
        settled: list[Settled] = []
        with self._transaction():
            for effect in effects:
                settled.extend(self._apply(effect, now, chunk))
            if events:
                self.db.executemany(
                    "INSERT OR REPLACE INTO events (table_id, epoch, seq, frame) "
                    "VALUES (?, ?, ?, ?)", [(table, e, s, f) for e, s, f in events])
                epoch, last = events[-1][0], events[-1][1]
                if any(seq % 1000 == 0 for _, seq, _ in events):  # trim now and then
                    self.db.execute("DELETE FROM events WHERE table_id = ? AND (epoch < ? OR "
                                    "seq <= ?)", (table, epoch, last - self.event_retention))
            epoch_seq = (events[-1][0], events[-1][1]) if events else (0, 0)
            self.db.execute(
                "INSERT INTO tables (table_id, state, epoch, seq) VALUES (?, ?, ?, ?) "
                "ON CONFLICT (table_id) DO UPDATE SET state = excluded.state, "
                "epoch = CASE WHEN excluded.seq > 0 THEN excluded.epoch ELSE epoch END, "
                "seq = CASE WHEN excluded.seq > 0 THEN excluded.seq ELSE seq END",
                (table, seal_state(self.seal, table, state), *epoch_seq))
        return settled

    def _apply(self, effect: Effect, now: int, chunk: int) -> list[Settled]:
        db = self.db
        if isinstance(effect, OpenRound):
            db.execute(
                "INSERT OR IGNORE INTO rounds (round_id, table_id, shoe_id, round_no, state, "
                "closes_at, limits, opened_at) VALUES (?, ?, ?, ?, 'betting', ?, ?, ?)",
                (effect.round_id, effect.table, effect.shoe_id, effect.round_no,
                 effect.closes_at, json.dumps(limits_dict(effect.limits)), now))
            hold = hold_account(effect.round_id)
            kind = self._kind(hold)
            if kind is None:
                db.execute("INSERT INTO accounts (id, kind, created_at) VALUES (?, 'hold', ?)",
                           (hold, now))
            elif kind != "hold":  # raising rolls the step back: the round does not open
                raise AccountError(f"round {effect.round_id}: its escrow account {hold!r} "
                                   f"already exists as a {kind} account")
            return []
        if isinstance(effect, SetBetting):
            closes_at = effect.closes_at
            if effect.status == "closed":  # keep the deadline: see bets.closed_deadline
                row = db.execute("SELECT closes_at FROM rounds WHERE round_id = ?",
                                 (effect.round_id,)).fetchone()
                closes_at = closed_deadline(row[0], now) if row is not None else None
            db.execute("UPDATE rounds SET state = ?, closes_at = ? WHERE round_id = ? AND "
                       "state IN ('betting', 'paused', 'closed')",
                       (effect.status, closes_at, effect.round_id))
            return []
        if isinstance(effect, SettleRound):
            return self._settle(effect, now, chunk)
        if isinstance(effect, CancelRound):
            return self._refund(effect, now, chunk)
        if isinstance(effect, RevealShoe):
            db.execute(
                "INSERT OR IGNORE INTO shoes (shoe_id, table_id, commitment, salt, cut_at, "
                "burn_card, burned, card_order, rounds, ended_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (effect.shoe_id, effect.table, effect.commitment, effect.salt, effect.cut_at,
                 effect.burn_card, effect.burned, json.dumps(effect.order),
                 json.dumps(effect.rounds), now))
            return []
        raise TypeError(f"unknown effect {effect!r}")

    def _settle(self, effect: SettleRound, now: int, chunk: int) -> list[Settled]:
        """Mark the round ``settling`` with its results, then settle its first chunk."""
        db = self.db
        round_id = effect.round_id
        cur = db.execute(
            "UPDATE rounds SET state = 'settling', cards = ?, spots = ?, ended_at = ? "
            "WHERE round_id = ? AND state IN ('betting', 'paused', 'closed')",
            (json.dumps(effect.cards), json.dumps(effect.spots), now, round_id))
        if cur.rowcount == 0:
            return []  # ended before (idempotent by round id), or never opened
        # every bet of a round not settling yet is open: bets_by_round covers this
        spots_bet = {row[0] for row in db.execute(
            "SELECT DISTINCT spot FROM bets WHERE round_id = ?", (round_id,))}
        missing = spots_bet - effect.spots.keys()
        if missing:  # raising rolls the whole step back: nothing is written
            raise StepRefused(f"no result for spot(s) {sorted(missing)} of round {round_id}")
        return self._close_chunk(round_id, now, chunk)[0]

    def _refund(self, effect: CancelRound, now: int, chunk: int) -> list[Settled]:
        """Mark the round ``refunding``, then refund its first chunk of bets."""
        cur = self.db.execute(
            "UPDATE rounds SET state = 'refunding', reason = ?, closes_at = NULL, ended_at = ? "
            "WHERE round_id = ? AND state IN ('betting', 'paused', 'closed')",
            (effect.reason, now, effect.round_id))
        if cur.rowcount == 0:
            return []
        return self._close_chunk(effect.round_id, now, chunk)[0]

    def _close_chunk(self, round_id: str, now: int, chunk: int) -> tuple[list[Settled], bool]:
        """Settle or refund the next chunk of the round's open bets — whole players, in the
        order they first bet, about ``chunk`` bets — and mark the round ``settled`` /
        ``cancelled`` once none is left. Returns the chunk's messages, and whether bets
        remain. (lua/settle.lua does the same.)"""
        db = self.db
        state, spots_json, cursor, players_in_round = db.execute(
            "SELECT state, spots, cursor, players FROM rounds WHERE round_id = ?",
            (round_id,)).fetchone()
        if state not in ("settling", "refunding"):
            return [], False
        bets: list[OpenBet] = []
        taken = 0
        for (pid,) in db.execute(
                "SELECT player_id FROM round_players WHERE round_id = ? AND n >= ? ORDER BY n "
                "LIMIT ?", (round_id, cursor, chunk)).fetchall():
            bets += [OpenBet(*r) for r in db.execute(
                "SELECT seq, player_id, bet_id, spot, amount, deducted FROM bets "
                "WHERE round_id = ? AND state = 'accepted' AND player_id = ? ORDER BY seq",
                (round_id, pid))]
            taken += 1
            if len(bets) >= chunk:
                break
        cursor += taken
        hold = hold_account(round_id)
        results: list[tuple[str, int, int]] = []  # per bet: outcome, odds, returned
        if bets and state == "settling":
            plan = settle_chunk(bets, json.loads(spots_json))
            self._transfer(settle_transfer_id(plan.first), hold, "house", plan.held, "settle",
                           round_id, now)
            for pid, (first, amount) in plan.payouts.items():
                self._transfer(payout_transfer_id(first), "house", pid, amount, "payout",
                               round_id, now)
            results = plan.results
        elif bets:
            for b in bets:
                self._transfer(refund_transfer_id(b.seq), hold, b.player_id, b.deducted,
                               "refund", round_id, now)
            results = [("refund", 0, b.deducted) for b in bets]
        # each bet records its player's balance after the round (a player is in one chunk)
        players = list({b.player_id: None for b in bets})
        after = dict(db.execute(
            f"SELECT id, balance FROM accounts WHERE id IN ({','.join('?' * len(players))})",
            players).fetchall()) if players else {}
        settled = [Settled(b.player_id, b.bet_id, round_id, b.spot, b.amount, outcome, odds,
                           returned, after[b.player_id])
                   for b, (outcome, odds, returned) in zip(bets, results, strict=True)]
        bet_state = "settled" if state == "settling" else "refunded"
        db.executemany(
            "UPDATE bets SET state = ?, outcome = ?, odds = ?, returned = ?, settled_at = ?, "
            "balance_after = ? WHERE seq = ?",
            [(bet_state, s.outcome, s.odds, s.returned, now, s.balance, b.seq)
             for b, s in zip(bets, settled, strict=True)])
        more = cursor < players_in_round
        db.execute("UPDATE rounds SET cursor = ?, state = ? WHERE round_id = ?",
                   (cursor, state if more else "settled" if state == "settling" else "cancelled",
                    round_id))
        return settled, more

    async def settle_pending(self, table: str, now: int) -> tuple[list[Settled], bool]:
        return await self._run(self._settle_pending, table, now, self.settle_chunk)

    def _settle_pending(self, table: str, now: int,
                        chunk: int) -> tuple[list[Settled], bool]:
        with self._transaction():
            pending = [r[0] for r in self.db.execute(
                "SELECT round_id FROM rounds WHERE table_id = ? AND state IN "
                "('settling', 'refunding') ORDER BY opened_at LIMIT 2", (table,))]
            if not pending:
                return [], False
            settled, more = self._close_chunk(pending[0], now, chunk)
            return settled, more or len(pending) > 1

    # --- reading -----------------------------------------------------------------------

    async def load_table(self, table: str) -> bytes | None:
        return await self._run(self._load_table, table)

    def _load_table(self, table: str) -> bytes | None:
        row = self.db.execute("SELECT state FROM tables WHERE table_id = ?", (table,)).fetchone()
        return None if row is None else open_state(self.seal, table, bytes(row[0]))

    async def events_after(self, table: str, epoch: int, seq: int,
                           limit: int) -> list[bytes] | None:
        return await self._run(self._events_after, table, epoch, seq, limit)

    def _events_after(self, table: str, epoch: int, seq: int,
                      limit: int) -> list[bytes] | None:
        head = self.db.execute("SELECT epoch, seq FROM tables WHERE table_id = ?",
                               (table,)).fetchone()
        if head is None or head[0] != epoch or seq > head[1]:
            return None
        if seq == head[1]:
            return []
        if head[1] - seq > limit:
            return None
        rows = self.db.execute(
            "SELECT seq, frame FROM events WHERE table_id = ? AND epoch = ? AND seq > ? "
            "ORDER BY seq", (table, epoch, seq)).fetchall()
        if not rows or rows[0][0] != seq + 1 or len(rows) != head[1] - seq:
            return None  # trimmed: the log no longer holds every later event
        return [bytes(r[1]) for r in rows]

    async def settlements_for_rounds(self, player_id: str,
                                     round_ids: list[str]) -> list[p.BetSettled]:
        return await self._run(self._settlements_for_rounds, player_id, round_ids)

    def _settlements_for_rounds(self, player_id: str,
                                round_ids: list[str]) -> list[p.BetSettled]:
        if not round_ids:
            return []
        marks = ",".join("?" * len(round_ids))
        rows = self.db.execute(
            f"SELECT {_BET_COLUMNS} FROM bets WHERE player_id = ? AND round_id IN ({marks}) "
            f"AND state != 'accepted' ORDER BY seq", (player_id, *round_ids)).fetchall()
        return [settled_message(BetRow(*r)) for r in rows]

    async def bet_record(self, player_id: str, limit: int,
                         before: str | None) -> tuple[list[p.BetRecordEntry], str | None]:
        return await self._run(self._bet_record, player_id, limit, before)

    def _bet_record(self, player_id: str, limit: int,
                    before: str | None) -> tuple[list[p.BetRecordEntry], str | None]:
        limit = max(1, min(limit, 200))
        cursor = cursor_of(before)
        columns = ", ".join(f"b.{c}" for c in _BET_COLUMNS.split(", "))
        rows = self.db.execute(
            f"SELECT b.seq, r.shoe_id, r.round_no, r.cards, {columns} "
            f"FROM bets b JOIN rounds r USING (round_id) "
            f"WHERE b.player_id = ? AND (? IS NULL OR b.seq < ?) ORDER BY b.seq DESC LIMIT ?",
            (player_id, cursor, cursor, limit + 1)).fetchall()
        entries = [record_entry(BetRow(*row[4:]), row[1], row[2],
                                json.loads(row[3]) if row[3] else None)
                   for row in rows[:limit]]
        next_cursor = str(rows[limit - 1][0]) if len(rows) > limit else None
        return entries, next_cursor

    async def round_view(self, round_id: str) -> RoundView | None:
        return await self._run(self._round_view, round_id)

    def _round_view(self, round_id: str) -> RoundView | None:
        row = self.db.execute(
            "SELECT round_id, table_id, shoe_id, round_no, state, cards, spots, reason, "
            "opened_at, ended_at FROM rounds WHERE round_id = ?", (round_id,)).fetchone()
        if row is None:
            return None
        return RoundView(round_id=row[0], table=row[1], shoe_id=row[2], round_no=row[3],
                         state=row[4], cards=json.loads(row[5]) if row[5] else None,
                         spots=_spots(row[6]), reason=row[7], opened_at=row[8],
                         ended_at=row[9])

    async def shoe_view(self, shoe_id: str) -> ShoeRecord | None:
        return await self._run(self._shoe_view, shoe_id)

    def _shoe_view(self, shoe_id: str) -> ShoeRecord | None:
        row = self.db.execute(
            "SELECT table_id, commitment, salt, cut_at, burn_card, burned, card_order, rounds, "
            "ended_at FROM shoes WHERE shoe_id = ?", (shoe_id,)).fetchone()
        if row is None:
            return None
        taken: list[tuple[str, int]] = [(r, n) for r, n in json.loads(row[7])]
        marks = ",".join("?" * len(taken))
        stored = {r[0]: r[1:] for r in self.db.execute(
            f"SELECT round_id, round_no, state, cards FROM rounds WHERE round_id IN ({marks})",
            [r for r, _ in taken])} if taken else {}
        rounds = []
        for round_id, dealt in taken:
            round_no, state, cards = stored.get(round_id, (0, "unknown", None))
            rounds.append(ShoeRound(
                round_id=round_id, round_no=round_no, state=state, dealt=dealt,
                cards=json.loads(cards) if cards and state == "settled" else None))
        # a cancelled round's dealt cards too: the record accounts for every slot
        order = json.loads(row[6])
        rounds = publish_rounds(order, rounds)
        return ShoeRecord(shoe_id=shoe_id, table=row[0], commitment=row[1], salt=row[2],
                          cut_at=row[3], burn_card=row[4], burned=row[5],
                          order=order, rounds=rounds, ended_at=row[8])

    async def audit(self) -> AuditReport:
        return await self._run(self._audit)

    def _audit(self) -> AuditReport:
        db = self.db
        problems: list[str] = []
        total = db.execute("SELECT COALESCE(SUM(balance), 0) FROM accounts").fetchone()[0]
        if total != 0:
            problems.append(f"accounts sum to {total}, not 0")
        drift = db.execute(
            "SELECT a.id, a.balance, COALESCE(c.s, 0) - COALESCE(d.s, 0) FROM accounts a "
            "LEFT JOIN (SELECT credit id, SUM(amount) s FROM transfers GROUP BY credit) c "
            "USING (id) LEFT JOIN (SELECT debit id, SUM(amount) s FROM transfers GROUP BY debit)"
            " d USING (id) WHERE a.balance != COALESCE(c.s, 0) - COALESCE(d.s, 0)").fetchall()
        problems += [f"account {r[0]} holds {r[1]} but its transfers say {r[2]}" for r in drift]
        negative = db.execute("SELECT id, balance FROM accounts WHERE balance < 0 AND "
                              "kind IN ('player', 'hold')").fetchall()
        problems += [f"account {r[0]} is negative: {r[1]}" for r in negative]
        open_holds = db.execute(
            "SELECT a.id, a.balance FROM accounts a JOIN rounds r ON a.id = 'hold:' || r.round_id"
            " WHERE r.state IN ('settled', 'cancelled') AND a.balance != 0").fetchall()
        problems += [f"{r[0]} of an ended round still holds {r[1]}" for r in open_holds]
        stuck = db.execute(
            "SELECT COUNT(*) FROM bets b JOIN rounds r USING (round_id) "
            "WHERE r.state IN ('settled', 'cancelled') AND b.state = 'accepted'").fetchone()[0]
        if stuck:
            problems.append(f"{stuck} bets of ended rounds are neither settled nor refunded")
        deposits = -(self._balance("external") or 0)
        house = self._balance("house") or 0
        return AuditReport(ok=not problems, total=total, deposits=deposits, house=house,
                           problems=problems)

    async def identity(self, create: bool = False) -> str | None:
        return await self._run(self._identity, create)

    def _identity(self, create: bool) -> str | None:
        if create:
            self.db.execute("INSERT OR IGNORE INTO meta (key, value) VALUES ('store_id', ?)",
                            (uuid.uuid4().hex,))
        row = self.db.execute("SELECT value FROM meta WHERE key = 'store_id'").fetchone()
        return None if row is None else str(row[0])

    async def close(self) -> None:
        if self._draining is not None:
            await self._draining
        if self.process is not None:
            await self.process.close()
        else:
            await self._run(self.db.close)
        self.writer.shutdown(wait=True)


def _spots(text: str | None) -> dict[str, tuple[str, int, int]] | None:
    if not text:
        return None
    return {spot: (r[0], r[1], r[2]) for spot, r in json.loads(text).items()}


#: Rows per query when a batch's facts are read with ``IN (…)`` / ``VALUES …`` lists.
_QUERY_ROWS = 400


def _chunks(items: list[T], n: int = _QUERY_ROWS) -> Iterator[list[T]]:
    for i in range(0, len(items), n):
        yield items[i:i + n]


class _SlipBatch:
    """One group commit of slips (:meth:`SQLiteStore._take_slips`).

    A slip judged alone reads about ten rows and writes about eight statements; a batch of
    2,000 slips that way is 36,000 statements, each a round trip through the sqlite3 module
    holding the GIL the event loop needs. Here the batch reads its players' accounts, the
    rounds, the players' amounts in them, the bet ids and slip ids it names, all in a few
    queries; judges each slip in order with :func:`judge_slip` against those facts, which
    it updates as each slip is taken (a balance, a bet id, a slip id, a spot's total, a
    round's new player), so a slip sees exactly what the slips before it left; and writes
    the batch with one ``executemany`` per table.
    """

    def __init__(self, store: SQLiteStore, batch: list[tuple[SlipRequest, int]]) -> None:
        self.store = store
        self.db = store.db
        self.batch = batch

    def take(self) -> list[SlipAnswer]:
        db = self.db
        players = sorted({slip.player_id for slip, _ in self.batch})
        accounts: dict[str, list[Any]] = {}
        for chunk in _chunks(players):
            for pid, kind, balance in db.execute(
                    f"SELECT id, kind, balance FROM accounts WHERE id IN "
                    f"({','.join('?' * len(chunk))})", chunk):
                accounts[pid] = [kind, balance]
        rounds: dict[str, tuple[RoundFacts, int] | None] = {}
        for slip, _ in self.batch:
            if slip.round_id not in rounds:
                rounds[slip.round_id] = self.store._round_facts(slip.round_id)
        players_in: dict[str, int] = {rid: r[1] for rid, r in rounds.items() if r is not None}
        on_spot: dict[tuple[str, str], dict[str, int]] = {}
        on_round: dict[tuple[str, str], int] = {}
        for rid in players_in:
            pids = sorted({s.player_id for s, _ in self.batch if s.round_id == rid})
            for chunk in _chunks(pids):
                for pid, spot, amount, deducted in db.execute(
                        f"SELECT player_id, spot, SUM(amount), SUM(deducted) FROM bets "
                        f"WHERE round_id = ? AND player_id IN ({','.join('?' * len(chunk))}) "
                        f"GROUP BY player_id, spot", (rid, *chunk)):
                    on_spot.setdefault((rid, pid), {})[spot] = amount
                    on_round[(rid, pid)] = on_round.get((rid, pid), 0) + deducted
        used: dict[tuple[str, str], TakenBet] = {}
        pairs = sorted({(slip.player_id, b.bet_id) for slip, _ in self.batch
                        for b in slip.bets})
        for some in _chunks(pairs):
            for pid, *row in db.execute(
                    f"WITH q(p, b) AS (VALUES {','.join(['(?, ?)'] * len(some))}) "
                    f"SELECT bets.player_id, {_TAKEN_COLUMNS_OF_BETS} FROM q JOIN bets "
                    f"ON bets.player_id = q.p AND bets.bet_id = q.b",
                    [x for pair in some for x in pair]):
                used[(pid, row[0])] = TakenBet(*row)
        prior: dict[tuple[str, str], list[TakenBet]] = {}
        named = sorted({(slip.player_id, slip.slip_id) for slip, _ in self.batch
                        if slip.slip_id is not None})
        for names in _chunks(named):
            seqs = {seq: (pid, sid) for pid, sid, seq in db.execute(
                f"WITH q(p, s) AS (VALUES {','.join(['(?, ?)'] * len(names))}) "
                f"SELECT slips.player_id, slips.slip_id, slips.seq FROM q JOIN slips "
                f"ON slips.player_id = q.p AND slips.slip_id = q.s",
                [x for pair in names for x in pair])}
            if seqs:
                for seq, *row in db.execute(
                        f"SELECT slip_seq, {_TAKEN_COLUMNS_OF_BETS} FROM bets WHERE slip_seq "
                        f"IN ({','.join('?' * len(seqs))}) ORDER BY seq", list(seqs)):
                    prior.setdefault(seqs[seq], []).append(TakenBet(*row))
        next_seq = 1 + max(
            db.execute("SELECT COALESCE(MAX(seq), 0) FROM slips").fetchone()[0],
            (db.execute("SELECT seq FROM sqlite_sequence WHERE name = 'slips'").fetchone()
             or (0,))[0])

        answers: list[SlipAnswer] = []
        slip_rows: list[tuple[Any, ...]] = []
        bet_rows: list[tuple[Any, ...]] = []
        round_player_rows: list[tuple[str, int, str]] = []
        transfer_rows: list[tuple[Any, ...]] = []
        holds: dict[str, int] = {}
        changed: set[str] = set()
        for slip, now in self.batch:
            pid, rid = slip.player_id, slip.round_id
            account = accounts.get(pid)
            round_ = rounds.get(rid)
            key = (rid, pid)
            facts = SlipFacts(
                prior_slip=(None if slip.slip_id is None
                            else prior.get((pid, slip.slip_id))),
                used_bet_ids={b.bet_id: used[(pid, b.bet_id)] for b in slip.bets
                              if (pid, b.bet_id) in used},
                round=None if round_ is None else round_[0],
                on_spot=on_spot.get(key, {}), on_round=on_round.get(key, 0),
                is_player=account is not None and account[0] == "player",
                balance=0 if account is None else account[1])
            verdict = judge_slip(slip, now, facts)
            if not isinstance(verdict, list):
                answers.append(verdict)
                continue
            assert account is not None  # judge_slip checked it
            total = sum(verdict)
            balance = account[1] = account[1] - total
            changed.add(pid)
            seq = next_seq
            next_seq += 1
            slip_rows.append((seq, pid, slip.slip_id, rid, total, balance, now))
            if key not in on_round:  # the round's players in the order they first bet
                round_player_rows.append((rid, players_in[rid], pid))
                players_in[rid] += 1
            spots = on_spot.setdefault(key, {})
            taken = []
            for b, d in zip(slip.bets, verdict, strict=True):
                bet_rows.append((pid, b.bet_id, slip.table, rid, b.spot, b.amount, d, now,
                                 balance, seq))
                spots[b.spot] = spots.get(b.spot, 0) + b.amount
                bet = used[(pid, b.bet_id)] = TakenBet(b.bet_id, rid, b.spot, b.amount, d,
                                                       balance)
                taken.append(bet)
            on_round[key] = on_round.get(key, 0) + total
            if slip.slip_id is not None:
                prior[(pid, slip.slip_id)] = taken
            # The transfer id is the slip's row, not "player:slip_id": both are free text,
            # and "a" sending "b:c" must not be taken for "a:b" sending "c".
            hold = hold_account(rid)
            if hold == pid:
                raise AccountError(f"transfer slip:{seq} debits and credits the same "
                                   f"account {pid!r}")
            transfer_rows.append((f"slip:{seq}", pid, hold, total, "bet", rid, now))
            holds[hold] = holds.get(hold, 0) + total
            answers.append(accepted(slip, verdict, balance))
        if slip_rows:
            db.executemany("INSERT INTO slips (seq, player_id, slip_id, round_id, deducted, "
                           "balance, placed_at) VALUES (?, ?, ?, ?, ?, ?, ?)", slip_rows)
            db.executemany("INSERT INTO round_players (round_id, n, player_id) "
                           "VALUES (?, ?, ?)", round_player_rows)
            db.executemany("UPDATE rounds SET players = ? WHERE round_id = ?",
                           [(n, rid) for rid, n in players_in.items()])
            db.executemany(
                "INSERT INTO bets (player_id, bet_id, table_id, round_id, spot, amount, "
                "deducted, placed_at, balance_at_accept, state, slip_seq) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 'accepted', ?)", bet_rows)
            db.executemany("INSERT INTO transfers (id, debit, credit, amount, kind, ref, at) "
                           "VALUES (?, ?, ?, ?, ?, ?, ?)", transfer_rows)
            db.executemany("UPDATE accounts SET balance = ? WHERE id = ?",
                           [(accounts[pid][1], pid) for pid in sorted(changed)])
            db.executemany("UPDATE accounts SET balance = balance + ? WHERE id = ?",
                           [(amount, hold) for hold, amount in holds.items()])
        return answers
