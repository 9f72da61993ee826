"""An engine step on PostgreSQL, and settlement chunk by chunk — the database as the judge.

Every step runs in one transaction that first locks the table's row (``tables``), and is
written only if all of these hold there, under that lock:

* **fencing**: the step's token (issued by the database when the engine took the table's
  lease, :func:`claim`; 0 without a lease) is not older than the newest one issued for the
  table (``fences``). Another engine holds the table: the step is refused
  (:class:`~livetable.store.base.FenceRefused`) and the older engine stops.
* **it follows on**: its first event is the head + 1 (same epoch; a new, later epoch starts
  at 1), and the head is where this engine last left it (what it loaded or wrote). A store
  behind what the engine wrote (a failover that lost the tail), or a step already stored,
  is refused (:class:`~livetable.store.base.OutOfStep`): the engine reloads from the store.
* **the round is where the step expects it**: betting is set only on a round that is
  open, and only a round the store knows is settled or cancelled (:class:`OutOfStep`). A
  round already ended or ending is not ended again — the step is a no-op there, as the
  retry of a step that cannot know it was stored needs: paid once, refunded never after.

A settling step marks the round ``settling`` and settles its first chunk; the rest go
one chunk per transaction (:func:`close_chunk`), the round's row locked and its cursor
moved in the chunk's transaction, so that a crash or a failover between two chunks loses
nothing and settles nothing twice. A chunk is whole players, in the order they first bet
(one payout per player and round), sized from the round's bets per player.
"""

from __future__ import annotations

import json
from typing import Any, assert_never

from livetable.accounts import AccountError, hold_account
from livetable.betting.slips import closed_deadline
from livetable.engine.effects import (
    CancelRound,
    Effect,
    OpenRound,
    RevealShoe,
    SetBetting,
    SettleRound,
)
from livetable.store.base import FenceRefused, OutOfStep, Settled, StepRefused
from livetable.store.bets import (
    OpenBet,
    limits_dict,
    payout_transfer_id,
    refund_transfer_id,
    settle_chunk,
    settle_transfer_id,
    shoe_rounds_json,
)

OPEN = ("betting", "paused", "closed")

Head = tuple[int, int]


async def check_fence(con: Any, table: str, token: int) -> None:
    """Refuse a step of ``table`` whose token is older than the newest one issued. The row
    is read ``FOR SHARE``: a claim of a newer token waits for the steps under way, and the
    steps after it see the newer token."""
    newest = await con.fetchval("SELECT token FROM fences WHERE table_id = $1 FOR SHARE",
                                table)
    if newest is not None and newest > token:
        raise FenceRefused(f"table {table}: our fencing token {token} is older than "
                           f"{newest}: another engine holds the table")


async def claim(con: Any, table: str) -> int:
    """Issue the next fencing token of ``table``."""
    return int(await con.fetchval(
        "INSERT INTO fences (table_id, token) VALUES ($1, 1) ON CONFLICT (table_id) DO "
        "UPDATE SET token = fences.token + 1 RETURNING token", table))


async def check_head(con: Any, table: str, token: int, expected: Head | None,
                     events: list[tuple[int, int, bytes]]) -> Head:
    """Check the step's token, lock the table's row and check the step may follow it;
    the stored head."""
    await check_fence(con, table, token)
    row = await con.fetchrow("SELECT epoch, seq FROM tables WHERE table_id = $1 FOR UPDATE",
                             table)
    if row is None:
        return (0, 0)
    head: Head = (row[0], row[1])
    if expected is not None and expected != head:
        raise OutOfStep(f"table {table}: the store's head is {head}, not {expected} where "
                        f"this engine left it")
    if events:
        epoch, first = events[0][0], events[0][1]
        follows = (epoch == head[0] and first == head[1] + 1) or (epoch > head[0]
                                                                    and first == 1)
        if not follows:
            raise OutOfStep(f"table {table}: a step from {(epoch, first)} does not follow "
                            f"the stored head {head}")
    return head


