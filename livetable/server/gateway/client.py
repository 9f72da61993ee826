"""One websocket connection: a bounded send queue and the writer task that drains it.

Each connection has its own queue, so a slow client never delays the others; a client whose
queue overflows is closed with :data:`CLOSE_TOO_SLOW` and can resume. A client knows of the
process it belongs to only what :class:`Host` says: the settings, the metrics, and where to
keep a task it starts.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Literal, Protocol

import msgspec
from starlette.websockets import WebSocket, WebSocketDisconnect

from livetable import protocol as p
from livetable.auth import Identity
from livetable.config import Settings
from livetable.metrics import Metrics
from livetable.server.framed_ws import (
    ABORT,
    BUDGET,
    DIRECT,
    EXTENSION,
    SINK,
    DirectWatch,
    FrameBudget,
    FrameSink,
    Line,
    text_frame,
)
from livetable.server.gateway.codes import CLOSE_TOO_SLOW

#: The websocket a connection came in on: ``/ws`` (players, guests and viewers) or
#: ``/ws/dealer`` (dealer and supervisor consoles).
Endpoint = Literal["player", "dealer"]


def framed(message: msgspec.Struct) -> tuple[str, bytes]:
    """``message`` encoded (its JSON text) and framed (its websocket frame)."""
    data = p.encode(message)
    return data.decode(), text_frame(data)


class Host(Protocol):
    """What a connection needs of its gateway (:class:`~livetable.server.gateway.Gateway`)."""

    settings: Settings
    metrics: Metrics

    def keep(self, task: asyncio.Task[None]) -> None:
        """Hold a reference to ``task`` until it is done."""


class Seated(Protocol):
    """Where a connection sits in its table's audience (audience.Audience): told each
    change of :attr:`Client.direct`."""

    def place(self, client: Client) -> None: ...


class Client:
    """One websocket: a bounded send queue and the writer task that drains it.

    The writer task exists only while it has work: a frame that can be written straight to
    an idle connection (see :mod:`livetable.server.framed_ws`) needs none, and an idle
    viewer costs no task, event loop wake-ups or their memory.
    """

    def __init__(self, ws: WebSocket, host: Host, kind: Endpoint) -> None:
        self.ws = ws
        self.host = host
        self.kind = kind
        self.table: str | None = None
        self.identity: Identity | None = None
        # Both made with the first frame that must wait (a deque is 760 bytes, an Event
        # holds another): an idle viewer written to directly never needs them.
        self.queue: deque[str] | None = None
        self.limit = host.settings.send_queue
        self.ready: asyncio.Event | None = None
        self.in_flight = False  # a queued frame is being sent through ASGI
        #: When an answer of its own last went to this client (time.monotonic): a client
        #: that was answered lately needs no heartbeat to know it is still connected.
        self.answered_at = 0.0
        extensions = ws.scope.get("extensions") or {}
        self.write_frame: Callable[[bytes], bool] | None = extensions.get(EXTENSION)
        self.abort_after: Callable[[float], None] | None = extensions.get(ABORT)
        #: Names (or, with None, forgets) the function offered each text message as it is
        #: read (framed_ws's SINK); None where the server offers no such thing.
        self.offer_frames: Callable[[FrameSink | None], None] | None = extensions.get(SINK)
        #: Names (or, with None, forgets) the function charged for the frames that are not
        #: a whole message: pings, pongs, fragments (framed_ws's BUDGET).
        self.charge_frames: Callable[[FrameBudget | None], None] | None = extensions.get(BUDGET)
        self.expiry: asyncio.TimerHandle | None = None  # closes the socket when the token does
        self.closed = False
        self.close_code: int | None = None
        self.close_reason = ""
        self.writer: asyncio.Task[None] | None = None
        #: The line (transport, socket's send) while the fan-out may send a frame straight
        #: to the socket: the server says it may (DIRECT: accepted, no close sent, the
        #: transport holding nothing) and this connection has nothing queued, nothing in
        #: flight and is not closed; else None. The fan-out then sends with no check of its
        #: own a socket (audience.fan_out), and order is kept.
        self.direct: Line | None = None
        #: The table's audience this connection is in (it is told each change of direct).
        self.audience: Seated | None = None
        self._told_line: Line | None = None
        watch_direct: Callable[[DirectWatch], None] | None = extensions.get(DIRECT)
        if watch_direct is not None:
            watch_direct(self._told)

    def _told(self, line: Line | None) -> None:
        self._told_line = line
        self._direct_again()

    def _direct_again(self) -> None:
        """:attr:`direct`, after the server's word or this connection's queue changed."""
        self._set_direct(self._told_line if (
            not self.queue and not self.in_flight and not self.closed) else None)

    def _set_direct(self, line: Line | None) -> None:
        if line is not self.direct:
            self.direct = line
            if self.audience is not None:
                self.audience.place(self)

    def write_rest(self, wire: bytes, sent: int) -> None:
        """What the socket did not take of a frame the fan-out sent it (``sent`` bytes of
        ``wire``; 0 where the send raised) — to the transport, which holds it after
        anything else and tells of the error if that is what it was. A transport that is
        closing takes nothing: the connection is gone, and its client resumes."""
        line = self._told_line
        if line is None or line[0].is_closing():
            return
        line[0].write(wire[sent:] if sent else wire)

    def _write_now(self, framed: bytes, frames: int) -> bool:
        """Write ``framed`` (the websocket framing of ``frames`` frames) at once if the
        connection is idle — nothing queued, nothing being sent — and the server offers
        direct writes (see :mod:`livetable.server.framed_ws`): True if written."""
        if (self.write_frame is not None and not self.queue and not self.in_flight
                and self.write_frame(framed)):
            self.host.metrics.frames_out += frames
            return True
        return False

    def send(self, frame: str, framed: bytes | None = None) -> None:
        """Queue ``frame``; or, given its websocket framing and an idle connection, write
        it at once (see :mod:`livetable.server.framed_ws`)."""
        if self.closed or (framed is not None and self._write_now(framed, 1)):
            return
        queue = self.queue
        if queue is None:
            queue = self.queue = deque()
        if len(queue) >= self.limit:
            self.host.metrics.inc("livetable_slow_client_closes_total")
            self.close(CLOSE_TOO_SLOW, "too slow: resume to catch up")
            return
        queue.append(frame)
        self._set_direct(None)  # the fan-out writes after what waits here, not before it
        self._wake_writer()

    def send_all(self, frames: Sequence[str] | Sequence[bytes], framed: bytes) -> None:
        """Send several frames (JSON text, or its UTF-8) together: one write of their
        websocket framing (``framed``, every frame's in order) to an idle connection — a
        player's results of a settlement chunk, or a step's events, cost one system call,
        not one each — else each queued in turn."""
        if self.closed or self._write_now(framed, len(frames)):
            return
        for frame in frames:
            self.send(frame if isinstance(frame, str) else frame.decode())

    def _wake_writer(self) -> None:
        if self.ready is None:
            self.ready = asyncio.Event()
        if self.writer is None or self.writer.done():
            self.writer = asyncio.get_running_loop().create_task(self._write(self.ready))
        self.ready.set()

    def wake(self) -> None:
        """Let a waiting writer task see that the connection is closed."""
        if self.ready is not None:
            self.ready.set()

    def send_message(self, message: msgspec.Struct) -> None:
        self.answered_at = time.monotonic()
        self.send(*framed(message))

    def send_framed(self, frames: Sequence[tuple[str, bytes]]) -> None:
        """Several answers of its own, each (JSON text, its websocket frame): one write to
        an idle connection (:meth:`send_all`), else each queued in turn."""
        self.answered_at = time.monotonic()
        self.send_all([text for text, _ in frames], b"".join([wire for _, wire in frames]))

    async def _write(self, ready: asyncio.Event) -> None:
        ws = self.ws
        metrics = self.host.metrics
        try:
            while True:
                await ready.wait()
                ready.clear()
                while self.queue:
                    frame = self.queue.popleft()
                    self.in_flight = True
                    await ws.send_text(frame)
                    self.in_flight = False
                    metrics.frames_out += 1
                if self.closed or (self.write_frame is not None and not self.queue):
                    break  # drained: frames go straight out again, no task needed
        except (WebSocketDisconnect, RuntimeError, OSError):
            self.closed = True
        except asyncio.CancelledError:
            pass
        self._direct_again()
        if self.close_code is not None:
            with contextlib.suppress(Exception):
                await ws.close(self.close_code, self.close_reason)

    def gone(self) -> None:
        """Its session ended with the socket (no close of ours to send): nothing more goes
        to it, and a writer task waiting for frames sees that."""
        self.closed = True
        self._set_direct(None)
        self.wake()

    def close(self, code: int, reason: str = "") -> None:
        """Close after what is queued (or at once if the queue is what overflowed)."""
        if self.closed:
            return
        self.closed = True
        self._set_direct(None)
        self.close_code = code
        self.close_reason = reason
        if self.abort_after is not None:  # a peer that does not read never takes the close
            self.abort_after(self.host.settings.close_timeout)
        if code == CLOSE_TOO_SLOW:
            if self.queue is not None:
                self.queue.clear()
            if self.writer is not None:
                self.writer.cancel()
            self.host.keep(asyncio.get_running_loop().create_task(self._close_now(code, reason)))
        else:
            self._wake_writer()  # it sends what is queued, then the close

    async def _close_now(self, code: int, reason: str) -> None:
        with contextlib.suppress(Exception):
            await self.ws.close(code, reason)

