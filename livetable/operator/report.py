"""The wallet report: the calls of the log with their state, and the totals an operator
reconciles its books with (``livetable wallet report``, ``POST /api/operator/wallet``).

The list of calls is bounded (the oldest, up to a limit: a log grows without end); the
totals are the log's own over every call, added up in SQL (store/sqlite/ledger/wallet_totals.py),
and the report says how many calls they cover and whether the list is partial."""

from __future__ import annotations

import time
from typing import Any

import msgspec

from livetable.operator.log import CallSummary, WalletCall


class RoundTotals(msgspec.Struct, kw_only=True):
    """One round's wallet calls added up, as an operator matches them with its books.

    ``net`` = debited − credited − rolled back: what the round moved from the players to
    the operator, final once ``open_debits`` and ``undelivered`` are 0. A debit whose
    outcome was unknown counts in ``debited_unknown`` and its rollback in
    ``rolled_back``: together they net to 0, whether or not the operator applied it.
    """

    round_id: str
    table_id: str
    debits: int = 0
    debited: int = 0
    debited_unknown: int = 0
    refused: int = 0
    credits: int = 0
    credited: int = 0
    rollbacks: int = 0
    rolled_back: int = 0
    net: int = 0
    open_debits: int = 0
    undelivered: int = 0


class ReportCall(CallSummary, kw_only=True, omit_defaults=True):
    """A call in the wallet report: its summary, what closed it, and the request sent."""

    closed_by: str | None = None
    request: Any = None


class Report(msgspec.Struct, kw_only=True):
    """The calls listed (the oldest, at most the limit asked), and the figures of every
    call in the log: ``calls_in_log`` of them, ``partial`` when the list holds fewer."""

    calls: list[ReportCall]
    rounds: list[RoundTotals]
    totals: RoundTotals
    calls_in_log: int
    partial: bool


def _round_totals(row: list[Any]) -> tuple[int, RoundTotals]:
    """A row of store/sqlite/ledger/wallet_totals.py's totals: its call count, its figures."""
    _, round_id, table_id, _, calls, *figures = row
    names = [n for n in RoundTotals.__struct_fields__ if n not in ("round_id", "table_id",
                                                                  "net")]
    totals = RoundTotals(round_id=round_id, table_id=table_id,
                         **dict(zip(names, figures, strict=True)))
    totals.net = totals.debited + totals.debited_unknown - totals.credited - totals.rolled_back
    return calls, totals


def report(calls: list[WalletCall], totals: list[list[Any]]) -> Report:
    """Every call of ``calls`` with its state and answer, and the totals per round and
    overall from ``totals``: the log's own over all its calls (``WalletLog.totals``), not
    a sum of the calls listed."""
    out: list[ReportCall] = []
    for call in calls:
        summary = {name: getattr(call, name) for name in CallSummary.__struct_fields__}
        out.append(ReportCall(**summary, closed_by=call.closed_by,
                              request=msgspec.json.decode(call.body)))
    in_log, overall = _round_totals(totals[0])
    return Report(calls=out, rounds=[_round_totals(row)[1] for row in totals[1:]],
                  totals=overall, calls_in_log=in_log, partial=len(out) < in_log)


class DayTotals(msgspec.Struct, kw_only=True):
    """One day (UTC) of one operator's play at one table in one currency, as an operator's
    finance team books it: ``ggr`` (gross gaming revenue) = ``stakes`` − ``returns``, where
    ``stakes`` are the debits that stood (refunded ones taken out) and ``returns`` the
    credits. Amounts in the currency's minor unit."""

    day: str
    operator: str
    table_id: str
    currency: str
    rounds: int = 0
    players: int = 0
    stakes: int = 0
    returns: int = 0
    ggr: int = 0


def daily(rows: list[list[Any]]) -> list[DayTotals]:
    """The per-day summary, from the log's rows over all its calls (``WalletLog.days``:
    by day, operator, table and currency; a call counts on the day its round's first call
    was made, so a round that crosses midnight is booked on one day)."""
    days: list[DayTotals] = []
    for day, operator, table_id, currency, rounds, players, stakes, returns in rows:
        days.append(DayTotals(
            day=time.strftime("%Y-%m-%d", time.gmtime(int(day) * 86_400)),
            operator=operator, table_id=table_id, currency=currency, rounds=rounds,
            players=players, stakes=stakes, returns=returns, ggr=stakes - returns))
    return days
