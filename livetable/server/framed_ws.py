"""uvicorn's websocket protocol (``websockets`` sans-IO), plus one ASGI scope extension.

Why: a table event goes to every viewer with the very same bytes — a server's frames are
not masked — yet through ASGI each connection would wake its writer task, pass the text
through Starlette and uvicorn, and have the websockets protocol frame it again. The
benchmark (docs/benchmarks.md) measured that path at about twice the CPU per frame of a bare
``websockets.broadcast``.

So the connection offers ``scope["extensions"]["livetable.write_frame"]``: a function that
writes an already-framed message straight to the transport and answers True — or answers
False, and writes nothing, whenever that would not be safe (handshake not complete, closing,
or the transport paused by flow control). The gateway uses it only when the connection has
nothing queued and no send in flight, so order is kept and a slow client still only delays
itself; otherwise the frame takes the ordinary ASGI path.

Sent uncompressed. ``livetable serve`` declines permessage-deflate (it would only inflate
the clients' small frames, at ~45 KB of zlib state a connection); where it is negotiated
anyway, an uncompressed message (RSV1 clear) is still valid (RFC 7692 §6).

Arrival time. A bet is judged by when it reached the server, not by when a busy server got
round to it. uvicorn stops reading a connection after each message until the app has taken
it, so a message's true arrival is only seen if reading goes on: this protocol keeps
reading until :data:`READ_AHEAD` messages wait, and stamps each message with the time it
was read (``message["livetable.arrived_at"]``, epoch ms).

uvicorn's internals. This subclasses a protocol whose attributes are not uvicorn's public
API (``frames``, ``curr_msg_data_type``, ``read_paused``, ``queue``, ``close_sent``,
``writable`` …; :meth:`send_receive_event_to_app` is overridden, so a rename upstream would
silently bypass it). pyproject.toml pins uvicorn to the minor release the tests ran on, and
tests/unit/test_uvicorn_internals.py fails, naming what moved, when one of them does.

A frame taken on arrival. Through ASGI a bet is queued by the protocol, the app's task is
woken, and Starlette and uvicorn hand it over: at the close of betting, with thousands of
bets a second on one event loop, that hand-over was a fifth of the loop's work per bet. So
the connection also offers ``scope["extensions"][SINK](take)``: the app names a function
``take(text, arrived_at) -> bool`` that is offered each text message as it is read, while
nothing is queued before it (so order is kept), and answers True if it took the message
whole (a bet, started there and then) or False to have it queued as usual (anything the
app's task must await).

Frames that are not a message. A ping costs the server a parse and a pong, an empty
continuation frame a parse and a list entry; none of them reaches the app, so the
connection's frame budget never saw them: one viewer's 2 M pings in 12 s took ~85 % of a
core and the others' round trip went from 1 ms to 300–700 ms. So the connection also offers
``scope["extensions"][BUDGET](spend)``: the app names ``spend(frames)``, charged one for
every ping, pong and fragment before a message's last (the last is the message, which the
app counts itself). Those that arrive before the app names it are charged when it does.
And once the close is sent, a peer that keeps sending is not read past
:data:`AFTER_CLOSE` frames: the app's abort timer (:data:`ABORT`) ends it.
"""

from __future__ import annotations

import asyncio
import struct
import time
from collections.abc import Callable
from typing import Any, Protocol

from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol

EXTENSION = "livetable.write_frame"
#: ``scope["extensions"][ABORT](seconds)``: abort the socket unless it is gone by then.
ABORT = "livetable.abort_after"
ARRIVED_AT = "livetable.arrived_at"
#: ``scope["extensions"][SINK](take)``: offer each text message to ``take`` first.
SINK = "livetable.frame_sink"
#: What the app names: ``take(text, arrived_at)`` → True if it took the message.
FrameSink = Callable[[str, int], bool]
#: ``scope["extensions"][BUDGET](spend)``: charge ``spend(n)`` for frames that are not a
#: whole message (pings, pongs, fragments before a message's last).
BUDGET = "livetable.frame_budget"
#: What the app names: ``spend(frames)``.
FrameBudget = Callable[[int], None]
#: ``scope["extensions"][DIRECT](told)``: the connection tells ``told`` its :data:`Line`
#: whenever a frame may be sent straight to its socket — accepted, no close frame sent, not
#: disconnected, and its transport holding nothing unsent (it is paused the moment it would
#: hold a byte) — and None whenever not: at once, and on each change. The fan-out sends to
#: the sockets it was told of with no check of its own a socket
#: (livetable/server/gateway/audience.py). Offered by the picows transport.
DIRECT = "livetable.direct_writer"
#: A socket's ``send``: the bytes it took (it raises ``OSError`` where it took none).
Send = Callable[[bytes], int]
#: A connection's direct line: its transport (for what its socket did not take) and its
#: socket's ``send``.
Line = tuple[asyncio.Transport, Send]
#: What the app names: ``told(line or None)``.
DirectWatch = Callable[[Line | None], None]
#: Messages read ahead of the app per connection before reading pauses (back-pressure).
READ_AHEAD = 32
#: Frames taken from a peer after the close was sent before reading stops: a well-behaved
#: peer has a few in flight; a flood would otherwise be parsed until the socket is aborted.
AFTER_CLOSE = 64


