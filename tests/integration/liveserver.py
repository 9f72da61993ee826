"""A real ``livetable serve`` in a subprocess, and real websocket clients that record
every frame they receive.

The integration tests drive the server only from outside, as any client would: HTTP with
httpx, websockets with the ``websockets`` client library. Timings are the tests' fast
profile (:mod:`timings`: a whole auto round takes about three seconds) and every wait has a
timeout, so a hang fails fast.

:class:`LiveServer` keeps its port and data directory across :meth:`LiveServer.kill` and
:meth:`LiveServer.start`, so a restart is the same server to its clients (the SQLite file
and the signing secret live in the data directory).

:class:`WireClient` reads in a background task: every frame goes to ``frames`` (the whole
history, for checks such as "no card before its reveal") and to a queue that
:meth:`WireClient.expect` consumes in order.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import httpx
from procutil import free_port, kill, stop
from timings import BETTING_SECONDS, FAST_ENV, REVEAL_INTERVAL
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from livetable.rules import BetSpot, Hand, Position, hand_of, parse_cards, settle_bet

ROOT = Path(__file__).resolve().parents[2]
TABLE = "t1"
#: Every wait of a test is bounded; a round takes ~3 s, so this is several rounds.
WAIT = 20.0

Frame = dict[str, Any]


def livetable_command() -> list[str]:
    exe = Path(sys.executable).with_name("livetable")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "livetable.cli"]


#: What a player minted by ``livetable token --player`` starts with on a server that sets
#: ``LIVETABLE_PLAYER_BALANCE`` to it (a test of the balance).
PLAYER_BALANCE = 500


class LiveServer:
    """``livetable serve`` on a free port with its own data directory.

    ``command`` runs another server command instead (``gateway`` or ``engine`` of the
    scale-out tests), with ``args`` (such as ``--redis URL``) after the usual flags.
    """

    def __init__(self, data_dir: Path, *, mode: str = "auto",
                 betting_seconds: float = BETTING_SECONDS,
                 reveal_interval: float = REVEAL_INTERVAL, env: dict[str, str] | None = None,
                 command: str = "serve", args: Iterable[str] = ()) -> None:
        self.data_dir = data_dir
        self.command = command
        self.args = list(args)
        self.port = free_port()
        self.mode = mode
        self.betting_seconds = betting_seconds
        self.reveal_interval = reveal_interval
        # the process's LIVETABLE_* are not the test's, but for the websocket transport:
        # the suite runs against either (LIVETABLE_WS_TRANSPORT=picows|uvicorn)
        self.env = {k: v for k, v in os.environ.items()
                    if not k.startswith("LIVETABLE_") or k == "LIVETABLE_WS_TRANSPORT"}
        self.env.update(FAST_ENV)
        self.env["PYTHONUNBUFFERED"] = "1"
        self.env.update(env or {})
        self.process: subprocess.Popen[bytes] | None = None
        self.starts = 0

    @property
    def http(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def ws(self) -> str:
        return f"ws://127.0.0.1:{self.port}/ws"

    @property
    def ws_dealer(self) -> str:
        return f"ws://127.0.0.1:{self.port}/ws/dealer"

    @property
    def log_path(self) -> Path:
        return self.data_dir / "server.log"

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def start(self, **overrides: Any) -> LiveServer:
        """Start (or restart) the server, and wait until its /readyz says ready;
        ``overrides`` change timings or env for this run."""
        self.launch(**overrides)
        self._wait_ready()
        return self

    def launch(self, **overrides: Any) -> LiveServer:
        """Start (or restart) the server, not waiting for it (see :meth:`start`)."""
        assert self.process is None or self.process.poll() is not None, "already running"
        self.betting_seconds = overrides.pop("betting_seconds", self.betting_seconds)
        self.reveal_interval = overrides.pop("reveal_interval", self.reveal_interval)
        self.env.update(overrides.pop("env", {}))
        assert not overrides, overrides
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.starts += 1
        cmd = [*livetable_command(), self.command, "--host", "127.0.0.1",
               "--port", str(self.port), "--data-dir", str(self.data_dir), "--mode", self.mode,
               "--betting-seconds", str(self.betting_seconds),
               "--reveal-interval", str(self.reveal_interval), "--log-level", "warning",
               *self.args]
        with self.log_path.open("ab") as log:
            log.write(f"\n=== start {self.starts}: {' '.join(cmd)}\n".encode())
            log.flush()
            self.process = subprocess.Popen(cmd, env=self.env, stdout=log,
                                            stderr=subprocess.STDOUT, cwd=str(ROOT))
        return self

    def _wait_ready(self, timeout: float = 20.0) -> None:
        assert self.process is not None
        deadline = time.monotonic() + timeout
        with httpx.Client(trust_env=False, timeout=1.0) as http:
            while True:
                if self.process.poll() is not None:
                    raise RuntimeError(f"livetable {self.command} exited with "
                                       f"{self.process.returncode}:\n{self.log()[-4000:]}")
                with contextlib.suppress(httpx.HTTPError):
                    if http.get(self.http + "/readyz").status_code == 200:
                        return
                if time.monotonic() > deadline:
                    self.kill()
                    raise RuntimeError(f"livetable {self.command} not ready in {timeout} s:\n"
                                       f"{self.log()[-4000:]}")
                time.sleep(0.05)

    def kill(self) -> None:
        """kill -9: no graceful shutdown, no last write."""
        kill(self.process)

    def stop(self) -> None:
        stop(self.process)

    def token(self, *args: str) -> str:
        """``livetable token ARGS --data-dir DIR``: signed with the server's secret."""
        out = subprocess.run([*livetable_command(), "token", *args, "--data-dir",
                              str(self.data_dir)], env=self.env, capture_output=True,
                             text=True, check=True, timeout=30)
        return out.stdout.strip()

    def player_token(self, player_id: str, name: str | None = None) -> str:
        return self.token("--player", player_id, "--name", name or player_id)

    def dealer_token(self, tables: str = TABLE, name: str = "Dee") -> str:
        """A dealer token for ``tables`` (comma-separated ids, or "*" for every table)."""
        scope = ["--all-tables"] if tables == "*" else ["--tables", tables]
        return self.token("--dealer", *scope, "--player", "dealer", "--name", name)

    def supervisor_token(self, tables: str = TABLE, name: str = "Sue") -> str:
        scope = ["--all-tables"] if tables == "*" else ["--tables", tables]
        return self.token("--supervisor", *scope, "--player", "sup-1", "--name", name)

    def guest(self) -> tuple[str, Frame]:
        with httpx.Client(trust_env=False, timeout=5.0) as http:
            r = http.post(self.http + "/api/guest")
        r.raise_for_status()
        body = r.json()
        return body["token"], body["player"]

    def get(self, path: str, token: str | None = None) -> httpx.Response:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        with httpx.Client(trust_env=False, timeout=5.0) as http:
            return http.get(self.http + path, headers=headers)