async def write_head(con: Any, table: str, state: bytes,
                     events: list[tuple[int, int, bytes]], retention: int,
                     snapshot: bytes = b"") -> Head | None:
    """Append the step's events and store the engine's state; the new head if it moved."""
    if events:
        await con.execute(
            "INSERT INTO events (table_id, epoch, seq, frame) SELECT $1, * FROM "
            "unnest($2::bigint[], $3::bigint[], $4::bytea[])",
            table, [e for e, _, _ in events], [s for _, s, _ in events],
            [f for _, _, f in events])
        epoch, last = events[-1][0], events[-1][1]
        if any(seq % 1000 == 0 for _, seq, _ in events):  # trim now and then
            await con.execute("DELETE FROM events WHERE table_id = $1 AND (epoch < $2 OR "
                              "seq <= $3)", table, epoch, last - retention)
    head = (events[-1][0], events[-1][1]) if events else (0, 0)
    stored = await con.fetchrow(
        "INSERT INTO tables (table_id, state, epoch, seq, snapshot) VALUES ($1, $2, $3, $4, "
        "NULLIF($5, ''::bytea)) "
        "ON CONFLICT (table_id) DO UPDATE SET state = excluded.state, "
        "epoch = CASE WHEN excluded.seq > 0 THEN excluded.epoch ELSE tables.epoch END, "
        "seq = CASE WHEN excluded.seq > 0 THEN excluded.seq ELSE tables.seq END, "
        "snapshot = COALESCE(excluded.snapshot, tables.snapshot) "
        "RETURNING epoch, seq", table, state, *head, snapshot)
    return (stored[0], stored[1])


async def apply(con: Any, effect: Effect, now: int, chunk: int) -> list[Settled]:
    """One effect of a step, inside its transaction (every kind handled: mypy checks it)."""
    match effect:
        case OpenRound():
            await _open(con, effect, now)
            return []
        case SetBetting():
            await _set_betting(con, effect, now)
            return []
        case SettleRound():
            return await _end(con, effect.round_id, "settling", now, chunk, effect)
        case CancelRound():
            return await _end(con, effect.round_id, "refunding", now, chunk, effect)
        case RevealShoe():
            await con.execute(
                "INSERT INTO shoes (shoe_id, table_id, commitment, salt, cut_at, burn_card, "
                "burned, card_order, rounds, ended_at) VALUES ($1, $2, $3, $4, $5, $6, $7, "
                "$8, $9, $10) ON CONFLICT DO NOTHING",
                effect.shoe_id, effect.table, effect.commitment, effect.salt, effect.cut_at,
                effect.burn_card, effect.burned, json.dumps(effect.order),
                shoe_rounds_json(effect), now)
            return []
        case _:
            assert_never(effect)


async def _open(con: Any, effect: OpenRound, now: int) -> None:
    table = await con.fetchval(
        "INSERT INTO rounds (round_id, table_id, shoe_id, round_no, state, closes_at, limits, "
        "opened_at) VALUES ($1, $2, $3, $4, 'betting', $5, $6, $7) ON CONFLICT (round_id) "
        "DO NOTHING RETURNING table_id",
        effect.round_id, effect.table, effect.shoe_id, effect.round_no, effect.closes_at,
        json.dumps(limits_dict(effect.limits)), now)
    if table is None:  # a round opens once: a step that opens it again is not the store's
        raise OutOfStep(f"round {effect.round_id} is open already: it cannot open again")
    hold = hold_account(effect.round_id)
    kind = await con.fetchval(
        "INSERT INTO accounts (id, kind, created_at) VALUES ($1, 'hold', $2) "
        "ON CONFLICT (id) DO UPDATE SET id = excluded.id RETURNING kind", hold, now)
    if kind != "hold":  # raising rolls the step back: the round does not open
        raise AccountError(f"round {effect.round_id}: its escrow account {hold!r} already "
                           f"exists as a {kind} account")


