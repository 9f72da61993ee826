"""The websocket on picows: uvicorn reads the upgrade, picows parses the frames, and the app
sees the same ASGI websocket and scope extensions as on :mod:`livetable.server.framed_ws`.

Why: a connection's cost is mostly its transport. uvicorn's websockets-sansio protocol took
~22 KiB and ~0.4 ms of CPU a viewer, picows' ~16 KiB and ~0.12 ms (docs/benchmarks.md, "The
websocket transport for ``/ws``"). picows' parser is C (Cython) over one read buffer that
starts small (:data:`READ_BUFFER`) and grows on demand; a frame picows frames (ASGI's
``websocket.send``, a ping, the close) goes out with one ``send()`` when nothing is queued
before it; a frame framed once for every socket goes to an idle one with the socket's own
``send`` (the fan-out: the direct line, :mod:`.picows_extensions`), else through the
transport's ``write`` (``write_frame``: a direct answer; docs/benchmarks.md, "Fan-out at
3,000 viewers against picows").

How it slots in. uvicorn's HTTP protocol builds this class as its websocket protocol, hands
it the upgrade request and the transport. Here the scope is made and the app started, as
uvicorn does; the app checks the origin and accepts (or closes: 403). On the accept a picows
``WSProtocol`` is made, fed a minimal upgrade request (the client's key and version; the
real headers are in the scope already), answers 101 itself — without
``Sec-WebSocket-Extensions``, so permessage-deflate is declined — and becomes the
transport's protocol; this object is its listener from then on. What picows leaves to its
user is done here as uvicorn's protocol does it: pongs, the close handshake, a message's
fragments joined (and held to ``ws_max_size``), RSV bits refused, invalid UTF-8 closed 1007,
the keepalive ping (``ws_ping_interval``/``ws_ping_timeout``), the drain on a server stop
(:meth:`shutdown`, 1012).

The extensions are framed_ws's, with the same meaning (:mod:`.picows_extensions`, with the
direct writer's watch offered here only): ``write_frame`` (False whenever not safe, flow
control included), ``abort_after``, the frame sink and the frame budget
(pings, pongs and fragments before a message's last charged; past the close, at most
:data:`~livetable.server.framed_ws.AFTER_CLOSE` frames read), the read-ahead of
:data:`~livetable.server.framed_ws.READ_AHEAD` messages, each stamped ``arrived_at``.
"""

from __future__ import annotations

import _socket
import asyncio
import logging
import random
import struct
import time
from typing import Any, cast

from picows import (
    WSCloseCode,
    WSFrame,
    WSListener,
    WSMsgType,
    WSTransport,
    WSUpgradeRequest,
    WSUpgradeResponse,
    WSUpgradeResponseWithListener,
)
from uvicorn.config import Config
from uvicorn.protocols.utils import ClientDisconnected
from uvicorn.server import ServerState

from livetable.server.framed_ws import (
    ABORT,
    ARRIVED_AT,
    BUDGET,
    DIRECT,
    EXTENSION,
    READ_AHEAD,
    SINK,
    DirectWatch,
    FrameBudget,
    FrameSink,
    Line,
)
from livetable.server.picows_extensions import ScopeExtensions
from livetable.server.ws_upgrade import (
    BAD_UPGRADE,
    FORBIDDEN,
    SERVER_ERROR,
    feed,
    log_upgrade,
    picows_protocol,
    read_upgrade,
)

#: Seconds after its close frame that a connection is closed if the peer never answers.
CLOSE_TIMEOUT = 10.0
TEXT, BINARY, CONTINUATION = WSMsgType.TEXT, WSMsgType.BINARY, WSMsgType.CONTINUATION
PING, PONG, CLOSE = WSMsgType.PING, WSMsgType.PONG, WSMsgType.CLOSE
Message = dict[str, Any]