class Closed(Exception):
    """The connection closed while a test waited for a frame."""

    def __init__(self, code: int | None, skipped: list[Frame]) -> None:
        super().__init__(f"connection closed with code {code}; frames seen: "
                         f"{[f.get('type') for f in skipped][-20:]}")
        self.code = code


async def joined(url: str, name: str, token: str | None = None) -> tuple[WireClient, Frame]:
    """A connection that says hello as soon as it is upgraded — the gateway's hello timeout
    runs from the upgrade, not from when the test got round to it — and its welcome."""
    client = await WireClient.connect(url, name)
    try:
        return client, await client.hello(token)
    except BaseException:
        await client.close()
        raise


async def all_joined(*joins: tuple[str, str, str | None]) -> list[tuple[WireClient, Frame]]:
    """Connections made together, each saying hello as soon as it is upgraded (``joined``:
    connected all first, the first's hello timeout ran while the others were upgraded, over
    5 s on a loaded cluster), with their welcomes; if one fails, the others are closed."""
    made = await asyncio.gather(*(joined(url, name, token) for url, name, token in joins),
                                return_exceptions=True)
    failed = [m for m in made if isinstance(m, BaseException)]
    if failed:
        await close_all([m[0] for m in made if not isinstance(m, BaseException)])
        raise failed[0]
    return [m for m in made if not isinstance(m, BaseException)]