async def _set_betting(con: Any, effect: SetBetting, now: int) -> None:
    row = await con.fetchrow("SELECT state, closes_at FROM rounds WHERE round_id = $1 "
                             "FOR UPDATE", effect.round_id)
    if row is None or row[0] not in OPEN:
        raise OutOfStep(f"betting {effect.status} on round {effect.round_id}, which is "
                        f"{'unknown' if row is None else row[0]}")
    closes_at = effect.closes_at
    if effect.status == "closed":  # keep the deadline: see bets.closed_deadline
        closes_at = closed_deadline(row[1], now)
    await con.execute("UPDATE rounds SET state = $1, closes_at = $2 WHERE round_id = $3",
                      effect.status, closes_at, effect.round_id)


async def _end(con: Any, round_id: str, to: str, now: int, chunk: int,
               effect: SettleRound | CancelRound) -> list[Settled]:
    """Mark the round ``settling`` / ``refunding``, then settle its first chunk."""
    state = await con.fetchval("SELECT state FROM rounds WHERE round_id = $1 FOR UPDATE",
                               round_id)
    if state is None:
        raise OutOfStep(f"round {round_id} is unknown: it cannot go {to}")
    if state not in OPEN:  # ended or ending already: the step is not the store's next
        raise OutOfStep(f"round {round_id} is {state}: it cannot go {to}")
    if isinstance(effect, SettleRound):
        missing = {r[0] for r in await con.fetch(
            "SELECT DISTINCT spot FROM bets WHERE round_id = $1", round_id)} - effect.spots.keys()
        if missing:  # raising rolls the whole step back: nothing is written
            raise StepRefused(f"no result for spot(s) {sorted(missing)} of round {round_id}")
        await con.execute("UPDATE rounds SET state = 'settling', cards = $1, spots = $2, "
                          "ended_at = $3 WHERE round_id = $4", json.dumps(effect.cards),
                          json.dumps(effect.spots), now, round_id)
    else:
        await con.execute("UPDATE rounds SET state = 'refunding', reason = $1, "
                          "closes_at = NULL, ended_at = $2 WHERE round_id = $3",
                          effect.reason, now, round_id)
    return (await close_chunk(con, round_id, now, chunk))[0]


