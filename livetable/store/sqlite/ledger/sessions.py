"""Operators' sessions on the ledger: opened at launch, read at hello, ended by the
operator or their time limit, and their responsible-gaming figures (betting/sessions.py).

A session's row outlives nothing it needs to: rows whose token expired are deleted as
new sessions open. No money moves here; the figures count what the slips and the
settlements of the session's player moved.
"""

from __future__ import annotations

from livetable.betting.sessions import SessionRecord
from livetable.store.bets import SESSION_COLUMNS, session_of, session_values
from livetable.store.sqlite.ledger.core import Ledger


def open_session(ledger: Ledger, record: SessionRecord) -> None:
    """Keep ``record`` (once by its id), and forget the sessions whose token expired."""
    with ledger.transaction() as db:
        db.execute("DELETE FROM sessions WHERE expires_at < ?", (record.started_at,))
        db.execute(
            f"INSERT OR IGNORE INTO sessions ({SESSION_COLUMNS}) "
            "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)", session_values(record))


def session(ledger: Ledger, session_id: str) -> SessionRecord | None:
    return session_of(ledger.db.execute(
        f"SELECT {SESSION_COLUMNS} FROM sessions WHERE session_id = ?", (session_id,)
    ).fetchone())


def end_session(ledger: Ledger, session_id: str, reason: str, now: int
                ) -> SessionRecord | None:
    """End the session now unless it has ended already (the first reason stays); the
    session as it is after, None if there is no such session."""
    with ledger.transaction() as db:
        db.execute("UPDATE sessions SET ended_at = ?, reason = ? "
                   "WHERE session_id = ? AND ended_at IS NULL", (now, reason, session_id))
    return session(ledger, session_id)


def count(ledger: Ledger, session_id: str, round_id: str | None, staked: int,
          returned: int) -> SessionRecord | None:
    """Add to the session's figures what one slip staked in ``round_id``, or what one
    settlement returned (``round_id`` None)."""
    with ledger.transaction() as db:
        db.execute(
            "UPDATE sessions SET staked = staked + :staked, returned = returned + :returned, "
            "round_staked = CASE WHEN :round IS NULL THEN round_staked "
            "WHEN round_id = :round THEN round_staked + :staked ELSE :staked END, "
            "round_id = COALESCE(:round, round_id) WHERE session_id = :id",
            {"staked": staked, "returned": returned, "round": round_id, "id": session_id})
    return session(ledger, session_id)


def first_launch(ledger: Ledger, operator_id: str, request_id: str, now: int,
                 until: int) -> bool:
    """Whether no launch of ``operator_id`` used ``request_id`` (kept until ``until``, epoch
    ms); the ids kept past their time are forgotten meanwhile."""
    with ledger.transaction() as db:
        db.execute("DELETE FROM launch_requests WHERE kept_until < ?", (now,))
        return db.execute(
            "INSERT OR IGNORE INTO launch_requests (operator, request_id, kept_until) "
            "VALUES (?, ?, ?)", (operator_id, request_id, until)).rowcount == 1


def reality_checked(ledger: Ledger, session_id: str, now: int) -> SessionRecord | None:
    """The player answered the reality check at ``now``: the next is due from then."""
    with ledger.transaction() as db:
        db.execute("UPDATE sessions SET checked_at = ? WHERE session_id = ?",
                   (now, session_id))
    return session(ledger, session_id)
