"""The ``livetable`` console script.

One :func:`build_parser` holds every subcommand; each command is one small function that
takes the parsed arguments and returns the exit code, registered with
``set_defaults(handler=...)``. To add a command, write ``_add_<name>(commands)`` and call it
from :func:`build_parser`. Errors a user can fix (a bad card, a bad amount) are one line on
stderr and exit code 2, like argparse's own usage errors; :func:`main` returns the code
instead of exiting so that tests can call it.

The commands here are thin: cards are parsed by :mod:`livetable.rules.cards`, money goes
through :func:`~livetable.rules.settlement.settle_bet`, the figures come from
:mod:`livetable.rules.rtp` and :mod:`livetable.rules.simulate`.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, NoReturn, TextIO, TypeAlias

from livetable.rules.cards import CardError, parse_cards

if TYPE_CHECKING:
    from livetable.config import Settings
    from livetable.server.app import Role
from livetable.rules.hands import Hand, hand_of
from livetable.rules.settlement import BetSettlement, BetSpot, settle_bet

EXIT_USAGE = 2

Handler = Callable[[argparse.Namespace], int]


class _Parser(argparse.ArgumentParser):
    """Usage errors on one line (subcommand parsers inherit this class)."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: {message} (see {self.prog} --help)\n")


#: What ``_add_<command>`` functions receive: ``commands.add_parser(name, ...)``.
Commands: TypeAlias = "argparse._SubParsersAction[_Parser]"


class UsageError(Exception):
    """Input the user can fix; main prints it on one line and exits with code 2."""


def _print_json(value: object) -> None:
    print(json.dumps(value, ensure_ascii=False))


# --- settle -------------------------------------------------------------------------------


def _hand_arg(text: str, whose: str) -> Hand:
    try:
        cards = parse_cards(text)
    except CardError as e:
        raise UsageError(f"{whose}: {e}") from None
    if len(cards) != 2:
        raise UsageError(f"{whose}: a hand is exactly two cards, got {len(cards)} in {text!r}")
    return hand_of(cards)


def _hand_json(hand: Hand) -> dict[str, object]:
    return {
        "cards": [str(c) for c in hand.cards],
        "value": hand.value,
        "points": hand.points,
        "label": hand.label,
        "flush": hand.flush,
        "pair": hand.pair,
    }


def _bet_json(bet: BetSettlement) -> dict[str, object]:
    return {"amount": bet.amount, "deducted": bet.deducted, "returned": bet.returned}


def cmd_settle(args: argparse.Namespace) -> int:
    banker = _hand_arg(args.banker, "banker")
    player = _hand_arg(args.player, "player")
    amount: int = args.amount
    if amount <= 0:
        raise UsageError(f"--amount must be a positive integer, got {amount}")
    player_bet = settle_bet(BetSpot.P1, amount, player, banker)
    pair_bet = settle_bet(BetSpot.P1_PAIR, amount, player, banker)
    _print_json(
        {
            "banker": _hand_json(banker),
            "player": _hand_json(player),
            "outcome": player_bet.outcome,
            "odds": player_bet.odds,
            "player_bet": _bet_json(player_bet),
            "pair_bet": _bet_json(pair_bet),
        }
    )
    return 0


def _add_settle(commands: Commands) -> None:
    p = commands.add_parser(
        "settle",
        help="settle a Player 1 and a Player 1 Pair bet for given cards",
        description='Settle one hand, e.g. livetable settle "9D 7C" "KH 9H".',
    )
    p.add_argument("banker", help='the Banker\'s two cards, e.g. "9D 7C"')
    p.add_argument("player", help='the Player\'s two cards, e.g. "KH 9H"')
    p.add_argument("--amount", type=int, default=100, help="bet amount (default 100)")
    p.set_defaults(handler=cmd_settle)


# --- rtp ----------------------------------------------------------------------------------


def _percent(f: Fraction) -> str:
    return f"{float(f) * 100:.4f} % (≈ {float(f) * 100:.2f} %)"


