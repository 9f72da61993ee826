"""A gateway's websockets go straight to their endpoint (server/app.py, ``GatewayApp``):
a websocket's call stays on the stack for the connection's life, and each middleware and
the router held a coroutine frame of it (~4 KiB an idle viewer, docs/benchmarks.md)."""

from __future__ import annotations

from typing import Any

import pytest
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route
from starlette.websockets import WebSocket

from livetable.server import app as server_app
from livetable.server.app import GatewayApp


async def _call(app: Any, kind: str, path: str) -> list[dict[str, Any]]:
    """``app`` called as a server would for one request or websocket: what it sent."""
    first = {"type": "websocket.connect"} if kind == "websocket" else {
        "type": "http.request", "body": b""}
    inbox = [first]
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return inbox.pop(0) if inbox else {"type": f"{kind}.disconnect", "code": 1000}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {"type": kind, "path": path, "raw_path": path.encode(), "root_path": "",
             "query_string": b"", "headers": [], "scheme": "http", "method": "GET",
             "server": ("test", 80), "client": ("127.0.0.1", 9), "http_version": "1.1",
             "asgi": {"version": "3.0"}}
    await app(scope, receive, send)
    return sent


async def test_a_websocket_to_the_gateway_passes_no_middleware_and_http_does(
        monkeypatch: pytest.MonkeyPatch) -> None:
    endpoints: list[Any] = []

    async def endpoint(ws: WebSocket) -> None:
        endpoints.append(ws.app)
        await ws.accept()
        await ws.send_text(ws.url.path)
        await ws.close()

    for path in ("/ws", "/ws/dealer"):
        monkeypatch.setitem(server_app.WEBSOCKETS, path, endpoint)
    passed: list[str] = []

    class Recorder:
        def __init__(self, app: Any) -> None:
            self.app = app

        async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
            passed.append(scope["type"])
            await self.app(scope, receive, send)

    async def page(request: Request) -> PlainTextResponse:
        return PlainTextResponse("page")

    app = GatewayApp(routes=[Route("/page", page)], middleware=[Middleware(Recorder)])
    for path in ("/ws", "/ws/dealer"):
        sent = await _call(app, "websocket", path)
        assert [m["type"] for m in sent] == ["websocket.accept", "websocket.send",
                                             "websocket.close"]
        assert sent[1]["text"] == path
    assert endpoints == [app, app]  # the endpoint finds the app (its services) as before
    assert (await _call(app, "http", "/page"))[-1]["body"] == b"page"
    # any other websocket is the router's: no such route, closed
    assert [m["type"] for m in await _call(app, "websocket", "/elsewhere")] == [
        "websocket.close"]
    assert passed == ["http", "websocket"]
