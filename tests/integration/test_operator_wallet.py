"""Operator integration over real HTTP: launch sessions, and livetable's seamless wallet
against the reference operator (``livetable operator-demo``) with faults on, for many
rounds, with kill -9 of livetable in the middle.

What the long run proves, from outside (the operator's books, the Bet Record, the rounds'
cards and the rules' settlement function):

* each player's balance at the operator = the start + what the rules pay for the bets
  livetable accepted (a cancelled round's bets net 0);
* no tx_id was applied twice by the operator;
* every debit the operator applied is closed by exactly one credit or one rollback;
* nothing is left in the outbox, no debit is open, the ledger's audit passes, and
  livetable holds no money of a seamless player.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import random
import socket
import sqlite3
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from deployment import running
from liveserver import LiveServer, WireClient, close_all, expected_settlement
from walletserver import (
    OPERATOR_SECRET,
    OperatorServer,
    launch,
    launch_body,
    seamless_deployment,
    seamless_env,
    signed_post,
    wallet_report,
)

from livetable.clock import now_ms
from livetable.operator import signatures
from livetable.store.postgres import PostgresStore

PLAYERS = ["alice", "bob", "chai", "dev"]
#: Every fault the reference operator has, on every method that can meet it.
#: The many-rounds tests are about the money, not the cards: the reveals go by quickly.
QUICK_REVEALS = 0.05
FAULTS = [
    "debit:timeout=0.05,error=0.05,lost=0.05,garbage=0.03,slow=0.15,duplicate=0.05",
    "credit:timeout=0.08,error=0.15,lost=0.1,garbage=0.05,slow=0.1,duplicate=0.1",
    "rollback:timeout=0.08,error=0.15,lost=0.1,garbage=0.05,slow=0.1,duplicate=0.1",
    "balance:error=0.2",
]


@pytest.fixture(scope="module")
def calm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[OperatorServer,
                                                                      LiveServer]]:
    """A seamless server whose operator never misbehaves (for the launch tests)."""
    with seamless_deployment(tmp_path_factory.mktemp("calm"),
                             env={"LIVETABLE_REQUEST_BODY_TIMEOUT": "2"}) as deployment:
        yield deployment


# --- launch ---------------------------------------------------------------------------


def test_a_launch_opens_the_table_as_that_player_with_the_token_in_the_fragment(
        calm: tuple[OperatorServer, LiveServer]) -> None:
    operator, server = calm
    session = launch(server, "ana@op.example", currency="INR", language="hi", table="t1")
    parts = urlsplit(session["url"])
    assert parts.path == "/table.html" and parse_qs(parts.query) == {"table": ["t1"]}
    fragment = parse_qs(parts.fragment)
    assert fragment == {"token": [session["token"]], "lang": ["hi"]}
    assert session["token"] not in parts.query
    assert session["expires_at"] > time.time() * 1000 + 3600_000

    async def welcome() -> dict[str, Any]:
        client = await WireClient.connect(server.ws)
        try:
            return await client.hello(session["token"])
        finally:
            await client.close()

    player = asyncio.run(welcome())["player"]
    assert player == {"id": "ana@op.example", "name": "Ana@Op.Example",
                      "balance": operator.initial_balance, "currency": "INR",
                      "tips": {"min": 10, "max": 5000}}  # tips on: the table's limits
    assert server.get("/table.html").status_code == 200


@pytest.mark.parametrize("header", ["forged", "missing", "other-body", "body-only (v1)",
                                    "stale", "future", "non-ascii"])
def test_a_launch_without_the_operators_signature_is_refused(
        calm: tuple[OperatorServer, LiveServer], header: str) -> None:
    _, server = calm
    body = (b'{"request_id":"r-0123456789","player_id":"mallory","name":"M",'
            b'"currency":"THB"}')
    now = now_ms()
    secret = OPERATOR_SECRET.encode()
    v1 = "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest()
    headers: Any = {  # "non-ascii" sends bytes, outside httpx's declared types
        "forged": signatures.headers(b"guessed", body, now),
        "missing": {},
        "other-body": signatures.headers(secret, b"{}", now),
        # version 1 signed the body alone: a capture was a login for ever
        "body-only (v1)": {signatures.HEADER: v1},
        # a minute past the allowed skew each way: the request may reach the server seconds
        # after `now` on a loaded machine (1 s past it once let "future" in)
        "stale": signatures.headers(secret, body, now - signatures.MAX_SKEW_MS - 60_000),
        "future": signatures.headers(secret, body, now + signatures.MAX_SKEW_MS + 60_000),
        "non-ascii": {signatures.TIMESTAMP_HEADER: str(now),
                      signatures.HEADER: b"sha256=\xe9\xe9"},
    }[header]
    with httpx.Client(trust_env=False) as http:
        response = http.post(server.http + "/api/operator/sessions", content=body,
                             headers=headers)
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "invalid_signature"


@pytest.mark.parametrize(("body", "code"), [
    ({"player_id": "hold:t1.1.1", "name": "x", "currency": "THB"}, "bad_player_id"),
    ({"player_id": "house", "name": "x", "currency": "THB"}, "bad_player_id"),
    ({"player_id": "g_abc", "name": "x", "currency": "THB"}, "bad_player_id"),
    # a namespaced ledger id is never an operator's player id
    ({"player_id": "acme~bob", "name": "x", "currency": "THB"}, "bad_player_id"),
    ({"player_id": "bob", "name": "x", "currency": "baht"}, "bad_request"),
    ({"player_id": "bob", "name": "x", "currency": "XYZ"}, "unknown_currency"),
    ({"player_id": "bob", "name": "x", "currency": "THB", "language": "fr"}, "bad_request"),
    ({"player_id": "bob", "name": "x", "currency": "THB", "table": "t9"}, "unknown_table"),
    ({"player_id": "bob", "currency": "THB"}, "bad_request"),
])
def test_a_launch_with_a_bad_body_is_refused_with_a_reason(
        calm: tuple[OperatorServer, LiveServer], body: dict[str, Any], code: str) -> None:
    _, server = calm
    response = signed_post(server, "/api/operator/sessions",
                           {"request_id": uuid.uuid4().hex, **body})
    assert response.status_code in (400, 404)
    assert response.json()["error"]["code"] == code


def test_a_launch_body_past_16_kib_is_refused_unread(
        calm: tuple[OperatorServer, LiveServer]) -> None:
    _, server = calm
    body = b'{"player_id":"bob","name":"' + b"x" * 20_000 + b'","currency":"THB"}'
    response = signed_post(server, "/api/operator/sessions", body)
    assert response.status_code == 413


def test_a_replayed_launch_is_refused_and_each_launch_is_its_own_session(
        calm: tuple[OperatorServer, LiveServer]) -> None:
    """A captured launch is not a login: the same signed body again is 409, even sent
    within the timestamp's five minutes; a new request_id is a new session."""
    _, server = calm
    body = json.dumps(launch_body("replayed")).encode()
    at = now_ms()
    first = signed_post(server, "/api/operator/sessions", body, at=at)
    assert first.status_code == 200, first.text
    again = signed_post(server, "/api/operator/sessions", body, at=at)
    assert again.status_code == 409
    assert again.json()["error"]["code"] == "duplicate_request"
    fresh = launch(server, "replayed")
    assert fresh["session_id"] != first.json()["session_id"]
    assert fresh["token"] != first.json()["token"]