def cmd_rtp(args: argparse.Namespace) -> int:
    from livetable.rules.rtp import exact_rtp  # numpy is loaded only when needed

    report = exact_rtp()
    if args.json:
        _print_json(report.to_json())
        return 0
    cards = 52 * report.decks
    print(f"Exact RTP, {report.decks} decks ({cards} cards), enumerated without replacement")
    rows = [
        ("Player bet, of amount deducted", report.player_rtp_of_deducted),
        ("Player bet, of stake", report.player_rtp_of_stake),
        ("Player Pair bet", report.pair_rtp),
    ]
    for name, value in rows:
        print(f"  {name:<32} {value}  = {_percent(value)}")
    print("Player bet outcomes (per unit: deducted 2):")
    for o in report.outcomes:
        odds = f"{o.odds}:1" if o.outcome != "tie" else "—"
        print(
            f"  {o.outcome:<5} {odds:>3}  returns {o.returned_multiple}  "
            f"p = {o.probability}  ≈ {float(o.probability) * 100:.4f} %"
        )
    return 0


def _add_rtp(commands: Commands) -> None:
    p = commands.add_parser(
        "rtp", help="exact return to player by enumeration over an 8-deck shoe"
    )
    p.add_argument("--json", action="store_true", help="print JSON (fractions as strings)")
    p.set_defaults(handler=cmd_rtp)


# --- simulate -----------------------------------------------------------------------------


def progress_bar(stream: TextIO, width: int = 40) -> Callable[[int, int], None]:
    """A text progress bar on ``stream``, redrawn in place at most once per percent."""
    shown = -1

    def show(done: int, total: int) -> None:
        nonlocal shown
        percent = 100 * done // total if total else 100
        if percent == shown and done < total:
            return
        shown = percent
        filled = width * done // total if total else width
        stream.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total} shoes")
        if done >= total:
            stream.write("\n")
        stream.flush()

    return show


def cmd_simulate(args: argparse.Namespace) -> int:
    from livetable.rules.simulate import simulate

    shoes: int = args.shoes
    if shoes <= 0:
        raise UsageError(f"--shoes must be a positive integer, got {shoes}")
    progress = None if args.quiet else progress_bar(sys.stderr)
    result = simulate(shoes, seed=args.seed, progress=progress)
    if args.json:
        _print_json(result.to_json())
        return 0
    print(f"{result.shoes} shoes, {result.rounds} rounds, seed {result.seed}")
    for name, totals in (("Player", result.player), ("Player Pair", result.pair)):
        low, high = totals.rtp_ci95
        print(
            f"  {name:<12} deducted {totals.deducted}  returned {totals.returned}  "
            f"RTP {float(totals.rtp) * 100:.3f} %  "
            f"(95 % CI {low * 100:.3f} – {high * 100:.3f} %)"
        )
    print(f"  Player RTP of stake {float(result.player_rtp_of_stake) * 100:.3f} %")
    return 0