async def _chunk_bets(con: Any, round_id: str, cursor: int, players: int, bets: int,
                      chunk: int) -> tuple[list[OpenBet], int]:
    """The next chunk's open bets (whole players, about ``chunk`` bets) and its players."""
    most = max(1, chunk * players // max(bets, 1))
    rows = await con.fetch(
        "SELECT rp.n, b.seq, b.player_id, b.bet_id, b.spot, b.amount, b.deducted "
        "FROM (SELECT n, player_id FROM round_players WHERE round_id = $1 AND n >= $2 "
        "ORDER BY n LIMIT $3) rp JOIN bets b ON b.round_id = $1 AND b.player_id = rp.player_id "
        "AND b.state = 'accepted' ORDER BY rp.n, b.seq", round_id, cursor, most)
    taken: list[OpenBet] = []
    last = cursor - 1
    for row in rows:
        if row[0] != last and len(taken) >= chunk:
            break  # whole players only
        last = row[0]
        taken.append(OpenBet(*row[1:]))
    done = min(most, players - cursor) if len(taken) == len(rows) else last + 1 - cursor
    return taken, done


async def close_chunk(con: Any, round_id: str, now: int,
                      chunk: int) -> tuple[list[Settled], bool]:
    """Settle or refund the round's next chunk; mark it ended once none is left."""
    row = await con.fetchrow("SELECT state, spots, cursor, players, bets FROM rounds "
                             "WHERE round_id = $1 FOR UPDATE", round_id)
    if row is None or row[0] not in ("settling", "refunding"):
        return [], False
    state, spots, cursor, players_in_round, bets_in_round = row
    bets, done = await _chunk_bets(con, round_id, cursor, players_in_round, bets_in_round,
                                   chunk)
    cursor += done
    hold = hold_account(round_id)
    moves: list[tuple[str, str, str, int, str]] = []  # id, debit, credit, amount, kind
    if bets and state == "settling":
        plan = settle_chunk(bets, json.loads(spots))
        moves.append((settle_transfer_id(plan.first), hold, "house", plan.held, "settle"))
        moves += [(payout_transfer_id(first), "house", pid, amount, "payout")
                  for pid, (first, amount) in plan.payouts.items()]
        results = plan.results
    else:
        moves += [(refund_transfer_id(b.seq), hold, b.player_id, b.deducted, "refund")
                  for b in bets if b.deducted > 0]
        results = [("refund", 0, b.deducted) for b in bets]
    after = await _move(con, [m for m in moves if m[3] > 0], [b.player_id for b in bets],
                        round_id, now)
    settled = [Settled(b.player_id, b.bet_id, round_id, b.spot, b.amount, outcome, odds,
                       returned, after[b.player_id])
               for b, (outcome, odds, returned) in zip(bets, results, strict=True)]
    if bets:
        await con.execute(
            "UPDATE bets SET state = $1, outcome = x.o, odds = x.d, returned = x.r, "
            "settled_at = $2, balance_after = x.b FROM unnest($3::bigint[], $4::text[], "
            "$5::integer[], $6::bigint[], $7::bigint[]) AS x(q, o, d, r, b) "
            "WHERE bets.seq = x.q", "settled" if state == "settling" else "refunded", now,
            [b.seq for b in bets], [s.outcome for s in settled], [s.odds for s in settled],
            [s.returned for s in settled], [s.balance for s in settled])
    more = cursor < players_in_round
    ended = "settled" if state == "settling" else "cancelled"
    await con.execute("UPDATE rounds SET cursor = $1, state = $2 WHERE round_id = $3",
                      cursor, state if more else ended, round_id)
    return settled, more


async def _move(con: Any, moves: list[tuple[str, str, str, int, str]], players: list[str],
                round_id: str, now: int) -> dict[str, int]:
    """Apply the transfers (each once: a repeat is a bug, and fails the chunk); the
    balance after them of every account moved and of ``players``, accounts locked in id
    order as every writer does."""
    deltas: dict[str, int] = dict.fromkeys(players, 0)
    for _, debit, credit, amount, _ in moves:
        if debit == credit:
            raise AccountError(f"a transfer of round {round_id} debits and credits {debit!r}")
        deltas[debit] = deltas.get(debit, 0) - amount
        deltas[credit] = deltas.get(credit, 0) + amount
    if not deltas:
        return {}
    accounts = sorted(deltas)
    after = {row[0]: row[1] + deltas[row[0]] for row in await con.fetch(
        "SELECT id, balance FROM accounts WHERE id = ANY($1::text[]) ORDER BY id FOR UPDATE",
        accounts)}
    if not moves:
        return after
    await con.execute(
        "INSERT INTO transfers (id, debit, credit, amount, kind, ref, at) SELECT i, d, c, a, "
        "k, $6, $7 FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::text[]) "
        "AS x(i, d, c, a, k)", [m[0] for m in moves], [m[1] for m in moves],
        [m[2] for m in moves], [m[3] for m in moves], [m[4] for m in moves], round_id, now)
    moved = [a for a in accounts if deltas[a]]
    await con.execute(
        "UPDATE accounts SET balance = accounts.balance + x.delta FROM unnest($1::text[], "
        "$2::bigint[]) AS x(id, delta) WHERE accounts.id = x.id", moved,
        [deltas[a] for a in moved])
    return after


async def unpublished_rounds(con: Any, table: str) -> list[str]:
    """The rounds of ``table`` settled (or settling) whose results are not all known to
    have reached the bus, oldest first (the runner's outbox: host/runner.py)."""
    rows = await con.fetch(
        "SELECT round_id FROM rounds WHERE table_id = $1 AND NOT published AND "
        "state IN ('settling', 'refunding', 'settled', 'cancelled') ORDER BY opened_at",
        table)
    return [row[0] for row in rows]


async def mark_published(con: Any, table: str, token: int) -> None:
    """Every result of the ended rounds of ``table`` reached the bus: said by the table's
    holder only (fenced), which published each chunk it stored, or again what it could
    not vouch for."""
    await check_fence(con, table, token)
    await con.execute("UPDATE rounds SET published = true WHERE table_id = $1 AND NOT "
                      "published AND state IN ('settled', 'cancelled')", table)
