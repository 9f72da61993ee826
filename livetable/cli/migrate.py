"""``livetable migrate-store``: a Redis deployment's money moved into PostgreSQL.

Why a command of its own: scale-out keeps its money in PostgreSQL; a deployment that kept it
in Redis moves it once, with its engines stopped, and must see that nothing was lost. The
copy, its refusals and the check are :mod:`livetable.migration.redis_to_postgres`'s; this is only
its
flags and its exit codes (0 copied and checked, or copied already; 1 refused, nothing
written; 3 the check failed; 2 a usage error).
"""

from __future__ import annotations

import argparse
import sys

from livetable.cli.arguments import Commands, UsageError, setting, settings_of


def cmd_migrate_store(args: argparse.Namespace) -> int:
    """Copy a Redis deployment's money into PostgreSQL
    (livetable/migration/redis_to_postgres.py)."""
    import asyncio

    from livetable.clock import now_ms
    from livetable.migration.redis_to_postgres import MigrationRefused, migrate_store

    settings = settings_of(args)
    if not settings.redis_url or not settings.postgres_url:
        raise UsageError("give --redis URL (the old ledger) and --postgres URL")
    try:
        ok, lines = asyncio.run(migrate_store(settings.redis_url, settings.postgres_url,
                                              now_ms()))
    except MigrationRefused as refused:
        print("livetable migrate-store: refused, nothing written:", *refused.reasons,
              sep="\n  ", file=sys.stderr)
        return 1
    print("\n".join(lines))
    return 0 if ok else 3


def add_migrate_store(commands: Commands) -> None:
    p = commands.add_parser("migrate-store", help="copy a Redis deployment's money into "
                            "PostgreSQL, and check it (engines stopped)")
    setting(p, "--redis", "redis_url", "the Redis that holds the old ledger")
    setting(p, "--postgres", "postgres_url", "the PostgreSQL to copy it into")
    p.set_defaults(handler=cmd_migrate_store)
