"""Operators' sessions in PostgreSQL: the SQLite ledger's (store/sqlite/ledger/sessions.py) in
SQL of this server.

Each change is one statement that returns the row as it is after, so two gateways
counting into one session at once add up (the row's lock orders them) and an end keeps
the first reason (``WHERE ended_at IS NULL``). Rows whose token expired are deleted as
new sessions open.
"""

from __future__ import annotations

from typing import Any

from livetable.betting.sessions import SessionRecord
from livetable.store.bets import SESSION_COLUMNS, session_of, session_values


async def open_session(con: Any, record: SessionRecord) -> None:
    """Keep ``record`` (once by its id), and forget the sessions whose token expired."""
    await con.execute("DELETE FROM sessions WHERE expires_at < $1", record.started_at)
    await con.execute(
        f"INSERT INTO sessions ({SESSION_COLUMNS}) VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,"
        "$11,$12,$13) ON CONFLICT (session_id) DO NOTHING", *session_values(record))


async def session(con: Any, session_id: str) -> SessionRecord | None:
    return session_of(await con.fetchrow(
        f"SELECT {SESSION_COLUMNS} FROM sessions WHERE session_id = $1", session_id))


async def end_session(con: Any, session_id: str, reason: str,
                      now: int) -> SessionRecord | None:
    """End the session now unless it has ended already (the first reason stays)."""
    await con.execute("UPDATE sessions SET ended_at = $1, reason = $2 "
                      "WHERE session_id = $3 AND ended_at IS NULL", now, reason, session_id)
    return await session(con, session_id)


async def count(con: Any, session_id: str, round_id: str | None, staked: int,
                returned: int) -> SessionRecord | None:
    """Add what one slip staked in ``round_id``, or what settlements returned
    (``round_id`` None), to the session's figures."""
    return session_of(await con.fetchrow(
        "UPDATE sessions SET staked = staked + $2, returned = returned + $3, "
        "round_staked = CASE WHEN $4::text IS NULL THEN round_staked "
        "WHEN round_id = $4::text THEN round_staked + $2 ELSE $2 END, "
        "round_id = COALESCE($4::text, round_id) WHERE session_id = $1 "
        f"RETURNING {SESSION_COLUMNS}",
        session_id, staked, returned, round_id))


async def first_launch(con: Any, operator_id: str, request_id: str, now: int,
                       until: int) -> bool:
    """Whether no launch of ``operator_id`` used ``request_id`` (kept until ``until``, epoch
    ms); the ids kept past their time are forgotten meanwhile."""
    await con.execute("DELETE FROM launch_requests WHERE kept_until < $1", now)
    return await con.fetchval(
        "INSERT INTO launch_requests (operator, request_id, kept_until) VALUES ($1, $2, $3) "
        "ON CONFLICT (operator, request_id) DO NOTHING RETURNING true",
        operator_id, request_id, until) is not None


async def reality_checked(con: Any, session_id: str, now: int) -> SessionRecord | None:
    """The player answered the reality check at ``now``: the next is due from then."""
    return session_of(await con.fetchrow(
        f"UPDATE sessions SET checked_at = $2 WHERE session_id = $1 RETURNING {SESSION_COLUMNS}",
        session_id, now))
