"""``livetable serve``, ``gateway`` and ``engine``: the service itself, whole or in its roles.

Why one module for three commands: they are one process with different roles (embedded:
gateway and engine together; scale-out: each alone, sharing PostgreSQL and Redis), so they
share their flags (:func:`_add_server_flags`, every one a setting of
:class:`livetable.config.Settings`) and one start (:func:`_run_server`): the checks scale-out
needs, the services, the lines printed at start, then uvicorn with the connection guard and
the framed websocket. Nothing heavy is imported until a server is really started, so
``livetable --help`` stays quick.
"""

from __future__ import annotations

import argparse
import contextlib
from typing import TYPE_CHECKING

from livetable.cli.arguments import (
    Commands,
    UsageError,
    add_store_flags,
    add_table_flags,
    setting,
    settings_of,
)

if TYPE_CHECKING:
    import asyncio

    import uvicorn
    from starlette.applications import Starlette

    from livetable.config import Settings
    from livetable.server.process import Role
    from livetable.services import Services


def cmd_serve(args: argparse.Namespace) -> int:
    return _run_server(args, ("gateway", "engine"))


def cmd_gateway(args: argparse.Namespace) -> int:
    if not settings_of(args).redis_url:
        raise UsageError("a gateway needs --redis URL (or LIVETABLE_REDIS_URL)")
    return _run_server(args, ("gateway",))


def cmd_engine(args: argparse.Namespace) -> int:
    if not settings_of(args).redis_url:
        raise UsageError("an engine needs --redis URL (or LIVETABLE_REDIS_URL)")
    return _run_server(args, ("engine",))


