"""A reference operator: a small, real seamless wallet server (``livetable operator-demo``).

It is what an operator's side of docs/design.md §5 must do, in one file, and the counterpart the
tests run livetable against over real HTTP:

* every call's signature is checked over the raw body (a forged one is answered
  ``invalid_signature`` and changes nothing);
* it is idempotent by ``tx_id``: a repeated ``tx_id`` gets the first answer, byte for byte;
* a ``rollback`` of a debit it never saw is ``ok``, and that debit is refused
  (``rolled_back``) if it arrives later; a rollback of an applied debit refunds it once;
* it keeps balances (players are opened with ``initial_balance`` on first sight).

And it misbehaves on purpose (:class:`Faults`), per method, at a rate, from a seed:
``timeout`` (hold the request past the client's patience, then apply it anyway, late),
``error`` (HTTP 500, nothing applied), ``lost`` (apply, then answer 500: the ``ok`` is
lost), ``garbage`` (apply, then answer a body that does not parse), ``slow`` (answer after
``slow`` seconds) and ``duplicate`` (the request is processed twice, as a network that
delivers it twice would). ``GET /state`` shows the books, for tests and for a look.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import msgspec
from aiohttp import web
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from livetable.clock import now_ms
from livetable.operator import signatures

FAULT_KINDS = ("timeout", "error", "lost", "garbage", "slow", "duplicate")
METHODS = ("balance", "debit", "credit", "rollback")
JSON = "application/json"


class Faults:
    """Which fault (if any) a call meets: ``rates[method][kind]`` in [0, 1], drawn from
    one seeded generator (so a run can be repeated)."""

    def __init__(self, rates: dict[str, dict[str, float]] | None = None, seed: int = 0,
                 hang: float = 5.0, slow: float = 0.2) -> None:
        self.rates = rates or {}
        self.rng = random.Random(seed)
        self.hang = hang
        self.slow = slow
        self.seen: dict[str, int] = {}

    @classmethod
    def parse(cls, specs: list[str], seed: int = 0, hang: float = 5.0,
              slow: float = 0.2) -> Faults:
        """``["debit:timeout=0.05,lost=0.05", "*:error=0.1"]`` (``*`` = every method)."""
        rates: dict[str, dict[str, float]] = {}
        for spec in specs:
            method, _, rest = spec.partition(":")
            methods = METHODS if method == "*" else (method,)
            if any(m not in METHODS for m in methods) or not rest:
                raise ValueError(f"fault {spec!r}: METHOD:KIND=RATE[,KIND=RATE…], METHOD "
                                 f"one of {', '.join(METHODS)} or *")
            for item in rest.split(","):
                kind, _, rate = item.partition("=")
                if kind not in FAULT_KINDS:
                    raise ValueError(f"fault kind {kind!r}: one of {', '.join(FAULT_KINDS)}")
                value = float(rate)
                if not 0 <= value <= 1:
                    raise ValueError(f"fault rate {rate!r} must be within 0 and 1")
                for m in methods:
                    rates.setdefault(m, {})[kind] = value
        return cls(rates, seed, hang, slow)

    def draw(self, method: str) -> str | None:
        roll = self.rng.random()
        for kind, rate in self.rates.get(method, {}).items():
            if roll < rate:
                self.seen[kind] = self.seen.get(kind, 0) + 1
                return kind
            roll -= rate
        return None


class Call(msgspec.Struct, kw_only=True):
    """Any of the four bodies (fields a method does not have stay at their default)."""

    player_id: str
    currency: str = ""
    tx_id: str = ""
    amount: int = 0
    table_id: str = ""
    round_id: str = ""
    debit_tx_id: str = ""
    debit_tx_ids: list[str] = msgspec.field(default_factory=list)
    bets: list[dict[str, Any]] = msgspec.field(default_factory=list)


_CALL = msgspec.json.Decoder(Call)


@dataclass
class Books:
    """The operator's money: balances, and every transaction by tx_id."""

    initial_balance: int
    balances: dict[str, int] = field(default_factory=dict)
    #: tx_id -> the first answer (what a repeat of the tx_id gets back)
    answers: dict[str, bytes] = field(default_factory=dict)
    #: tx_id -> the call, for each one applied (money moved or recorded)
    applied: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: how many times each tx_id's effect was applied (must never exceed 1)
    applications: dict[str, int] = field(default_factory=dict)
    #: debits rolled back (whether or not they were ever seen), and who rolled them back
    rolled_back: dict[str, str] = field(default_factory=dict)
    forged: int = 0

    def balance(self, player_id: str) -> int:
        return self.balances.setdefault(player_id, self.initial_balance)

    def handle(self, method: str, call: Call) -> bytes:
        """Apply one call (once per tx_id) and give its answer."""
        if method == "balance":
            return _answer("ok", self.balance(call.player_id))
        prior = self.answers.get(call.tx_id)
        if prior is not None:
            return prior
        answer = self._apply(method, call)
        self.answers[call.tx_id] = answer
        return answer

    def _record(self, method: str, call: Call) -> None:
        self.applications[call.tx_id] = self.applications.get(call.tx_id, 0) + 1
        self.applied[call.tx_id] = {"method": method, **msgspec.to_builtins(call)}

    def _apply(self, method: str, call: Call) -> bytes:
        balance = self.balance(call.player_id)
        if call.amount < 0:
            return _answer("limit_exceeded", balance)
        if method == "debit":
            if call.tx_id in self.rolled_back:
                return _answer("rolled_back", balance)
            if balance < call.amount:
                return _answer("insufficient_funds", balance)
            self.balances[call.player_id] = balance - call.amount
            self._record(method, call)
        elif method == "credit":
            self.balances[call.player_id] = balance + call.amount
            self._record(method, call)
        elif method == "rollback":
            debit = call.debit_tx_id
            if debit not in self.rolled_back:
                self.rolled_back[debit] = call.tx_id
                original = self.applied.get(debit)
                if original is not None and original["method"] == "debit":
                    self.balances[call.player_id] = balance + int(original["amount"])
                self._record(method, call)
        else:
            return _answer("unknown_method")
        return _answer("ok", self.balances[call.player_id])

    def state(self) -> dict[str, Any]:
        return {"balances": self.balances, "applied": self.applied,
                "applications": self.applications, "rolled_back": self.rolled_back,
                "forged": self.forged}


