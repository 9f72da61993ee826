"""``livetable token`` and ``deposit``: who may come to the table, and with what money.

Why together: both are an operator's side of an account in its simplest form — a signed
token for a player (or a dealer's or supervisor's, naming the tables they may drive), and a
credit to a player's account. Both check the id against the ledger's namespace
(:mod:`livetable.accounts`) before anything is minted or opened: never an internal account,
and never a demo guest's ``g_…`` id, which only the server makes.
"""

from __future__ import annotations

import argparse
import json
from typing import Literal

from livetable.cli.arguments import Commands, UsageError, add_store_flags, setting, settings_of


def cmd_token(args: argparse.Namespace) -> int:
    from livetable.accounts import AccountError, check_not_guest
    from livetable.auth import mint

    settings = settings_of(args)
    try:
        secret = settings.load_secret(create=False)
    except FileNotFoundError as exc:
        raise UsageError(f"{exc} (start the server once, or pass --data-dir)") from None
    ttl = args.ttl if args.ttl is not None else settings.token_ttl
    if args.player is not None:
        try:  # guest ids are the server's to make (POST /api/guest), whatever the kind
            check_not_guest(args.player)
        except AccountError as exc:
            raise UsageError(str(exc)) from None
    if args.dealer or args.supervisor:
        kind: Literal["dealer", "supervisor"] = "supervisor" if args.supervisor else "dealer"
        if args.all_tables == bool(args.tables):
            raise UsageError(f"a {kind} token names the tables it may drive: --tables t1,t2 "
                             f"or --all-tables")
        tables = ["*"] if args.all_tables else [t.strip() for t in args.tables.split(",")
                                                if t.strip()]
        if not tables:
            raise UsageError("--tables needs at least one table id")
        token = mint(secret, kind, args.player or kind, args.name or kind.title(), ttl,
                     tables=tables)
    else:
        if args.tables or args.all_tables:
            raise UsageError("--tables and --all-tables are for --dealer or --supervisor")
        if not args.player:
            raise UsageError("give --player ID (and --name NAME), or --dealer")
        try:
            token = mint(secret, "player", args.player, args.name or args.player, ttl)
        except AccountError as exc:  # an id in the ledger's own namespace, e.g. hold:…
            raise UsageError(str(exc)) from None
    print(token)
    return 0


def cmd_deposit(args: argparse.Namespace) -> int:
    """Credit a player's account (an operator's cashier, in its simplest form)."""
    import asyncio

    from livetable.accounts import AccountError, check_not_guest, check_player_id
    from livetable.clock import now_ms
    from livetable.store.base import Store

    if args.amount <= 0:
        raise UsageError("--amount must be a positive integer")
    try:  # a guest's demo balance is no money: nobody deposits into it
        check_not_guest(check_player_id(args.player))
    except AccountError as exc:
        raise UsageError(str(exc)) from None
    settings = settings_of(args)

    async def deposit() -> int:
        store: Store
        if settings.postgres_url:
            from livetable.store.postgres import PostgresStore

            store = PostgresStore(settings.postgres_url)
        elif settings.redis_url:  # Redis holds no money: never a local file in its stead
            from livetable.services import SCALE_OUT_NEEDS_POSTGRES

            raise UsageError(SCALE_OUT_NEEDS_POSTGRES)
        else:
            from livetable.store.sqlite import SQLiteStore

            store = SQLiteStore(settings.db_path, synchronous=settings.sqlite_sync)
        try:
            await store.ensure_player(args.player, args.name or "", 0, now_ms())
            return await store.deposit(args.id, args.player, args.amount, now_ms())
        except AccountError as exc:  # a reserved account id
            raise UsageError(str(exc)) from None
        finally:
            await store.close()

    balance = asyncio.run(deposit())
    print(json.dumps({"player": args.player, "deposit_id": args.id, "balance": balance}))
    return 0


def add_deposit(commands: Commands) -> None:
    p = commands.add_parser("deposit", help="credit a player's account")
    p.add_argument("--player", required=True, help="player id")
    p.add_argument("--amount", type=int, required=True, help="a positive integer")
    p.add_argument("--id", required=True,
                   help="the deposit's unique id: the same id twice credits once")
    p.add_argument("--name", help="display name, for a new player")
    add_store_flags(p)
    p.set_defaults(handler=cmd_deposit)


def add_token(commands: Commands) -> None:
    p = commands.add_parser("token", help="mint a signed player, dealer or supervisor token")
    p.add_argument("--player", help="player id (a dealer's or supervisor's id with those)")
    p.add_argument("--name", help="display name")
    staff = p.add_mutually_exclusive_group()
    staff.add_argument("--dealer", action="store_true",
                       help="a dealer token (for /ws/dealer); needs --tables or --all-tables")
    staff.add_argument("--supervisor", action="store_true",
                       help="a supervisor token: drives tables like a dealer and approves card "
                            "corrections; needs --tables or --all-tables")
    p.add_argument("--tables", help="comma-separated table ids a dealer/supervisor may drive")
    p.add_argument("--all-tables", dest="all_tables", action="store_true",
                   help="a dealer/supervisor token for every table")
    p.add_argument("--ttl", type=int, default=None,
                   help="seconds (default LIVETABLE_TOKEN_TTL or 30 days)")
    setting(p, "--data-dir", "data_dir", "data directory holding the secret (unless "
            "LIVETABLE_SECRET is set)")
    p.set_defaults(handler=cmd_token)
