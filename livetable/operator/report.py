"""The wallet report: every call of the log with its state, and the totals an operator
reconciles its books with (``livetable wallet report``, ``POST /api/operator/wallet``)."""

from __future__ import annotations

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