def _add_simulate(commands: Commands) -> None:
    p = commands.add_parser(
        "simulate", help="deal and settle whole shoes, one unit on every spot every round"
    )
    p.add_argument("--shoes", type=int, required=True, help="number of shoes to deal")
    p.add_argument("--seed", type=int, default=None, help="seed (default: a random shuffle)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.add_argument("--quiet", action="store_true", help="no progress bar on stderr")
    p.set_defaults(handler=cmd_simulate)


# --- serve, token ---------------------------------------------------------------------------


def _setting(p: argparse.ArgumentParser, flag: str, name: str, help: str,
             **kwargs: Any) -> None:
    """A flag of the setting ``name``: no default of its own (not given = the variable or
    the Struct's default, which the help shows) and no type (the Struct converts it)."""
    from livetable.config import choices, variable

    # the command's settings flags, {setting: flag}: what _settings reads
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


def _settings(args: argparse.Namespace) -> Settings:
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


def cmd_serve(args: argparse.Namespace) -> int:
    return _run_server(args, ("gateway", "engine"))


def cmd_gateway(args: argparse.Namespace) -> int:
    if not _settings(args).redis_url:
        raise UsageError("a gateway needs --redis URL (or LIVETABLE_REDIS_URL)")
    return _run_server(args, ("gateway",))


def cmd_engine(args: argparse.Namespace) -> int:
    if not _settings(args).redis_url:
        raise UsageError("an engine needs --redis URL (or LIVETABLE_REDIS_URL)")
    return _run_server(args, ("engine",))


def _run_server(args: argparse.Namespace, roles: tuple[Role, ...]) -> int:
    import logging

    import uvicorn

    from livetable.config import SettingsError, masked_url
    from livetable.server.app import SCALE_OUT_NEEDS_POSTGRES, Services, create_app
    from livetable.server.gcpolicy import Collector

    settings = _settings(args)
    if settings.redis_url and not settings.postgres_url:
        raise UsageError(SCALE_OUT_NEEDS_POSTGRES)
    if settings.redis_url and not settings.secret:
        raise UsageError("with --redis every process must share LIVETABLE_SECRET (tokens "
                         "minted by one must verify on all)")
    if (settings.redis_url and "engine" in roles and settings.shoe_key is None
            and settings.shoe_key_file is None):
        raise UsageError("with --redis every engine must share the shoe key: set "
                         "LIVETABLE_SHOE_KEY or LIVETABLE_SHOE_KEY_FILE (openssl rand -hex "
                         "32; see docs/operations.md). Gateways do not need it")
    logging.basicConfig(level=args.log_level.upper(),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    from livetable.operator.registry import RegistryError

    try:
        services = Services(settings, roles=roles)
    except (RegistryError, SettingsError) as exc:  # the registry; the shoe key (missing,
        # short, not creatable)
        raise UsageError(str(exc)) from None
    services.collector = Collector(
        services.busy, interval=settings.gc_interval,
        on_collect=services.metrics.gc_pause.observe) if settings.gc_interval > 0 else None
    app = create_app(settings, services, roles=roles)
    shown = "localhost" if settings.host in ("0.0.0.0", "127.0.0.1", "::") else settings.host
    store = (f"embedded, database {settings.db_path}" if not settings.postgres_url
             else f"PostgreSQL {masked_url(settings.postgres_url)}" + (
                 f", bus Redis {masked_url(settings.redis_url)}" if settings.redis_url else ""))
    print(f"livetable {'+'.join(roles)}: tables {','.join(settings.table_names)}; {store}",
          flush=True)
    if "gateway" in roles:
        print(f"livetable: open http://{shown}:{settings.port}/ in a browser "
              f"(dealer console: http://{shown}:{settings.port}/dealer)", flush=True)
    else:
        print(f"livetable: health and metrics at http://{shown}:{settings.port}/readyz, "
              f"/metrics", flush=True)
    from livetable.server.framed_ws import FramedWebSocketProtocol
    from livetable.server.guard import ConnectionGuard

    guard = ConnectionGuard(head_timeout=settings.request_head_timeout,
                            body_timeout=settings.request_body_timeout,
                            per_address=settings.connections_per_address,
                            trusted=settings.trusted_proxies)
    # X-Forwarded-For only from the proxies named: uvicorn would trust 127.0.0.1 (or
    # FORWARDED_ALLOW_IPS) by default, and any local process could claim any address.
    uvicorn.run(app, host=settings.host, port=settings.port, ws=FramedWebSocketProtocol,
                http=guard.protocol(), ws_max_size=64 * 1024, log_level=args.log_level,
                lifespan="on", timeout_graceful_shutdown=5,
                proxy_headers=bool(settings.trusted_proxies),
                forwarded_allow_ips=",".join(settings.trusted_proxies) or None)
    return 0


def _add_server_flags(p: argparse.ArgumentParser) -> None:
    _setting(p, "--host", "host", "interface to listen on")
    _setting(p, "--port", "port", "port")
    _add_store_flags(p)
    _setting(p, "--redis-pubsub-cluster", "redis_pubsub_cluster",
             "a Redis Cluster node URL for pub/sub only (sharded); the leases and commands "
             "stay on --redis")
    _add_table_flags(p)
    _setting(p, "--stream", "streams", "the table's live video: URL of its HLS playlist, "
             "absolute or a path on this origin (repeatable; replaces the variable's "
             "t1=URL,t2=URL)", action="append", metavar="TABLE=URL")
    _setting(p, "--presenter", "presenters", "a dealer's photo, shown at the table while "
             "they deal: URL absolute or a path on this origin (repeatable; replaces the "
             "variable's Anna=URL,Bee=URL)", action="append", metavar="NAME=URL")
    p.add_argument("--log-level", default="info",
                   choices=["debug", "info", "warning", "error"])
    _setting(p, "--wallet", "wallet", "who holds players' money: this ledger (internal) or "
             "the operator (seamless: needs --wallet-url and LIVETABLE_WALLET_SECRET)")
    _setting(p, "--wallet-url", "wallet_url", "the operator's wallet, e.g. "
             "https://operator.example/wallet (calls POST {url}/debit …)")
    _setting(p, "--operators", "operators", "the operator registry (TOML): operators, their "
             "secrets by reference, wallets, currencies and limits; read again on SIGHUP")
    _setting(p, "--betting-seconds", "betting_seconds", "betting countdown")
    _setting(p, "--reveal-interval", "reveal_interval", "seconds between reveals in auto mode")
    _setting(p, "--next-round-after", "next_round_after",
             "manual mode: open the next round by itself this many seconds after a round "
             "ends (0: the dealer opens every round)")
    _setting(p, "--demo", "demo", "guest players with a demo balance",
             action=argparse.BooleanOptionalAction)
    _setting(p, "--mode", "mode", "new tables start in auto (server deals) or manual "
             "(dealer console) mode; a table already in the store keeps its own (said at "
             "start; the dealer console switches it)")
    _setting(p, "--allowed-origins", "allowed_origins",
             "comma-separated websocket origins (none: same origin)")


def _add_store_flags(p: argparse.ArgumentParser) -> None:
    _setting(p, "--db", "db", "SQLite file")
    _setting(p, "--data-dir", "data_dir", "data directory: database and signing secret")
    _setting(p, "--redis", "redis_url",
             "Redis URL: scale-out mode, its bus, commands and leases (needs --postgres)")
    _setting(p, "--postgres", "postgres_url",
             "PostgreSQL URL (libpq; several hosts with target_session_attrs=read-write "
             "follow a failover): the money of scale-out, Redis staying the bus")


def _add_table_flags(p: argparse.ArgumentParser) -> None:
    _setting(p, "--tables", "tables", "number of tables t1..tN")
    _setting(p, "--table-ids", "table_ids", "comma-separated table ids (instead of --tables)")


def _add_serve(commands: Commands) -> None:
    p = commands.add_parser("serve", help="run the service (embedded default: no flags)")
    _add_server_flags(p)
    p.set_defaults(handler=cmd_serve)


def _add_roles(commands: Commands) -> None:
    for name, handler, text in (
        ("gateway", cmd_gateway, "scale-out: a stateless websocket/HTTP gateway (needs --redis)"),
        ("engine", cmd_engine, "scale-out: runs the tables it holds a lease on (needs --redis)"),
    ):
        p = commands.add_parser(name, help=text)
        _add_server_flags(p)
        p.set_defaults(handler=handler)


def cmd_token(args: argparse.Namespace) -> int:
    from livetable.accounts import AccountError
    from livetable.auth import mint

    settings = _settings(args)
    try:
        secret = settings.load_secret(create=False)
    except FileNotFoundError as exc:
        raise UsageError(f"{exc} (start the server once, or pass --data-dir)") from None
    ttl = args.ttl if args.ttl is not None else settings.token_ttl
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
        if args.player.startswith("g_"):
            raise UsageError(f"player id {args.player!r} is reserved (g_… ids are guests')")
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
    settings = _settings(args)

    async def deposit() -> int:
        store: Store
        if settings.postgres_url:
            from livetable.store.postgres import PostgresStore

            store = PostgresStore(settings.postgres_url)
        elif settings.redis_url:  # Redis holds no money: never a local file in its stead
            from livetable.server.app import SCALE_OUT_NEEDS_POSTGRES

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


def _add_deposit(commands: Commands) -> None:
    p = commands.add_parser("deposit", help="credit a player's account")
    p.add_argument("--player", required=True, help="player id")
    p.add_argument("--amount", type=int, required=True, help="a positive integer")
    p.add_argument("--id", required=True,
                   help="the deposit's unique id: the same id twice credits once")
    p.add_argument("--name", help="display name, for a new player")
    _add_store_flags(p)
    p.set_defaults(handler=cmd_deposit)


def _add_token(commands: Commands) -> None:
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
    _setting(p, "--data-dir", "data_dir", "data directory holding the secret (unless "
             "LIVETABLE_SECRET is set)")
    p.set_defaults(handler=cmd_token)


def cmd_dealer(args: argparse.Namespace) -> int:
    import asyncio

    from livetable.dealer import run

    url = args.url.rstrip("/")
    if url.startswith("http"):
        url = "ws" + url[4:]
    if not url.endswith("/ws/dealer"):
        url += "/ws/dealer"
    import getpass
    import os

    from livetable.dealer import token_from

    try:
        token = token_from(dict(os.environ), getpass.getpass)
    except (ValueError, EOFError) as exc:
        raise UsageError(str(exc) or "no token") from None
    return asyncio.run(run(url, token, args.table))


def _add_dealer(commands: Commands) -> None:
    p = commands.add_parser(
        "dealer", help="the dealer console in a terminal: card codes and commands on stdin")
    p.add_argument("--url", required=True, help="server, e.g. http://localhost:8000")
    # No --token: a flag's value is in every user's `ps`. The variable, or a prompt.
    p.epilog = ("The token (livetable token --dealer) comes from LIVETABLE_DEALER_TOKEN, or is "
                "asked for without echo; it is never a flag, which `ps` would show. Type "
                "`help` at the console for its commands.")
    p.add_argument("--table", default="t1", help="table id (default t1)")
    p.set_defaults(handler=cmd_dealer)


# --- verify-shoe ----------------------------------------------------------------------------

EXIT_UNFAIR = 1


def _fetch_shoe(url: str, shoe_id: str) -> bytes:
    import urllib.error
    import urllib.parse
    import urllib.request

    address = f"{url.rstrip('/')}/api/shoes/{urllib.parse.quote(shoe_id, safe='')}"
    try:
        with urllib.request.urlopen(address, timeout=10) as response:
            body: bytes = response.read()
            return body
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            raise UsageError(f"{address}: no record of shoe {shoe_id!r} (404): a shoe is "
                             "revealed when it ends, and a manual shoe never is") from None
        raise UsageError(f"{address}: HTTP {exc.code}") from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise UsageError(f"{address}: {reason}") from None


def cmd_verify_shoe(args: argparse.Namespace) -> int:
    """Check a revealed shoe (docs/design.md §7): exit 0 if fair, 1 with every problem if not."""
    import msgspec

    from livetable.rules.fairness import ShoeRecord, check_shoe

    if (args.url is None) == (args.file is None):
        raise UsageError("give --url (the server) or --file (a saved record), not both")
    if args.file is not None:
        try:
            body = sys.stdin.buffer.read() if str(args.file) == "-" else args.file.read_bytes()
        except OSError as exc:
            raise UsageError(f"{args.file}: {exc.strerror}") from None
    else:
        body = _fetch_shoe(args.url, args.shoe_id)
    try:
        shoe = msgspec.json.decode(body, type=ShoeRecord)
    except msgspec.DecodeError as exc:  # ValidationError included
        print(f"shoe {args.shoe_id}: NOT VERIFIED: the record does not parse: {exc}",
              file=sys.stderr)
        return EXIT_UNFAIR
    problems = check_shoe(shoe, seen_commitment=args.commitment)
    if shoe.shoe_id != args.shoe_id:
        problems.insert(0, f"asked for shoe {args.shoe_id}, the record is of {shoe.shoe_id}")
    if args.json:
        _print_json({"shoe_id": args.shoe_id, "ok": not problems, "problems": problems})
    elif problems:
        print(f"shoe {args.shoe_id}: NOT VERIFIED", file=sys.stderr)
        for problem in problems:
            print(f"  - {problem}", file=sys.stderr)
    else:
        settled = sum(r.state == "settled" for r in shoe.rounds)
        print(f"shoe {shoe.shoe_id}: verified. The commitment {shoe.commitment} is the SHA-256 "
              f"of its salt, cut card ({shoe.cut_at}) and order: {len(shoe.order)} cards, "
              f"8 full decks; the opening {shoe.order[0]} and its burns follow the rules; "
              f"{len(shoe.rounds)} round{'' if len(shoe.rounds) == 1 else 's'} ({settled} "
              f"settled, {len(shoe.rounds) - settled} cancelled) dealt from the order in the "
              "dealing order.")
        if args.commitment is None:
            print("  (to prove the order was fixed before the bets, also pass --commitment: "
                  "the one shoe_started announced)")
    return EXIT_UNFAIR if problems else 0


def _add_verify_shoe(commands: Commands) -> None:
    p = commands.add_parser(
        "verify-shoe", help="check that an ended shoe was dealt as committed (provably fair)",
        description="Fetch GET /api/shoes/SHOE_ID and check it: the SHA-256 commitment, a "
                    "full 8-deck shoe, the opening card and its burns, and every round's "
                    "cards as the next slots of the order in the dealing order. Exit 0: "
                    "fair; 1: not (every problem on stderr); 2: could not fetch.")
    p.add_argument("shoe_id", help="e.g. t1.3")
    p.add_argument("--url", help="the server, e.g. http://localhost:8000")
    p.add_argument("--file", type=Path, help="a saved record instead of --url ('-': stdin)")
    p.add_argument("--commitment",
                   help="the commitment shoe_started announced (proves it was fixed before "
                        "the bets)")
    p.add_argument("--json", action="store_true", help="print {shoe_id, ok, problems}")
    p.set_defaults(handler=cmd_verify_shoe)


# --- test-stream --------------------------------------------------------------------------


def cmd_test_stream(args: argparse.Namespace) -> int:
    """The media server of deploy/media/ run locally, and a test card pushed into it."""
    import signal
    import subprocess

    from livetable.media import MediaError, MediaServer, card_command, require

    try:
        width, height = (int(v) for v in args.size.lower().split("x"))
    except ValueError:
        raise UsageError(f"--size is WIDTHxHEIGHT, got {args.size!r}") from None
    if width < 640 or height < 180:
        raise UsageError("--size must be at least 640x180 (the clock strip is 640 wide)")
    if not args.table.replace("-", "").replace("_", "").isalnum():
        raise UsageError(f"--table {args.table!r}: letters, digits, '-' and '_' only")
    server: MediaServer | None = None
    try:
        require("ffmpeg")
        if args.publish:
            target = args.publish
        else:
            server = MediaServer(args.dir, args.rtmp_port, args.http_port).start()
            target = server.publish_url(args.table)
            url = server.playlist_url(args.table, "localhost")
            print(f"livetable test-stream: HLS at {url}\n"
                  f"  serve it with: livetable serve --stream {args.table}={url}", flush=True)
    except MediaError as exc:
        raise UsageError(str(exc)) from None
    command = card_command(["-f", "flv", target], width=width, height=height,
                                label=f"livetable {args.table}",
                                seconds=args.seconds or None)
    print(f"livetable test-stream: test card → {target} (Ctrl-C stops)", flush=True)
    card = subprocess.Popen(command, stdin=subprocess.DEVNULL)
    stop = signal.getsignal(signal.SIGTERM)
    signal.signal(signal.SIGTERM, lambda *_: card.terminate())
    try:
        code = card.wait()
    except KeyboardInterrupt:
        card.terminate()
        code = card.wait()
    finally:
        signal.signal(signal.SIGTERM, stop)
        if server is not None:
            server.stop()
    return 0 if code in (0, 255, -signal.SIGTERM) else 1


def _add_test_stream(commands: Commands) -> None:
    p = commands.add_parser(
        "test-stream", help="a test card with a running clock, through ffmpeg into the "
                            "media server (started here unless --publish)")
    p.add_argument("--table", default="t1", help="stream name = table id (default t1)")
    p.add_argument("--publish", metavar="RTMP_URL",
                   help="push to this media server (rtmp://HOST:1935/live/TABLE) instead of "
                        "starting one")
    p.add_argument("--dir", type=Path, default=Path("data/media"),
                   help="the local media server's directory (default data/media)")
    p.add_argument("--rtmp-port", dest="rtmp_port", type=int, default=1935)
    p.add_argument("--http-port", dest="http_port", type=int, default=8090)
    p.add_argument("--size", default="960x540", help="picture size (default 960x540)")
    p.add_argument("--seconds", type=float, default=0, help="stop after this long (default: "
                                                             "run until stopped)")
    p.set_defaults(handler=cmd_test_stream)


# --- operator: the reference wallet and the wallet report ----------------------------------


def cmd_operator_demo(args: argparse.Namespace) -> int:
    import os

    import uvicorn

    from livetable.operator.reference import Faults, create_operator_app

    secret = args.secret or os.environ.get("LIVETABLE_WALLET_SECRET", "")
    if not secret:
        raise UsageError("give --secret or LIVETABLE_WALLET_SECRET (livetable signs wallet "
                         "calls with it)")
    try:
        faults = Faults.parse(args.fault or [], seed=args.seed, hang=args.hang, slow=args.slow)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    app = create_operator_app(secret.encode(), initial_balance=args.initial_balance,
                              faults=faults)
    print(f"operator-demo: wallet at http://{args.host}:{args.port}/wallet "
          f"(livetable --wallet seamless --wallet-url http://{args.host}:{args.port}/wallet); "
          f"books at /state", flush=True)
    uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level)
    return 0


def _add_operator_demo(commands: Commands) -> None:
    p = commands.add_parser(
        "operator-demo", help="a reference operator: a seamless wallet server with faults",
        description="A real wallet server for --wallet seamless: checks signatures, is "
                    "idempotent by tx_id, keeps balances, and injects faults on request.")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=9000)
    p.add_argument("--secret", help="the wallet secret (default: LIVETABLE_WALLET_SECRET)")
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


