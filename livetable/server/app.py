"""The Starlette application: websocket endpoints, the HTTP API, pages, health, metrics.

Endpoints stay thin: decode, authorize, hand over (to the gateway, the store or a table's
runner), encode. :class:`Services` is what one process runs — in the embedded default all
of it: the SQLite store, the in-process bus, a runner per table and the gateway.
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import msgspec
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Mount, Route, WebSocketRoute
from starlette.staticfiles import StaticFiles
from starlette.websockets import WebSocket

from livetable import protocol as p
from livetable.auth import TokenError, mint, new_guest_id, verify
from livetable.bus import Bus, MemoryBus
from livetable.clock import now_ms
from livetable.config import Settings
from livetable.engine import Timing
from livetable.server.gateway import Gateway
from livetable.server.metrics import Metrics
from livetable.server.runner import DealerAction, TableRunner
from livetable.store.base import Store
from livetable.store.sqlite import SQLiteStore

log = logging.getLogger("livetable.app")

STATIC_DIR = Path(os.environ.get("LIVETABLE_STATIC", Path(__file__).resolve().parents[2] /
                                 "static"))


def limits_of(settings: Settings) -> p.Limits:
    return p.Limits(min=settings.limit_min, max=settings.limit_max, pair_min=settings.pair_min,
                    pair_max=settings.pair_max, round_max=settings.round_max)


def timing_of(settings: Settings) -> Timing:
    return Timing(
        betting_ms=int(settings.betting_seconds * 1000),
        deal_interval_ms=int(settings.deal_interval * 1000),
        reveal_interval_ms=int(settings.reveal_interval * 1000),
        between_rounds_ms=int(settings.between_rounds * 1000),
    )


class Services:
    """Everything one embedded process runs, started and stopped together."""

    def __init__(self, settings: Settings, *, store: Store | None = None,
                 bus: Bus | None = None, rng: random.Random | None = None) -> None:
        self.settings = settings
        self.secret = settings.load_secret()
        self.metrics = Metrics()
        self.store: Store = store or SQLiteStore(settings.db_path, settings.event_log_size * 4)
        self.bus: Bus = bus or MemoryBus()
        self.runners: dict[str, TableRunner] = {}
        self.rng = rng
        self.gateway = Gateway(settings, self.store, self.execute, self.metrics, self.secret)

    async def execute(self, table: str, command: DealerAction) -> p.Ack | p.Error:
        runner = self.runners.get(table)
        if runner is None:
            return p.Error(code="unknown_table", message=f"no table {table!r} here")
        return await runner.execute(command)

    async def start(self) -> None:
        self.bus.subscribe(self.gateway.deliver)
        await self.bus.start()
        for table in self.settings.table_names:
            runner = TableRunner(
                table, self.store, self.bus, name=f"Pok Deng {table.upper()}",
                mode="manual" if self.settings.mode == "manual" else "auto",
                limits=limits_of(self.settings), timing=timing_of(self.settings),
                rng=self.rng, on_settled=self.metrics.settled)
            self.runners[table] = runner
            await runner.start()

    async def stop(self) -> None:
        await self.gateway.shutdown()
        for runner in self.runners.values():
            await runner.stop()
        await self.bus.close()
        await self.store.close()

    async def ready(self) -> tuple[bool, dict[str, Any]]:
        checks: dict[str, Any] = {
            "tables": {t: r.alive for t, r in self.runners.items()},
            "bus": bool(getattr(self.bus, "healthy", True)),
        }
        try:
            await self.store.player("house")
            checks["store"] = True
        except Exception as exc:  # any store failure means not ready
            checks["store"] = f"{type(exc).__name__}: {exc}"
        ok = checks["store"] is True and checks["bus"] and all(checks["tables"].values())
        return ok, checks


def _json(data: bytes, status: int = 200) -> Response:
    return Response(data, status_code=status, media_type="application/json")


def _error(status: int, code: str, message: str) -> JSONResponse:
    return JSONResponse({"error": {"code": code, "message": message}}, status_code=status)


def create_app(settings: Settings, services: Services | None = None) -> Starlette:
    svc = services or Services(settings)
    gateway = svc.gateway

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await svc.start()
        try:
            yield
        finally:
            await svc.stop()

    async def ws_player(websocket: WebSocket) -> None:
        await gateway.serve(websocket, "player")

    async def ws_dealer(websocket: WebSocket) -> None:
        await gateway.serve(websocket, "dealer")

    async def tables(request: Request) -> Response:
        return _json(gateway.tables_json())

    async def table(request: Request) -> Response:
        feed = gateway.feeds.get(request.path_params["table"])
        if feed is None:
            return _error(404, "unknown_table", "no such table")
        return _json(feed.snapshot)

    async def roadmap(request: Request) -> Response:
        feed = gateway.feeds.get(request.path_params["table"])
        if feed is None:
            return _error(404, "unknown_table", "no such table")
        snap = msgspec.json.decode(feed.snapshot, type=p.TableSnapshot)
        return _json(p.ENCODER.encode({"table": snap.id, "shoe_id": snap.shoe_id,
                                       "roadmap": snap.roadmap}))

    async def round_(request: Request) -> Response:
        view = await svc.store.round_view(request.path_params["round_id"])
        if view is None or view["state"] not in ("settled", "cancelled"):
            return _error(404, "unknown_round", "no settled or cancelled round with that id")
        return JSONResponse(view)

    def identity_of(request: Request) -> Any:
        header = request.headers.get("authorization", "")
        if not header.lower().startswith("bearer "):
            return _error(401, "no_token", "send Authorization: Bearer <token>")
        try:
            identity = verify(svc.secret, header[7:].strip())
        except TokenError as exc:
            return _error(401, "bad_token", str(exc))
        if not identity.is_player:
            return _error(403, "not_a_player", "a player or guest token is needed")
        return identity

    async def bets(request: Request) -> Response:
        identity = identity_of(request)
        if isinstance(identity, Response):
            return identity
        try:
            limit = int(request.query_params.get("limit", "20"))
        except ValueError:
            return _error(400, "bad_request", "limit must be an integer")
        entries, cursor = await svc.store.bet_record(identity.id, limit,
                                                     request.query_params.get("before"))
        return _json(p.ENCODER.encode({"bets": entries, "next": cursor}))

    async def guest(request: Request) -> Response:
        if not settings.demo:
            return _error(403, "demo_off", "guest play is off on this server")
        guest_id = new_guest_id()
        name = f"Guest {guest_id[-4:].upper()}"
        token = mint(svc.secret, "guest", guest_id, name, settings.token_ttl)
        player = await svc.store.ensure_player(guest_id, name, settings.guest_balance, now_ms())
        return _json(p.ENCODER.encode({"token": token, "player": player}))

    async def healthz(request: Request) -> Response:
        return JSONResponse({"ok": True})

    async def readyz(request: Request) -> Response:
        ok, checks = await svc.ready()
        return JSONResponse({"ready": ok, "checks": checks}, status_code=200 if ok else 503)

    async def metrics(request: Request) -> Response:
        return PlainTextResponse(svc.metrics.render(),
                                 media_type="text/plain; version=0.0.4")

    async def dealer_page(request: Request) -> Response:
        return RedirectResponse("/dealer.html")

    routes: list[Any] = [
        WebSocketRoute("/ws", ws_player),
        WebSocketRoute("/ws/dealer", ws_dealer),
        Route("/api/tables", tables),
        Route("/api/tables/{table}", table),
        Route("/api/tables/{table}/roadmap", roadmap),
        Route("/api/rounds/{round_id}", round_),
        Route("/api/bets", bets),
        Route("/api/guest", guest, methods=["POST"]),
        Route("/healthz", healthz),
        Route("/readyz", readyz),
        Route("/metrics", metrics),
        Route("/dealer", dealer_page),
    ]
    if STATIC_DIR.is_dir():
        routes.append(Mount("/", StaticFiles(directory=STATIC_DIR, html=True), name="static"))
    app = Starlette(routes=routes, lifespan=lifespan)
    app.state.services = svc
    return app