class WireClient:
    """One websocket connection that records every frame it receives."""

    def __init__(self, ws: ClientConnection, name: str) -> None:
        self.ws = ws
        self.name = name
        self.frames: list[Frame] = []
        self.texts: list[str] = []
        self._queue: asyncio.Queue[Frame | None] = asyncio.Queue()
        self.close_code: int | None = None
        self.closed = asyncio.Event()
        self._reader = asyncio.create_task(self._read())
        self.welcome: Frame | None = None

    @classmethod
    async def connect(cls, url: str, name: str = "client", **kwargs: Any) -> WireClient:
        async with asyncio.timeout(10):
            ws = await connect(url, proxy=None, open_timeout=5, close_timeout=2,
                               compression=None, **kwargs)
        return cls(ws, name)

    async def _read(self) -> None:
        try:
            async for message in self.ws:
                if isinstance(message, bytes):
                    frame: Frame = {"type": "<binary>", "data": message.hex()}
                    self.texts.append("")
                else:
                    frame = json.loads(message)
                    self.texts.append(message)
                self.frames.append(frame)
                self._queue.put_nowait(frame)
        except ConnectionClosed:
            pass
        finally:
            self.close_code = self.ws.close_code
            self.closed.set()
            self._queue.put_nowait(None)

    async def send(self, message: Frame | str | bytes) -> None:
        data = json.dumps(message) if isinstance(message, dict) else message
        async with asyncio.timeout(5):
            await self.ws.send(data)

    async def next(self, timeout: float = WAIT) -> Frame:
        """The next frame not yet consumed."""
        async with asyncio.timeout(timeout):
            frame = await self._queue.get()
        if frame is None:
            self._queue.put_nowait(None)  # stay closed for the next caller
            raise Closed(self.close_code, self.frames)
        return frame

    async def expect(self, kind: str | Callable[[Frame], bool], timeout: float = WAIT,
                     **fields: Any) -> Frame:
        """Consume frames until one of type ``kind`` (or matching it) with ``fields``."""
        def match(f: Frame) -> bool:
            ok = kind(f) if callable(kind) else f.get("type") == kind
            return ok and all(f.get(k) == v for k, v in fields.items())

        async with asyncio.timeout(timeout):
            while True:
                frame = await self.next(timeout)
                if match(frame):
                    return frame

    async def take_until(self, kind: str, timeout: float = WAIT, **fields: Any
                         ) -> list[Frame]:
        """Every frame consumed up to and including the first ``kind`` with ``fields``,
        heartbeats and presence counts left out (they may come between any two frames, and
        say nothing of the table's rounds)."""
        taken: list[Frame] = []
        async with asyncio.timeout(timeout):
            while True:
                frame = await self.next(timeout)
                if frame.get("type") not in ("heartbeat", "presence"):
                    taken.append(frame)
                if frame.get("type") == kind and all(frame.get(k) == v
                                                     for k, v in fields.items()):
                    return taken

    def drain(self) -> list[Frame]:
        """Every frame received but not yet consumed (without waiting)."""
        out = []
        while not self._queue.empty():
            frame = self._queue.get_nowait()
            if frame is None:
                self._queue.put_nowait(None)
                break
            out.append(frame)
        return out

    async def hello(self, token: str | None = None, resume: Frame | None = None,
                    table: str = TABLE) -> Frame:
        message: Frame = {"type": "hello", "v": 1, "table": table}
        if token is not None:
            message["token"] = token
        if resume is not None:
            message["resume"] = resume
        await self.send(message)
        self.welcome = await self.expect("welcome", timeout=10)
        return self.welcome

    async def bet(self, bet_id: str, round_id: str, spot: str, amount: int) -> Frame:
        """Place a bet and return the answer to it (bet_accepted or bet_rejected)."""
        await self.send({"type": "place_bet", "bet_id": bet_id, "round_id": round_id,
                         "spot": spot, "amount": amount})
        return await self.expect(lambda f: f.get("type") in ("bet_accepted", "bet_rejected")
                                 and f.get("bet_id") == bet_id, timeout=10)

    async def slip(self, slip_id: str, round_id: str,
                   bets: list[tuple[str, str, int]]) -> Frame:
        """Send a bet slip; return its answer (slip_accepted or slip_rejected)."""
        await self.send({"type": "place_bets", "slip_id": slip_id, "round_id": round_id,
                         "bets": [{"bet_id": b, "spot": s, "amount": a} for b, s, a in bets]})
        return await self.expect(lambda f: f.get("type") in ("slip_accepted", "slip_rejected")
                                 and f.get("slip_id") == slip_id, timeout=10)

    async def command(self, cmd: str, **fields: Any) -> Frame:
        """A dealer command; its answer (ack or error)."""
        await self.send({"type": cmd, **fields})
        return await self.expect(lambda f: f.get("type") in ("ack", "error"), timeout=10)

    async def wait_closed(self, timeout: float = 10) -> int | None:
        async with asyncio.timeout(timeout):
            await self.closed.wait()
        return self.close_code

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            async with asyncio.timeout(5):
                await self.ws.close()
        with contextlib.suppress(BaseException):
            async with asyncio.timeout(5):
                await self._reader

    def last_event(self) -> Frame:
        """The last table event received (the point to resume from)."""
        for frame in reversed(self.frames):
            if "seq" in frame and frame.get("type") != "welcome":
                return frame
        assert self.welcome is not None
        return self.welcome

    def resume_point(self) -> Frame:
        last = self.last_event()
        return {"epoch": last["epoch"], "seq": last["seq"]}

    def of_type(self, *kinds: str) -> list[Frame]:
        return [f for f in self.frames if f.get("type") in kinds]