def cmd_wallet_report(args: argparse.Namespace) -> int:
    import asyncio

    import msgspec

    from livetable.operator.log import WalletCall
    from livetable.operator.report import report

    settings = _settings(args)

    async def calls() -> list[WalletCall]:
        if settings.postgres_url:
            from livetable.operator.log_postgres import PostgresWalletLog
            from livetable.store.postgres import PostgresStore

            store = PostgresStore(settings.postgres_url, max_connections=2)
            try:
                return await PostgresWalletLog(store).calls(args.round, args.player)
            finally:
                await store.close()
        if settings.redis_url:  # Redis holds no money: never a local file in its stead
            from livetable.server.app import SCALE_OUT_NEEDS_POSTGRES

            raise UsageError(SCALE_OUT_NEEDS_POSTGRES)
        from livetable.operator.log_sqlite import SQLiteWalletLog

        if not settings.db_path.exists():
            raise UsageError(f"no database at {settings.db_path} (pass --data-dir or --db)")
        wallet_log = SQLiteWalletLog(settings.wallet_db_path, settings.sqlite_sync,
                                     moved_from=settings.db_path)
        try:
            return await wallet_log.calls(args.round, args.player)
        finally:
            await wallet_log.close()

    found = asyncio.run(calls())
    if args.operator is not None:
        from livetable.operator.registry import operator_of

        found = [call for call in found if operator_of(call.player_id) == args.operator]
    if args.daily:
        from livetable.operator.report import daily

        days = daily(found, args.operator)
        if args.json:
            print(msgspec.json.encode({"days": days}).decode())
            return 0
        print(f"{'day':<11}{'operator':<12}{'table':<8}{'currency':<9}{'rounds':>7}"
              f"{'players':>8}{'stakes':>12}{'returns':>12}{'ggr':>12}")
        for d in days:
            print(f"{d.day:<11}{d.operator:<12}{d.table_id:<8}{d.currency:<9}{d.rounds:>7}"
                  f"{d.players:>8}{d.stakes:>12}{d.returns:>12}{d.ggr:>12}")
        return 0
    result = report(found)
    if args.json:
        print(msgspec.json.encode(result).decode())
        return 0
    for call in result.calls:
        print(f"{call.tx_id:<34} {call.method:<8} {call.state:<8} {call.amount:>10} "
              f"{call.player_id:<16} {call.round_id:<14} {call.attempts:>3} "
              f"{(call.answer or '')[:60]}")
    print()
    print(f"{'round':<16}{'debited':>10}{'unknown':>10}{'credited':>10}{'rolled back':>12}"
          f"{'net':>10}{'open':>6}{'owed':>6}")
    for row in [*result.rounds, result.totals]:
        print(f"{row.round_id:<16}{row.debited:>10}{row.debited_unknown:>10}"
              f"{row.credited:>10}{row.rolled_back:>12}{row.net:>10}{row.open_debits:>6}"
              f"{row.undelivered:>6}")
    return 0


