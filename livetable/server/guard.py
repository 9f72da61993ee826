"""Connections that never become requests: the HTTP protocol with a guard at the door.

Why: uvicorn starts no timer before a request's head is complete, so a connection that says
nothing — or dribbles its headers a byte at a time — holds a file descriptor for ever; 1,100
of them from one address exhausted the process's descriptors and ``/healthz`` failed. The
guard adds two checks below the ASGI app, where the app cannot see:

* **request head timeout** — a connection must complete each request's head (the request
  line and headers) within :attr:`ConnectionGuard.head_timeout` seconds of its first byte
  (or of connecting); else it is aborted. Websocket upgrades are requests too, so the
  websocket hello timeout (in the gateway) takes over from here.
* **request body timeout** — once the head is complete, the whole body must arrive within
  :attr:`ConnectionGuard.body_timeout` seconds; else the client gets ``408`` and the
  connection is closed. The head timer alone let a body announced as 10,000 bytes and sent
  a byte every two seconds hold a ``POST /api/operator/*`` for ever
  (docs/decisions.md#security-of-the-money-path). The bodies
  livetable takes are small (16 KiB at most), so a slow one is an attack, not a slow link.
* **connections per address** — at most :attr:`ConnectionGuard.per_address` open
  connections from one peer address; the next gets ``429`` and is closed. A trusted proxy's
  address is exempt (its own ``limit_conn`` limits each client: deploy/nginx.conf), because
  every client behind it shares that address.

* **request head size** — a request's head may be :data:`MAX_HEAD` bytes at most (h11's
  default, which uvicorn's h11 protocol held requests to); past it the client gets ``431``
  and the connection is closed. httptools' parser has no limit of its own: without this,
  headers sent fast for the head timeout's seconds were all kept.

uvicorn's httptools protocol is subclassed: its parser is C (llhttp), where h11's is Python
— a fifth of a websocket handshake's CPU (docs/benchmarks.md, "The handshake on httptools").
It reads uvicorn's ``client``, ``cycle.response_complete``, ``cycle.more_body``, ``loop``
and ``transport``, which are not public API: tests/unit/test_uvicorn_internals.py checks
them against the pinned uvicorn. The state is plain: a dict of open transports per address,
pruned of closed ones as it is used.
"""

from __future__ import annotations

import asyncio
import ipaddress
from collections.abc import Iterable
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

#: The most bytes a request's head (its line and headers) may take: h11's default.
MAX_HEAD = 16 * 1024

_TOO_MANY = (b"HTTP/1.1 429 Too Many Requests\r\ncontent-type: text/plain\r\n"
             b"content-length: 43\r\nconnection: close\r\n\r\n"
             b"too many connections from this address\r\n\r\n")
_BODY_TOO_SLOW = (b"HTTP/1.1 408 Request Timeout\r\ncontent-type: text/plain\r\n"
                  b"content-length: 39\r\nconnection: close\r\n\r\n"
                  b"the request body did not arrive in time")
_HEAD_TOO_LARGE = (b"HTTP/1.1 431 Request Header Fields Too Large\r\n"
                   b"content-type: text/plain\r\ncontent-length: 31\r\n"
                   b"connection: close\r\n\r\nthe request's head is too large")


class ConnectionGuard:
    def __init__(self, *, head_timeout: float, per_address: int,
                 trusted: Iterable[str] = (), body_timeout: float = 0) -> None:
        self.head_timeout = head_timeout
        self.body_timeout = body_timeout
        self.per_address = per_address
        self.trusted = [ipaddress.ip_network(t, strict=False) for t in trusted]
        self.open: dict[str, set[asyncio.BaseTransport]] = {}
        self.refused = 0
        self.timed_out = 0
        self.bodies_timed_out = 0

    def admit(self, address: str, transport: asyncio.BaseTransport) -> bool:
        """Count ``transport`` against ``address``; False if the address is at its cap."""
        if self.per_address <= 0 or self.is_trusted(address):
            return True
        if len(self.open) > 50_000:  # addresses seen once: forget those with nothing open
            for key in [k for k, v in self.open.items()
                        if all(t.is_closing() for t in v)]:
                del self.open[key]
        held = self.open.setdefault(address, set())
        for gone in [t for t in held if t.is_closing()]:
            held.discard(gone)
        if len(held) >= self.per_address:
            self.refused += 1
            return False
        held.add(transport)
        return True

    def is_trusted(self, address: str) -> bool:
        try:
            ip = ipaddress.ip_address(address)
        except ValueError:  # a unix socket's peer, say
            return False
        return any(ip in network for network in self.trusted)

    def protocol(self) -> type[HttpToolsProtocol]:
        """The uvicorn HTTP protocol class that applies this guard."""
        return type("GuardedHttpProtocol", (GuardedHttpProtocol,), {"guard": self})


