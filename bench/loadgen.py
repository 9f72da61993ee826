"""The load generator: worker processes, each an event loop (uvloop) of picows clients.

The parent (:class:`LoadGen`) starts ``workers`` processes and drives them with commands
over pipes; every command goes to every worker at once and each answers with a dict. A
worker's clients bind to loopback source addresses of their own, :data:`SOURCES` of them
(worker 0: 127.1.0.2, 127.2.0.2, …; worker 1: 127.1.0.3, …), a peer to one by its index, so
that tens of thousands of connections never run short of ephemeral ports. With one address
a worker, a storm's drops and the closes after it left each peer's port in TIME_WAIT for
60 s (the client closes first), and the 10,000-client storm's next reconnects searched a
port range nearly full: ``bind()`` chooses among half the range, 14,000 ports. The search
is kernel time in the load generator's process — its CPU doubled, its core saturated, and
the storm took 11–13 s instead of 7–9 (docs/benchmarks.md, the storm).

Client kinds (``kind``):

* ``livetable`` — ``/ws``: sends ``hello`` (with a token and a resume point when it has
  them), is ready at ``welcome``; checks every table event's ``seq`` (+1 each: a jump is a
  gap, a repeat a duplicate), tracks its bets by ``bet_id``.
* ``ws`` — the bare websockets server: ready at the handshake.
* ``sio`` — socket.io over engine.io v4 on a raw websocket
  (``/socket.io/?EIO=4&transport=websocket``): answers ``0{…}`` with ``40``, is ready at
  ``40{…}``, answers the server's ping ``2`` with ``3``; events arrive as ``42["name",{…}]``.

A delivery's latency is the client's wall clock when picows hands it the frame minus the
``sent_ns`` the server stamped in it.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import multiprocessing
import multiprocessing.connection
import os
import random
import threading
import time
from array import array
from typing import Any

import msgspec

from bench.common import cpu_of, raise_nofile


class Frame(msgspec.Struct):
    """The fields of any server frame the harness looks at (the rest is skipped)."""

    type: str = ""
    seq: int = 0
    epoch: int = 0
    sent_ns: int = 0
    resumed: bool = False
    bet_id: str = ""
    code: str = ""
    round_id: str = ""
    returned: int = 0
    closes_at: int | None = None


FRAME = msgspec.json.Decoder(Frame)
#: Source addresses a worker's peers are spread over (see the module docstring).
SOURCES = 8
#: How long a storm's client gives one attempt (connection, upgrade, welcome) before it
#: retries: the page's own limit (static/js/conn.js, HANDSHAKE_LIMIT_MS). With 30 s, one
#: attempt lost in a busy moment put 30 s on the storm's time: the harness measured itself.
HANDSHAKE_LIMIT = 6.0
SIO_EVENT = msgspec.json.Decoder(tuple[str, Frame])
ENCODER = msgspec.json.Encoder()
# Frames that are not table events (a heartbeat has no seq: it only keeps a quiet line timed;
# a presence frame, players online, has none either).
PRIVATE = frozenset({"welcome", "bet_accepted", "bet_rejected", "bet_settled", "bets", "pong",
                     "error", "ack", "heartbeat", "presence"})


class Peer:
    """One simulated user; it outlives its connections (a resume is a new connection)."""

    __slots__ = ("caught_up_ns", "closed", "connected_ns", "dups", "epoch", "events", "gaps", "idx",
                 "last_seq", "open_bets", "ready", "resume", "resumed", "settled", "target",
                 "token", "transport", "url", "welcome_ns")

    def __init__(self, idx: int, token: str | None, url: str = "") -> None:
        self.idx = idx
        self.token = token
        self.url = url  # its own server ("" → the worker's): players spread over gateways
        self.transport: Any = None
        self.ready: asyncio.Future[None] | None = None
        self.last_seq = 0
        self.epoch = 0
        self.gaps = 0
        self.dups = 0
        self.events = 0
        self.resume = False
        self.resumed: bool | None = None
        self.welcome_ns = 0
        self.target = 0
        self.caught_up_ns = 0
        self.settled = 0
        self.closed = False
        self.open_bets: list[str] = []
        self.connected_ns = 0


class Worker:
    def __init__(self, wid: int, src_ip: str) -> None:
        self.wid = wid
        self.src_ip = src_ip
        #: The source addresses its peers bind to, a peer to one by its index.
        self.sources = [f"127.{k}.{src_ip.split('.', 2)[2]}" for k in range(1, SOURCES + 1)]
        self.peers: list[Peer] = []
        self.kind = "livetable"
        self.url = ""
        self.table = "t1"
        self.recording = False
        self.lat_seq = array("q")
        self.lat_ns = array("q")
        self.disconnects = 0
        self.errors: dict[str, int] = {}
        # bets: bet_id → [send_ns, ack_ns, code]
        self.bets: dict[str, list[Any]] = {}
        self.bet_waiter: asyncio.Future[None] | None = None
        self.bets_open = 0
        self.settled_ns = array("q")
        self.settled_returned = 0
        self.round_settled_ns = array("q")
        self.settle_waiter: asyncio.Future[None] | None = None
        self.settle_expected = 0
        self.resume_until = 0.0  # during a storm: clients the server closes come back
        self.server_closes = 0
        self.reconnects: set[asyncio.Task[bool]] = set()

    # --- frames ---------------------------------------------------------------------

    def on_frame(self, peer: Peer, data: bytes, now: int) -> None:
        kind = self.kind
        if kind == "sio":
            if data[:2] == b"42":
                _name, frame = SIO_EVENT.decode(data[2:])
                self.table_event(peer, frame, now)
            elif data[:1] == b"2":
                peer.transport.send(TEXT, b"3")
            elif data[:2] == b"40":
                self.set_ready(peer)
            elif data[:1] == b"0":
                peer.transport.send(TEXT, b"40")
            return
        frame = FRAME.decode(data)
        if frame.type not in PRIVATE:
            self.table_event(peer, frame, now)
        elif frame.type == "welcome":
            peer.welcome_ns = now
            peer.resumed = frame.resumed
            peer.target = frame.seq
            if not (peer.resume and frame.resumed and frame.epoch == peer.epoch):
                peer.last_seq = frame.seq  # a fresh snapshot: live events follow it
            peer.epoch = frame.epoch
            if peer.last_seq >= peer.target:
                peer.caught_up_ns = now
            self.set_ready(peer)
        elif frame.type in ("bet_accepted", "bet_rejected"):
            self.answer(frame.bet_id, now,
                        "accepted" if frame.type == "bet_accepted" else frame.code)
        elif frame.type == "bet_settled":
            self.settled_ns.append(now)
            self.settled_returned += frame.returned
            peer.settled += 1
            if (len(self.settled_ns) >= self.settle_expected and self.settle_waiter
                    and not self.settle_waiter.done()):
                self.settle_waiter.set_result(None)
        elif frame.type == "error":
            self.errors[frame.code] = self.errors.get(frame.code, 0) + 1

    def answer(self, bet_id: str, now: int, code: str) -> None:
        record = self.bets.get(bet_id)
        if record is not None and record[1] == 0:
            record[1] = now
            record[2] = code
            self.bets_open -= 1
            if self.bets_open == 0 and self.bet_waiter and not self.bet_waiter.done():
                self.bet_waiter.set_result(None)

    def lost(self, peer: Peer) -> None:
        """A connection dropped: bets it sent and never got an answer for are lost to it."""
        now = time.time_ns()
        for bet_id in peer.open_bets:
            self.answer(bet_id, now, "connection_lost")
        peer.open_bets = []

    def table_event(self, peer: Peer, frame: Frame, now: int) -> None:
        seq = frame.seq
        if peer.last_seq:
            if seq > peer.last_seq + 1:
                peer.gaps += seq - peer.last_seq - 1
            elif seq <= peer.last_seq:
                peer.dups += 1
                return
        peer.last_seq = seq
        peer.events += 1
        if peer.target and not peer.caught_up_ns and seq >= peer.target:
            peer.caught_up_ns = now
        if frame.type == "round_settled":
            self.round_settled_ns.append(now)
        if self.recording and frame.sent_ns:
            self.lat_seq.append(seq)
            self.lat_ns.append(now - frame.sent_ns)

    def set_ready(self, peer: Peer) -> None:
        if peer.ready is not None and not peer.ready.done():
            peer.ready.set_result(None)

    # --- connections ----------------------------------------------------------------

    def listener(self, peer: Peer) -> Any:
        """The listener of one connection attempt of ``peer`` (its ``ready`` future now).
        A connection that completes after its attempt was given up is closed at once, and
        its frames never count: they would be the peer's frames twice."""
        worker = self
        attempt = peer.ready

        class Listener(WSListener):  # type: ignore[misc]  # picows's base class is untyped
            def on_ws_connected(self, transport: Any) -> None:
                if peer.ready is not attempt:  # given up: a later attempt is the peer's
                    transport.disconnect(graceful=False)
                    return
                peer.connected_ns = time.time_ns()
                peer.transport = transport
                peer.closed = False
                if worker.kind == "livetable":
                    hello: dict[str, Any] = {"type": "hello", "v": 1, "table": worker.table}
                    if peer.token:
                        hello["token"] = peer.token
                    if peer.resume and peer.epoch:
                        hello["resume"] = {"epoch": peer.epoch, "seq": peer.last_seq}
                    transport.send(TEXT, ENCODER.encode(hello))
                elif worker.kind == "ws":
                    worker.set_ready(peer)

            def on_ws_frame(self, transport: Any, frame: Any) -> None:
                if peer.transport is not transport:  # an attempt given up
                    return
                now = time.time_ns()
                msg_type = frame.msg_type
                if msg_type == TEXT:
                    worker.on_frame(peer, frame.get_payload_as_bytes(), now)
                elif msg_type == CLOSE:
                    code = f"close_{int(frame.get_close_code())}"
                    worker.errors[code] = worker.errors.get(code, 0) + 1
                    transport.send_close(frame.get_close_code())
                    transport.disconnect()

            def on_ws_disconnected(self, transport: Any) -> None:
                if peer.transport is transport:
                    peer.closed = True
                    worker.disconnects += 1
                    worker.lost(peer)
                    ready = peer.ready
                    if ready is not None and not ready.done():
                        # connect_peer is waiting for this one: it retries by itself
                        ready.set_exception(ConnectionError("disconnected"))
                    elif asyncio.get_running_loop().time() < worker.resume_until:
                        worker.resume_later(peer)

        return Listener

    async def connect_peer(self, peer: Peer, timeout: float,
                           until: float | None = None) -> bool:
        """Connect (and, for livetable, get ``welcome``): 3 attempts, or — with ``until``, a
        loop.time() deadline — retry with backoff until then, as a real client would."""
        loop = asyncio.get_running_loop()
        attempt = 0
        while True:
            attempt += 1
            left = timeout if until is None else min(timeout, until - loop.time())
            if left <= 0:
                return False
            peer.ready = loop.create_future()
            deadline = loop.time() + left  # one limit for the connection and its welcome
            try:
                await ws_connect(self.listener(peer), peer.url or self.url,
                                 local_addr=(self.sources[peer.idx % SOURCES], 0),
                                 websocket_handshake_timeout=left)
                await asyncio.wait_for(peer.ready, max(0.0, deadline - loop.time()))
                return True
            except Exception as exc:  # OSError, timeouts, picows's handshake errors
                name = type(exc).__name__
                self.errors[name] = self.errors.get(name, 0) + 1
                if peer.transport is not None:
                    with contextlib.suppress(Exception):
                        peer.transport.disconnect(graceful=False)
            if until is None and attempt >= 3:
                return False
            await asyncio.sleep(min(2.0, 0.1 * 2 ** attempt) * (0.5 + random.random()))

    def resume_later(self, peer: Peer) -> None:
        """The server closed a connection during a storm: come back and resume."""
        self.server_closes += 1
        task = asyncio.get_running_loop().create_task(
            self.connect_peer(peer, HANDSHAKE_LIMIT, until=self.resume_until))
        self.reconnects.add(task)
        task.add_done_callback(self.reconnects.discard)

    async def connect_all(self, peers: list[Peer], concurrency: int,
                          timeout: float) -> tuple[int, list[int]]:
        sem = asyncio.Semaphore(concurrency)
        done_ns: list[int] = []

        async def one(peer: Peer) -> bool:
            async with sem:
                ok = await self.connect_peer(peer, timeout)
                if ok:
                    done_ns.append(time.time_ns())
                return ok

        results = await asyncio.gather(*(one(p) for p in peers))
        return sum(results), done_ns

    # --- commands -------------------------------------------------------------------

    async def cmd_connect(self, kind: str, url: str, count: int, start: int,
                          tokens: list[str] | None = None, concurrency: int = 200,
                          timeout: float = 60.0, table: str = "t1",
                          urls: list[str] | None = None) -> dict[str, Any]:
        """Connect ``count`` peers (global indexes ``start``…); with ``urls``, peer i goes
        to ``urls[i % len(urls)]`` (several gateways), else every peer to ``url``."""
        self.kind, self.url, self.table = kind, url, table
        peers = [Peer(start + i, tokens[i] if tokens else None,
                      urls[(start + i) % len(urls)] if urls else "") for i in range(count)]
        self.peers.extend(peers)
        t0 = time.time_ns()
        ok, _ = await self.connect_all(peers, concurrency, timeout)
        gc.collect()
        return {"connected": ok, "failed": count - ok, "seconds": (time.time_ns() - t0) / 1e9,
                "errors": dict(self.errors)}

    async def cmd_record(self, on: bool) -> dict[str, Any]:
        self.recording = on
        if on:
            self.lat_seq = array("q")
            self.lat_ns = array("q")
        return {}

    async def cmd_collect(self) -> dict[str, Any]:
        return {"seq": self.lat_seq.tobytes(), "ns": self.lat_ns.tobytes(),
                **self.peer_stats()}

    def peer_stats(self) -> dict[str, Any]:
        live = [p for p in self.peers if not p.closed]
        return {
            "peers": len(self.peers),
            "open": len(live),
            "gaps": sum(p.gaps for p in self.peers),
            "dups": sum(p.dups for p in self.peers),
            "events": sum(p.events for p in self.peers),
            "last_seqs": sorted({p.last_seq for p in self.peers}),
            "disconnects": self.disconnects,
            "errors": dict(self.errors),
        }

    async def cmd_stats(self) -> dict[str, Any]:
        return self.peer_stats()

    async def cmd_wait_seq(self, seq: int, timeout: float) -> dict[str, Any]:
        """Wait until every open peer has seen table event ``seq``."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if all(p.last_seq >= seq for p in self.peers if not p.closed):
                break
            await asyncio.sleep(0.02)
        return self.peer_stats()

    async def cmd_storm(self, pause: float, concurrency: int, timeout: float) -> dict[str, Any]:
        """Drop every connection at once (no close handshake), then resume them all."""
        peers = self.peers
        # The client's own collector off for the storm, what it holds frozen: its full
        # collections over 5,000 peers took up to 2.6 s under load, seconds in which no
        # client of that process came back — the harness measuring itself
        gc.collect()
        gc.freeze()
        gc.disable()
        drop_ns = time.time_ns()
        for peer in peers:
            peer.resume = True
            peer.caught_up_ns = 0
            peer.target = 0
            peer.resumed = None
            old = peer.transport
            peer.transport = None  # its on_ws_disconnected is not a drop we count
            if old is not None:
                old.disconnect(graceful=False)
        await asyncio.sleep(pause)
        loop = asyncio.get_running_loop()
        self.resume_until = loop.time() + timeout
        pauses: list[float] = []  # this client's own garbage collections meanwhile
        started: list[float] = []

        def timed(phase: str, info: dict[str, int]) -> None:
            if phase == "start":
                started.append(time.perf_counter())
            elif started:
                pauses.append(time.perf_counter() - started.pop())

        gc.callbacks.append(timed)
        sem = asyncio.Semaphore(concurrency)

        async def one(peer: Peer) -> bool:
            async with sem:
                return await self.connect_peer(peer, HANDSHAKE_LIMIT, until=self.resume_until)

        try:
            ok = sum(await asyncio.gather(*(one(p) for p in peers)))
            while loop.time() < self.resume_until and not all(p.caught_up_ns for p in peers):
                await asyncio.sleep(0.02)
        finally:
            gc.enable()
            gc.unfreeze()
            gc.callbacks.remove(timed)
        return {
            "gc_pause_s": sum(pauses), "gc_longest_s": max(pauses, default=0.0),
            "drop_ns": drop_ns,
            "reconnected": ok,
            "server_closes": self.server_closes,
            "resumed_true": sum(1 for p in peers if p.resumed),
            "resumed_false": sum(1 for p in peers if p.resumed is False),
            "welcome_ns": array("q", [p.welcome_ns for p in peers]).tobytes(),
            "handshake_ns": array("q", [p.connected_ns for p in peers]).tobytes(),
            "caught_up_ns": array("q", [p.caught_up_ns for p in peers]).tobytes(),
            **self.peer_stats(),
        }

    async def cmd_bets(self, round_id: str, start_ns: int, end_ns: int, per_peer: int,
                       seed: int, timeout: float, spots: list[str],
                       amounts: list[int]) -> dict[str, Any]:
        """Each peer sends ``per_peer`` bets at random times in [start_ns, end_ns]; wait for
        every answer (accepted or rejected) or the timeout."""
        loop = asyncio.get_running_loop()
        rng = random.Random(seed)
        self.bet_waiter = loop.create_future()
        total = 0

        def fire(peer: Peer, bet_id: str, frame: bytes) -> None:
            self.bets[bet_id] = [time.time_ns(), 0, ""]
            if peer.transport is None or peer.closed:
                self.answer(bet_id, time.time_ns(), "not_sent")
                return
            peer.open_bets.append(bet_id)
            peer.transport.send(TEXT, frame)

        wall_now, loop_now = time.time_ns(), loop.time()
        for peer in self.peers:
            for k in range(per_peer):
                bet_id = f"b{self.wid}.{peer.idx}.{k}.{seed}"
                frame = ENCODER.encode({"type": "place_bet", "bet_id": bet_id,
                                        "round_id": round_id, "spot": rng.choice(spots),
                                        "amount": rng.choice(amounts)})
                at = rng.randint(start_ns, end_ns) if end_ns > start_ns else start_ns
                loop.call_at(loop_now + (at - wall_now) / 1e9, fire, peer, bet_id, frame)
                total += 1
        self.bets_open += total
        with contextlib.suppress(asyncio.TimeoutError, TimeoutError):
            await asyncio.wait_for(asyncio.shield(self.bet_waiter),
                                   timeout + max(0.0, (end_ns - time.time_ns()) / 1e9))
        codes: dict[str, int] = {}
        latencies, sent_at = array("q"), array("q")
        for send_ns, ack_ns, code in self.bets.values():
            key = code or "no_answer"
            codes[key] = codes.get(key, 0) + 1
            if ack_ns and code not in ("not_sent", "connection_lost"):
                latencies.append(ack_ns - send_ns)
                sent_at.append(send_ns)
        return {"sent": total, "codes": codes, "ack_ns": latencies.tobytes(),
                "sent_ns": sent_at.tobytes(),
                "errors": dict(self.errors)}

    async def cmd_await_settled(self, expected: int, timeout: float) -> dict[str, Any]:
        """Wait until ``expected`` bet_settled frames have arrived at this worker."""
        self.settle_expected = expected
        self.settle_waiter = asyncio.get_running_loop().create_future()
        if len(self.settled_ns) >= expected:
            self.settle_waiter.set_result(None)
        with contextlib.suppress(asyncio.TimeoutError, TimeoutError):
            await asyncio.wait_for(asyncio.shield(self.settle_waiter), timeout)
        return {"settled": len(self.settled_ns), "returned": self.settled_returned,
                "settled_ns": self.settled_ns.tobytes(),
                "round_settled_ns": self.round_settled_ns.tobytes(), **self.peer_stats()}

    async def cmd_accepted(self) -> dict[str, Any]:
        return {"accepted": sum(1 for r in self.bets.values() if r[2] == "accepted")}

    async def cmd_close(self) -> dict[str, Any]:
        self.resume_until = 0.0
        for task in list(self.reconnects):
            task.cancel()
        for peer in self.peers:
            if peer.transport is not None and not peer.closed:
                with contextlib.suppress(Exception):
                    peer.transport.disconnect(graceful=False)
        await asyncio.sleep(0.2)
        self.__init__(self.wid, self.src_ip)  # type: ignore[misc]  # a fresh worker state
        gc.collect()
        return {}


# picows is imported in the worker process only (the parent never needs it)
TEXT: Any = None
CLOSE: Any = None
WSListener: Any = object
ws_connect: Any = None


def _worker_main(conn: multiprocessing.connection.Connection, wid: int, src_ip: str) -> None:
    global TEXT, CLOSE, WSListener, ws_connect
    raise_nofile()
    import picows
    import uvloop

    TEXT, CLOSE = picows.WSMsgType.TEXT, picows.WSMsgType.CLOSE
    WSListener, ws_connect = picows.WSListener, picows.ws_connect

    async def serve() -> None:
        worker = Worker(wid, src_ip)
        loop = asyncio.get_running_loop()
        inbox: asyncio.Queue[Any] = asyncio.Queue()
        running: set[asyncio.Task[None]] = set()

        def read_commands() -> None:  # a thread: the pipe stays blocking (uvloop's
            while True:                # add_reader would make it non-blocking)
                try:
                    message = conn.recv()
                except (EOFError, OSError):
                    message = None
                loop.call_soon_threadsafe(inbox.put_nowait, message)
                if message is None or message[0] == "quit":
                    return

        threading.Thread(target=read_commands, daemon=True).start()
        while True:
            message = await inbox.get()
            if message is None or message[0] == "quit":
                break
            name, kwargs, call_id = message

            async def run(name: str, kwargs: dict[str, Any], call_id: int) -> None:
                try:
                    result = await getattr(worker, f"cmd_{name}")(**kwargs)
                    conn.send((call_id, "ok", result))
                except Exception as exc:
                    conn.send((call_id, "error", f"{type(exc).__name__}: {exc}"))

            task = loop.create_task(run(name, kwargs, call_id))
            running.add(task)
            task.add_done_callback(running.discard)

    uvloop.run(serve())


class LoadGen:
    """The parent's handle on the worker processes."""

    def __init__(self, workers: int) -> None:
        ctx = multiprocessing.get_context("spawn")
        self.conns: list[multiprocessing.connection.Connection] = []
        self.calls = 0
        self.procs: list[Any] = []
        for wid in range(workers):
            parent, child = ctx.Pipe()
            proc = ctx.Process(target=_worker_main, args=(child, wid, f"127.0.0.{2 + wid}"),
                               daemon=True, name=f"bench-loadgen-{wid}")
            proc.start()
            self.conns.append(parent)
            self.procs.append(proc)

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self.procs]

    def cpu(self) -> float:
        return cpu_of(self.pids)

    def call(self, name: str, per_worker: list[dict[str, Any]] | None = None,
             call_timeout: float = 900.0, **kwargs: Any) -> list[dict[str, Any]]:
        """Run command ``name`` on every worker at once; their answers, in worker order."""
        self.calls += 1
        call_id = self.calls
        for i, conn in enumerate(self.conns):
            conn.send((name, {**kwargs, **(per_worker[i] if per_worker else {})}, call_id))
        answers = []
        deadline = time.monotonic() + call_timeout
        for conn in self.conns:
            while True:  # an answer to an earlier call that timed out is dropped
                if not conn.poll(max(0.0, deadline - time.monotonic())):
                    raise TimeoutError(f"load generator: no answer to {name} in "
                                       f"{call_timeout:g} s")
                answer_id, status, value = conn.recv()
                if answer_id == call_id:
                    break
            if status != "ok":
                raise RuntimeError(f"load generator {name}: {value}")
            answers.append(value)
        return answers

    def split(self, n: int) -> list[tuple[int, int]]:
        """(start, count) of each worker's share of n peers."""
        w = len(self.conns)
        shares = [n // w + (1 if i < n % w else 0) for i in range(w)]
        starts = [sum(shares[:i]) for i in range(w)]
        return list(zip(starts, shares, strict=True))

    def close(self) -> None:
        for conn in self.conns:
            with contextlib.suppress(Exception):
                conn.send(("quit", {}, 0))
        for proc in self.procs:
            proc.join(timeout=5)
            if proc.is_alive():
                proc.terminate()
                proc.join(timeout=5)


def worker_count(default: int | None = None) -> int:
    return default or max(2, min(4, (os.cpu_count() or 2)))


__all__ = ["LoadGen", "worker_count"]
