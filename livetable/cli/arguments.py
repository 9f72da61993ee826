"""What every command shares: the usage error, the parser class, the settings flags.

Why this module: each command module needs the same few things — a one-line usage error
with exit code 2, flags that are settings (``--redis``, ``--data-dir``, …) read the way the
server reads them, the store's and the tables' flags. They live here once and are imported;
the command modules import this one and nothing of each other, and none imports the package
(``livetable/cli/__init__.py``) back, so the imports run one way.

A settings flag has no default and no type of its own: not given, the variable or the
Struct's default applies (the help shows which), and :func:`settings_of` hands what was given
to :func:`livetable.config.load_settings`, which converts and checks it like the variable.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NoReturn, TypeAlias

if TYPE_CHECKING:
    from livetable.config import Settings

EXIT_USAGE = 2

Handler = Callable[[argparse.Namespace], int]


class Parser(argparse.ArgumentParser):
    """Usage errors on one line (subcommand parsers inherit this class)."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: {message} (see {self.prog} --help)\n")


#: What ``add_<command>`` functions receive: ``commands.add_parser(name, ...)``.
Commands: TypeAlias = "argparse._SubParsersAction[Parser]"


class UsageError(Exception):
    """Input the user can fix; main prints it on one line and exits with code 2."""


def print_json(value: object) -> None:
    print(json.dumps(value, ensure_ascii=False))


def setting(p: argparse.ArgumentParser, flag: str, name: str, help: str,
            **kwargs: Any) -> None:
    """A flag of the setting ``name``: no default of its own (not given = the variable or
    the Struct's default, which the help shows) and no type (the Struct converts it)."""
    from livetable.config import choices, variable

    # the command's settings flags, {setting: flag}: what settings_of reads
    p.set_defaults(setting_flags={**(p.get_default("setting_flags") or {}), name: flag})
    if choices(name):
        kwargs.setdefault("metavar", "{" + ",".join(choices(name)) + "}")
    p.add_argument(flag, dest=name, default=None,
                   help=f"{help} (default {_default_text(name)}; env {variable(name)})",
                   **kwargs)


def _default_text(name: str) -> str:
    from livetable.config import Settings

    value = getattr(Settings(), name)
    if name == "db":
        return "DATA_DIR/livetable.sqlite3"
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, float):
        return f"{value:g}"
    return "unset" if value is None else "none" if value in ([], {}) else str(value)


def settings_of(args: argparse.Namespace) -> Settings:
    """The settings of the environment and the flags given; a bad value is a usage error
    naming its variable or flag."""
    from livetable.config import SettingsError, load_settings, unknown_variables

    for warning in unknown_variables():
        print(f"livetable: warning: {warning}", file=sys.stderr)
    given: dict[str, str] = getattr(args, "setting_flags", {})
    flags = {name: (flag, getattr(args, name)) for name, flag in given.items()
             if getattr(args, name) is not None}
    try:
        return load_settings(flags=flags)
    except SettingsError as exc:
        raise UsageError(str(exc)) from None


def add_store_flags(p: argparse.ArgumentParser) -> None:
    setting(p, "--db", "db", "SQLite file")
    setting(p, "--data-dir", "data_dir", "data directory: database and signing secret")
    setting(p, "--redis", "redis_url",
            "Redis URL: scale-out mode, its bus, commands and leases (needs --postgres)")
    setting(p, "--postgres", "postgres_url",
            "PostgreSQL URL (libpq; several hosts with target_session_attrs=read-write "
            "follow a failover): the money of scale-out, Redis staying the bus")
    setting(p, "--postgres-replication", "postgres_replication",
            "sync: bets only while the PostgreSQL primary has a synchronous standby; none: "
            "one PostgreSQL, accepting that a failover can lose acknowledged bets")


def add_table_flags(p: argparse.ArgumentParser) -> None:
    setting(p, "--tables", "tables", "number of tables t1..tN")
    setting(p, "--table-ids", "table_ids", "comma-separated table ids (instead of --tables)")
