"""``livetable operator-demo`` and ``operators check``: the operator's side, for trying it.

Why together: both are about operators rather than the table — a reference operator (a
real seamless wallet server, with faults on request: :mod:`livetable.operator.reference`)
to run livetable against before an operator's own wallet exists, and a check of the
operator registry read exactly as the server reads it (:func:`livetable.operator.registry.load`),
so a mistake is found at the line it is on, before a deployment reloads it. The wallet
report, which reads what happened, is :mod:`livetable.cli.wallet`.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

from livetable.cli.arguments import Commands, UsageError, add_table_flags, settings_of

#: The reference operator's listen backlog: uvicorn's default (aiohttp's is 128). Past it
#: the kernel drops new connections, each back only when TCP retries a second later, and
#: livetable opens up to 64 at once (operator/client.py) — beside whatever else calls.
LISTEN_BACKLOG = 2048


def cmd_operator_demo(args: argparse.Namespace) -> int:
    import logging
    import os

    import uvicorn
    from aiohttp import web

    from livetable.operator import registry
    from livetable.operator.reference import (
        Faults,
        create_operator_server,
        create_operators_app,
    )

    try:
        faults = Faults.parse(args.fault or [], seed=args.seed, hang=args.hang, slow=args.slow)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    here = f"http://{args.host}:{args.port}"
    if args.operators is not None:  # every operator of the registry file livetable serves
        try:
            found = registry.load(args.operators)
        except registry.RegistryError as exc:
            raise UsageError(str(exc)) from None
        app = create_operators_app(found, args.livetable, initial_balance=args.initial_balance,
                                   faults=faults)
        for operator_id in sorted(found.operators):
            print(f"operator-demo: {operator_id}: wallet at {here}/{operator_id}/wallet, "
                  f"launch at {here}/{operator_id}/launch?player_id=…&currency=…",
                  flush=True)
    else:
        secret = args.secret or os.environ.get("LIVETABLE_WALLET_SECRET", "")
        if not secret:
            raise UsageError("give --secret or LIVETABLE_WALLET_SECRET (livetable signs "
                             "wallet calls with it), or --operators FILE")
        server = create_operator_server(secret.encode(), initial_balance=args.initial_balance,
                                        faults=faults)
        print(f"operator-demo: wallet at {here}/wallet (livetable --wallet seamless "
              f"--wallet-url {here}/wallet); books at /state", flush=True)
        # one operator, as the bench runs it: on aiohttp's server (operator/reference.py),
        # on uvloop where it is installed (asyncio's own loop cost a third more CPU a call:
        # docs/benchmarks.md, the 5,000-player close); the service's lock (requirements.txt,
        # what bin/setup installs) does not carry it, and the quick start must run on that
        logging.basicConfig(level=args.log_level.upper())
        web.run_app(server, host=args.host, port=args.port, print=None, access_log=None,
                    loop=_fastest_loop(), backlog=LISTEN_BACKLOG)
        return 0
    uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level)
    return 0


def _fastest_loop() -> asyncio.AbstractEventLoop:
    try:
        import uvloop
    except ImportError:  # the service's own lock: asyncio's loop
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


def add_operator_demo(commands: Commands) -> None:
    p = commands.add_parser(
        "operator-demo", help="a reference operator: a seamless wallet server with faults",
        description="A real wallet server for --wallet seamless: checks signatures, is "
                    "idempotent by tx_id, keeps balances, and injects faults on request.")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=9000)
    p.add_argument("--secret", help="the wallet secret (default: LIVETABLE_WALLET_SECRET)")
    p.add_argument("--operators", type=Path, metavar="FILE",
                   help="play every operator of this registry file (livetable's own): "
                        "each its wallet at /OPERATOR/wallet, its secrets, its launches")
    p.add_argument("--livetable", default="http://127.0.0.1:8000",
                   help="where livetable is, for the launches (default http://127.0.0.1:8000)")
    p.add_argument("--initial-balance", dest="initial_balance", type=int, default=100_000,
                   help="a new player's balance (default 100000)")
    p.add_argument("--fault", action="append", metavar="METHOD:KIND=RATE[,KIND=RATE]",
                   help="inject faults, e.g. debit:timeout=0.05,lost=0.05 or *:slow=0.5; "
                        "kinds: timeout error lost garbage slow duplicate (repeatable)")
    p.add_argument("--seed", type=int, default=0, help="the faults' random seed")
    p.add_argument("--hang", type=float, default=5.0,
                   help="seconds a 'timeout' fault holds a request before applying it")
    p.add_argument("--slow", type=float, default=0.2, help="seconds of a 'slow' answer")
    p.add_argument("--log-level", default="warning",
                   choices=["debug", "info", "warning", "error"])
    p.set_defaults(handler=cmd_operator_demo)


def cmd_operators_check(args: argparse.Namespace) -> int:
    """Read a registry as the server would (secrets resolved from this environment); say
    what it holds, or the line that is wrong (exit 1)."""
    from livetable.operator.registry import RegistryError, load

    tables = settings_of(args).table_names if args.tables or args.table_ids else None
    try:
        found = load(Path(args.file), table_ids=tables)
    except RegistryError as exc:
        print(f"livetable operators check: {exc}", file=sys.stderr)
        return 1
    for operator in found.operators.values():
        currencies = ", ".join(f"{c.code} ({c.decimals} decimals, chips "
                               f"{'/'.join(map(str, c.chips))})"
                               for c in operator.currencies.values()) or "any currency"
        tables_text = ",".join(sorted(operator.tables)) if operator.tables else "every table"
        print(f"{operator.id}: {operator.name}; {len(operator.operator_secrets)} operator "
              f"secret(s), wallet {operator.wallet_url or 'none'}; {tables_text}; {currencies}"
              f"; tips {'on' if operator.tips else 'off'}")
    print(f"{args.file}: {len(found.operators)} operator(s), good")
    return 0


def add_operators(commands: Commands) -> None:
    p = commands.add_parser("operators", help="the operator registry")
    sub = p.add_subparsers(dest="operators_command", metavar="OPERATORS_COMMAND",
                           required=True)
    c = sub.add_parser("check", help="check a registry file (TOML) as the server reads it: "
                                     "the line of the first mistake, or what it holds")
    c.add_argument("file", help="the registry file")
    add_table_flags(c)
    c.set_defaults(handler=cmd_operators_check)
