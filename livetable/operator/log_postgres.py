"""The wallet log (:class:`~livetable.operator.log.WalletLog`) in PostgreSQL, next to the
ledger: the calls to a seamless wallet and the outbox of those still owed.

Why next to the ledger: with the PostgreSQL store the money's system of record has a
synchronous standby, and the record of what the operator's wallet was asked for — a debit
in doubt, a credit still owed — is money too: a failover that lost it would lose a player's
winnings or debit a stake twice. So the log shares the store's pool and its durability
(table ``wallet_calls``, the store's migration 2), and keeps the contract of the SQLite log
(tests/integration/test_wallet_log_pg.py runs the same tests). As there, the log never
shares a transaction with the ledger: every step that touches both is idempotent by id
instead.

A group commit, set-based (:class:`~livetable.operator.log.BatchedWalletLog`). The calls
that arrive while a batch is written go in the next transaction together, and the three
a burst is made of take one statement each for the whole batch, whatever its size: every
debit begun (one ``INSERT … ON CONFLICT DO NOTHING``, then one read of the slips that had
a debit already), every debit answered (one ``UPDATE … FROM``, a compare-and-set on
``pending`` per row), every credit or rollback delivered (one ``UPDATE … FROM``). The
rows go as one JSON parameter, as the slips' batch sends them
(:mod:`livetable.store.postgres.slips`: asyncpg checks every element of an array
parameter). Before, each debit was a transaction of its own and each answer a commit of
its own — with a synchronous standby a WAL flush and a network round trip per call, two
per seamless slip. The other calls (reads, the sweeper's) run one after another in the
same transaction.

Steps within a batch were issued concurrently (none waited for another's answer), so any
order of them is one the callers could have seen; a batch fails or commits whole.
"""

from __future__ import annotations

from typing import Any

from livetable.operator.log import BatchedWalletLog, WalletCall
from livetable.store.postgres.slips import json_rows
from livetable.store.postgres.store import PostgresStore, is_pg_outage
from livetable.store.sqlite.ledger import wallet as w
from livetable.store.sqlite.ledger.wallet import closes
from livetable.store.sqlite.ledger.wallet_totals import days_sql, totals_sql

_FIELDS, _COLUMNS = w.FIELDS, w.COLUMNS
#: How each column is read back from a row of the JSON parameter (``body``: base64, as
#: msgspec writes bytes).
_TYPES = {"amount": "bigint", "attempts": "integer", "created_at": "bigint",
          "updated_at": "bigint", "deadline": "bigint", "next_at": "bigint"}


def _column(n: int, name: str) -> str:
    if name == "body":
        return f"decode(r->>{n}, 'base64')"
    cast = _TYPES.get(name)
    return f"(r->>{n})::{cast}" if cast else f"r->>{n}"


_BEGIN = (f"INSERT INTO wallet_calls ({_COLUMNS}) SELECT "
          f"{', '.join(_column(n, name) for n, name in enumerate(_FIELDS))} "
          f"FROM jsonb_array_elements($1::jsonb) r ON CONFLICT DO NOTHING RETURNING tx_id")
#: The debits already made for the slips of a batch's debits that were not written.
_PRIOR = (f"SELECT {_COLUMNS} FROM wallet_calls WHERE method = 'debit' AND "
          f"(player_id, slip_key) IN (SELECT r->>0, r->>1 FROM jsonb_array_elements($1::jsonb) r)")
_ANSWER = """
UPDATE wallet_calls w SET state = x.r->>1, answer = x.r->>2, attempts = w.attempts + 1,
    updated_at = (x.r->>3)::bigint, closed_by = COALESCE(w.closed_by, x.r->>4)
FROM jsonb_array_elements($1::jsonb) WITH ORDINALITY x(r, i)
WHERE w.tx_id = x.r->>0 AND w.state = 'pending'
RETURNING x.i
"""
_DELIVERED = """
UPDATE wallet_calls w SET state = CASE WHEN (x.r->>1)::boolean THEN 'ok' ELSE w.state END,
    answer = x.r->>2, attempts = w.attempts + 1, next_at = (x.r->>3)::bigint,
    updated_at = (x.r->>4)::bigint
FROM jsonb_array_elements($1::jsonb) x(r)
WHERE w.tx_id = x.r->>0 AND w.state = 'queued'
"""
_INSERT = (f"INSERT INTO wallet_calls ({_COLUMNS}) VALUES "
           f"({', '.join(f'${n}' for n in range(1, len(_FIELDS) + 1))}) ON CONFLICT DO NOTHING")
#: What the sweeper reads four times a second, by index (migration 9): the pending debits
#: past a deadline, and the rounds with open debits (``wallet_open_rounds``).
_EXPIRED = "method = 'debit' AND state = 'pending' AND deadline < $1 ORDER BY n FOR UPDATE"
_OPEN = w.OPEN_DEBIT
_OPEN_ROUNDS = (f"SELECT round_id, bool_or(state = 'unknown') FROM wallet_calls WHERE {_OPEN} "
                "GROUP BY round_id ORDER BY min(created_at) LIMIT $1")
#: The steps taken one statement for the whole batch.
_SET_BASED = (w.BeginDebit, w.AnswerDebit, w.Delivered)


async def _select(con: Any, where: str, *args: Any) -> list[WalletCall]:
    return [w.call_of(r) for r in await con.fetch(
        f"SELECT {_COLUMNS} FROM wallet_calls WHERE {where}", *args)]


