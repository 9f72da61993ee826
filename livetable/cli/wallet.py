"""``livetable wallet report``: every seamless wallet call, its state and answer, and totals.

Why it reads the log and nothing else: the wallet log is the one record of what livetable
asked the operator's wallet and what came back, kept by the store the deployment runs on
(SQLite beside the ledger, PostgreSQL in scale-out). The command picks that log as
the server would (:func:`_calls`, from the same settings), filters by operator if asked, and
prints what :mod:`livetable.operator.report` makes of it — per call and per round, or per
day (``--daily``), as a table or as JSON. The figures are the log's own, over every call
(added up in SQL: store/sqlite/ledger/wallet_totals.py), never a sum of the calls listed.
"""

from __future__ import annotations

import argparse
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

from livetable.cli.arguments import (
    Commands,
    UsageError,
    add_store_flags,
    add_table_flags,
    settings_of,
)

if TYPE_CHECKING:
    from livetable.config import Settings
    from livetable.operator.log import WalletCall, WalletLog
    from livetable.operator.report import DayTotals, Report

R = TypeVar("R")


def cmd_wallet_report(args: argparse.Namespace) -> int:
    import asyncio

    from livetable.operator.report import daily, report

    settings = settings_of(args)
    if args.daily:
        days = asyncio.run(_read(settings, lambda log: log.days(args.operator)))
        _print_days(daily(days), as_json=args.json)
        return 0
    found, totals = asyncio.run(_read(settings, lambda log: _listed(
        log, args.round, args.player, args.operator)))
    _print_calls_and_rounds(report(found, totals), as_json=args.json)
    return 0


async def _listed(log: WalletLog, round_id: str | None, player_id: str | None,
                  operator: str | None) -> tuple[list[WalletCall], list[list[Any]]]:
    """The oldest calls (of one round, player, operator if given), and the totals over the
    whole log (store/sqlite/ledger/wallet_totals.py)."""
    from livetable.operator.registry import operator_of

    found = await log.calls(round_id, player_id)
    if operator is not None:
        found = [call for call in found if operator_of(call.player_id) == operator]
    return found, await log.totals(round_id, player_id, operator)


async def _read(settings: Settings, read: Callable[[WalletLog], Awaitable[R]]) -> R:
    """``read`` on the log the settings name, as the server would pick it."""
    if settings.postgres_url:
        from livetable.operator.log_postgres import PostgresWalletLog
        from livetable.store.postgres import PostgresStore

        store = PostgresStore(settings.postgres_url, max_connections=2)
        try:
            return await read(PostgresWalletLog(store))
        finally:
            await store.close()
    if settings.redis_url:  # Redis holds no money: never a local file in its stead
        from livetable.services import SCALE_OUT_NEEDS_POSTGRES

        raise UsageError(SCALE_OUT_NEEDS_POSTGRES)
    from livetable.operator.log_sqlite import SQLiteWalletLog

    if not settings.db_path.exists():
        raise UsageError(f"no database at {settings.db_path} (pass --data-dir or --db)")
    wallet_log = SQLiteWalletLog(settings.wallet_db_path, settings.sqlite_sync,
                                 moved_from=settings.db_path)
    try:
        return await read(wallet_log)
    finally:
        await wallet_log.close()


def _print_days(days: list[DayTotals], *, as_json: bool) -> None:
    """The per-day summary (``--daily``): rounds, players, stakes, returns and GGR."""
    import msgspec

    if as_json:
        print(msgspec.json.encode({"days": days}).decode())
        return
    print(f"{'day':<11}{'operator':<12}{'table':<8}{'currency':<9}{'rounds':>7}"
          f"{'players':>8}{'stakes':>12}{'returns':>12}{'ggr':>12}")
    for d in days:
        print(f"{d.day:<11}{d.operator:<12}{d.table_id:<8}{d.currency:<9}{d.rounds:>7}"
              f"{d.players:>8}{d.stakes:>12}{d.returns:>12}{d.ggr:>12}")


def _print_calls_and_rounds(result: Report, *, as_json: bool) -> None:
    """Every call listed with its state and answer, then the totals per round and overall
    (of every call of the log: said when the list holds fewer)."""
    import msgspec

    if as_json:
        print(msgspec.json.encode(result).decode())
        return
    for call in result.calls:
        print(f"{call.tx_id:<34} {call.method:<8} {call.state:<8} {call.amount:>10} "
              f"{call.player_id:<16} {call.round_id:<14} {call.attempts:>3} "
              f"{(call.answer or '')[:60]}")
    print()
    if result.partial:
        print(f"listed: the oldest {len(result.calls)} of {result.calls_in_log} calls; the "
              f"totals below are of all {result.calls_in_log}")
        print()
    print(f"{'round':<16}{'debited':>10}{'unknown':>10}{'credited':>10}{'rolled back':>12}"
          f"{'net':>10}{'open':>6}{'owed':>6}")
    for row in [*result.rounds, result.totals]:
        print(f"{row.round_id:<16}{row.debited:>10}{row.debited_unknown:>10}"
              f"{row.credited:>10}{row.rolled_back:>12}{row.net:>10}{row.open_debits:>6}"
              f"{row.undelivered:>6}")


def add_wallet(commands: Commands) -> None:
    p = commands.add_parser("wallet", help="seamless wallet tools")
    sub = p.add_subparsers(dest="wallet_command", metavar="WALLET_COMMAND", required=True)
    r = sub.add_parser("report", help="every wallet call with its state and answer, and "
                                      "the totals per round")
    r.add_argument("--round", help="only this round")
    r.add_argument("--player", help="only this player")
    r.add_argument("--operator", help="only this operator's players (registry id; "
                                      "'default' for the single-operator deployment)")
    r.add_argument("--daily", action="store_true", help="the per-day summary: rounds, "
                   "players, stakes, returns and GGR by operator, table and currency")
    r.add_argument("--json", action="store_true", help="print JSON")
    add_store_flags(r)
    add_table_flags(r)
    r.set_defaults(handler=cmd_wallet_report)
