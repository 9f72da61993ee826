"""A scale-out deployment of real processes, for the scale-out tests (test_scaleout_*.py).

Everything is a process of its own on a free port, as in production, only faster:

* PostgreSQL, the money: a database of the deployment's own on the session's one server
  (tests/pg_util.py), or the caller's cluster (a test that kills PostgreSQL);
* Redis, the bus, the commands and the leases: ``redis-server`` processes of the test
  (tests/redis_util.py), never the one on 6379;
* ``livetable engine --redis URL`` processes: each holds table leases or stands by;
* ``livetable gateway --redis URL`` processes: websockets and the HTTP API (both with
  ``LIVETABLE_POSTGRES_URL``).

The livetable processes are :class:`~liveserver.LiveServer` objects (``command`` set to the
role), so they keep their port across a kill and a restart. They share one signing secret
(``LIVETABLE_SECRET``), so a token from one gateway is good on every other, as behind a
load balancer.

Clients are :class:`~liveserver.WireClient` (one connection) or :class:`Follower` (a
client that reconnects and resumes, to the same or another gateway); the checks here are
about what they received: one seq after the other, the same frame for the same seq wherever
it came from, each bet's result once. The ledger is checked from the test process
(:meth:`Deployment.audit`, :meth:`Deployment.check_event_log`).

Also here: a Redis Cluster of local nodes (:func:`start_cluster`) and a TCP proxy that can
make a subscription silent without closing it (:class:`RedisProxy`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import subprocess
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

import httpx
from liveserver import (  # type: ignore[attr-defined]  # free_port: procutil
    TABLE,
    Closed,
    LiveServer,
    WireClient,
    deducted,
    expected_settlement,
    free_port,
    livetable_command,
)
from pg_util import fresh_database
from redis.asyncio import Redis
from redis_util import RedisServer, start_redis
from timings import BETTING_SECONDS, FAST_ENV, REVEAL_INTERVAL

from livetable.store.base import AuditReport
from livetable.store.postgres import PostgresStore

Frame = dict[str, Any]
T = TypeVar("T")

SECRET = "scale-out-tests-share-this-secret"
#: Every process shares the secret, and the tests' fast profile (LiveServer's own).
#: The engines' shoe key (every engine the same; gateways never need it).
SHOE_KEY = "scale-out-test-shoe-key-0123456789abcdef"
SCALE_ENV = {"LIVETABLE_SECRET": SECRET, "LIVETABLE_SHOE_KEY": SHOE_KEY, **FAST_ENV}
#: What a guest starts with (POST /api/guest).
GUEST_BALANCE = 10_000


async def wait_for(check: Callable[[], Awaitable[T | None]], timeout: float, what: str,
                   interval: float = 0.05) -> T:
    """Poll ``check`` until it returns something other than None (or fail after timeout)."""
    deadline = time.monotonic() + timeout
    while True:
        value = await check()
        if value is not None:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        await asyncio.sleep(interval)


def knows_the_table(readyz: Frame | None) -> bool:
    """A gateway's /readyz body says ready and names table t1 among the tables it knows
    (a gateway on the bus can be ready a moment before it has heard of the table)."""
    return bool(readyz and readyz["ready"]
                and TABLE in readyz["checks"].get("tables_known", []))


class Deployment:
    """One PostgreSQL database, one Redis, N engines and M gateways for table t1, started
    and stopped together."""

    def __init__(self, root: Path, redis: RedisServer, *, engines: int = 2, gateways: int = 2,
                 betting_seconds: float = BETTING_SECONDS,
                 reveal_interval: float = REVEAL_INTERVAL,
                 env: dict[str, str] | None = None,
                 redis_urls: dict[str, str] | None = None,
                 postgres_url: str | None = None) -> None:
        """``redis_urls`` gives some processes (``gateway1``, ``engine2``...) another way to
        Redis than ``redis.url`` (a :class:`RedisProxy`). ``postgres_url``: the money's
        store (else a fresh database on the session's PostgreSQL)."""
        self.root = root
        self.redis = redis
        self.postgres_url = postgres_url or fresh_database()
        # the session's PostgreSQL is one server: opted into (a cluster given has a standby)
        single = {} if postgres_url else {"LIVETABLE_POSTGRES_REPLICATION": "none"}
        env = {**SCALE_ENV, "LIVETABLE_POSTGRES_URL": self.postgres_url, **single,
               **(env or {})}

        def process(role: str, i: int) -> LiveServer:
            url = (redis_urls or {}).get(f"{role}{i}", redis.url)
            return LiveServer(root / f"{role}{i}", command=role, env=env,
                              betting_seconds=betting_seconds, reveal_interval=reveal_interval,
                              args=["--redis", url])

        self.engines = [process("engine", i + 1) for i in range(engines)]
        self.gateways = [process("gateway", i + 1) for i in range(gateways)]
        # A pooled connection is dropped after 1 s idle: the server closes its own after 5 s
        # (uvicorn's keep-alive), and a request sent on one it is closing that moment fails
        # with "Server disconnected without sending a response".
        self.http = httpx.AsyncClient(trust_env=False, timeout=2.0,
                                      limits=httpx.Limits(keepalive_expiry=1.0))

    @property
    def processes(self) -> list[LiveServer]:
        return [*self.engines, *self.gateways]

    async def start(self) -> None:
        """All at once: a gateway that subscribes before the table exists hears of it from
        the first step its engine publishes, one that subscribes later from the store."""
        await asyncio.gather(*(asyncio.to_thread(p.start) for p in self.processes))
        await self.wait_holder()
        for gateway in self.gateways:
            await self.wait_gateway_ready(gateway)

    async def close(self) -> None:
        """Tear down (no checks any more): kill -9 is enough and quick."""
        await self.http.aclose()
        for process in self.processes:
            process.kill()

    # --- probes --------------------------------------------------------------------------

    async def readyz(self, server: LiveServer) -> Frame | None:
        """The body of GET /readyz (200 or 503); None if the process does not answer."""
        try:
            r = await self.http.get(server.http + "/readyz")
        except httpx.HTTPError:
            return None
        body: Frame = r.json()
        return body

    async def holder(self, candidates: Iterable[LiveServer] | None = None
                     ) -> LiveServer | None:
        """The engine whose /readyz lists t1 among its leases_held (None if none does)."""
        for engine in candidates if candidates is not None else self.engines:
            if engine.process is None or engine.process.poll() is not None:
                continue
            body = await self.readyz(engine)
            if body is not None and TABLE in body["checks"].get("leases_held", []):
                return engine
        return None

    async def wait_holder(self, candidates: Iterable[LiveServer] | None = None,
                          timeout: float = 10.0) -> LiveServer:
        pool = list(candidates) if candidates is not None else None
        return await wait_for(lambda: self.holder(pool), timeout, "an engine holding t1",
                              interval=0.02)

    async def wait_gateway_ready(self, gateway: LiveServer, timeout: float = 15.0) -> Frame:
        """Until the gateway's /readyz is 200 and it knows table t1."""
        async def ready() -> Frame | None:
            body = await self.readyz(gateway)
            return body if knows_the_table(body) else None
        return await wait_for(ready, timeout, f"gateway on port {gateway.port} ready")

    async def metric(self, server: LiveServer, name: str) -> float:
        """A counter or gauge from GET /metrics (0 if the process has not counted it yet)."""
        return metric_value((await self.http.get(server.http + "/metrics")).text, name)

    # --- players -------------------------------------------------------------------------

    async def guest(self, gateway: LiveServer) -> tuple[str, Frame]:
        r = await self.http.post(gateway.http + "/api/guest")
        r.raise_for_status()
        body = r.json()
        return body["token"], body["player"]

    async def bet_record(self, gateway: LiveServer, token: str) -> list[Frame]:
        r = await self.http.get(gateway.http + "/api/bets?limit=200",
                                headers={"Authorization": f"Bearer {token}"})
        r.raise_for_status()
        bets: list[Frame] = r.json()["bets"]
        return bets

    async def balance(self, gateway: LiveServer, token: str) -> int:
        """The player's balance as a fresh connection's welcome tells it."""
        client = await WireClient.connect(gateway.ws, "balance")
        try:
            welcome = await client.hello(token)
        finally:
            await client.close()
        return int(welcome["player"]["balance"])

    async def deposit(self, player: str, amount: int) -> None:
        """Money into ``player``'s account, as an operator's ops would put it there
        (``livetable deposit --postgres``, with a gateway's environment)."""
        await asyncio.to_thread(
            subprocess.run, [*livetable_command(), "deposit", "--postgres", self.postgres_url,
                             "--player", player, "--amount", str(amount),
                             "--id", f"dep-{player}"],
            check=True, capture_output=True, env={**os.environ, **self.gateways[0].env})

    async def audit(self) -> AuditReport:
        """The ledger's audit, run from the test process against the same database."""
        store = PostgresStore(self.postgres_url, max_connections=1)
        try:
            return await store.audit()
        finally:
            await store.close()

    async def event_log(self) -> list[tuple[int, int]]:
        """(epoch, seq) of every event in table t1's log, oldest first."""
        store = PostgresStore(self.postgres_url, max_connections=1)
        try:
            async with store.pool.connection() as con:
                rows = await con.fetch("SELECT epoch, seq FROM events WHERE table_id = $1 "
                                       "ORDER BY epoch, seq", TABLE)
        finally:
            await store.close()
        return [(r[0], r[1]) for r in rows]

    async def check_event_log(self) -> int:
        """The table's log holds each event once, numbered without a hole; returns its
        length. (A step whose events are not stored would leave a hole that no resume can
        bridge: clients would get a snapshot where they should get the events.)"""
        log = await self.event_log()
        assert log, "no events logged"
        epochs = {epoch for epoch, _ in log}
        assert len(epochs) == 1, epochs
        seqs = [seq for _, seq in log]
        missing = sorted(set(range(seqs[0], seqs[-1] + 1)) - set(seqs))
        assert not missing, f"the event log lacks seqs {missing}"
        assert seqs == list(range(seqs[0], seqs[0] + len(seqs))), seqs
        return len(seqs)

    async def redis_command(self, *args: str) -> Any:
        """One command on the deployment's Redis, from the test process."""
        client = Redis.from_url(self.redis.url)
        try:
            return await client.execute_command(*args)  # type: ignore[no-untyped-call]
        finally:
            await client.aclose()


def metric_value(text: str, name: str) -> float:
    """The value of an unlabelled metric in a Prometheus text page (0 if it is not there)."""
    match = re.search(rf"^{re.escape(name)} (\S+)$", text, re.MULTILINE)
    return float(match.group(1)) if match else 0.0


def redis_cli(port: int, *args: str) -> str:
    out = subprocess.run(["redis-cli", "-p", str(port), *args], capture_output=True,
                         text=True, check=True, timeout=10)
    return out.stdout.strip()


# --- what clients received -------------------------------------------------------------------


def table_events(client: WireClient) -> list[tuple[int, str]]:
    """(seq, frame text) of every table event the client received, in arrival order."""
    return [(f["seq"], text) for f, text in zip(client.frames, client.texts, strict=True)
            if "seq" in f and f.get("type") != "welcome"]


def assert_in_order(events: list[tuple[int, str]], after: int | None = None) -> None:
    """Each seq is the one before plus one (starting right after ``after`` if given)."""
    seqs = [seq for seq, _ in events]
    assert seqs, "no table events"
    first = seqs[0] if after is None else after + 1
    if seqs != list(range(first, first + len(seqs))):  # the frames around the first misstep
        at = next((i for i, s in enumerate(seqs) if s != first + i), len(seqs))
        around = [text[:300] for _, text in events[max(0, at - 2):at + 2]]
        raise AssertionError(f"{seqs}\nat {at}: {around}")


def assert_same_frames(*streams: list[tuple[int, str]]) -> int:
    """Where two streams hold the same seq they hold the same bytes; returns the overlap."""
    maps = [dict(s) for s in streams]
    common = set(maps[0]).intersection(*maps[1:])
    for seq in sorted(common):
        texts = {m[seq] for m in maps}
        assert len(texts) == 1, (seq, texts)
    return len(common)


async def place(client: WireClient, round_id: str, bets: Iterable[tuple[str, int]],
                tag: str = "b") -> list[Frame]:
    """Place bets and return the bet_accepted frames (every one must be accepted)."""
    accepted = []
    for spot, amount in bets:
        answer = await client.bet(f"{tag}-{spot}-{uuid.uuid4().hex[:8]}", round_id, spot,
                                  amount)
        assert answer["type"] == "bet_accepted", answer
        accepted.append(answer)
    return accepted


def check_settled(accepted: list[Frame], settled: dict[str, Frame],
                  hands: dict[str, list[str]]) -> int:
    """Every accepted bet settled by settle_bet on the revealed cards; returns the net."""
    net = 0
    for bet in accepted:
        outcome, odds, cost, returned = expected_settlement(hands, bet["spot"], bet["amount"])
        got = settled[bet["bet_id"]]
        assert bet["deducted"] == cost == deducted(bet["spot"], bet["amount"]), bet
        assert (got["outcome"], got["odds"], got["returned"]) == (outcome, odds, returned), (
            bet, got, hands)
        net += returned - cost
    return net


def check_refunded(accepted: list[Frame], settled: dict[str, Frame]) -> None:
    for bet in accepted:
        got = settled[bet["bet_id"]]
        assert (got["outcome"], got["returned"]) == ("refund", bet["deducted"]), (bet, got)


def settlements(client: WireClient) -> dict[str, Frame]:
    """bet_id -> the bet_settled the client received; a bet settled twice fails here."""
    out: dict[str, Frame] = {}
    for frame in client.of_type("bet_settled"):
        assert frame["bet_id"] not in out or out[frame["bet_id"]] == frame, frame
        out[frame["bet_id"]] = frame
    return out


async def record_says(deployment: Deployment, gateway: LiveServer, token: str,
                      accepted: list[Frame], state: str) -> list[Frame]:
    """The Bet Record holds each bet exactly once, in ``state`` (settled or refunded)."""
    record = await deployment.bet_record(gateway, token)
    ids = [b["bet_id"] for b in record]
    assert len(ids) == len(set(ids)), ids
    by_id = {b["bet_id"]: b for b in record}
    assert set(by_id) == {b["bet_id"] for b in accepted}, (ids, accepted)
    for bet in accepted:
        assert by_id[bet["bet_id"]]["state"] == state, by_id[bet["bet_id"]]
    return record


@contextlib.asynccontextmanager
async def running(root: Path, **settings: Any) -> AsyncIterator[Deployment]:
    """A started :class:`Deployment` on a fresh AOF Redis and a fresh database of its own;
    all killed at the end."""
    redis = start_redis(root / "redis", appendonly=True)
    deployment = Deployment(root, redis, **settings)
    try:
        await deployment.start()
        yield deployment
    finally:
        await deployment.close()
        redis.kill()


class Follower:
    """A player (or viewer) that stays at the table as a real client would: when its
    connection closes it connects again — to ``gateway``, which may be another one by
    then — with ``resume: {epoch, seq}`` of the last event it saw.

    Each connection is a :class:`WireClient`; :meth:`events` joins what they received and
    :meth:`check_in_step` proves there is no gap: a resumed connection goes on right after
    the last event of the one before, a snapshot (``resumed: false``) starts afresh.
    """

    def __init__(self, name: str, token: str | None, gateway: LiveServer) -> None:
        self.name = name
        self.token = token
        self.gateway = gateway
        self.connections: list[WireClient] = []
        self.close_codes: list[int | None] = []

    @property
    def current(self) -> WireClient:
        return self.connections[-1]

    async def connect(self, gateway: LiveServer | None = None) -> Frame:
        if gateway is not None:
            self.gateway = gateway
        point = self.current.resume_point() if self.connections else None
        if self.connections:
            if not self.current.closed.is_set():
                await self.current.close()
            self.close_codes.append(self.current.close_code)
        client = await WireClient.connect(self.gateway.ws, f"{self.name}#{len(self.connections)}")
        self.connections.append(client)
        return await client.hello(self.token, resume=point)

    async def reconnect_if_closed(self, gateway: LiveServer | None = None) -> Frame | None:
        if not self.current.closed.is_set():
            return None
        return await self.connect(gateway)

    async def expect(self, kind: str | Callable[[Frame], bool], timeout: float = 20.0,
                     **fields: Any) -> Frame:
        """The next frame of ``kind`` with ``fields``, reconnecting (and resuming) as needed;
        the frame may come live or in the replay of a resume."""
        async with asyncio.timeout(timeout):
            while True:
                try:
                    return await self.current.expect(kind, timeout=timeout, **fields)
                except Closed:
                    await self.connect()

    def events(self) -> list[tuple[int, str]]:
        return [e for c in self.connections for e in table_events(c)]

    def check_in_step(self) -> list[bool]:
        """Every connection's events follow on from the last one's (when resumed) or from
        its welcome's snapshot; returns each welcome's ``resumed``."""
        last: int | None = None
        resumed = []
        for client in self.connections:
            assert client.welcome is not None
            events = table_events(client)
            if last is not None and client.welcome["resumed"]:
                start = last
            else:
                start = client.welcome["seq"]
                assert last is None or start >= last, (self.name, last, client.welcome)
            if events:
                assert_in_order(events, after=start)
                last = events[-1][0]
            else:
                assert client.welcome["seq"] >= start
                last = client.welcome["seq"]
            resumed.append(bool(client.welcome["resumed"]))
        return resumed

    def settlements(self) -> dict[str, Frame]:
        out: dict[str, Frame] = {}
        for client in self.connections:
            for bet_id, frame in settlements(client).items():
                assert bet_id not in out or out[bet_id] == frame, (out[bet_id], frame)
                out[bet_id] = frame
        return out

    async def close(self) -> None:
        await asyncio.gather(*(c.close() for c in self.connections))


# --- a Redis Cluster -------------------------------------------------------------------------


class ClusterNode(RedisServer):
    """A ``redis-server`` with ``cluster-enabled``: its cluster bus on a free port of its
    own (``cluster-port``), its node table in its own directory."""

    def __init__(self, directory: Path, port: int, bus_port: int) -> None:
        super().__init__(directory, port)
        self.bus_port = bus_port

    def _command(self) -> list[str]:
        return [*super()._command(), "--cluster-enabled", "yes",
                "--cluster-config-file", f"nodes-{self.port}.conf",
                "--cluster-port", str(self.bus_port), "--cluster-node-timeout", "5000"]


async def start_cluster(root: Path, masters: int = 3) -> list[ClusterNode]:
    """``masters`` cluster nodes, joined by ``redis-cli --cluster create`` (no replicas);
    returns once every node says ``cluster_state:ok``."""
    nodes: list[ClusterNode] = []
    try:
        for i in range(masters):
            node = ClusterNode(root / f"node{i}", free_port(), free_port())
            nodes.append(node)
            await asyncio.to_thread(node.start)
        await asyncio.to_thread(
            subprocess.run,
            ["redis-cli", "--cluster", "create",
             *(f"127.0.0.1:{n.port}" for n in nodes), "--cluster-replicas", "0",
             "--cluster-yes"], capture_output=True, check=True, timeout=30)

        async def all_ok() -> bool | None:
            infos = [await asyncio.to_thread(redis_cli, n.port, "cluster", "info")
                     for n in nodes]
            return True if all("cluster_state:ok" in i for i in infos) else None

        await wait_for(all_ok, 20, "cluster_state:ok on every node", interval=0.1)
        return nodes
    except BaseException:
        for node in nodes:
            node.kill()
        raise


# --- a proxy that can silence a subscription -------------------------------------------------


class RedisProxy:
    """A TCP proxy in front of Redis (in the test's event loop) that can make the
    subscriptions through it silent without closing them — a half-open connection, as when
    a NAT or a firewall forgets it: nothing is closed, nothing more arrives.

    A connection counts as a subscription once it sent SUBSCRIBE (or SSUBSCRIBE).
    :meth:`silence_subscriptions` stops relaying, both ways, on every subscription open at
    that moment; later connections (a re-subscription) pass as before.
    """

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.port = 0
        self._server: asyncio.Server | None = None
        self._links: list[_Link] = []

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    async def start(self) -> RedisProxy:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for link in self._links:
            link.close()

    def silence_subscriptions(self) -> int:
        """Silence every open subscription; returns how many."""
        silenced = [link for link in self._links if link.subscribed and not link.closed]
        for link in silenced:
            link.silent = True
        return len(silenced)

    def silenced_still_open(self) -> int:
        """How many silenced connections the proxy still holds open to Redis."""
        return sum(1 for link in self._links if link.silent and not link.closed)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
                      ) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1",
                                                                 self.upstream_port)
        except OSError:
            writer.close()
            return
        link = _Link(writer, up_writer)
        self._links.append(link)
        await asyncio.gather(link.relay(reader, up_writer, sniff=True),
                             link.relay(up_reader, writer), return_exceptions=True)
        if not link.silent:  # a silenced link is left hanging, on purpose
            link.close()


class _Link:
    def __init__(self, client: asyncio.StreamWriter, upstream: asyncio.StreamWriter) -> None:
        self.client = client
        self.upstream = upstream
        self.subscribed = False
        self.silent = False
        self.closed = False

    async def relay(self, source: asyncio.StreamReader, sink: asyncio.StreamWriter,
                    sniff: bool = False) -> None:
        while not self.closed:
            data = await source.read(65536)
            if not data:
                break
            if sniff and b"SUBSCRIBE" in data.upper():
                self.subscribed = True
            if self.silent:
                continue  # swallowed: the other side hears nothing, and no close either
            sink.write(data)
            await sink.drain()
        if not self.silent:
            self.close()

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.client.close()
            self.upstream.close()
