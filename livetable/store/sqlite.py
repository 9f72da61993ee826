"""The SQLite store: the embedded default (stdlib ``sqlite3``, WAL mode).

One connection, used from the event loop's thread: every operation is a short transaction
that never waits on the network, so running it inline is faster than a thread hop and
keeps each bet atomic with respect to every other coroutine (nothing awaits inside a
transaction). ``synchronous=NORMAL`` in WAL mode survives a process crash (what the
recovery tests do); an OS crash may lose the last transactions, which ``FULL`` would not —
set ``LIVETABLE_SQLITE_SYNC=FULL`` for that trade.

Schema changes are migrations in :data:`MIGRATIONS`, applied in order and recorded in
``PRAGMA user_version``.
"""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import uuid
from pathlib import Path

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
from livetable.rules import BetSpot
from livetable.rules.fairness import ShoeRecord, ShoeRound
from livetable.store.base import (
    AuditReport,
    BetRequest,
    Settled,
    cursor_of,
    precheck,
    rejected,
    spot_limits,
)
from livetable.store.sealing import StateSeal, open_state, seal_state

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
]

#: How many events per table the log keeps for resume (older ones are trimmed).
DEFAULT_EVENT_RETENTION = 20_000


class SQLiteStore:
    """The :class:`~livetable.store.base.Store` contract on SQLite."""

    def __init__(self, path: str | Path, event_retention: int = DEFAULT_EVENT_RETENTION,
                 seal: StateSeal | None = None) -> None:
        self.path = str(path)
        #: Seals engine states at rest (store/sealing.py); None only in tests.
        self.seal = seal
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        self.db.execute("PRAGMA journal_mode=WAL")
        sync = os.environ.get("LIVETABLE_SQLITE_SYNC", "NORMAL").upper()
        if sync not in ("NORMAL", "FULL", "EXTRA"):
            raise ValueError(f"LIVETABLE_SQLITE_SYNC must be NORMAL, FULL or EXTRA, not {sync!r}")
        self.db.execute(f"PRAGMA synchronous={sync}")
        self.db.execute("PRAGMA foreign_keys=ON")
        self.event_retention = event_retention
        self._limits: dict[str, p.Limits] = {}  # a round's limits never change
        self._pending_bets: list[tuple[BetRequest, int,
                                       asyncio.Future[p.BetAccepted | p.BetRejected]]] = []
        self._migrate()

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
        self.db.execute("BEGIN IMMEDIATE")
        try:
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
            self.db.execute("COMMIT")
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        view = await self.player(player_id)
        assert view is not None
        return view

    async def player(self, player_id: str) -> p.PlayerView | None:
        row = self.db.execute(
            "SELECT id, name, balance FROM accounts WHERE id = ? AND kind = 'player'",
            (player_id,)).fetchone()
        return None if row is None else p.PlayerView(id=row[0], name=row[1], balance=row[2])

    async def deposit(self, transfer_id: str, player_id: str, amount: int, now: int) -> int:
        check_player_id(player_id)
        self.db.execute("BEGIN IMMEDIATE")
        try:
            if self._kind(player_id) != "player":
                raise KeyError(f"no player {player_id!r}")
            self._transfer(f"deposit:{transfer_id}", "external", player_id, amount, "deposit",
                           player_id, now)
            self.db.execute("COMMIT")
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        balance = self._balance(player_id)
        assert balance is not None
        return balance

    # --- bets ------------------------------------------------------------------------

    async def place_bet(self, bet: BetRequest, now: int) -> p.BetAccepted | p.BetRejected:
        """Take a bet. Bets that arrive together (in one turn of the event loop) share one
        transaction — group commit — each still checked and applied one after another,
        so the answers are exactly those of one transaction per bet."""
        bad = precheck(bet)
        if bad is not None:
            return bad
        loop = asyncio.get_running_loop()
        future: asyncio.Future[p.BetAccepted | p.BetRejected] = loop.create_future()
        self._pending_bets.append((bet, now, future))
        if len(self._pending_bets) == 1:
            loop.call_soon(self._take_pending_bets)
        return await future

    def _take_pending_bets(self) -> None:
        batch, self._pending_bets = self._pending_bets, []
        answers: list[p.BetAccepted | p.BetRejected] = []
        self.db.execute("BEGIN IMMEDIATE")
        try:
            answers = [self._place_bet(bet, now) for bet, now, _ in batch]
            self.db.execute("COMMIT")
        except BaseException as exc:
            self.db.execute("ROLLBACK")
            for _, _, future in batch:
                if not future.done():
                    future.set_exception(exc)
            return
        for (_, _, future), answer in zip(batch, answers, strict=True):
            if not future.done():
                future.set_result(answer)

    def _place_bet(self, bet: BetRequest, now: int) -> p.BetAccepted | p.BetRejected:
        db = self.db
        prior = db.execute(
            "SELECT round_id, spot, amount, deducted, balance_at_accept FROM bets "
            "WHERE player_id = ? AND bet_id = ?", (bet.player_id, bet.bet_id)).fetchone()
        if prior is not None:
            if (prior[0], prior[1], prior[2]) == (bet.round_id, bet.spot, bet.amount):
                return p.BetAccepted(bet_id=bet.bet_id, round_id=prior[0], spot=prior[1],
                                     amount=prior[2], deducted=prior[3], balance=prior[4])
            return rejected(bet.bet_id, "duplicate_bet_id")
        row = db.execute("SELECT table_id, state, closes_at, limits FROM rounds "
                         "WHERE round_id = ?", (bet.round_id,)).fetchone()
        if row is None or row[0] != bet.table:
            return rejected(bet.bet_id, "unknown_round")
        state, closes_at = row[1], row[2]
        limits = self._limits.get(bet.round_id)
        if limits is None:
            limits = self._limits[bet.round_id] = p.Limits(**json.loads(row[3]))
            if len(self._limits) > 1000:
                self._limits.pop(next(iter(self._limits)))
        if state == "paused":
            return rejected(bet.bet_id, "paused")
        if state != "betting" or closes_at is None or now >= closes_at:
            return rejected(bet.bet_id, "betting_closed")
        low, high = spot_limits(limits, bet.spot)
        if bet.amount < low:
            return rejected(bet.bet_id, "below_min", f"(minimum {low})")
        on_spot, on_round = db.execute(
            "SELECT COALESCE(SUM(CASE WHEN spot = ? THEN amount END), 0), "
            "COALESCE(SUM(deducted), 0) FROM bets WHERE round_id = ? AND player_id = ?",
            (bet.spot, bet.round_id, bet.player_id)).fetchone()
        if on_spot + bet.amount > high:
            return rejected(bet.bet_id, "above_max", f"(maximum {high} per spot)")
        deducted = bet.amount * BetSpot(bet.spot).deducted_multiple
        if on_round + deducted > limits.round_max:
            return rejected(bet.bet_id, "round_limit", f"(at most {limits.round_max})")
        balance = self._balance(bet.player_id)
        if balance is None or self._kind(bet.player_id) != "player":
            return rejected(bet.bet_id, "not_a_player")
        if balance < deducted:
            return rejected(bet.bet_id, "insufficient_funds",
                            f"(needs {deducted}, balance {balance})")
        balance -= deducted
        cur = db.execute(
            "INSERT INTO bets (player_id, bet_id, table_id, round_id, spot, amount, deducted, "
            "placed_at, balance_at_accept, state) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 'accepted')",
            (bet.player_id, bet.bet_id, bet.table, bet.round_id, bet.spot, bet.amount, deducted,
             now, balance))
        # The transfer id is the bet's row, not "player:bet_id": both are free text, and
        # "a" betting "b:c" must not be taken for "a:b" betting "c" (a bet without money).
        self._transfer(f"bet:{cur.lastrowid}", bet.player_id, hold_account(bet.round_id), deducted,
                       "bet", bet.round_id, now)
        return p.BetAccepted(bet_id=bet.bet_id, round_id=bet.round_id, spot=bet.spot,
                             amount=bet.amount, deducted=deducted, balance=balance)

    # --- engine steps ------------------------------------------------------------------

    async def commit_step(self, table: str, state: bytes, events: list[tuple[int, int, bytes]],
                          effects: list[Effect], now: int) -> list[Settled]:
        settled: list[Settled] = []
        self.db.execute("BEGIN IMMEDIATE")
        try:
            for effect in effects:
                settled.extend(self._apply(effect, now))
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
            self.db.execute("COMMIT")
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        return settled

    def _apply(self, effect: Effect, now: int) -> list[Settled]:
        db = self.db
        if isinstance(effect, OpenRound):
            db.execute(
                "INSERT OR IGNORE INTO rounds (round_id, table_id, shoe_id, round_no, state, "
                "closes_at, limits, opened_at) VALUES (?, ?, ?, ?, 'betting', ?, ?, ?)",
                (effect.round_id, effect.table, effect.shoe_id, effect.round_no,
                 effect.closes_at, json.dumps(_limits_dict(effect.limits)), now))
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
            db.execute("UPDATE rounds SET state = ?, closes_at = ? WHERE round_id = ? AND "
                       "state IN ('betting', 'paused', 'closed')",
                       (effect.status, effect.closes_at, effect.round_id))
            return []
        if isinstance(effect, SettleRound):
            return self._settle(effect, now)
        if isinstance(effect, CancelRound):
            return self._refund(effect, now)
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

    def _settle(self, effect: SettleRound, now: int) -> list[Settled]:
        """Settle every bet of the round in set-wise statements (one per spot), not one
        statement per bet: 100,000 bets settle in a fraction of a second.

        Ledger: the round's hold goes to the house in one transfer; each player's winnings
        come back from the house in one transfer per player. Each bet records its own
        outcome, odds and return, and the balance after the round's settlement.
        """
        db = self.db
        round_id = effect.round_id
        cur = db.execute(
            "UPDATE rounds SET state = 'settled', cards = ?, spots = ?, ended_at = ? "
            "WHERE round_id = ? AND state NOT IN ('settled', 'cancelled')",
            (json.dumps(effect.cards), json.dumps(effect.spots), now, round_id))
        if cur.rowcount == 0:
            return []  # settled before (idempotent by round id), or never opened
        spots_bet = {row[0] for row in db.execute(
            "SELECT DISTINCT spot FROM bets WHERE round_id = ? AND state = 'accepted'",
            (round_id,))}
        missing = spots_bet - effect.spots.keys()
        if missing:  # raising rolls the whole step back: nothing is written
            raise KeyError(f"no result for spot(s) {sorted(missing)} of round {round_id}")
        total_held = db.execute(
            "SELECT COALESCE(SUM(deducted), 0) FROM bets WHERE round_id = ? AND "
            "state = 'accepted'", (round_id,)).fetchone()[0]
        if total_held == 0:
            return []
        self._transfer(f"settle:{round_id}", hold_account(round_id), "house", total_held, "settle",
                       round_id, now)
        # One CASE per column maps a bet's spot to its result: two passes over the round's
        # bets in all (payouts per player, then the bets themselves).
        outcome_sql, outcome_args = _spot_case(effect.spots, 0)
        odds_sql, odds_args = _spot_case(effect.spots, 1)
        multiple_sql, multiple_args = _spot_case(effect.spots, 2)
        payouts = db.execute(
            f"SELECT player_id, SUM(amount * ({multiple_sql})) AS paid FROM bets "
            f"WHERE round_id = ? AND state = 'accepted' GROUP BY player_id HAVING paid > 0",
            (*multiple_args, round_id)).fetchall()
        db.executemany("INSERT INTO transfers (id, debit, credit, amount, kind, ref, at) "
                       "VALUES (?, 'house', ?, ?, 'payout', ?, ?)",
                       [(f"payout:{round_id}:{pid}", pid, amount, round_id, now)
                        for pid, amount in payouts])
        db.executemany("UPDATE accounts SET balance = balance + ? WHERE id = ?",
                       [(amount, pid) for pid, amount in payouts])
        db.execute("UPDATE accounts SET balance = balance - ? WHERE id = 'house'",
                   (sum(amount for _, amount in payouts),))
        db.execute(
            f"UPDATE bets SET state = 'settled', outcome = {outcome_sql}, odds = {odds_sql}, "
            f"returned = amount * ({multiple_sql}), settled_at = ?, balance_after = a.balance "
            f"FROM accounts AS a WHERE a.id = bets.player_id AND bets.round_id = ? "
            f"AND bets.state = 'accepted'",
            (*outcome_args, *odds_args, *multiple_args, now, round_id))
        rows = db.execute(
            "SELECT player_id, bet_id, spot, amount, outcome, odds, returned, balance_after "
            "FROM bets WHERE round_id = ? AND state = 'settled' ORDER BY seq",
            (round_id,)).fetchall()
        return [Settled(r[0], p.BetSettled(bet_id=r[1], round_id=round_id, spot=r[2],
                                           amount=r[3], outcome=r[4], odds=r[5],
                                           returned=r[6], balance=r[7])) for r in rows]

    def _refund(self, effect: CancelRound, now: int) -> list[Settled]:
        db = self.db
        cur = db.execute(
            "UPDATE rounds SET state = 'cancelled', reason = ?, closes_at = NULL, ended_at = ? "
            "WHERE round_id = ? AND state NOT IN ('settled', 'cancelled')",
            (effect.reason, now, effect.round_id))
        if cur.rowcount == 0:
            return []
        bets = db.execute(
            "SELECT seq, player_id, bet_id, spot, amount, deducted FROM bets "
            "WHERE round_id = ? AND state = 'accepted' ORDER BY seq", (effect.round_id,)
        ).fetchall()
        hold = hold_account(effect.round_id)
        for seq, pid, _bet_id, _spot, _amount, deducted in bets:
            self._transfer(f"refund:{seq}", hold, pid, deducted, "refund", effect.round_id,
                           now)
        # each bet records its player's balance after the round's refunds, as settlement does
        after = {pid: self._balance(pid) or 0 for pid in {b[1] for b in bets}}
        db.executemany("UPDATE bets SET state = 'refunded', outcome = 'refund', odds = 0, "
                       "returned = deducted, settled_at = ?, balance_after = ? WHERE seq = ?",
                       [(now, after[b[1]], b[0]) for b in bets])
        return [Settled(pid, p.BetSettled(
            bet_id=bet_id, round_id=effect.round_id, spot=spot, amount=amount, outcome="refund",
            odds=0, returned=deducted, balance=after[pid]))
            for _seq, pid, bet_id, spot, amount, deducted in bets]

    # --- reading -----------------------------------------------------------------------

    async def load_table(self, table: str) -> bytes | None:
        row = self.db.execute("SELECT state FROM tables WHERE table_id = ?", (table,)).fetchone()
        return None if row is None else open_state(self.seal, table, bytes(row[0]))

    async def events_after(self, table: str, epoch: int, seq: int,
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
        if not round_ids:
            return []
        marks = ",".join("?" * len(round_ids))
        rows = self.db.execute(
            f"SELECT bet_id, round_id, spot, amount, outcome, odds, returned, balance_after "
            f"FROM bets WHERE player_id = ? AND round_id IN ({marks}) AND state != 'accepted' "
            f"ORDER BY seq", (player_id, *round_ids)).fetchall()
        return [p.BetSettled(bet_id=r[0], round_id=r[1], spot=r[2], amount=r[3], outcome=r[4],
                             odds=r[5], returned=r[6], balance=r[7]) for r in rows]

    async def bet_record(self, player_id: str, limit: int,
                         before: str | None) -> tuple[list[p.BetRecordEntry], str | None]:
        limit = max(1, min(limit, 200))
        cursor = cursor_of(before)
        rows = self.db.execute(
            "SELECT b.seq, b.bet_id, b.table_id, r.shoe_id, b.round_id, r.round_no, b.spot, "
            "b.amount, b.deducted, b.placed_at, b.state, b.outcome, b.odds, b.returned, "
            "b.settled_at, r.cards, b.balance_after FROM bets b JOIN rounds r USING (round_id) "
            "WHERE b.player_id = ? AND (? IS NULL OR b.seq < ?) ORDER BY b.seq DESC LIMIT ?",
            (player_id, cursor, cursor, limit + 1)).fetchall()
        entries = []
        for row in rows[:limit]:
            cards = json.loads(row[15]) if row[15] else None
            position = BetSpot(row[6]).position.value
            returned = row[13]
            entries.append(p.BetRecordEntry(
                bet_id=row[1], table=row[2], shoe_id=row[3], round_id=row[4], round_no=row[5],
                spot=row[6], amount=row[7], deducted=row[8], placed_at=row[9], state=row[10],
                outcome=row[11], odds=row[12], returned=returned,
                net=None if returned is None else returned - row[8], settled_at=row[14],
                cards=cards[position] if cards else None,
                banker_cards=cards["BANKER"] if cards else None, balance_after=row[16]))
        next_cursor = str(rows[limit - 1][0]) if len(rows) > limit else None
        return entries, next_cursor

    async def round_view(self, round_id: str) -> dict[str, object] | None:
        row = self.db.execute(
            "SELECT round_id, table_id, shoe_id, round_no, state, cards, spots, reason, "
            "opened_at, ended_at FROM rounds WHERE round_id = ?", (round_id,)).fetchone()
        if row is None:
            return None
        return {"round_id": row[0], "table": row[1], "shoe_id": row[2], "round_no": row[3],
                "state": row[4], "cards": json.loads(row[5]) if row[5] else None,
                "spots": json.loads(row[6]) if row[6] else None, "reason": row[7],
                "opened_at": row[8], "ended_at": row[9]}

    async def shoe_view(self, shoe_id: str) -> ShoeRecord | None:
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
        return ShoeRecord(shoe_id=shoe_id, table=row[0], commitment=row[1], salt=row[2],
                          cut_at=row[3], burn_card=row[4], burned=row[5],
                          order=json.loads(row[6]), rounds=rounds, ended_at=row[8])

    async def audit(self) -> AuditReport:
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
        if create:
            self.db.execute("INSERT OR IGNORE INTO meta (key, value) VALUES ('store_id', ?)",
                            (uuid.uuid4().hex,))
        row = self.db.execute("SELECT value FROM meta WHERE key = 'store_id'").fetchone()
        return None if row is None else str(row[0])

    async def close(self) -> None:
        self.db.close()


def _spot_case(spots: dict[str, tuple[str, int, int]], column: int) -> tuple[str, list[object]]:
    """``CASE spot WHEN 'P1' THEN … END`` picking ``column`` of each spot's result."""
    args: list[object] = []
    for spot, result in spots.items():
        args += [spot, result[column]]
    return "CASE spot " + " ".join("WHEN ? THEN ?" for _ in spots) + " END", args


def _limits_dict(limits: p.Limits) -> dict[str, int]:
    return {"min": limits.min, "max": limits.max, "pair_min": limits.pair_min,
            "pair_max": limits.pair_max, "round_max": limits.round_max}