def _run_server(args: argparse.Namespace, roles: tuple[Role, ...]) -> int:
    import logging

    import uvicorn

    from livetable.config import SettingsError
    from livetable.operator.registry import RegistryError
    from livetable.server.app import create_app
    from livetable.services import Services

    settings = settings_of(args)
    _check_scale_out(settings, roles)
    logging.basicConfig(level=args.log_level.upper(),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        services = Services(settings, roles=roles)
    except (RegistryError, SettingsError) as exc:  # the registry; the shoe key (missing,
        # short, not creatable)
        raise UsageError(str(exc)) from None
    app = create_app(settings, services)
    _announce(settings, roles)
    server = uvicorn.Server(server_config(settings, services, app, args.log_level))
    with contextlib.suppress(KeyboardInterrupt):
        server.run()
    # not started: the port taken, say (uvicorn's own exit code for it)
    return 0 if server.started else STARTUP_FAILURE


#: uvicorn's exit code when the server could not start.
STARTUP_FAILURE = 3


def server_config(settings: Settings, services: Services, app: Starlette,
                  log_level: str) -> uvicorn.Config:
    """How a livetable process runs ``app`` on uvicorn — the one place that says so (the
    benchmarks' server runs the same): the garbage collector's timing, the connection guard
    at the door, the framed websocket, and the proxies trusted."""
    import uvicorn

    from livetable.server.gcpolicy import Collector
    from livetable.server.guard import ConnectionGuard

    services.collector = Collector(
        services.busy, interval=settings.gc_interval, closing=services.closing,
        on_collect=services.metrics.gc_pause.observe) if settings.gc_interval > 0 else None
    guard = ConnectionGuard(head_timeout=settings.request_head_timeout,
                            body_timeout=settings.request_body_timeout,
                            per_address=settings.connections_per_address,
                            trusted=settings.trusted_proxies)
    # X-Forwarded-For only from the proxies named: uvicorn would trust 127.0.0.1 (or
    # FORWARDED_ALLOW_IPS) by default, and any local process could claim any address.
    # permessage-deflate off: table events and answers go out framed once, uncompressed
    # (framed_ws), so it would only inflate the clients' small frames, at ~45 KB of zlib
    # state a connection (docs/benchmarks.md, "permessage-deflate")
    return uvicorn.Config(app, host=settings.host, port=settings.port,
                          ws=websocket_protocol(settings), http=guard.protocol(),
                          ws_max_size=64 * 1024, ws_per_message_deflate=False,
                          log_level=log_level, lifespan="on", timeout_graceful_shutdown=5,
                          proxy_headers=bool(settings.trusted_proxies),
                          forwarded_allow_ips=",".join(settings.trusted_proxies) or None)


def websocket_protocol(settings: Settings) -> type[asyncio.Protocol]:
    """The protocol uvicorn hands an upgraded connection to (``--ws-transport``): both
    offer the app the same ASGI websocket and the same scope extensions."""
    if settings.ws_transport == "picows":
        from livetable.server.picows_ws import PicowsWebSocketProtocol

        return PicowsWebSocketProtocol
    from livetable.server.framed_ws import FramedWebSocketProtocol

    return FramedWebSocketProtocol


def _check_scale_out(settings: Settings, roles: tuple[Role, ...]) -> None:
    """What processes sharing a Redis must share, checked before anything starts; and
    that scale-out has its store for money (Redis holds none)."""
    from livetable.services import SCALE_OUT_NEEDS_POSTGRES

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


def _announce(settings: Settings, roles: tuple[Role, ...]) -> None:
    """The lines a process prints as it starts: its roles, tables and store, and where to
    open it."""
    from livetable.config import masked_url

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


def _add_server_flags(p: argparse.ArgumentParser) -> None:
    setting(p, "--host", "host", "interface to listen on")
    setting(p, "--port", "port", "port")
    add_store_flags(p)
    setting(p, "--redis-pubsub-cluster", "redis_pubsub_cluster",
            "a Redis Cluster node URL for pub/sub only (sharded); the leases and commands "
            "stay on --redis")
    add_table_flags(p)
    setting(p, "--stream", "streams", "the table's live video: URL of its HLS playlist, "
            "absolute or a path on this origin (repeatable; replaces the variable's "
            "t1=URL,t2=URL)", action="append", metavar="TABLE=URL")
    setting(p, "--presenter", "presenters", "a dealer's photo, shown at the table while "
            "they deal, and the staff token id that may sign in as them: URL absolute or "
            "a path on this origin (repeatable; replaces the variable's "
            "anna:Anna=URL,bee:Bee=URL)", action="append", metavar="[STAFF_ID:]NAME=URL")
    p.add_argument("--log-level", default="info",
                   choices=["debug", "info", "warning", "error"])
    setting(p, "--wallet", "wallet", "who holds players' money: this ledger (internal) or "
            "the operator (seamless: needs --wallet-url and LIVETABLE_WALLET_SECRET)")
    setting(p, "--wallet-url", "wallet_url", "the operator's wallet, e.g. "
            "https://operator.example/wallet (calls POST {url}/debit …)")
    setting(p, "--operators", "operators", "the operator registry (TOML): operators, their "
            "secrets by reference, wallets, currencies and limits; read again on SIGHUP")
    setting(p, "--betting-seconds", "betting_seconds", "betting countdown")
    setting(p, "--reveal-interval", "reveal_interval", "seconds between reveals in auto mode")
    setting(p, "--next-round-after", "next_round_after",
            "manual mode: open the next round by itself this many seconds after a round "
            "ends (0: the dealer opens every round)")
    setting(p, "--demo", "demo", "guest players with a demo balance",
            action=argparse.BooleanOptionalAction)
    setting(p, "--mode", "mode", "new tables start in auto (server deals) or manual "
            "(dealer console) mode; a table already in the store keeps its own (said at "
            "start; the dealer console switches it)")
    setting(p, "--allowed-origins", "allowed_origins",
            "comma-separated websocket origins (none: same origin)")
    setting(p, "--ws-transport", "ws_transport", "what serves the websockets once "
            "uvicorn has read the upgrade: picows' frame parser or uvicorn's own protocol "
            "(the same frames and behaviour; picows takes less memory and CPU a "
            "connection)")


def add_serve(commands: Commands) -> None:
    p = commands.add_parser("serve", help="run the service (embedded default: no flags)")
    _add_server_flags(p)
    p.set_defaults(handler=cmd_serve)


def add_roles(commands: Commands) -> None:
    for name, handler, text in (
        ("gateway", cmd_gateway, "scale-out: a stateless websocket/HTTP gateway (needs --redis)"),
        ("engine", cmd_engine, "scale-out: runs the tables it holds a lease on (needs --redis)"),
    ):
        p = commands.add_parser(name, help=text)
        _add_server_flags(p)
        p.set_defaults(handler=handler)
