"""The wallet report's totals, in SQL over the whole log, for both stores.

Why in SQL. ``livetable wallet report`` listed the oldest 10,000 calls and added up the
totals from those alone, without saying so: 1,505 credits reported of 1,533, and
``open_debits`` / ``undelivered`` could read 0 while the newest calls went unexamined. The
listing stays bounded (a log grows without end); the totals come from every call, added up
by the database. One text for SQLite and PostgreSQL: they differ only in a parameter's mark
(``?1`` / ``$1``) and the name of the function that finds a substring (``instr`` /
``strpos``, the same arguments). Rows go back as JSON text (a step's value crosses from the
SQLite writer process in one typed union: store/sqlite/ledger/wallet.py); operator/report.py
makes them :class:`~livetable.operator.report.RoundTotals` and
:class:`~livetable.operator.report.DayTotals`.

The rules, as the report's docstrings say them: a debit counts as debited when ``ok``, as
``debited_unknown`` when ``unknown`` or ``pending``, as refused otherwise; it is open while
no credit or rollback closes it (``closed_by``) and it was not refused; a call is
undelivered while ``queued``. A day's stakes are its debits that stood (``ok``, ``unknown``,
``pending``) less its rollbacks, its returns its credits; a call counts on the day (UTC) its
round's first call was made, and belongs to the operator its player id is namespaced by
(``operator~player``; none: ``default``).
"""

from __future__ import annotations

from typing import Literal

Dialect = Literal["sqlite", "postgres"]

_DAY_MS = 86_400_000


def _sum(when: str, value: str = "1") -> str:
    return f"COALESCE(CAST(sum(CASE WHEN {when} THEN {value} ELSE 0 END) AS bigint), 0)"


#: A round's (or the whole selection's) figures, in RoundTotals' order after its ids:
#: calls, debits, debited, debited_unknown, refused, credits, credited, rollbacks,
#: rolled_back, open_debits, undelivered.
_FIGURES = ", ".join([
    "count(*)",
    _sum("method = 'debit'"),
    _sum("method = 'debit' AND state = 'ok'", "amount"),
    _sum("method = 'debit' AND state IN ('unknown', 'pending')", "amount"),
    _sum("method = 'debit' AND state NOT IN ('ok', 'unknown', 'pending')"),
    _sum("method = 'credit'"),
    _sum("method = 'credit'", "amount"),
    _sum("method = 'rollback'"),
    _sum("method = 'rollback'", "amount"),
    _sum("method = 'debit' AND closed_by IS NULL AND state <> 'refused'"),
    _sum("state = 'queued'"),
])


def _parts(dialect: Dialect) -> tuple[str, str]:
    return ("?", "instr") if dialect == "sqlite" else ("$", "strpos")


def operator_of(dialect: Dialect, column: str = "player_id") -> str:
    """The operator of a call's player, in SQL (registry.operator_of's rule)."""
    _, find = _parts(dialect)
    return (f"CASE WHEN {find}({column}, '~') > 0 THEN substr({column}, 1, "
            f"{find}({column}, '~') - 1) ELSE 'default' END")


def _where(dialect: Dialect) -> str:
    """The report's selection: parameters 1, 2, 3 = round, player, operator (each NULL
    for any)."""
    mark, _ = _parts(dialect)
    return (f"(CAST({mark}1 AS text) IS NULL OR round_id = {mark}1) "
            f"AND (CAST({mark}2 AS text) IS NULL OR player_id = {mark}2) "
            f"AND (CAST({mark}3 AS text) IS NULL OR {operator_of(dialect)} = {mark}3)")


def totals_sql(dialect: Dialect) -> str:
    """Every selected call's figures (round ``*``), then each round's, oldest first."""
    where = _where(dialect)
    return (f"SELECT * FROM (SELECT 0 AS k, '*' AS r, '*' AS t, 0 AS f, {_FIGURES} "
            f"FROM wallet_calls WHERE {where} "
            f"UNION ALL SELECT 1, round_id, min(table_id), min(created_at), {_FIGURES} "
            f"FROM wallet_calls WHERE {where} GROUP BY round_id) x ORDER BY k, f, r")


_STAKES = (_sum("method = 'debit' AND state IN ('ok', 'unknown', 'pending')", "amount")
           + " - " + _sum("method = 'rollback'", "amount"))
_RETURNS = _sum("method = 'credit'", "amount")


def days_sql(dialect: Dialect) -> str:
    """Each (day, operator, table, currency): its day's number since 1970 (UTC), the
    operator, the table, the currency, rounds, players, stakes, returns; parameter 1 the
    operator (NULL for every one)."""
    mark, _ = _parts(dialect)
    return (
        f"WITH firsts AS (SELECT round_id, min(created_at) AS first FROM wallet_calls "
        f"GROUP BY round_id), owned AS (SELECT c.round_id, c.player_id, c.table_id, "
        f"c.currency, c.method, c.state, c.amount, {operator_of(dialect, 'c.player_id')} "
        f"AS operator, f.first / {_DAY_MS} AS day FROM wallet_calls c JOIN firsts f ON "
        f"f.round_id = c.round_id) "
        f"SELECT day, operator, table_id, currency, count(DISTINCT round_id), "
        f"count(DISTINCT player_id), {_STAKES}, {_RETURNS} "
        f"FROM owned WHERE CAST({mark}1 AS text) IS NULL OR operator = {mark}1 "
        f"GROUP BY day, operator, table_id, currency ORDER BY 1, 2, 3, 4")