class GuardedHttpProtocol(HttpToolsProtocol):
    guard: ConnectionGuard

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._head_timer: asyncio.TimerHandle | None = None
        self._body_timer: asyncio.TimerHandle | None = None
        self._head_bytes = 0  # of the request whose head is being read

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]  # uvicorn narrows the base's BaseTransport the same way
        super().connection_made(transport)
        address = self.client[0] if self.client else ""
        if not self.guard.admit(address, transport):
            self._refuse(_TOO_MANY)
            return
        self._start_head_timer()

    def data_received(self, data: bytes) -> None:
        if self._between_requests():  # a head being read: counted before it is parsed,
            # so that a head over the limit never reaches the parser or the app, whether
            # it comes in one read or a byte at a time
            if self._head_timer is None:
                self._start_head_timer()
            end = data.find(b"\r\n\r\n")
            self._head_bytes += len(data) if end < 0 else end + 4
            if self._head_bytes > MAX_HEAD:
                if not self.transport.is_closing():
                    self._refuse(_HEAD_TOO_LARGE)
                return
        super().data_received(data)
        if self.transport.get_protocol() is not self:  # upgraded to a websocket: the hello
            self._stop_timers()  # timeout rules there; an armed timer would hold this
            return  # protocol, its parser and the request (~3 KiB) for its seconds
        head_done = not self._between_requests()
        if head_done:
            self._head_bytes = 0  # the next request's head counts from nothing
        if self._head_timer is not None and head_done:
            self._head_timer.cancel()  # the head is complete: the body's clock starts
            self._head_timer = None
            if self.guard.body_timeout > 0 and self._body_pending():
                self._body_timer = self.loop.call_later(self.guard.body_timeout,
                                                        self._body_deadline)
        if self._body_timer is not None and not self._body_pending():
            self._body_timer.cancel()  # the whole body is in: the app answers from here
            self._body_timer = None

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_timers()
        super().connection_lost(exc)

    def _refuse(self, answer: bytes) -> None:
        """A canned answer (429, 431, 408), then the close; no timer left armed."""
        self._stop_timers()
        self.transport.write(answer)
        self.transport.close()

    def _stop_timers(self) -> None:
        for timer in (self._head_timer, self._body_timer):
            if timer is not None:
                timer.cancel()
        self._head_timer = self._body_timer = None

    def _body_pending(self) -> bool:
        """A request whose body has not all arrived (uvicorn's cycle says so until the parser
        parses the body's end)."""
        return self.cycle is not None and self.cycle.more_body \
            and not self.cycle.response_complete

    def _body_deadline(self) -> None:
        self._body_timer = None
        transport = self.transport
        if transport.is_closing() or transport.get_protocol() is not self:
            return
        if self._body_pending():
            self.guard.bodies_timed_out += 1
            self._refuse(_BODY_TOO_SLOW)  # the app, waiting for the body, sees a disconnect

    def _between_requests(self) -> bool:
        return self.cycle is None or self.cycle.response_complete

    def _start_head_timer(self) -> None:
        if self.guard.head_timeout > 0:
            self._head_timer = self.loop.call_later(self.guard.head_timeout,
                                                    self._head_deadline)

    def _head_deadline(self) -> None:
        self._head_timer = None
        transport = self.transport
        if transport.is_closing() or transport.get_protocol() is not self:
            return  # closed, or upgraded to a websocket (the hello timeout rules there)
        if self._between_requests():
            self.guard.timed_out += 1
            transport.abort()
