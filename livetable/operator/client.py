"""The HTTP client of the seamless wallet: signed calls to the operator, never an exception.

Every failure of a call (a timeout, a refused connection, a non-200, a body that does not
parse, a status the contract does not know, an answer too large) is a :class:`Reply` whose
``status`` is None: an unknown outcome, which the caller answers by rolling back (see
:mod:`livetable.operator.seamless`).

Why aiohttp: a seamless bet costs one call, and at the close of betting hundreds are in
flight at once; measured that way (``bench/http_clients.py``, docs/benchmarks.md) aiohttp
costs a small fraction of httpx's CPU per call and is the most used, best kept of the
clients that came close.

Two limits hold whatever the operator's server does:

* **One deadline for the whole call** — waiting for a pooled connection, connecting,
  sending, the status line, the headers and the body together (``asyncio.timeout``
  around all of it), so a wallet that trickles its answer a byte at a time ends at the
  deadline, not after one read timeout per byte;
* **answers of at most** :data:`MAX_ANSWER` **bytes**: a longer ``Content-Length`` is
  refused before the body is read, and a body without one is read in pieces only up to
  the cap, then the connection is dropped. Memory per call stays bounded.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import aiohttp
import msgspec

from livetable.clock import now_ms
from livetable.operator import signatures
from livetable.operator.calls import ANSWER_DECODER, STATUSES

#: The largest answer read (bytes): a wallet answer is a few dozen bytes.
MAX_ANSWER = 64 * 1024
#: How long an idle connection is kept for the next call (s).
KEEPALIVE_SECONDS = 4.0


@dataclass(frozen=True)
class Reply:
    """What came back from one call: a status the contract knows, or None (unknown)."""

    status: str | None
    balance: int | None
    #: For the log: the answer's body, or why there was none.
    text: str

    @property
    def ok(self) -> bool:
        return self.status == "ok"


class AnswerTooLarge(Exception):
    """The operator's answer is over :data:`MAX_ANSWER` bytes (never read whole)."""


class WalletClient:
    """Signed calls to ``{wallet_url}/{method}`` over a bounded pool of keep-alive
    connections (aiohttp). Never raises for the operator's sake: every failure is a
    :class:`Reply` with ``status`` None."""

    def __init__(self, url: str, secret: bytes, *, timeout: float, connections: int,
                 max_answer: int = MAX_ANSWER) -> None:
        self.base = url.rstrip("/") + "/"
        self.secret = secret
        self.timeout = timeout
        self.connections = connections
        self.max_answer = max_answer
        # made on the first call: an aiohttp session belongs to the running event loop
        self._session: aiohttp.ClientSession | None = None

    def _http(self) -> aiohttp.ClientSession:
        if self._session is None:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(
                    limit=self.connections, limit_per_host=self.connections,
                    # idle connections are dropped before common servers drop them
                    # (uvicorn's keep-alive is 5 s), so that few calls meet a dead one
                    keepalive_timeout=KEEPALIVE_SECONDS),
                # the deadline is ours (asyncio.timeout, the whole call); no proxies from
                # the environment; no cookies: every call stands alone
                timeout=aiohttp.ClientTimeout(total=None), trust_env=False,
                cookie_jar=aiohttp.DummyCookieJar())
        return self._session

    async def call(self, method: str, body: bytes, timeout: float | None = None) -> Reply:
        """POST ``body`` to ``method``; ``timeout`` (seconds, default the client's) bounds
        the whole call."""
        seconds = self.timeout if timeout is None else max(0.001, timeout)
        try:
            async with asyncio.timeout(seconds):
                try:
                    status, content = await self._post(method, body)
                except (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError):
                    # a pooled connection the server had closed while it sat idle (a
                    # keep-alive timeout shorter than ours): sent again once, on a fresh
                    # connection, within the same deadline — safe, as every call is
                    # idempotent by its tx_id (and a balance moves nothing)
                    status, content = await self._post(method, body)
        except TimeoutError:
            return Reply(None, None, "timeout")
        except AnswerTooLarge as exc:
            return Reply(None, None, str(exc))
        except (aiohttp.ClientError, OSError, ValueError) as exc:
            return Reply(None, None, f"{type(exc).__name__}: {exc}"[:200])
        text = content[:500].decode("utf-8", "replace")
        if status != 200:
            return Reply(None, None, f"http {status}: {text}")
        try:
            answer = ANSWER_DECODER.decode(content)
        except msgspec.DecodeError:
            return Reply(None, None, f"unreadable: {text}")
        if answer.status not in STATUSES:
            return Reply(None, answer.balance, f"unknown status: {text}")
        return Reply(answer.status, answer.balance, text)

    async def _post(self, method: str, body: bytes) -> tuple[int, bytes]:
        headers = {**signatures.headers(self.secret, body, now_ms()),
                   "content-type": "application/json"}
        async with self._http().post(self.base + method, data=body,
                                     headers=headers) as response:
            try:
                return response.status, await self._read(response)
            except BaseException:
                # a body not read to its end (too large, the deadline, cancelled): the
                # connection cannot carry another call
                response.close()
                raise

    async def _read(self, response: aiohttp.ClientResponse) -> bytes:
        cap = self.max_answer
        if response.content_length is not None and response.content_length > cap:
            raise AnswerTooLarge(f"answer of {response.content_length} bytes, over the "
                                 f"{cap}-byte cap (not read)")
        parts: list[bytes] = []
        size = 0
        while True:
            part = await response.content.read(cap + 1 - size)
            if not part:
                return b"".join(parts)
            parts.append(part)
            size += len(part)
            if size > cap:
                raise AnswerTooLarge(f"answer over the {cap}-byte cap (read no further)")

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
