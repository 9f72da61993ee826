"""uvicorn's internals that livetable subclasses and reads are still where they were.

livetable/server/framed_ws.py and livetable/server/guard.py subclass uvicorn's websocket and
HTTP protocols and use attributes that are not uvicorn's public API. pyproject.toml pins
uvicorn to the minor release these tests ran on; when an upgrade moves one of them, this
fails and says which, instead of the server quietly losing a behaviour (an override that is
never called any more: no arrival stamps, no read-ahead; a guard that never times out).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from typing import Any

import pytest
import uvicorn
from uvicorn.config import Config
from uvicorn.protocols.http.flow_control import FlowControl
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol, RequestResponseCycle
from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol
from uvicorn.server import ServerState
from websockets.frames import Frame, Opcode

from livetable.server.framed_ws import ARRIVED_AT, FramedWebSocketProtocol
from livetable.server.guard import ConnectionGuard

WHAT = (f"uvicorn {uvicorn.__version__} moved an internal livetable relies on; check "
        "livetable/server/framed_ws.py and livetable/server/guard.py against it, then "
        "the uvicorn pin in pyproject.toml")


async def _app(scope: Any, receive: Any, send: Any) -> None:
    raise AssertionError("never called")


class _Transport:
    """What the protocols touch of a transport here."""

    def __init__(self) -> None:
        self.paused = False

    def pause_reading(self) -> None:
        self.paused = True

    def is_closing(self) -> bool:
        return False

    def close(self) -> None:
        return None

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 9) if name in ("peername", "sockname") else default


def _made(kind: type[Any]) -> Any:
    config = Config(app=_app, log_level="warning")
    config.load()
    return kind(config=config, server_state=ServerState(), app_state={},
                _loop=asyncio.get_running_loop())


def _attribute(protocol: object, name: str, kind: type | tuple[type, ...]) -> Any:
    assert hasattr(protocol, name), f"{WHAT}: {type(protocol).__name__}.{name} is gone"
    value = getattr(protocol, name)
    assert isinstance(value, kind), (
        f"{WHAT}: {type(protocol).__name__}.{name} is a {type(value).__name__}, not {kind}")
    return value


@pytest.mark.parametrize(("method", "parameters"), [
    ("handle_connect", ["self", "event"]),
    ("send_receive_event_to_app", ["self"]),
    ("handle_parser_exception", ["self"]),
    ("handle_text", ["self", "event"]),
    ("handle_bytes", ["self", "event"]),
    ("handle_cont", ["self", "event"]),
    ("handle_ping", ["self"]),
    ("handle_pong", ["self", "event"]),
])
def test_the_websocket_methods_overridden_or_called_are_uvicorns(
        method: str, parameters: list[str]) -> None:
    found = getattr(WebSocketsSansIOProtocol, method, None)
    assert found is not None, f"{WHAT}: WebSocketsSansIOProtocol.{method} is gone"
    assert list(inspect.signature(found).parameters) == parameters, (
        f"{WHAT}: WebSocketsSansIOProtocol.{method}{inspect.signature(found)}")


async def test_the_websocket_attributes_read_are_there_with_their_types() -> None:
    ws = _made(FramedWebSocketProtocol)
    assert _attribute(ws, "frames", list) == []
    assert _attribute(ws, "curr_msg_data_type", str) in ("text", "bytes")
    for flag in ("read_paused", "handshake_complete", "close_sent", "disconnected"):
        assert _attribute(ws, flag, bool) is False
    _attribute(ws, "queue", asyncio.Queue)
    _attribute(ws, "writable", asyncio.Event)
    _attribute(ws, "loop", asyncio.AbstractEventLoop)
    _attribute(ws, "logger", logging.Logger)
    assert callable(getattr(_attribute(ws, "conn", object), "send_close", None)), (
        f"{WHAT}: the websockets connection has no send_close")
    assert hasattr(ws, "transport"), f"{WHAT}: WebSocketsSansIOProtocol.transport is gone"


async def test_a_text_frame_goes_through_the_override_stamped() -> None:
    """uvicorn calls our send_receive_event_to_app for a whole text message: it is queued
    with its arrival time, and reading goes on (no pause) below the read-ahead."""
    ws = _made(FramedWebSocketProtocol)
    ws.transport = _Transport()
    ws.handle_text(Frame(Opcode.TEXT, b'{"type":"ping"}'))
    message = ws.queue.get_nowait()
    assert message["text"] == '{"type":"ping"}', f"{WHAT}: handle_text did not queue it"
    assert isinstance(message.get(ARRIVED_AT), int), (
        f"{WHAT}: handle_text no longer calls send_receive_event_to_app (no arrival stamp)")
    assert ws.read_paused is False and ws.transport.paused is False


async def test_the_http_protocol_read_by_the_guard() -> None:
    guard = ConnectionGuard(head_timeout=5, per_address=10)
    http = _made(guard.protocol())
    assert isinstance(http, HttpToolsProtocol)
    for method in ("connection_made", "data_received", "connection_lost"):
        assert method in vars(HttpToolsProtocol), f"{WHAT}: HttpToolsProtocol.{method} is gone"
    assert hasattr(http, "cycle") and http.cycle is None, f"{WHAT}: HttpToolsProtocol.cycle"
    _attribute(http, "loop", asyncio.AbstractEventLoop)
    transport = _Transport()
    http.connection_made(transport)
    assert _attribute(http, "client", tuple) == ("127.0.0.1", 9)
    assert http.transport is transport, f"{WHAT}: HttpToolsProtocol.transport"
    http.connection_lost(None)
    cycle = RequestResponseCycle(
        scope={}, transport=transport,
        flow=FlowControl(transport),
        logger=logging.getLogger(), access_logger=logging.getLogger(),
        access_log=False, default_headers=[], message_event=asyncio.Event(),
        expect_100_continue=False, keep_alive=True, on_response=lambda: None)
    assert _attribute(cycle, "response_complete", bool) is False
    assert _attribute(cycle, "more_body", bool) is True