def _answer(status: str, balance: int | None = None) -> bytes:
    body: dict[str, Any] = {"status": status}
    if balance is not None:
        body["balance"] = balance
    return msgspec.json.encode(body)


#: The books of an aiohttp operator server (``app[BOOKS]``).
BOOKS = web.AppKey("books", Books)


async def respond(books: Books, chaos: Faults, secret: bytes, method: str, body: bytes,
                  headers: Mapping[str, str]) -> tuple[int, bytes, str]:
    """One wallet call, whichever server carries it: (HTTP status, body, content type)."""
    if method not in METHODS:
        return 404, _answer("unknown_method"), JSON
    if signatures.check((secret,), body, headers, now_ms()) is not None:
        books.forged += 1
        return 200, _answer("invalid_signature"), JSON
    try:
        call = _CALL.decode(body)
    except msgspec.DecodeError as exc:
        return 400, msgspec.json.encode({"status": "bad_request", "message": str(exc)}), JSON
    fault = chaos.draw(method)
    if fault == "timeout":
        await asyncio.sleep(chaos.hang)  # the client gave up; the call lands anyway
    elif fault == "slow":
        await asyncio.sleep(chaos.slow * (0.5 + chaos.rng.random()))
    elif fault == "error":
        return 500, b"internal error", "text/plain"
    answer = books.handle(method, call)
    if fault == "duplicate":
        again = books.handle(method, call)
        assert again == answer, "a repeated tx_id must get the first answer"
    if fault == "lost":
        return 500, b"upstream reset", "text/plain"
    if fault == "garbage":
        return 200, b"<html>502 Bad Gateway</html>", "text/html"
    return 200, answer, JSON


def create_operator_app(secret: bytes, *, initial_balance: int = 100_000,
                        faults: Faults | None = None) -> Starlette:
    """The reference operator as an ASGI app (what the tests serve in-process)."""
    books = Books(initial_balance)
    chaos = faults or Faults()

    async def wallet(request: Request) -> Response:
        status, content, kind = await respond(books, chaos, secret,
                                              request.path_params["method"],
                                              await request.body(), request.headers)
        return Response(content, status_code=status, media_type=kind)

    async def state(request: Request) -> Response:
        return JSONResponse({**books.state(), "faults": chaos.seen})

    app = Starlette(routes=[Route("/wallet/{method}", wallet, methods=["POST"]),
                            Route("/state", state)])
    app.state.books = books
    app.state.faults = chaos
    return app


def create_operator_server(secret: bytes, *, initial_balance: int = 100_000,
                           faults: Faults | None = None) -> web.Application:
    """The same operator on aiohttp's server (what ``livetable operator-demo`` runs): its
    HTTP parser is C, where uvicorn's h11 is Python — the bench's wallet must not be the
    bottleneck it measures (docs/benchmarks.md: about 300 µs of CPU a call on
    Starlette/h11)."""
    books = Books(initial_balance)
    chaos = faults or Faults()

    async def wallet(request: web.Request) -> web.Response:
        status, content, kind = await respond(books, chaos, secret,
                                              request.match_info["method"],
                                              await request.read(), request.headers)
        return web.Response(body=content, status=status, content_type=kind)

    async def state(request: web.Request) -> web.Response:
        return web.json_response({**books.state(), "faults": chaos.seen})

    app = web.Application()
    app.router.add_post("/wallet/{method}", wallet)
    app.router.add_get("/state", state)
    app[BOOKS] = books
    return app
