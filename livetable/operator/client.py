"""The HTTP client of the seamless wallet: signed calls to the operator, never an exception.

Every failure of a call (a timeout, a refused connection, a non-200, a body that does not
parse, a status the contract does not know, an answer too large) is a :class:`Reply` whose
``status`` is None: an unknown outcome, which the caller answers by rolling back (see
:mod:`livetable.operator.seamless`).

Why a client of our own, on httptools' parser. A seamless bet costs one call, and at the
close of betting thousands are in flight, so the client's CPU per call is the floor under
a seamless bet. The wallet's calls are one small fixed shape — a signed JSON ``POST`` on a
kept-alive HTTP/1.1 connection, a few dozen bytes of JSON back — and the general clients
pay for what it never uses (cookies, redirects, proxies, compression, multipart, tracing,
a task per connect). Measured side by side (``bench/http_clients.py``, the client's process
pinned to one core, the debit's real body, a server answering after 20 ms, 200 in flight):
aiohttp 92–97 µs of CPU a call, this client 22–23 µs; under the bet intake bench
(docs/benchmarks.md, "the seamless wallet, pinned") that was most of what a seamless bet
cost over an internal one. The parsing — the part that must be exactly right about
HTTP/1.1: chunked bodies, keep-alive, malformed answers — is httptools (llhttp, the parser
of Node.js; MagicStack's binding, uvicorn's fast parser); what is ours is the request's
bytes, the pool and the limits below, about 150 lines.

Limits that hold whatever the operator's server does:

* **One deadline for the whole call** — waiting for a connection of the pool, connecting,
  sending, the status line, the headers and the body together, so a wallet that trickles
  its answer a byte at a time ends at the deadline, not after one read timeout per byte.
  The answer is awaited under one timer of the loop (``call_at``) that fails it at the
  deadline; the waits before it (a place in the pool, a connect) under
  ``asyncio.timeout_at`` of the same deadline, only when there is one to wait for.
  (``asyncio.timeout`` around every call cost about a quarter of the client's CPU a
  call: docs/benchmarks.md);
* **answers of at most** :data:`MAX_ANSWER` **bytes**: a longer ``Content-Length`` is
  refused before the body is read, and a body without one is read only up to the cap,
  then the connection is dropped. Memory per call stays bounded;
* **no redirect is followed**: a ``3xx`` is an answer like any other non-200, an unknown
  outcome (rolled back). Followed, a wallet's ``302 Location: http://127.0.0.1:…/metrics``
  made livetable fetch any URL it could reach (SSRF; a ``307`` re-sent the signed body);
* **at most** :data:`OPENING_AT_ONCE` **new connections unanswered at once**: a burst of
  calls that finds no idle connection opens that many, and the calls beyond wait for
  whichever comes first, a connection another call is done with or a place to open one.
  A server queues the connections it has not accepted yet in its listen backlog (128 for
  aiohttp's, 100 for asyncio's ``start_server``), and past it the kernel drops them: each
  dropped one came back only when TCP retried, a second later — the first close of betting
  against such a wallet had a fortieth of its bets wait over a second (docs/benchmarks.md).
  A connection is no longer new once its first answer came: the server had accepted it;
* **at most** ``connections`` **open at once**; an idle one is kept for the next call for
  :data:`KEEPALIVE_SECONDS`, and one the server closed while it sat idle is never used:
  a call that finds it closed under it before any answer is sent again once, on a fresh
  connection, within the same deadline (safe: every call is idempotent by its ``tx_id``,
  and a balance moves nothing). A connection that did not end its answer cleanly (the
  deadline, a cancel, a parse error, the cap) is dropped, never reused. No proxies and no
  cookies: every call stands alone.

What the wallet said is kept for the wallet log and the operator's report
(:attr:`Reply.text`); what may be shown on a public endpoint (``/readyz``) is
:attr:`Reply.reason`, which holds none of the answer's text.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast
from urllib.parse import urlsplit

import httptools
import msgspec

from livetable.clock import now_ms
from livetable.operator import signatures
from livetable.operator.calls import ANSWER_DECODER, STATUSES

#: The largest answer read (bytes): a wallet answer is a few dozen bytes.
MAX_ANSWER = 64 * 1024
#: How long an idle connection is kept for the next call (s). A round's debits come every
#: half minute or so (15 s of betting, then the deal, the reveals and the pause), and a
#: pool that let its connections go after 4 s idle opened every one of them again at each
#: close of betting — hundreds of connects (with https, as many TLS handshakes) just when
#: the debits pile up. A server that closes an idle connection sooner says so (its close
#: reaches :meth:`_Connection.connection_lost` and the connection is not used again; one
#: closed as a call is sent is sent again once), so the bound is for what does not say:
#: kept under the 60 s idle timeout of common load balancers and proxies.
KEEPALIVE_SECONDS = 50.0
#: New connections whose first answer has not come yet, at most (see the module's
#: docstring): under the listen backlogs of common servers (aiohttp's 128, asyncio's 100).
OPENING_AT_ONCE = 64


@dataclass(frozen=True)
class Reply:
    """What came back from one call: a status the contract knows, or None (unknown)."""

    status: str | None
    balance: int | None
    #: For the log: the answer's body, or why there was none.
    text: str
    #: Why the outcome is unknown, in livetable's words only ("timeout", "http 302",
    #: "unreadable answer"): never the wallet's text, so it may be shown publicly.
    reason: str = ""

    @property
    def ok(self) -> bool:
        return self.status == "ok"


class AnswerTooLarge(Exception):
    """The operator's answer is over :data:`MAX_ANSWER` bytes (never read whole)."""


