"""The HTTP client of the seamless wallet: signed calls to the operator, never an exception.

Every failure of a call (a timeout, a refused connection, a non-200, a body that does not
parse, a status the contract does not know) is a :class:`Reply` whose ``status`` is None:
an unknown outcome, which the caller answers by rolling back (see
:mod:`livetable.operator.seamless`).
"""

from __future__ import annotations

from dataclasses import dataclass

import httpx
import msgspec

from livetable.clock import now_ms
from livetable.operator import signatures
from livetable.operator.calls import ANSWER_DECODER, STATUSES


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


class WalletClient:
    """Signed calls to ``{wallet_url}/{method}`` over a bounded pool of keep-alive
    connections (httpx). Never raises for the operator's sake: every failure is a
    :class:`Reply` with ``status`` None."""

    def __init__(self, url: str, secret: bytes, *, timeout: float, connections: int,
                 transport: httpx.AsyncBaseTransport | None = None) -> None:
        self.secret = secret
        self.timeout = timeout
        self.http = httpx.AsyncClient(
            base_url=url.rstrip("/") + "/", timeout=httpx.Timeout(timeout),
            limits=httpx.Limits(max_connections=connections,
                                max_keepalive_connections=connections),
            trust_env=False, transport=transport)

    async def call(self, method: str, body: bytes, timeout: float | None = None) -> Reply:
        seconds = self.timeout if timeout is None else max(0.001, timeout)
        try:
            response = await self.http.post(
                method, content=body, timeout=httpx.Timeout(seconds),
                headers={**signatures.headers(self.secret, body, now_ms()),
                         "content-type": "application/json"})
        except httpx.TimeoutException:
            return Reply(None, None, "timeout")
        except httpx.HTTPError as exc:
            return Reply(None, None, f"{type(exc).__name__}: {exc}"[:200])
        text = response.text[:500]
        if response.status_code != 200:
            return Reply(None, None, f"http {response.status_code}: {text}")
        try:
            answer = ANSWER_DECODER.decode(response.content)
        except msgspec.DecodeError:
            return Reply(None, None, f"unreadable: {text}")
        if answer.status not in STATUSES:
            return Reply(None, answer.balance, f"unknown status: {text}")
        return Reply(answer.status, answer.balance, text)

    async def aclose(self) -> None:
        await self.http.aclose()