async def close_all(clients: Iterable[WireClient]) -> None:
    await asyncio.gather(*(c.close() for c in clients))


# --- the rules, applied to what the wire showed ---------------------------------------------


def hands_from(frames: Iterable[Frame], round_id: str) -> dict[str, list[str]]:
    """The six hands of a round, from its hand_revealed frames."""
    return {f["hand"]: f["cards"] for f in frames
            if f.get("type") == "hand_revealed" and f.get("round_id") == round_id}


def expected_settlement(hands: dict[str, list[str]], spot: str, amount: int
                        ) -> tuple[str, int, int, int]:
    """(outcome, odds, deducted, returned) of a bet, by :func:`settle_bet`."""
    parsed: dict[str, Hand] = {h: hand_of(parse_cards(" ".join(c))) for h, c in hands.items()}
    bet_spot = BetSpot(spot)
    result = settle_bet(bet_spot, amount, parsed[bet_spot.position.value],
                        parsed[Position.BANKER.value])
    return result.outcome, result.odds, result.deducted, result.returned


def deducted(spot: str, amount: int) -> int:
    return amount * BetSpot(spot).deducted_multiple


HANDS = ["P1", "P2", "P3", "P4", "P5", "BANKER"]
CARD = re.compile(r"^(A|[2-9]|10|J|Q|K)[SHDC]$")


def card_strings(value: Any, path: tuple[str | int, ...] = ()
                 ) -> list[tuple[tuple[str | int, ...], str]]:
    """Every card-shaped string inside a decoded frame, with its path."""
    out: list[tuple[tuple[str | int, ...], str]] = []
    if isinstance(value, str):
        if CARD.match(value):
            out.append((path, value))
    elif isinstance(value, dict):
        for k, v in value.items():
            out += card_strings(v, (*path, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += card_strings(v, (*path, i))
    return out


def check_no_early_cards(client: WireClient, truth: dict[str, dict[str, list[str]]]) -> None:
    """Every card string ``client`` received sits where a revealed card may be.

    ``truth`` is round id → hand → cards (from ``GET /api/rounds`` after settlement).
    """
    revealed: set[tuple[str, str]] = set()
    ended_shoes: set[str] = set()  # revealed whole (shoe_revealed): no round of them follows
    in_play: str | None = None  # the round opened and not yet settled or cancelled
    for index, frame in enumerate(client.frames):
        kind = frame.get("type")
        if kind == "round_opened":
            assert frame["shoe_id"] not in ended_shoes, (client.name, index, frame)
            in_play = frame["round_id"]
        if kind in ("round_settled", "round_cancelled"):
            in_play = None
        if kind == "shoe_revealed":  # every card of an ended shoe (docs/design.md §7)
            assert in_play is None or not in_play.startswith(frame["shoe_id"] + "."), \
                (client.name, index, "a shoe revealed while its round", in_play, "is in play")
            ended_shoes.add(frame["shoe_id"])
            continue
        if kind == "card_dealt":  # face down: exactly these fields, no identity
            assert set(frame) == {"type", "table", "epoch", "seq", "round_id", "to", "n",
                                  "cards_left"}, frame  # a count, no card
        if kind == "hand_revealed":
            revealed.add((frame["round_id"], frame["hand"]))
            if frame["round_id"] in truth:
                assert frame["cards"] == truth[frame["round_id"]][frame["hand"]]
        for path, card in card_strings(frame):
            where = f"{client.name} frame {index} {kind} at {path}: {card}"
            if kind == "hand_revealed" and path[0] == "cards":
                continue
            if kind == "shoe_started" and path == ("burn_card",):
                continue  # the shoe's opening card is shown face up, and is no round's card
            if kind == "welcome" and path[:2] == ("table", "hands") and path[3] == "cards":
                snap = frame["table"]
                hand = snap["hands"][path[2]]["hand"]
                assert snap["phase"] in ("revealing", "settled", "paused", "cancelled"), where
                assert HANDS.index(hand) == path[2], where  # revealed in order, P1 first
                if snap["round_id"] in truth:
                    assert card in truth[snap["round_id"]][hand], where
                revealed.add((snap["round_id"], hand))
                continue
            if kind == "bets" and path[0] == "bets" and path[2] in ("cards", "banker_cards"):
                assert frame["bets"][path[1]]["state"] == "settled", where
                continue
            raise AssertionError(f"a card outside a reveal: {where}")
    for round_id in truth:
        assert {(round_id, h) for h in HANDS} <= revealed, (client.name, round_id)
