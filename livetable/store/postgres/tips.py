"""Tips to the dealer on PostgreSQL: one taken in its own transaction (judged by
``betting.tips.judge_tip``), and a player's tips for the Bet Record — the SQLite ledger's
rules (store/sqlite/ledger/tips.py), held to the same contract tests.

The player's account row is locked first (``FOR UPDATE``): two sends of one tip at once
wait for each other, and the second finds the first's row and answers as it did. The tip
account is only ever locked after a player's, by tips alone, so no writer waits for it the
other way round.
"""

from __future__ import annotations

from typing import Any

from livetable import protocol as p
from livetable.accounts import HOUSE_TIPS
from livetable.betting.tips import TipAnswer, TipRequest, TipTaken, judge_tip
from livetable.store.bets import MAX_TIPS_PER_PAGE, TIP_COLUMNS, tip_entry
from livetable.store.postgres import ledger
from livetable.store.postgres.replication import Replication
from livetable.store.postgres.slips import bound


async def place_tip(con: Any, tip: TipRequest, now: int, within_ms: int,
                    replication: Replication) -> TipAnswer:
    """The tip, inside the caller's transaction, under the slips' promise: a standby has
    it before it is answered (``slips.bound``)."""
    await bound(con, within_ms, replication)
    is_player = await ledger.kind(con, tip.player_id, lock=True) == "player"
    row = await con.fetchrow("SELECT amount, balance_after FROM tips WHERE player_id = $1 "
                             "AND tip_id = $2", tip.player_id, tip.tip_id)
    prior = None if row is None else (int(row[0]), int(row[1]))
    if prior is None and tip.deposit is not None and is_player:
        deposit = tip.deposit
        await ledger.transfer(con, deposit.transfer_id, "external", tip.player_id,
                              deposit.amount, "deposit", tip.player_id, deposit.at)
    balance = (await con.fetchval("SELECT balance FROM accounts WHERE id = $1", tip.player_id)
               if is_player else None)
    answer = judge_tip(tip, prior, None if balance is None else int(balance))
    if isinstance(answer, TipTaken) and answer.fresh:
        await ledger.transfer(con, tip.transfer_id, tip.player_id, HOUSE_TIPS, tip.amount,
                              "tip", tip.tip_id, now)
        await con.execute(f"INSERT INTO tips (player_id, {TIP_COLUMNS}) VALUES ($1, $2, $3, "
                          "$4, $5, $6, $7)", tip.player_id, tip.tip_id, tip.table,
                          tip.round_id, tip.amount, now, answer.balance)
    return answer


async def tip_record(con: Any, player_id: str, cursor: int | None,
                     since: int | None) -> list[p.TipRecordEntry]:
    """See ``store.base.Store.tip_record``."""
    rows = await con.fetch(
        f"SELECT {TIP_COLUMNS} FROM tips WHERE player_id = $1 "
        "AND ($2::bigint IS NULL OR placed_at >= $2) AND ($3::bigint IS NULL OR placed_at < "
        "(SELECT placed_at FROM bets WHERE seq = $3)) "
        "ORDER BY placed_at DESC, seq DESC LIMIT $4", player_id, since, cursor,
        MAX_TIPS_PER_PAGE)
    return [tip_entry(row) for row in rows]
