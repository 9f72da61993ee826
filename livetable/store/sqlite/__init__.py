"""The SQLite store: the embedded default (stdlib ``sqlite3``, WAL mode).

The ledger itself — the connection, every statement, the migrations, the one way money
moves — is :class:`~livetable.store.sqlite.ledger.core.Ledger` (store/sqlite/ledger/), synchronous
and
unaware of who runs it. This module is the :class:`~livetable.store.base.Store` the
server uses: each operation becomes a typed call (store/sqlite/ledger/calls.py) run on the
ledger's one writer (store/sqlite/ledger_writer.py), so the event loop never waits on the
disk or on a long query — a Bet Record read or a chunk of settlement delays no connection
of the process. The writer is a thread of this process holding the ledger, or a child
process holding its own (store/sqlite/writer.py; what ``livetable serve`` uses,
``LIVETABLE_SQLITE_WRITER``). Either way it runs one call at a time, which keeps each slip
atomic with respect to every other operation.

Slips that arrive while the writer is busy wait together in the slip queue, which hands
each batch down to the writer: one transaction (group commit, store/sqlite/ledger/slips.py),
each slip still judged and applied one after another, so the answers are exactly
those of one transaction per slip.
"""

from __future__ import annotations

import sqlite3
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Literal, TypeVar

from livetable import protocol as p
from livetable.accounts import check_player_id
from livetable.betting.sessions import SessionRecord
from livetable.betting.slips import (
    Rejection,
    SlipRequest,
    precheck,
)
from livetable.betting.tips import TipAnswer, TipRequest
from livetable.engine.effects import Effect, SettleRound
from livetable.rules.fairness import ShoeRecord
from livetable.store.base import (
    AuditReport,
    Head,
    Settled,
    StoreUnavailable,
)
from livetable.store.bets import SETTLE_CHUNK, BetSpread, RoundView, Withdrawal
from livetable.store.sealing import StateSeal
from livetable.store.slip_queue import SlipQueue
from livetable.store.sqlite.ledger import calls as c
from livetable.store.sqlite.ledger.core import DEFAULT_EVENT_RETENTION, Ledger
from livetable.store.sqlite.ledger.schema import check_synchronous, is_sqlite_outage
from livetable.store.sqlite.ledger.slips import MAX_SLIPS_PER_TRANSACTION
from livetable.store.sqlite.ledger_writer import LedgerWriter
from livetable.store.sqlite.writer import WriterOptions, WriterProcess

__all__ = ["DEFAULT_EVENT_RETENTION", "MAX_SLIPS_PER_TRANSACTION", "SQLiteStore",
           "SQLiteWriter", "check_synchronous", "is_sqlite_outage"]

A = TypeVar("A")

#: Where the store's one writer runs: a thread of this process, or a child process of its
#: own (store/sqlite/writer.py; what ``livetable serve`` uses, ``LIVETABLE_SQLITE_WRITER``).
SQLiteWriter = Literal["thread", "process"]


