"""What the PostgreSQL store only reads: a player's results, a round's, the Bet Record, a
round and a shoe as the public API shows them. Plain functions of a connection, their SQL
beside them (as the SQLite ledger's reads are), so that the store's class keeps to the
transactions and the moves of money.
"""

from __future__ import annotations

from typing import Any

from livetable import protocol as p
from livetable.betting.slips import settled_message
from livetable.rules.fairness import ShoeRecord
from livetable.store.bets import (
    BET_COLUMNS,
    ROUND_COLUMNS,
    SHOE_COLUMNS,
    SHOE_ROUND_COLUMNS,
    BetRow,
    RoundView,
    record_page,
    round_view_of,
    shoe_record,
    shoe_round_ids,
)


async def settlements_for_rounds(con: Any, player_id: str,
                                 round_ids: list[str]) -> list[p.BetSettled]:
    rows = await con.fetch(
        f"SELECT {BET_COLUMNS} FROM bets WHERE player_id = $1 AND round_id = "
        f"ANY($2::text[]) AND state != 'accepted' ORDER BY seq", player_id, round_ids)
    return [settled_message(BetRow(*r)) for r in rows]


async def round_settlements(con: Any, round_id: str) -> list[tuple[str, p.BetSettled]]:
    rows = await con.fetch(
        f"SELECT player_id, {BET_COLUMNS} FROM bets WHERE round_id = $1 AND "
        f"state != 'accepted' ORDER BY seq", round_id)
    return [(r[0], settled_message(BetRow(*r[1:]))) for r in rows]


async def bet_record(con: Any, player_id: str, limit: int,
                     cursor: int | None) -> tuple[list[p.BetRecordEntry], str | None]:
    columns = ", ".join(f"b.{c}" for c in BET_COLUMNS.split(", "))
    rows = await con.fetch(
        f"SELECT b.seq, r.shoe_id, r.round_no, r.cards, {columns} FROM bets b "
        f"JOIN rounds r USING (round_id) WHERE b.player_id = $1 AND "
        f"($2::bigint IS NULL OR b.seq < $2) ORDER BY b.seq DESC LIMIT $3",
        player_id, cursor, limit + 1)
    return record_page(rows, limit)


async def round_view(con: Any, round_id: str) -> RoundView | None:
    row = await con.fetchrow(f"SELECT {ROUND_COLUMNS} FROM rounds WHERE round_id = $1", round_id)
    return None if row is None else round_view_of(row)


async def shoe_view(con: Any, shoe_id: str) -> ShoeRecord | None:
    row = await con.fetchrow(f"SELECT {SHOE_COLUMNS} FROM shoes WHERE shoe_id = $1", shoe_id)
    if row is None:
        return None
    stored = {r[0]: r[1:] for r in await con.fetch(
        f"SELECT {SHOE_ROUND_COLUMNS} FROM rounds WHERE round_id = "
        "ANY($1::text[])", shoe_round_ids(row[7]))}
    return shoe_record(shoe_id, row, stored)