def _add_wallet(commands: Commands) -> None:
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
    _add_store_flags(r)
    _add_table_flags(r)
    r.set_defaults(handler=cmd_wallet_report)


def cmd_operators_check(args: argparse.Namespace) -> int:
    """Read a registry as the server would (secrets resolved from this environment); say
    what it holds, or the line that is wrong (exit 1)."""
    from livetable.operator.registry import RegistryError, load

    tables = _settings(args).table_names if args.tables or args.table_ids else None
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
              f"secret(s), wallet {operator.wallet_url or 'none'}; {tables_text}; {currencies}")
    print(f"{args.file}: {len(found.operators)} operator(s), good")
    return 0


def _add_operators(commands: Commands) -> None:
    p = commands.add_parser("operators", help="the operator registry")
    sub = p.add_subparsers(dest="operators_command", metavar="OPERATORS_COMMAND",
                           required=True)
    c = sub.add_parser("check", help="check a registry file (TOML) as the server reads it: "
                                     "the line of the first mistake, or what it holds")
    c.add_argument("file", help="the registry file")
    _add_table_flags(c)
    c.set_defaults(handler=cmd_operators_check)


# --- main ---------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="livetable", description="A real-time live table for Pok Deng."
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    _add_settle(commands)
    _add_rtp(commands)
    _add_simulate(commands)
    _add_serve(commands)
    _add_token(commands)
    _add_dealer(commands)
    _add_roles(commands)
    _add_deposit(commands)
    _add_verify_shoe(commands)
    _add_test_stream(commands)
    _add_operator_demo(commands)
    _add_wallet(commands)
    _add_operators(commands)
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


if __name__ == "__main__":
    sys.exit(main())
