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

Several operators at once (:func:`create_operators_app`, ``livetable operator-demo
--operators FILE``): one server plays every operator of a registry file — the same file
livetable serves them from — each at ``/{operator}/wallet/{method}`` with its own books per
currency, checking its own ``wallet_secrets`` (any one of them: a rotation), and each
launching its players with ``GET /{operator}/launch?player_id=…&currency=…`` (signed with
the first of its ``operator_secrets``), so a player is at a table in one request.
"""

from __future__ import annotations

import asyncio
import random
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import msgspec
from aiohttp import web
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from livetable.clock import now_ms
from livetable.operator import signatures
from livetable.operator.registry import Operator, Registry

FAULT_KINDS = ("timeout", "error", "lost", "garbage", "slow", "duplicate")
METHODS = ("balance", "debit", "credit", "rollback")


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


#: Where one call's books are, or None (an operator this server does not play).
BooksOf = Callable[[Call], "Books | None"]
JSON = "application/json"


async def respond(secrets: Sequence[bytes] | None, books_of: BooksOf, chaos: Faults,
                  forged: Callable[[], None], method: str, body: bytes,
                  headers: Mapping[str, str]) -> tuple[int, bytes, str]:
    """One wallet call, whichever HTTP server carries it: (status, body, content type).

    The signature is checked first, over the raw body, with any of ``secrets`` (None: an
    operator not played here; ``forged`` counts a failure); then the call is applied to
    ``books_of(call)``, faults drawn from ``chaos``."""
    if method not in METHODS or secrets is None:
        return 404, _answer("unknown_method"), JSON
    if signatures.check(secrets, body, headers, now_ms()) is not None:
        forged()
        return 200, _answer("invalid_signature"), JSON
    try:
        call = _CALL.decode(body)
    except msgspec.DecodeError as exc:
        return 400, msgspec.json.encode({"status": "bad_request", "message": str(exc)}), JSON
    books = books_of(call)
    assert books is not None  # secrets were found: the operator is played here
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


def _wallet(secrets_of: Callable[[Request], Sequence[bytes] | None],
            books_of: Callable[[Request, Call], Books | None], chaos: Faults,
            forged: Callable[[Request], None]) -> Callable[[Request], Any]:
    """The wallet endpoint on Starlette (:func:`respond` for the request's operator)."""

    async def wallet(request: Request) -> Response:
        status, content, kind = await respond(
            secrets_of(request), lambda call: books_of(request, call), chaos,
            lambda: forged(request), request.path_params["method"], await request.body(),
            request.headers)
        return Response(content, status_code=status, media_type=kind)

    return wallet


def create_operator_app(secret: bytes, *, initial_balance: int = 100_000,
                        faults: Faults | None = None) -> Starlette:
    """One operator's wallet at ``/wallet/{method}``, its books at ``/state``."""
    books = Books(initial_balance)
    chaos = faults or Faults()

    def forged(request: Request) -> None:
        books.forged += 1

    wallet = _wallet(lambda request: (secret,), lambda request, call: books, chaos, forged)

    async def state(request: Request) -> Response:
        return JSONResponse({**books.state(), "faults": chaos.seen})

    app = Starlette(routes=[Route("/wallet/{method}", wallet, methods=["POST"]),
                            Route("/state", state)])
    app.state.books = books  # the tests' look at the books (tests/unit/test_wallet.py)
    return app


def create_operator_server(secret: bytes, *, initial_balance: int = 100_000,
                           faults: Faults | None = None) -> web.Application:
    """One operator on aiohttp's server (what ``livetable operator-demo`` runs for one
    operator): its HTTP parser is C, where uvicorn's h11 is Python — the bench's wallet
    must not be the bottleneck it measures (docs/benchmarks.md: about 300 µs of CPU a call
    on Starlette/h11). The several-operator demo (:func:`create_operators_app`) stays on
    Starlette: it is for a first look, not for the bench."""
    books = Books(initial_balance)
    chaos = faults or Faults()

    def count_forged() -> None:
        books.forged += 1

    async def wallet(request: web.Request) -> web.Response:
        status, content, kind = await respond(
            (secret,), lambda call: books, chaos, count_forged, request.match_info["method"],
            await request.read(), request.headers)
        return web.Response(body=content, status=status, content_type=kind)

    async def state(request: web.Request) -> web.Response:
        return web.json_response({**books.state(), "faults": chaos.seen})

    app = web.Application()
    app.router.add_post("/wallet/{method}", wallet)
    app.router.add_get("/state", state)
    return app


def _launcher(registry: Registry, livetable_url: str) -> Callable[[Request], Any]:
    """``GET /{operator}/launch?player_id=…&currency=…``: the operator puts its player at a
    table — a launch v2 signed with its first operator secret, livetable's answer back."""

    async def launch(request: Request) -> Response:
        found = registry.get(request.path_params["operator"])
        query = request.query_params
        if found is None or "player_id" not in query or "currency" not in query:
            return JSONResponse({"error": "GET /{operator}/launch?player_id=…&currency=…"
                                          "[&name=…&table=…&language=…]"}, status_code=404)
        fields = {"request_id": f"demo-{uuid.uuid4().hex}", "player_id": query["player_id"],
                  "name": query.get("name", query["player_id"]),
                  "currency": query["currency"],
                  **{key: query[key] for key in ("table", "language") if key in query}}
        body = msgspec.json.encode(fields)
        headers = {**signatures.headers(found.operator_secrets[0], body, now_ms(), found.id),
                   "content-type": "application/json"}
        try:
            async with aiohttp.ClientSession(trust_env=False) as http, http.post(
                    livetable_url.rstrip("/") + "/api/operator/sessions", data=body,
                    headers=headers) as answer:
                return Response(await answer.read(), status_code=answer.status,
                                media_type="application/json")
        except aiohttp.ClientError as exc:  # not up yet, or elsewhere
            return JSONResponse({"error": f"livetable at {livetable_url} did not answer: "
                                          f"{exc}"}, status_code=502)

    return launch


def create_operators_app(registry: Registry, livetable_url: str, *,
                         initial_balance: int = 100_000,
                         faults: Faults | None = None) -> Starlette:
    """Every operator of ``registry`` at once (see the module docstring): books per
    operator and currency, ``/{operator}/wallet/{method}``, ``/{operator}/launch``, and
    ``/state`` (operator → currency → books)."""
    chaos = faults or Faults()
    #: (operator, currency) → its books: two operators' p-1 are two players
    ledgers: dict[tuple[str, str], Books] = {}
    #: operator → requests whose signature did not check
    forgeries: dict[str, int] = {}

    def operator(request: Request) -> Operator | None:
        return registry.get(request.path_params["operator"])

    def secrets_of(request: Request) -> Sequence[bytes] | None:
        found = operator(request)
        return None if found is None else found.wallet_secrets

    def books_of(request: Request, call: Call) -> Books | None:
        found = operator(request)
        if found is None:
            return None
        key = (found.id, call.currency)
        if key not in ledgers:
            ledgers[key] = Books(initial_balance)
        return ledgers[key]

    def forged(request: Request) -> None:
        operator_id = request.path_params["operator"]
        forgeries[operator_id] = forgeries.get(operator_id, 0) + 1

    async def state(request: Request) -> Response:
        books: dict[str, dict[str, Any]] = {}
        for (operator_id, currency), kept in ledgers.items():
            books.setdefault(operator_id, {})[currency] = kept.state()
        return JSONResponse({"operators": books, "forged": forgeries, "faults": chaos.seen})

    app = Starlette(routes=[
        Route("/{operator}/wallet/{method}", _wallet(secrets_of, books_of, chaos, forged),
              methods=["POST"]),
        Route("/{operator}/launch", _launcher(registry, livetable_url)),
        Route("/state", state)])
    return app