def text_frame(payload: bytes) -> bytes:
    """A whole unmasked websocket text frame (FIN, opcode 1) around UTF-8 ``payload``."""
    n = len(payload)
    if n < 126:
        return struct.pack("!BB", 0x81, n) + payload
    if n < 65536:
        return struct.pack("!BBH", 0x81, 126, n) + payload
    return struct.pack("!BBQ", 0x81, 127, n) + payload


class Billed(Protocol):
    """What :func:`charge_frames` and :func:`spend_frame` need of a websocket protocol."""

    budget: FrameBudget | None
    unbilled: int
    after_close: int
    close_sent: bool
    transport: asyncio.Transport


def charge_frames(protocol: Billed, spend: FrameBudget | None) -> None:
    """The app names its frame budget: the frames read before are charged to it now."""
    protocol.budget = spend
    if spend is not None and protocol.unbilled:
        frames, protocol.unbilled = protocol.unbilled, 0
        spend(frames)


def spend_frame(protocol: Billed) -> None:
    """One frame that is not a whole message (either transport): charged to the app's
    budget (or kept for it); past the close counted, and reading stopped at
    :data:`AFTER_CLOSE`."""
    if protocol.close_sent:
        protocol.after_close += 1
        if protocol.after_close == AFTER_CLOSE:
            protocol.transport.pause_reading()
    elif protocol.budget is not None:
        protocol.budget(1)
    else:
        protocol.unbilled += 1


class FramedWebSocketProtocol(WebSocketsSansIOProtocol):
    def handle_connect(self, event: Any) -> None:
        super().handle_connect(event)
        # The upgrade request stays referenced for the connection's life (a local of
        # websockets' parser generator, and uvicorn's ``request``); its headers, copied
        # into the scope above, are ~1-3 KiB of strings a connection (a browser's): dropped.
        event.headers.clear()
        scope: Any = getattr(self, "scope", None)
        if scope is not None:  # the app's task has not started yet: it will see this
            scope["extensions"][EXTENSION] = self.write_frame
            scope["extensions"][ABORT] = self.abort_after
            scope["extensions"][SINK] = self.offer_frames_to
            scope["extensions"][BUDGET] = self.charge_frames_to

    #: The app's sink for text messages (see the module docstring), once it names one.
    sink: FrameSink | None = None

    def offer_frames_to(self, take: FrameSink | None) -> None:
        self.sink = take

    #: The app's frame budget (see the module docstring), once it names one.
    budget: FrameBudget | None = None
    #: Frames charged before the app named its budget.
    unbilled = 0
    #: Frames read since the close was sent.
    after_close = 0

    def charge_frames_to(self, spend: FrameBudget | None) -> None:
        charge_frames(self, spend)

    def spend(self) -> None:
        spend_frame(self)

    def handle_ping(self) -> None:
        self.spend()
        super().handle_ping()

    def handle_pong(self, event: Any) -> None:
        self.spend()
        super().handle_pong(event)

    def handle_cont(self, event: Any) -> None:
        if not event.fin:
            self.spend()
        super().handle_cont(event)

    def handle_text(self, event: Any) -> None:
        if not event.fin:
            self.spend()
        super().handle_text(event)

    def handle_bytes(self, event: Any) -> None:
        if not event.fin:
            self.spend()
        super().handle_bytes(event)

    def abort_after(self, seconds: float) -> None:
        """Drop the socket if it is still open ``seconds`` from now.

        Why: a close is a frame like any other. A client that stopped reading never takes
        it — uvicorn's ``send`` even waits for the paused transport before writing it — and
        ``transport.close()`` waits to flush what the kernel holds: the socket stays
        ESTABLISHED with megabytes of buffers. Aborting sends RST and frees both at once.
        """
        def abort() -> None:
            if not self.disconnected:
                self.transport.abort()

        self.loop.call_later(seconds, abort)

    def write_frame(self, frame: bytes) -> bool:
        if (not self.handshake_complete or self.close_sent or self.disconnected
                or not self.writable.is_set() or self.transport.is_closing()):
            return False
        self.transport.write(frame)
        return True

    def send_receive_event_to_app(self) -> None:
        data = self.frames[0] if len(self.frames) == 1 else b"".join(self.frames)
        self.frames = []
        if self.close_sent:  # past websocket.close: drop it, keep reading until the peer's
            self.spend()  # close (or until AFTER_CLOSE frames)
            return
        arrived_at = time.time_ns() // 1_000_000
        message: dict[str, Any] = {"type": "websocket.receive", ARRIVED_AT: arrived_at}
        if self.curr_msg_data_type == "text":
            try:
                text = message["text"] = data.decode()
            except UnicodeDecodeError:
                self.logger.exception("Invalid UTF-8 sequence received from client.")
                self.conn.send_close(1007)
                self.handle_parser_exception()
                return
            sink = self.sink
            if sink is not None and not self.queue.qsize() and sink(text, arrived_at):
                return
        else:
            message["bytes"] = data
        self.queue.put_nowait(message)  # type: ignore[arg-type]  # an extra key, as ASGI allows
        if not self.read_paused and self.queue.qsize() >= READ_AHEAD:
            self.read_paused = True
            self.transport.pause_reading()