def test_a_signature_that_is_not_ascii_is_a_401_not_a_500(
        calm: tuple[OperatorServer, LiveServer]) -> None:
    """The money path's attack 7 (docs/security.md): ``X-Livetable-Signature: sha256=\\xe9\\xe9``
    reached
    ``hmac.compare_digest`` as non-ASCII text, which raises: HTTP 500."""
    _, server = calm
    with httpx.Client(trust_env=False) as http:
        response = http.post(server.http + "/api/operator/sessions", content=b"{}",
                             headers=[(signatures.TIMESTAMP_HEADER.encode(),
                                       str(now_ms()).encode()),
                                      (signatures.HEADER.encode(), b"sha256=\xe9\xe9")])
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "invalid_signature"


def test_a_body_dribbled_a_byte_at_a_time_is_cut_off(
        calm: tuple[OperatorServer, LiveServer]) -> None:
    """The money path's attack 7 (docs/security.md): a body announced as 10,000 bytes and sent a
    byte every 2 s held
    the request for ever (the head timeout covers heads only). The whole body now has
    LIVETABLE_REQUEST_BODY_TIMEOUT (2 s here) once the head is in: 408, closed."""
    _, server = calm
    with socket.create_connection(("127.0.0.1", server.port), timeout=1) as sock:
        sock.sendall(b"POST /api/operator/sessions HTTP/1.1\r\nHost: x\r\n"
                     b"Content-Type: application/json\r\nContent-Length: 10000\r\n\r\n")
        started = time.monotonic()
        answer = b""
        while time.monotonic() - started < 8 and not answer:
            try:
                sock.sendall(b"{")
                answer = sock.recv(4096)
            except TimeoutError:
                continue  # 1 s without an answer: the next byte
            except OSError:
                break  # closed under us: what the answer was is below
        took = time.monotonic() - started
    assert answer.startswith(b"HTTP/1.1 408"), (answer, took)
    assert 1.5 < took < 5, took


