"""Moving a Redis deployment's money to PostgreSQL: ``livetable migrate-store``.

Scale-out used to keep its ledger in Redis (the RedisStore and its Lua scripts, retired);
PostgreSQL is now the one scale-out store for money. The command reads the old layout
directly (:mod:`livetable.migration.redis_ledger`, which needs nothing of the old store) and
writes it into a :class:`~livetable.store.postgres.PostgresStore` in **one transaction**,
so a run either copies everything or nothing.

Why it refuses rather than copies, before writing anything:

* a round not ended (``betting`` … ``settling``): its stakes sit in the round's hold and
  its bets are owed a settlement only the engine can make; the operator lets it settle
  (runs the engine on Redis until it does) and migrates between rounds;
* a seamless wallet debit not closed by a credit or a rollback: money in doubt at the
  operator, which only the sweeper resolves;
* an engine still holding a table's lease: it could open a round while the copy is made;
* a Redis without a store identity (a wiped or foreign Redis), or whose accounts do not
  sum to 0 (run the audit first): no copy can be checked against it;
* a PostgreSQL that already holds other money for these accounts, other tables, rounds or
  a ledger of another identity: two ledgers are never merged by a tool.

How money is copied. The PostgreSQL ledger moves money only by transfers applied once by
id, whose replay must give every balance (its audit proves it). The transfers that came
from outside — deposits (``deposit:<id>``, ``open:<player>``) and withdrawals
(``withdraw:<id>``) — are copied as they are, with their ids: a deposit or a withdrawal
re-sent after the move is still applied once, and a withdrawal ``against`` a deposit still
finds it. Everything the player did at the tables (stakes, payouts, refunds: thousands of
transfers through round holds) is one transfer per player, between the house and the
player, ``migrate:<identity>:<player>``, of what play left: so every player's balance,
the house's and the deposits' are Redis's to the unit, the total is conserved, and the
audit holds. No round being open, every hold is empty and nothing else is owed.

Why the identity is copied. A credit's ``tx_id`` is a hash of the installation (the
store's identity), the round, the player and the currency
(:func:`livetable.operator.log.credit_tx_id`); round ids are ``<table>.<shoe>.<round>``
and count on from the engine's state. So the identity, the engine states (sealed, copied as
they are: a seal binds a state to its table, not to a store), the rounds and the shoes are
copied together: the tables go on with the next round id, under the same installation,
and a credit id is never made twice; the operator sees one installation before and after.

The bets come too, with their seqs and the slips they were taken in: a player's Bet
Record goes on across the move, and a slip sent again is answered as it first was. What
stays in Redis is the journal of play transfers — history, summed per player above: the
summary counts them, and the operator keeps the Redis's RDB snapshot
(docs/operations.md). Operators' sessions (players launch again), the chat and the leases
are not the ledger's and start afresh. Running it again after a success writes nothing
and says so (a marker in ``meta``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

import msgspec
from redis.asyncio import Redis

from livetable.accounts import GUEST_PREFIX, HOLD_PREFIX
from livetable.migration.redis_ledger import (
    DEFAULT_PREFIX,
    Bet,
    Layout,
    RedisLedger,
    Round,
    Shoe,
    Transfer,
    WalletRow,
    bet_batches,
    named_slips,
    read_redis,
)
from livetable.store.postgres import PostgresStore, ledger

#: ``meta`` key: the identity of the Redis ledger copied into this database.
MARKER = "migrated_from_redis"
#: An advisory lock: two runs against one database take turns.
MIGRATE_LOCK = 0x6D696772  # "migr"
ENDED = ("settled", "cancelled")
BET_COLUMNS = ["seq", *Bet.__struct_fields__, "slip_seq"]
SLIP_COLUMNS = ["seq", "player_id", "slip_id", "round_id", "deducted", "balance", "placed_at"]


class MigrationRefused(Exception):
    """Nothing was written: the reasons, one a line."""

    def __init__(self, reasons: list[str]) -> None:
        super().__init__("\n".join(reasons))
        self.reasons = reasons


def refusals(source: RedisLedger) -> list[str]:
    """Why this Redis cannot be copied now ([] = it can)."""
    out = []
    if source.identity is None:
        out.append("the Redis holds no store identity (lt:{ledger}:identity): a wiped Redis "
                   "or not a livetable ledger; a copy could not be told from another")
    out += [f"table {table}'s lease is held by {owner}: an engine still runs on this Redis. "
            "Stop every engine and gateway (a lease lapses within seconds once its engine "
            "stops), then run this again" for table, owner in sorted(source.engines.items())]
    for r in source.rounds:
        if r.state not in ENDED:
            out.append(f"table {r.table_id}: round {r.round_id} is {r.state}, not settled: "
                       "its stakes are held until it ends. Run the engine on Redis until the "
                       "round settles (or cancel it), stop it, then run this again")
    open_rounds = {HOLD_PREFIX + r.round_id for r in source.rounds if r.state not in ENDED}
    out += [f"{account} holds {held} of an ended round: run the audit"
            for account, held in sorted(source.others.items())
            if account.startswith(HOLD_PREFIX) and held and account not in open_rounds]
    total = sum(p.balance for p in source.players) + sum(source.others.values())
    if total:
        out.append(f"the Redis ledger's accounts sum to {total}, not 0: run the audit")
    out += [f"wallet debit {c.tx_id} of {c.player_id} (round {c.round_id}) is {c.state} and "
            "not closed by a credit or a rollback: run the engine on Redis until its "
            "sweeper closes it" for c in source.wallet
            if c.method == "debit" and c.closed_by is None]
    return out


# --- into PostgreSQL -----------------------------------------------------------------------


async def _pg_refusals(con: Any, source: RedisLedger, moves: list[Transfer]) -> list[str]:
    """Why this PostgreSQL cannot take the copy ([] = it can): checked in the copy's own
    transaction, under its lock, before anything is written."""
    out = []
    found = await con.fetchval("SELECT value FROM meta WHERE key = 'store_id'")
    busy = await con.fetchval(
        "SELECT EXISTS (SELECT 1 FROM transfers) OR EXISTS (SELECT 1 FROM rounds) OR "
        "EXISTS (SELECT 1 FROM wallet_calls) OR EXISTS (SELECT 1 FROM tables)")
    if found not in (None, source.identity) and busy:
        out.append(f"PostgreSQL is the ledger of installation {found} (the Redis's is "
                   f"{source.identity}) and already holds transfers, rounds, tables or wallet "
                   "calls of its own: two ledgers are never merged")
    if await con.fetchval("SELECT EXISTS (SELECT 1 FROM bets)"):
        out.append("PostgreSQL already holds bets of its own: the Bet Record is copied only "
                   "into a ledger without any")
    redis_has = {p.id: p.balance for p in source.players} | {"house": source.balance("house")}
    for account, kind, balance in await con.fetch(
            "SELECT id, kind, balance FROM accounts WHERE id = ANY($1::text[]) AND "
            "(balance != 0 OR kind != CASE WHEN id = 'house' THEN 'house' ELSE 'player' END)",
            list(redis_has)):
        out.append(f"PostgreSQL already holds {balance} for {account} ({kind}; Redis holds "
                   f"{redis_has[account]}): not the same money")
    out += _already(await con.fetch("SELECT id FROM transfers WHERE id = ANY($1::text[])",
                                    [t.id for t in moves]), "transfers")
    out += _already(await con.fetch("SELECT table_id FROM tables WHERE table_id = "
                                    "ANY($1::text[])", [t.table for t in source.tables]),
                    "tables' engine states")
    out += _already(await con.fetch("SELECT round_id FROM rounds WHERE round_id = "
                                    "ANY($1::text[])", [r.round_id for r in source.rounds]),
                    "rounds")
    out += _already(await con.fetch("SELECT shoe_id FROM shoes WHERE shoe_id = ANY($1::text[])",
                                    [s.shoe_id for s in source.shoes]), "shoes")
    out += _already(await con.fetch("SELECT tx_id FROM wallet_calls WHERE tx_id = "
                                    "ANY($1::text[])", [c.tx_id for c in source.wallet]),
                    "wallet calls")
    return out


def _already(rows: Iterable[Any], what: str) -> list[str]:
    ids = sorted(str(r[0]) for r in rows)
    if not ids:
        return []
    shown = ", ".join(ids[:5]) + (f" and {len(ids) - 5} more" if len(ids) > 5 else "")
    return [f"PostgreSQL already has {what} of the same ids: {shown}"]


async def _copy(con: Any, source: RedisLedger, moves: list[Transfer]) -> None:
    """Write the copy (inside the transaction that checked it could be made)."""
    await con.execute("INSERT INTO meta (key, value) VALUES ('store_id', $1) ON CONFLICT (key) "
                      "DO UPDATE SET value = excluded.value", source.identity)
    await con.execute("INSERT INTO meta (key, value) VALUES ($1, $2)", MARKER, source.identity)
    await con.executemany(
        "INSERT INTO accounts (id, kind, name, balance, created_at) VALUES ($1, 'player', $2, "
        "0, $3) ON CONFLICT (id) DO UPDATE SET name = excluded.name, "
        "created_at = excluded.created_at",
        [(p.id, p.name, p.created_at) for p in source.players])
    if moves:  # the store's own ledger path: double entry, each once by its id
        await ledger.transfer_all(con, [msgspec.structs.astuple(t) for t in moves])
    await con.executemany(
        f"INSERT INTO rounds ({', '.join(Round.__struct_fields__)}) VALUES "
        f"({', '.join(f'${n}' for n in range(1, len(Round.__struct_fields__) + 1))})",
        [msgspec.structs.astuple(r) for r in source.rounds])
    await con.executemany(
        f"INSERT INTO shoes ({', '.join(Shoe.__struct_fields__)}) VALUES "
        f"({', '.join(f'${n}' for n in range(1, len(Shoe.__struct_fields__) + 1))})",
        [msgspec.structs.astuple(s) for s in source.shoes])
    for table in source.tables:
        await con.execute("INSERT INTO tables (table_id, state, epoch, seq, snapshot) "
                          "VALUES ($1, $2, $3, $4, $5)", table.table, table.state, table.epoch,
                          table.seq, table.snapshot)
        await con.executemany("INSERT INTO events (table_id, epoch, seq, frame) VALUES "
                              "($1, $2, $3, $4)", [(table.table, *e) for e in table.events])
    columns = WalletRow.__struct_fields__  # in the order the calls were made: ``n`` counts
    await con.executemany(
        f"INSERT INTO wallet_calls ({', '.join(columns)}) VALUES "
        f"({', '.join(f'${n}' for n in range(1, len(columns) + 1))})",
        [msgspec.structs.astuple(c) for c in source.wallet])


async def _copy_bets(con: Any, redis: Redis, keys: Layout, source: RedisLedger) -> int:
    """The Bet Record: every bet with its seq (the Record's order, and its cursor), and the
    slips they were taken in (a slip sent again is answered as it first was); then the
    sequences past them. Read in batches inside the copy's transaction."""
    named = await named_slips(redis, keys, [p.id for p in source.players])
    slips: dict[object, list[Any]] = {}  # (player, slip_id), or a place_bet's seq -> row
    count = top = 0
    async for batch in bet_batches(redis, keys):
        rows = []
        for seq, bet in batch:
            key: object = named.get(seq, seq)
            slip = slips.get(key)
            if slip is None:
                slip = slips[key] = [len(slips) + 1, bet.player_id,
                                     key[1] if isinstance(key, tuple) else None, bet.round_id,
                                     0, bet.balance_at_accept, bet.placed_at]
            slip[4] += bet.deducted
            rows.append((seq, *msgspec.structs.astuple(bet), slip[0]))
            top = max(top, seq)
        await con.copy_records_to_table("bets", records=rows, columns=BET_COLUMNS)
        count += len(rows)
    await con.copy_records_to_table("slips", records=[tuple(s) for s in slips.values()],
                                    columns=SLIP_COLUMNS)
    for sequence, last in (("bet_seqs", top), ("slip_seqs", len(slips))):
        if last:
            await con.execute(f"SELECT setval('{sequence}', $1)", last)
    return count


async def copy(store: PostgresStore, redis: Redis, keys: Layout, source: RedisLedger,
               now: int) -> int | None:
    """Copy ``source`` (read from ``redis``) into ``store`` in one transaction: the number
    of bets copied, or None if this Redis was copied here before (nothing written). Raises
    :class:`MigrationRefused`."""
    reasons = refusals(source)
    if reasons:
        raise MigrationRefused(reasons)
    moves = source.transfers(now)

    async def work(con: Any) -> int | None:
        await con.execute("SELECT pg_advisory_xact_lock($1)", MIGRATE_LOCK)
        if await con.fetchval("SELECT value FROM meta WHERE key = $1",
                              MARKER) == source.identity:
            return None
        reasons = await _pg_refusals(con, source, moves)
        if reasons:
            raise MigrationRefused(reasons)
        await _copy(con, source, moves)
        return await _copy_bets(con, redis, keys, source)

    return await store.pool.run(work)


# --- the check, and what the operator is told -----------------------------------------------


async def check(store: PostgresStore, source: RedisLedger, bets: int | None) -> list[str]:
    """Every balance of the Redis in PostgreSQL, the totals, the bets copied (``bets``,
    None: by an earlier run) and PostgreSQL's audit."""
    wanted = {p.id: p.balance for p in source.players}
    wanted |= {a: source.balance(a) for a in ("house", "external")}
    async with store.pool.connection() as con:
        found = dict(await con.fetch("SELECT id, balance FROM accounts WHERE id = "
                                     "ANY($1::text[])", list(wanted)))
    problems = [f"{a}: PostgreSQL holds {found.get(a)}, Redis {b}"
                for a, b in wanted.items() if found.get(a) != b]
    players = sum(b for a, b in wanted.items() if a not in ("house", "external"))
    in_pg = sum(found.get(p.id) or 0 for p in source.players)
    if in_pg != players:
        problems.append(f"players hold {in_pg} in PostgreSQL, {players} in Redis")
    if bets is not None and bets != source.bets:
        problems.append(f"{bets} bets copied, Redis holds {source.bets}")
    audit = await store.audit()
    return problems + [f"PostgreSQL's audit: {p}" for p in audit.problems]


def summary(source: RedisLedger, bets: int | None, problems: list[str]) -> list[str]:
    """What the operator is told: what was copied (``bets`` None: by an earlier run), what
    was not, and the check."""
    players = source.players
    guests = sum(p.id.startswith(GUEST_PREFIX) for p in players)
    operators = sum("~" in p.id for p in players)
    owed = [c for c in source.wallet if c.state == "queued"]
    currencies = Counter(c.currency for c in owed)
    lines = [
        (f"copied the Redis ledger {source.identity} into PostgreSQL" if bets is not None
         else f"the Redis ledger {source.identity} was copied here before: nothing written"),
        f"players: {len(players)} (guests {guests}, of operators {operators}), holding "
        f"{sum(p.balance for p in players)}; house {source.balance('house')}; deposits "
        f"{-source.balance('external')} (the ledger's one currency)",
        f"transfers: {len(source.outside)} deposits and withdrawals as they were, one "
        f"'migrate:' transfer per player for what play left",
        f"bets: {source.bets} (the Bet Record, with their slips); rounds "
        f"{len(source.rounds)}, shoes {len(source.shoes)}, tables {len(source.tables)} "
        f"(engine state and {sum(len(t.events) for t in source.tables)} events), store "
        f"identity {source.identity}",
        f"wallet calls: {len(source.wallet)}, of which {len(owed)} still owed to the operator "
        f"(delivered from PostgreSQL): "
        + (", ".join(f"{c} {n}" for c, n in sorted(currencies.items())) or "none"),
        f"not copied: {source.journal - len(source.outside)} transfers of play (stakes, "
        "payouts, refunds: summed per player above) stay in Redis, keep its RDB snapshot; "
        "operators' sessions, chat and leases start afresh",
    ]
    if problems:
        lines += ["CHECK FAILED:", *problems] if bets is not None else [
            "CHECK FAILED: PostgreSQL and Redis differ since the copy (engines ran on one "
            "of them after it):", *problems]
    else:
        lines.append("checked: every balance in PostgreSQL equals Redis's, totals equal, "
                     "every bet copied, PostgreSQL's audit passes")
    return lines


async def migrate_store(redis_url: str, postgres_url: str, now: int, *,
                        prefix: str = DEFAULT_PREFIX) -> tuple[bool, list[str]]:
    """The command: (ok, the lines to print). Raises :class:`MigrationRefused`."""
    redis = Redis.from_url(redis_url)
    store = PostgresStore(postgres_url, max_connections=2)
    keys = Layout(prefix)
    try:
        source = await read_redis(redis, keys)
        bets = await copy(store, redis, keys, source, now)
        problems = await check(store, source, bets)
    finally:
        await redis.aclose()
        await store.close()
    return not problems, summary(source, bets, problems)
