"""The upgrade request as :mod:`livetable.server.picows_ws` takes it from uvicorn: its ASGI
scope, the key picows answers, the HTTP answers that refuse it, and picows' protocol made
for it.

uvicorn's HTTP protocol (httptools', under the guard) has parsed the request (and checked
``Upgrade: websocket``) and hands the websocket protocol the request rebuilt: the request
line, then ``name: value`` lines with the names in lower case. The scope is uvicorn's own
websocket scope for it.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import logging
from collections.abc import Callable
from typing import Any
from urllib.parse import unquote

import picows.picows
from picows.picows import WSAutoPingStrategy
from uvicorn.config import Config
from uvicorn.protocols.utils import (
    get_client_addr,
    get_local_addr,
    get_path_with_query_string,
    get_remote_addr,
    is_ssl,
)

#: picows' protocol class (its stub does not declare it).
WSProtocol: Any = getattr(picows.picows, "WSProtocol")  # noqa: B009
#: picows' read buffer at the start (it takes 2 KiB at least): it doubles when a read
#: fills it, so a large message grows it and an idle viewer keeps it small.
READ_BUFFER = 1024
#: picows logs every connection and disconnection at INFO: its warnings and errors only.
_log = logging.getLogger("livetable.picows")
_log.setLevel(logging.WARNING)
#: An adapter, not a Logger: picows then makes no child logger per connection.
_PICOWS_LOG = logging.LoggerAdapter(_log, {})

FORBIDDEN = (b"HTTP/1.1 403 Forbidden\r\nconnection: close\r\ncontent-length: 0\r\n"
             b"content-type: text/plain; charset=utf-8\r\n\r\n")
SERVER_ERROR = (b"HTTP/1.1 500 Internal Server Error\r\nconnection: close\r\n"
                b"content-type: text/plain; charset=utf-8\r\ncontent-length: 21\r\n\r\n"
                b"Internal Server Error")
BAD_UPGRADE = (b"HTTP/1.1 400 Bad Request\r\nconnection: close\r\ncontent-length: 0\r\n"
               b"content-type: text/plain; charset=utf-8\r\n\r\n")


def read_upgrade(request: bytes, config: Config, transport: asyncio.Transport,
                 app_state: dict[str, Any]) -> tuple[dict[str, Any], bytes, bytes] | None:
    """``(scope, Sec-WebSocket-Key, the bytes after the request)``; None for a request
    that cannot be a websocket (RFC 6455 §4.2.1: a 16-byte key, version 13)."""
    head, _, rest = request.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    target = lines[0].split(b" ")[1].decode("latin-1")
    headers = []
    subprotocols: list[str] = []
    key = b""
    for line in lines[1:]:
        name, _, value = line.partition(b": ")
        headers.append((name, value))
        if name == b"sec-websocket-key":
            key = value
        elif name == b"sec-websocket-protocol":
            subprotocols += [s.strip() for s in value.decode("latin-1").split(",")]
    if not valid_key(key) or (b"sec-websocket-version", b"13") not in headers:
        return None
    raw_path, _, query = target.partition("?")
    root = config.root_path
    scope = {
        "type": "websocket", "asgi": {"version": config.asgi_version, "spec_version": "2.4"},
        "http_version": "1.1", "scheme": "wss" if is_ssl(transport) else "ws",
        "server": get_local_addr(transport), "client": get_remote_addr(transport),
        "root_path": root, "path": root + unquote(raw_path),
        "raw_path": (root + raw_path).encode("ascii"), "query_string": query.encode("ascii"),
        "headers": headers, "subprotocols": subprotocols, "state": app_state.copy(),
    }
    return scope, key, rest


def valid_key(key: bytes) -> bool:
    """A Sec-WebSocket-Key: 16 bytes, base64."""
    try:
        return len(base64.b64decode(key, validate=True)) == 16
    except binascii.Error:
        return False


def feed(protocol: asyncio.BufferedProtocol, data: bytes) -> None:
    """Hand ``data`` to a buffered protocol as reads would, in as many as its buffer
    takes."""
    view = memoryview(data)
    while view:
        buffer = memoryview(protocol.get_buffer(len(view)))
        n = min(len(buffer), len(view))
        buffer[:n] = view[:n]
        protocol.buffer_updated(n)
        view = view[n:]


def picows_protocol(listener: Callable[[Any], Any], max_size: int) -> Any:
    """picows' server protocol for a connection whose upgrade uvicorn read: no handshake
    timeout (the request is fed at once), no automatic ping or pong (picows_ws keeps the
    keepalive on a timer and charges each pong to the frame budget), frames of at most
    ``max_size`` bytes."""
    return WSProtocol(None, None, False, listener, _PICOWS_LOG, True, None,
                      False, 20, 20, WSAutoPingStrategy.PING_WHEN_IDLE, False,
                      max_size, None, READ_BUFFER)


def log_upgrade(logger: logging.Logger, scope: Any, outcome: str) -> None:
    """uvicorn's line for a websocket's upgrade: ``[accepted]`` or the status refusing it."""
    if logger.isEnabledFor(logging.INFO):
        logger.info('%s - "WebSocket %s" %s', get_client_addr(scope),
                    get_path_with_query_string(scope), outcome)
