"""Capture real protocol v1 frames from running livetable servers (for docs/protocol.md).

    .venv/bin/python docs/tools/capture_frames.py --out /tmp/frames.json
    .venv/bin/python docs/tools/capture_frames.py --show /tmp/frames.json dealer resume_true

It starts three throw-away servers, each on a free port with its own temporary data directory:

* **auto** — ``livetable serve --betting-seconds 3 --reveal-interval 0.3`` (the server deals),
  with ``LIVETABLE_PLAYER_BALANCE=50000`` so that an operator player token has money;
* **manual** — the same with ``--mode manual``: a dealer console drives a scripted round
  whose cards are chosen to show the interesting cases (a pair at 8 points against a Banker
  value 6, an AK Flush, a tie, a loss to a Banker with a special pattern), dealt while
  betting is open with one mis-scan voided by a supervisor's approval, then a cancelled
  round, an impossible card, the cut card and a switch to auto mode;
* **streams** — ``--tables 2 --mode manual --stream t1=/live/t1/index.m3u8``: one
  ``GET /api/tables``, a table with live video and one without.

Tokens are minted with ``livetable token --data-dir <that directory>``. Every frame sent and
received is recorded, per scenario, as a transcript::

    {"scenario": {"server": "auto", "note": "...", "transcript": [
        {"send": {...}}, {"recv": {...}}, {"closed": {"code": 4001, "reason": ""}},
        {"http": {"method": "GET", "path": "/api/tables", "status": 200, "body": {...}}}]}}

Nothing here is invented: docs/protocol.md pastes (and shortens) these frames, and
docs/tools/check_examples.py checks that every example there is in the capture. Times, ids,
tokens and the auto table's cards differ from run to run; the manual round's cards do not.
A scenario of a later capture may sit beside the first in docs/tools/frames.json, under a
key with its date (``dealer_2026_12_01``: events added after the first capture), so that
new examples can be pasted without re-pasting every old one.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

ROOT = Path(__file__).resolve().parents[2]
LIVETABLE = ROOT / ".venv" / "bin" / "livetable"
TABLE = "t1"

Frame = dict[str, Any]
Predicate = Callable[[Frame], bool]

CAPTURE: dict[str, dict[str, Any]] = {}


def log(message: str) -> None:
    print(f"[capture {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def scenario(name: str, server: str, note: str) -> list[dict[str, Any]]:
    """A new named transcript (a list that connections and HTTP calls append to)."""
    transcript: list[dict[str, Any]] = []
    CAPTURE[name] = {"server": server, "note": note, "transcript": transcript}
    return transcript


def is_type(*types: str) -> Predicate:
    return lambda frame: frame.get("type") in types


# --- servers ------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    """One ``livetable serve`` subprocess with a temporary data directory."""

    def __init__(self, label: str, *flags: str, env: dict[str, str] | None = None) -> None:
        self.label = label
        self.port = free_port()
        self.tmp = tempfile.TemporaryDirectory(prefix=f"livetable-capture-{label}-")
        self.data_dir = self.tmp.name
        self.flags = flags
        self.env = {**os.environ, **(env or {})}
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def http(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def ws(self) -> str:
        return f"ws://127.0.0.1:{self.port}"

    def start(self) -> None:
        cmd = [str(LIVETABLE), "serve", "--port", str(self.port), "--data-dir", self.data_dir,
               "--log-level", "warning", *self.flags]
        log(f"{self.label}: {' '.join(cmd[1:])}")
        self.log_file = (Path(self.data_dir) / "server.log").open("wb")
        self.proc = subprocess.Popen(cmd, env=self.env, stdout=subprocess.DEVNULL,
                                     stderr=self.log_file)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(self.http + "/healthz", timeout=1):
                    return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError(f"{self.label} server did not start")

    def token(self, *args: str) -> str:
        out = subprocess.run([str(LIVETABLE), "token", "--data-dir", self.data_dir, *args],
                             check=True, capture_output=True, text=True, env=self.env)
        return out.stdout.strip()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc is not None:
            self.log_file.close()
            if self.proc.returncode not in (0, -signal.SIGINT):
                log(f"{self.label}: exit {self.proc.returncode}; log:\n"
                    + (Path(self.data_dir) / "server.log").read_text()[-3000:])
        self.tmp.cleanup()


def _http(server: Server, method: str, path: str, token: str | None,
          body: bytes | None) -> tuple[int, str, str]:
    request = urllib.request.Request(server.http + path, method=method, data=body)
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return (response.status, response.headers.get("content-type", ""),
                    response.read().decode())
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers.get("content-type", ""), exc.read().decode()


async def http(transcript: list[dict[str, Any]] | None, server: Server, method: str,
               path: str, token: str | None = None) -> Any:
    """One HTTP call, recorded (the body as JSON when it is JSON, else as text)."""
    body = b"" if method == "POST" else None
    status, ctype, text = await asyncio.to_thread(_http, server, method, path, token, body)
    parsed: Any = json.loads(text) if "json" in ctype else text
    if transcript is not None:
        entry: dict[str, Any] = {"method": method, "path": path, "status": status,
                                 "content_type": ctype, "body": parsed}
        if token is not None:
            entry["authorization"] = "Bearer <token>"
        transcript.append({"http": entry})
    return parsed


async def wait_http(server: Server, path: str, ok: Callable[[Any], bool],
                    timeout: float = 60) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(Exception):
            data = await http(None, server, "GET", path)
            if ok(data):
                return data
        await asyncio.sleep(0.05)
    raise TimeoutError(f"GET {path}: condition not met in {timeout} s")


# --- websocket connections ----------------------------------------------------------------


class Conn:
    """A websocket whose every frame is recorded into a transcript, with a reader task.

    :meth:`expect` scans the received frames from a cursor (it moves past what it returns),
    so an event that arrived before the ack of the command that caused it is still found;
    :meth:`answer` looks only at frames after its own send and leaves the cursor alone.
    """

    def __init__(self, ws: ClientConnection, transcript: list[dict[str, Any]]) -> None:
        self.ws = ws
        self.transcript = transcript
        self.received: list[Frame] = []
        self.cursor = 0
        self.arrived = asyncio.Event()
        self.last_event: tuple[int, int] | None = None  # (epoch, seq) of the last table event
        self.close_code: int | None = None
        self.done = False
        self.pace = 0.0  # seconds between sends: stay under the server's frame rate
        self.sent_at = 0.0
        self.reader = asyncio.create_task(self._read())

    @classmethod
    async def open(cls, server: Server, path: str, transcript: list[dict[str, Any]],
                   **kwargs: Any) -> Conn:
        ws = await connect(server.ws + path, **kwargs)
        return cls(ws, transcript)

    async def _read(self) -> None:
        try:
            async for message in self.ws:
                frame = json.loads(message)
                self.transcript.append({"recv": frame})
                self.received.append(frame)
                if "seq" in frame and "table" in frame and frame.get("type") != "welcome":
                    self.last_event = (frame["epoch"], frame["seq"])
                self.arrived.set()
        except ConnectionClosed:
            pass
        self.close_code = self.ws.close_code
        self.transcript.append({"closed": {"code": self.ws.close_code,
                                           "reason": self.ws.close_reason or ""}})
        self.done = True
        self.arrived.set()

    async def send(self, frame: Frame | str | bytes, record: bool = True) -> None:
        if self.pace:
            await asyncio.sleep(max(0.0, self.sent_at + self.pace - time.monotonic()))
            self.sent_at = time.monotonic()
        if record:
            if isinstance(frame, dict):
                self.transcript.append({"send": frame})
            elif isinstance(frame, bytes):
                self.transcript.append({"send_binary": frame.decode(errors="replace")})
            else:
                self.transcript.append({"send_raw": frame if len(frame) < 200 else
                                        f"<{len(frame)} characters>"})
        await self.ws.send(frame if not isinstance(frame, dict) else json.dumps(frame))

    async def _find(self, predicate: Predicate, start: int, timeout: float) -> int:
        deadline = time.monotonic() + timeout
        i = start
        while True:
            while i < len(self.received):
                if predicate(self.received[i]):
                    return i
                i += 1
            if self.done:
                raise ConnectionError(f"closed ({self.close_code}) before a matching frame")
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no matching frame")
            self.arrived.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.arrived.wait(), left)

    async def expect(self, predicate: Predicate, timeout: float = 30) -> Frame:
        """The next matching frame from the cursor on."""
        i = await self._find(predicate, self.cursor, timeout)
        self.cursor = i + 1
        return self.received[i]

    async def answer(self, frame: Frame) -> Frame:
        """Send a command; its direct answer (bet_*, ack, error, bets, pong)."""
        mark = len(self.received)
        await self.send(frame)
        i = await self._find(is_type("bet_accepted", "bet_rejected", "slip_accepted",
                                     "slip_rejected", "ack", "error", "bets", "pong"), mark, 30)
        return self.received[i]

    async def drain(self, seconds: float) -> list[Frame]:
        """Every frame that arrives within ``seconds``."""
        mark = len(self.received)
        await asyncio.sleep(seconds)
        self.cursor = len(self.received)
        return self.received[mark:]

    async def closed(self, timeout: float = 10) -> int | None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(self.reader), timeout)
        return self.close_code

    async def close(self) -> None:
        await self.ws.close()
        await self.closed()


async def hello(server: Server, transcript: list[dict[str, Any]], token: str | None = None,
                path: str = "/ws", **extra: Any) -> tuple[Conn, Frame]:
    conn = await Conn.open(server, path, transcript)
    frame: Frame = {"type": "hello", "v": 1, "table": TABLE}
    if token is not None:
        frame["token"] = token
    frame.update(extra)
    await conn.send(frame)
    welcome = await conn.expect(is_type("welcome", "error"))
    return conn, welcome



def bet(bet_id: str, round_id: str, spot: str, amount: Any) -> Frame:
    return {"type": "place_bet", "bet_id": bet_id, "round_id": round_id, "spot": spot,
            "amount": amount}


async def open_round(conn: Conn, min_left_ms: int = 2000) -> Frame:
    """Wait for a round_opened that leaves at least ``min_left_ms`` of betting."""
    while True:
        opened = await conn.expect(is_type("round_opened"), 60)
        if opened["closes_at"] - int(time.time() * 1000) >= min_left_ms:
            return opened


# --- the auto table -----------------------------------------------------------------------


async def auto_http(server: Server, guest_token: str, dealer_token: str,
                    settled_round: str) -> None:
    t = scenario("http_auto", "auto", "HTTP API of the auto server")
    await http(t, server, "GET", "/api/tables")
    await http(t, server, "GET", f"/api/tables/{TABLE}")
    await http(t, server, "GET", "/api/tables/nope")
    await http(t, server, "GET", f"/api/tables/{TABLE}/roadmap")
    await http(t, server, "GET", f"/api/rounds/{settled_round}")
    await http(t, server, "GET", "/api/rounds/t1.99.99")
    await http(t, server, "GET", "/api/bets?limit=2", guest_token)
    await http(t, server, "GET", "/api/bets")
    await http(t, server, "GET", "/api/bets", "not-a-token")
    await http(t, server, "GET", "/api/bets", dealer_token)
    await http(t, server, "GET", "/api/bets?limit=x", guest_token)
    await http(t, server, "GET", "/healthz")
    await http(t, server, "GET", "/readyz")
    await http(t, server, "GET", "/metrics")


async def player_round(server: Server, token: str) -> tuple[str, str, int]:
    """Guest A: a full round with bets (accepted, idempotent, rejected), then settlement."""
    t = scenario("player_round", "auto", "guest A: welcome, one full round, bets, settlement")
    conn, _ = await hello(server, t, token)
    opened = await open_round(conn)
    rid = opened["round_id"]
    await conn.answer(bet("a-1", rid, "P1", 100))
    await conn.answer(bet("a-2", rid, "P1_PAIR", 50))
    await conn.answer(bet("a-1", rid, "P1", 100))  # the same bet again: idempotent
    await conn.answer(bet("a-1", rid, "P1", 200))  # the same bet_id, another bet
    await conn.answer(bet("a-3", rid, "P2", 5))
    await conn.answer(bet("a-4", rid, "P2", 6000))
    await conn.answer(bet("a-5", rid, "P6", 100))
    await conn.answer(bet("a-6", rid, "P2", 0))
    await conn.answer(bet("", rid, "P2", 100))
    await conn.answer(bet("a-7", "t1.99.99", "P2", 100))
    await conn.answer(bet("a-8", rid, "P2", 1.5))
    await conn.expect(is_type("betting_closed"))
    await conn.answer(bet("a-9", rid, "P2", 100))
    await conn.expect(is_type("round_settled"))
    await conn.expect(lambda f: f.get("type") == "bet_settled" and f["bet_id"] == "a-2")
    page = await conn.answer({"type": "get_bets", "limit": 1})
    await conn.answer({"type": "get_bets", "limit": 1, "before": page.get("next")})
    await conn.answer({"type": "ping", "t": 1700000000123})
    await conn.answer({"type": "ping"})
    await conn.answer({"type": "hello", "v": 1, "table": TABLE})
    # Round 2: bet, drop the connection, come back after the round settled.
    opened = await open_round(conn)
    rid2 = opened["round_id"]
    await conn.answer(bet("a-10", rid2, "P3", 100))
    await conn.answer(bet("a-11", rid2, "P3_PAIR", 10))
    assert conn.last_event is not None
    _, seq = conn.last_event
    await conn.close()
    return rid, rid2, seq


async def player_resume(server: Server, token: str, round_id: str, seq: int) -> None:
    await wait_http(server, f"/api/rounds/{round_id}", lambda d: "state" in d)
    tables = await http(None, server, "GET", f"/api/tables/{TABLE}")
    epoch = tables["epoch"]
    t = scenario("resume_true", "auto",
                 f"guest A comes back with resume {{epoch, seq: {seq}}} after {round_id} "
                 "settled: resumed true, the missed events, its bet_settled, then live events")
    conn, _ = await hello(server, t, token, resume={"epoch": epoch, "seq": seq})
    await conn.expect(is_type("round_opened"), 60)
    await conn.close()
    t = scenario("resume_false", "auto",
                 "guest A resumes from an epoch the server does not have: resumed false, the "
                 "snapshot, then its latest results at this table")
    conn, _ = await hello(server, t, token, resume={"epoch": 1, "seq": 5})
    await conn.drain(0.5)
    await conn.close()
    t = scenario("resume_viewer", "auto", "an anonymous viewer resumes a few events back")
    head = (await http(None, server, "GET", f"/api/tables/{TABLE}"))["seq"]
    conn, _ = await hello(server, t, None, resume={"epoch": epoch, "seq": max(0, head - 2)})
    await conn.drain(0.3)
    await conn.close()


async def limits_and_funds(server: Server, alice: str, guest_b: str) -> None:
    t = scenario("round_limit", "auto", "operator player alice (funded by "
                 "LIVETABLE_PLAYER_BALANCE=50000) reaches the per-round limit")
    conn, _ = await hello(server, t, alice)
    rid = (await open_round(conn))["round_id"]
    await conn.answer(bet("al-1", rid, "P1", 5000))
    await conn.answer(bet("al-2", rid, "P2", 5000))
    await conn.answer(bet("al-3", rid, "P3", 10))
    await conn.close()
    t = scenario("insufficient_funds", "auto", "guest B spends its whole demo balance")
    conn, _ = await hello(server, t, guest_b)
    rid = (await open_round(conn))["round_id"]
    await conn.answer(bet("b-1", rid, "P4", 5000))
    await conn.answer(bet("b-2", rid, "P5", 10))
    await conn.close()


def slip(slip_id: str, round_id: str, *bets: tuple[str, str, Any]) -> Frame:
    return {"type": "place_bets", "slip_id": slip_id, "round_id": round_id,
            "bets": [{"bet_id": b, "spot": s, "amount": a} for b, s, a in bets]}


async def slips(server: Server, guest_d: str) -> None:
    t = scenario("slips", "auto", "guest D confirms bet slips: one taken whole, the same slip "
                 "again, the same slip_id for another slip, a slip with one bad bet, a slip "
                 "after the close, a slip over the balance")
    conn, _ = await hello(server, t, guest_d)
    rid = (await open_round(conn, 2500))["round_id"]
    await conn.answer(slip("d-s1", rid, ("d-1", "P1", 100), ("d-2", "P1_PAIR", 10),
                           ("d-3", "P4", 50)))
    await conn.answer(slip("d-s1", rid, ("d-1", "P1", 100), ("d-2", "P1_PAIR", 10),
                           ("d-3", "P4", 50)))
    await conn.answer(slip("d-s1", rid, ("d-1", "P1", 200)))
    await conn.answer(slip("d-s2", rid, ("d-4", "P2", 100), ("d-5", "P3", 5)))
    await conn.answer(slip("d-s3", rid, ("d-6", "P2", 5000), ("d-7", "P3", 5000)))
    await conn.expect(is_type("betting_closed"))
    await conn.answer(slip("d-s4", rid, ("d-8", "P2", 100)))
    await conn.expect(lambda f: f.get("type") == "bet_settled" and f["bet_id"] == "d-3")
    await conn.close()


async def viewer(server: Server) -> None:
    t = scenario("viewer", "auto", "an anonymous viewer: no player, cannot bet")
    conn, _ = await hello(server, t)
    await conn.answer(bet("v-1", "t1.1.1", "P1", 100))
    await conn.answer({"type": "get_bets"})
    await conn.close()


async def rate_limits(server: Server, guest_c: str) -> None:
    t = scenario("frame_rate", "auto", "60 pings sent at once on one connection: the first ~40 "
                 "(the burst) are answered, the rest get error rate_limited")
    conn, _ = await hello(server, t)
    for i in range(60):
        await conn.send({"type": "ping", "t": i}, record=i < 2)
    frames = await conn.drain(1.5)
    await conn.close()
    pongs = [f for f in frames if f["type"] == "pong"]
    limited = [f for f in frames if f.get("code") == "rate_limited"]
    CAPTURE["frame_rate"]["counts"] = {"pong": len(pongs), "rate_limited": len(limited)}
    t[4:] = [{"recv": f} for f in pongs[:2] + limited[:1]]

    t = scenario("bet_rate", "auto", "guest C bets 35 times at once on each of 3 connections "
                 "(under the per-connection burst of 40 frames): the per-player bet bucket "
                 "(burst 80) answers the rest with bet_rejected rate_limited")
    conns = [(await hello(server, t, guest_c))[0] for _ in range(3)]
    del t[2:]  # one hello and its welcome are enough
    marks = [len(c.received) for c in conns]
    await asyncio.gather(*(c.send(bet(f"c-{k}-{i}", "t1.99.99", "P1", 100), record=False)
                           for k, c in enumerate(conns) for i in range(35)))
    await asyncio.sleep(1.5)
    frames = [f for c, mark in zip(conns, marks, strict=True) for f in c.received[mark:]
              if f["type"] in ("bet_rejected", "bet_accepted", "error")]
    for c in conns:
        await c.close()
    codes: dict[str, int] = {}
    for f in frames:
        key = f"{f['type']} {f.get('code', '')}".strip()
        codes[key] = codes.get(key, 0) + 1
    CAPTURE["bet_rate"]["counts"] = codes
    limited = [f for f in frames if f["type"] == "bet_rejected" and f["code"] == "rate_limited"]
    t[2:] = [{"send": bet("c-2-34", "t1.99.99", "P1", 100)}] + [{"recv": f} for f in limited[-1:]]

async def bad_sessions(server: Server, dealer_token: str, expired: str, forged: str) -> None:
    t = scenario("hello_required", "auto", "a frame other than hello first, then a bad version")
    conn = await Conn.open(server, "/ws", t)
    await conn.send({"type": "ping", "t": 1})
    await conn.expect(is_type("error"))
    await conn.send("{not json")
    await conn.expect(is_type("error"))
    await conn.send({"type": "hello", "v": 2, "table": TABLE})
    await conn.closed()
    for name, token, table in (("unknown_table", None, "t9"), ("bad_token", "abc", TABLE),
                               ("forged_token", forged, TABLE), ("expired_token", expired, TABLE),
                               ("dealer_token_on_ws", dealer_token, TABLE)):
        t = scenario(name, "auto", f"hello: {name.replace('_', ' ')}")
        conn = await Conn.open(server, "/ws", t)
        frame: Frame = {"type": "hello", "v": 1, "table": table}
        if token is not None:
            frame["token"] = token
        await conn.send(frame)
        await conn.closed()
    t = scenario("frames", "auto", "a binary frame, a frame over 4096 characters, a bad field")
    conn, _ = await hello(server, t)
    await conn.send(b'{"type":"ping"}')
    await conn.expect(is_type("error"))
    await conn.send(json.dumps({"type": "ping", "t": 1, "pad": "x" * 5000}))
    await conn.expect(is_type("error"))
    await conn.answer({"type": "get_bets", "limit": "ten"})
    await conn.answer({"type": "dance"})
    await conn.close()
    t = scenario("frame_over_64k", "auto", "a frame over the websocket layer's 64 KiB limit")
    conn, _ = await hello(server, t)
    await conn.send(json.dumps({"type": "ping", "pad": "x" * 70_000}))
    await conn.closed()
    t = scenario("origin", "auto", "browser Origins: another site (refused), the same host "
                 "(accepted)")
    for origin in ("https://evil.example", f"http://127.0.0.1:{server.port}"):
        try:
            ws = await connect(server.ws + "/ws", origin=origin)  # type: ignore[arg-type]
            await ws.close()
            t.append({"handshake": {"origin": origin, "status": 101}})
        except InvalidStatus as exc:
            t.append({"handshake": {"origin": origin, "status": exc.response.status_code}})
    t = scenario("hello_timeout", "auto", "no hello within 5 s")
    conn = await Conn.open(server, "/ws", t)
    await conn.closed(10)


async def run_auto(server: Server) -> None:
    guest = await http(scenario("guest", "auto", "POST /api/guest"), server, "POST",
                       "/api/guest")
    guest_b = (await http(None, server, "POST", "/api/guest"))["token"]
    guest_c = (await http(None, server, "POST", "/api/guest"))["token"]
    guest_d = (await http(None, server, "POST", "/api/guest"))["token"]
    alice = server.token("--player", "alice", "--name", "Alice")
    dealer = server.token("--dealer", "--all-tables", "--player", "dealer", "--name", "Dee")
    expired = server.token("--player", "old", "--ttl", "-60")
    forged = alice[:-4] + ("AAAA" if not alice.endswith("AAAA") else "BBBB")
    token = guest["token"]
    first = asyncio.create_task(player_round(server, token))
    others = asyncio.gather(limits_and_funds(server, alice, guest_b), viewer(server),
                            bad_sessions(server, dealer, expired, forged),
                            slips(server, guest_d))
    rid, rid2, seq = await first
    await others
    await rate_limits(server, guest_c)
    await player_resume(server, token, rid2, seq)
    await auto_http(server, token, dealer, rid)
    await fair_shoe(server)
    t = scenario("shutdown", "auto", "the server stops (SIGINT) while a client is connected")
    conn, _ = await hello(server, t)
    await asyncio.sleep(0.2)
    assert server.proc is not None
    server.proc.send_signal(signal.SIGINT)
    await conn.closed(10)


async def fair_shoe(server: Server) -> None:
    """The provably fair shoe (docs/design.md §7): a shoe ends (a dealer sets the auto shoe aside
    between rounds), is revealed, served by /api/shoes and checked by verify-shoe."""
    dealer_token = server.token("--dealer", "--all-tables")
    t = scenario("fair_shoe", "auto", "a viewer watches; after a settled round the dealer "
                 "switches to manual (the auto shoe has ended: shoe_revealed), GET "
                 "/api/shoes, livetable verify-shoe, then back to auto: a new committed shoe")
    viewer_conn, welcome = await hello(server, t)
    shoe_id = welcome["table"]["shoe_id"]
    seen = welcome["table"]["shoe_commitment"]
    if shoe_id is None:  # a fresh table: its first shoe starts with the first round
        started = await viewer_conn.expect(is_type("shoe_started"), 60)
        shoe_id, seen = started["shoe_id"], started["commitment"]
    await http(t, server, "GET", f"/api/shoes/{shoe_id}")  # 404 while the shoe is in play
    d_t = scenario("fair_shoe_dealer", "auto", "the dealer ends the auto shoe and restarts it")
    d, _ = await hello(server, d_t, dealer_token, path="/ws/dealer")
    await viewer_conn.expect(is_type("round_settled"), 60)
    while True:
        answer = await d.answer({"type": "set_mode", "auto": False})
        if answer["type"] == "ack":
            break
        await viewer_conn.expect(is_type("round_settled"), 60)
    await viewer_conn.expect(is_type("shoe_revealed"))
    await http(t, server, "GET", f"/api/shoes/{shoe_id}")
    await http(t, server, "GET", "/api/shoes/t1.99")
    for args in (["--commitment", seen], []):
        out = await asyncio.to_thread(
            subprocess.run, [str(LIVETABLE), "verify-shoe", "--url", server.http, shoe_id,
                             *args], capture_output=True, text=True, env=server.env)
        t.append({"cli": {"argv": ["livetable", "verify-shoe", "--url", "http://HOST:PORT",
                                   shoe_id, *args], "exit": out.returncode,
                          "stdout": out.stdout, "stderr": out.stderr}})
    await d.answer({"type": "set_mode", "auto": True})
    await viewer_conn.expect(is_type("shoe_started"), 60)
    await viewer_conn.expect(is_type("round_opened"), 60)
    await d.close()
    await viewer_conn.close()


# --- the manual table ---------------------------------------------------------------------

#: burn, then P1 P2 P3 P4 P5 BANKER, twice.
ROUND_CARDS = ["2C", "9S", "AH", "5C", "2S", "2H", "8H", "9D", "KH", "5D", "4S", "3S", "8S"]


async def run_manual(server: Server) -> None:
    dealer_token = server.token("--dealer", "--tables", TABLE, "--player", "dealer-7",
                                "--name", "Dee")
    supervisor = server.token("--supervisor", "--tables", TABLE, "--player", "sup-1",
                              "--name", "Sue")
    elsewhere = server.token("--dealer", "--tables", "t2", "--player", "dealer-9",
                             "--name", "Dan")
    guest = (await http(None, server, "POST", "/api/guest"))["token"]
    t = scenario("heartbeat", "manual", "a viewer of a quiet table (no round yet): a heartbeat "
                 "whenever the table has sent nothing for interval_ms")
    conn, _ = await hello(server, t)
    await conn.expect(is_type("heartbeat"))
    await conn.expect(is_type("heartbeat"))
    await conn.close()
    t = scenario("dealer_refused", "manual", "/ws/dealer without a dealer token")
    conn = await Conn.open(server, "/ws/dealer", t)
    await conn.send({"type": "hello", "v": 1, "table": TABLE, "token": guest})
    await conn.closed()
    t = scenario("dealer_not_your_table", "manual", "a dealer token for t2 on table t1")
    conn = await Conn.open(server, "/ws/dealer", t)
    await conn.send({"type": "hello", "v": 1, "table": TABLE, "token": elsewhere})
    await conn.closed()

    d_t = scenario("dealer", "manual", "the dealer console: a whole manual round")
    p_t = scenario("manual_player", "manual", "a guest at the manual table")
    d, _ = await hello(server, d_t, dealer_token, path="/ws/dealer")
    d.pace = 0.07  # a dealer connection has the same frame rate limit (20/s) as any other
    p, _ = await hello(server, p_t, guest)
    await d.answer({"type": "open_betting"})
    await d.answer({"type": "start_shoe"})
    await d.answer({"type": "open_betting"})
    await d.answer({"type": "card", "card": "3D"})
    await d.expect(is_type("shoe_started"))
    await d.answer({"type": "open_betting", "betting_ms": 500})
    await d.answer({"type": "open_betting", "betting_ms": 60000})
    opened = await p.expect(is_type("round_opened"))
    rid = opened["round_id"]
    for bet_id, spot, amount in (("m-1", "P1", 100), ("m-2", "P1_PAIR", 20), ("m-3", "P2", 10),
                                 ("m-4", "P4", 30), ("m-5", "P5", 50), ("m-6", "P3_PAIR", 10)):
        await p.answer(bet(bet_id, rid, spot, amount))
    await d.answer({"type": "pause", "reason": "shoe check"})
    await p.expect(is_type("table_paused"))
    await p.answer(bet("m-7", rid, "P2", 10))
    w_t = scenario("welcome_paused", "manual", "a viewer arrives while betting is paused")
    w, _ = await hello(server, w_t)
    await w.close()
    await d.answer({"type": "resume"})
    await p.expect(is_type("table_resumed"))
    # The round is dealt face down while betting is open; P3's first card is mis-scanned
    # (a second AH) and voided with a supervisor's approval.
    await d.answer({"type": "card", "card": "ZZ"})
    for card in ROUND_CARDS[:3]:
        await d.answer({"type": "card", "card": card})
    await d.answer({"type": "card", "card": "AH"})
    await d.answer({"type": "correct_cards", "count": 1})
    await d.answer({"type": "correct_cards", "count": 1, "approval": elsewhere})
    await d.answer({"type": "correct_cards", "count": 1, "approval": supervisor})
    await p.expect(is_type("cards_voided"))
    await d.answer({"type": "round_cards"})
    for card in ROUND_CARDS[3:]:
        await d.answer({"type": "card", "card": card})
    await d.answer({"type": "card", "card": "4D"})
    await d.answer({"type": "reveal"})
    s_t = scenario("welcome_dealt", "manual", "a viewer arrives: dealt, betting still open")
    s, _ = await hello(server, s_t)
    await s.close()
    await d.answer({"type": "close_betting"})
    v_t = scenario("welcome_revealing", "manual", "a viewer arrives after three reveals")
    for _ in range(3):
        await d.answer({"type": "reveal"})
    await p.expect(lambda f: f.get("type") == "hand_revealed" and f["hand"] == "P3")
    v, _ = await hello(server, v_t)
    await v.close()
    for _ in range(3):
        await d.answer({"type": "reveal"})
    await p.expect(lambda f: f.get("type") == "bet_settled" and f["bet_id"] == "m-6")
    await d.answer({"type": "reveal"})
    await p.answer({"type": "get_bets", "limit": 3})

    # Round 2: cancelled, every bet refunded.
    await d.answer({"type": "open_betting", "betting_ms": 60000})
    rid2 = (await p.expect(is_type("round_opened")))["round_id"]
    await p.answer(bet("m-8", rid2, "P2", 100))
    await p.answer(bet("m-9", rid2, "P2_PAIR", 10))
    await d.answer({"type": "cancel_round", "reason": "dealer change"})
    await p.expect(lambda f: f.get("type") == "bet_settled" and f["bet_id"] == "m-9")

    # Round 3: a slow dealer (betting closes first), the cut card, then an impossible card
    # pauses the round; cancel it.
    await d.answer({"type": "open_betting", "betting_ms": 60000})
    await d.answer({"type": "close_betting"})
    await d.answer({"type": "card", "card": "CUT"})
    for _ in range(8):
        await d.answer({"type": "card", "card": "QS"})
    await d.answer({"type": "card", "card": "QS"})
    await d.expect(is_type("table_paused"))
    await d.answer({"type": "resume"})
    await d.answer({"type": "cancel_round", "reason": "impossible card"})
    await d.answer({"type": "round_cards"})
    await d.answer({"type": "open_betting"})
    await d.answer({"type": "ping", "t": 5})
    await d.answer({"type": "place_bet", "bet_id": "x", "round_id": rid, "spot": "P1",
                     "amount": 10})
    await d.answer({"type": "start_shoe"})
    await p.expect(is_type("shoe_shuffling"))
    await d.answer({"type": "set_mode", "auto": True})
    await d.expect(is_type("round_opened"))
    await d.answer({"type": "card", "card": "KD"})
    await d.answer({"type": "round_cards"})
    await d.close()
    await p.close()

    t = scenario("http_manual", "manual", "HTTP API of the manual server: the scripted rounds")
    await http(t, server, "GET", f"/api/rounds/{rid}")
    await http(t, server, "GET", f"/api/rounds/{rid2}")
    await http(t, server, "GET", f"/api/tables/{TABLE}/roadmap")
    await http(t, server, "GET", "/api/bets?limit=2", guest)
    guest_view = await http(None, server, "POST", "/api/guest")
    t.append({"http": {"method": "POST", "path": "/api/guest", "status": 200,
                       "body": guest_view}})


async def only_fair_shoe(out: Path) -> None:
    """Capture the fair_shoe scenarios alone and merge them into the capture at ``out``
    (its other scenarios, and the examples pasted from them, stay as they are)."""
    auto = Server("auto", "--betting-seconds", "3", "--reveal-interval", "0.3")
    try:
        auto.start()
        await fair_shoe(auto)
    finally:
        auto.stop()
    capture = json.loads(out.read_text())
    capture.update(CAPTURE)
    out.write_text(json.dumps(capture, indent=2, ensure_ascii=False) + "\n")
    log(f"merged {sorted(CAPTURE)} into {out}")


STREAMS_FLAGS = ("--tables", "2", "--mode", "manual", "--stream", "t1=/live/t1/index.m3u8")


async def run_streams(server: Server) -> None:
    t = scenario("streams", "streams", "GET /api/tables of `livetable serve "
                 + " ".join(STREAMS_FLAGS) + "`: a table with a video and one without")
    await http(t, server, "GET", "/api/tables")


async def main_async(out: Path | None) -> None:
    auto = Server("auto", "--betting-seconds", "3", "--reveal-interval", "0.3",
                  env={"LIVETABLE_PLAYER_BALANCE": "50000"})
    manual = Server("manual", "--mode", "manual")
    streams = Server("streams", *STREAMS_FLAGS)
    try:
        auto.start()
        manual.start()
        streams.start()
        await asyncio.gather(run_auto(auto), run_manual(manual), run_streams(streams))
    finally:
        auto.stop()
        manual.stop()
        streams.stop()
    text = json.dumps(CAPTURE, indent=2, ensure_ascii=False)
    if out is None:
        print(text)
    else:
        out.write_text(text + "\n")
        log(f"wrote {out} ({len(CAPTURE)} scenarios)")


def pretty(value: Any, indent: int = 0, width: int = 92) -> str:
    """JSON, indented, with any object or array that fits in the line kept on one line."""
    flat = json.dumps(value, ensure_ascii=False, separators=(", ", ": "))
    if indent + len(flat) <= width or not isinstance(value, dict | list) or not value:
        return flat
    pad = " " * (indent + 2)
    if isinstance(value, dict):
        items = [f"{pad}{json.dumps(k)}: {pretty(v, indent + 2, width)}"
                 for k, v in value.items()]
        return "{\n" + ",\n".join(items) + "\n" + " " * indent + "}"
    items = [f"{pad}{pretty(v, indent + 2, width)}" for v in value]
    return "[\n" + ",\n".join(items) + "\n" + " " * indent + "]"


def show(path: Path, names: list[str]) -> None:
    """Pretty-print scenarios of a capture file, one frame per block (for pasting)."""
    data = json.loads(path.read_text())
    for name in names or list(data):
        entry = data[name]
        print(f"### {name} ({entry['server']}): {entry['note']}")
        if "counts" in entry:
            print(f"counts: {json.dumps(entry['counts'])}")
        for item in entry["transcript"]:
            (kind, value), = item.items()
            print(f"-- {kind}")
            print(pretty(value))
        print()


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--out", type=Path, help="write the capture here (default: stdout)")
    parser.add_argument("--show", type=Path, metavar="CAPTURE",
                        help="do not capture: pretty-print scenarios of an earlier capture")
    parser.add_argument("scenarios", nargs="*", help="with --show: which (default: all)")
    parser.add_argument("--only-fair-shoe", action="store_true",
                        help="capture only the fair_shoe scenarios and merge them into --out")
    args = parser.parse_args()
    if args.only_fair_shoe:
        if args.out is None:
            parser.error("--only-fair-shoe merges into an existing capture: give --out")
        asyncio.run(only_fair_shoe(args.out))
        return 0
    if args.show is not None:
        show(args.show, args.scenarios)
        return 0
    asyncio.run(main_async(args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