def test_the_wallet_report_needs_the_operators_signature(
        calm: tuple[OperatorServer, LiveServer]) -> None:
    _, server = calm
    assert signed_post(server, "/api/operator/wallet", {}, secret="wrong").status_code == 401
    assert "totals" in wallet_report(server)
    days = wallet_report(server, daily=True)["days"]
    assert all(day["operator"] == "default" for day in days)


def test_guests_are_off_with_a_seamless_wallet(calm: tuple[OperatorServer, LiveServer]
                                               ) -> None:
    _, server = calm
    with httpx.Client(trust_env=False) as http:
        assert http.post(server.http + "/api/guest").status_code == 403


def test_an_accepted_slip_sent_again_after_betting_closed_is_answered_accepted(
        calm: tuple[OperatorServer, LiveServer]) -> None:
    """A client that lost the answer of an accepted slip sends it again, exactly, after
    betting closed: it hears ``slip_accepted`` again (its bets stand), as with the internal
    wallet — not ``betting_closed``, and no second debit."""
    operator, server = calm
    session = launch(server, "resend-after-close")

    async def play() -> tuple[dict[str, Any], dict[str, Any]]:
        client = await WireClient.connect(server.ws)
        try:
            await client.hello(session["token"])
            opened = await client.expect("round_opened", timeout=30)
            bets = [("rs-1", "P1", 100), ("rs-2", "P3", 50)]
            first = await client.slip("rs-slip", opened["round_id"], bets)
            await client.expect("betting_closed", timeout=30, round_id=opened["round_id"])
            again = await client.slip("rs-slip", opened["round_id"], bets)
            return first, again
        finally:
            await client.close()

    first, again = asyncio.run(play())
    assert first["type"] == "slip_accepted", first
    assert again["type"] == "slip_accepted", again
    assert again["bets"] == first["bets"]
    debits = [c for c in operator.state()["applied"].values()
              if c["method"] == "debit" and c["player_id"] == "resend-after-close"]
    assert len(debits) == 1


def test_a_wallet_outage_shows_in_readiness_as_degraded_not_down(tmp_path: Path) -> None:
    """Every wallet call fails (HTTP 500): bets are refused, the table goes on, and
    /readyz says so — ready (the table still deals), with the wallet degraded and why."""
    with seamless_deployment(tmp_path, operator={"faults": ["*:error=1"]}) as (_, server):
        assert server.get("/readyz").json()["checks"]["wallet"] is True  # not called yet
        session = launch(server, "outage-1")

        async def bets() -> list[dict[str, Any]]:
            client = await WireClient.connect(server.ws)
            try:
                await client.hello(session["token"])
                opened = await client.expect("round_opened", timeout=30)
                return [await client.bet(f"o-{n}", opened["round_id"], "P1", 100)
                        for n in range(3)]
            finally:
                await client.close()

        answers = asyncio.run(bets())
        assert {a.get("code") for a in answers} == {"wallet_unavailable"}, answers
        ready = server.get("/readyz")
        assert ready.status_code == 200, ready.text
        wallet = ready.json()["checks"]["wallet"]
        assert isinstance(wallet, str) and wallet.startswith("degraded"), wallet
        assert "http 500" in wallet
        assert "livetable_wallet_ok 0.0" in server.get("/metrics").text


# --- the long run -------------------------------------------------------------------------