async def _begin_debits(con: Any, begins: list[tuple[int, w.BeginDebit]],
                        values: list[w.Value]) -> None:
    """Write every new debit; a slip debited before gets that debit back instead."""
    written = {r[0] for r in await con.fetch(
        _BEGIN, json_rows([w.values_of(step.call) for _, step in begins]))}
    others = [(i, step.call) for i, step in begins if step.call.tx_id not in written]
    if not others:
        return
    prior = {(c.player_id, c.slip_key): c for c in map(w.call_of, await con.fetch(
        _PRIOR, json_rows([[call.player_id, call.slip_key] for _, call in others])))}
    for i, call in others:
        values[i] = prior.get((call.player_id, call.slip_key))


async def _answer_debits(con: Any, answers: list[tuple[int, w.AnswerDebit]],
                         values: list[w.Value]) -> None:
    """``pending`` → each answer's state, if still pending (True where it was)."""
    rows = [[s.tx_id, s.state, s.answer, s.now, s.closed_by] for _, s in answers]
    for i, _ in answers:
        values[i] = False
    for (n,) in await con.fetch(_ANSWER, json_rows(rows)):
        values[answers[n - 1][0]] = True


async def _perform(con: Any, step: w.AnyStep) -> w.Value:
    """One of the other steps, on its own (inside the batch's transaction)."""
    match step:
        case w.DebitOf(player_id, table_id, slip_key):
            found = await _select(con, "method = 'debit' AND player_id = $1 AND "
                                       "slip_key = $2 AND table_id = $3",
                                  player_id, slip_key, table_id)
            return found[0] if found else None
        case w.ExpireDebits(before, now):
            expired = await _select(con, _EXPIRED, before)
            await con.execute(
                "UPDATE wallet_calls SET state = 'unknown', answer = 'no answer by the "
                "deadline', updated_at = $1 WHERE tx_id = ANY($2::text[]) AND "
                "state = 'pending'", now, [c.tx_id for c in expired])
            for call in expired:
                call.state = "unknown"
            return expired
        case w.Enqueue(calls, now):
            await con.executemany(_INSERT, [w.values_of(call) for call in calls])
            await con.executemany("UPDATE wallet_calls SET closed_by = $1, updated_at = $2 "
                                  "WHERE tx_id = $3 AND closed_by IS NULL",
                                  [(call.tx_id, now, t) for call in calls
                                   for t in closes(call)])
            return None
        case w.KeepDebit(tx_id, closed_by, now):
            status: str = await con.execute(
                "UPDATE wallet_calls SET closed_by = $1, updated_at = $2 WHERE tx_id = $3 "
                "AND state = 'ok' AND closed_by IS NULL", closed_by, now, tx_id)
            return status == "UPDATE 1"
        case w.OpenRounds(limit):
            return json_rows([[r, u] for r, u in await con.fetch(_OPEN_ROUNDS, limit)])
        case w.OpenDebits(limit, None):
            return await _select(con, f"{_OPEN} ORDER BY created_at, n LIMIT $1", limit)
        case w.OpenDebits(limit, rounds, unknown_of):
            return await _select(con, f"{_OPEN} AND (round_id = ANY($2::text[]) OR (state = "
                                      "'unknown' AND round_id = ANY($3::text[]))) ORDER BY "
                                      "created_at, n LIMIT $1", limit, rounds, unknown_of)
        case w.Due(now, limit):
            return await _select(con, "state = 'queued' AND next_at <= $1 ORDER BY "
                                      "next_at, n LIMIT $2", now, limit)
        case w.Calls(round_id, player_id, limit):
            return await _select(
                con, "($1::text IS NULL OR round_id = $1) AND ($2::text IS NULL OR "
                     "player_id = $2) ORDER BY created_at, n LIMIT $3",
                round_id, player_id, limit)
        case w.Backlog():
            return int(await con.fetchval(
                "SELECT count(*) FROM wallet_calls WHERE state = 'queued'"))
        case w.Totals(round_id, player_id, operator):
            return json_rows([list(r) for r in await con.fetch(
                totals_sql("postgres"), round_id, player_id, operator)])
        case w.Days(operator):
            return json_rows([list(r) for r in await con.fetch(days_sql("postgres"),
                                                               operator)])
    raise TypeError(f"not a wallet log step: {step!r}")


async def apply(con: Any, steps: list[w.AnyStep]) -> list[w.Outcome]:
    """A batch of steps on ``con``, inside its transaction: the set-based ones first, a
    statement per kind, then the others in order."""
    values: list[w.Value] = [None] * len(steps)
    begins = [(i, s) for i, s in enumerate(steps) if isinstance(s, w.BeginDebit)]
    if begins:
        await _begin_debits(con, begins, values)
    answers = [(i, s) for i, s in enumerate(steps) if isinstance(s, w.AnswerDebit)]
    if answers:
        await _answer_debits(con, answers, values)
    delivered = [[s.tx_id, s.ok, s.answer, s.next_at, s.now] for s in steps
                 if isinstance(s, w.Delivered)]
    if delivered:
        await con.execute(_DELIVERED, json_rows(delivered))
    for i, step in enumerate(steps):
        if not isinstance(step, _SET_BASED):
            values[i] = await _perform(con, step)
    return [w.Outcome(value) for value in values]


class PostgresWalletLog(BatchedWalletLog):
    """The wallet log on the PostgreSQL store's connections, a batch a transaction."""

    def __init__(self, store: PostgresStore) -> None:
        super().__init__()
        self.store = store

    async def _run(self, steps: list[w.AnyStep]) -> list[w.Outcome]:
        return await self.store.pool.run(lambda con: apply(con, steps))

    def _is_outage(self, exc: BaseException) -> bool:
        return is_pg_outage(exc)

    async def close(self) -> None:
        """Only the batch being written: the store's pool is the store's."""
        await self._finish()
