"""The PostgreSQL store: the :class:`~livetable.store.base.Store` contract on asyncpg.

Connections: one asyncpg pool per process, from a libpq URL. A multi-host URL with
``target_session_attrs=read-write`` connects to whichever host takes writes, so after a
failover the pool's next connections reach the promoted standby; connections to the lost
primary surface as :class:`~livetable.store.base.StoreUnavailable` and are dropped. asyncpg
was chosen by measurement over psycopg 3 (docs/benchmarks.md, "PostgreSQL driver").

Durability is the server's: with ``synchronous_commit = on`` and a synchronous standby a
commit returns once the standby has its WAL, so an acknowledged bet is on two machines
before its ``bet_accepted`` leaves; the store checks that promise (:mod:`.replication`) and
bounds every slip's answer (:func:`.slips.bound`). Slips are in :mod:`.slips` (group
commit), steps and settlement in :mod:`.steps`, tips in :mod:`.tips`, the schema in
:mod:`.schema`, outages in :mod:`.outages`; a deadlock's victim is run again.
"""
from __future__ import annotations

import asyncio
import re
import uuid
from typing import Any

from livetable import protocol as p
from livetable.accounts import AccountError, check_player_id
from livetable.betting.sessions import SessionRecord
from livetable.betting.slips import (
    Rejection,
    SlipRequest,
    precheck,
)
from livetable.betting.tips import TipAnswer, TipRequest
from livetable.engine.effects import CancelRound, Effect, SettleRound
from livetable.rules.fairness import ShoeRecord
from livetable.store.base import (
    AuditReport,
    InsufficientBalance,
    Settled,
    StoreUnavailable,
    UnknownPlayer,
    cursor_of,
    events_read,
    events_wanted,
)
from livetable.store.bets import SETTLE_CHUNK, BetSpread, RoundView, Withdrawal
from livetable.store.postgres import ledger, reads, replication, sessions, steps, tips
from livetable.store.postgres.outages import (
    is_pg_outage as is_pg_outage,  # the store's own word for it
)
from livetable.store.postgres.pool import Pool
from livetable.store.postgres.replication import Replication
from livetable.store.postgres.slips import ANSWER_WITHIN, SlipTaker
from livetable.store.sealing import StateSeal, open_state, seal_state
from livetable.store.slip_queue import SlipQueue