class PicowsWebSocketProtocol(ScopeExtensions, WSListener, asyncio.Protocol):
    """uvicorn's websocket protocol slot, served by picows (see the module docstring)."""

    __slots__ = (
        "_accepted", "_close_sent", "_writable", "after_close", "app", "app_state",
        "budget", "close_timer", "config", "connections", "direct_watch", "disconnected",
        "drained", "early", "fragment_size", "fragment_type", "fragments", "inbox", "key",
        "line", "logger", "loop", "ping", "ping_timer", "read_paused", "scope", "sink",
        "socket", "tasks", "transport", "unbilled", "waiter", "ws")

    def __init__(self, config: Config, server_state: ServerState,
                 app_state: dict[str, Any],
                 _loop: asyncio.AbstractEventLoop | None = None) -> None:
        if not config.loaded:
            config.load()
        self.config = config
        self.app = config.loaded_app
        self.loop = _loop or asyncio.get_event_loop()
        self.logger = logging.getLogger("uvicorn.error")
        self.connections = server_state.connections
        self.tasks = server_state.tasks
        self.app_state = app_state
        self.transport: asyncio.Transport = cast(asyncio.Transport, None)
        self.ws: WSTransport | None = None  # picows' transport, from the accept on
        self.scope: dict[str, Any] = {}
        self.key = b""  # the client's Sec-WebSocket-Key, until the accept
        self.early = b""  # bytes that came after the upgrade request, before the accept
        #: Messages for the app, in order: a list, not a deque (760 bytes an idle viewer;
        #: it holds a few at most: READ_AHEAD)
        self.inbox: list[Message] = []
        self.waiter: asyncio.Future[None] | None = None  # receive(), for the next message
        self.drained: list[asyncio.Future[None]] = []  # send()s, for the transport to drain
        #: Told the transport while a frame may go straight to it (DIRECT), else None.
        self.direct_watch: DirectWatch | None = None
        #: The socket over the transport's descriptor, from the accept until the loss (then
        #: let go of, never closed: the descriptor is the transport's), and the line told.
        self.socket: _socket.socket | None = None
        self.line: Line | None = None
        self._accepted = self._close_sent = self.disconnected = self.read_paused = False
        self._writable = True
        self.close_timer: asyncio.TimerHandle | None = None
        #: The keepalive: the next ping's timer, or the pong deadline (with its payload).
        self.ping_timer: asyncio.TimerHandle | None = None
        self.ping: bytes | None = None
        self.fragments: list[bytes] | None = None  # a message's frames so far
        self.fragment_type = TEXT
        self.fragment_size = 0
        self.sink: FrameSink | None = None
        self.budget: FrameBudget | None = None
        self.unbilled = 0
        self.after_close = 0

    # The transport's protocol until the accept (uvicorn calls these)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)
        self.connections.add(self)  # type: ignore[arg-type]  # a protocol, as uvicorn's

    def data_received(self, data: bytes) -> None:
        if self.scope or self.close_sent:  # a client that did not wait for the 101
            self.early += data
            if len(self.early) > self.config.ws_max_size and not self.read_paused:
                # more than a message before the accept: the rest waits in the kernel
                # (a client's bytes kept here were bounded by nothing but its speed)
                self.read_paused = True
                self.transport.pause_reading()
            return
        self.start(data)

    def eof_received(self) -> None:
        pass

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost()

    def start(self, request: bytes) -> None:
        """The upgrade request → the scope, and the app started on it (or a 400)."""
        upgrade = read_upgrade(request, self.config, self.transport, self.app_state)
        if upgrade is None:
            self.close_sent = True
            self.transport.write(BAD_UPGRADE)
            self.transport.close()
            return
        self.scope, self.key, self.early = upgrade
        self.scope["extensions"] = {
            EXTENSION: self.write_frame, ABORT: self.abort_after,
            SINK: self.offer_frames_to, BUDGET: self.charge_frames_to,
            DIRECT: self.watch_direct}
        self.inbox.append({"type": "websocket.connect"})
        task = self.loop.create_task(self.run_asgi())
        task.add_done_callback(self.tasks.discard)
        self.tasks.add(task)

    async def run_asgi(self) -> None:
        try:
            result = await self.app(self.scope, self.receive, self.send)
        except ClientDisconnected:
            pass
        except BaseException:
            self.logger.exception("Exception in ASGI application\n")
            self.refuse(SERVER_ERROR)
        else:
            if not self.accepted and not self.close_sent:
                self.logger.error("ASGI callable returned without completing handshake.")
                self.refuse(SERVER_ERROR)
            elif result is not None:
                self.logger.error("ASGI callable should return None, but returned '%s'.",
                                  result)
        if self.close_timer is None:
            self.transport.close()
        # the scope's extensions are this object's methods: a cycle, left to the collector
        # (which runs when the tables are idle) unless broken here, the app done with them
        self.scope["extensions"] = {}
        self.direct_watch = None

    def refuse(self, response: bytes) -> None:
        """Answer the upgrade with ``response`` (no websocket), then close."""
        if self.accepted or self.close_sent or self.transport.is_closing():
            return
        self.close_sent = True
        self.transport.write(response)
        self.transport.close()

    def accept(self, message: Message) -> None:
        """The 101, by picows, which takes the transport over with this as its listener."""
        headers = [(k.decode("latin-1"), v.decode("latin-1"))
                   for k, v in message.get("headers") or ()]
        if message.get("subprotocol"):
            headers.append(("Sec-WebSocket-Protocol", message["subprotocol"]))
        response = WSUpgradeResponse.create_101_response(headers or None)

        def listener(request: WSUpgradeRequest) -> WSUpgradeResponseWithListener:
            return WSUpgradeResponseWithListener(response, self)

        protocol = picows_protocol(listener, self.config.ws_max_size)
        if self.transport.is_closing():
            raise ClientDisconnected()
        sock = self.transport.get_extra_info("socket")
        self.socket = _socket.socket(sock.family, sock.type, sock.proto, sock.fileno())
        self.line = (self.transport, self.socket.send)
        # paused the moment the transport would hold a byte: while not paused it holds
        # none, so a frame sent straight to the socket is never ahead of one it holds
        self.transport.set_write_buffer_limits(high=0)
        self.accepted = True
        protocol.connection_made(self.transport)
        feed(protocol, b"GET / HTTP/1.1\r\nupgrade: websocket\r\nconnection: upgrade\r\n"
                       b"sec-websocket-version: 13\r\nsec-websocket-key: " + self.key
             + b"\r\n\r\n" + self.early)
        self.key = self.early = b""
        if self.ws is None:  # picows refused the request (never: its key was checked);
            self.close_sent = True  # it answered 400 and closes: this sees the loss
            return
        self.transport.set_protocol(protocol)
        if self.read_paused and not self.inbox:  # paused before the accept: read on
            self.read_paused = False
            self.transport.resume_reading()
        interval = self.config.ws_ping_interval
        if interval:
            self.ping_timer = self.loop.call_later(interval, self.send_ping)

    # picows' listener, from the accept on

    def on_ws_connected(self, transport: WSTransport) -> None:
        self.ws = transport

    def on_ws_disconnected(self, transport: WSTransport) -> None:
        self.lost()

    def pause_writing(self) -> None:
        self.writable = False

    def resume_writing(self) -> None:
        self.writable = True
        self.wake_senders()

    def lost(self) -> None:
        if self.disconnected:
            return
        self.disconnected = True
        self.tell_direct()
        if self.socket is not None:  # the descriptor is the transport's: let go, not closed
            self.socket.detach()
        self.line = None
        self.connections.discard(self)
        for timer in (self.close_timer, self.ping_timer):
            if timer is not None:
                timer.cancel()
        self.close_timer = self.ping_timer = None
        self.deliver({"type": "websocket.disconnect",
                      "code": 1005 if self.accepted else 1006})
        self.writable = True
        self.wake_senders()

    def on_ws_frame(self, transport: WSTransport, frame: WSFrame) -> None:
        kind = frame.msg_type
        if frame.rsv1 or frame.rsv2 or frame.rsv3:  # no extension was negotiated
            self.fail(1002, "reserved bits must be 0")
        elif kind is TEXT or kind is BINARY:
            if self.fragments is not None:
                self.fail(1002, "expected a continuation frame")
            elif frame.fin:
                self.message(kind, frame.get_payload_as_bytes())
            else:
                self.spend()
                self.fragments = [frame.get_payload_as_bytes()]
                self.fragment_type, self.fragment_size = kind, frame.payload_size
        elif kind is CONTINUATION:
            self.continuation(frame)
        elif kind is PING:
            self.spend()
            if not self.close_sent:
                transport.send_pong(frame.get_payload_as_bytes())
        elif kind is PONG:
            self.spend()
            if self.ping is not None and frame.get_payload_as_bytes() == self.ping:
                self.ping = None
                if self.ping_timer is not None:
                    self.ping_timer.cancel()
                self.ping_timer = self.loop.call_later(self.config.ws_ping_interval or 0,
                                                       self.send_ping)
        elif kind is CLOSE:
            self.peer_closed(frame)

    def continuation(self, frame: WSFrame) -> None:
        fragments = self.fragments
        if fragments is None:
            self.fail(1002, "unexpected continuation frame")
            return
        self.fragment_size += frame.payload_size
        if self.fragment_size > self.config.ws_max_size:
            self.fail(1009, f"over size limit ({self.fragment_size} > "
                            f"{self.config.ws_max_size} bytes)")
            return
        fragments.append(frame.get_payload_as_bytes())
        if not frame.fin:
            self.spend()
            return
        self.fragments = None
        self.message(self.fragment_type, b"".join(fragments))

    def message(self, kind: WSMsgType, data: bytes) -> None:
        """A whole message read: to the sink, or queued for the app (read-ahead)."""
        if self.close_sent:  # past websocket.close: dropped, counted (AFTER_CLOSE)
            self.spend()
            return
        arrived_at = time.time_ns() // 1_000_000
        message: Message = {"type": "websocket.receive", ARRIVED_AT: arrived_at}
        if kind is TEXT:
            try:
                text = message["text"] = data.decode()
            except UnicodeDecodeError:
                self.fail(1007, "invalid UTF-8")
                return
            sink = self.sink
            if sink is not None and not self.inbox and sink(text, arrived_at):
                return
        else:
            message["bytes"] = data
        self.deliver(message)
        if not self.read_paused and len(self.inbox) >= READ_AHEAD:
            self.read_paused = True
            self.transport.pause_reading()

    def peer_closed(self, frame: WSFrame) -> None:
        ws = self.ws
        assert ws is not None
        if not self.close_sent:  # the peer's close: echoed, then the socket closed
            code, reason = frame.get_close_code().value, frame.get_close_reason()
            self.deliver({"type": "websocket.disconnect", "code": code or 1005,
                          "reason": reason})
            self.close_sent = True
            if code:
                ws.send_close(cast(WSCloseCode, code))
            else:
                self.transport.write(b"\x88\x00")  # a close without a code, echoed so
        ws.disconnect()  # or the peer's answer to ours: the handshake is complete

    def fail(self, code: int, reason: str) -> None:
        """A protocol error: the close sent, the app told, the socket closed."""
        self.deliver({"type": "websocket.disconnect", "code": code, "reason": reason})
        if not self.close_sent and self.ws is not None:
            self.close_sent = True
            self.ws.send_close(cast(WSCloseCode, code), reason.encode())
        self.transport.close()

    def send_ping(self) -> None:
        self.ping_timer = None
        if self.close_sent or self.ws is None or self.transport.is_closing():
            return
        self.ping = struct.pack("!I", random.getrandbits(32))
        self.ws.send_ping(self.ping)
        timeout = self.config.ws_ping_timeout
        if timeout is not None:
            self.ping_timer = self.loop.call_later(timeout, self.keepalive_timeout)

    def keepalive_timeout(self) -> None:
        self.ping_timer = None
        if self.close_sent or self.ws is None or self.transport.is_closing():
            return
        self.close_sent = True
        self.ws.send_close(WSCloseCode.INTERNAL_ERROR, b"keepalive ping timeout")
        self.transport.close()

    def shutdown(self) -> None:
        """The server stops (uvicorn calls it on every connection): 1012, then closed."""
        for timer in (self.close_timer, self.ping_timer):
            if timer is not None:
                timer.cancel()
        self.close_timer = self.ping_timer = None
        if not self.accepted:
            self.refuse(SERVER_ERROR)
        elif not self.close_sent and self.ws is not None:
            self.deliver({"type": "websocket.disconnect", "code": 1012})
            self.close_sent = True
            self.ws.send_close(WSCloseCode.SERVICE_RESTART)
        self.transport.close()

    # The app's side: ASGI receive and send

    def deliver(self, message: Message) -> None:
        self.inbox.append(message)
        self.wake()

    def wake(self) -> None:
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def wake_senders(self) -> None:
        drained, self.drained = self.drained, []
        for future in drained:
            if not future.done():
                future.set_result(None)

    async def receive(self) -> Message:
        while not self.inbox:
            self.waiter = self.loop.create_future()
            try:
                await self.waiter
            finally:
                self.waiter = None
        message = self.inbox.pop(0)
        if self.read_paused and not self.inbox and self.ws is not None:
            self.read_paused = False
            self.transport.resume_reading()
        return message

    async def send(self, message: Message) -> None:
        while not self.writable:  # flow control: wait for the transport to drain
            future = self.loop.create_future()
            self.drained.append(future)
            await future
        if self.disconnected:
            raise ClientDisconnected()
        kind = message["type"]
        if not self.accepted and not self.close_sent:
            if kind == "websocket.accept":
                log_upgrade(self.logger, self.scope, "[accepted]")
                self.accept(message)
            elif kind == "websocket.close":
                log_upgrade(self.logger, self.scope, "403")
                self.deliver({"type": "websocket.disconnect", "code": 1006})
                self.refuse(FORBIDDEN)
            else:
                raise RuntimeError("Expected ASGI message 'websocket.accept' or "
                                   f"'websocket.close', but got '{kind}'.")
        elif not self.close_sent and self.ws is not None:
            if kind == "websocket.send":
                data = message.get("bytes")
                if data is not None:
                    self.ws.send(BINARY, data)
                else:
                    self.ws.send(TEXT, message["text"].encode())
            elif kind == "websocket.close":
                if not self.transport.is_closing():
                    code, reason = message.get("code", 1000), message.get("reason") or ""
                    self.deliver({"type": "websocket.disconnect", "code": code,
                                  "reason": reason})
                    self.close_sent = True
                    self.ws.send_close(code, reason.encode())
                    if self.read_paused:  # read on until the peer's close
                        self.read_paused = False
                        self.transport.resume_reading()
                    self.close_timer = self.loop.call_later(CLOSE_TIMEOUT,
                                                            self.transport.close)
            else:
                raise RuntimeError("Expected ASGI message 'websocket.send' or "
                                   f"'websocket.close', but got '{kind}'.")
        else:
            raise RuntimeError(f"Unexpected ASGI message '{kind}', after sending "
                               "'websocket.close'.")
