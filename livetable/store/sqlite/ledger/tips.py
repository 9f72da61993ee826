"""Tips to the dealer on the SQLite ledger: one taken (judged by ``betting.tips.judge_tip``,
its money moved through ``Ledger.post``), and a player's tips for the Bet Record.

A tip is a row of ``tips`` and one transfer, ``player -> tips:house``, in one transaction;
with a seamless wallet its mirror deposit (``external -> player``) goes first, in the same
transaction, as a slip's does.
"""

from __future__ import annotations

from livetable import protocol as p
from livetable.accounts import HOUSE_TIPS
from livetable.betting.tips import TipAnswer, TipRequest, TipTaken, judge_tip
from livetable.store.base import cursor_of
from livetable.store.bets import MAX_TIPS_PER_PAGE, TIP_COLUMNS, tip_entry
from livetable.store.sqlite.ledger.core import Ledger, Transfer


def place_tip(ledger: Ledger, tip: TipRequest, now: int) -> TipAnswer:
    with ledger.transaction() as db:
        row = db.execute("SELECT amount, balance_after FROM tips WHERE player_id = ? AND "
                         "tip_id = ?", (tip.player_id, tip.tip_id)).fetchone()
        prior = None if row is None else (int(row[0]), int(row[1]))
        is_player = ledger.kind(tip.player_id) == "player"
        if prior is None and tip.deposit is not None and is_player:
            deposit = tip.deposit
            ledger.transfer(Transfer(deposit.transfer_id, "external", tip.player_id,
                                     deposit.amount, "deposit", tip.player_id, deposit.at))
        answer = judge_tip(tip, prior, ledger.balance(tip.player_id) if is_player else None)
        if isinstance(answer, TipTaken) and answer.fresh:
            ledger.transfer(Transfer(tip.transfer_id, tip.player_id, HOUSE_TIPS, tip.amount,
                                     "tip", tip.tip_id, now))
            db.execute(f"INSERT INTO tips (player_id, {TIP_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)",
                       (tip.player_id, tip.tip_id, tip.table, tip.round_id, tip.amount, now,
                        answer.balance))
    return answer


def tip_record(ledger: Ledger, player_id: str, before: str | None,
               since: int | None) -> list[p.TipRecordEntry]:
    """The player's tips newest first: placed at or after ``since`` (if given) and before
    the bet the cursor ``before`` names was placed (if given) — the span of a Bet Record
    page (``store.base.Store.tip_record``)."""
    cursor = cursor_of(before)
    rows = ledger.db.execute(
        f"SELECT {TIP_COLUMNS} FROM tips WHERE player_id = ?1 "
        "AND (?2 IS NULL OR placed_at >= ?2) AND (?3 IS NULL OR placed_at < "
        "(SELECT placed_at FROM bets WHERE seq = ?3)) "
        "ORDER BY placed_at DESC, seq DESC LIMIT ?4",
        (player_id, since, cursor, MAX_TIPS_PER_PAGE)).fetchall()
    return [tip_entry(row) for row in rows]