class SQLiteStore:
    """The :class:`~livetable.store.base.Store` contract on SQLite."""

    def __init__(self, path: str | Path, event_retention: int = DEFAULT_EVENT_RETENTION,
                 seal: StateSeal | None = None,
                 settle_chunk: int = SETTLE_CHUNK, synchronous: str = "NORMAL",
                 writer: SQLiteWriter = "thread") -> None:
        self.path = str(path)
        #: Seals engine states at rest (store/sealing.py); None only in tests.
        self.seal = seal
        #: The writer in a child process (``writer="process"``, store/sqlite/writer.py): then
        #: this object opens no database, and every call runs in the child.
        self.process: WriterProcess | None = None
        #: The ledger, when the writer is a thread of this process.
        self.ledger: Ledger | None = None
        if writer == "process":
            self.process = WriterProcess(WriterOptions(
                self.path, event_retention, None if seal is None else seal.master,
                check_synchronous(synchronous)))
        else:
            self.ledger = Ledger(self.path, event_retention, seal, synchronous)
        self.event_retention = event_retention
        #: Bets settled per call of :meth:`settle_pending` (and in the settling step).
        self.settle_chunk = settle_chunk
        #: The writer thread (when the ledger is this process's).
        self.writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="livetable-sqlite")
        #: Where every call runs, the slips' batches too (handed down by the queue).
        self.on_writer = LedgerWriter(self.ledger, self.process, self.writer)
        # two batches in flight to a writer process: it takes the next while this
        # process reads the answers of the last (store/sqlite/writer.py)
        self.slips = SlipQueue(self.on_writer.take_slips, MAX_SLIPS_PER_TRANSACTION,
                               in_flight=1 if self.process is None else 2)
        #: table -> its head after the last step this store wrote (see out_of_step)
        self._left: dict[str, Head] = {}

    @property
    def db(self) -> sqlite3.Connection:
        """The connection (the writer's; tests may use it between two operations)."""
        if self.ledger is None:
            raise RuntimeError("this SQLite store's database is open in its writer process")
        return self.ledger.db

    @property
    def outage(self) -> str | None:
        """Why the last write failed as an outage, until one that changed the ledger
        succeeds (:attr:`LedgerWriter.outage`): what readiness asks."""
        return self.on_writer.outage

    async def _run(self, call: c.Call[A]) -> A:
        """Run ``call`` on the writer (:meth:`LedgerWriter.run`): every operation does."""
        return await self.on_writer.run(call)

    # --- accounts --------------------------------------------------------------------

    async def ensure_player(self, player_id: str, name: str, initial_balance: int,
                            now: int) -> p.PlayerView:
        check_player_id(player_id)
        return await self._run(c.EnsurePlayer(player_id, name, initial_balance, now))

    async def player(self, player_id: str) -> p.PlayerView | None:
        return await self._run(c.ReadPlayer(player_id))

    async def deposit(self, transfer_id: str, player_id: str, amount: int, now: int) -> int:
        check_player_id(player_id)
        return await self._run(c.Deposit(transfer_id, player_id, amount, now))

    async def withdraw(self, transfer_id: str, player_id: str, amount: int, now: int, *,
                       against: str | None = None) -> int | None:
        """Move ``amount`` from the player to ``external`` once by ``transfer_id`` (see
        :meth:`livetable.store.base.Store.withdraw`)."""
        check_player_id(player_id)
        return await self._run(c.Withdraw(transfer_id, player_id, amount, now, against))

    async def withdraw_many(self, moves: list[Withdrawal], now: int) -> list[str | None]:
        for move in moves:
            check_player_id(move.player_id)
        return await self._run(c.WithdrawMany(moves, now))

    # --- slips -----------------------------------------------------------------------

    async def place_slip(self, slip: SlipRequest, now: int) -> p.SlipAccepted | Rejection:
        """Take a slip. Slips that arrive while the writer is busy wait for one another
        and share the next transaction (group commit), where each is judged: its shape,
        then against what the batch read (store/sqlite/ledger/slips.py)."""
        try:
            return await self.slips.place(slip, now)
        except StoreUnavailable:
            bad = precheck(slip)  # refused by its own shape, whether the store is out or not
            if bad is None:
                raise
            return bad

    async def place_tip(self, tip: TipRequest, now: int) -> TipAnswer:
        return await self._run(c.PlaceTip(tip, now))

    async def tip_record(self, player_id: str, before: str | None,
                         since: int | None) -> list[p.TipRecordEntry]:
        return await self._run(c.TipRecord(player_id, before, since))

    # --- engine steps ------------------------------------------------------------------

    async def commit_step(self, table: str, state: bytes, events: list[tuple[int, int, bytes]],
                          effects: list[Effect], now: int, *,
                          snapshot: bytes = b"") -> list[Settled]:
        # ``snapshot`` is for gateways of other processes (PostgreSQL): the embedded gateway
        # runs beside its engine.
        if any(isinstance(effect, SettleRound) for effect in effects):
            await self.slips.answered()  # slips that came before it go first
        left = self._left.pop(table, None)  # unknown until this call answers
        settled = await self._run(c.CommitStep(table, state, events, effects, now,
                                               self.settle_chunk, left))
        if events:
            self._left[table] = (events[-1][0], events[-1][1])
        elif left is not None:
            self._left[table] = left
        return settled

    async def settle_pending(self, table: str, now: int) -> tuple[list[Settled], bool]:
        return await self._run(c.SettlePending(table, now, self.settle_chunk))

    # --- reading -----------------------------------------------------------------------

    async def load_table(self, table: str) -> bytes | None:
        return await self._run(c.LoadTable(table))

    async def load_snapshot(self, table: str) -> tuple[int, int, bytes] | None:
        """The table's head and public snapshot (what the Redis bus catches a gateway up
        from). The embedded store keeps no snapshot of its own: it is the engine state's,
        opened here, in the one process that holds the shoe key anyway."""
        from livetable.engine import TableEngine

        state = await self.load_table(table)
        if state is None:
            return None
        engine = TableEngine.from_bytes(state)
        return engine.state.epoch, engine.state.seq, p.encode(engine.snapshot())

    async def events_after(self, table: str, epoch: int, seq: int,
                           limit: int) -> list[bytes] | None:
        return await self._run(c.EventsAfter(table, epoch, seq, limit))

    async def settlements_for_rounds(self, player_id: str,
                                     round_ids: list[str]) -> list[p.BetSettled]:
        return await self._run(c.SettlementsForRounds(player_id, round_ids))

    async def round_settlements(self, round_id: str) -> list[tuple[str, p.BetSettled]]:
        return await self._run(c.RoundSettlements(round_id))

    async def bet_record(self, player_id: str, limit: int,
                         before: str | None) -> tuple[list[p.BetRecordEntry], str | None]:
        return await self._run(c.BetRecord(player_id, limit, before))

    async def bet_spread(self, round_id: str) -> BetSpread:
        return await self._run(c.ReadBetSpread(round_id))

    async def round_view(self, round_id: str) -> RoundView | None:
        return await self._run(c.ReadRound(round_id))

    async def shoe_view(self, shoe_id: str) -> ShoeRecord | None:
        return await self._run(c.ReadShoe(shoe_id))

    async def audit(self) -> AuditReport:
        return await self._run(c.Audit())

    async def identity(self, create: bool = False) -> str | None:
        """The store's identity; raises :class:`StoreUnavailable` while writes fail as an
        outage (:attr:`outage`: a full disk), though reads would work — the store cannot
        take a bet, so readiness (which asks this) says why."""
        if self.outage is not None and not create:
            raise StoreUnavailable(self.outage)
        return await self._run(c.Identity(create))

    # --- operators' sessions -------------------------------------------------------------

    async def open_session(self, record: SessionRecord) -> None:
        await self._run(c.OpenSession(record))

    async def session(self, session_id: str) -> SessionRecord | None:
        return await self._run(c.ReadSession(session_id))

    async def end_session(self, session_id: str, reason: str,
                          now: int) -> SessionRecord | None:
        return await self._run(c.EndSession(session_id, reason, now))

    async def count_session(self, session_id: str, round_id: str | None, staked: int,
                            returned: int) -> SessionRecord | None:
        return await self._run(c.CountSession(session_id, round_id, staked, returned))

    async def reality_checked(self, session_id: str, now: int) -> SessionRecord | None:
        return await self._run(c.RealityChecked(session_id, now))

    async def first_launch(self, operator_id: str, request_id: str, now: int,
                           until: int) -> bool:
        return await self._run(c.FirstLaunch(operator_id, request_id, now, until))

    async def close(self) -> None:
        await self.slips.drained()
        await self.on_writer.close()