#: How many events per table the log keeps for resume (older ones are trimmed).
DEFAULT_EVENT_RETENTION = 20_000
#: Slips taken in one transaction at most.
MAX_SLIPS_PER_TRANSACTION = 2_000
#: Batches of slips in flight at once (each its own transaction and connection).
BATCHES_IN_FLIGHT = 2
class PostgresStore:
    """The :class:`~livetable.store.base.Store` contract on PostgreSQL.

    ``fence_tokens``: table -> our fencing token, issued by :meth:`claim` when this process
    takes the table's lease; every step and settlement chunk of that table carries it
    (see :mod:`.steps`)."""

    def __init__(self, url: str, *, schema: str | None = None,
                 event_retention: int = DEFAULT_EVENT_RETENTION,
                 seal: StateSeal | None = None, settle_chunk: int = SETTLE_CHUNK,
                 max_connections: int = 16, replication: Replication = "sync",
                 answer_within: float = ANSWER_WITHIN) -> None:
        if schema is not None and not re.fullmatch(r"[a-z_][a-z0-9_]{0,62}", schema):
            raise ValueError(f"not a schema name: {schema!r}")
        self.url = url
        self.schema = schema
        self.event_retention = event_retention
        self.seal = seal
        #: Bets settled per transaction of :meth:`settle_pending` (and the settling step).
        self.settle_chunk = settle_chunk
        self.max_connections = max_connections
        self.replication: Replication = replication  # sync: bets wait for a standby
        self.answer_within = answer_within
        self.fence_tokens: dict[str, int] = {}
        #: table -> the head this process last loaded or wrote (see steps.check_head).
        self.heads: dict[str, tuple[int, int]] = {}
        #: The connections: the one door of every query (outages surface there), shared
        #: with the operator's wallet log and the Redis migration.
        self.pool = Pool(url, schema, max_connections)
        self.slips = SlipQueue(SlipTaker(self.pool, replication, answer_within),
                               MAX_SLIPS_PER_TRANSACTION, in_flight=BATCHES_IN_FLIGHT)

    async def open(self) -> None:
        """Connect and migrate now (a bad URL fails early); :func:`.replication.at_start`."""
        async with self.pool.connection() as con:
            await replication.at_start(con, self.replication)

    async def probe(self, within: float) -> tuple[float | None, str | None]:
        """Readiness: see :func:`.replication.probe`."""
        async with self.pool.connection() as con:
            return await replication.probe(con, self.replication, within)

    # --- accounts --------------------------------------------------------------------

    async def ensure_player(self, player_id: str, name: str, initial_balance: int,
                            now: int) -> p.PlayerView:
        check_player_id(player_id)

        async def work(con: Any) -> p.PlayerView:
            kind = await con.fetchval(
                "INSERT INTO accounts (id, kind, name, balance, created_at) VALUES "
                "($1, 'player', $2, 0, $3) ON CONFLICT (id) DO NOTHING RETURNING kind",
                player_id, name, now)
            if kind is not None:
                await ledger.transfer(con, f"open:{player_id}", "external", player_id,
                                initial_balance, "deposit", player_id, now)
            elif await ledger.kind(con, player_id) != "player":
                raise AccountError(f"{player_id!r} is not a player account")
            elif name:  # a new name only: a hello is not a write (the standby confirms it)
                await con.execute("UPDATE accounts SET name = $1 WHERE id = $2 AND name IS "
                                  "DISTINCT FROM $1", name, player_id)
            row = await con.fetchrow("SELECT name, balance FROM accounts WHERE id = $1",
                                     player_id)
            return p.PlayerView(id=player_id, name=row[0], balance=row[1])

        return await self.pool.run(work)

    async def player(self, player_id: str) -> p.PlayerView | None:
        async with self.pool.connection() as con:
            row = await con.fetchrow("SELECT name, balance FROM accounts WHERE id = $1 AND "
                                     "kind = 'player'", player_id)
        return None if row is None else p.PlayerView(id=player_id, name=row[0], balance=row[1])

    async def deposit(self, transfer_id: str, player_id: str, amount: int, now: int) -> int:
        check_player_id(player_id)

        async def work(con: Any) -> int:
            if await ledger.kind(con, player_id, lock=True) != "player":
                raise UnknownPlayer(f"no player {player_id!r}")
            await ledger.transfer(con, f"deposit:{transfer_id}", "external", player_id, amount,
                            "deposit", player_id, now)
            return int(await con.fetchval("SELECT balance FROM accounts WHERE id = $1",
                                          player_id))

        return await self.pool.run(work)

    async def withdraw(self, transfer_id: str, player_id: str, amount: int, now: int, *,
                       against: str | None = None) -> int | None:
        """See :meth:`livetable.store.base.Store.withdraw`."""
        check_player_id(player_id)

        async def work(con: Any) -> int | None:
            if not await ledger.withdraw(
                    con, Withdrawal(transfer_id, player_id, amount, against), now):
                return None
            return int(await con.fetchval("SELECT balance FROM accounts WHERE id = $1",
                                          player_id))

        return await self.pool.run(work)

    async def withdraw_many(self, moves: list[Withdrawal], now: int) -> list[str | None]:
        """See :meth:`livetable.store.base.Store.withdraw_many`: one transaction, its
        players locked in the order of their ids (as every other writer locks them)."""
        for move in moves:
            check_player_id(move.player_id)

        async def work(con: Any) -> list[str | None]:
            out: dict[int, str | None] = {}
            for i in sorted(range(len(moves)), key=lambda i: moves[i].player_id):
                try:
                    await ledger.withdraw(con, moves[i], now)
                    out[i] = None
                except (InsufficientBalance, UnknownPlayer) as exc:  # before any write
                    out[i] = f"{type(exc).__name__}: {exc}"
            return [out[i] for i in range(len(moves))]

        return await self.pool.run(work)

    # --- slips -----------------------------------------------------------------------

    async def place_slip(self, slip: SlipRequest, now: int) -> p.SlipAccepted | Rejection:
        """Take a slip; slips that arrive together share a transaction (group commit),
        where each is judged: its shape, then against what the batch read
        (:meth:`.slips.SlipBatch.take`)."""
        # a seamless slip's mirror deposit is made in the batch's transaction, before its
        # bets are judged (SlipBatch._deposit)
        try:
            async with asyncio.timeout(self.answer_within):
                return await self.slips.place(slip, now)
        except (TimeoutError, StoreUnavailable) as exc:
            bad = precheck(slip)  # refused by its own shape, whether the store is out or not
            if bad is not None:
                return bad
            if isinstance(exc, TimeoutError):
                raise StoreUnavailable(f"no answer within {self.answer_within:g} s") from exc
            raise

    async def place_tip(self, tip: TipRequest, now: int) -> TipAnswer:
        within = max(1, int(self.answer_within * 1000))
        return await self.pool.run(
            lambda con: tips.place_tip(con, tip, now, within, self.replication))

    async def tip_record(self, player_id: str, before: str | None,
                         since: int | None) -> list[p.TipRecordEntry]:
        async with self.pool.connection() as con:
            return await tips.tip_record(con, player_id, cursor_of(before), since)

    # --- engine steps ------------------------------------------------------------------

    async def commit_step(self, table: str, state: bytes, events: list[tuple[int, int, bytes]],
                          effects: list[Effect], now: int, *,
                          snapshot: bytes = b"") -> list[Settled]:
        if any(isinstance(effect, SettleRound | CancelRound) for effect in effects):
            await self.slips.answered()  # slips that came before it go first
        token = self.fence_tokens.get(table, 0)
        sealed = seal_state(self.seal, table, state)

        async def work(con: Any) -> tuple[list[Settled], tuple[int, int] | None]:
            await steps.check_head(con, table, token, self.heads.get(table), events)
            settled: list[Settled] = []
            for effect in effects:
                settled += await steps.apply(con, effect, now, self.settle_chunk)
            return settled, await steps.write_head(con, table, sealed, events,
                                                   self.event_retention, snapshot)

        try:
            settled, head = await self.pool.run(work)
        except BaseException:
            self.heads.pop(table, None)  # unknown now: the next load tells
            raise
        if head is not None:
            self.heads[table] = head
        return settled

    async def load_snapshot(self, table: str) -> tuple[int, int, bytes] | None:
        """The table's head ``(epoch, seq)`` and public snapshot as of its last step: what
        a gateway catches up from (it holds no shoe key)."""
        async with self.pool.connection() as con:
            row = await con.fetchrow("SELECT epoch, seq, snapshot FROM tables "
                                     "WHERE table_id = $1", table)
        if row is None or row[2] is None:
            return None
        return int(row[0]), int(row[1]), bytes(row[2])

    async def settle_pending(self, table: str, now: int) -> tuple[list[Settled], bool]:
        """The next chunk of the oldest round of ``table`` still settling or refunding."""
        token = self.fence_tokens.get(table, 0)

        async def work(con: Any) -> tuple[list[Settled], bool]:
            await steps.check_fence(con, table, token)
            pending = [r[0] for r in await con.fetch(
                "SELECT round_id FROM rounds WHERE table_id = $1 AND state IN ('settling', "
                "'refunding') ORDER BY opened_at LIMIT 2", table)]
            if not pending:
                return [], False
            settled, more = await steps.close_chunk(con, pending[0], now, self.settle_chunk)
            return settled, more or len(pending) > 1

        return await self.pool.run(work)

    async def unpublished_rounds(self, table: str) -> list[str]:
        """The rounds of ``table`` whose results may not all have reached the bus."""
        async with self.pool.connection() as con:
            return await steps.unpublished_rounds(con, table)

    async def mark_published(self, table: str) -> None:
        """Every result of the ended rounds of ``table`` reached the bus."""
        token = self.fence_tokens.get(table, 0)
        await self.pool.run(lambda con: steps.mark_published(con, table, token))

    async def claim(self, table: str) -> int:
        """Take ``table`` for this process: the database issues the next fencing token,
        which this store's steps of the table carry from now on; the steps of every older
        holder are refused from now on (:class:`~livetable.store.base.FenceRefused`)."""
        token = await self.pool.run(lambda con: steps.claim(con, table))
        self.fence_tokens[table] = token
        self.heads.pop(table, None)  # the new holder loads the table before it writes
        return token

    # --- reading -----------------------------------------------------------------------

    async def load_table(self, table: str) -> bytes | None:
        async with self.pool.connection() as con:
            row = await con.fetchrow("SELECT state, epoch, seq FROM tables WHERE table_id = $1",
                                     table)
        if row is None:
            self.heads.pop(table, None)
            return None
        self.heads[table] = (row[1], row[2])
        return open_state(self.seal, table, bytes(row[0]))

    async def events_after(self, table: str, epoch: int, seq: int,
                           limit: int) -> list[bytes] | None:
        async with self.pool.connection() as con, con.transaction(isolation="repeatable_read"):
            head = await con.fetchrow("SELECT epoch, seq FROM tables WHERE table_id = $1",
                                      table)
            wanted = events_wanted(head, epoch, seq, limit)
            if not wanted:
                return None if wanted is None else []
            rows = await con.fetch("SELECT seq, frame FROM events WHERE table_id = $1 AND "
                                   "epoch = $2 AND seq > $3 AND seq <= $4 ORDER BY seq",
                                   table, epoch, seq, head[1])
        return events_read(rows, seq, wanted)

    async def settlements_for_rounds(self, player_id: str,
                                     round_ids: list[str]) -> list[p.BetSettled]:
        if not round_ids:
            return []
        async with self.pool.connection() as con:
            return await reads.settlements_for_rounds(con, player_id, round_ids)

    async def round_settlements(self, round_id: str) -> list[tuple[str, p.BetSettled]]:
        async with self.pool.connection() as con:
            return await reads.round_settlements(con, round_id)

    async def bet_record(self, player_id: str, limit: int,
                         before: str | None) -> tuple[list[p.BetRecordEntry], str | None]:
        async with self.pool.connection() as con:
            return await reads.bet_record(con, player_id, max(1, min(limit, 200)),
                                          cursor_of(before))

    async def bet_spread(self, round_id: str) -> BetSpread:
        where = "FROM bets WHERE round_id = $1 AND state != 'refunded'"
        async with self.pool.connection() as con:
            rows = await con.fetch(f"SELECT spot, COUNT(DISTINCT player_id), SUM(amount) "
                                   f"{where} GROUP BY spot", round_id)
            players = await con.fetchval(f"SELECT COUNT(DISTINCT player_id) {where}",
                                         round_id)
        return {r[0]: (int(r[1]), int(r[2])) for r in rows}, int(players)

    async def round_view(self, round_id: str) -> RoundView | None:
        async with self.pool.connection() as con:
            return await reads.round_view(con, round_id)

    async def shoe_view(self, shoe_id: str) -> ShoeRecord | None:
        async with self.pool.connection() as con:
            return await reads.shoe_view(con, shoe_id)

    async def audit(self) -> AuditReport:
        """Prove the ledger on one snapshot (a repeatable-read transaction)."""
        async with self.pool.connection() as con, con.transaction(isolation="repeatable_read",
                                                              readonly=True):
            await con.execute("SET LOCAL enable_hashjoin = on; SET LOCAL enable_mergejoin = on")
            return await ledger.audit(con)

    async def identity(self, create: bool = False) -> str | None:
        async with self.pool.connection() as con:
            if create:
                await con.execute("INSERT INTO meta (key, value) VALUES ('store_id', $1) "
                                  "ON CONFLICT DO NOTHING", uuid.uuid4().hex)
            value = await con.fetchval("SELECT value FROM meta WHERE key = 'store_id'")
        return None if value is None else str(value)

    # --- operators' sessions (sessions.py) ---------------------------------------------

    async def open_session(self, record: SessionRecord) -> None:
        async def work(con: Any) -> None:
            await sessions.open_session(con, record)

        await self.pool.run(work)

    async def session(self, session_id: str) -> SessionRecord | None:
        async with self.pool.connection() as con:
            return await sessions.session(con, session_id)

    async def end_session(self, session_id: str, reason: str,
                          now: int) -> SessionRecord | None:
        async def work(con: Any) -> SessionRecord | None:
            return await sessions.end_session(con, session_id, reason, now)

        return await self.pool.run(work)

    async def count_session(self, session_id: str, round_id: str | None, staked: int,
                            returned: int) -> SessionRecord | None:
        async def work(con: Any) -> SessionRecord | None:
            return await sessions.count(con, session_id, round_id, staked, returned)

        return await self.pool.run(work)

    async def reality_checked(self, session_id: str, now: int) -> SessionRecord | None:
        async def work(con: Any) -> SessionRecord | None:
            return await sessions.reality_checked(con, session_id, now)

        return await self.pool.run(work)

    async def first_launch(self, operator_id: str, request_id: str, now: int,
                           until: int) -> bool:
        async def work(con: Any) -> bool:
            return await sessions.first_launch(con, operator_id, request_id, now, until)

        return await self.pool.run(work)

    async def close(self) -> None:
        await self.slips.drained()
        await self.pool.close()

    def terminate(self) -> None:
        """Cut every connection now (a stop that could not wait for :meth:`close`)."""
        self.pool.terminate()