class Player:
    def __init__(self, player_id: str, token: str) -> None:
        self.id = player_id
        self.token = token
        self.client: WireClient | None = None
        self.accepted: dict[str, dict[str, Any]] = {}  # bet_id -> bet_accepted
        self.n = 0

    async def connect(self, server: LiveServer) -> None:
        self.client = await WireClient.connect(server.ws, self.id)
        await self.client.hello(self.token)

    async def bet(self, round_id: str, rng: random.Random) -> None:
        assert self.client is not None
        self.n += 1
        bet_id = f"{self.id}-{self.n}"
        spot = rng.choice(["P1", "P2", "P3", "P4", "P5", "P1_PAIR", "P3_PAIR"])
        answer = await self.client.bet(bet_id, round_id, spot, rng.choice([10, 50, 100, 250]))
        if answer["type"] == "bet_accepted":
            self.accepted[bet_id] = answer

    async def bets(self, round_id: str, count: int, rng: random.Random) -> None:
        for _ in range(count):
            await self.bet(round_id, rng)

    async def fire(self, round_id: str, rng: random.Random) -> None:
        """Send a bet and do not wait for its answer (the server is about to die)."""
        assert self.client is not None
        self.n += 1
        await self.client.send({"type": "place_bet", "bet_id": f"{self.id}-{self.n}",
                                "round_id": round_id, "spot": "P2", "amount": 100})


async def play_rounds(server: LiveServer, players: list[Player], rounds: int,
                      rng: random.Random) -> None:
    for player in players:
        await player.connect(server)
    watcher = players[0].client
    assert watcher is not None
    for _ in range(rounds):
        opened = await watcher.expect("round_opened", timeout=30)
        # players at once, each one's bets in turn (one reader per connection)
        await asyncio.gather(*(p.bets(opened["round_id"], rng.choice([1, 2]), rng)
                               for p in players))
        await watcher.expect("round_settled", timeout=30, round_id=opened["round_id"])


async def kill_mid_round(players: list[Player], kill: Callable[[], object],
                         rng: random.Random) -> None:
    """Bets fired and, while their debits are in flight, a kill -9 (``kill``)."""
    watcher = players[0].client
    assert watcher is not None
    opened = await watcher.expect("round_opened", timeout=30)
    await asyncio.gather(*(p.fire(opened["round_id"], rng) for p in players))
    await asyncio.sleep(0.15)  # debits in flight, some answered, some bets in the ledger
    kill()
    await close_all(p.client for p in players if p.client is not None)


def wait_until_closed(server: LiveServer, timeout: float = 90) -> dict[str, Any]:
    """The report once every debit is closed and every credit and rollback answered."""
    deadline = time.monotonic() + timeout
    while True:
        report = wallet_report(server)
        totals = report["totals"]
        if totals["open_debits"] == 0 and totals["undelivered"] == 0:
            return report
        if time.monotonic() > deadline:
            raise AssertionError(f"still owed after {timeout} s: {totals}")
        time.sleep(0.5)


class Outcome:
    """What a long run leaves, read from outside once nothing is owed any more."""

    def __init__(self, server: LiveServer, operator: OperatorServer,
                 players: list[Player]) -> None:
        self.report = wait_until_closed(server)
        self.books = operator.state()
        self.records = {p.id: server.get("/api/bets?limit=200", p.token).json()["bets"]
                        for p in players}
        self.rounds: dict[str, dict[str, Any]] = {}
        for bets in self.records.values():
            for b in bets:
                if b["round_id"] not in self.rounds:
                    self.rounds[b["round_id"]] = server.get(
                        f"/api/rounds/{b['round_id']}").json()
        self.initial = operator.initial_balance
        self.players = players

    @property
    def operator_won(self) -> int:
        return sum(self.initial - self.books["balances"][p.id] for p in self.players
                   if p.id in self.books["balances"])

    def check(self) -> None:
        books, report = self.books, self.report
        # the faults did happen, each kind
        assert set(books["faults"]) >= {"timeout", "error", "lost", "garbage", "slow",
                                        "duplicate"}, books["faults"]
        assert sum(len(p.accepted) for p in self.players) >= 15

        # every bet a player saw accepted is in its Bet Record; the operator's balance is
        # what the rules pay for the Bet Record's bets
        for player in self.players:
            by_id = {b["bet_id"]: b for b in self.records[player.id]}
            assert set(player.accepted) <= set(by_id), player.id
            expected = self.initial
            for b in by_id.values():
                assert b["state"] in ("settled", "refunded"), b
                if b["state"] == "settled":
                    cards = self.rounds[b["round_id"]]["cards"]
                    _, _, deducted, returned = expected_settlement(cards, b["spot"],
                                                                   b["amount"])
                    expected += returned - deducted
            assert books["balances"].get(player.id, self.initial) == expected, player.id

        # no tx_id applied twice; every applied debit closed by exactly one credit or
        # rollback
        assert books["applications"] and set(books["applications"].values()) == {1}
        applied = books["applied"]
        closed = {tx: 0 for tx, call in applied.items() if call["method"] == "debit"}
        for call in applied.values():
            if call["method"] == "credit":
                for tx in call["debit_tx_ids"]:
                    assert tx in closed, f"credit {call['tx_id']} closes an unapplied debit"
                    closed[tx] += 1
            elif call["method"] == "rollback" and call["debit_tx_id"] in closed:
                closed[call["debit_tx_id"]] += 1
        assert closed and set(closed.values()) == {1}, {t: n for t, n in closed.items()
                                                        if n != 1}

        # livetable's side: nothing owed, and its totals are the operator's
        totals = report["totals"]
        assert totals["open_debits"] == totals["undelivered"] == 0
        assert totals["rollbacks"] > 0 and totals["credits"] > 0
        assert totals["net"] == self.operator_won


