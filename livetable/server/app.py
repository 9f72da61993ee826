"""The Starlette application: which endpoints a process serves, and what wraps them.

Every process serves its health (``server/health.py``); a gateway serves the websockets,
the public API (``server/public_api.py``), the operator's API (``server/operator_api.py``)
and the static files too, while an engine serves nothing else. The endpoints find the
process (:class:`~livetable.server.process.Process`, built by
:class:`~livetable.services.Services`) on the app (``app.state.services``),
started and stopped by the app's lifespan. Around them: the per-address rate limit of
``/api/*`` first (a refused request costs nothing more), then compression; and the store's
deliberate refusals answered as HTTP errors, one handler each.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any

from brotli_asgi import BrotliMiddleware
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Receive, Scope, Send
from starlette.websockets import WebSocket

from livetable.accounts import AccountError
from livetable.config import Settings
from livetable.server import health, operator_api, public_api
from livetable.server.process import Process
from livetable.server.ratelimit import RateLimits
from livetable.server.responses import error_response
from livetable.store.base import StoreUnavailable, UnknownPlayer

log = logging.getLogger("livetable.app")


#: Paths never compressed: formats that are compressed already.
_PRECOMPRESSED = [r"\.(png|jpe?g|gif|webp|avif|ico|woff2?|gz|br|zip)$"]


def compression(settings: Settings) -> list[Middleware]:
    """Brotli for HTTP responses when the browser takes it, else gzip (pages, scripts and
    JSON shrink four- to sixfold: i18n and table.js are most of a first visit).

    HTTP only: the middleware passes every non-``http`` scope through untouched, so
    websocket frames are never compressed here — they are small, latency-bound and sent
    pre-framed to many clients (server/framed_ws.py). Responses under 500 bytes stay as they
    are. Quality 4 costs little CPU per response; ``LIVETABLE_COMPRESS=0`` turns it off
    behind a proxy that compresses (deploy/nginx.conf does, for what arrives uncompressed).
    """
    if not settings.compress:
        return []
    return [Middleware(BrotliMiddleware, quality=4, minimum_size=500, gzip_fallback=True,
                       excluded_handlers=_PRECOMPRESSED)]


async def _store_unavailable(request: Request, exc: Exception) -> Response:
    """An HTTP request the store could not serve now: 503, try again shortly."""
    log.warning("%s %s: %s", request.method, request.url.path, exc)
    return error_response(503, "unavailable",
                          "the service is unavailable; try again shortly", retry_after=1)


async def _unknown_player(request: Request, exc: Exception) -> Response:
    return error_response(404, "unknown_player", str(exc))


async def _bad_player_id(request: Request, exc: Exception) -> Response:
    return error_response(400, "bad_player_id", str(exc))


#: What the store raises on purpose, as HTTP answers; anything else is a bug (500, logged
#: with its traceback by Starlette).
STORE_ERRORS: dict[Any, Any] = {StoreUnavailable: _store_unavailable,
                                UnknownPlayer: _unknown_player, AccountError: _bad_player_id}


class ApiRateLimit:
    """``/api/*`` requests per client address (``api_rate``): 429 with Retry-After past it.

    Pure ASGI, so websockets and static files pass untouched. The address is the peer's,
    or the one a trusted proxy forwarded (uvicorn's proxy-headers middleware, outside this).
    """

    def __init__(self, app: ASGIApp, limits: RateLimits) -> None:
        self.app = app
        self.limits = limits

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        # the operator's own endpoints are signed (a forgery costs one HMAC of at most
        # 16 KiB to refuse), and one operator server launches every player's session from
        # one address: a per-address limit meant for browsers would throttle it
        if (scope["type"] == "http" and scope["path"].startswith("/api/")
                and not scope["path"].startswith("/api/operator/")):
            client = scope.get("client")
            address = client[0] if client else "?"
            if not self.limits.allow(self.limits.api, "api", address):
                response = error_response(
                    429, "rate_limited", "too many requests from this address",
                    retry_after=self.limits.retry_after(self.limits.api, "api", address))
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


@contextlib.asynccontextmanager
async def lifespan(app: Starlette) -> AsyncIterator[None]:
    svc: Process = app.state.services
    await svc.start()
    try:
        yield
    finally:
        await svc.stop()


#: Every process serves these.
HEALTH = (
    Route("/healthz", health.healthz),
    Route("/readyz", health.readyz),
    Route("/metrics", health.metrics),
)
#: A gateway serves these too (and the static files).
API = (
    Route("/api/tables", public_api.tables),
    Route("/api/tables/{table}", public_api.table),
    Route("/api/tables/{table}/roadmap", public_api.roadmap),
    Route("/api/tables/{table}/still.jpg", public_api.still),
    Route("/api/rounds/{round_id}", public_api.round_),
    Route("/api/shoes/{shoe_id}", public_api.shoe),
    Route("/api/bets", public_api.bets),
    Route("/api/guest", public_api.guest, methods=["POST"]),
    Route("/api/operator/sessions", operator_api.launch, methods=["POST"]),
    Route("/api/operator/sessions/{session_id}/end", operator_api.end_session,
          methods=["POST"]),
    Route("/api/operator/wallet", operator_api.wallet_report, methods=["POST"]),
    Route("/dealer", public_api.dealer_page),
)


#: A gateway's websockets, by path (:class:`GatewayApp`).
WEBSOCKETS = {"/ws": public_api.ws_player, "/ws/dealer": public_api.ws_dealer}


class GatewayApp(Starlette):
    """A gateway's app: a websocket to one of :data:`WEBSOCKETS` goes straight to its
    endpoint, past the middleware and the router.

    Why: a websocket's call stays on the stack for the connection's life, and through
    Starlette's middleware and router it held a coroutine frame of each — ~4 KiB an idle
    viewer, a fifth of its cost (docs/benchmarks.md, the transport) — though none of them
    does anything for a websocket: the rate limit and compression are HTTP's, and so are
    the store errors' answers (the gateway answers its own on the socket). Any other
    websocket path is the router's (closed: no such route)."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket":
            endpoint = WEBSOCKETS.get(scope["path"])
            if endpoint is not None:
                scope["app"] = self
                await endpoint(WebSocket(scope, receive, send))
                return
        await super().__call__(scope, receive, send)


def create_app(settings: Settings, svc: Process) -> Starlette:
    """The app of the process ``svc`` (built by :class:`livetable.services.Services`): health
    and metrics for every process; with the gateway role, the websockets, the HTTP API, the
    pages and the static files too."""
    if "gateway" not in svc.roles:  # an engine process serves health and metrics only
        app = Starlette(routes=list(HEALTH), lifespan=lifespan, exception_handlers=STORE_ERRORS)
        app.state.services = svc
        return app
    routes: list[Any] = [*HEALTH, *API]
    if settings.static.is_dir():
        routes.append(Mount("/", StaticFiles(directory=settings.static, html=True),
                            name="static"))
    # Rate limits first: a refused request costs no compression.
    app = GatewayApp(routes=routes, lifespan=lifespan, exception_handlers=STORE_ERRORS,
                     middleware=[Middleware(ApiRateLimit, limits=svc.gateway.limits),
                                 *compression(settings)])
    app.state.services = svc
    return app
