"""``livetable dealer``: the dealer console in a terminal.

Why so small: the console itself — reading card codes and commands, the websocket, what it
prints — is :mod:`livetable.cli.terminal`; this command only turns the server's address into the
dealer websocket's and finds the token. The token is never a flag (every user's ``ps``
would show it): it comes from ``LIVETABLE_DEALER_TOKEN`` or is asked for without echo.
"""

from __future__ import annotations

import argparse

from livetable.cli.arguments import Commands, UsageError


def cmd_dealer(args: argparse.Namespace) -> int:
    import asyncio
    import getpass
    import os

    from livetable.cli.terminal import run, token_from

    url = args.url.rstrip("/")
    if url.startswith("http"):
        url = "ws" + url[4:]
    if not url.endswith("/ws/dealer"):
        url += "/ws/dealer"
    try:
        token = token_from(dict(os.environ), getpass.getpass)
    except (ValueError, EOFError) as exc:
        raise UsageError(str(exc) or "no token") from None
    return asyncio.run(run(url, token, args.table))


def add_dealer(commands: Commands) -> None:
    p = commands.add_parser(
        "dealer", help="the dealer console in a terminal: card codes and commands on stdin")
    p.add_argument("--url", required=True, help="server, e.g. http://localhost:8000")
    # No --token: a flag's value is in every user's `ps`. The variable, or a prompt.
    p.epilog = ("The token (livetable token --dealer) comes from LIVETABLE_DEALER_TOKEN, or is "
                "asked for without echo; it is never a flag, which `ps` would show. Type "
                "`help` at the console for its commands.")
    p.add_argument("--table", default="t1", help="table id (default t1)")
    p.set_defaults(handler=cmd_dealer)
