"""The ``livetable`` console script: one parser, one module per concern.

Why a package: every subcommand in one file had grown past 900 lines, and a reader looking
for ``deposit`` read past the server's flags and the wallet report. Each module here holds
the commands about one thing, with their parsers:

- :mod:`.figures` — ``settle``, ``rtp``, ``simulate``: the rules' figures;
- :mod:`.serve` — ``serve``, ``gateway``, ``engine``: the service and its roles;
- :mod:`.accounts` — ``token``, ``deposit``: who may come to the table, with what money;
- :mod:`.console` — ``dealer``: the dealer console in a terminal;
- :mod:`.shoe` — ``verify-shoe``: the check that a shoe was dealt as committed;
  ``restores``: the restores detected, acknowledged;
- :mod:`.stream` — ``test-stream``: a test card through the media server;
- :mod:`.operators` — ``operator-demo``, ``operators check``: a reference operator and the
  registry's check;
- :mod:`.wallet` — ``wallet report``: the seamless wallet's calls and totals;
- :mod:`.migrate` — ``migrate-store``: a Redis deployment's money moved into PostgreSQL;
- :mod:`.arguments` — what they share: :class:`~.arguments.UsageError`, the parser class,
  the settings flags and :func:`~.arguments.settings_of`.

Each command is one function that takes the parsed arguments and returns the exit code,
registered with ``set_defaults(handler=...)``. To add a command, write ``add_<name>(commands)``
in the module it belongs to and call it from :func:`build_parser`. Errors a user can fix (a
bad card, a bad amount) are one line on stderr and exit code 2, like argparse's own usage
errors; :func:`main` returns the code instead of exiting so that tests can call it. The
modules import :mod:`.arguments` and never this package or one another, so the imports run
one way (``tests/unit/test_cli_parts.py``).

The commands are thin: cards are parsed by :mod:`livetable.rules.cards`, money goes through
:func:`~livetable.rules.settlement.settle_bet`, the figures come from :mod:`livetable.rules.rtp`
and :mod:`livetable.rules.simulate`; what runs the service is :mod:`livetable.server`.
"""

from __future__ import annotations

import argparse
import sys

from livetable.cli.accounts import add_deposit, add_token
from livetable.cli.arguments import EXIT_USAGE, Handler, Parser, UsageError
from livetable.cli.console import add_dealer
from livetable.cli.figures import add_rtp, add_settle, add_simulate
from livetable.cli.migrate import add_migrate_store
from livetable.cli.operators import add_operator_demo, add_operators
from livetable.cli.serve import add_roles, add_serve
from livetable.cli.shoe import add_restores, add_verify_shoe
from livetable.cli.stream import add_test_stream
from livetable.cli.wallet import add_wallet


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="livetable", description="A real-time live table for Pok Deng."
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    add_settle(commands)
    add_rtp(commands)
    add_simulate(commands)
    add_serve(commands)
    add_token(commands)
    add_dealer(commands)
    add_roles(commands)
    add_deposit(commands)
    add_migrate_store(commands)
    add_verify_shoe(commands)
    add_restores(commands)
    add_test_stream(commands)
    add_operator_demo(commands)
    add_wallet(commands)
    add_operators(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # argparse exits on --help and on usage errors
        if e.code is None or isinstance(e.code, int):
            return e.code or 0
        return EXIT_USAGE
    handler: Handler | None = getattr(args, "handler", None)
    if handler is None:
        parser.print_usage(sys.stderr)
        return EXIT_USAGE
    try:
        return handler(args)
    except UsageError as e:
        print(f"livetable {args.command}: {e}", file=sys.stderr)
        return EXIT_USAGE
