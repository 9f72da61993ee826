"""A group commit of slips on PostgreSQL: one transaction, a handful of statements.

A burst of slips arrives together; taking each in a transaction of its own costs a round
trip per statement per slip and a commit (a WAL flush, and with a synchronous standby a
network round trip) per slip. So the slips waiting together are taken as one batch
(:func:`livetable.store.slip_queue.take_in_batches`), in one transaction, whatever its size:

0. bound the transaction by the slips' answer deadline, on the server, and check that the
   primary has its synchronous standby, in one statement (:func:`bound`);
1. lock the rounds the batch names, then its players' accounts, each in id order (every
   writer locks in that order — rounds, then accounts by id — so two gateways' batches,
   or a batch and a settlement chunk, wait for each other and never deadlock). The round's
   lock orders a batch against the step that closes or settles it: a batch that comes
   after the settling step sees the round ``settling`` and refuses the slip, one before it
   is in the hold that the step settles. A seamless slip's mirror deposit (the operator's
   debit entering the ledger, ``external`` → the player) is made here, under the same
   locks, once by its id, in one statement for the whole batch — not a transaction of its
   own per slip before the batch, which had made a seamless slip cost two commits;
2. read the facts every slip is judged by — its player's amounts in its round, the bet ids
   and slip ids it names — in three queries over the batch's keys (one JSON parameter);
3. judge each slip in order with :func:`~livetable.betting.slips.judge_slip`, keeping the
   facts current in memory as each is taken, so a slip sees what the slips before it left
   (the answers are exactly those of one transaction per slip);
4. write everything the batch took in one statement (data-modifying CTEs over the rows,
   sent as one JSON document).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import asyncpg
import msgspec

from livetable import protocol as p
from livetable.accounts import AccountError, hold_account
from livetable.betting.slips import (
    RoundFacts,
    SlipAnswer,
    SlipFacts,
    SlipRequest,
    TakenBet,
    accepted,
    judge_slip,
    precheck,
)
from livetable.store.base import StoreUnavailable
from livetable.store.postgres.pool import ATTEMPTS, Pool, retry_after
from livetable.store.postgres.replication import QUERY, Replication, problem_of, promise_of

Batch = list[tuple[SlipRequest, int]]

#: Seconds within which a slip is answered: a stalled PostgreSQL left players without an
#: answer for 30-60 s (asyncpg's query and connect timeouts) and acknowledged bets 59-61 s
#: late; now ``unavailable`` after this, and the batch commits by then or not at all.
ANSWER_WITHIN = 5.0


class NoSynchronousStandby(StoreUnavailable):
    """The primary does not promise that a commit is on a standby before it returns (see
    :mod:`.replication`): nothing of the batch was written; its players resend."""

_WRITE = """
WITH d AS (SELECT $1::jsonb AS j),
s AS (
    INSERT INTO slips (seq, player_id, slip_id, round_id, deducted, balance, placed_at)
    SELECT (r->>0)::bigint, r->>1, r->>2, r->>3, (r->>4)::bigint, (r->>5)::bigint,
           (r->>6)::bigint FROM d, jsonb_array_elements(d.j->0) r
), b AS (
    INSERT INTO bets (seq, player_id, bet_id, table_id, round_id, spot, amount, deducted,
                      placed_at, balance_at_accept, state, slip_seq)
    SELECT (r->>0)::bigint, r->>1, r->>2, r->>3, r->>4, r->>5, (r->>6)::bigint,
           (r->>7)::bigint, (r->>8)::bigint, (r->>9)::bigint, 'accepted', (r->>10)::bigint
    FROM d, jsonb_array_elements(d.j->1) r
), rp AS (
    INSERT INTO round_players (round_id, n, player_id)
    SELECT r->>0, (r->>1)::integer, r->>2 FROM d, jsonb_array_elements(d.j->2) r
), ro AS (
    UPDATE rounds SET players = (x->>1)::integer, bets = rounds.bets + (x->>2)::integer
    FROM d, jsonb_array_elements(d.j->3) x WHERE rounds.round_id = x->>0
), tr AS (
    INSERT INTO transfers (id, debit, credit, amount, kind, ref, at)
    SELECT r->>0, r->>1, r->>2, (r->>3)::bigint, 'bet', r->>4, (r->>5)::bigint
    FROM d, jsonb_array_elements(d.j->4) r
)
UPDATE accounts SET balance = accounts.balance + (x->>1)::bigint
FROM d, jsonb_array_elements(d.j->5) x WHERE accounts.id = x->>0
"""

#: The batch's mirror deposits, each once by its transfer id; the balances they move.
_DEPOSIT = """
WITH d AS (SELECT $1::jsonb AS j),
ins AS (
    INSERT INTO transfers (id, debit, credit, amount, kind, ref, at)
    SELECT r->>0, 'external', r->>1, (r->>2)::bigint, 'deposit', r->>1, (r->>3)::bigint
    FROM d, jsonb_array_elements(d.j) r
    ON CONFLICT (id) DO NOTHING RETURNING credit, amount
), moved AS (
    SELECT credit AS id, sum(amount)::bigint AS delta FROM ins GROUP BY credit
    UNION ALL SELECT 'external', -sum(amount)::bigint FROM ins HAVING count(*) > 0
)
UPDATE accounts SET balance = accounts.balance + moved.delta FROM moved
WHERE accounts.id = moved.id RETURNING accounts.id, accounts.balance
"""

#: The first statement of a batch's transaction: the server itself bounds the batch by its
#: answer deadline — each statement and each wait for the next (a stalled network holding
#: the round's row lock) at most the time left, and the commit by the deadline on its own
#: clock (``livetable.answer_by``, checked at COMMIT by migration 5's trigger), so a batch
#: whose players were answered ``unavailable`` cannot be taken after they were.
_DEADLINE = ("set_config('statement_timeout', $1, true), "
             "set_config('idle_in_transaction_session_timeout', $1, true), "
             "set_config('livetable.answer_by', (floor(extract(epoch FROM clock_timestamp()) "
             "* 1000) + $2::bigint)::bigint::text, true)")

_TAKEN = "bets.bet_id, bets.round_id, bets.spot, bets.amount, bets.deducted, " \
         "bets.balance_at_accept"


async def bound(con: Any, within_ms: int, replication: Replication) -> None:
    """Open a batch's transaction: its deadline ``within_ms`` from now on the server (see
    :data:`_DEADLINE`) and, under ``sync`` replication, the primary's promise checked in
    the same statement (:mod:`.replication`): a batch the standby would not have is
    refused as an outage before any slip is judged, and its players resend."""
    if replication == "none":
        await con.execute(f"SELECT {_DEADLINE}", str(within_ms), within_ms)
        return
    row = await con.fetchrow(f"SELECT d.*, r.* FROM (SELECT {_DEADLINE}) d, ({QUERY}) r",
                             str(within_ms), within_ms)
    found = problem_of(replication, promise_of(row[3:]))
    if found is not None:
        raise NoSynchronousStandby(found)


class SlipTaker:
    """The slip queue's batches (:class:`~livetable.store.slip_queue.SlipQueue`), each in a
    transaction of its own, bounded by the answer deadline (:func:`bound`), judged and
    written (:class:`SlipBatch`), and run again if the server rolled it back as a
    deadlock's or a conflict's victim (the pool's one policy, :func:`.pool.retry_after`).
    Its own transaction, not :meth:`.pool.Pool.run`: the bound needs the time left of the
    batch's deadline, which runs from before the connection was had."""

    def __init__(self, pool: Pool, replication: Replication, answer_within: float) -> None:
        self.pool = pool
        self.replication: Replication = replication
        self.answer_within = answer_within
        #: round -> its limits, read once (a round's limits never change)
        self.limits: dict[str, p.Limits] = {}

    async def __call__(self, batch: Batch) -> list[SlipAnswer]:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.answer_within
        try:
            async with asyncio.timeout_at(deadline):
                for attempt in range(ATTEMPTS):
                    try:
                        async with self.pool.transaction() as con:
                            left = deadline - loop.time()
                            await bound(con, max(1, int(left * 1000)), self.replication)
                            return await SlipBatch(con, batch, self.limits).take()
                    except asyncpg.PostgresError as exc:
                        await retry_after(exc, attempt)
                raise AssertionError("unreachable")
        finally:
            if len(self.limits) > 1000:
                self.limits.clear()


def json_rows(rows: Any) -> str:
    """Rows as one JSON parameter (see :meth:`SlipBatch._write` for why not arrays)."""
    return msgspec.json.encode(rows).decode()


class SlipBatch:
    """The facts of one batch, read under its locks, then judged and written."""

    def __init__(self, con: Any, batch: Batch, limits: dict[str, p.Limits]) -> None:
        self.con = con
        self.batch = batch
        self.limits = limits
        self.rounds: dict[str, RoundFacts] = {}
        self.players_in: dict[str, int] = {}
        self.accounts: dict[str, list[Any]] = {}
        self.on_spot: dict[tuple[str, str], dict[str, int]] = {}
        self.on_round: dict[tuple[str, str], int] = {}
        self.used: dict[tuple[str, str], TakenBet] = {}
        self.prior: dict[tuple[str, str], list[TakenBet]] = {}
        self.had_bet: set[tuple[str, str]] = set()

    async def take(self) -> list[SlipAnswer]:
        """Each slip's answer. A slip its own shape refuses
        (:func:`~livetable.betting.slips.precheck`) is answered first, and nothing is
        locked, read or written for it (PostgreSQL's text holds no NUL, for one)."""
        shapes = [precheck(slip) for slip, _ in self.batch]
        self.batch = [entry for entry, bad in zip(self.batch, shapes, strict=True)
                      if bad is None]
        if not self.batch:
            return [bad for bad in shapes if bad is not None]
        await self._lock_and_read()
        taken = iter(await self._judge_and_write())
        return [next(taken) if bad is None else bad for bad in shapes]

    async def _lock_and_read(self) -> None:
        con, batch = self.con, self.batch
        round_ids = sorted({slip.round_id for slip, _ in batch})
        for row in await con.fetch(
                "SELECT round_id, table_id, state, closes_at, limits, players FROM rounds "
                "WHERE round_id = ANY($1::text[]) ORDER BY round_id FOR UPDATE", round_ids):
            limits = self.limits.get(row[0])
            if limits is None:
                limits = self.limits[row[0]] = p.Limits(**json.loads(row[4]))
            self.rounds[row[0]] = RoundFacts(table=row[1], state=row[2], closes_at=row[3],
                                             limits=limits)
            self.players_in[row[0]] = row[5]
        players = sorted({slip.player_id for slip, _ in batch})
        for pid, kind, balance in await con.fetch(
                "SELECT id, kind, balance FROM accounts WHERE id = ANY($1::text[]) "
                "ORDER BY id FOR UPDATE", players):
            self.accounts[pid] = [kind, balance]
        if any(slip.deposit is not None for slip, _ in batch):
            # ``external``'s row is taken last, after the players', as every other move
            # out of it takes it (a deposit, a withdrawal: the player first)
            await self._deposit()
        pairs = sorted({(slip.round_id, slip.player_id) for slip, _ in batch
                        if slip.round_id in self.rounds})
        for rid, pid, spot, amount, deducted in await con.fetch(
                "SELECT b.round_id, b.player_id, b.spot, sum(b.amount)::bigint, "
                "sum(b.deducted)::bigint FROM jsonb_array_elements($1::jsonb) q "
                "JOIN bets b ON b.round_id = q->>0 AND b.player_id = q->>1 GROUP BY 1, 2, 3",
                json_rows(pairs)):
            self.on_spot.setdefault((rid, pid), {})[spot] = amount
            self.on_round[(rid, pid)] = self.on_round.get((rid, pid), 0) + deducted
        bet_ids = sorted({(slip.player_id, b.bet_id) for slip, _ in batch for b in slip.bets})
        for pid, *row in await con.fetch(
                f"SELECT bets.player_id, {_TAKEN} FROM jsonb_array_elements($1::jsonb) q "
                f"JOIN bets ON bets.player_id = q->>0 AND bets.bet_id = q->>1",
                json_rows(bet_ids)):
            self.used[(pid, row[0])] = TakenBet(*row)
        self.had_bet = set(self.on_round)  # (round, player) pairs in the round before
        named = sorted({(slip.player_id, slip.slip_id) for slip, _ in batch
                        if slip.slip_id is not None})
        if named:
            for pid, sid, *row in await con.fetch(
                    f"SELECT s.player_id, s.slip_id, {_TAKEN} FROM jsonb_array_elements("
                    f"$1::jsonb) q JOIN slips s ON s.player_id = q->>0 AND s.slip_id = q->>1 "
                    f"JOIN bets ON bets.slip_seq = s.seq ORDER BY bets.seq",
                    json_rows(named)):
                self.prior.setdefault((pid, sid), []).append(TakenBet(*row))

    async def _deposit(self) -> None:
        """The seamless slips' mirror deposits, before any slip is judged (as the SQLite
        ledger makes them: :func:`livetable.store.sqlite.ledger.slips.take_slips`): to player
        accounts only, each once by its id (a re-send, or a second gateway, finds it
        made)."""
        rows: dict[str, tuple[str, str, int, int]] = {}
        for slip, _ in self.batch:
            deposit, account = slip.deposit, self.accounts.get(slip.player_id)
            if deposit is not None and deposit.amount > 0 and account is not None \
                    and account[0] == "player":
                tid = f"deposit:{deposit.transfer_id}"
                rows[tid] = (tid, slip.player_id, deposit.amount, deposit.at)
        if rows:
            # ``external``'s row locked first: an UPDATE that has to wait for a row another
            # transaction changed rechecks it, and PostgreSQL's recheck of this statement's
            # join (under the store's planner settings) dropped it — the player credited,
            # ``external`` not debited (tests/integration/test_pg_store.py). Locked, the
            # statement never waits.
            await self.con.execute("SELECT 1 FROM accounts WHERE id = 'external' FOR UPDATE")
            for account_id, balance in await self.con.fetch(
                    _DEPOSIT, json_rows(list(rows.values()))):
                if account_id in self.accounts:
                    self.accounts[account_id][1] = balance

    def _facts(self, slip: SlipRequest) -> SlipFacts:
        pid, key = slip.player_id, (slip.round_id, slip.player_id)
        account = self.accounts.get(pid)
        return SlipFacts(
            prior_slip=None if slip.slip_id is None else self.prior.get((pid, slip.slip_id)),
            used_bet_ids={b.bet_id: self.used[(pid, b.bet_id)] for b in slip.bets
                          if (pid, b.bet_id) in self.used},
            round=self.rounds.get(slip.round_id),
            on_spot=self.on_spot.get(key, {}), on_round=self.on_round.get(key, 0),
            is_player=account is not None and account[0] == "player",
            balance=0 if account is None else account[1])

    async def _judge_and_write(self) -> list[SlipAnswer]:
        answers: list[SlipAnswer] = []
        taken: list[tuple[SlipRequest, int, list[int], int]] = []
        for slip, now in self.batch:
            verdict = judge_slip(slip, now, self._facts(slip))
            if not isinstance(verdict, list):
                answers.append(verdict)
                continue
            account = self.accounts[slip.player_id]  # judge_slip checked it is a player
            account[1] -= sum(verdict)
            self._remember(slip, verdict, account[1])
            taken.append((slip, now, verdict, account[1]))
            answers.append(accepted(slip, verdict, account[1]))
        if taken:
            await self._write(taken)
        return answers

    def _remember(self, slip: SlipRequest, verdict: list[int], balance: int) -> None:
        """What the next slips of the batch must see of this one."""
        pid, rid = slip.player_id, slip.round_id
        key = (rid, pid)
        spots = self.on_spot.setdefault(key, {})
        bets = []
        for b, d in zip(slip.bets, verdict, strict=True):
            spots[b.spot] = spots.get(b.spot, 0) + b.amount
            bet = self.used[(pid, b.bet_id)] = TakenBet(b.bet_id, rid, b.spot, b.amount, d,
                                                        balance)
            bets.append(bet)
        self.on_round[key] = self.on_round.get(key, 0) + sum(verdict)
        if slip.slip_id is not None:
            self.prior[(pid, slip.slip_id)] = bets

    async def _write(self, taken: list[tuple[SlipRequest, int, list[int], int]]) -> None:
        """Everything the batch took, in one statement. Its rows go as one JSON document
        (``jsonb_array_elements``), not as arrays: asyncpg checks every element of an
        array parameter against the collections ABCs, about 50 checks a bet, which cost
        more of the event loop's CPU than the rest of the batch (cProfile)."""
        n_bets = sum(len(slip.bets) for slip, _, _, _ in taken)
        slip_seqs, bet_seqs = await self.con.fetchrow(
            "SELECT (SELECT array_agg(nextval('slip_seqs')) FROM generate_series(1, $1)), "
            "(SELECT array_agg(nextval('bet_seqs')) FROM generate_series(1, $2))",
            len(taken), n_bets)
        slips: list[tuple[Any, ...]] = []
        bets: list[tuple[Any, ...]] = []
        joined: list[tuple[str, int, str]] = []
        transfers: list[tuple[Any, ...]] = []
        deltas: dict[str, int] = {}
        added: dict[str, int] = {}
        seen = set(self.had_bet)
        next_bet = iter(sorted(bet_seqs))
        for (slip, now, verdict, balance), seq in zip(taken, sorted(slip_seqs), strict=True):
            pid, rid, total = slip.player_id, slip.round_id, sum(verdict)
            slips.append((seq, pid, slip.slip_id, rid, total, balance, now))
            bets += [(next(next_bet), pid, b.bet_id, slip.table, rid, b.spot, b.amount, d, now,
                      balance, seq) for b, d in zip(slip.bets, verdict, strict=True)]
            if (rid, pid) not in seen:  # the round's players in the order they first bet
                seen.add((rid, pid))
                joined.append((rid, self.players_in[rid], pid))
                self.players_in[rid] += 1
            added[rid] = added.get(rid, 0) + len(slip.bets)
            # The transfer id is the slip's row, not "player:slip_id": both are free text.
            hold = hold_account(rid)
            if hold == pid:
                raise AccountError(f"transfer slip:{seq} debits and credits the same "
                                   f"account {pid!r}")
            transfers.append((f"slip:{seq}", pid, hold, total, rid, now))
            deltas[pid] = deltas.get(pid, 0) - total
            deltas[hold] = deltas.get(hold, 0) + total
        rounds = [(rid, self.players_in[rid], n) for rid, n in sorted(added.items())]
        await self.con.execute(_WRITE, json_rows(
            [slips, bets, joined, rounds, transfers, sorted(deltas.items())]))