class ConnectionDropped(Exception):
    """The connection closed before the whole answer came (``answered``: after some of
    the answer was read, so it is not sent again)."""

    def __init__(self, answered: bool) -> None:
        super().__init__("the wallet closed the connection before the answer's end")
        self.answered = answered


@dataclass(frozen=True)
class Target:
    """Where the calls go: ``{base}{method}``, parsed once."""

    base: str
    host: str
    port: int
    tls: bool
    path: bytes  # the base's path, ending in "/"
    head: bytes  # the headers every call sends (Host, Content-Type)

    @classmethod
    def of(cls, url: str) -> Target:
        base = url.rstrip("/") + "/"
        parts = urlsplit(base)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"a wallet URL is http(s)://host[:port]/path, not {url!r}")
        if parts.query or parts.fragment or parts.username or parts.password \
                or any(c <= " " or c == "\x7f" for c in base):
            raise ValueError(f"a wallet URL has no query, fragment, user, spaces or control "
                             f"characters: {url!r}")
        tls = parts.scheme == "https"
        port = parts.port or (443 if tls else 80)
        default = port == (443 if tls else 80)
        host = parts.hostname if ":" not in parts.hostname else f"[{parts.hostname}]"
        head = (f"Host: {host if default else f'{host}:{port}'}\r\n"
                "Content-Type: application/json\r\n").encode()
        return cls(base=base, host=parts.hostname, port=port, tls=tls,
                   path=(parts.path or "/").encode(), head=head)


