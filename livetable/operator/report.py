"""The wallet report: every call of the log with its state, and the totals an operator
reconciles its books with (``livetable wallet report``, ``POST /api/operator/wallet``)."""

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
    calls: list[ReportCall]
    rounds: list[RoundTotals]
    totals: RoundTotals


def report(calls: list[WalletCall]) -> Report:
    """Every call with its state and answer, and the totals per round and overall."""
    rounds: dict[str, RoundTotals] = {}
    total = RoundTotals(round_id="*", table_id="*")
    out: list[ReportCall] = []
    for call in calls:
        summary = {name: getattr(call, name) for name in CallSummary.__struct_fields__}
        out.append(ReportCall(**summary, closed_by=call.closed_by,
                              request=msgspec.json.decode(call.body)))
        row = rounds.get(call.round_id)
        if row is None:
            row = rounds[call.round_id] = RoundTotals(round_id=call.round_id,
                                                      table_id=call.table_id)
        for t in (row, total):
            if call.method == "debit":
                t.debits += 1
                if call.state == "ok":
                    t.debited += call.amount
                elif call.state in ("unknown", "pending"):
                    t.debited_unknown += call.amount
                else:
                    t.refused += 1
                if call.closed_by is None and call.state != "refused":
                    t.open_debits += 1
            elif call.method == "credit":
                t.credits += 1
                t.credited += call.amount
            elif call.method == "rollback":
                t.rollbacks += 1
                t.rolled_back += call.amount
            if call.state == "queued":
                t.undelivered += 1
            t.net = t.debited + t.debited_unknown - t.credited - t.rolled_back
    return Report(calls=out, rounds=list(rounds.values()), totals=total)


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


def daily(calls: list[WalletCall], operator: str | None = None) -> list[DayTotals]:
    """The per-day summary of ``calls`` (of ``operator``'s players only, when given), by
    day, operator, table and currency; a call counts on the day its round's first call was
    made, so a round that crosses midnight is booked on one day."""
    from livetable.operator.registry import operator_of

    first_seen: dict[str, int] = {}
    for call in calls:
        at = first_seen.get(call.round_id)
        first_seen[call.round_id] = call.created_at if at is None else min(at, call.created_at)
    rows: dict[tuple[str, str, str, str], DayTotals] = {}
    rounds: dict[tuple[str, str, str, str], set[str]] = {}
    players: dict[tuple[str, str, str, str], set[str]] = {}
    for call in calls:
        owner = operator_of(call.player_id)
        if operator is not None and owner != operator:
            continue
        day = time.strftime("%Y-%m-%d", time.gmtime(first_seen[call.round_id] / 1000))
        key = (day, owner, call.table_id, call.currency)
        row = rows.get(key)
        if row is None:
            row = rows[key] = DayTotals(day=day, operator=owner, table_id=call.table_id,
                                        currency=call.currency)
        rounds.setdefault(key, set()).add(call.round_id)
        players.setdefault(key, set()).add(call.player_id)
        if call.method == "debit" and call.state in ("ok", "unknown", "pending"):
            row.stakes += call.amount
        elif call.method == "rollback":
            row.stakes -= call.amount
        elif call.method == "credit":
            row.returns += call.amount
    for key, row in rows.items():
        row.rounds, row.players = len(rounds[key]), len(players[key])
        row.ggr = row.stakes - row.returns
    return sorted(rows.values(), key=lambda r: (r.day, r.operator, r.table_id, r.currency))
