"""What the ledger answers without writing (but the store's identity, made once): a
player's settled bets and Bet Record, a round, an ended shoe, the audit.
"""

from __future__ import annotations

import json
import uuid

from livetable import protocol as p
from livetable.betting.slips import settled_message
from livetable.rules.fairness import ShoeRecord
from livetable.store.base import AuditReport, cursor_of
from livetable.store.bets import (
    BET_COLUMNS,
    ROUND_COLUMNS,
    SHOE_COLUMNS,
    SHOE_ROUND_COLUMNS,
    BetRow,
    BetSpread,
    RoundView,
    record_page,
    round_view_of,
    shoe_record,
    shoe_round_ids,
)
from livetable.store.sqlite.ledger.core import Ledger


def settlements_for_rounds(ledger: Ledger, player_id: str,
                            round_ids: list[str]) -> list[p.BetSettled]:
    if not round_ids:
        return []
    marks = ",".join("?" * len(round_ids))
    rows = ledger.db.execute(
        f"SELECT {BET_COLUMNS} FROM bets WHERE player_id = ? AND round_id IN ({marks}) "
        f"AND state != 'accepted' ORDER BY seq", (player_id, *round_ids)).fetchall()
    return [settled_message(BetRow(*r)) for r in rows]


def round_settlements(ledger: Ledger, round_id: str) -> list[tuple[str, p.BetSettled]]:
    rows = ledger.db.execute(
        f"SELECT player_id, {BET_COLUMNS} FROM bets WHERE round_id = ? "
        f"AND state != 'accepted' ORDER BY seq", (round_id,)).fetchall()
    return [(r[0], settled_message(BetRow(*r[1:]))) for r in rows]


def bet_record(ledger: Ledger, player_id: str, limit: int,
                before: str | None) -> tuple[list[p.BetRecordEntry], str | None]:
    limit = max(1, min(limit, 200))
    cursor = cursor_of(before)
    columns = ", ".join(f"b.{c}" for c in BET_COLUMNS.split(", "))
    rows = ledger.db.execute(
        f"SELECT b.seq, r.shoe_id, r.round_no, r.cards, {columns} "
        f"FROM bets b JOIN rounds r USING (round_id) "
        f"WHERE b.player_id = ? AND (? IS NULL OR b.seq < ?) ORDER BY b.seq DESC LIMIT ?",
        (player_id, cursor, cursor, limit + 1)).fetchall()
    return record_page(rows, limit)


def bet_spread(ledger: Ledger, round_id: str) -> BetSpread:
    where = "FROM bets WHERE round_id = ? AND state != 'refunded'"
    spots = {r[0]: (r[1], r[2]) for r in ledger.db.execute(
        f"SELECT spot, COUNT(DISTINCT player_id), SUM(amount) {where} GROUP BY spot",
        (round_id,))}
    players = ledger.db.execute(f"SELECT COUNT(DISTINCT player_id) {where}",
                                (round_id,)).fetchone()[0]
    return spots, int(players)


def round_view(ledger: Ledger, round_id: str) -> RoundView | None:
    row = ledger.db.execute(f"SELECT {ROUND_COLUMNS} FROM rounds WHERE round_id = ?",
                            (round_id,)).fetchone()
    return None if row is None else round_view_of(row)


def shoe_view(ledger: Ledger, shoe_id: str) -> ShoeRecord | None:
    row = ledger.db.execute(f"SELECT {SHOE_COLUMNS} FROM shoes WHERE shoe_id = ?",
                            (shoe_id,)).fetchone()
    if row is None:
        return None
    ids = shoe_round_ids(row[7])
    marks = ",".join("?" * len(ids))
    stored = {r[0]: r[1:] for r in ledger.db.execute(
        f"SELECT {SHOE_ROUND_COLUMNS} FROM rounds WHERE round_id IN ({marks})",
        ids)} if ids else {}
    return shoe_record(shoe_id, row, stored)


def audit(ledger: Ledger) -> AuditReport:
    db = ledger.db
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
    # a round not ended holds exactly what its open bets took (settling moves both)
    held_wrong = db.execute(
        "SELECT a.id, a.balance, (SELECT COALESCE(SUM(b.deducted), 0) FROM bets b "
        "WHERE b.round_id = r.round_id AND b.state = 'accepted') AS open_bets "
        "FROM rounds r JOIN accounts a ON a.id = 'hold:' || r.round_id "
        "WHERE r.state NOT IN ('settled', 'cancelled') AND a.balance != open_bets"
    ).fetchall()
    problems += [f"{r[0]} holds {r[1]} but the round's open bets took {r[2]}"
                 for r in held_wrong]
    stuck = db.execute(
        "SELECT COUNT(*) FROM bets b JOIN rounds r USING (round_id) "
        "WHERE r.state IN ('settled', 'cancelled') AND b.state = 'accepted'").fetchone()[0]
    if stuck:
        problems.append(f"{stuck} bets of ended rounds are neither settled nor refunded")
    deposits = -(ledger.balance("external") or 0)
    house = ledger.balance("house") or 0
    return AuditReport(ok=not problems, total=total, deposits=deposits, house=house,
                       problems=problems)


def identity(ledger: Ledger, create: bool) -> str | None:
    if create:
        ledger.db.execute("INSERT OR IGNORE INTO meta (key, value) VALUES ('store_id', ?)",
                        (uuid.uuid4().hex,))
    row = ledger.db.execute("SELECT value FROM meta WHERE key = 'store_id'").fetchone()
    return None if row is None else str(row[0])


def spots_of(text: str | None) -> dict[str, tuple[str, int, int]] | None:
    if not text:
        return None
    return {spot: (r[0], r[1], r[2]) for spot, r in json.loads(text).items()}