def test_many_rounds_with_faults_and_a_kill_9_leave_no_money_in_doubt(
        tmp_path: Path) -> None:
    rng = random.Random(12)
    operator = OperatorServer(tmp_path / "operator", faults=FAULTS, seed=12, hang=1.2).start()
    server = LiveServer(tmp_path / "livetable", reveal_interval=QUICK_REVEALS, env=seamless_env(
        operator, LIVETABLE_WALLET_TIMEOUT="0.6", LIVETABLE_WALLET_RETRY_MAX="1",
        LIVETABLE_AUDIT_INTERVAL="1"))
    try:
        server.start()
        players = [Player(pid, launch(server, pid)["token"]) for pid in PLAYERS]

        async def run() -> None:
            await play_rounds(server, players, 5, rng)
            await kill_mid_round(players, server.kill, rng)
            server.start()
            await play_rounds(server, players, 5, rng)
            await close_all(p.client for p in players if p.client is not None)

        asyncio.run(run())
        outcome = Outcome(server, operator, players)
        ready = server.get("/readyz").json()
    finally:
        server.stop()
        operator.stop()
    outcome.check()
    assert ready["checks"]["ledger"] is True, ready
    db = sqlite3.connect(tmp_path / "livetable" / "livetable.sqlite3")
    balances = dict(db.execute("SELECT id, balance FROM accounts WHERE kind = 'player'"))
    assert balances == dict.fromkeys(PLAYERS, 0)  # livetable holds none of their money
    house, external = (db.execute("SELECT balance FROM accounts WHERE id = ?",
                                  (a,)).fetchone()[0] for a in ("house", "external"))
    assert house == outcome.operator_won and external == -outcome.operator_won


@pytest.mark.redis
def test_an_engine_failover_in_scale_out_leaves_no_money_in_doubt(tmp_path: Path) -> None:
    """Scale-out: the wallet log and outbox in PostgreSQL beside the ledger, Redis the bus,
    two engines, one gateway; the engine
    holding the table is killed mid-round and the standby finishes its work."""
    rng = random.Random(5)
    operator = OperatorServer(tmp_path / "operator", faults=FAULTS, seed=5, hang=1.2).start()

    async def run() -> tuple[Outcome, Any, dict[str, int]]:
        env = seamless_env(operator, LIVETABLE_WALLET_TIMEOUT="0.6",
                           LIVETABLE_WALLET_RETRY_MAX="1")
        async with running(tmp_path / "cluster", engines=2, gateways=1, env=env,
                           reveal_interval=QUICK_REVEALS) as deployment:
            gateway = deployment.gateways[0]
            players = [Player(pid, launch(gateway, pid)["token"]) for pid in PLAYERS]
            await play_rounds(gateway, players, 4, rng)
            holder = await deployment.holder()
            assert holder is not None
            await kill_mid_round(players, holder.kill, rng)
            await play_rounds(gateway, players, 4, rng)
            await close_all(p.client for p in players if p.client is not None)
            outcome = await asyncio.to_thread(Outcome, gateway, operator, players)
            audit = await deployment.audit()
            store = PostgresStore(deployment.postgres_url, max_connections=1)
            try:
                ledger = {p: (await store.player(p)) for p in PLAYERS}
            finally:
                await store.close()
            return outcome, audit, {p: v.balance for p, v in ledger.items() if v is not None}

    try:
        outcome, audit, balances = asyncio.run(run())
    finally:
        operator.stop()
    outcome.check()
    assert audit.ok, audit.problems
    assert balances == dict.fromkeys(PLAYERS, 0)
    assert audit.house == outcome.operator_won