class _Connection(asyncio.Protocol):
    """One kept-alive connection to the wallet; one call on it at a time."""

    def __init__(self, max_answer: int) -> None:
        self.max_answer = max_answer
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpResponseParser(self)
        self.answer: asyncio.Future[tuple[int, bytes]] | None = None
        self.body: list[bytes] = []
        self.size = 0
        self.length: int | None = None  # the answer's Content-Length
        self.delimited = False  # its end is known (a length, or chunked): not the close
        self.headers_done = False
        self.keep_alive = False
        self.closed = False
        self.idle_since = 0.0

    # asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's: no subclass of it

    def data_received(self, data: bytes) -> None:
        if self.answer is None or self.answer.done():  # an answer nobody asked for
            self.drop()
            return
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._fail(httptools.HttpParserError("the wallet answered with an upgrade"))
        except httptools.HttpParserError as exc:
            # raised in a callback (the cap): httptools wraps it, the cause in its context
            cause = exc.__context__
            self._fail(cause if isinstance(cause, AnswerTooLarge) else exc)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self.answer is not None and not self.answer.done():
            if self.headers_done and not self.delimited:  # an answer ended by the close
                self.answer.set_result((self.parser.get_status_code(), b"".join(self.body)))
            else:
                self.answer.set_exception(ConnectionDropped(self.size > 0 or self.headers_done))

    # httptools' callbacks
    def on_header(self, name: bytes, value: bytes) -> None:
        if name.lower() == b"content-length":  # a number: llhttp refuses any other
            self.length = int(value)
            if self.length > self.max_answer:
                raise AnswerTooLarge(f"answer of {self.length} bytes, over the "
                                     f"{self.max_answer}-byte cap (not read)")
        elif name.lower() == b"transfer-encoding" and b"chunked" in value.lower():
            self.delimited = True

    def on_headers_complete(self) -> None:
        self.headers_done = True
        self.delimited = self.delimited or self.length is not None
        self.keep_alive = self.parser.should_keep_alive()

    def on_body(self, body: bytes) -> None:
        self.size += len(body)
        if self.size > self.max_answer:
            raise AnswerTooLarge(f"answer over the {self.max_answer}-byte cap "
                                 f"(read no further)")
        self.body.append(body)

    def on_message_complete(self) -> None:
        if self.answer is not None and not self.answer.done():
            self.answer.set_result((self.parser.get_status_code(), b"".join(self.body)))
        else:  # a second answer to one request: the connection cannot be trusted
            self.keep_alive = False

    # the client's side
    def send(self, request: bytes) -> asyncio.Future[tuple[int, bytes]]:
        assert self.transport is not None
        self.answer = asyncio.get_running_loop().create_future()
        self.body, self.size, self.length = [], 0, None
        self.delimited = self.headers_done = self.keep_alive = False
        self.transport.write(request)
        return self.answer

    def reusable(self) -> bool:
        """Whether the last call ended cleanly and the server keeps the connection."""
        return (not self.closed and self.keep_alive and self.answer is not None
                and self.answer.done() and not self.answer.cancelled()
                and self.answer.exception() is None)

    def drop(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.abort()

    def _fail(self, exc: Exception) -> None:
        if self.answer is not None and not self.answer.done():
            self.answer.set_exception(exc)
        self.drop()


def _expire(answer: asyncio.Future[Any]) -> None:
    """The call's deadline came before its answer (or a connection to make it on)."""
    if not answer.done():
        answer.set_exception(TimeoutError())


class WalletClient:
    """Signed calls to ``{wallet_url}/{method}`` over a bounded pool of keep-alive
    connections. Never raises for the operator's sake: every failure is a :class:`Reply`
    with ``status`` None."""

    def __init__(self, url: str, secret: bytes, *, timeout: float, connections: int,
                 max_answer: int = MAX_ANSWER, opening: int = OPENING_AT_ONCE) -> None:
        self.target = Target.of(url)
        self.secret = secret
        self.timeout = timeout
        self.connections = connections
        self.max_answer = max_answer
        self.opening = opening
        self._idle: deque[_Connection] = deque()
        #: New connections not answered yet (each a place among :attr:`opening`), and the
        #: calls waiting for a place or for a connection another call is done with.
        self._opened = 0
        self._waiting: deque[asyncio.Future[_Connection | None]] = deque()
        #: The clock of the connections' idle time (a test's own).
        self.clock: Callable[[], float] = time.monotonic
        # made on the first call: a semaphore belongs to the running event loop
        self._slots: asyncio.Semaphore | None = None
        self._tls: ssl.SSLContext | None = None

    @property
    def base(self) -> str:
        """``{wallet_url}/``: where the calls go."""
        return self.target.base

    def point_at(self, url: str, secret: bytes) -> None:
        """Call ``url``, signed with ``secret``, from the next call on (a call in flight
        ends where it began; its connection is not kept)."""
        target = Target.of(url)
        if target != self.target:
            self.target = target
            while self._idle:
                self._idle.pop().drop()
        self.secret = secret

    async def call(self, method: str, body: bytes, timeout: float | None = None) -> Reply:
        """POST ``body`` to ``method``; ``timeout`` (seconds, default the client's) bounds
        the whole call."""
        seconds = self.timeout if timeout is None else max(0.001, timeout)
        try:
            status, content = await self._post(
                method, body, asyncio.get_running_loop().time() + seconds)
        except TimeoutError:
            return Reply(None, None, "timeout", "timeout")
        except AnswerTooLarge as exc:
            return Reply(None, None, str(exc), "answer too large")
        except (httptools.HttpParserError, ConnectionDropped, OSError, ValueError) as exc:
            return Reply(None, None, f"{type(exc).__name__}: {exc}"[:200],
                         type(exc).__name__)
        text = content[:500].decode("utf-8", "replace")
        if status != 200:
            return Reply(None, None, f"http {status}: {text}", f"http {status}")
        try:
            answer = ANSWER_DECODER.decode(content)
        except msgspec.DecodeError:
            return Reply(None, None, f"unreadable: {text}", "unreadable answer")
        if answer.status not in STATUSES:
            return Reply(None, answer.balance, f"unknown status: {text}", "unknown status")
        return Reply(answer.status, answer.balance, text)

    async def _post(self, method: str, body: bytes, deadline: float) -> tuple[int, bytes]:
        """The call, by ``deadline`` (the loop's clock) or TimeoutError."""
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.connections)
        slots = self._slots  # at most ``connections`` calls, so connections, at once
        if slots.locked():
            async with asyncio.timeout_at(deadline):
                await slots.acquire()
        else:
            await slots.acquire()  # free: taken at once, nothing awaited
        try:
            target = self.target
            request = self._request(target, method, body)
            conn = self._kept()
            if conn is not None:
                try:
                    return await self._exchange(target, conn, request, deadline)
                except ConnectionDropped as exc:
                    if exc.answered:
                        raise
                    # closed by the server while it sat idle: once more, on a fresh one
            conn = await self._connection_or_place(deadline)
            if target is not self.target:  # pointed elsewhere while it waited
                target = self.target
                request = self._request(target, method, body)
            if conn is not None:  # one another call was done with
                return await self._exchange(target, conn, request, deadline)
            try:  # a place among the new connections is this call's
                async with asyncio.timeout_at(deadline):
                    conn = await self._connect(target)
                return await self._exchange(target, conn, request, deadline)
            finally:
                self._opened -= 1
                self._pass_places()
        finally:
            slots.release()

    async def _connection_or_place(self, deadline: float) -> _Connection | None:
        """A connection another call is done with, or None: a place among the new
        connections taken (the caller opens one and gives the place back)."""
        while self._opened >= self.opening:
            loop = asyncio.get_running_loop()
            waiter: asyncio.Future[_Connection | None] = loop.create_future()
            self._waiting.append(waiter)
            timer = loop.call_at(deadline, _expire, waiter)  # one timer, as for the answer
            try:
                conn = await waiter
            except BaseException:
                # a cancel, perhaps just as a connection or a place was given: passed on
                if waiter.done() and not waiter.cancelled() and waiter.exception() is None:
                    given = waiter.result()
                    if given is None:
                        self._opened -= 1
                        self._pass_places()
                    else:
                        self._give_back(given)
                raise
            finally:
                timer.cancel()
            if conn is None:
                return None  # the place was taken for this call (_pass_places)
            if not conn.closed:
                return conn
        self._opened += 1
        return None

    def _pass_places(self) -> None:
        """Places among the new connections that came free, to the calls waiting."""
        while self._waiting and self._opened < self.opening:
            waiter = self._waiting.popleft()
            if not waiter.done():
                self._opened += 1
                waiter.set_result(None)

    def _give_back(self, conn: _Connection) -> None:
        """A connection done with a call: to the first call waiting, else kept idle."""
        while self._waiting:
            waiter = self._waiting.popleft()
            if not waiter.done():
                waiter.set_result(conn)
                return
        conn.idle_since = self.clock()
        self._idle.append(conn)

    async def _exchange(self, target: Target, conn: _Connection, request: bytes,
                        deadline: float) -> tuple[int, bytes]:
        answer = conn.send(request)
        timer = asyncio.get_running_loop().call_at(deadline, _expire, answer)
        try:
            result = await answer
        except BaseException:
            conn.drop()  # mid-answer (the deadline, a cancel, a failure): never reused
            raise
        finally:
            timer.cancel()
        if conn.reusable() and target is self.target:
            self._give_back(conn)
        else:
            conn.drop()
        return result

    def _kept(self) -> _Connection | None:
        """The most recently used idle connection still worth using, if any."""
        fresh_since = self.clock() - KEEPALIVE_SECONDS
        while self._idle:
            conn = self._idle.pop()
            if not conn.closed and conn.idle_since >= fresh_since:
                return conn
            conn.drop()
        return None

    async def _connect(self, target: Target) -> _Connection:
        loop = asyncio.get_running_loop()
        if target.tls and self._tls is None:
            self._tls = ssl.create_default_context()
        max_answer = self.max_answer
        _, conn = await loop.create_connection(
            lambda: _Connection(max_answer), target.host, target.port,
            ssl=self._tls if target.tls else None,
            server_hostname=target.host if target.tls else None)
        return conn

    def _request(self, target: Target, method: str, body: bytes) -> bytes:
        signed = signatures.headers(self.secret, body, now_ms())
        lines = "".join(f"{name}: {value}\r\n" for name, value in signed.items())
        return b"".join((b"POST ", target.path, method.encode(), b" HTTP/1.1\r\n",
                         target.head, lines.encode(),
                         b"Content-Length: %d\r\n\r\n" % len(body), body))

    async def aclose(self) -> None:
        while self._idle:
            self._idle.pop().drop()
